//! The CPU BERT encoder reproduces sentence-transformers (PyTorch fp32)
//! embeddings of all-MiniLM-L6-v2: `../shared/fixtures/minilm-reference-embeddings.json`.
//! The model comes from `scripts/install-model.sh` (CI runs it first).
#![cfg(feature = "bert")]

use lam_core::Encoder;
use lam_encode::{BertEncoder, Pooling};
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    let p = std::env::var_os("LAM_MODEL").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("LAM_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/lam"));
        home.join("models/all-MiniLM-L6-v2")
    });
    assert!(p.join("model.safetensors").is_file(), "model not found at {}: run `bash scripts/install-model.sh` (or set LAM_MODEL)", p.display());
    p
}

fn fixtures() -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/minilm-reference-embeddings.json");
    let s = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (check out beside shared/)", p.display()));
    serde_json::from_slice(&s).unwrap()
}

#[test]
fn matches_the_pytorch_reference() {
    let mut enc = BertEncoder::load(&model_dir()).unwrap();
    assert_eq!(enc.pooling(), Pooling::Mean);
    assert_eq!(enc.info().dim, 384);
    assert_eq!(enc.max_seq_length(), 256, "sentence_bert_config.json says 256");
    // The reference ran with max_seq_length = 512.
    enc.set_max_seq_length(512);
    let fx = fixtures();
    let texts: Vec<&str> = fx["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let want: Vec<Vec<f32>> =
        fx["embeddings"].as_array().unwrap().iter().map(|v| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()).collect();
    let counts: Vec<usize> = fx["wordpiece_tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    for batch in [16usize] {
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
        eprintln!("batch {batch}: worst cosine {worst_cos:.9}, worst max-abs {worst_abs:e}");
    }
    // Token counts: ours plus [CLS]/[SEP], capped at 512, equal the reference's.
    let mut spans = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        let mut chunks = Vec::new();
        enc.chunks(t.as_bytes(), &mut chunks).unwrap();
        enc.token_spans(t.as_bytes(), &mut spans).unwrap();
        assert!(chunks.len() <= 1 || counts[i] == 512, "text {i} was cut although it fits");
        let _ = &spans;
    }
}

#[test]
fn conformance_and_edge_cases() {
    let mut enc = BertEncoder::load(&model_dir()).unwrap();
    lam_core::testsuite::encoder(&mut enc);
    // Empty, whitespace, unknown characters, a 3000-character word, invalid UTF-8: no panic.
    let long = "x".repeat(3000);
    let texts: Vec<&[u8]> = vec![b"", b"   \n\t ", "\u{10FFFF}\u{E000}".as_bytes(), long.as_bytes(), b"caf\xe9 \xff\xfe"];
    let mut out = vec![0.0f32; texts.len() * 384];
    enc.encode_batch(&texts, &mut out).unwrap();
    for row in out.chunks_exact(384) {
        lam_core::check_unit(row).unwrap();
    }
}

#[test]
fn chunks_never_exceed_the_window_and_cover_the_text() {
    let enc = BertEncoder::load(&model_dir()).unwrap();
    let text: String = (0..2000).map(|i| format!("word{i} déjà-vu ")).collect();
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(b"\xff tail");
    let mut chunks = Vec::new();
    enc.chunks(&bytes, &mut chunks).unwrap();
    assert!(chunks.len() > 1);
    assert_eq!(chunks[0].start, 0);
    assert_eq!(chunks.last().unwrap().end, bytes.len());
    assert!(chunks.windows(2).all(|w| w[0].end == w[1].start));
    let mut spans = Vec::new();
    for c in &chunks {
        // Each chunk tokenises alone to at most max_tokens tokens.
        enc.token_spans(&bytes[c.clone()], &mut spans).unwrap();
        assert!(spans.len() <= enc.info().max_tokens, "chunk {c:?} has {} tokens", spans.len());
    }
}

