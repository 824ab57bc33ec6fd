//! `cargo xtask <task>`: project automation.
//!
//! - `check-default-deps`: the default build of every crate pulls in no GPU or
//!   model-runtime crate, and no library crate the PostgreSQL client (the
//!   `lam` program builds it by default), and `lam-serve`/`lam-mcp` no
//!   trajectory reader (they count tokens with `lam-tokens`) (inspects `cargo tree`).
//! - `bench`: runs the criterion benchmarks that print peer ratios
//!   (L0 vs xxh3, exact verification, admission latency and concurrency).
//! - `bench-encoder`: lam's encoder beside candle's BertModel and PyTorch
//!   sentence-transformers (a venv made by `scripts/bench-venv.sh`) on the same
//!   real 510-token windows (`benches/encoder-peer`, outside the workspace).
//! - `calibrate`: measures this machine's compaction rates (L0 line hashing,
//!   exact verification, encoder tokens/s) with the pipeline's own code and
//!   writes a `lam-costmodel` device profile (`lam costmodel calibrate`, release
//!   build; default `$LAM_HOME/costmodel/profile.json`, or `--out FILE`).
//! - `soak`: the arc-store crash test at length (SIGKILL a writing child
//!   10,000 times, `ARC_SOAK_ITERS` to change), with media faults between
//!   kills (bit flips, zero-filled tails, zeroed new segments, short writes
//!   under a file-size limit; `ARC_SOAK_FAULTS=0` turns them off).
//! - `fuzz [--secs N] [--runs M] [--only TARGET]`: builds every cargo-fuzz
//!   target on the stable toolchain and runs each for N seconds (`fuzz.rs`).
//!
//! - `verify-digests [--corpus DIR] [--sample [N]] [--records M] [--bless]`:
//!   the deletion-set digests at t = 0.99 and 0.95 across encoder batch sizes
//!   8..256 and thread counts {1, 2, all}, compared with each other and with
//!   the golden file in `xtask/golden/` (written only by `--bless`).
//! - `check-features`: `check-default-deps`, each crate compiling alone with
//!   its default features, and the workspace with `--all-features`.
//!
//! - `build-kernels`: every kernel source compiled ahead of time for the
//!   targets this machine can build (nvcc: sm_80/sm_90 PTX and cubin; hipcc:
//!   gfx90a/gfx942; else NVRTC/hiprtc with the `cuda`/`rocm` features), or
//!   which toolkit is missing. The runtime path stays the default.
//! - `gpu-bundle [--out DIR]`: builds here (no GPU needed) the folder a GPU
//!   machine without Rust runs as one command (`bash .gpu-bundle/run.sh`):
//!   stripped `cuda` binaries, GPU test executables, fixtures, cuSZp's source,
//!   the fp16-rounded model and its CPU reference digests (`bundle.rs`).
//! - `gpu-bench --bundle DIR` (xtask built with `cuszp`, on the GPU machine):
//!   CUDA encoder and codec beside PyTorch and cuSZp (`gpubench.rs`).
//! - `dist [--dev] [--check] [--out DIR]`: every artifact for this host in
//!   `target/dist/`: the lam-ctx wheel (the `lam` binary), the model and
//!   `import lam` wheels, the npm tarballs, the binary's `.tar.gz` and
//!   `SHA256SUMS`; `--check` installs them into fresh environments without
//!   cargo and runs them (`dist.rs`, `scripts/dist-check.py`).
//! - `gpu-check`: the one script for a lent GPU machine (build with `cuda`,
//!   GPU tests, verify-digests across CPU and GPU, codec bench, encoder rate),
//!   a short table last, the full log in `$OUT/gpu-check.log`.

use anyhow::{Context, Result, bail};
use std::process::Command;

mod bundle;
mod codecs;
mod digests;
mod dist;
mod fuzz;
mod gpu;
#[cfg(feature = "cuda")]
mod gpubench;

