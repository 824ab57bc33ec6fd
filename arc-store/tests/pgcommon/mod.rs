//! Helpers of the PostgreSQL tests: the server (from `LAM_TEST_PG_URL`,
//! which `scripts/test-postgres.sh` sets), a scratch schema per test,
//! writer child processes, and the integrity check every test ends with.
#![allow(dead_code)]

use arc_store::{PgOptions, PgStore};
use lam_core::{IdBook, ObsId, ObsStore, Record, SessionId, previews};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The server's URL, or `None` (the test is skipped, loudly) when none is
/// configured; with `LAM_REQUIRE_PG=1` a missing URL fails the test.
pub fn admin_url() -> Option<String> {
    match std::env::var("LAM_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(std::env::var("LAM_REQUIRE_PG").as_deref() != Ok("1"), "LAM_REQUIRE_PG=1 but LAM_TEST_PG_URL is not set: run scripts/test-postgres.sh");
            eprintln!("SKIPPED: LAM_TEST_PG_URL is not set (scripts/test-postgres.sh runs these tests against a throwaway server)");
            None
        }
    }
}

/// The password in `url` (for checking that no message repeats it).
pub fn password(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let auth = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    auth.rsplit_once('@').and_then(|(ui, _)| ui.split_once(':')).map(|(_, p)| p.to_string()).unwrap_or_default()
}

/// `url` with one more query parameter.
pub fn with_param(url: &str, kv: &str) -> String {
    format!("{url}{}{kv}", if url.contains('?') { '&' } else { '?' })
}

