//! Crash safety and media faults: a child process (this test binary,
//! re-executed in child mode) appends records and prints each acknowledged
//! id after `append` returns; the parent SIGKILLs it at random times. Between
//! kills the parent injects media faults into the store's files: a flipped
//! bit in a random record, a zero-filled tail (the last blocks of the last
//! segment lost), a zero-filled or garbage new segment; and some children
//! run under a file-size limit (`prlimit --fsize`, SIGXFSZ ignored), so their
//! writes come up short and then fail with EFBIG, as on a full disk. Then the
//! parent reopens the store and checks the invariant: every acknowledged
//! record is either returned with its exact bytes or reported damaged (by id,
//! or by a reported damaged place that covers where it was), never silently
//! missing and never wrong bytes; every indexed record reads back and matches
//! its id; and the store accepts appends again.
//!
//! `sigkill_loop` runs `ARC_SOAK_ITERS` iterations (default 200);
//! `soak` (ignored; `cargo xtask soak store`) runs `ARC_SOAK_ITERS` or 10,000.
//! `ARC_SOAK_FAULTS=0` turns the media faults off.

use arc_store::{Durability, FileStore, Options, StoreError, format, inspect_segment};
use lam_core::{ObsId, ObsStore, Record, SessionId};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DIR: &str = "ARC_CRASH_CHILD_DIR";
const CHILD_SEED: &str = "ARC_CRASH_CHILD_SEED";
const CHILD_POLICY: &str = "ARC_CRASH_CHILD_POLICY";
const CHILD_LIMITED: &str = "ARC_CRASH_CHILD_LIMITED";

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
    let out = std::io::stdout();
    let mut s = match FileStore::open_with(&dir, options(policy)) {
        Ok(s) => s,
        Err(e) => {
            // A full disk can stop even the open (the quarantine copy): wait for the kill.
            writeln!(out.lock(), "OPENFAIL {e}").unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    let mut r = Rng::new(seed);
    let mut failed = 0u32;
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
        let m = match s.append(&SessionId(format!("s{session}")), &rec, len as u32 / 4) {
            Ok(m) => m,
            Err(e) if std::env::var_os(CHILD_LIMITED).is_some() => {
                // A short write under the file-size limit: acknowledged nothing.
                failed += 1;
                if failed <= 3 {
                    writeln!(out.lock(), "ERR {e}").unwrap();
                }
                continue;
            }
            Err(e) => panic!("child append: {e}"),
        };
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

impl Acked {
    fn id(&self) -> ObsId {
        ObsId::of(action(self.seed).as_bytes(), &content(self.seed, self.len))
    }
}

#[derive(Debug, Default)]
struct Stats {
    iterations: u64,
    acked: u64,
    torn_tails: u64,
    torn_bytes: u64,
    killed_before_first_ack: u64,
    records_checked: u64,
    bit_flips: u64,
    zero_tails: u64,
    zeroed_new_segments: u64,
    garbage_new_segments: u64,
    size_limited_children: u64,
    short_writes_seen: u64,
    open_failures: u64,
    acked_reported_damaged_by_id: u64,
    acked_reported_by_place: u64,
    damaged_places_reported: u64,
}

/// Where each record of the store sits: (session, id) -> (segment, offset, framed length).
type Places = HashMap<(String, ObsId), (PathBuf, u64, u64)>;

fn places(dir: &Path) -> Places {
    if !dir.exists() {
        // The child was killed before it created the store.
        return Places::new();
    }
    let s = FileStore::open_read_only(dir).unwrap();
    let segs = s.segment_paths();
    let mut out = Places::new();
    for (i, seg) in segs.iter().enumerate() {
        let data = std::fs::read(seg).unwrap();
        let n = format::parse_segment_file_name(seg.file_name().unwrap().to_str().unwrap()).unwrap();
        for (off, len) in inspect_segment(&data, n, i + 1 == segs.len()).unwrap().records {
            let (r, _) = format::decode(&data[off as usize..]).unwrap();
            out.entry((String::from_utf8_lossy(r.session).into_owned(), r.id)).or_insert((seg.clone(), off, len));
        }
    }
    out
}

/// A media fault on the store's files, as (file, offset, length) of the bytes it touched.
fn media_fault(dir: &Path, rng: &mut Rng, stats: &mut Stats) -> Option<(PathBuf, u64, u64)> {
    let segs = FileStore::open_read_only(dir).ok()?.segment_paths();
    let last = segs.last()?.clone();
    match rng.below(20) {
        0..=2 => {
            // A flipped bit in a random record of any segment.
            let p = places(dir);
            let mut all: Vec<_> = p.values().cloned().collect();
            if all.is_empty() {
                return None;
            }
            all.sort();
            let (seg, off, len) = all[rng.below(all.len() as u64) as usize].clone();
            let at = off + rng.below(len);
            let mut b = std::fs::read(&seg).unwrap();
            b[at as usize] ^= 1 << rng.below(8);
            std::fs::write(&seg, &b).unwrap();
            stats.bit_flips += 1;
            Some((seg, at, 1))
        }
        3..=4 => {
            // The last blocks of the last segment lost: zeros.
            let mut b = std::fs::read(&last).unwrap();
            let k = (1 + rng.below(3000) as usize).min(b.len());
            let from = b.len() - k;
            b[from..].fill(0);
            std::fs::write(&last, &b).unwrap();
            stats.zero_tails += 1;
            Some((last, from as u64, k as u64))
        }
        5 => {
            // A new segment created but never written: zeros.
            let n = format::parse_segment_file_name(last.file_name().unwrap().to_str().unwrap()).unwrap() + 1;
            let zeros = [1usize, 15, 16, 17, 4096][rng.below(5) as usize];
            std::fs::write(dir.join(format::segment_file_name(n)), vec![0u8; zeros]).unwrap();
            stats.zeroed_new_segments += 1;
            None
        }
        6 => {
            // A new segment of garbage.
            let n = format::parse_segment_file_name(last.file_name().unwrap().to_str().unwrap()).unwrap() + 1;
            let bytes: Vec<u8> = (0..16 + rng.below(48)).map(|_| rng.next() as u8).collect();
            std::fs::write(dir.join(format::segment_file_name(n)), bytes).unwrap();
            stats.garbage_new_segments += 1;
            None
        }
        _ => None,
    }
}

/// Reopen as the writer and check the invariant. Acknowledged records that
/// are reported damaged leave `acked` (they stay reported on every open).
fn verify(dir: &Path, acked: &mut Vec<Acked>, faults: &[(PathBuf, u64, u64)], where_: &Places, stats: &mut Stats, it: u64) -> FileStore {
    let s = FileStore::open(dir).unwrap_or_else(|e| panic!("iteration {it}: reopen failed: {e}"));
    let rc = s.recovery().clone();
    if rc.torn_bytes > 0 {
        stats.torn_tails += 1;
        stats.torn_bytes += rc.torn_bytes;
    }
    if rc.repair_log.is_some() {
        // New quarantine copies were made: count the damaged places this open found.
        stats.damaged_places_reported += rc.damaged().count() as u64;
    }
    let hit = |a: &Acked| {
        where_.get(&(a.session.clone(), a.id())).filter(|(seg, off, len)| faults.iter().any(|(f, at, n)| f == seg && at < &(off + len) && off < &(at + n)))
    };
    acked.retain(|a| {
        let sid = SessionId(a.session.clone());
        let want = content(a.seed, a.len);
        match s.get_bytes(&sid, &a.shown) {
            Ok(Some(got)) => {
                assert!(got == want, "iteration {it}: acknowledged §{} in {} came back with wrong bytes", a.shown, a.session);
                true
            }
            Err(StoreError::Damaged { .. }) => {
                assert!(hit(a).is_some(), "iteration {it}: §{} in {} reported damaged, but no fault touched it\n{rc}", a.shown, a.session);
                stats.acked_reported_damaged_by_id += 1;
                false
            }
            Ok(None) => {
                let Some((seg, off, len)) = hit(a) else {
                    panic!("iteration {it}: acknowledged §{} in {} is missing and no fault touched it\n{rc}", a.shown, a.session)
                };
                assert!(
                    rc.damage.iter().any(|d| d.covers(seg, *off, *len)),
                    "iteration {it}: acknowledged §{} in {} is missing and no reported damage covers {}:{off}\n{rc}",
                    a.shown,
                    a.session,
                    seg.display()
                );
                stats.acked_reported_by_place += 1;
                false
            }
            Err(e) => panic!("iteration {it}: corrupt read of §{}: {e}", a.shown),
        }
    });
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

fn faults_on() -> bool {
    std::env::var("ARC_SOAK_FAULTS").map_or(true, |v| v != "0")
}

fn prlimit() -> bool {
    Command::new("prlimit").arg("--version").output().is_ok_and(|o| o.status.success())
}

fn crash_loop(iters: u64) {
    let seed = std::env::var("ARC_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    let faults_on = faults_on();
    let limits = faults_on && prlimit();
    eprintln!("crash loop: {iters} iterations, ARC_SOAK_SEED={seed}, media faults {}, size limits {}", on(faults_on), on(limits));
    if faults_on && !limits {
        eprintln!("note: `prlimit` (util-linux) is not available: no short-write children this run");
    }
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut stats = Stats::default();
    let mut acked: Vec<Acked> = Vec::new();
    let mut faults: Vec<(PathBuf, u64, u64)> = Vec::new();
    let mut dir = root.path().join("store-0");
    let t0 = Instant::now();
    for it in 0..iters {
        if it % 25 == 0 {
            // A fresh store now and then keeps reopen (a full scan) cheap in long soaks.
            let _ = std::fs::remove_dir_all(&dir);
            dir = root.path().join(format!("store-{it}"));
            acked.clear();
            faults.clear();
        }
        let stderr_path = root.path().join("child-stderr");
        let limited = limits && rng.below(7) == 0;
        let mut cmd = if limited {
            // SIGXFSZ ignored (inherited through exec), so a write past the limit comes up short, then fails with EFBIG.
            let limit = 2048 + rng.below(96 << 10);
            let mut c = Command::new("sh");
            c.args(["-c", "trap '' XFSZ; exec prlimit --fsize=\"$1\" -- \"$0\" child_entry --exact --nocapture --test-threads=1 -q"])
                .arg(&exe)
                .arg(format!("{limit}:{limit}"))
                .env(CHILD_LIMITED, "1");
            stats.size_limited_children += 1;
            c
        } else {
            let mut c = Command::new(&exe);
            c.args(["child_entry", "--exact", "--nocapture", "--test-threads=1", "-q"]);
            c
        };
        let mut child = cmd
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
        // With `sh` in front the exec may not have happened yet: kill whatever runs under our pid.
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        let lines = reader.join().unwrap();
        if status.signal() != Some(9) {
            panic!("iteration {it}: the child ended by itself ({status}) before the kill:\n{}", std::fs::read_to_string(&stderr_path).unwrap_or_default());
        }
        let before = acked.len();
        for l in &lines {
            if let Some(rest) = l.strip_prefix("ACK ") {
                let f: Vec<&str> = rest.split_whitespace().collect();
                acked.push(Acked { session: f[0].into(), shown: f[1].into(), seed: f[2].parse().unwrap(), len: f[3].parse().unwrap() });
            } else if l.starts_with("ERR ") {
                stats.short_writes_seen += 1;
            } else if l.starts_with("OPENFAIL ") {
                stats.open_failures += 1;
            }
        }
        if acked.len() == before {
            stats.killed_before_first_ack += 1;
        }
        stats.acked += (acked.len() - before) as u64;
        let where_ = places(&dir);
        if faults_on && let Some(f) = media_fault(&dir, &mut rng, &mut stats) {
            faults.push(f);
        }
        let mut s = verify(&dir, &mut acked, &faults, &where_, &mut stats, it);
        // The store accepts appends after the crash and the faults.
        let cseed = rng.next();
        let rec = Record { index: 0, action: action(cseed), observation: content(cseed, 100), returncode: None };
        let m = s.append(&SessionId("s0".into()), &rec, 1).unwrap_or_else(|e| panic!("iteration {it}: append after reopen: {e}"));
        acked.push(Acked { session: "s0".into(), shown: m.shown, seed: cseed, len: 100 });
        drop(s);
        stats.iterations += 1;
    }
    let where_ = places(&dir);
    drop(verify(&dir, &mut acked, &faults, &where_, &mut stats, iters));
    eprintln!("crash loop done in {:.1?}: {stats:#?}", t0.elapsed());
    assert!(stats.acked > 0, "no child ever acknowledged a record: the kill timing is too short");
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
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

/// The long form for `cargo xtask soak store`: 10,000 iterations unless `ARC_SOAK_ITERS` says otherwise.
#[test]
#[ignore = "long soak; run by `cargo xtask soak store`"]
fn soak() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    crash_loop(iters(10_000));
}