const CRATES: [&str; 16] = [
    "lam-core",
    "lam-hash",
    "lam-lsh",
    "lam-codec",
    "lam-encode",
    "arc-store",
    "arc-view",
    "lam-costmodel",
    "lam-tokens",
    "lam-trajectory",
    "lam-operator",
    "lam-eval",
    "lam-serve",
    "lam-mcp",
    "lam-ctx",
    "lam-py",
];
// GPU and dynamically loaded model runtimes (candle-core itself is the default CPU encoder
// runtime), and the PostgreSQL client (arc-store feature `postgres`).
const FORBIDDEN: [&str; 10] =
    ["cudarc", "candle-kernels", "bindgen_cuda", "ort", "ort-sys", "hip-rs", "hip-sys", "libloading", "tokio-postgres", "postgres-protocol"];

// The PostgreSQL client, which the end-user programs (only) build by default: every `--store`
// of the `lam` program and every `store=` of the Python package takes `postgres://...`.
// The library crates keep arc-store's `postgres` feature opt-in.
const PG_DEFAULT_OK: [&str; 2] = ["tokio-postgres", "postgres-protocol"];
const PG_PROGRAMS: [&str; 2] = ["lam-ctx", "lam-py"];

// Crates that count tokens but read no trajectories (they take `lam-tokens`),
// and what the readers would drag in. The proxy takes `lam-trajectory` for
// the agents' rooms only, without its `readers` feature (gzip, SQLite).
const NO_READERS: [&str; 2] = ["lam-serve", "lam-mcp"];
const READERS: [&str; 2] = ["flate2", "rusqlite"];

// The command line's crates: only the `lam` program (and xtask) may pull them in.
const CLI_ONLY: [&str; 3] = ["clap", "indicatif", "anyhow"];

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The layers of ARCHITECTURE.md, top first: a crate's normal dependencies
/// inside the workspace are in rows above its own.
const LAYERS: [&[&str]; 5] = [
    &["lam-core"],
    &["lam-hash", "lam-lsh", "lam-codec", "lam-encode", "arc-store", "arc-view", "lam-costmodel", "lam-tokens"],
    &["lam-operator", "lam-trajectory"],
    &["lam-eval", "lam-serve", "lam-mcp", "lam-py"],
    &["lam-ctx", "xtask"],
];

/// Layers point one way (ARCHITECTURE.md invariant 18), read from `cargo metadata`.
fn check_layers() -> Result<()> {
    let out = cargo().args(["metadata", "-q", "--format-version", "1", "--no-deps"]).output().context("cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).context("cargo metadata output")?;
    let row = |name: &str| LAYERS.iter().position(|r| r.contains(&name));
    for p in meta["packages"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or_default();
        let Some(mine) = row(name) else { bail!("{name}: a workspace crate in no layer (add it to xtask's LAYERS and ARCHITECTURE.md)") };
        for d in p["dependencies"].as_array().into_iter().flatten().filter(|d| d["kind"].is_null()) {
            let dep = d["name"].as_str().unwrap_or_default();
            if let Some(theirs) = row(dep)
                && theirs >= mine
            {
                bail!("{name} (layer {mine}) depends on {dep} (layer {theirs}): layers point one way (ARCHITECTURE.md)");
            }
        }
    }
    println!("layers         every crate depends only on layers above its own");
    Ok(())
}

fn check_default_deps() -> Result<()> {
    check_layers()?;
    for c in CRATES {
        let out = cargo().args(["tree", "-q", "-e", "normal", "--prefix", "none", "-p", c]).output().with_context(|| format!("cargo tree -p {c}"))?;
        if !out.status.success() {
            bail!("cargo tree -p {c} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let tree = String::from_utf8_lossy(&out.stdout);
        let bad: Vec<&str> = tree
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| FORBIDDEN.contains(name) && !(PG_PROGRAMS.contains(&c) && PG_DEFAULT_OK.contains(name)))
            .collect();
        if !bad.is_empty() {
            bail!("{c}: default build pulls in {bad:?}");
        }
        let readers: Vec<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| READERS.contains(n)).collect();
        if NO_READERS.contains(&c) && !readers.is_empty() {
            bail!("{c}: pulls in the trajectory readers ({readers:?}); token counting needs only lam-tokens");
        }
        if c != "lam-ctx" {
            // Direct dependencies only: tiktoken-rs, for one, uses anyhow inside.
            let direct = cargo()
                .args(["tree", "-q", "-e", "normal", "--prefix", "none", "--depth", "1", "-p", c])
                .output()
                .with_context(|| format!("cargo tree -p {c}"))?;
            let direct = String::from_utf8_lossy(&direct.stdout);
            let cli: Vec<&str> = direct.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| CLI_ONLY.contains(n)).collect();
            if !cli.is_empty() {
                bail!("{c}: a library crate depends on {cli:?} (command-line crates live in `lam` only)");
            }
        }
        let unique: std::collections::BTreeSet<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
        println!("{c:<14} ok ({} crates in its default tree)", unique.len());
    }
    Ok(())
}

