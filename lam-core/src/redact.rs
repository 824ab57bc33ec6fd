//! The one redaction rule for every URL the programs print, log or return:
//! passwords and password-like query parameters become `***`.
//!
//! ```
//! use lam_core::redact;
//! assert_eq!(redact::url("postgres://u:pw@h/db?sslmode=require&Token=t"), "postgres://u:***@h/db?sslmode=require&Token=***");
//! assert_eq!(redact::url("u:pw@h/db"), "u:***@h/db");
//! ```

/// The scheme of `s` when it is written as a URL (`scheme://...`, the
/// scheme an ASCII letter then letters, digits, `+`, `-` or `.`): the one
/// rule by which an argument that takes a file or directory refuses to take
/// a URL for one (`postgres://h/db` never becomes a directory `postgres:`).
///
/// ```
/// use lam_core::redact::url_scheme;
/// assert_eq!(url_scheme("postgres://u@h/db"), Some("postgres"));
/// assert_eq!(url_scheme("cache/x.lamemb"), None);
/// assert_eq!(url_scheme("./a://b"), None);
/// ```
pub fn url_scheme(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once("://")?;
    let mut b = scheme.bytes();
    let first = b.next()?;
    (first.is_ascii_alphabetic() && b.all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c))).then_some(scheme)
}

/// Query parameters whose values are secrets (compared case-insensitively).
pub const SECRET_PARAMS: &[&str] = &["password", "pass", "pwd", "token", "secret", "key", "api_key", "access_token", "sslpassword"];

/// `url` with its secrets masked: the password of a `user:password@`
/// userinfo (with or without a `scheme://`) becomes `user:***@`; the whole
/// userinfo of an `http(s)://` or `ws(s)://` URL without a password (a
/// token written as the user: `https://TOKEN@host`) becomes `***@`; and the
/// value of every query parameter named in [`SECRET_PARAMS`] becomes `***`.
/// Anything else is returned unchanged.
pub fn url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let web = scheme.is_some_and(|s| ["http", "https", "ws", "wss"].iter().any(|w| w.eq_ignore_ascii_case(s)));
    let rest = match rest[..auth_end].rfind('@') {
        Some(at) => format!("{}{}", mask_userinfo(&rest[..at], web), &rest[at..]),
        None => rest.to_string(),
    };
    let prefix = scheme.map(|s| format!("{s}://")).unwrap_or_default();
    format!("{prefix}{}", mask_query(&rest))
}

/// `user:password` -> `user:***`; a userinfo without a password is kept,
/// unless `token_user` (a web URL, where it is a token).
fn mask_userinfo(userinfo: &str, token_user: bool) -> String {
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None if token_user => "***".to_string(),
        None => userinfo.to_string(),
    }
}

/// Mask the values of secret parameters in the query part of `s`, if any.
fn mask_query(s: &str) -> String {
    let Some(q) = s.find('?') else { return s.to_string() };
    let (query, fragment) = match s[q + 1..].split_once('#') {
        Some((query, f)) => (query, format!("#{f}")),
        None => (&s[q + 1..], String::new()),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if is_secret_param(k) => format!("{k}=***"),
            _ => p.to_string(),
        })
        .collect();
    format!("{}?{}{fragment}", &s[..q], params.join("&"))
}

/// Whether a query parameter's name marks its value as a secret.
pub fn is_secret_param(name: &str) -> bool {
    SECRET_PARAMS.iter().any(|p| p.eq_ignore_ascii_case(name.trim()))
}

#[cfg(test)]
mod tests {
    use super::url;

    #[test]
    fn userinfo_passwords() {
        assert_eq!(url("postgres://u:pw@h:5432/db?x=1"), "postgres://u:***@h:5432/db?x=1");
        assert_eq!(url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(url("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
        assert_eq!(url("lam:secret@127.0.0.1:1/lam"), "lam:***@127.0.0.1:1/lam");
        assert_eq!(url("some/dir"), "some/dir");
        assert_eq!(url("/abs/a:b@c"), "/abs/a:b@c");
        assert_eq!(url("http://h:8080/p@x"), "http://h:8080/p@x");
        // A token written as the user of a web URL is a secret; a database user is not.
        assert_eq!(url("https://sk-abc123@api.example.com/v1"), "https://***@api.example.com/v1");
        assert_eq!(url("HTTP://tok@h"), "HTTP://***@h");
        assert_eq!(url("https://u:p@h"), "https://u:***@h");
        assert_eq!(url("postgres://lam@h/db"), "postgres://lam@h/db");
    }

    #[test]
    fn query_secrets() {
        assert_eq!(url("postgres://h/db?sslmode=require&password=x"), "postgres://h/db?sslmode=require&password=***");
        for k in ["password", "PASS", "pwd", "Token", "secret", "key", "api_key", "ACCESS_TOKEN", "sslpassword"] {
            assert_eq!(url(&format!("postgres://h/db?a=1&{k}=s3&b=2")), format!("postgres://h/db?a=1&{k}=***&b=2"));
        }
        assert_eq!(url("https://h/p?keys=1&tokenizer=x#token=y"), "https://h/p?keys=1&tokenizer=x#token=y");
        assert_eq!(url("https://u:p@h/?token=t#f"), "https://u:***@h/?token=***#f");
    }
}
