//! Where a [`super::PgStore`] connects: a `postgres://` URL, completed from
//! the usual `PG*` environment variables the way libpq does (a value in the
//! URL wins over the environment).
//!
//! `sslmode` and `sslrootcert` are taken out of the URL here because
//! tokio-postgres knows only `disable`/`prefer`/`require` and verifies
//! nothing itself: certificate checks belong to our rustls connector
//! (`tls.rs`). The password is kept only inside the driver's config and in
//! [`Target::scrub`], which removes it from any message we build.

use crate::StoreError;
use crate::open::redact;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;
use tokio_postgres::config::{Config, Host};

/// How much TLS, and how much checking of the server's certificate (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it, else plain; the certificate is not checked (libpq's default).
    Prefer,
    /// TLS or nothing; the certificate is not checked unless a root certificate is named.
    Require,
    /// TLS; the certificate chain must lead to a trusted root (any host name).
    VerifyCa,
    /// TLS; the chain must lead to a trusted root and name the host.
    VerifyFull,
}

impl SslMode {
    fn parse(v: &str) -> Option<Self> {
        Some(match v {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }
}

/// A resolved connection target.
pub(crate) struct Target {
    /// The driver's configuration (host, port, user, password, database, timeouts).
    pub config: Config,
    /// TLS policy.
    pub ssl: SslMode,
    /// Root certificates (PEM) to trust instead of the webpki roots.
    pub root_cert: Option<PathBuf>,
    /// The target as it may be printed: `postgres://user@host:port/db`, never a password.
    pub shown: String,
    secret: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("shown", &self.shown).field("ssl", &self.ssl).finish_non_exhaustive()
    }
}

impl Target {
    /// `msg` with every occurrence of the password replaced by `***`: driver
    /// and server messages should never hold it, and this makes sure.
    pub fn scrub(&self, msg: &str) -> String {
        match &self.secret {
            Some(s) if !s.is_empty() => msg.replace(s.as_str(), "***"),
            _ => msg.to_string(),
        }
    }
}

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Debian's (and most distributions') socket directory, libpq's default host.
const SOCKET_DIR: &str = "/var/run/postgresql";