/// Run SQL through psql (`LAM_TEST_PSQL`, else `psql` on the PATH).
pub fn psql(url: &str, sql: &str) -> String {
    let bin = std::env::var("LAM_TEST_PSQL").unwrap_or_else(|_| "psql".into());
    let out = Command::new(&bin)
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    assert!(out.status.success(), "psql `{sql}` failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A schema of its own for one test (dropped afterwards): the store's tables
/// are created in it through `search_path`.
pub struct Scratch {
    pub url: String,
    pub admin: String,
    pub schema: String,
}

impl Scratch {
    pub fn new(admin: &str, name: &str) -> Scratch {
        let schema = format!("t_{name}_{}", std::process::id());
        psql(admin, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"));
        Scratch { url: with_param(admin, &format!("options=-csearch_path%3D{schema}")), admin: admin.to_string(), schema }
    }

    /// Run SQL with this scratch schema first on the search path.
    pub fn sql(&self, sql: &str) -> String {
        psql(&self.admin, &format!("SET search_path = {}; {sql}", self.schema))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            psql(&self.admin, &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}

/// xorshift64*.
pub struct Rng(pub u64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The observation named by `seed` (its length too is a function of the
/// seed, so equal seeds are equal observations): random bytes, mostly
/// invalid UTF-8; `big` makes them 40-200 KiB.
pub fn observation(seed: u64, big: bool) -> Record {
    let mut r = Rng::new(seed ^ 0xC0FF_EE00);
    let len = if big {
        40_000 + r.below(160_000) as usize
    } else {
        match r.below(10) {
            0 => 0,
            1..=7 => r.below(600) as usize,
            _ => 2000 + r.below(6000) as usize,
        }
    };
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next().to_le_bytes());
    }
    v.truncate(len);
    Record { index: (seed % 1000) as u32, action: format!("tool --case {}", seed % 7), observation: v, returncode: Some((seed % 3) as i32) }
}

/// Child-process mode (`LAM_PG_CHILD_URL` set): `threads` threads share one
/// store and append forever (or `n` each), printing `ACK session shown seed`
/// after each append returns, or `ERR message` and exit 3 on a failed append.
/// Sessions: `shared` (every child) and `own-K`; a third of the seeds come
/// from a pool of 40 every child draws from, so duplicates are appended
/// from several processes at once.
pub fn child_main() -> bool {
    let Ok(url) = std::env::var("LAM_PG_CHILD_URL") else { return false };
    let var = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (k, n, threads, big) = (var("LAM_PG_CHILD_ID", 0), var("LAM_PG_CHILD_N", 0), var("LAM_PG_CHILD_THREADS", 2), var("LAM_PG_CHILD_BIG", 0) == 1);
    let opts = PgOptions {
        max_delay: Duration::from_millis(var("LAM_PG_CHILD_DELAY_MS", 0)),
        reconnect_for: Duration::from_millis(var("LAM_PG_CHILD_RECONNECT_MS", 30_000)),
        ..PgOptions::default()
    };
    let store = PgStore::connect_with(&url, opts).unwrap_or_else(|e| fail(&e));
    let out = Arc::new(Mutex::new(std::io::stdout()));
    writeln!(out.lock().unwrap()).unwrap();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (mut store, out) = (store.clone(), out.clone());
            std::thread::spawn(move || {
                let mut r = Rng::new(k * 1000 + t + 1);
                for i in 0.. {
                    if n > 0 && i >= n {
                        break;
                    }
                    let session = if r.below(2) == 0 { "shared".to_string() } else { format!("own-{k}") };
                    let seed = if r.below(3) == 0 { r.below(40) } else { (k << 40) | (t << 32) | i };
                    match store.append(&SessionId(session.clone()), &observation(seed, big), 1) {
                        Ok(m) => {
                            let mut o = out.lock().unwrap();
                            writeln!(o, "ACK {session} {} {seed}", m.shown).unwrap();
                            o.flush().unwrap();
                        }
                        Err(e) => {
                            let _o = out.lock().unwrap();
                            fail(&e)
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    true
}

/// Child mode: report a failure on one line and exit 3.
fn fail(e: &dyn std::fmt::Display) -> ! {
    let mut o = std::io::stdout().lock();
    writeln!(o, "\nERR {}", e.to_string().replace('\n', " ")).unwrap();
    o.flush().unwrap();
    std::process::exit(3)
}

/// One acknowledged append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub session: String,
    pub shown: String,
    pub seed: u64,
}

/// What a writer child said so far.
#[derive(Debug, Default)]
pub struct Said {
    pub acks: Vec<Ack>,
    pub errors: Vec<String>,
    pub done: bool,
}

/// A running writer child and what it said.
pub struct Writer {
    pub child: Child,
    pub said: Arc<Mutex<Said>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// Start child `k` of test binary `test` (its `child_entry` test) with extra env.
    pub fn spawn(url: &str, k: u64, env: &[(&str, String)]) -> Writer {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env("LAM_PG_CHILD_URL", url)
            .env("LAM_PG_CHILD_ID", k.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, v) in env {
            cmd.env(key, v);
        }
        let mut child = cmd.spawn().expect("spawn writer child");
        let stdout = child.stdout.take().unwrap();
        let said = Arc::new(Mutex::new(Said::default()));
        let s = said.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut s = s.lock().unwrap();
                // The test harness may print `test child_entry ... ` before the first line.
                if let Some(i) = line.find("ACK ") {
                    let f: Vec<&str> = line[i + 4..].split(' ').collect();
                    s.acks.push(Ack { session: f[0].into(), shown: f[1].into(), seed: f[2].parse().unwrap() });
                } else if let Some(i) = line.find("ERR ") {
                    s.errors.push(line[i + 4..].to_string());
                }
            }
            s.lock().unwrap().done = true;
        });
        Writer { child, said, reader: Some(reader) }
    }

    pub fn acks(&self) -> usize {
        self.said.lock().unwrap().acks.len()
    }

    /// Wait until the child has acknowledged `n` appends (or stopped); false on timeout.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> bool {
        let end = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < end {
            let s = self.said.lock().unwrap();
            if s.acks.len() >= n || s.done {
                return s.acks.len() >= n;
            }
            drop(s);
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Wait for the child to exit; returns its exit status and what it said.
    pub fn finish(mut self) -> (std::process::ExitStatus, Said) {
        let st = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let said = std::mem::take(&mut *self.said.lock().unwrap());
        (st, said)
    }
}

/// Every acknowledged append reads back exactly, and duplicates of one
/// (session, seed) all got the same shown id.
pub fn check_acks(store: &PgStore, acks: &[Ack], big: bool) {
    let mut shown_of: BTreeMap<(String, u64), String> = BTreeMap::new();
    for a in acks {
        let first = shown_of.entry((a.session.clone(), a.seed)).or_insert_with(|| a.shown.clone());
        assert_eq!(first, &a.shown, "seed {} in {} acknowledged under two ids", a.seed, a.session);
    }
    for ((session, seed), shown) in &shown_of {
        let want = observation(*seed, big);
        let got = store.get(&SessionId(session.clone()), shown).unwrap();
        assert_eq!(got.as_deref(), Some(&want.observation[..]), "acknowledged §{shown} (seed {seed}) in {session} lost or changed");
    }
}

/// The whole archive is well formed: every row's body matches its id (the
/// store checks the SHA-1 on every get), its metadata matches its body, a
/// run's settings session's shown ids are exactly what one `IdBook` fed in
/// creation order would give, and the observations' shown ids follow the
/// store-wide rule (`lam_core::id`, [`check_shared_ids`]). Returns
/// (session, number of observations) pairs.
pub fn check_integrity(store: &PgStore) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let sessions = store.sessions().unwrap();
    let sorted: BTreeSet<_> = sessions.iter().cloned().collect();
    assert_eq!(sessions, sorted.into_iter().collect::<Vec<_>>(), "sessions are sorted");
    let mut shared = Vec::new();
    for s in &sessions {
        let mut book = IdBook::new();
        let ids = store.ids(s).unwrap();
        for shown in &ids {
            let m = store.meta(s, shown).unwrap().unwrap_or_else(|| panic!("{s}: listed §{shown} has no metadata"));
            let body = store.get(s, shown).unwrap().unwrap();
            assert_eq!(m.id, ObsId::of(m.action.as_bytes(), &body), "{s} §{shown}: id does not match content");
            assert_eq!(m.bytes, body.len() as u64);
            let (h, t) = previews(&body);
            assert_eq!((&m.head[..], &m.tail[..]), (&body[h], &body[t]), "{s} §{shown}: previews");
            assert_eq!(&m.shown, shown, "{s}: §{shown} resolves to the row showing it");
            if s.holds_observations() {
                shared.push((s.clone(), m.id, m.shown));
            } else {
                assert_eq!(book.visible(m.id), shown, "{s}: shown ids differ from IdBook in creation order");
            }
        }
        out.push((s.0.clone(), ids.len()));
    }
    check_shared_ids(&shared);
    out
}

/// The observations' shown ids (session, id, shown) follow the store-wide
/// rule, as far as it shows without the order they were given in: an
/// observation shows one id in every session; an id shown names one
/// observation; of two observations where one's id begins with the other's
/// shown id, the other's id does not begin with the one's (whichever came
/// second avoided the first); and a shown id longer than 4 hex was needed:
/// another observation's id begins with it less its last character.
pub fn check_shared_ids(rows: &[(SessionId, ObsId, String)]) {
    let mut shown_of: BTreeMap<String, (ObsId, String)> = BTreeMap::new();
    let mut named: BTreeMap<String, ObsId> = BTreeMap::new();
    for (s, id, shown) in rows {
        let (first, _) = shown_of.entry(id.hex()).or_insert((*id, shown.clone())).clone();
        assert_eq!(shown_of[&id.hex()].1, *shown, "{s}: {} shown two ways", id.hex());
        assert_eq!(*named.entry(shown.clone()).or_insert(first), *id, "§{shown} names two observations ({s})");
    }
    for (hex, (_, shown)) in &shown_of {
        let others = |p: &str| {
            shown_of
                .range(p.to_string()..)
                .take_while(|(h, _)| h.starts_with(p))
                .filter(|(h, _)| *h != hex)
                .map(|(h, (_, s))| (h.clone(), s.clone()))
                .collect::<Vec<_>>()
        };
        for (other, theirs) in others(shown) {
            assert!(!hex.starts_with(&theirs), "{hex} (§{shown}) and {other} (§{theirs}) each begin with the other's id");
        }
        if shown.len() > lam_core::MIN_SHOWN {
            assert!(!others(&shown[..shown.len() - 1]).is_empty(), "§{shown} is longer than it needs to be");
        }
    }
}
