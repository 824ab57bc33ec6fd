//! `lam serve`: the OpenAI/Anthropic/Gemini-compatible proxy (`lam-serve`); this
//! module only turns flags into a `ServeConfig`.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use lam_core::Threshold;
use lam_serve::{EngineSettings, ServeConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum ObservationRole {
    /// Tool results only (`role: "tool"`, `tool_result` blocks, `function_call_output`).
    Tool,
    /// Tool results, and user turns after the task (agents that send observations as user messages).
    User,
}

/// The proxy's engine: one set of options that `lam serve`, `lam run` and
/// `lam replay` flatten, turned into one [`EngineSettings`] value.
#[derive(clap::Args)]
pub struct EngineOpts {
    /// Merge threshold t (cosine); delta = sqrt(2 - 2t).
    #[arg(long, default_value_t = Threshold::DEFAULT)]
    threshold: Threshold,
    #[command(flatten)]
    enc: crate::opts::EncoderOpts,
    /// Embedding cache (lam-embeddings/1 chunk lines), default $LAM_HOME/cache/MODEL.lamemb; or postgres://... to share it through that database.
    #[arg(long)]
    cache: Option<String>,
    /// Do not read or write the embedding cache.
    #[arg(long)]
    no_cache: bool,
    /// Encoders loaded: sessions that can admit at once (default: CPU cores, at most 4; `lam replay`, which admits one request at a time: 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    encoders: Option<u32>,
    /// Which turns are observations.
    #[arg(long, value_enum, default_value = "tool")]
    observation_role: ObservationRole,
    /// Tools whose results are forwarded verbatim (still archived), e.g. `Edit,Write` when the agent must act on their exact output.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    keep_tools: Vec<String>,
    /// How stubs name the way to get an original back: `none` (no handle), or the agent's name for `lam mcp`'s recall tool (`mcp__lam__recall`). Default: `none`, except under `lam run` for the agents it knows, which register `lam mcp`: their name for its recall tool (`mcp__lam__recall`, `lam_recall`, `mcp_lam_recall`).
    #[arg(long, value_parser = crate::opts::recall, value_name = "HANDLE")]
    recall: Option<lam_core::stub::Recall<'static>>,
    /// A hard bound on the input tokens a request forwards (cl100k): past it, the oldest tool results the model has answered become ARC citations (`§id`, the call, size, head and tail, the recall handle) until the input is at or under --budget-target. Each original stays archived, one exact recall away. `auto`: the default budget, the smaller of 100000 and a level below the agent's own compaction threshold for the request's model (docs/serve.md, "The default budget"); `off`: none. Default: `auto` for `lam run` and `lam replay`, `off` for `lam serve`.
    #[arg(long, value_name = "TOKENS|auto|off", value_parser = budget_arg)]
    budget: Option<BudgetArg>,
    /// What a cut brings the input down to (default: half of --budget, at least 1). Between cuts the prefix stays byte-stable, so the prompt cache keeps hitting. Only with --budget TOKENS.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    budget_target: Option<u64>,
    /// With a budget: the newest tool results never cited (default 3).
    #[arg(long, value_name = "N")]
    keep: Option<u32>,
}

/// `--budget TOKENS|auto|off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetArg {
    /// `--budget N`.
    Tokens(u64),
    /// `--budget auto`: [`lam_serve::DefaultBudget`].
    Auto,
    /// `--budget off`.
    Off,
}

fn budget_arg(s: &str) -> Result<BudgetArg, String> {
    match s.trim() {
        "auto" => Ok(BudgetArg::Auto),
        "off" | "none" => Ok(BudgetArg::Off),
        t => match t.parse::<u64>() {
            Ok(0) => Err("expected at least 1 token, `auto` or `off`".into()),
            Ok(n) => Ok(BudgetArg::Tokens(n)),
            Err(_) => Err(format!("`{s}`: expected a number of tokens, `auto` or `off`")),
        },
    }
}

impl EngineOpts {
    /// The engine's settings; `recall` when `--recall` is not given, `encoders` when `--encoders` is not.
    pub fn settings(&self, recall: lam_core::stub::Recall<'static>, encoders: Option<usize>) -> anyhow::Result<EngineSettings> {
        let d = EngineSettings::default();
        let encoder = self.enc.spec_or(crate::opts::WIRE_ENCODER);
        // Hashing computes an embedding faster than a cache reads it: no cache file for it.
        let cacheless = encoder.backend == lam_encode::Backend::Hashing && self.cache.is_none();
        Ok(EngineSettings {
            threshold: self.threshold,
            encoder,
            cache: crate::opts::cache_choice(&self.cache, self.no_cache || cacheless)?,
            encoders: self.encoders.map(|n| n as usize).or(encoders).unwrap_or(d.encoders),
            user_turns: self.observation_role == ObservationRole::User,
            keep_tools: self.keep_tools.clone(),
            recall: self.recall.unwrap_or(recall),
            budget: match self.budget {
                Some(BudgetArg::Tokens(b)) => Some(lam_serve::Budget::new(b, self.budget_target, self.keep).map_err(anyhow::Error::msg)?),
                _ => None,
            },
        })
    }

