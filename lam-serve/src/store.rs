//! The archive as every session shares it: one store, locked per call
//! only, behind a health gate.
//!
//! A store outage must cost requests milliseconds, not the store's whole
//! reconnect window each. So the proxy opens a PostgreSQL store with a
//! reconnect window of [`RECONNECT_FOR`], and the first call that finds the
//! store out of reach (`arc_store::is_unavailable`) marks it down: every
//! later call fails at once without touching it, one line on standard
//! error says so, and a background thread asks the store once every
//! [`PROBE_EVERY`] until it answers, then marks it up (and says so). What
//! admission could not archive meanwhile goes upstream whole and is
//! archived when a later request carries it again (`conversation`).

use crate::sync::lock;
use arc_store::{AnyStore, StoreError};
use lam_core::{ObsMeta, ObsStore, Record, SessionId};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a lost PostgreSQL connection is retried inside one call before
/// the call fails and the store is marked down.
pub(crate) const RECONNECT_FOR: Duration = Duration::from_secs(1);

/// How often a store marked down is asked whether it is back.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The session the probe lists (never written): any answer means the store is back.
const PROBE_SESSION: &str = "lam-serve.probe";

/// The shared store and whether it is reachable.
pub(crate) struct SharedStore {
    store: Arc<Mutex<AnyStore>>,
    health: Arc<Health>,
}

/// Whether the store is marked down, and how often it was.
#[derive(Debug, Default)]
struct Health {
    down: AtomicBool,
    outages: AtomicU64,
    /// The store as it may be printed.
    shown: String,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore").field("health", &self.health).finish_non_exhaustive()
    }
}

impl SharedStore {
    /// `store`, shown in messages as `shown`, reachable until a call says otherwise.
    pub(crate) fn new(store: AnyStore, shown: String) -> Self {
        Self { store: Arc::new(Mutex::new(store)), health: Arc::new(Health { shown, ..Health::default() }) }
    }

    /// Whether the store is marked down now.
    pub(crate) fn is_down(&self) -> bool {
        self.health.down.load(Ordering::Acquire)
    }

    /// Outages so far (times the store was marked down).
    pub(crate) fn outages(&self) -> u64 {
        self.health.outages.load(Ordering::Relaxed)
    }

    /// `f` on the store, unless it is marked down (then an unavailable
    /// error at once); a call that finds it out of reach marks it down.
    fn call<T>(&self, op: &'static str, f: impl FnOnce(&mut AnyStore) -> Result<T, lam_core::Error>) -> Result<T, lam_core::Error> {
        if self.is_down() {
            let reason = format!("marked down after an earlier call found it out of reach; asked again every {} s", PROBE_EVERY.as_secs());
            return Err(StoreError::Unavailable { target: self.health.shown.clone(), op, reason }.into());
        }
        let r = f(&mut lock(&self.store));
        if let Err(e) = &r
            && arc_store::is_unavailable(e)
        {
            self.mark_down(e);
        }
        r
    }

    /// Mark the store down (once per outage: one line, one probe thread).
    fn mark_down(&self, why: &lam_core::Error) {
        if self.health.down.swap(true, Ordering::AcqRel) {
            return;
        }
        self.health.outages.fetch_add(1, Ordering::Relaxed);
        say!(
            "lam serve: the store is out of reach ({why}); new tool results go upstream whole and unarchived until it is back \
             (asked every {} s), and each is archived when a request carries it again",
            PROBE_EVERY.as_secs()
        );
        let (store, health) = (self.store.clone(), self.health.clone());
        let spawned = std::thread::Builder::new().name("lam-store-probe".into()).spawn(move || probe(&store, &health));
        if let Err(e) = spawned {
            // No probe: let the next call find out for itself.
            self.health.down.store(false, Ordering::Release);
            say!("lam serve: could not start the store probe ({e}); the next call tries the store again");
        }
    }
}

/// Ask the store every [`PROBE_EVERY`] until it answers (or the proxy is
/// gone), then mark it up.
fn probe(store: &Arc<Mutex<AnyStore>>, health: &Health) {
    let since = Instant::now();
    loop {
        std::thread::sleep(PROBE_EVERY);
        if Arc::strong_count(store) == 1 {
            return;
        }
        if lock(store).ids(&SessionId::new(PROBE_SESSION)).is_ok() {
            health.down.store(false, Ordering::Release);
            say!("lam serve: the store {} is back after {:.1} s; archiving resumes", health.shown, since.elapsed().as_secs_f64());
            return;
        }
    }
}

