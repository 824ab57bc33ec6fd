//! `cargo xtask fuzz [--secs N] [--runs M] [--only NAME]`: build every
//! cargo-fuzz target of the repository and run each for N seconds (or M
//! executions, whichever comes first), one after another, then print
//! executions and findings per target.
//!
//! No nightly toolchain and no `cargo fuzz` binary are needed: the targets
//! are built with the stable compiler and the flags `cargo fuzz build` passes
//! (SanitizerCoverage through `-Cpasses=sancov-module` and
//! `-Cllvm-args=-sanitizer-coverage-*`, `--cfg fuzzing`, debug assertions,
//! an explicit `--target` so build scripts stay uninstrumented); the
//! `libfuzzer-sys` crate compiles libFuzzer itself (a C++ compiler is
//! needed). Without AddressSanitizer (which needs nightly): the code under
//! test is safe Rust, so a panic, an abort, an out-of-memory or a timeout is
//! what a finding is. See `docs/fuzzing.md`.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The fuzz crates (cargo-fuzz layout: `Cargo.toml` with `[[bin]]` targets
/// under `fuzz_targets/`, not workspace members). Add a crate here to have
/// its targets built and run. A `*/fuzz/Cargo.toml` missing from this list is
/// reported, so none is forgotten.
pub const FUZZ_CRATES: &[&str] = &["lam-codec/fuzz", "arc-store/fuzz", "lam-encode/fuzz", "lam-trajectory/fuzz", "lam-serve/fuzz"];

const TRIPLE: &str = "x86_64-unknown-linux-gnu";

/// The RUSTFLAGS of `cargo fuzz build` (cargo-fuzz 0.12, `--sanitizer none`).
const RUSTFLAGS: &str = "-Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    -Cllvm-args=-sanitizer-coverage-stack-depth \
    --cfg fuzzing -Cdebug-assertions -Coverflow-checks -Cforce-frame-pointers";

struct Target {
    krate: String,
    name: String,
}

struct Outcome {
    target: String,
    execs: u64,
    secs: f64,
    corpus: usize,
    findings: Vec<PathBuf>,
    note: String,
}

struct Opts {
    secs: u64,
    runs: Option<u64>,
    only: Option<String>,
    rss_mb: u64,
}

fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts { secs: 60, runs: None, only: None, rss_mb: 2048 };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |what: &str| it.next().with_context(|| format!("{a} needs {what}"));
        match a.as_str() {
            "--secs" => o.secs = val("a number of seconds")?.parse().context("--secs")?,
            "--runs" => o.runs = Some(val("a number of executions")?.parse().context("--runs")?),
            "--only" => o.only = Some(val("a target name")?.clone()),
            "--rss-mb" => o.rss_mb = val("megabytes")?.parse().context("--rss-mb")?,
            other => bail!("unknown argument {other}; usage: cargo xtask fuzz [--secs N] [--runs M] [--only TARGET] [--rss-mb MB]"),
        }
    }
    if o.secs == 0 {
        bail!("--secs must be at least 1");
    }
    Ok(o)
}

/// `[[bin]]` names of a cargo-fuzz crate, from `cargo metadata`.
fn targets_of(root: &Path, krate: &str) -> Result<Vec<Target>> {
    let manifest = root.join(krate).join("Cargo.toml");
    let out = super::cargo()
        .args(["metadata", "--no-deps", "--format-version", "1", "--manifest-path"])
        .arg(&manifest)
        .output()
        .with_context(|| format!("cargo metadata for {}", manifest.display()))?;
    if !out.status.success() {
        bail!("cargo metadata {}: {}", manifest.display(), String::from_utf8_lossy(&out.stderr));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut v = Vec::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        for t in p["targets"].as_array().into_iter().flatten() {
            if t["kind"].as_array().is_some_and(|k| k.iter().any(|x| x == "bin")) {
                v.push(Target { krate: krate.to_string(), name: t["name"].as_str().unwrap_or_default().to_string() });
            }
        }
    }
    Ok(v)
}

/// Fuzz crates present in the tree but missing from [`FUZZ_CRATES`].
fn unlisted(root: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(root) else { return Vec::new() };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.path().join("fuzz/Cargo.toml").is_file())
        .map(|e| format!("{}/fuzz", e.file_name().to_string_lossy()))
        .filter(|k| !FUZZ_CRATES.contains(&k.as_str()))
        .collect()
}

