//! `PgStore` beside `FileStore` on the same records: appends/s and MB/s with
//! 1 and 8 writers, and recall latency (p50/p99, warm). Needs a server:
//! `bash scripts/test-postgres.sh --bench` starts a throwaway one and runs
//! this (`LAM_TEST_PG_URL`). Each append row is the median of
//! `LAM_BENCH_REPS` runs (default 3) on a fresh store.
//!
//! What "acknowledged" means differs, so both FileStore policies are shown:
//! `FileStore group` returns before its fdatasync (the default; survives a
//! process crash, not a power loss, until the group sync), `FileStore every`
//! returns after it. A `PgStore` append returns after its transaction
//! committed (WAL flushed: `synchronous_commit = on`), like `every`.
//!
//! Writers: `1` is one thread; `8 threads, 1 handle` share one store (for
//! PgStore: one connection and group commit across the threads; for
//! FileStore: one writer behind a mutex, since a directory has one writer);
//! `8 connections` are eight PgStore handles, as eight processes would be.
//!
//! `LAM_BENCH_PG_WRITERS` sets `PgOptions::writers`; `LAM_BENCH_ONLY=TEXT`
//! runs only the append rows whose store or writers column contains TEXT.

use arc_store::{Access, Durability, FileStore, Options, PgOptions, PgStore};
use lam_core::{ObsStore, Record, SessionId};
use std::process::Command;
use std::sync::{Arc, Mutex};
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

/// Tool-output-like text (the generator of `benches/store.rs`), distinct per `i`.
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

fn psql(url: &str, sql: &str) {
    let bin = std::env::var("LAM_TEST_PSQL").unwrap_or_else(|_| "psql".into());
    let st = Command::new(&bin).args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql]).status().expect("psql");
    assert!(st.success(), "psql {sql}");
}

/// A fresh, empty schema; returns the URL that uses it (with more server
/// `options`, percent-encoded, when `extra` is not empty).
fn fresh(admin: &str, k: &mut u32, extra: &str) -> String {
    *k += 1;
    let schema = format!("bench_{}_{k}", std::process::id());
    psql(admin, &format!("SET client_min_messages = warning; DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"));
    format!("{admin}{}options=-csearch_path%3D{schema}{extra}", if admin.contains('?') { '&' } else { '?' })
}

/// Append `records` from `writers` threads, each to its own session, thread
/// `t` taking records `t, t + writers, ...`; `make(t)` gives thread `t` its store.
fn run<S: ObsStore + Send>(records: &Arc<Vec<Record>>, writers: usize, make: impl Fn(usize) -> S) -> Duration {
    let stores: Vec<S> = (0..writers).map(&make).collect();
    let t = Instant::now();
    std::thread::scope(|sc| {
        for (w, mut s) in stores.into_iter().enumerate() {
            let records = records.clone();
            sc.spawn(move || {
                let session = SessionId(format!("w{w}"));
                for r in records.iter().skip(w).step_by(writers) {
                    s.append(&session, r, 1).unwrap();
                }
                s.flush().unwrap();
            });
        }
    });
    t.elapsed()
}

/// A FileStore shared by several threads (a directory has one writer).
struct Shared(Arc<Mutex<FileStore>>);
impl ObsStore for Shared {
    fn append(&mut self, s: &SessionId, r: &Record, t: u32) -> Result<lam_core::ObsMeta, lam_core::Error> {
        self.0.lock().unwrap().append(s, r, t)
    }
    fn get(&self, s: &SessionId, id: &str) -> Result<Option<Vec<u8>>, lam_core::Error> {
        self.0.lock().unwrap().get(s, id)
    }
    fn meta(&self, s: &SessionId, id: &str) -> Result<Option<lam_core::ObsMeta>, lam_core::Error> {
        self.0.lock().unwrap().meta(s, id)
    }
    fn ids(&self, s: &SessionId) -> Result<Vec<String>, lam_core::Error> {
        self.0.lock().unwrap().ids(s)
    }
    fn sessions(&self) -> Result<Vec<SessionId>, lam_core::Error> {
        ObsStore::sessions(&*self.0.lock().unwrap())
    }
    fn flush(&mut self) -> Result<(), lam_core::Error> {
        ObsStore::flush(&mut *self.0.lock().unwrap())
    }
}

