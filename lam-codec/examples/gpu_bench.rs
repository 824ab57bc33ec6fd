//! Device check for a session that has an NVIDIA GPU (not yet run on one):
//! the MiniLM fixture tiled to 2^24 floats (as the cuSZp anchor), CudaSzp vs
//! the CPU stream (must be byte-identical), end-to-end GB/s (host copies and
//! host offset pass included), beside cuSZp 3.0 on an H200.
//! `cargo run --release -p lam-codec --features cuda --example gpu_bench`

use lam_codec::{Bound, SzpMode, gpu::CudaSzp, szp};
use std::time::Instant;

fn main() {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/minilm-embeddings-2371x384.f32");
    let raw = std::fs::read(&p).expect("fixture");
    let base: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let n = 1 << 24;
    let data: Vec<f32> = base.iter().copied().cycle().take(n).collect();
    let (rows, dim) = (n / 256, 256);
    let gpu = match CudaSzp::new(0) {
        Ok(g) => g,
        Err(e) => {
            println!("skipped: no GPU ({e})");
            return;
        }
    };
    let gb = (n * 4) as f64 / 1e9;
    println!("| mode | rel | ratio | cuSZp ratio | identical | gpu compress GB/s | gpu decompress GB/s | cpu compress GB/s |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (mode, rel, anchor) in [(SzpMode::Fixed, 1e-2, 6.00), (SzpMode::Fixed, 1e-3, 3.72), (SzpMode::Plain, 1e-2, 5.46), (SzpMode::Plain, 1e-3, 3.49)] {
        let mut c = Vec::new();
        let t = Instant::now();
        szp::encode(&data, rows, dim, mode, Bound::Rel(rel), &mut c).unwrap();
        let cpu = gb / t.elapsed().as_secs_f64();
        let mut g = Vec::new();
        gpu.encode(&data, rows, dim, mode, Bound::Rel(rel), &mut g).unwrap();
        let best = |f: &mut dyn FnMut()| {
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let enc = best(&mut || {
            g.clear();
            gpu.encode(&data, rows, dim, mode, Bound::Rel(rel), &mut g).unwrap();
        });
        let mut out = Vec::new();
        let dec = best(&mut || {
            out.clear();
            gpu.decode(&c, &mut out).unwrap();
        });
        let mut cd = Vec::new();
        szp::decode(&c, &mut cd).unwrap();
        let same = g == c && out.iter().zip(&cd).all(|(a, b)| a.to_bits() == b.to_bits());
        println!(
            "| {} | {rel:e} | {:.3} | {anchor:.2} | {same} | {:.1} | {:.1} | {cpu:.2} |",
            mode.name(),
            (n * 4) as f64 / c.len() as f64,
            gb / enc,
            gb / dec
        );
        assert!(same, "GPU stream differs from the CPU's");
    }
}