fn build(root: &Path, krate: &str, target_dir: &Path) -> Result<()> {
    let st = super::cargo()
        .args(["build", "--release", "--bins", "--target", TRIPLE, "--manifest-path"])
        .arg(root.join(krate).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .env("RUSTFLAGS", RUSTFLAGS)
        .status()
        .with_context(|| format!("building {krate}"))?;
    if !st.success() {
        bail!("building the fuzz targets of {krate} failed");
    }
    Ok(())
}

/// Run one target with libFuzzer; parse its final statistics.
fn run(root: &Path, t: &Target, bin: &Path, o: &Opts) -> Result<Outcome> {
    let work = root.join("target/fuzz-work").join(&t.krate).join(&t.name);
    let corpus = work.join("corpus");
    let artifacts = work.join("artifacts");
    std::fs::create_dir_all(&corpus)?;
    std::fs::create_dir_all(&artifacts)?;
    let before: Vec<PathBuf> = files(&artifacts);
    let mut cmd = Command::new(bin);
    cmd.arg(&corpus);
    // Seeds committed beside the targets are read, never written.
    let seeds = root.join(&t.krate).join("seeds").join(&t.name);
    if seeds.is_dir() {
        cmd.arg(&seeds);
    }
    cmd.arg(format!("-max_total_time={}", o.secs))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg(format!("-rss_limit_mb={}", o.rss_mb))
        .arg("-timeout=30")
        .arg("-print_final_stats=1");
    if let Some(r) = o.runs {
        cmd.arg(format!("-runs={r}"));
    }
    let t0 = Instant::now();
    let out = cmd.output().with_context(|| format!("running {}", bin.display()))?;
    let secs = t0.elapsed().as_secs_f64();
    let log = String::from_utf8_lossy(&out.stderr);
    std::fs::write(work.join("last-run.log"), log.as_bytes())?;
    let execs = stat(&log, "stat::number_of_executed_units:").unwrap_or(0);
    let findings: Vec<PathBuf> = files(&artifacts).into_iter().filter(|p| !before.contains(p)).collect();
    let note = if out.status.success() {
        "ok".to_string()
    } else if findings.is_empty() {
        format!("exited with {} (see {})", out.status, work.join("last-run.log").display())
    } else {
        let what = log.lines().find(|l| l.contains("panicked at") || l.contains("ERROR: libFuzzer")).unwrap_or("failure").trim().to_string();
        format!("FINDING: {what}")
    };
    Ok(Outcome { target: format!("{}::{}", t.krate, t.name), execs, secs, corpus: files(&corpus).len(), findings, note })
}

fn stat(log: &str, key: &str) -> Option<u64> {
    log.lines().find_map(|l| l.trim().strip_prefix(key)).and_then(|v| v.trim().parse().ok())
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
    v.sort();
    v
}

/// The `fuzz` task.
pub fn fuzz(root: &Path, args: &[String]) -> Result<()> {
    let o = parse(args)?;
    for k in unlisted(root) {
        eprintln!("note: {k} has fuzz targets but is not in xtask's FUZZ_CRATES list; add it to run them");
    }
    let target_dir = root.join("target/fuzz");
    let mut outcomes = Vec::new();
    for krate in FUZZ_CRATES {
        let targets: Vec<Target> = targets_of(root, krate)?.into_iter().filter(|t| o.only.as_ref().is_none_or(|n| *n == t.name)).collect();
        if targets.is_empty() {
            continue;
        }
        build(root, krate, &target_dir)?;
        for t in &targets {
            let bin = target_dir.join(TRIPLE).join("release").join(&t.name);
            eprintln!("fuzzing {krate}::{} for up to {} s{}", t.name, o.secs, o.runs.map(|r| format!(" or {r} executions")).unwrap_or_default());
            outcomes.push(run(root, t, &bin, &o)?);
        }
    }
    if outcomes.is_empty() {
        bail!("no fuzz target matched");
    }
    println!("{:<28} {:>12} {:>9} {:>10} {:>7}  result", "target", "executions", "seconds", "execs/s", "corpus");
    for r in &outcomes {
        println!("{:<28} {:>12} {:>9.0} {:>10.0} {:>7}  {}", r.target, r.execs, r.secs, r.execs as f64 / r.secs.max(1e-9), r.corpus, r.note);
        for f in &r.findings {
            println!("{:<28} finding: {}", "", f.display());
        }
    }
    let found: usize = outcomes.iter().map(|r| r.findings.len()).sum();
    if found > 0 || outcomes.iter().any(|r| r.note != "ok") {
        bail!("{found} findings (inputs under target/fuzz-work/*/artifacts; rerun one with the target binary and the file)");
    }
    Ok(())
}