impl ObsStore for &SharedStore {
    fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, lam_core::Error> {
        self.call("append", |s| s.append(session, record, tokens))
    }
    fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, lam_core::Error> {
        self.call("get", |s| s.get(session, shown))
    }
    fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, lam_core::Error> {
        self.call("meta", |s| s.meta(session, shown))
    }
    fn ids(&self, session: &SessionId) -> Result<Vec<String>, lam_core::Error> {
        self.call("ids", |s| s.ids(session))
    }
    fn ids_after(&self, session: &SessionId, after: Option<&str>) -> Result<Vec<String>, lam_core::Error> {
        self.call("ids", |s| s.ids_after(session, after))
    }
    fn sessions(&self) -> Result<Vec<SessionId>, lam_core::Error> {
        self.call("sessions", |s| s.sessions())
    }
    fn flush(&mut self) -> Result<(), lam_core::Error> {
        self.call("flush", |s| s.flush())
    }
    fn claim(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<Option<ObsMeta>, lam_core::Error> {
        self.call("claim", |s| s.claim(session, record, tokens))
    }
}

/// A store that goes out of reach and comes back when a test says so
/// (every call while it is out answers [`StoreError::Unavailable`]).
#[cfg(test)]
pub(crate) mod flaky {
    use super::*;

    /// A [`arc_store::MemStore`] and the switch that takes it out of reach.
    #[derive(Debug)]
    pub(crate) struct Flaky {
        pub inner: arc_store::MemStore,
        pub out: Arc<AtomicBool>,
        pub calls: Arc<AtomicU64>,
    }

    impl Flaky {
        fn check(&self) -> Result<(), lam_core::Error> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            match self.out.load(Ordering::Acquire) {
                true => Err(StoreError::Unavailable { target: "flaky".into(), op: "test", reason: "switched off".into() }.into()),
                false => Ok(()),
            }
        }
    }

    impl ObsStore for Flaky {
        fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, lam_core::Error> {
            self.check()?;
            ObsStore::append(&mut self.inner, session, record, tokens)
        }
        fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, lam_core::Error> {
            self.check()?;
            ObsStore::get(&self.inner, session, shown)
        }
        fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, lam_core::Error> {
            self.check()?;
            ObsStore::meta(&self.inner, session, shown)
        }
        fn ids(&self, session: &SessionId) -> Result<Vec<String>, lam_core::Error> {
            self.check()?;
            ObsStore::ids(&self.inner, session)
        }
        fn sessions(&self) -> Result<Vec<SessionId>, lam_core::Error> {
            self.check()?;
            ObsStore::sessions(&self.inner)
        }
        fn flush(&mut self) -> Result<(), lam_core::Error> {
            self.check()?;
            ObsStore::flush(&mut self.inner)
        }
        fn claim(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<Option<ObsMeta>, lam_core::Error> {
            self.check()?;
            ObsStore::claim(&mut self.inner, session, record, tokens)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The proxy's shared store is an `ObsStore` like any other.
    #[test]
    fn shared_store_conformance() {
        let shared = SharedStore::new(Box::new(arc_store::MemStore::new()), "mem:".into());
        lam_core::testsuite::obs_store(&mut &shared);
        let shared = SharedStore::new(Box::new(arc_store::MemStore::new()), "mem:".into());
        lam_core::testsuite::obs_store_collision(&mut &shared);
    }

    /// One call that finds the store out of reach marks it down: later
    /// calls fail at once without reaching it, until the probe finds it back.
    #[test]
    fn an_unreachable_store_is_marked_down_and_probed_back_up() {
        let (out, calls) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU64::new(0)));
        let flaky = flaky::Flaky { inner: arc_store::MemStore::new(), out: out.clone(), calls: calls.clone() };
        let shared = SharedStore::new(Box::new(flaky), "flaky".into());
        let rec = Record { index: 0, action: "cat a".into(), observation: b"a\n".to_vec(), returncode: None };
        let s = SessionId::new("s");
        assert!((&shared).append(&s, &rec, 1).is_err_and(|e| arc_store::is_unavailable(&e)));
        assert!(shared.is_down());
        let reached = calls.load(Ordering::Relaxed);
        let started = Instant::now();
        for _ in 0..100 {
            assert!((&shared).append(&s, &rec, 1).is_err_and(|e| arc_store::is_unavailable(&e)));
        }
        assert!(started.elapsed() < Duration::from_millis(100), "{:?}", started.elapsed());
        assert!(calls.load(Ordering::Relaxed) <= reached + 1, "calls while down do not reach the store (the probe may once)");
        out.store(false, Ordering::Release);
        let deadline = Instant::now() + PROBE_EVERY * 5;
        while shared.is_down() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!shared.is_down(), "the probe marks it up once it answers");
        assert!((&shared).append(&s, &rec, 1).is_ok());
        assert_eq!(shared.outages(), 1);
    }
}