    /// The default budget ([`lam_serve::DefaultBudget`], per request from
    /// its model): with `--budget auto`, or with no `--budget` when
    /// `by_default` (`lam run`, `lam replay`); `None` with `--budget off`
    /// or `--budget TOKENS`.
    pub fn default_budget(&self, by_default: bool) -> Result<Option<lam_serve::DefaultBudget>> {
        let on = match self.budget {
            Some(BudgetArg::Tokens(_)) => return Ok(None),
            Some(BudgetArg::Auto) => true,
            Some(BudgetArg::Off) => false,
            None => by_default,
        };
        if self.budget_target.is_some() {
            bail!("--budget-target needs --budget TOKENS (the default budget cuts to half of itself)");
        }
        if self.keep.is_some() && !on {
            bail!("--keep needs a budget (--budget TOKENS or auto)");
        }
        Ok(on.then(|| lam_serve::DefaultBudget::new(self.keep)))
    }
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; any other address needs a token).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Upstream origin, e.g. https://api.openai.com, https://api.anthropic.com or https://generativelanguage.googleapis.com (request paths are appended as they come).
    #[arg(long)]
    upstream: String,
    /// Store every original is archived in first: a directory (or `postgres://...` where built in).
    #[arg(long)]
    store: String,
    #[command(flatten)]
    engine: EngineOpts,
    /// Largest request body accepted on the compacted routes, in MiB.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_body_mib: u32,
    /// Sessions held in memory at most; beyond, the least recently used is dropped (its archive stays).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// Bytes all sessions may hold in memory (e.g. `512MiB`, `2GiB`); beyond, the least recently used are dropped. Requests in flight may hold as much again, at most 16 x --max-body-mib (beyond: 503 lam_overloaded); the process stays within both plus about 96 MiB (docs/serve.md, "Memory"). Default: a quarter of the machine's memory.
    #[arg(long, value_parser = bytes, value_name = "SIZE")]
    max_memory: Option<usize>,
    #[arg(long, value_name = "FILE", help = concat!("A CA certificate (PEM file) to trust for the upstream, besides ", crate::trusted!(), "; repeat for more. For a TLS-inspecting proxy or a gateway on an internal CA."))]
    upstream_ca: Vec<PathBuf>,
    /// Seconds to wait for the upstream's connection.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    upstream_connect_timeout_s: u64,
    /// Seconds the upstream may send nothing (before its answer, and between two chunks of it) before the request fails (504, or the stream is cut).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    upstream_idle_timeout_s: u64,
    /// After SIGINT/SIGTERM, seconds in-flight requests may take before the proxy exits anyway (a second signal exits at once).
    #[arg(long, default_value_t = 30)]
    drain_timeout_s: u64,
    /// File holding the token every client must send (`x-lam-token`); required to listen beyond loopback. Else env LAM_TOKEN.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// One line per request on standard error (method, path, status, session, time; never headers or bodies).
    #[arg(long)]
    log: bool,
    /// Name of the run (1-64 letters, digits, `-_.`): every conversation a client does not name is archived in the store session NAME. Give the replicas of a deployment on one store the same name: each observation is then stored once, whichever replica serves it, and `lam mcp --run NAME` recalls every `§id` by the id alone. Replicas of a run must have the same settings (checked at start). Default: serve-<unix seconds>-<pid>, this process's own.
    #[arg(long, value_name = "NAME")]
    run: Option<String>,
    /// With --budget: how long the provider keeps a cached prompt after its last use, in SECONDS, or `none` (never cold). A request that comes longer than that after its conversation's previous one finds the cache cold, and is cut down to --budget-target whenever it is above it (the whole prompt is re-written anyway); while warm, a cut is made only at --budget, and only when it pays back its re-write. Default: the request's `cache_control.ttl` (`5m`, `1h`), else the provider's: 300 (Anthropic 5 minutes; OpenAI 5 to 10 minutes of inactivity).
    #[arg(long, value_parser = lam_serve::bill::CacheTtl::parse, value_name = "SECONDS|none")]
    cache_ttl: Option<lam_serve::bill::CacheTtl>,
}

/// What the upstream client trusts without `--upstream-ca` (docs/serve.md,
/// "Trusting the upstream"): one text for `lam serve`'s and `lam run`'s help.
#[macro_export]
macro_rules! trusted {
    () => {
        "the Mozilla roots and the system's store (after update-ca-certificates; or SSL_CERT_FILE and SSL_CERT_DIR in its place)"
    };
}