/// The crates without a library (checked by their binaries).
const BINARY_CRATES: [&str; 2] = ["lam-ctx", "xtask"];

/// `check-features`: the default tree of every crate is free of GPU and
/// model-runtime crates, each crate compiles alone with its default features,
/// and the whole workspace compiles with `--all-features` on this machine
/// (no GPU SDK needed: GPU runtimes are loaded at run time).
fn check_features() -> Result<()> {
    check_default_deps()?;
    for c in CRATES.iter().chain(["xtask"].iter()) {
        // The library and binaries alone: no dev-dependency may turn on a
        // feature the crate needs (tests and benches are checked by clippy
        // on the workspace, and by `cargo test`).
        let what = if BINARY_CRATES.contains(c) { "--bins" } else { "--lib" };
        let st = cargo().args(["check", "-q", "-p", c, what]).status().with_context(|| format!("cargo check -p {c}"))?;
        if !st.success() {
            bail!("{c} does not compile alone with its default features");
        }
        println!("{c:<14} compiles alone (default features, {})", if BINARY_CRATES.contains(c) { "its binaries" } else { "its library" });
    }
    let st = cargo().args(["check", "-q", "--workspace", "--all-features", "--all-targets"]).status().context("cargo check --all-features")?;
    if !st.success() {
        bail!("the workspace does not compile with --all-features");
    }
    println!("workspace      compiles with --all-features");
    Ok(())
}

fn bench() -> Result<()> {
    for (p, b) in [("lam-hash", "l0"), ("lam-lsh", "verify"), ("lam-operator", "admit"), ("lam-operator", "long_session")] {
        let st = cargo().args(["bench", "-q", "-p", p, "--bench", b]).status()?;
        if !st.success() {
            bail!("bench {p}/{b} failed");
        }
    }
    Ok(())
}

/// The arc-store crash soak: a child process appends while the test SIGKILLs
/// it, 10,000 times unless `ARC_SOAK_ITERS` is set.
/// `cargo xtask soak [serve|store] [ARGS...]`: the proxy soak (default;
/// `scripts/soak.sh`, ARGS to it), or the arc-store crash loop.
fn soak() -> Result<()> {
    let rest: Vec<String> = std::env::args().skip(2).collect();
    match rest.first().map(String::as_str) {
        Some("store") => store_soak(),
        Some("serve") => serve_soak(&rest[1..]),
        _ => serve_soak(&rest),
    }
}

/// Real transcripts through `lam serve` on PostgreSQL, pass after pass, the server stopped part-way.
fn serve_soak(args: &[String]) -> Result<()> {
    let st = Command::new("bash").arg("scripts/soak.sh").args(args).current_dir(workspace_root()).status().context("scripts/soak.sh")?;
    if !st.success() {
        bail!("the proxy soak failed (scripts/soak.sh)");
    }
    Ok(())
}

