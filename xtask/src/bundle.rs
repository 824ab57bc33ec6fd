//! `cargo xtask gpu-bundle [--out DIR]`: everything a GPU machine with no
//! Rust toolchain and no network needs to check the accelerator path in one
//! command (`bash DIR/run.sh`, writes to `$OUT`): stripped release binaries
//! built here with `--features cuda`, the GPU test executables, the fixtures,
//! cuSZp's source (copied from `../shared/peers/cuSZp` at bundle time, never
//! kept in the repository), all-MiniLM-L6-v2 with its weights rounded to fp16,
//! the CPU reference digests computed here from those same rounded weights,
//! the benchmark windows, and the PyTorch peer. Large files are gzipped; the
//! bundle must stay under 60 MB.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

const LIMIT: u64 = 60 * 1000 * 1000;
const CORPUS: &str = "mini-swe-agent-gemini3pro-swebench-verified";
const SAMPLE: usize = 6;
const MODEL_FILES: [&str; 9] = [
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "sentence_bert_config.json",
    "modules.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
];

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    let st = cmd.status().with_context(|| format!("{cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed");
    }
    Ok(())
}

/// Build a test target with `--no-run` and return its executable.
fn test_exe(root: &Path, pkg: &str, features: &str, test: &str) -> Result<PathBuf> {
    let out = cargo()
        .args(["test", "--release", "--no-run", "-p", pkg, "--features", features, "--test", test, "--message-format=json"])
        .current_dir(root)
        .output()
        .context("cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the {pkg} `{test}` test failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        if let Some(exe) = v["executable"].as_str()
            && v["target"]["name"] == test
        {
            return Ok(PathBuf::from(exe));
        }
    }
    bail!("cargo did not report the executable of {pkg} `{test}`")
}

/// Copy `src` to `dst`, strip it, and gzip it (`dst.gz`).
fn ship_binary(src: &Path, dst: &Path) -> Result<()> {
    std::fs::copy(src, dst).with_context(|| format!("copy {}", src.display()))?;
    run(Command::new("strip").arg(dst))?;
    run(Command::new("gzip").args(["-9", "-f"]).arg(dst))
}

fn copy_dir(src: &Path, dst: &Path) -> Result<()> {
    std::fs::create_dir_all(dst)?;
    for e in std::fs::read_dir(src).with_context(|| format!("{}", src.display()))? {
        let e = e?;
        let name = e.file_name();
        if name == ".git" {
            continue;
        }
        let (s, d) = (e.path(), dst.join(&name));
        if e.file_type()?.is_dir() {
            copy_dir(&s, &d)?;
        } else {
            std::fs::copy(&s, &d).with_context(|| format!("copy {}", s.display()))?;
        }
    }
    Ok(())
}

/// Write `src`'s safetensors with every float tensor rounded to fp16 (round
/// to nearest even) and stored as F16.
pub fn round_weights_to_f16(src: &Path, dst: &Path) -> Result<()> {
    use safetensors::{Dtype, SafeTensors, tensor::TensorView};
    let bytes = std::fs::read(src).with_context(|| format!("{}", src.display()))?;
    let st = SafeTensors::deserialize(&bytes).with_context(|| format!("{}: not safetensors", src.display()))?;
    let mut data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in st.tensors() {
        // Float weights become fp16; anything else (e.g. the I64 `position_ids` buffer) is kept.
        let (dtype, bytes): (Dtype, Vec<u8>) = match t.dtype() {
            Dtype::F32 => {
                (Dtype::F16, t.data().chunks_exact(4).flat_map(|b| half::f16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes()).collect())
            }
            other => (other, t.data().to_vec()),
        };
        data.push((name, dtype, t.shape().to_vec(), bytes));
    }
    let views =
        data.iter().map(|(n, dt, s, d)| Ok((n.clone(), TensorView::new(*dt, s.clone(), d)?))).collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    safetensors::serialize_to_file(views, None, dst).with_context(|| format!("{}", dst.display()))?;
    Ok(())
}

/// Token-id windows and their texts: every chunk of the sample at
/// `max_seq_length` (the pipeline's own windows), for the encoder benchmarks.
fn windows(model: &Path, corpus: &Path, max_seq: usize, out: &Path) -> Result<usize> {
    use lam_core::Encoder;
    let mut enc = lam_encode::BertEncoder::load(model)?;
    enc.set_max_seq_length(max_seq);
    let mut files = lam_trajectory::read::expand(&[corpus.to_path_buf()])?;
    files.sort();
    let (mut ids, mut texts) = (Vec::new(), Vec::new());
    let mut spans = Vec::new();
    for f in files.iter().take(SAMPLE) {
        for t in lam_trajectory::read::read_path(f)? {
            for r in &t.records {
                enc.chunks(&r.observation, &mut spans)?;
                for s in &spans {
                    let text = &r.observation[s.clone()];
                    ids.push(enc.token_ids(text)?);
                    texts.push(String::from_utf8_lossy(text).into_owned());
                }
            }
        }
    }
    let tokens: usize = ids.iter().map(Vec::len).sum();
    std::fs::write(out, serde_json::to_vec(&serde_json::json!({"max_seq_length": max_seq, "ids": ids, "texts": texts}))?)?;
    Ok(tokens)
}

