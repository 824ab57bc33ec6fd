//! Admission cost per arrival against session length: one session of
//! 100,000 small observations (test-runner lines, listings, short file reads
//! that repeat with variations), embeddings given, p50/p99 of the admission
//! time of the arrivals around the 1k-th, 10k-th and 100k-th (the 1,000
//! arrivals ending there). Flat means the later windows cost what the early
//! ones do. `LAM_LONG_SESSION=N` shortens the session. Runs twice: on the
//! hashing encoder's sparse vectors and on dense ones (see `Kind`).

use lam_core::{Encoder, Record, Threshold};
use lam_encode::HashingEncoder;
use lam_operator::{Config, Session};
use std::hint::black_box;
use std::time::Instant;

fn observation(i: usize) -> Vec<u8> {
    match i % 5 {
        0 => format!("tests/test_mod{}.py::test_case_{} PASSED\n", i % 97, i % 1013),
        1 => format!("total {}\n-rw-r--r-- 1 root root {} src/file_{}.py\n", i % 50, i % 4096, i % 211),
        2 => (0..4).map(|k| format!("    value_{k} = compute({}, {k})\n", i % 31)).collect(),
        3 => format!("{} passed, {} failed in {}.{:02}s\n", i % 40, i % 3, i % 9, i % 100),
        _ => format!("ok {i}\n"),
    }
    .into_bytes()
}

/// The vectors of one arrival: the hashing encoder's (sparse: most
/// coordinates 0, so most bands quantise to all zeros and every arrival
/// shares them), or the same under a fixed random projection (dense, as a
/// sentence encoder's are), re-normalised.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Sparse,
    Dense,
}

fn densify(v: &mut [f32], dim: usize, m: &[f32]) {
    for row in v.chunks_exact_mut(dim) {
        let mut o = vec![0f32; dim];
        for (x, col) in row.iter().zip(m.chunks_exact(dim)).filter(|(x, _)| **x != 0.0) {
            o.iter_mut().zip(col).for_each(|(o, c)| *o += x * c);
        }
        let n = o.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().zip(&o).for_each(|(r, o)| *r = o / n);
    }
}

/// A `dim x dim` matrix of approximately Gaussian entries (sum of 4
/// uniforms from xorshift), fixed by its seed.
fn projection(dim: usize) -> Vec<f32> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut uniform = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    (0..dim * dim).map(|_| (0..4).map(|_| uniform()).sum()).collect()
}

fn main() {
    let n: usize = std::env::var("LAM_LONG_SESSION").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    for kind in [Kind::Sparse, Kind::Dense] {
        run(n, kind);
    }
}

fn run(n: usize, kind: Kind) {
    let mut enc = HashingEncoder::default();
    let dim = enc.info().dim;
    let m = if kind == Kind::Dense { projection(dim) } else { Vec::new() };
    let cfg = Config::new(Threshold::from_cosine(0.95).unwrap());
    let mut s = Session::new(cfg, dim).unwrap();
    let mut lat = Vec::with_capacity(n);
    let (mut chunks, mut v) = (Vec::new(), Vec::new());
    for i in 0..n {
        let rec = Record { index: i as u32, action: format!("cmd {}", i % 7), observation: observation(i), returncode: Some(0) };
        chunks.clear();
        enc.chunks(&rec.observation, &mut chunks).unwrap();
        let texts: Vec<&[u8]> = chunks.iter().map(|c| &rec.observation[c.clone()]).collect();
        v.resize(texts.len() * dim, 0.0);
        enc.encode_batch(&texts, &mut v).unwrap();
        if kind == Kind::Dense {
            densify(&mut v, dim, &m);
        }
        let t = Instant::now();
        black_box(s.admit_embedded(&rec, &chunks, &v).unwrap());
        lat.push(t.elapsed().as_nanos() as u64);
    }
    let what = if kind == Kind::Sparse { "hashing vectors (sparse)" } else { "dense vectors (hashing under a fixed random projection)" };
    println!("one session of {n} small observations, {what}, t = 0.95, {}: admission per arrival", s.index_description());
    for at in [1_000usize, 10_000, 100_000].into_iter().filter(|&a| a <= n) {
        let mut w: Vec<u64> = lat[at - 1_000..at].to_vec();
        w.sort_unstable();
        let q = |p: f64| w[((p * w.len() as f64).ceil() as usize).clamp(1, w.len()) - 1] as f64 / 1000.0;
        println!("  arrivals {:>6}..{:<6}: p50 {:>7.1} us, p99 {:>7.1} us", at - 999, at, q(0.5), q(0.99));
    }
    println!("  total {:.2} s, {} chunks dropped", lat.iter().sum::<u64>() as f64 / 1e9, s.digest().len());
}