/// SIGKILLs of a writing arc-store, `ARC_SOAK_ITERS` times (default 10,000).
fn store_soak() -> Result<()> {
    let iters = std::env::var("ARC_SOAK_ITERS").unwrap_or_else(|_| "10000".into());
    let st = cargo()
        .args(["test", "-p", "arc-store", "--release", "--test", "crash", "--", "--ignored", "--exact", "soak", "--nocapture"])
        .env("ARC_SOAK_ITERS", &iters)
        .status()?;
    if !st.success() {
        bail!("arc-store crash soak ({iters} iterations) failed");
    }
    Ok(())
}

fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace").to_path_buf()
}

fn main() -> Result<()> {
    let task = std::env::args().nth(1).unwrap_or_default();
    match task.as_str() {
        "check-default-deps" => check_default_deps(),
        "bench" => bench(),
        "soak" => soak(),
        "bench-encoder" => {
            // The PyTorch peer lives in a venv the script makes (torch, sentence-transformers).
            let venv = Command::new("bash").arg("scripts/bench-venv.sh").output().context("scripts/bench-venv.sh")?;
            if !venv.status.success() {
                bail!("could not prepare the PyTorch venv: {}", String::from_utf8_lossy(&venv.stderr));
            }
            let python = String::from_utf8_lossy(&venv.stdout).trim().to_string();
            let st = cargo().args(["run", "--release", "-q", "--manifest-path", "benches/encoder-peer/Cargo.toml"]).env("LAM_BENCH_PYTHON", python).status()?;
            if !st.success() {
                bail!("encoder benchmark failed");
            }
            Ok(())
        }
        "calibrate" => {
            // The measurement needs the pipeline's crates, which the `lam` command already links.
            let rest: Vec<String> = std::env::args().skip(2).collect();
            let st = cargo()
                .args(["run", "--release", "-q", "-p", "lam-ctx", "--", "costmodel", "calibrate"])
                .args(&rest)
                .status()
                .context("cargo run -p lam-ctx")?;
            if !st.success() {
                bail!("calibration failed");
            }
            Ok(())
        }
        "verify-digests" => {
            let rest: Vec<String> = std::env::args().skip(2).collect();
            digests::run(&workspace_root(), &rest)
        }
        "check-features" => check_features(),
        "dist" => {
            let rest: Vec<String> = std::env::args().skip(2).collect();
            dist::dist(&workspace_root(), &rest)
        }
        "fuzz" => fuzz::fuzz(&workspace_root(), &std::env::args().skip(2).collect::<Vec<_>>()),
        "build-kernels" => gpu::build_kernels(&workspace_root()),
        "gpu-check" => gpu::gpu_check(&workspace_root()),
        "gpu-bundle" => {
            let rest: Vec<String> = std::env::args().skip(2).collect();
            bundle::gpu_bundle(&workspace_root(), &rest)
        }
        #[cfg(feature = "cuda")]
        "gpu-bench" => {
            let rest: Vec<String> = std::env::args().skip(2).collect();
            gpubench::gpu_bench(&rest)
        }
        #[cfg(not(feature = "cuda"))]
        "gpu-bench" => bail!("gpu-bench needs xtask built with `--features cuszp` (the GPU bundle's binary is)"),
        _ => {
            eprintln!(
                "usage: cargo xtask <check-default-deps | check-features | verify-digests [--sample [N]] [--encoder bert|hashing|cuda|cuda-bf16|cuda-f16] [--compare-cpu] [--golden DIR] [--batches N,..] [--threads N,..] [--bless] | dist [--dev] [--check] [--out DIR] | build-kernels | gpu-check | gpu-bundle [--out DIR] | gpu-bench --bundle DIR | bench | bench-encoder | soak | fuzz [--secs N] [--runs M] [--only TARGET] | calibrate [--out FILE] [--seconds S]>"
            );
            std::process::exit(2);
        }
    }
}
