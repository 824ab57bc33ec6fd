//! The `lam` command: one module per command; the work is done by the
//! library crates (`lam-operator`, `lam-eval`, `arc-store`, ...).

use anyhow::Result;
use clap::{Parser, Subcommand};

mod codec;
mod compact;
mod costmodel;
mod embed;
mod eval;
mod html;
mod mcp;
mod opts;
mod printable;
mod proc;
mod recall;
mod replay;
mod run;
mod runfiles;
mod serve;
mod signals;
mod status;
mod store;
#[cfg(unix)]
mod terminal;
mod top;
mod transcript;
mod view;

#[derive(Parser)]
#[command(name = "lam", version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LAM_COMMIT"), ")"), about = "Keep agent context small, fast and lossless (LAM + ARC).")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    // Ordered by use: what a new user runs first comes first.
    /// Compact recorded agent sessions: remove repeated and near-duplicate tool output, keep it recoverable (LAM: L1 then L0, online and batch).
    Compact(compact::CompactArgs),
    /// Proxy between an agent and its model API (OpenAI/Anthropic/Gemini compatible): archive every tool result, send a compacted one (docs/serve.md).
    Serve(serve::ServeArgs),
    /// Run an agent (claude, codex, gemini, opencode, ...) through the proxy on a free local port with `lam mcp` registered; print what it saved (docs/agents.md).
    Run(run::RunArgs),
    /// The conversations of a running `lam run` (or `lam serve --proxy URL`): requests, tokens kept out, cuts, input bill vs direct, refreshed every second (docs/agents.md).
    Top(top::TopArgs),
    /// One line of what the proxy saved, for an agent's status line (`lam run` registers it).
    #[command(hide = true)]
    StatusLine(status::StatusLineArgs),
    /// Replay recorded Claude Code, Codex, Gemini CLI or opencode sessions through the proxy: tokens removed, bytes changed, billed input with prompt caching (lam vs direct), added latency (docs/agents.md).
    Replay(replay::ReplayArgs),
    /// Print an archived tool output's exact bytes (or one part of it).
    Recall(recall::RecallArgs),
    /// Measure over trajectory corpora how much tool output compaction removes and what evidence it keeps, against baselines, with plots.
    Eval(eval::EvalArgs),
    /// Show the bounded prompt a model would see of a trajectory (ARC's view, or a baseline policy).
    View(view::ViewArgs),
    /// Serve archived tool outputs to MCP clients (tools recall, recall_meta, catalog) over stdio or streamable HTTP.
    Mcp(mcp::McpArgs),
    /// Check an archive (a FileStore folder) for damage, or salvage its intact records into a fresh one.
    Store(store::StoreArgs),
    /// Embed JSON strings (one per line on stdin) into unit vectors (one JSON array per line on stdout).
    Embed(embed::EmbedArgs),
    /// Compress or decompress raw float32 embeddings (szp, f16, int8, binary).
    Codec(codec::CodecArgs),
    /// Estimate what compaction costs and saves: the papers' cost models, schedules, roofline, calibration (phi, cost classes).
    Costmodel(costmodel::CostmodelArgs),
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Embed(a) => embed::run(a),
        Cmd::Costmodel(a) => costmodel::run(a),
        Cmd::Codec(a) => codec::run(a),
        Cmd::Eval(a) => eval::run(a),
        Cmd::View(a) => view::run(a),
        Cmd::Recall(a) => recall::run(a),
        Cmd::Compact(a) => compact::run(a),
        Cmd::Store(a) => store::run(a),
        Cmd::Serve(a) => serve::run(a),
        Cmd::Run(a) => run::run(a),
        Cmd::Mcp(a) => mcp::run(a),
        Cmd::Replay(a) => replay::run(a),
        Cmd::Top(a) => top::run(a),
        Cmd::StatusLine(a) => status::run(a),
    }
}

/// jemalloc, not glibc's malloc: glibc kept what `lam serve` freed (after
/// eight 9.4 MiB bodies at once, RSS stayed at 506 MiB; jemalloc went back
/// to 76 MiB; docs/serve.md, "Memory"). The library crates and lam-py keep
/// the system allocator.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts: a background thread purges
/// dirty pages unused for a second (and muzzy ones at once), so memory
/// freed after a burst goes back to the system without waiting for the
/// next allocation. `_RJEM_MALLOC_CONF` in the environment overrides them.
#[cfg(not(target_env = "msvc"))]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";
