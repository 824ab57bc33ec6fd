//! `lam mcp`: serve an archive's observations to MCP clients (tools
//! `recall`, `recall_meta`, `catalog`; lam-mcp, docs/mcp.md).

use anyhow::{Context, Result};
use lam_core::SessionId;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct McpArgs {
    /// Store to serve (read-only): a directory written by `lam serve`, `lam run`, `lam compact --store`, `lam view --store` or the Python package (`lam.Session(store=...)`), or `postgres://...` where built in.
    #[arg(long, required_unless_present = "store_file", conflicts_with = "store_file")]
    store: Option<String>,
    /// Read the store spec from this file (its first line) instead of `--store`: a database URL
    /// with a password stays out of the command line (`ps`). `lam run` passes it this way.
    #[arg(long, value_name = "PATH")]
    store_file: Option<PathBuf>,
    /// Scope every tool to this session.
    #[arg(long)]
    session: Option<String>,
    /// Scope every tool to the sessions of one proxy run: `RUN` (and `RUN-N`, `RUN-N@K` of proxies
    /// before one session per run). `lam run` passes its own run unless `--recall-scope store`;
    /// for a deployment, the `lam serve --run` name.
    #[arg(long, value_name = "RUN", conflicts_with = "session")]
    run: Option<String>,
    /// Serve MCP streamable HTTP at http://ADDR/mcp instead of stdio. Without a token ADDR must be
    /// loopback (e.g. 127.0.0.1:8788) and only loopback peers are served; a non-loopback ADDR
    /// (e.g. 0.0.0.0:8788, to share the server across machines) needs a token.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// With --http: every request must carry `Authorization: Bearer TOKEN`, TOKEN being this file's
    /// contents (surrounding whitespace trimmed). Default: the LAM_TOKEN environment variable, if set.
    #[arg(long, value_name = "PATH", requires = "http")]
    token_file: Option<PathBuf>,
    /// Payload tokens (cl100k_base) per recall part, as `lam recall --part-tokens`.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..))]
    part_tokens: u32,
    /// Tokens of one catalog page, header included.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    page_tokens: u32,
}

/// The HTTP access rule: the token of --token-file, else of LAM_TOKEN, else loopback only.
fn access(token_file: Option<&PathBuf>) -> Result<lam_mcp::HttpAccess> {
    let token = match token_file {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("reading the token file {}", p.display()))?),
        None => std::env::var("LAM_TOKEN").ok().filter(|t| !t.trim().is_empty()),
    };
    match token {
        Some(t) => Ok(lam_mcp::HttpAccess::token(&t)?),
        None => Ok(lam_mcp::HttpAccess::loopback()),
    }
}

/// The store spec of `--store` or `--store-file`.
fn store_spec(a: &McpArgs) -> Result<String> {
    match (&a.store, &a.store_file) {
        (Some(s), _) => Ok(s.clone()),
        (None, Some(p)) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading the store file {}", p.display()))?;
            let spec = text.lines().next().unwrap_or("").trim();
            anyhow::ensure!(!spec.is_empty(), "the store file {} is empty: expected a directory or postgres://... on its first line", p.display());
            Ok(spec.to_string())
        }
        (None, None) => anyhow::bail!("give --store or --store-file"),
    }
}

pub fn run(a: McpArgs) -> Result<()> {
    let spec = arc_store::StoreSpec::parse(&store_spec(&a)?)?;
    let shown = spec.display();
    let mut cfg = lam_mcp::Config::new(spec);
    cfg.session = a.session.as_deref().map(SessionId::from);
    cfg.run = a.run.clone();
    cfg.part_tokens = a.part_tokens as usize;
    cfg.page_tokens = a.page_tokens as usize;
    let Some(addr) = a.http else {
        return lam_mcp::run_stdio(cfg).with_context(|| format!("lam mcp --store {shown} (stdio)"));
    };
    let access = access(a.token_file.as_ref())?;
    let auth = if access.has_token() { "bearer token required" } else { "loopback peers only" };
    lam_mcp::run_http(cfg, addr, access, |at| eprintln!("lam mcp: serving {shown} at http://{at}/mcp ({auth})"))
        .with_context(|| format!("lam mcp --store {shown} --http {addr}"))
}