/// `LAM_BENCH_PG_WRITERS` overrides the writing connections per store.
fn pg_opts() -> PgOptions {
    let mut o = PgOptions::default();
    if let Some(w) = std::env::var("LAM_BENCH_PG_WRITERS").ok().and_then(|v| v.parse().ok()) {
        o.writers = w;
    }
    o
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn row(name: &str, writers: &str, n: usize, bytes: u64, d: Duration) {
    let s = d.as_secs_f64();
    println!("| {name:<16} | {writers:<18} | {:>10.0} | {:>8.1} | {:>8.2} |", n as f64 / s, bytes as f64 / 1e6 / s, s);
}

/// Recall latency: `n` gets of random archived ids from one thread.
fn recall<S: ObsStore>(s: &S, ids: &[(SessionId, String, usize)], records: &[Record], n: usize) -> (Duration, Duration) {
    for (sid, id, i) in ids {
        assert_eq!(s.get(sid, id).unwrap().as_deref(), Some(&records[*i].observation[..]), "recall is exact");
    }
    let mut r = Rng(5);
    let mut lat: Vec<Duration> = (0..n)
        .map(|_| {
            let (sid, id, _) = &ids[(r.next() % ids.len() as u64) as usize];
            let t = Instant::now();
            std::hint::black_box(s.get(sid, id).unwrap());
            t.elapsed()
        })
        .collect();
    lat.sort();
    (lat[lat.len() / 2], lat[lat.len() * 99 / 100])
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Ok(admin) = std::env::var("LAM_TEST_PG_URL") else {
        eprintln!("set LAM_TEST_PG_URL (bash scripts/test-postgres.sh --bench starts a throwaway server and sets it)");
        std::process::exit(2);
    };
    let reps: usize = std::env::var("LAM_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let records = Arc::new(corpus(2000, 7));
    let bytes: u64 = records.iter().map(|r| r.observation.len() as u64).sum();
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut k = 0u32;
    println!("{} records, {:.1} MB (4-16 KiB tool-output text); median of {reps} runs", records.len(), bytes as f64 / 1e6);
    println!("| store            | writers            |  appends/s |     MB/s |        s |");
    println!("|------------------|--------------------|-----------:|---------:|---------:|");
    let only = std::env::var("LAM_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str, label: &str| name.contains(&only) || label.contains(&only);
    for (name, durability) in [("FileStore group", Durability::default()), ("FileStore every", Durability::EveryAppend)] {
        for writers in [1usize, 8] {
            if !wanted(name, if writers == 1 { "1" } else { "8 threads, 1 handle" }) {
                continue;
            }
            let d = median(
                (0..reps)
                    .map(|_| {
                        k += 1;
                        let dir = root.path().join(format!("f{k}"));
                        let fs = Arc::new(Mutex::new(FileStore::open_with(&dir, Options { durability, ..Options::default() }).unwrap()));
                        run(&records, writers, |_| Shared(fs.clone()))
                    })
                    .collect(),
            );
            row(name, if writers == 1 { "1" } else { "8 threads, 1 handle" }, records.len(), bytes, d);
        }
    }
    let mut pg_commits = Vec::new();
    let async_commit = "%20-csynchronous_commit%3Doff";
    for (name, label, writers, shared, extra) in [
        ("PgStore", "1", 1usize, true, ""),
        ("PgStore", "8 threads, 1 handle", 8, true, ""),
        ("PgStore", "8 connections", 8, false, ""),
        ("PgStore sync off", "1", 1, true, async_commit),
        ("PgStore sync off", "8 threads, 1 handle", 8, true, async_commit),
    ] {
        if !wanted(name, label) {
            continue;
        }
        let d = median(
            (0..reps)
                .map(|_| {
                    let url = fresh(&admin, &mut k, extra);
                    let one = PgStore::connect_with(&url, pg_opts()).unwrap();
                    let stats = one.clone();
                    let d = run(&records, writers, |_| if shared { one.clone() } else { PgStore::connect_with(&url, pg_opts()).unwrap() });
                    if shared {
                        pg_commits.push((name, label, stats.stats()));
                    }
                    d
                })
                .collect(),
        );
        row(name, label, records.len(), bytes, d);
    }
    for (name, label, s) in pg_commits.iter().step_by(reps) {
        println!("{name}, {label}: {} appends in {} commits (largest {}) on {} writing connections", s.appends, s.commits, s.largest_batch, s.writers);
    }

    // Recall, warm: the same 2000 records in one session of each store.
    let session = SessionId("recall".into());
    let dir = root.path().join("recall");
    let url = fresh(&admin, &mut k, "");
    let mut f = FileStore::open(&dir).unwrap();
    let mut p = PgStore::connect(&url, Access::ReadWrite).unwrap();
    let mut ids = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let m = f.append(&session, r, 1).unwrap();
        assert_eq!(p.append(&session, r, 1).unwrap(), m, "same metadata");
        ids.push((session.clone(), m.shown, i));
    }
    f.flush().unwrap();
    drop(f);
    let f = FileStore::open_read_only(&dir).unwrap();
    println!("| recall (warm, 1 thread, 20000 random gets of 2000) |      p50 |      p99 |");
    println!("|-----------------------------------------------------|---------:|---------:|");
    for (name, (p50, p99)) in [("FileStore", recall(&f, &ids, &records, 20_000)), ("PgStore", recall(&p, &ids, &records, 20_000))] {
        println!("| {name:<51} | {:>6.1}us | {:>6.1}us |", p50.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6);
    }
}
