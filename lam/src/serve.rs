//! `lam serve`: the OpenAI/Anthropic-compatible proxy (`lam-serve`); this
//! module only turns flags into a `ServeConfig`.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use lam_encode::Cache;
use lam_serve::ServeConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum ObservationRole {
    /// Tool results only (`role: "tool"`, `tool_result` blocks, `function_call_output`).
    Tool,
    /// Tool results, and user turns after the task (agents that send observations as user messages).
    User,
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Upstream origin, e.g. https://api.openai.com or https://api.anthropic.com (request paths are appended as they come).
    #[arg(long)]
    upstream: String,
    /// Store every original is archived in first: a directory (or `postgres://...` where built in).
    #[arg(long)]
    store: String,
    /// Merge threshold t (cosine); delta = sqrt(2 - 2t).
    #[arg(long, default_value_t = 0.95, value_parser = crate::opts::threshold)]
    threshold: f64,
    #[command(flatten)]
    enc: crate::opts::EncoderOpts,
    /// Embedding cache (lam-embeddings/1 chunk lines), default $LAM_HOME/cache/MODEL.lamemb.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Do not read or write the embedding cache.
    #[arg(long)]
    no_cache: bool,
    /// Encoders loaded: sessions that can admit at once (default: CPU cores, at most 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    encoders: Option<u32>,
    /// Which turns are observations.
    #[arg(long, value_enum, default_value = "tool")]
    observation_role: ObservationRole,
    /// Tools whose results are forwarded verbatim (still archived), e.g. `Edit,Write` when the agent must act on their exact output.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    keep_tools: Vec<String>,
    /// Largest request body accepted on the compacted routes, in MiB.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_body_mib: u32,
    /// Sessions held in memory at most; beyond, the least recently used is dropped (its archive stays).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// One line per request on standard error (method, path, status, session, time; never headers or bodies).
    #[arg(long)]
    log: bool,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let upstream = a.upstream.trim_end_matches('/');
    if !(upstream.starts_with("http://") || upstream.starts_with("https://")) {
        bail!(
            "--upstream `{}`: expected an http:// or https:// origin",
            a.upstream
        );
    }
    let mut cfg = ServeConfig::new(upstream);
    cfg.store =
        arc_store::StoreSpec::parse(&a.store).with_context(|| format!("--store {}", a.store))?;
    cfg.encoder = a.enc.spec();
    cfg.cache = match (a.no_cache, a.cache) {
        (true, _) => Cache::Off,
        (false, Some(p)) => Cache::File(p),
        (false, None) => Cache::Default,
    };
    if let Some(n) = a.encoders {
        cfg.encoders = n as usize;
    }
    cfg.threshold = a.threshold;
    cfg.user_turns = a.observation_role == ObservationRole::User;
    cfg.keep_tools = a.keep_tools;
    cfg.max_body = (a.max_body_mib as usize) << 20;
    cfg.max_sessions = a.max_sessions as usize;
    cfg.log = a.log;
    let store = cfg.store.display();
    lam_serve::run(cfg, a.listen, |addr| {
        eprintln!("lam serve: listening on http://{addr} -> {upstream} (store {store}); Ctrl-C or SIGTERM stops after in-flight requests");
    })
    .context("lam serve")
}
