//! L0 throughput on real corpus observations (line splitting, hashing, set
//! membership, stub decisions, residual assembly), beside raw xxh3 over the
//! same bytes (the peer: the cheapest possible pass), the naive version of
//! the same rule (`lam_hash::naive`, whose output must be identical: checked
//! here), a bare line split + `HashSet<u64>` (what one would write first)
//! and the floor: split, xxh3 and one lookup per line in a presized table,
//! the least any L0 does (`docs/eval.md`, "L0 throughput"). Prints the
//! ratios.

use criterion::{Criterion, Throughput, black_box};
use lam_hash::naive::NaiveLineDedup;
use lam_hash::{LineDedup, Segment};
use nohash_hasher::BuildNoHashHasher;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// One session: each observation with its call's name as stubs write it
/// (`lam_core::action::referent`), as the operator gives them to L0.
type Session = Vec<(String, Vec<u8>)>;

fn corpus_sessions() -> Vec<Session> {
    let dir = lam_core::corpus_dir().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("corpus beside the checkout").map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .take(60)
        .map(|f| {
            let t = lam_trajectory::read::read_path(f).unwrap().remove(0);
            t.records.into_iter().map(|r| (lam_core::action::referent(&r.action), r.observation)).collect()
        })
        .collect()
}

fn l0(sessions: &[Session], out: &mut Vec<u8>) -> usize {
    let mut n = 0;
    for s in sessions {
        let mut d = LineDedup::new();
        for (i, (call, o)) in s.iter().enumerate() {
            out.clear();
            d.process(i as u32, "0123", call, &[Segment::Text(o)], out);
            n += out.len();
        }
    }
    n
}

fn raw_xxh3(sessions: &[Session]) -> u64 {
    sessions.iter().flatten().fold(0u64, |a, (_, o)| a ^ xxhash_rust::xxh3::xxh3_64(o))
}

fn naive_rule(sessions: &[Session], out: &mut Vec<u8>) -> usize {
    let mut n = 0;
    for s in sessions {
        let mut d = NaiveLineDedup::new(None);
        for (i, (call, o)) in s.iter().enumerate() {
            out.clear();
            d.process(i as u32, "0123", call, &[Segment::Text(o)], out);
            n += out.len();
        }
    }
    n
}

/// Every residual of both versions, concatenated (they must be identical).
fn residuals(sessions: &[Session], fast: bool) -> Vec<u8> {
    let mut all = Vec::new();
    for s in sessions {
        let mut d = LineDedup::new();
        let mut nd = NaiveLineDedup::new(None);
        for (i, (call, o)) in s.iter().enumerate() {
            if fast {
                d.process(i as u32, "0123", call, &[Segment::Text(o)], &mut all);
            } else {
                nd.process(i as u32, "0123", call, &[Segment::Text(o)], &mut all);
            }
        }
    }
    all
}

fn split_hashset(sessions: &[Session]) -> usize {
    let mut n = 0;
    for s in sessions {
        let mut set = HashSet::new();
        for (_, o) in s {
            for l in o.split(|&b| b == b'\n') {
                if !set.insert(xxhash_rust::xxh3::xxh3_64(l)) {
                    n += 1;
                }
            }
        }
    }
    n
}

/// The least any L0 must do per line: find it, hash it with xxh3 and look
/// it up in a presized table keyed by the hash (no stubs, no runs). Its
/// speed bounds L0's on this machine at this moment.
fn floor_split_map(sessions: &[Session]) -> usize {
    let mut n = 0;
    for s in sessions {
        let mut seen: HashMap<u64, u32, BuildNoHashHasher<u64>> = HashMap::default();
        seen.reserve(4096);
        for (_, o) in s {
            for l in memchr::memchr_iter(b'\n', o).scan(0, |start, end| {
                let l = &o[*start..end];
                *start = end + 1;
                Some(l)
            }) {
                let k = xxhash_rust::xxh3::xxh3_64(l);
                let next = seen.len() as u32;
                if *seen.entry(k).or_insert(next) != next {
                    n += 1;
                }
            }
        }
    }
    n
}

fn best_of<F: FnMut()>(mut f: F) -> f64 {
    (0..7)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let sessions = corpus_sessions();
    let bytes: usize = sessions.iter().flatten().map(|(_, o)| o.len()).sum();
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("l0");
    g.throughput(Throughput::Bytes(bytes as u64));
    let mut out = Vec::new();
    g.bench_function("lam_l0", |b| b.iter(|| l0(black_box(&sessions), &mut out)));
    g.bench_function("peer_raw_xxh3", |b| b.iter(|| raw_xxh3(black_box(&sessions))));
    g.bench_function("naive_rule", |b| b.iter(|| naive_rule(black_box(&sessions), &mut out)));
    g.bench_function("split_hashset", |b| b.iter(|| split_hashset(black_box(&sessions))));
    g.bench_function("floor_split_xxh3_map", |b| b.iter(|| floor_split_map(black_box(&sessions))));
    g.finish();
    c.final_summary();
    if std::env::args().any(|a| a == "--profile-time") {
        // Profiling one benchmark (`--bench l0/lam_l0 --profile-time 10` under perf): nothing else.
        return;
    }

    let t_l0 = best_of(|| {
        black_box(l0(&sessions, &mut out));
    });
    let t_raw = best_of(|| {
        black_box(raw_xxh3(&sessions));
    });
    let t_naive = best_of(|| {
        black_box(naive_rule(&sessions, &mut out));
    });
    let t_split = best_of(|| {
        black_box(split_hashset(&sessions));
    });
    let t_floor = best_of(|| {
        black_box(floor_split_map(&sessions));
    });
    let same = residuals(&sessions, true) == residuals(&sessions, false);
    assert!(same, "the fast L0 and the naive version of its rule disagree");
    let gbs = |t: f64| bytes as f64 / t / 1e9;
    println!(
        "L0 over {:.1} MB of corpus observations: lam {:.2} GB/s, raw xxh3 {:.2} GB/s, naive rule {:.2} GB/s (output identical: {same}), split+HashSet {:.2} GB/s, floor (split+xxh3+map) {:.2} GB/s; lam/raw = {:.3}, lam/naive = {:.2}x, lam/floor = {:.2} (target >= 1.5 GB/s)",
        bytes as f64 / 1e6,
        gbs(t_l0),
        gbs(t_raw),
        gbs(t_naive),
        gbs(t_split),
        gbs(t_floor),
        t_raw / t_l0,
        t_naive / t_l0,
        t_floor / t_l0
    );
}