fn dir_size(p: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(p)? {
        let e = e?;
        n += if e.file_type()?.is_dir() { dir_size(&e.path())? } else { e.metadata()?.len() };
    }
    Ok(n)
}

pub fn gpu_bundle(root: &Path, args: &[String]) -> Result<()> {
    let out = match args {
        [flag, dir] if flag == "--out" => PathBuf::from(dir),
        [] => root.join(".gpu-bundle"),
        _ => bail!("usage: cargo xtask gpu-bundle [--out DIR]"),
    };
    let shared = root.join("../shared");
    let model = std::env::var_os("LAM_MODEL").map(PathBuf::from).unwrap_or_else(lam_encode::default_model_dir);
    if !model.join("model.safetensors").is_file() {
        bail!("no model at {} (bash scripts/install-model.sh)", model.display());
    }
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    for d in ["bin", "model/all-MiniLM-L6-v2/1_Pooling", "model/all-MiniLM-L6-v2/2_Normalize", "golden", "bench", "fixtures"] {
        std::fs::create_dir_all(out.join(d))?;
    }
    println!("building release binaries with cuda (this takes a while on a small machine)");
    run(cargo().args(["build", "--release", "-p", "xtask", "--features", "cuszp"]).current_dir(root))?;
    ship_binary(&root.join("target/release/xtask"), &out.join("bin/xtask"))?;
    for (pkg, features, test) in [("lam-encode", "cuda", "cuda"), ("lam-codec", "cuda,cuszp", "kernels")] {
        let exe = test_exe(root, pkg, features, test)?;
        ship_binary(&exe, &out.join(format!("bin/test-{pkg}-{test}")))?;
    }
    // Fixtures, cuSZp's source, the sample trajectories.
    copy_dir(&shared.join("fixtures"), &out.join("fixtures"))?;
    copy_dir(&shared.join("peers/cuSZp"), &out.join("cuSZp"))?;
    let src_corpus = shared.join("corpus").join(CORPUS).join("trajs");
    let corpus = out.join("corpus").join(CORPUS).join("trajs");
    std::fs::create_dir_all(&corpus)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&src_corpus)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for f in files.iter().take(SAMPLE) {
        std::fs::copy(f, corpus.join(f.file_name().context("file name")?))?;
    }
    // The model, rounded to fp16: the CPU reference and the GPU run use the same weights.
    let m = out.join("model/all-MiniLM-L6-v2");
    for f in MODEL_FILES {
        let s = model.join(f);
        if s.is_file() {
            std::fs::copy(&s, m.join(f))?;
        }
    }
    round_weights_to_f16(&model.join("model.safetensors"), &m.join("model.safetensors"))?;
    // CPU reference digests from the rounded weights (one configuration: the
    // CPU encoder's independence of batch and threads is the main golden run's job).
    let xtask = root.join("target/release/xtask");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).to_string();
    run(Command::new(&xtask)
        .args(["verify-digests", "--sample", &SAMPLE.to_string(), "--batches", "32", "--threads", &threads, "--bless"])
        .args(["--corpus".as_ref(), corpus.as_os_str()])
        .args(["--model".as_ref(), m.as_os_str()])
        .args(["--golden".as_ref(), out.join("golden").as_os_str()]))?;
    let t256 = windows(&m, &corpus, 256, &out.join("bench/windows-256.json"))?;
    let t512 = windows(&m, &corpus, 512, &out.join("bench/windows-512.json"))?;
    println!("benchmark windows: {t256} tokens at 256, {t512} at 512");
    run(Command::new("gzip").args(["-9", "-f"]).arg(m.join("model.safetensors")))?;
    std::fs::copy(root.join("benches/pytorch_gpu_peer.py"), out.join("bench/pytorch_gpu_peer.py"))?;
    std::fs::copy(root.join("scripts/gpu-run.sh"), out.join("run.sh"))?;
    let size = dir_size(&out)?;
    println!("bundle {} : {:.1} MB", out.display(), size as f64 / 1e6);
    if size > LIMIT {
        bail!("the bundle is {:.1} MB, over the {} MB limit", size as f64 / 1e6, LIMIT / 1_000_000);
    }
    println!("on the GPU machine: OUT=/some/dir bash {}/run.sh", out.file_name().and_then(|s| s.to_str()).unwrap_or(".gpu-bundle"));
    Ok(())
}
