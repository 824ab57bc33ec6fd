//! Exact verification throughput (pairs/s) at D = 384 and 768, beside the
//! straightforward iterator expression a user would write. Prints the ratio.

use criterion::{Criterion, Throughput, black_box};
use lam_lsh::sq_l2;
use std::time::Instant;

fn vectors(n: usize, dim: usize) -> Vec<f32> {
    lam_core::random_unit_vectors(n, dim, 0x1234_5678)
}

fn naive(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

fn scan(q: &[f32], set: &[f32], dim: usize, f: fn(&[f32], &[f32]) -> f32) -> usize {
    set.chunks_exact(dim).filter(|r| f(q, r) <= 0.1).count()
}

fn main() {
    // A session-sized retained set: the paper observes at most 112 retained
    // chunks per trajectory (LAM 3.3), so 128 vectors stay in L2 as they do live.
    let n = 128;
    let mut c = Criterion::default().configure_from_args();
    let mut lines = Vec::new();
    for dim in [384usize, 768] {
        let set = vectors(n, dim);
        let q = vectors(1, dim);
        let mut g = c.benchmark_group(format!("verify_d{dim}"));
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function("lam_sq_l2", |b| b.iter(|| scan(black_box(&q), black_box(&set), dim, sq_l2)));
        g.bench_function("peer_naive_iter", |b| b.iter(|| scan(black_box(&q), black_box(&set), dim, naive)));
        g.finish();
        let time = |f: fn(&[f32], &[f32]) -> f32| {
            (0..7)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..2000 {
                        black_box(scan(black_box(&q), black_box(&set), dim, f));
                    }
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let (a, b) = (time(sq_l2), time(naive));
        let pairs = 2000.0 * n as f64;
        lines.push(format!(
            "D={dim}: lam {:.1} M pairs/s, naive {:.1} M pairs/s, ratio {:.2}x (target >= 20 M pairs/s per core)",
            pairs / a / 1e6,
            pairs / b / 1e6,
            b / a
        ));
    }
    c.final_summary();
    for l in lines {
        println!("{l}");
    }
}
