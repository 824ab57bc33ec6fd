//! `lam mcp`: serve an archive's observations to MCP clients (tools
//! `recall`, `recall_meta`, `catalog`; lam-mcp, docs/mcp.md).

use anyhow::{Context, Result};
use lam_core::SessionId;
use std::net::SocketAddr;

#[derive(clap::Args)]
pub struct McpArgs {
    /// Store to serve (read-only): a directory written by `lam compact --store` / `lam view --store`, or `postgres://...` where built in.
    #[arg(long)]
    store: String,
    /// Scope every tool to this session.
    #[arg(long)]
    session: Option<String>,
    /// Serve MCP streamable HTTP at http://ADDR/mcp (loopback, e.g. 127.0.0.1:8788) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Payload tokens (cl100k_base) per recall part, as `lam recall --part-tokens`.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..))]
    part_tokens: u32,
    /// Tokens of one catalog page, header included.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    page_tokens: u32,
}

pub fn run(a: McpArgs) -> Result<()> {
    let spec = arc_store::StoreSpec::parse(&a.store)?;
    let shown = spec.display();
    let mut cfg = lam_mcp::Config::new(spec);
    cfg.session = a.session.as_deref().map(SessionId::from);
    cfg.part_tokens = a.part_tokens as usize;
    cfg.page_tokens = a.page_tokens as usize;
    match a.http {
        None => lam_mcp::run_stdio(cfg).with_context(|| format!("lam mcp --store {shown} (stdio)")),
        Some(addr) => lam_mcp::run_http(cfg, addr, |at| {
            eprintln!("lam mcp: serving {shown} at http://{at}/mcp")
        })
        .with_context(|| format!("lam mcp --store {shown} --http {addr}")),
    }
}
