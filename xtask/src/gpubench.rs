//! `xtask gpu-bench --bundle DIR [--out DIR] [--python PY]` (on the GPU
//! machine, from the bundle; xtask built with `cuszp`): our CUDA encoder and
//! codec beside their peers in one process run, one table.
//!
//! - Encoder, MiniLM model-only (token ids in, pooled unit vectors out) in
//!   bf16 and fp32 vs PyTorch sentence-transformers on the same windows, in
//!   the same dtypes (`bench/pytorch_gpu_peer.py`); end to end (texts in,
//!   tokenisation included) vs `SentenceTransformer.encode` in fp16; the
//!   bge-base shape (768-d, 12 layers, 512-token windows) with RANDOM weights
//!   on both sides (timing only: the shape decides the cost, not the values).
//! - Codec: `CudaSzp` vs cuSZp (`gpu::Cuszp`) on the shared MiniLM embeddings
//!   tiled to 2^24 floats, fixed and plain at rel 1e-2 and 1e-3: ratio, and
//!   GB/s host to host for both (upload, compress, download: what our API
//!   does) plus cuSZp's device-resident number (how cuSZp reports itself).

use anyhow::{Context, Result, bail};
use lam_codec::gpu::{CudaSzp, Cuszp};
use lam_codec::{Bound, SzpMode};
use lam_core::Encoder;
use lam_encode::{CudaEncoder, Precision};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Repeat the windows until a pass holds at least this many tokens.
const MIN_TOKENS: usize = 2_000_000;

struct Windows {
    ids: Vec<Vec<u32>>,
    texts: Vec<String>,
}

fn read_windows(p: &Path) -> Result<Windows> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).with_context(|| format!("{}", p.display()))?)?;
    let ids = v["ids"]
        .as_array()
        .context("ids")?
        .iter()
        .map(|w| w.as_array().map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0) as u32).collect()).unwrap_or_default())
        .collect();
    let texts = v["texts"].as_array().context("texts")?.iter().map(|t| t.as_str().unwrap_or("").to_string()).collect();
    Ok(Windows { ids, texts })
}

/// `ids` repeated until at least MIN_TOKENS tokens.
fn tiled<T: Clone>(v: &[T], tokens_per_copy: usize) -> Vec<T> {
    let copies = MIN_TOKENS.div_ceil(tokens_per_copy.max(1)).max(1);
    (0..copies).flat_map(|_| v.iter().cloned()).collect()
}

/// Best of three timed passes, after one warm-up.
fn best(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut b = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        f()?;
        b = b.min(t.elapsed().as_secs_f64());
    }
    Ok(b)
}

fn model_only(dir: &Path, p: Precision, ids: &[Vec<u32>]) -> Result<(f64, String)> {
    let mut e = CudaEncoder::load(dir, p)?;
    e.set_max_seq_length(ids.iter().map(Vec::len).max().unwrap_or(2));
    let tokens: usize = ids.iter().map(Vec::len).sum();
    let mut out = vec![0f32; ids.len() * e.info().dim];
    let s = best(|| Ok(e.embed_token_ids(ids, &mut out)?))?;
    Ok((tokens as f64 / s, e.device_name().to_string()))
}

fn end_to_end(dir: &Path, p: Precision, texts: &[String], tokens: usize) -> Result<f64> {
    let mut e = CudaEncoder::load(dir, p)?;
    let refs: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
    let mut out = vec![0f32; refs.len() * e.info().dim];
    let s = best(|| Ok(e.encode_batch(&refs, &mut out)?))?;
    Ok(tokens as f64 / s)
}