/// Through the proxy: an outage costs requests no wait, and what went
/// upstream whole during it is archived (and citable) once the store is back,
/// its bytes unchanged.
#[cfg(test)]
mod outage {
    use super::flaky::Flaky;
    use super::*;
    use crate::api::Api;
    use crate::config::ServeConfig;
    use crate::proxy::Proxy;
    use serde_json::{Value, json};

    /// A chat conversation of one task and a `cat` of each output.
    fn chat(outs: &[String]) -> Vec<u8> {
        let mut msgs = vec![json!({"role": "user", "content": "fix the bug"})];
        for (i, out) in outs.iter().enumerate() {
            let id = format!("call_{i}");
            let args = format!("{{\"cmd\":\"cat f{i}.py\"}}");
            msgs.push(
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": args}}]}),
            );
            msgs.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
        }
        serde_json::to_vec(&json!({"model": "m", "messages": msgs})).unwrap()
    }

    fn output(k: usize) -> String {
        (0..60).map(|i| format!("src/m{k}/f{i}.py:{i}: def handler_{k}_{i}(request): return {}\n", k * 1000 + i)).collect()
    }

    fn proxy(budget: Option<crate::config::Budget>) -> (Proxy, Arc<AtomicBool>, Arc<AtomicU64>) {
        let (out, calls) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let store = Flaky { inner: arc_store::MemStore::new(), out: out.clone(), calls: calls.clone() };
        let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
        cfg.engine.budget = budget;
        (Proxy::open_on(cfg, Box::new(store)).unwrap(), out, calls)
    }

    fn messages(body: &[u8]) -> Vec<Value> {
        serde_json::from_slice::<Value>(body).unwrap()["messages"].as_array().unwrap().clone()
    }

    fn wait_up(p: &Proxy) {
        let deadline = Instant::now() + PROBE_EVERY * 5;
        while p.store_is_down() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!p.store_is_down(), "the probe finds the store back");
    }

    #[test]
    fn results_sent_in_an_outage_go_at_once_and_are_archived_when_carried_again() {
        let (p, out, calls) = proxy(None);
        let outs: Vec<String> = (0..5).map(output).collect();
        let first = p.try_rewrite(Api::ChatCompletions, None, &chat(&outs[..1])).unwrap();
        assert!(first.session.is_some());
        out.store(true, Ordering::Release);
        let mut during = Vec::new();
        let mut reached = Vec::new();
        for n in 2..=3 {
            let started = Instant::now();
            let r = p.try_rewrite(Api::ChatCompletions, None, &chat(&outs[..n])).unwrap();
            assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
            let sent = messages(&r.body);
            assert_eq!(sent[2 * n]["content"], outs[n - 1].as_str(), "whole while the store is out");
            during.push(sent);
            reached.push(calls.load(Ordering::Relaxed));
        }
        assert!(reached[1] <= reached[0] + 1, "a request in an outage does not reach the store (the probe may have asked once): {reached:?}");
        let st = p.stats();
        assert_eq!((st.store_unavailable, st.archived_late), (2, 0));
        out.store(false, Ordering::Release);
        wait_up(&p);
        let after = p.try_rewrite(Api::ChatCompletions, None, &chat(&outs[..5])).unwrap();
        let sent = messages(&after.body);
        assert_eq!(sent[..7], during[1][..], "what went whole goes whole again: the prefix is unchanged");
        let st = p.stats();
        assert_eq!((st.store_unavailable, st.archived_late), (2, 2), "both held results archived");
        assert_eq!(st.sessions.iter().map(|s| s.observations).sum::<u64>(), 5, "every result archived once: {st:?}");
    }

    #[test]
    fn a_result_archived_late_can_be_cited_by_a_budget() {
        let budget = crate::config::Budget::new(6000, Some(3000), Some(1)).unwrap();
        let (p, out, _) = proxy(Some(budget));
        let outs: Vec<String> = (0..12).map(output).collect();
        p.try_rewrite(Api::ChatCompletions, None, &chat(&outs[..1])).unwrap();
        out.store(true, Ordering::Release);
        let r = p.try_rewrite(Api::ChatCompletions, None, &chat(&outs[..2])).unwrap();
        assert_eq!(messages(&r.body)[4]["content"], outs[1].as_str());
        out.store(false, Ordering::Release);
        wait_up(&p);
        let mut last = Vec::new();
        for n in 3..=outs.len() {
            last = messages(&p.try_rewrite(Api::ChatCompletions, None, &chat(&outs[..n])).unwrap().body);
        }
        assert!(p.stats().sessions[0].cuts >= 1);
        let cited = last[4]["content"].as_str().unwrap();
        assert!(cited.starts_with("[lam: cited"), "the result held in the outage was cited: {}", &cited[..cited.len().min(200)]);
    }
}