/// Resolve `url` with the process environment.
pub(crate) fn resolve(url: &str) -> Result<Target, StoreError> {
    resolve_with(url, &|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// Resolve `url`, reading `PG*` variables through `env`.
pub(crate) fn resolve_with(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Target, StoreError> {
    let bad = |reason: String| StoreError::Spec { spec: redact(url), reason };
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    // The driver splits the userinfo at its first `@`, which would put the
    // rest of such a password into the host name, and into messages.
    let after = base.split_once("://").map_or(base, |(_, r)| r);
    if after[..after.find('/').unwrap_or(after.len())].matches('@').count() > 1 {
        return Err(bad("the user or password holds an unencoded `@`: write it as %40".into()));
    }
    let mut kept = Vec::new();
    let (mut sslmode, mut rootcert) = (None, None);
    for p in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        match k {
            "sslmode" => sslmode = Some(decode(v).map_err(bad)?),
            "sslrootcert" => rootcert = Some(decode(v).map_err(bad)?),
            _ => kept.push(p),
        }
    }
    let base = with_env_port(base, env).map_err(bad)?;
    let rebuilt = if kept.is_empty() { base } else { format!("{base}?{}", kept.join("&")) };
    // The driver's parse errors name the option, never its value.
    let mut config = Config::from_str(&rebuilt).map_err(|e| bad(super::describe(&e)))?;
    let secret = config.get_password().map(|p| String::from_utf8_lossy(p).into_owned()).or_else(|| env("PGPASSWORD"));
    fill_from_env(&mut config, env).map_err(bad)?;
    let sslmode = sslmode.or_else(|| env("PGSSLMODE")).unwrap_or_else(|| "prefer".into());
    let ssl = SslMode::parse(&sslmode)
        .ok_or_else(|| bad(format!("sslmode `{sslmode}` is not supported (use disable, prefer, require, verify-ca or verify-full)")))?;
    let root_cert = rootcert.or_else(|| env("PGSSLROOTCERT")).filter(|r| r != "system").map(PathBuf::from);
    // libpq: `require` with a root certificate named behaves as `verify-ca`.
    let ssl = if ssl == SslMode::Require && root_cert.is_some() { SslMode::VerifyCa } else { ssl };
    config.ssl_mode(match ssl {
        SslMode::Disable => tokio_postgres::config::SslMode::Disable,
        SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
        _ => tokio_postgres::config::SslMode::Require,
    });
    let shown = shown(&config);
    Ok(Target { config, ssl, root_cert, shown, secret })
}

/// The driver gives a URL host without a port 5432; libpq gives it `PGPORT`
/// when that is set. Write `PGPORT` into such a URL's hosts.
fn with_env_port(base: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let Some((scheme, rest)) = base.split_once("://") else { return Ok(base.to_string()) };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let has_port = |h: &str| if h.starts_with('[') { h.contains("]:") } else { h.contains(':') };
    let Some(port) = env("PGPORT") else { return Ok(base.to_string()) };
    if hosts.is_empty() || hosts.split(',').any(has_port) {
        return Ok(base.to_string());
    }
    let port = port.trim();
    port.parse::<u16>().map_err(|_| format!("PGPORT `{port}` is not a port number"))?;
    let hosts: Vec<String> = hosts.split(',').map(|h| format!("{h}:{port}")).collect();
    Ok(format!("{scheme}://{userinfo}{}{path}", hosts.join(",")))
}

fn fill_from_env(config: &mut Config, env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    if config.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(hosts) => hosts.split(',').for_each(|h| {
                config.host(h.trim());
            }),
            None if std::path::Path::new(SOCKET_DIR).is_dir() => {
                config.host(SOCKET_DIR);
            }
            None => {
                config.host("localhost");
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(ports) = env("PGPORT")
    {
        for p in ports.split(',') {
            let port = p.trim().parse::<u16>().map_err(|_| format!("PGPORT `{p}` is not a port number"))?;
            config.port(port);
        }
    }
    if config.get_user().is_none()
        && let Some(u) = env("PGUSER")
    {
        config.user(u);
    }
    if config.get_password().is_none()
        && let Some(p) = env("PGPASSWORD")
    {
        config.password(p);
    }
    if config.get_dbname().is_none()
        && let Some(d) = env("PGDATABASE")
    {
        config.dbname(d);
    }
    if config.get_connect_timeout().is_none() {
        let t = match env("PGCONNECT_TIMEOUT") {
            Some(s) => Duration::from_secs(s.trim().parse::<u64>().map_err(|_| format!("PGCONNECT_TIMEOUT `{s}` is not a number of seconds"))?),
            None => DEFAULT_CONNECT_TIMEOUT,
        };
        if !t.is_zero() {
            config.connect_timeout(t);
        }
    }
    if config.get_application_name().is_none() {
        config.application_name(env("PGAPPNAME").unwrap_or_else(|| "lam".into()));
    }
    Ok(())
}

/// `postgres://user@host:port/db` for messages; `(os user)` when the driver
/// will use the operating system's user name.
fn shown(c: &Config) -> String {
    let hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(h) => h.clone(),
            Host::Unix(p) => p.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = c.get_ports().iter().map(u16::to_string).collect();
    let port = if ports.is_empty() { "5432".into() } else { ports.join(",") };
    let user = c.get_user().unwrap_or("(os user)");
    let db = c.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{}:{port}/{db}", hosts.join(","))
}

/// Percent-decoding of a query value.
fn decode(v: &str) -> Result<String, String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(hex.ok_or_else(|| "bad percent-encoding in a query parameter".to_string())?);
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a query parameter is not UTF-8 after percent-decoding".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn url_wins_over_environment() {
        let e = env(&[("PGHOST", "envhost"), ("PGPORT", "6000"), ("PGUSER", "envuser"), ("PGPASSWORD", "envpw"), ("PGDATABASE", "envdb")]);
        let t = resolve_with("postgres://u:pw@h:5433/db?sslmode=disable", &e).unwrap();
        assert_eq!(t.shown, "postgres://u@h:5433/db");
        assert_eq!(t.config.get_password(), Some(&b"pw"[..]));
        assert_eq!(t.ssl, SslMode::Disable);
        let t = resolve_with("postgres://", &e).unwrap();
        assert_eq!(t.shown, "postgres://envuser@envhost:6000/envdb");
        // A URL host without a port takes PGPORT, as with libpq.
        assert_eq!(resolve_with("postgres://u@h/db", &e).unwrap().shown, "postgres://u@h:6000/db");
        assert_eq!(resolve_with("postgres://u@[::1]/db", &e).unwrap().shown, "postgres://u@::1:6000/db");
        assert_eq!(resolve_with("postgres://u@h:7/db", &e).unwrap().shown, "postgres://u@h:7/db");
        assert_eq!(t.config.get_password(), Some(&b"envpw"[..]));
        assert_eq!(t.scrub("oops envpw leaked"), "oops *** leaked");
        let e = resolve_with("postgres://u:p@ss@h/db", &|_| None).unwrap_err().to_string();
        assert!(e.contains("%40") && !e.contains("p@ss") && !e.contains("ss@h"), "{e}");
        assert_eq!(t.ssl, SslMode::Prefer);
        assert_eq!(t.config.get_connect_timeout(), Some(&DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(t.config.get_application_name(), Some("lam"));
        // A socket directory as the host, percent-encoded.
        let sock = resolve_with("postgres://u@%2Ftmp%2Fsock/db", &env(&[])).unwrap();
        assert!(matches!(sock.config.get_hosts(), [Host::Unix(p)] if p == std::path::Path::new("/tmp/sock")), "{:?}", sock.config.get_hosts());
    }

    #[test]
    fn ssl_modes() {
        let none = env(&[]);
        for (q, want) in [
            ("sslmode=require", SslMode::Require),
            ("sslmode=verify-ca", SslMode::VerifyCa),
            ("sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem", SslMode::VerifyFull),
            ("sslmode=require&sslrootcert=/tmp/ca.pem", SslMode::VerifyCa),
            ("sslmode=require&sslrootcert=system", SslMode::Require),
        ] {
            let t = resolve_with(&format!("postgres://h/db?{q}&connect_timeout=3"), &none).unwrap();
            assert_eq!(t.ssl, want, "{q}");
            assert_eq!(t.config.get_connect_timeout(), Some(&Duration::from_secs(3)));
        }
        let t = resolve_with("postgres://h/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem", &none).unwrap();
        assert_eq!(t.root_cert.as_deref(), Some(std::path::Path::new("/tmp/ca.pem")));
        let t = resolve_with("postgres://h/db", &env(&[("PGSSLMODE", "require")])).unwrap();
        assert_eq!(t.ssl, SslMode::Require);
        let e = resolve_with("postgres://u:sekret@h/db?sslmode=allow", &none).unwrap_err().to_string();
        assert!(e.contains("sslmode `allow`") && !e.contains("sekret"), "{e}");
    }

    #[test]
    fn bad_specs_are_clear_and_secret_free() {
        let none = env(&[]);
        let e = resolve_with("postgres://u:sekret@h/db?frobnicate=1", &none).unwrap_err().to_string();
        assert!(e.contains("frobnicate") && !e.contains("sekret"), "{e}");
        let e = resolve_with("postgres://u:sekret@h:notaport/db", &none).unwrap_err().to_string();
        assert!(!e.contains("sekret"), "{e}");
        let e = resolve_with("postgres://h/db", &env(&[("PGPORT", "99999")])).unwrap_err().to_string();
        assert!(e.contains("PGPORT `99999`"), "{e}");
        let e = resolve_with("postgres://h/db?sslrootcert=%zz", &none).unwrap_err().to_string();
        assert!(e.contains("percent-encoding"), "{e}");
    }
}
