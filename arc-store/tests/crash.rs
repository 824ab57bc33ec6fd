//! Crash safety: a child process (this test binary, re-executed in child
//! mode) appends records and prints each acknowledged id after `append`
//! returns; the parent SIGKILLs it at random times, then reopens the store
//! and checks that every acknowledged record is there with its exact bytes,
//! that every indexed record reads back without corruption, and that the
//! store accepts appends again.
//!
//! `sigkill_loop` runs `ARC_SOAK_ITERS` iterations (default 200);
//! `soak` (ignored; `cargo xtask soak`) runs `ARC_SOAK_ITERS` or 10,000.

use arc_store::{Durability, FileStore, Options};
use lam_core::{ObsId, ObsStore, Record, SessionId};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DIR: &str = "ARC_CRASH_CHILD_DIR";
const CHILD_SEED: &str = "ARC_CRASH_CHILD_SEED";
const CHILD_POLICY: &str = "ARC_CRASH_CHILD_POLICY";

/// xorshift64*: enough randomness for sizes, contents and timings.
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The observation named by (content seed, length): random bytes, mostly invalid UTF-8.
fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed ^ 0xC0FF_EE00);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next().to_le_bytes());
    }
    v.truncate(len);
    v
}

fn action(seed: u64) -> String {
    format!("tool --case {}", seed % 7)
}

fn options(policy: u64) -> Options {
    let durability = match policy % 4 {
        0 => Durability::EveryAppend,
        1 => Durability::None,
        2 => Durability::Group { max_records: 8, max_delay: Duration::from_millis(2) },
        _ => Durability::default(),
    };
    Options { durability, segment_bytes: 48 << 10 }
}

/// Child mode: append forever, printing `ACK session shown seed len` after each append returns.
#[test]
fn child_entry() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let seed: u64 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    let policy: u64 = std::env::var(CHILD_POLICY).unwrap().parse().unwrap();
    let mut s = FileStore::open_with(&dir, options(policy)).unwrap_or_else(|e| panic!("child open: {e}"));
    let mut r = Rng::new(seed);
    let out = std::io::stdout();
    for k in 0u32.. {
        let session = r.below(3);
        // Small content seeds repeat, so duplicates are appended too.
        let cseed = if r.below(8) == 0 { r.below(16) } else { r.next() };
        let len = match r.below(10) {
            0 => 0,
            1..=5 => r.below(300) as usize,
            6..=8 => 1000 + r.below(8000) as usize,
            _ => 20_000 + r.below(40_000) as usize,
        };
        let rec = Record { index: k, action: action(cseed), observation: content(cseed, len), returncode: Some(k as i32) };
        let m = s.append(&SessionId(format!("s{session}")), &rec, len as u32 / 4).unwrap_or_else(|e| panic!("child append: {e}"));
        let mut o = out.lock();
        writeln!(o, "ACK s{session} {} {cseed} {len}", m.shown).unwrap();
        o.flush().unwrap();
    }
}

struct Acked {
    session: String,
    shown: String,
    seed: u64,
    len: usize,
}

#[derive(Debug, Default)]
struct Stats {
    iterations: u64,
    acked: u64,
    torn_tails: u64,
    torn_bytes: u64,
    killed_before_first_ack: u64,
    records_checked: u64,
}

fn verify(dir: &Path, acked: &[Acked], stats: &mut Stats, it: u64) -> FileStore {
    let s = FileStore::open(dir).unwrap_or_else(|e| panic!("iteration {it}: reopen failed: {e}"));
    if s.recovery().torn_bytes > 0 {
        stats.torn_tails += 1;
        stats.torn_bytes += s.recovery().torn_bytes;
    }
    for a in acked {
        let sid = SessionId(a.session.clone());
        let got = s.get(&sid, &a.shown).unwrap_or_else(|e| panic!("iteration {it}: corrupt read of §{}: {e}", a.shown));
        let want = content(a.seed, a.len);
        assert_eq!(got.as_deref(), Some(&want[..]), "iteration {it}: acknowledged §{} in {} lost or changed", a.shown, a.session);
    }
    // Every record the index holds reads back and matches its id.
    for sid in s.sessions() {
        for shown in s.ids(&sid).unwrap() {
            let m = s.meta(&sid, &shown).unwrap().unwrap();
            let b = s.get(&sid, &shown).unwrap_or_else(|e| panic!("iteration {it}: corrupt read: {e}")).unwrap();
            assert_eq!(ObsId::of(m.action.as_bytes(), &b), m.id, "iteration {it}: §{shown} bytes do not match the id");
            stats.records_checked += 1;
        }
    }
    s
}