/// A bge-base-shaped model directory with random fp16 weights (timing only).
fn random_bge(minilm: &Path, dir: &Path) -> Result<()> {
    use safetensors::{Dtype, tensor::TensorView};
    std::fs::create_dir_all(dir.join("1_Pooling"))?;
    std::fs::create_dir_all(dir.join("2_Normalize"))?;
    let (h, layers, inter, vocab, max_pos) = (768usize, 12usize, 3072usize, 30522usize, 512usize);
    let cfg = serde_json::json!({"hidden_size": h, "num_attention_heads": 12, "intermediate_size": inter, "num_hidden_layers": layers,
        "vocab_size": vocab, "max_position_embeddings": max_pos, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "model_type": "bert"});
    std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&cfg)?)?;
    std::fs::write(dir.join("sentence_bert_config.json"), br#"{"max_seq_length": 512, "do_lower_case": true}"#)?;
    std::fs::write(
        dir.join("1_Pooling/config.json"),
        br#"{"word_embedding_dimension": 768, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
    )?;
    // The tokenizer and sentence-transformers module files are MiniLM's (same vocabulary).
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "modules.json", "config_sentence_transformers.json"] {
        if minilm.join(f).is_file() {
            std::fs::copy(minilm.join(f), dir.join(f))?;
        }
    }
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![vocab, h]),
        ("embeddings.position_embeddings.weight".into(), vec![max_pos, h]),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, h]),
        ("embeddings.LayerNorm.weight".into(), vec![h]),
        ("embeddings.LayerNorm.bias".into(), vec![h]),
    ];
    for i in 0..layers {
        let p = format!("encoder.layer.{i}.");
        for (n, s) in [
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
            shapes.push((format!("{p}{n}"), s));
        }
    }
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<Vec<u8>> = shapes
        .iter()
        .map(|(name, s)| {
            let n: usize = s.iter().product();
            let ln_gain = name.ends_with("LayerNorm.weight");
            (0..n)
                .flat_map(|_| {
                    let u = lam_core::lcg_uniform(&mut seed) * 0.04;
                    half::f16::from_f32(if ln_gain { 1.0 + u } else { u }).to_le_bytes()
                })
                .collect()
        })
        .collect();
    let views = shapes
        .iter()
        .zip(&data)
        .map(|((n, s), d)| Ok((n.clone(), TensorView::new(Dtype::F16, s.clone(), d)?)))
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors"))?;
    Ok(())
}

struct Row {
    what: String,
    ours: f64,
    peer: f64,
    unit: &'static str,
    target: f64,
}

fn codec_rows(fixture: &Path, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let raw = std::fs::read(fixture).with_context(|| format!("{}", fixture.display()))?;
    let base: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let n = 1 << 24;
    let data: Vec<f32> = base.iter().copied().cycle().take(n).collect();
    let (r, dim) = (n / 384, 384);
    let data = &data[..r * dim];
    let gb = (data.len() * 4) as f64 / 1e9;
    let ours = CudaSzp::new(0)?;
    let peer = match Cuszp::new(0) {
        Ok(_) => true,
        Err(e) => {
            notes.push(format!("cuSZp not measured: {e}"));
            false
        }
    };
    for (mode, rel) in [(SzpMode::Fixed, 1e-2), (SzpMode::Fixed, 1e-3), (SzpMode::Plain, 1e-2), (SzpMode::Plain, 1e-3)] {
        let b = Bound::Rel(rel);
        let mut cpu = Vec::new();
        lam_codec::szp::encode(data, r, dim, mode, b, &mut cpu)?;
        let mut g = Vec::new();
        let enc = best(|| {
            g.clear();
            ours.encode(data, r, dim, mode, b, &mut g)?;
            Ok(())
        })?;
        if g != cpu {
            bail!("codec {mode:?} rel {rel}: the CUDA stream differs from the CPU stream");
        }
        let mut dec_out = Vec::new();
        let dec = best(|| {
            dec_out.clear();
            ours.decode(&g, &mut dec_out)?;
            Ok(())
        })?;
        let ratio = (data.len() * 4) as f64 / g.len() as f64;
        let tag = format!("szp {} rel {rel:e}", mode.name());
        if !peer {
            rows.push(Row { what: format!("codec {tag} ratio (cpu=gpu stream)"), ours: ratio, peer: f64::NAN, unit: "x", target: 1.0 });
            rows.push(Row { what: format!("codec {tag} compress h2h"), ours: gb / enc, peer: f64::NAN, unit: "GB/s", target: 1.0 });
            continue;
        }
        let c = Cuszp::new(0)?.with_codec(mode, b);
        let mut cs = Vec::new();
        let penc = best(|| {
            cs.clear();
            c.encode(data, r, dim, &mut cs)?;
            Ok(())
        })?;
        let mut pout = Vec::new();
        let pdec = best(|| {
            pout.clear();
            c.decode(&cs, &mut pout)?;
            Ok(())
        })?;
        let (dc, dd, bytes) = c.time_device_resident(data, 5)?;
        let pratio = (data.len() * 4) as f64 / bytes as f64;
        rows.push(Row { what: format!("codec {tag} ratio (cpu=gpu stream)"), ours: ratio, peer: pratio, unit: "x", target: 1.0 });
        rows.push(Row { what: format!("codec {tag} compress h2h"), ours: gb / enc, peer: gb / penc, unit: "GB/s", target: 1.0 });
        rows.push(Row { what: format!("codec {tag} decompress h2h"), ours: gb / dec, peer: gb / pdec, unit: "GB/s", target: 1.0 });
        notes.push(format!("cuSZp {tag} device-resident (as cuSZp reports): compress {:.1} GB/s, decompress {:.1} GB/s, ratio {pratio:.2}", gb / dc, gb / dd));
    }
    Ok(())
}

