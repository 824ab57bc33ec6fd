//! A long run stays flat: with a budget, every request reads the run's
//! ledger (one record per request of every conversation, in the run's
//! settings session) only from where this process last read it, so the
//! ledger rows a request reads do not grow with the run (issue 68: on
//! PostgreSQL a fresh conversation's request took 2.7 ms at a run's start
//! and 17.6 ms after 9,000 other requests, when every request read the
//! whole ledger). Counted, not timed: a store that counts the ids it hands
//! out of the settings session; real Claude Code requests (the first
//! requests of a transcript, each conversation made distinct by its task).
//! Timings on PostgreSQL: `scripts/bench-long-run.sh`, docs/deploy.md.

use arc_store::{AnyStore, MemStore};
use lam_core::{ObsMeta, ObsStore, Record, SessionId};
use lam_serve::replay::{Call, requests};
use lam_serve::{Api, Budget, Proxy, ServeConfig};
use lam_trajectory::agents::Agent;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A memory store that counts the ids it lists of settings sessions.
#[derive(Clone, Default)]
struct Counting {
    inner: Arc<Mutex<MemStore>>,
    listed: Arc<AtomicU64>,
}

impl Counting {
    fn count(&self, s: &SessionId, ids: &[String]) {
        if s.settings_run().is_some() {
            self.listed.fetch_add(ids.len() as u64, Ordering::Relaxed);
        }
    }
}

impl ObsStore for Counting {
    fn append(&mut self, s: &SessionId, r: &Record, t: u32) -> Result<ObsMeta, lam_core::Error> {
        ObsStore::append(&mut *self.inner.lock().unwrap(), s, r, t)
    }
    fn get(&self, s: &SessionId, id: &str) -> Result<Option<Vec<u8>>, lam_core::Error> {
        ObsStore::get(&*self.inner.lock().unwrap(), s, id)
    }
    fn meta(&self, s: &SessionId, id: &str) -> Result<Option<ObsMeta>, lam_core::Error> {
        ObsStore::meta(&*self.inner.lock().unwrap(), s, id)
    }
    fn ids(&self, s: &SessionId) -> Result<Vec<String>, lam_core::Error> {
        let ids = ObsStore::ids(&*self.inner.lock().unwrap(), s)?;
        self.count(s, &ids);
        Ok(ids)
    }
    fn ids_after(&self, s: &SessionId, after: Option<&str>) -> Result<Vec<String>, lam_core::Error> {
        let ids = ObsStore::ids_after(&*self.inner.lock().unwrap(), s, after)?;
        self.count(s, &ids);
        Ok(ids)
    }
    fn sessions(&self) -> Result<Vec<SessionId>, lam_core::Error> {
        ObsStore::sessions(&*self.inner.lock().unwrap())
    }
    fn claim(&mut self, s: &SessionId, r: &Record, t: u32) -> Result<Option<ObsMeta>, lam_core::Error> {
        ObsStore::claim(&mut *self.inner.lock().unwrap(), s, r, t)
    }
}

/// The first `n` requests Claude Code sent for a real transcript, or `None` when the corpus is absent.
fn real_requests(rel: &str, n: usize) -> Option<Vec<Vec<u8>>> {
    let path = lam_core::corpus_dir().join("agent-transcripts").join(rel);
    if !path.exists() {
        eprintln!("skipped: {} is absent", path.display());
        return None;
    }
    let t = lam_trajectory::read::read_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).remove(0);
    let calls: Vec<Call> =
        t.records.iter().take(n).map(|r| Call::from_action(&r.action, String::from_utf8_lossy(&r.observation).into_owned(), String::new())).collect();
    Some(requests(Agent::ClaudeCode, &t.task, &calls).into_iter().take(n).collect())
}

fn proxy(store: &Counting) -> Proxy {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.run = Some("long".into());
    cfg.engine.budget = Some(Budget::new(200_000, None, None).unwrap());
    Proxy::open_on(cfg, Box::new(store.clone()) as AnyStore).unwrap()
}

#[test]
fn the_ledger_rows_a_request_reads_do_not_grow_with_the_run() {
    let Some(first) = real_requests("spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", 3) else { return };
    let store = Counting::default();
    let p = proxy(&store);
    // 600 conversations of 3 requests each: the same real requests, each
    // conversation its own by its first message's text.
    let (conversations, per) = (600usize, first.len());
    let mut listed = Vec::new();
    for c in 0..conversations {
        let tag = format!("conversation {c}: ");
        for body in &first {
            let text = String::from_utf8(body.clone()).unwrap();
            let body = text.replacen("\"text\":\"", &format!("\"text\":\"{tag}"), 1).into_bytes();
            let before = store.listed.load(Ordering::Relaxed);
            p.try_rewrite(Api::Messages, None, &body).unwrap();
            listed.push(store.listed.load(Ordering::Relaxed) - before);
        }
    }
    let n = conversations * per;
    assert_eq!(p.stats().sessions_created, conversations as u64, "one proxy session per conversation");
    let ledger = ObsStore::ids(&*store.inner.lock().unwrap(), &SessionId::settings_of("long")).unwrap().len();
    assert!(ledger >= n, "a ledger record per request ({ledger} of {n})");
    let (early, late) = (listed[..100].iter().max().unwrap(), listed[n - 100..].iter().max().unwrap());
    eprintln!("{n} requests; ledger rows read per request: at most {early} in the first 100, {late} in the last 100 ({ledger} in the ledger)");
    assert!(*late <= 2 && *early <= 2, "ledger rows read per request: first 100 at most {early}, last 100 at most {late}");
}