fn crash_loop(iters: u64) {
    let seed = std::env::var("ARC_SOAK_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("crash loop: {iters} iterations, ARC_SOAK_SEED={seed}");
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut stats = Stats::default();
    let mut acked: Vec<Acked> = Vec::new();
    let mut dir = root.path().join("store-0");
    let t0 = Instant::now();
    for it in 0..iters {
        if it % 25 == 0 {
            // A fresh store now and then keeps reopen (a full scan) cheap in long soaks.
            let _ = std::fs::remove_dir_all(&dir);
            dir = root.path().join(format!("store-{it}"));
            acked.clear();
        }
        let stderr_path = root.path().join("child-stderr");
        let mut child = Command::new(&exe)
            .args(["child_entry", "--exact", "--nocapture", "--test-threads=1", "-q"])
            .env(CHILD_DIR, &dir)
            .env(CHILD_SEED, rng.next().to_string())
            .env(CHILD_POLICY, rng.below(4).to_string())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut lines = Vec::new();
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    // A line without its newline was cut by the kill: not acknowledged to us.
                    Ok(_) if buf.ends_with(b"\n") => lines.push(String::from_utf8_lossy(&buf).into_owned()),
                    Ok(_) => break,
                }
            }
            lines
        });
        let wait = match rng.below(10) {
            0 => rng.below(3),
            1..=7 => 3 + rng.below(30),
            _ => 30 + rng.below(120),
        };
        std::thread::sleep(Duration::from_millis(wait));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        let lines = reader.join().unwrap();
        if status.signal() != Some(9) {
            panic!(
                "iteration {it}: the child ended by itself ({status}) before the kill:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        let before = acked.len();
        for l in lines.iter().filter(|l| l.starts_with("ACK ")) {
            let f: Vec<&str> = l.split_whitespace().collect();
            acked.push(Acked { session: f[1].into(), shown: f[2].into(), seed: f[3].parse().unwrap(), len: f[4].parse().unwrap() });
        }
        if acked.len() == before {
            stats.killed_before_first_ack += 1;
        }
        stats.acked += (acked.len() - before) as u64;
        let mut s = verify(&dir, &acked, &mut stats, it);
        // The store accepts appends after the crash.
        let cseed = rng.next();
        let rec = Record { index: 0, action: action(cseed), observation: content(cseed, 100), returncode: None };
        let m = s.append(&SessionId("s0".into()), &rec, 1).unwrap_or_else(|e| panic!("iteration {it}: append after reopen: {e}"));
        acked.push(Acked { session: "s0".into(), shown: m.shown, seed: cseed, len: 100 });
        drop(s);
        stats.iterations += 1;
    }
    verify(&dir, &acked, &mut stats, iters);
    eprintln!("crash loop done in {:.1?}: {stats:?}", t0.elapsed());
    assert!(stats.acked > 0, "no child ever acknowledged a record: the kill timing is too short");
}

fn iters(default: u64) -> u64 {
    std::env::var("ARC_SOAK_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

#[test]
fn sigkill_loop() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    crash_loop(iters(200));
}

/// The long form for `cargo xtask soak`: 10,000 iterations unless `ARC_SOAK_ITERS` says otherwise.
#[test]
#[ignore = "long soak; run by `cargo xtask soak`"]
fn soak() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    crash_loop(iters(10_000));
}