pub fn gpu_bench(args: &[String]) -> Result<()> {
    let mut bundle = PathBuf::from(".");
    let mut out = std::env::var_os("OUT").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let mut python = "python3".to_string();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().context("missing value")?;
        match args[i].as_str() {
            "--bundle" => bundle = PathBuf::from(v),
            "--out" => out = PathBuf::from(v),
            "--python" => python = v,
            other => bail!("gpu-bench: unknown argument {other} (expected --bundle DIR, --out DIR, --python PY)"),
        }
        i += 2;
    }
    std::fs::create_dir_all(&out)?;
    let minilm = bundle.join("model/all-MiniLM-L6-v2");
    let w256 = read_windows(&bundle.join("bench/windows-256.json"))?;
    let w512 = read_windows(&bundle.join("bench/windows-512.json"))?;
    let t256: usize = w256.ids.iter().map(Vec::len).sum();
    let t512: usize = w512.ids.iter().map(Vec::len).sum();
    let ids256 = tiled(&w256.ids, t256);
    let ids512 = tiled(&w512.ids, t512);
    let texts = tiled(&w256.texts, t256);
    let e2e_tokens = t256 * (texts.len() / w256.texts.len().max(1));
    let bge = out.join("bge-base-random");
    random_bge(&minilm, &bge)?;
    // The peer first (it shares the GPU; runs alone).
    let peer_json = out.join("pytorch-peer.json");
    let st = std::process::Command::new(&python)
        .arg(bundle.join("bench/pytorch_gpu_peer.py"))
        .args([
            minilm.as_os_str(),
            bge.as_os_str(),
            bundle.join("bench/windows-256.json").as_os_str(),
            bundle.join("bench/windows-512.json").as_os_str(),
            peer_json.as_os_str(),
        ])
        .arg(MIN_TOKENS.to_string())
        .status()
        .context("running the PyTorch peer")?;
    let peer: serde_json::Value = if st.success() { serde_json::from_slice(&std::fs::read(&peer_json)?)? } else { serde_json::json!({}) };
    let pv = |k: &str| peer[k].as_f64().unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let (bf, dev) = model_only(&minilm, Precision::Bf16, &ids256)?;
    rows.push(Row { what: "encoder MiniLM model-only bf16".into(), ours: bf, peer: pv("minilm_bf16_tok_s"), unit: "tok/s", target: 0.8 });
    let (f32_, _) = model_only(&minilm, Precision::F32, &ids256)?;
    rows.push(Row { what: "encoder MiniLM model-only fp32 (TF32 off)".into(), ours: f32_, peer: pv("minilm_fp32_tok_s"), unit: "tok/s", target: f64::NAN });
    let e2e = end_to_end(&minilm, Precision::Bf16, &texts, e2e_tokens)?;
    rows.push(Row {
        what: "encoder MiniLM end to end bf16 vs ST.encode fp16".into(),
        ours: e2e,
        peer: pv("minilm_e2e_fp16_tok_s"),
        unit: "tok/s",
        target: 2.0,
    });
    let (bg, _) = model_only(&bge, Precision::Bf16, &ids512)?;
    rows.push(Row { what: "encoder bge-base shape bf16 (random weights)".into(), ours: bg, peer: pv("bge_bf16_tok_s"), unit: "tok/s", target: 0.8 });
    codec_rows(&bundle.join("fixtures/minilm-embeddings-2371x384.f32"), &mut rows, &mut notes)?;
    if !st.success() {
        notes.push("the PyTorch peer failed (see its output above): peer columns are NaN".into());
    }
    println!("\ngpu-bench on {dev}");
    println!("| measurement | lam | peer | unit | ratio | target |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut json = Vec::new();
    for r in &rows {
        let ratio = r.ours / r.peer;
        let target = if r.target.is_nan() { "-".to_string() } else { format!(">= {:.1}x {}", r.target, if ratio >= r.target { "met" } else { "NOT met" }) };
        println!("| {} | {:.4e} | {:.4e} | {} | {ratio:.2}x | {target} |", r.what, r.ours, r.peer, r.unit);
        json.push(serde_json::json!({"what": r.what, "lam": r.ours, "peer": r.peer, "unit": r.unit, "ratio": ratio, "target": r.target}));
    }
    for n in &notes {
        println!("note: {n}");
    }
    println!(
        "windows: MiniLM {} x 256-max ({t256} tokens, tiled to {} per pass); bge {} x 512-max ({t512}, tiled to {})",
        w256.ids.len(),
        ids256.iter().map(Vec::len).sum::<usize>(),
        w512.ids.len(),
        ids512.iter().map(Vec::len).sum::<usize>()
    );
    std::fs::write(out.join("gpu-bench.json"), serde_json::to_vec_pretty(&serde_json::json!({"device": dev, "rows": json, "notes": notes, "peer": peer}))?)?;
    Ok(())
}
