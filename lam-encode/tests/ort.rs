//! The ONNX Runtime encoder reproduces sentence-transformers (PyTorch fp32)
//! embeddings of all-MiniLM-L6-v2 (`../shared/fixtures/minilm-reference-embeddings.json`)
//! to the same bounds as the CPU encoder, and passes the Encoder conformance
//! suite. Needs the library and `onnx/model.onnx`: `bash scripts/install-onnx.sh`
//! (`scripts/check-ort.sh` runs it, then these tests; CI calls that).
#![cfg(feature = "ort")]

use lam_core::Encoder;
use lam_encode::{BertEncoder, ONNX_MODEL_PATH, OrtEncoder, Pooling, ort_dylib_path};
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    let p = lam_encode::default_model_dir();
    assert!(p.join("model.safetensors").is_file(), "model not found at {}: run `bash scripts/install-model.sh` (or set LAM_MODEL)", p.display());
    assert!(p.join(ONNX_MODEL_PATH).is_file(), "{} not found: run `bash scripts/install-onnx.sh`", p.join(ONNX_MODEL_PATH).display());
    assert!(ort_dylib_path().is_file(), "ONNX Runtime not found at {}: run `eval \"$(bash scripts/install-onnx.sh)\"`", ort_dylib_path().display());
    p
}

fn fixtures() -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/minilm-reference-embeddings.json");
    let s = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (check out beside shared/)", p.display()));
    serde_json::from_slice(&s).unwrap()
}

#[test]
fn matches_the_pytorch_reference() {
    let mut enc = OrtEncoder::load(&model_dir()).unwrap();
    assert_eq!(enc.pooling(), Pooling::Mean);
    assert_eq!(enc.info().dim, 384);
    assert_eq!(enc.max_seq_length(), 256, "sentence_bert_config.json says 256");
    // The reference ran with max_seq_length = 512.
    enc.set_max_seq_length(512);
    let fx = fixtures();
    let texts: Vec<&str> = fx["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let want: Vec<Vec<f32>> =
        fx["embeddings"].as_array().unwrap().iter().map(|v| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()).collect();
    // Batch 1: no padding; 16 and 48: padded to the longest of each call.
    for batch in [1usize, 16, 48] {
        enc.set_batch_size(batch);
        let bytes: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
        let mut got = vec![0.0f32; texts.len() * 384];
        enc.encode_batch(&bytes, &mut got).unwrap();
        let mut worst_cos = 1.0f64;
        let mut worst_abs = 0.0f32;
        for (i, w) in want.iter().enumerate() {
            let g = &got[i * 384..(i + 1) * 384];
            let cos: f64 = g.iter().zip(w).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
            let abs = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(cos >= 0.99999 && abs <= 1e-4, "text {i} (batch {batch}): cos {cos}, max abs diff {abs}");
            worst_cos = worst_cos.min(cos);
            worst_abs = worst_abs.max(abs);
        }
        eprintln!("ort batch {batch}: worst cosine {worst_cos:.9}, worst max-abs {worst_abs:e}");
    }
}

#[test]
fn conformance_and_edge_cases() {
    let mut enc = OrtEncoder::load(&model_dir()).unwrap();
    lam_core::testsuite::encoder(&mut enc);
    // Empty, whitespace, unknown characters, a 3000-character word, invalid UTF-8: no panic.
    let long = "x".repeat(3000);
    let texts: Vec<&[u8]> = vec![b"", b"   \n\t ", "\u{10FFFF}\u{E000}".as_bytes(), long.as_bytes(), b"caf\xe9 \xff\xfe"];
    let mut out = vec![0.0f32; texts.len() * 384];
    enc.encode_batch(&texts, &mut out).unwrap();
    for row in out.chunks_exact(384) {
        lam_core::check_unit(row).unwrap();
    }
    assert!(enc.info().model_id.contains("@onnx-"), "{}", enc.info().model_id);
}

/// Same tokenizer handling as the CPU encoder: identical spans, chunks and
/// chunk limits, and embeddings within the equivalence bound of each other.
#[test]
fn cuts_and_embeds_like_the_cpu_encoder() {
    let dir = model_dir();
    let mut ort = OrtEncoder::load(&dir).unwrap();
    let mut cpu = BertEncoder::load(&dir).unwrap();
    assert_eq!(ort.info().max_tokens, cpu.info().max_tokens);
    let text: String = (0..600).map(|i| format!("word{i} déjà-vu ")).collect();
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(b"\xff tail");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    ort.token_spans(&bytes, &mut a).unwrap();
    cpu.token_spans(&bytes, &mut b).unwrap();
    assert_eq!(a, b);
    ort.chunks(&bytes, &mut a).unwrap();
    cpu.chunks(&bytes, &mut b).unwrap();
    assert_eq!(a, b);
    assert!(a.len() > 1);
    let texts: Vec<&[u8]> = a.iter().map(|c| &bytes[c.clone()]).collect();
    let (mut x, mut y) = (vec![0.0f32; texts.len() * 384], vec![0.0f32; texts.len() * 384]);
    ort.encode_batch(&texts, &mut x).unwrap();
    cpu.encode_batch(&texts, &mut y).unwrap();
    let diff = x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
    assert!(diff <= 1e-4, "ORT and CPU embeddings differ by {diff}");
}

#[test]
fn missing_graph_names_the_file_and_the_script() {
    let dir = model_dir();
    let e = OrtEncoder::load_with(&dir, &dir.join("onnx/nope.onnx")).unwrap_err().to_string();
    assert!(e.contains("nope.onnx") && e.contains("scripts/install-onnx.sh"), "{e}");
}