#[test]
fn bad_model_directory_names_the_file() {
    let dir = std::env::temp_dir().join(format!("lam-badmodel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = BertEncoder::load(&dir).unwrap_err().to_string();
    assert!(e.contains("config.json") && e.contains("missing"), "{e}");
    std::fs::write(dir.join("config.json"), b"{not json").unwrap();
    std::fs::write(dir.join("model.safetensors"), b"garbage").unwrap();
    std::fs::write(dir.join("tokenizer.json"), b"{}").unwrap();
    let e = BertEncoder::load(&dir).unwrap_err().to_string();
    assert!(e.contains("config.json"), "{e}");
}

#[test]
fn embeddings_do_not_depend_on_batch_size_or_threads() {
    let fx = fixtures();
    let texts: Vec<String> = fx["texts"].as_array().unwrap().iter().take(16).map(|t| t.as_str().unwrap().to_string()).collect();
    let bytes: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
    let mut runs: Vec<Vec<u32>> = Vec::new();
    for (batch, threads) in [(1usize, 1usize), (8, 2), (256, 2), (16, 1)] {
        let mut enc = BertEncoder::load(&model_dir()).unwrap();
        enc.set_batch_size(batch);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut out = vec![0.0f32; bytes.len() * 384];
        pool.install(|| enc.encode_batch(&bytes, &mut out)).unwrap();
        runs.push(out.iter().map(|x| x.to_bits()).collect());
    }
    for r in &runs[1..] {
        assert!(r == &runs[0], "embedding bits changed with batch size or thread count");
    }
}

/// A tiny random BERT (hidden 32, 2 layers, F16 weights, CLS pooling) in a
/// directory laid out like bge-base-en-v1.5's: exercises the CLS and F16
/// paths that the default model does not. (No bge weights ship here.)
#[test]
fn cls_pooling_and_f16_weights_load_from_a_user_directory() {
    let src = model_dir();
    let dir = std::env::temp_dir().join(format!("lam-tinybert-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    std::fs::copy(src.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let (h, inter, layers, vocab, max_pos) = (32usize, 64usize, 2usize, 30522usize, 64usize);
    std::fs::write(
        dir.join("config.json"),
        serde_json::json!({"hidden_size": h, "num_attention_heads": 4, "intermediate_size": inter, "num_hidden_layers": layers,
            "vocab_size": vocab, "max_position_embeddings": max_pos, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"})
        .to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("sentence_bert_config.json"), r#"{"max_seq_length": 64, "do_lower_case": true}"#).unwrap();
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"word_embedding_dimension": 32, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#)
        .unwrap();
    let mut seed = 7u64;
    let mut rnd = |n: usize, scale: f32| -> Vec<u8> {
        (0..n)
            .flat_map(|_| {
                let x = lam_core::lcg_uniform(&mut seed) * scale;
                half::f16::from_f32(x).to_le_bytes()
            })
            .collect()
    };
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = vec![
        ("bert.embeddings.word_embeddings.weight".into(), vec![vocab, h], rnd(vocab * h, 0.2)),
        ("bert.embeddings.position_embeddings.weight".into(), vec![max_pos, h], rnd(max_pos * h, 0.2)),
        ("bert.embeddings.token_type_embeddings.weight".into(), vec![2, h], rnd(2 * h, 0.2)),
        ("bert.embeddings.LayerNorm.weight".into(), vec![h], rnd(h, 0.1)),
        ("bert.embeddings.LayerNorm.bias".into(), vec![h], rnd(h, 0.1)),
    ];
    for i in 0..layers {
        let p = format!("bert.encoder.layer.{i}.");
        for (n, shape) in [
            ("attention.self.query.weight", vec![h, h]),
            ("attention.self.query.bias", vec![h]),
            ("attention.self.key.weight", vec![h, h]),
            ("attention.self.key.bias", vec![h]),
            ("attention.self.value.weight", vec![h, h]),
            ("attention.self.value.bias", vec![h]),
            ("attention.output.dense.weight", vec![h, h]),
            ("attention.output.dense.bias", vec![h]),
            ("attention.output.LayerNorm.weight", vec![h]),
            ("attention.output.LayerNorm.bias", vec![h]),
            ("intermediate.dense.weight", vec![inter, h]),
            ("intermediate.dense.bias", vec![inter]),
            ("output.dense.weight", vec![h, inter]),
            ("output.dense.bias", vec![h]),
            ("output.LayerNorm.weight", vec![h]),
            ("output.LayerNorm.bias", vec![h]),
        ] {
            let n_el: usize = shape.iter().product();
            tensors.push((format!("{p}{n}"), shape, rnd(n_el, 0.3)));
        }
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> =
        tensors.iter().map(|(n, s, d)| (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F16, s.clone(), d).unwrap())).collect();
    std::fs::write(dir.join("model.safetensors"), safetensors::serialize(views, None).unwrap()).unwrap();

    let mut enc = BertEncoder::load(&dir).unwrap();
    assert_eq!(enc.pooling(), Pooling::Cls);
    assert_eq!(enc.info().dim, 32);
    assert_eq!(enc.info().max_tokens, 62);
    lam_core::testsuite::encoder(&mut enc);
    // Long text: chunks fit the 64-position table.
    let text = "the quick brown fox jumps over the lazy dog ".repeat(40);
    let mut chunks = Vec::new();
    enc.chunks(text.as_bytes(), &mut chunks).unwrap();
    assert!(chunks.len() >= 5);
    let texts: Vec<&[u8]> = chunks.iter().map(|c| &text.as_bytes()[c.clone()]).collect();
    let mut out = vec![0.0f32; texts.len() * 32];
    enc.encode_batch(&texts, &mut out).unwrap();
    // A missing tensor is an error naming the file and the tensor.
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> =
        tensors[1..].iter().map(|(n, s, d)| (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F16, s.clone(), d).unwrap())).collect();
    std::fs::write(dir.join("model.safetensors"), safetensors::serialize(views, None).unwrap()).unwrap();
    let e = BertEncoder::load(&dir).unwrap_err().to_string();
    assert!(e.contains("model.safetensors") && e.contains("word_embeddings"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
