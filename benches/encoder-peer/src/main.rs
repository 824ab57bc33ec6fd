//! Embeds the same real 510-token windows from `../shared/corpus` with lam's
//! encoder, with candle's BertModel (the Rust peer) and, when
//! `LAM_BENCH_PYTHON` names a python with torch and sentence-transformers,
//! with PyTorch (`../pytorch_peer.py`): same threads, batch 8, fp32,
//! tokenisation excluded; prints tokens/s for each and the ratios.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use lam_core::Encoder;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let dir = lam_encode::default_model_dir();
    let mut enc = lam_encode::BertEncoder::load(&dir).expect("model: run scripts/install-model.sh");
    enc.set_max_seq_length(512);
    let corpus = std::env::var_os("LAM_CORPUS").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"));
    let tdir = corpus.join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let mut files: Vec<_> = std::fs::read_dir(&tdir).expect("corpus").map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut windows: Vec<Vec<u32>> = Vec::new();
    let mut window_texts: Vec<String> = Vec::new();
    'outer: for f in files {
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap()).read_to_end(&mut s).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
        for m in v["messages"].as_array().unwrap().iter().skip(2).filter(|m| m["role"] == "user") {
            let text = m["content"].as_str().unwrap().as_bytes();
            let mut chunks = Vec::new();
            enc.chunks(text, &mut chunks).unwrap();
            for c in chunks {
                let ids = enc.token_ids(&text[c.clone()]).unwrap();
                if ids.len() == 512 || ids.len() >= 500 {
                    windows.push(ids);
                    window_texts.push(String::from_utf8_lossy(&text[c]).into_owned());
                    if windows.len() == 64 {
                        break 'outer;
                    }
                }
            }
        }
    }
    let tokens: usize = windows.iter().map(Vec::len).sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{} windows, {} tokens (mean {:.0}), {} threads, batch 8, fp32, tokenisation excluded", windows.len(), tokens, tokens as f64 / windows.len() as f64, threads);

    // lam
    let mut ours = vec![0.0f32; windows.len() * 384];
    enc.embed_token_ids(&windows[..8], &mut ours[..8 * 384]).unwrap(); // warm-up
    let t = Instant::now();
    for (w, o) in windows.chunks(8).zip(ours.chunks_mut(8 * 384)) {
        enc.embed_token_ids(w, o).unwrap();
    }
    let lam_s = t.elapsed().as_secs_f64();
    // End to end: text in, unit vectors out (tokenisation included).
    let t = Instant::now();
    let texts: Vec<&[u8]> = window_texts.iter().map(|t| t.as_bytes()).collect();
    let mut e2e = vec![0.0f32; texts.len() * 384];
    enc.set_batch_size(8);
    enc.encode_batch(&texts, &mut e2e).unwrap();
    let lam_e2e_s = t.elapsed().as_secs_f64();

    // PyTorch sentence-transformers on the same windows, same threads and batch.
    let mut torch_line = String::from("PyTorch sentence-transformers: not run (set LAM_BENCH_PYTHON, as `cargo xtask bench-encoder` does)");
    if let Some(py) = std::env::var_os("LAM_BENCH_PYTHON") {
        let wpath = std::env::temp_dir().join(format!("lam-bench-windows-{}.json", std::process::id()));
        std::fs::write(&wpath, serde_json::to_vec(&serde_json::json!({"ids": windows, "texts": window_texts})).unwrap()).unwrap();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../pytorch_peer.py");
        let out = std::process::Command::new(py)
            .arg(&script)
            .arg(&dir)
            .arg(&wpath)
            .arg(threads.to_string())
            .arg("8")
            .output()
            .expect("running the PyTorch peer");
        let _ = std::fs::remove_file(&wpath);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("peer output");
            let tps = v["tok_per_s"].as_f64().unwrap();
            let theirs: Vec<f32> = v["embeddings"].as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32)).collect();
            let worst = ours.chunks(384).zip(theirs.chunks(384)).map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()).fold(1.0f32, f32::min);
            let lam_tps = tokens as f64 / lam_s;
            let e2e_tps = v["e2e_tok_per_s"].as_f64().unwrap();
            let lam_e2e = tokens as f64 / lam_e2e_s;
            torch_line = format!(
                "torch  {:>8.0} tok/s (torch {})\nratio lam/PyTorch = {:.2}x   (agreement: worst cosine {:.7})\nend to end, tokenisation included: lam {:.0} tok/s, SentenceTransformer.encode {:.0} tok/s, ratio {:.2}x",
                tps, v["torch"].as_str().unwrap_or("?"), lam_tps / tps, worst, lam_e2e, e2e_tps, lam_e2e / e2e_tps
            );
        } else {
            torch_line = format!("PyTorch peer failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    if std::env::var_os("LAM_BENCH_ONLY_LAM").is_some() {
        println!("lam    {:>8.0} tok/s", tokens as f64 / lam_s);
        println!("{torch_line}");
        return;
    }
    // candle
    let cfg: Config = serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &Device::Cpu) }.unwrap();
    let model = BertModel::load(vb, &cfg).unwrap();
    let run = |batch: &[Vec<u32>]| -> Vec<f32> {
        let n = batch.len();
        let len = batch.iter().map(Vec::len).max().unwrap();
        let mut ids = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (i, b) in batch.iter().enumerate() {
            ids[i * len..i * len + b.len()].copy_from_slice(b);
            mask[i * len..i * len + b.len()].fill(1);
        }
        let ids = Tensor::from_vec(ids, (n, len), &Device::Cpu).unwrap();
        let mask_t = Tensor::from_vec(mask.clone(), (n, len), &Device::Cpu).unwrap();
        let h = model.forward(&ids, &ids.zeros_like().unwrap(), Some(&mask_t)).unwrap();
        let h: Vec<f32> = h.flatten_all().unwrap().to_vec1().unwrap();
        let mut out = vec![0.0f32; n * 384];
        for i in 0..n {
            let real = batch[i].len();
            for p in 0..real {
                for k in 0..384 {
                    out[i * 384 + k] += h[(i * len + p) * 384 + k] / real as f32;
                }
            }
            lam_core::normalize_in_place(&mut out[i * 384..(i + 1) * 384]).unwrap();
        }
        out
    };
    let _ = run(&windows[..8]);
    let t = Instant::now();
    let mut peer = Vec::new();
    for w in windows.chunks(8) {
        peer.extend(run(w));
    }
    let candle_s = t.elapsed().as_secs_f64();
    let worst = ours.chunks(384).zip(peer.chunks(384)).map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()).fold(1.0f32, f32::min);
    println!("lam    {:>8.0} tok/s", tokens as f64 / lam_s);
    println!("candle {:>8.0} tok/s", tokens as f64 / candle_s);
    println!("ratio lam/candle = {:.2}x   (agreement: worst cosine {:.7})", candle_s / lam_s, worst);
    println!("{torch_line}");
}
