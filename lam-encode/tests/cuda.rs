//! The CUDA encoder (feature `cuda`): its kernels compile with NVRTC without a
//! GPU; with no driver or device `load` is a clear error (never a panic); on a
//! GPU it agrees with the CPU encoder (cosine, max abs) in every precision and
//! its embeddings do not depend on the batch beyond the documented tolerance.
//!
//! Environment: `LAM_MODEL` / `$LAM_HOME/models/all-MiniLM-L6-v2` (the
//! model), `LAM_FIXTURES` (default `../shared/fixtures`), `LAM_REQUIRE_GPU=1`
//! (the GPU bundle sets it: a missing device fails instead of skipping),
//! `LAM_REQUIRE_NVRTC=1` (CI: a missing NVRTC fails).
#![cfg(feature = "cuda")]

use lam_core::Encoder;
use lam_encode::{BertEncoder, CudaEncoder, Precision};
use std::path::PathBuf;

fn flag(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

fn model_dir() -> PathBuf {
    let p = std::env::var_os("LAM_MODEL").map(PathBuf::from).unwrap_or_else(lam_encode::default_model_dir);
    assert!(p.join("model.safetensors").is_file(), "model not found at {}: run `bash scripts/install-model.sh` (or set LAM_MODEL)", p.display());
    p
}

fn fixture_texts() -> Vec<String> {
    let dir = std::env::var_os("LAM_FIXTURES").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"));
    let p = dir.join("minilm-reference-embeddings.json");
    let s = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (set LAM_FIXTURES)", p.display()));
    let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
    v["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect()
}

/// The encoder on device 0, or `None` (with the reason printed) where no
/// device can run it; `LAM_REQUIRE_GPU=1` turns that into a failure.
fn gpu(precision: Precision) -> Option<CudaEncoder> {
    match CudaEncoder::load(&model_dir(), precision) {
        Ok(e) => Some(e),
        Err(e) => {
            assert!(!flag("LAM_REQUIRE_GPU"), "LAM_REQUIRE_GPU=1 but the CUDA encoder cannot load: {e}");
            println!("skipped: no usable CUDA device ({e})");
            None
        }
    }
}

#[test]
fn kernels_compile_with_nvrtc() {
    for arch in [None, Some("compute_80"), Some("compute_90")] {
        match lam_encode::nvrtc_compile_bert_ptx(arch) {
            Ok(ptx) => {
                for k in lam_encode::BERT_KERNELS {
                    assert!(ptx.contains(&format!(".entry {k}")), "{k} missing from the PTX ({arch:?})");
                }
                println!("NVRTC ({arch:?}): {} bytes of PTX", ptx.len());
            }
            Err(e) if e.to_string().contains("libnvrtc not found") && !flag("LAM_REQUIRE_NVRTC") => {
                println!("skipped: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn without_a_driver_load_is_a_clear_error() {
    match CudaEncoder::load(&model_dir(), Precision::F32) {
        Ok(e) => println!("a CUDA device is present ({}); the agreement tests cover it", e.device_name()),
        Err(e) => {
            let msg = e.to_string();
            assert!(matches!(e, lam_core::Error::Encoder { .. }), "{msg}");
            assert!(msg.contains("cuda") && (msg.contains("lib") || msg.contains("device")), "the error must say what is missing: {msg}");
            assert!(!flag("LAM_REQUIRE_GPU"), "LAM_REQUIRE_GPU=1 but: {msg}");
            println!("clear error: {msg}");
        }
    }
    // A bad directory is the model's error, before any device is touched.
    let bad = CudaEncoder::load(std::path::Path::new("/nonexistent/model"), Precision::F32).unwrap_err().to_string();
    assert!(bad.contains("config.json"), "{bad}");
}

/// Worst cosine and max abs difference between two sets of rows.
fn agreement(a: &[f32], b: &[f32], d: usize) -> (f64, f32) {
    let mut worst = (1.0f64, 0.0f32);
    for (x, y) in a.chunks_exact(d).zip(b.chunks_exact(d)) {
        let cos: f64 = x.iter().zip(y).map(|(p, q)| f64::from(*p) * f64::from(*q)).sum();
        let abs = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        worst = (worst.0.min(cos), worst.1.max(abs));
    }
    worst
}

/// Texts: the fixture's 48 (edge cases included) and their chunks at the model's window.
fn texts(cpu: &BertEncoder) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut spans = Vec::new();
    for t in fixture_texts() {
        cpu.chunks(t.as_bytes(), &mut spans).unwrap();
        out.extend(spans.iter().map(|r| t.as_bytes()[r.clone()].to_vec()));
    }
    out
}

/// Agreement with the fp32 CPU encoder; bounds per precision (printed for the report):
/// fp32 cos >= 0.99999 and max abs <= 1e-4 (the PyTorch-equivalence bound),
/// f16 cos >= 0.999, bf16 cos >= 0.99.
#[test]
fn agrees_with_the_cpu_encoder() {
    let mut cpu = BertEncoder::load(&model_dir()).unwrap();
    let texts = texts(&cpu);
    let refs: Vec<&[u8]> = texts.iter().map(|t| t.as_slice()).collect();
    let d = cpu.info().dim;
    let mut want = vec![0.0f32; refs.len() * d];
    cpu.encode_batch(&refs, &mut want).unwrap();
    for (p, min_cos, max_abs) in [(Precision::F32, 0.99999, 1e-4f32), (Precision::F16, 0.999, 0.05), (Precision::Bf16, 0.99, 0.1)] {
        let Some(mut g) = gpu(p) else { return };
        assert_eq!(g.info().dim, d);
        assert_eq!(g.info().max_tokens, cpu.info().max_tokens, "same chunking as the CPU encoder");
        let mut got = vec![0.0f32; refs.len() * d];
        g.encode_batch(&refs, &mut got).unwrap();
        let (cos, abs) = agreement(&got, &want, d);
        println!("cuda {p} vs cpu fp32 on {} texts ({}): worst cosine {cos:.9}, max abs {abs:e}", refs.len(), g.device_name());
        assert!(cos >= min_cos && abs <= max_abs, "{p}: worst cosine {cos}, max abs {abs}");
        for row in got.chunks_exact(d) {
            let n: f64 = row.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>().sqrt();
            assert!((n - 1.0).abs() < 1e-5, "{p}: norm {n}");
        }
    }
}

/// A text's embedding must not depend on the batch it rides in beyond the
/// documented tolerance (cuBLAS may change algorithm with the shape): each
/// text alone vs all together vs tiny token budgets (many batches).
#[test]
fn embeddings_do_not_depend_on_the_batch() {
    let cpu = BertEncoder::load(&model_dir()).unwrap();
    let texts = texts(&cpu);
    let refs: Vec<&[u8]> = texts.iter().map(|t| t.as_slice()).collect();
    let d = cpu.info().dim;
    for (p, tol) in [(Precision::F32, 1e-5f32), (Precision::Bf16, 1e-2)] {
        let Some(mut g) = gpu(p) else { return };
        let mut all = vec![0.0f32; refs.len() * d];
        g.encode_batch(&refs, &mut all).unwrap();
        let mut alone = vec![0.0f32; refs.len() * d];
        for (i, t) in refs.iter().enumerate() {
            g.encode_batch(&[t], &mut alone[i * d..(i + 1) * d]).unwrap();
        }
        g.set_max_batch_tokens(600);
        let mut small = vec![0.0f32; refs.len() * d];
        g.encode_batch(&refs, &mut small).unwrap();
        let (c1, a1) = agreement(&all, &alone, d);
        let (c2, a2) = agreement(&all, &small, d);
        println!("cuda {p}: one batch vs each alone: cos {c1:.9}, max abs {a1:e}; vs 600-token batches: cos {c2:.9}, max abs {a2:e}");
        assert!(a1 <= tol && a2 <= tol, "{p}: batch changed an embedding by {a1:e} / {a2:e} (tolerance {tol:e})");
    }
}

#[test]
fn conformance_suite_on_the_gpu() {
    let Some(mut g) = gpu(Precision::F32) else { return };
    lam_core::testsuite::encoder(&mut g);
}