/// `--upstream-ca` files (each read now: one that gives no certificate is
/// `cmd`'s error), and with `node` the file `NODE_EXTRA_CA_CERTS` names, the
/// one node-based agents add to their trust: when it gives none, a warning,
/// and the run goes on without it (as node does).
pub fn upstream_ca(cmd: &str, files: &[PathBuf], node: bool) -> Result<Vec<PathBuf>> {
    for f in files {
        lam_serve::read_upstream_ca(f).with_context(|| format!("{cmd}: --upstream-ca"))?;
    }
    let mut all = files.to_vec();
    if let Some(extra) = std::env::var_os("NODE_EXTRA_CA_CERTS").filter(|v| node && !v.is_empty()).map(PathBuf::from) {
        match lam_serve::read_upstream_ca(&extra) {
            Ok(_) => all.push(extra),
            Err(e) => eprintln!("{cmd}: warning: NODE_EXTRA_CA_CERTS {e}; the upstream is trusted without it (as node does)"),
        }
    }
    Ok(all)
}

/// `512MiB`, `2GiB`, `1G`, `64k`, `1000000`: bytes (K/M/G/T in powers of 1024).
fn bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: usize = t[..digits].parse().map_err(|_| format!("`{s}`: expected a size such as 512MiB or 2GiB"))?;
    let unit = t[digits..].trim().to_ascii_lowercase();
    let shift = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("`{s}`: unknown unit (B, KiB, MiB, GiB, TiB)")),
    };
    n.checked_mul(1 << shift).filter(|b| *b > 0).ok_or_else(|| format!("`{s}`: out of range"))
}

/// The token: `--token-file`, else `LAM_TOKEN`.
fn token(file: Option<&PathBuf>) -> Result<Option<lam_serve::Token>> {
    let text = match file {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("--token-file {}", p.display()))?,
        None => match std::env::var("LAM_TOKEN") {
            Ok(t) => t,
            Err(_) => return Ok(None),
        },
    };
    match lam_serve::Token::new(&text) {
        Some(t) => Ok(Some(t)),
        None => bail!("the token (--token-file or LAM_TOKEN) is empty"),
    }
}

pub fn run(a: ServeArgs) -> Result<()> {
    let upstream = a.upstream.trim_end_matches('/');
    if !(upstream.starts_with("http://") || upstream.starts_with("https://")) {
        bail!("--upstream `{}`: expected an http:// or https:// origin", lam_core::redact::url(&a.upstream));
    }
    if upstream.ends_with("/v1") {
        eprintln!(
            "lam serve: warning: --upstream ends in /v1, and clients send paths that already start with /v1 \
             (requests would go to .../v1/v1/...); give the origin, e.g. {}",
            lam_core::redact::url(upstream.trim_end_matches("/v1"))
        );
    }
    let mut cfg = ServeConfig::new(upstream);
    cfg.token = token(a.token_file.as_ref())?;
    if let Some(m) = a.max_memory {
        cfg.max_memory = m;
    }
    cfg.upstream_ca = upstream_ca("lam serve", &a.upstream_ca, false)?;
    cfg.connect_timeout = Duration::from_secs(a.upstream_connect_timeout_s);
    cfg.idle_timeout = Duration::from_secs(a.upstream_idle_timeout_s);
    cfg.drain_timeout = Duration::from_secs(a.drain_timeout_s);
    cfg.store = arc_store::StoreSpec::parse(&a.store).with_context(|| format!("--store {}", lam_core::redact::url(&a.store)))?;
    cfg.engine = a.engine.settings(lam_core::stub::Recall::None, None)?;
    // Off unless asked for: `lam serve` fronts any client, whose own
    // compaction it does not know (docs/serve.md, "The default budget").
    cfg.default_budget = a.engine.default_budget(false)?;
    cfg.max_body = (a.max_body_mib as usize) << 20;
    cfg.max_sessions = a.max_sessions as usize;
    cfg.log = a.log;
    cfg.run = a.run;
    cfg.cache_ttl = a.cache_ttl;
    let store = cfg.store.display();
    let shown = cfg.upstream_shown();
    let (mib, drain) = (cfg.max_memory >> 20, a.drain_timeout_s);
    let auth = if cfg.token.is_some() { "; clients must send x-lam-token" } else { "" };
    lam_serve::run(cfg, a.listen, |addr| {
        eprintln!("lam serve: listening on http://{addr} -> {shown} (store {store}; sessions up to {mib} MiB{auth}); Ctrl-C or SIGTERM stops after in-flight requests (at most {drain} s; twice: at once)");
    })
    .context("lam serve")
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::bytes("512MiB"), Ok(512 << 20));
        assert_eq!(super::bytes("2GiB"), Ok(2 << 30));
        assert_eq!(super::bytes("1g"), Ok(1 << 30));
        assert_eq!(super::bytes("4096"), Ok(4096));
        assert!(super::bytes("12 parsecs").is_err() && super::bytes("0").is_err() && super::bytes("MiB").is_err());
    }
}
