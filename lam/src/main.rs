//! The `lam` command: one module per command; the work is done by the
//! library crates (`lam-operator`, `lam-eval`, `arc-store`, ...).

use anyhow::Result;
use clap::{Parser, Subcommand};

mod codec;
mod compact;
mod costmodel;
mod embed;
mod eval;
mod mcp;
mod opts;
mod recall;
mod replay;
mod run;
mod store;
mod serve;
mod view;

#[derive(Parser)]
#[command(name = "lam", version, about = "Keep agent context small, fast and lossless (LAM + ARC).")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Render the bounded view a model would see of a trajectory (ARC, or a baseline policy).
    View(view::ViewArgs),
    /// Write an archived observation's exact bytes (or one part) to standard output.
    Recall(recall::RecallArgs),
    /// Cost models of the LAM and ARC papers: phi, schedules, roofline, cost classes, paper checks, calibration.
    Costmodel(costmodel::CostmodelArgs),
    /// Compress or decompress raw float32 embeddings with lam-codec (szp, f16, int8, binary).
    Codec(codec::CodecArgs),
    /// The papers' measurements over trajectory corpora (removal, bound, evidence, retrieval, baselines, plots).
    Eval(eval::EvalArgs),
    /// Embed JSON strings (one per line on stdin) into unit vectors (one JSON array per line on stdout).
    Embed(embed::EmbedArgs),
    /// Run the LAM admission test (L1 then L0) over trajectories, online and batch.
    Compact(compact::CompactArgs),
    /// Check a FileStore archive for damage, or salvage its intact records into a fresh one.
    Store(store::StoreArgs),
    /// OpenAI/Anthropic-compatible proxy: archive every tool result, forward its residual, prefix-stable (docs/serve.md).
    Serve(serve::ServeArgs),
    /// Run an agent (claude, codex, ...) through the proxy on a free loopback port, `lam mcp` registered; print what it saved (docs/serve.md).
    Run(run::RunArgs),
    /// Replay recorded Claude Code / Codex sessions through the proxy's engine: removal, bytes changed, billed input with prompt caching (lam vs direct), added latency.
    Replay(replay::ReplayArgs),
    /// Serve archived observations to MCP clients (tools recall, recall_meta, catalog) over stdio or streamable HTTP.
    Mcp(mcp::McpArgs),
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
    }
}
