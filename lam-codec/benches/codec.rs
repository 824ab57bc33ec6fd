//! Codec ratio and throughput on real embeddings
//! (`shared/fixtures/minilm-embeddings-2371x384.f32`), beside cuSZp 3.0 on an
//! NVIDIA H200 on the same data (fixtures README). Prints a table first
//! (best of several runs, all threads of the rayon pool, and one thread),
//! then runs the criterion groups.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lam_codec::{Bound, Codec, SzpMode, decode};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

const ROWS: usize = 2371;
const DIM: usize = 384;

fn fixture() -> Vec<f32> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/minilm-embeddings-2371x384.f32");
    let b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (the shared fixtures sit beside the repository)", p.display()));
    assert_eq!(b.len(), ROWS * DIM * 4);
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// (label, codec, cuSZp ratio on the same data and bound, if any)
fn cases() -> Vec<(String, Codec, Option<f64>)> {
    let mut v = vec![("f16".to_string(), Codec::F16, None), ("int8".to_string(), Codec::Int8PerVector, None), ("binary".to_string(), Codec::SignBinary, None)];
    for (mode, r, anchor) in [(SzpMode::Fixed, 1e-2, 6.00), (SzpMode::Fixed, 1e-3, 3.72), (SzpMode::Plain, 1e-2, 5.46), (SzpMode::Plain, 1e-3, 3.49)] {
        v.push((format!("szp {} rel {r:e}", mode.name()), Codec::Szp { mode, bound: Bound::Rel(r) }, Some(anchor)));
    }
    v
}

fn best_secs(iters: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..iters)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn table(data: &[f32]) {
    let gb = (data.len() * 4) as f64 / 1e9;
    let threads = rayon::current_num_threads();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    println!("\nlam-codec on minilm-embeddings-2371x384.f32 ({} MB), {threads} rayon threads", data.len() * 4 / 1_000_000);
    println!(
        "| codec | ratio | cuSZp ratio | ours / cuSZp | max abs err | compress GB/s (1 thread) | compress GB/s ({threads} thr) | decompress GB/s (1 thread) | decompress GB/s ({threads} thr) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (label, c, anchor) in cases() {
        let mut s = Vec::new();
        c.encode_to(data, ROWS, DIM, &mut s).unwrap();
        let mut out = Vec::new();
        decode(&s, &mut out).unwrap();
        let err = data.iter().zip(&out).map(|(&a, &b)| (a as f64 - b as f64).abs()).fold(0.0, f64::max);
        let ratio = (data.len() * 4) as f64 / s.len() as f64;
        let enc = |s: &mut Vec<u8>| {
            s.clear();
            c.encode_to(black_box(data), ROWS, DIM, s).unwrap();
        };
        let dec = |o: &mut Vec<f32>| {
            o.clear();
            decode(black_box(&s), o).unwrap();
        };
        let mut buf = Vec::new();
        let ce1 = one.install(|| best_secs(20, || enc(&mut buf)));
        let cen = best_secs(20, || enc(&mut buf));
        let mut o = Vec::new();
        let de1 = one.install(|| best_secs(20, || dec(&mut o)));
        let den = best_secs(20, || dec(&mut o));
        let (a, rel) = match anchor {
            Some(a) => (format!("{a:.2}"), format!("{:.3}", ratio / a)),
            None => ("-".into(), "-".into()),
        };
        println!("| {label} | {ratio:.3} | {a} | {rel} | {err:.3e} | {:.2} | {:.2} | {:.2} | {:.2} |", gb / ce1, gb / cen, gb / de1, gb / den);
    }
    println!("cuSZp 3.0 anchor (H200, same data tiled to 2^24 floats): fixed 1e-2 171.5/160.3 GB/s compress/decompress\n");
}

fn bench(c: &mut Criterion) {
    let data = fixture();
    table(&data);
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Bytes((data.len() * 4) as u64));
    g.sample_size(20);
    for (label, codec, _) in cases() {
        let mut s = Vec::new();
        codec.encode_to(&data, ROWS, DIM, &mut s).unwrap();
        g.bench_function(format!("compress {label}"), |b| {
            let mut buf = Vec::with_capacity(s.len());
            b.iter(|| {
                buf.clear();
                codec.encode_to(black_box(&data), ROWS, DIM, &mut buf).unwrap();
            })
        });
        g.bench_function(format!("decompress {label}"), |b| {
            let mut o = Vec::with_capacity(data.len());
            b.iter(|| {
                o.clear();
                decode(black_box(&s), &mut o).unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
