//! Throughput of `OrtEncoder` beside `BertEncoder` on the same real windows
//! of `../shared/corpus` (as `benches/encoder-peer` picks them: 64 windows of
//! 500-512 tokens), batch 8, fp32, tokenisation excluded, rayon's thread
//! count for both. Needs `eval "$(bash scripts/install-onnx.sh)"`.
//!
//!     cargo run --release -p lam-encode --features ort --example ort-speed

use lam_core::Encoder;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let dir = lam_encode::default_model_dir();
    let mut cpu = lam_encode::BertEncoder::load(&dir).expect("model: run scripts/install-model.sh");
    let mut ort = lam_encode::OrtEncoder::load(&dir).expect("ONNX Runtime: run scripts/install-onnx.sh");
    cpu.set_max_seq_length(512);
    ort.set_max_seq_length(512);
    let corpus = std::env::var_os("LAM_CORPUS").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"));
    let tdir = corpus.join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let mut files: Vec<_> = std::fs::read_dir(&tdir).expect("corpus").map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut windows: Vec<Vec<u32>> = Vec::new();
    'outer: for f in files {
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap()).read_to_end(&mut s).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
        for m in v["messages"].as_array().unwrap().iter().skip(2).filter(|m| m["role"] == "user") {
            let text = m["content"].as_str().unwrap().as_bytes();
            let mut chunks = Vec::new();
            cpu.chunks(text, &mut chunks).unwrap();
            for c in chunks {
                let ids = cpu.token_ids(&text[c]).unwrap();
                if ids.len() >= 500 {
                    windows.push(ids);
                    if windows.len() == 64 {
                        break 'outer;
                    }
                }
            }
        }
    }
    let tokens: usize = windows.iter().map(Vec::len).sum();
    println!("{} windows, {tokens} tokens, {} threads, batch 8, fp32, tokenisation excluded", windows.len(), rayon::current_num_threads());
    ort.set_batch_size(8);
    let (mut a, mut b) = (vec![0.0f32; windows.len() * 384], vec![0.0f32; windows.len() * 384]);
    cpu.embed_token_ids(&windows[..8], &mut a[..8 * 384]).unwrap();
    ort.embed_token_ids(&windows[..8], &mut b[..8 * 384]).unwrap();
    let t = Instant::now();
    for (w, o) in windows.chunks(8).zip(a.chunks_mut(8 * 384)) {
        cpu.embed_token_ids(w, o).unwrap();
    }
    let cpu_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for (w, o) in windows.chunks(8).zip(b.chunks_mut(8 * 384)) {
        ort.embed_token_ids(w, o).unwrap();
    }
    let ort_s = t.elapsed().as_secs_f64();
    let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    println!("BertEncoder  {:>8.0} tok/s", tokens as f64 / cpu_s);
    println!("OrtEncoder   {:>8.0} tok/s  ({:.2}x BertEncoder; max abs diff {diff:.2e})", tokens as f64 / ort_s, cpu_s / ort_s);
}
