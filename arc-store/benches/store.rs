//! arc-store throughput and latency.
//!
//! - `append/group`: append throughput under the default group commit
//!   (fresh store per sample, 4–16 KiB observations, final `flush` included);
//!   target >= 200 MB/s.
//! - `append/every`: the same with an fsync per append (reported for comparison).
//! - `append/none`: no fsync at all (the write path alone).
//! - `open`: reopening a store of 10,000 observations (index rebuild).
//! - `get/warm`: recall of a random id from a store holding 10,000 archived
//!   observations, file cache warm; target median <= 50 us (`get/meta`: the
//!   metadata alone, from memory; `get/content address alone`: the SHA-1
//!   that recall recomputes before returning bytes). A direct
//!   per-call timing of 20,000 recalls prints the median and p99 as well.

use arc_store::{Durability, FileStore, Options};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lam_core::{ObsId, ObsStore, Record, SessionId};
use std::hint::black_box;
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Tool-output-like text (log and listing lines) of about `len` bytes, distinct per `i`.
fn observation(i: u64, len: usize, r: &mut Rng) -> Vec<u8> {
    let mut v = format!("$ run case {i}\n").into_bytes();
    while v.len() < len {
        let n = r.next();
        let line = match n % 3 {
            0 => format!("src/module_{}/file_{}.rs:{}: warning: unused variable `x{}`\n", n % 97, n % 13, n % 4000, n % 1000),
            1 => format!("-rw-r--r-- 1 user user {:>8} Nov 29 22:{:02} data_{:x}.json\n", n % 1_000_000, n % 60, n),
            _ => format!("test tests::case_{} ... ok ({} ms)\n", n % 10_000, n % 500),
        };
        v.extend_from_slice(line.as_bytes());
    }
    v.truncate(len);
    v
}

fn corpus(n: usize, seed: u64) -> Vec<Record> {
    let mut r = Rng(seed);
    (0..n)
        .map(|i| {
            let len = 4096 + (r.next() % (12 * 1024 + 1)) as usize;
            Record { index: i as u32, action: format!("bash -lc 'step {i}'"), observation: observation(i as u64, len, &mut r), returncode: Some(0) }
        })
        .collect()
}

fn bench_append(c: &mut Criterion) {
    let records = corpus(2000, 7);
    let bytes: u64 = records.iter().map(|r| r.observation.len() as u64).sum();
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let session = SessionId("bench".into());
    let mut g = c.benchmark_group("append");
    g.sample_size(10).measurement_time(Duration::from_secs(8)).warm_up_time(Duration::from_secs(1));
    for (name, durability, n) in
        [("group", Durability::default(), records.len()), ("none", Durability::None, records.len()), ("every", Durability::EveryAppend, 100)]
    {
        let recs = &records[..n];
        let b: u64 = if n == records.len() { bytes } else { recs.iter().map(|r| r.observation.len() as u64).sum() };
        g.throughput(Throughput::Bytes(b));
        let mut k = 0u64;
        g.bench_function(BenchmarkId::new(name, format!("{n} records, 4-16 KiB")), |bch| {
            bch.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    k += 1;
                    let dir = root.path().join(format!("{name}-{k}"));
                    let opts = Options { durability, ..Options::default() };
                    let mut s = FileStore::open_with(&dir, opts).unwrap();
                    let t = Instant::now();
                    for r in recs {
                        black_box(s.append(&session, r, 1).unwrap());
                    }
                    s.flush().unwrap();
                    total += t.elapsed();
                    drop(s);
                    std::fs::remove_dir_all(&dir).unwrap();
                }
                total
            })
        });
    }
    g.finish();
}

fn bench_get(c: &mut Criterion) {
    let records = corpus(10_000, 11);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let session = SessionId("bench".into());
    let mut ids = Vec::new();
    {
        let mut s = FileStore::open(dir.path()).unwrap();
        for r in &records {
            ids.push(s.append(&session, r, 1).unwrap().shown);
        }
    }
    let mut g = c.benchmark_group("open");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(records.len() as u64));
    g.bench_function("read-only, 10000 archived (rebuild index, verify every CRC)", |b| {
        b.iter(|| black_box(FileStore::open_read_only(dir.path()).unwrap().len()))
    });
    g.finish();
    let s = FileStore::open_read_only(dir.path()).unwrap();
    let mut r = Rng(5);
    let order: Vec<usize> = (0..20_000).map(|_| (r.next() % ids.len() as u64) as usize).collect();
    // Warm the page cache and check the bytes once.
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(s.get(&session, id).unwrap().unwrap(), records[i].observation);
    }
    let mut lat: Vec<Duration> = order
        .iter()
        .map(|&i| {
            let t = Instant::now();
            black_box(s.get(&session, &ids[i]).unwrap());
            t.elapsed()
        })
        .collect();
    lat.sort();
    println!(
        "get/warm direct timing over {} recalls from 10,000 archived (4-16 KiB): median {:?}, p99 {:?}, max {:?}",
        lat.len(),
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100],
        lat[lat.len() - 1]
    );
    // The share of recall's content-address check, timed the same way.
    let mut sha: Vec<Duration> = order
        .iter()
        .map(|&i| {
            let t = Instant::now();
            black_box(ObsId::of(records[i].action.as_bytes(), &records[i].observation));
            t.elapsed()
        })
        .collect();
    sha.sort();
    println!("get/warm direct timing of the SHA-1 check alone over the same records: median {:?}, p99 {:?}", sha[sha.len() / 2], sha[sha.len() * 99 / 100]);
    let mut g = c.benchmark_group("get");
    g.measurement_time(Duration::from_secs(5));
    let mut k = 0usize;
    g.bench_function("warm, 10000 archived", |b| {
        b.iter(|| {
            k = (k + 1) % order.len();
            black_box(s.get(&session, &ids[order[k]]).unwrap())
        })
    });
    // What recall's content-address check costs on its own: SHA-1 over the
    // same (action, 0x1F, observation) that `get` verifies.
    g.bench_function("content address alone (SHA-1, 4-16 KiB)", |b| {
        b.iter(|| {
            k = (k + 1) % order.len();
            let r = &records[order[k]];
            black_box(ObsId::of(r.action.as_bytes(), &r.observation))
        })
    });
    g.bench_function("meta, 10000 archived", |b| {
        b.iter(|| {
            k = (k + 1) % order.len();
            black_box(s.meta(&session, &ids[order[k]]).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, bench_append, bench_get);
criterion_main!(benches);
