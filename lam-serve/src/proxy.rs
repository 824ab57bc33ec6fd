//! The proxy as a library: a request's body in, the body to forward out,
//! through the stages in order (parse, registry, conversation, admission,
//! rewrite, stats). The HTTP side (`http`) calls [`Proxy::try_rewrite`].

use crate::api::Api;
use crate::engine::Engine;
use crate::registry::{self, Registry};
use crate::request::Parsed;
use crate::stats::{Counters, Held, Stats};
use crate::sync::lock;
use crate::{Error, ServeConfig, json};
use arc_store::Access;
use lam_core::{ObsStore as _, Record, SessionId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the proxy forwards for one request.
#[derive(Debug, Clone)]
pub struct Rewritten {
    /// The body to send upstream.
    pub body: Vec<u8>,
    /// The store session of the conversation; `None` when the body holds no
    /// conversation the proxy understands (it is then forwarded as it came).
    pub session: Option<String>,
    /// The proxy's number for the conversation ([`SessionStats::conversation`](crate::stats::SessionStats)), with `session`.
    pub conversation: Option<u64>,
    /// With `--budget`: where the upstream's count of this request's input goes.
    pub(crate) sink: Option<crate::usage::Sink>,
    /// What the request costs direct and as forwarded, with `session`.
    pub receipt: Option<crate::bill::Receipt>,
}

impl Rewritten {
    /// The upstream counted `tokens` of input for this request (its
    /// answer's `usage`, `crate::usage`): with a budget, the
    /// conversation's calibration learns from it; otherwise nothing.
    pub fn report_usage(&self, tokens: u64) {
        if let Some(sink) = &self.sink {
            sink.report(tokens);
        }
    }

    /// `body` forwarded as it came, in no session.
    fn as_it_came(body: &[u8]) -> Self {
        Self { body: body.to_vec(), session: None, conversation: None, sink: None, receipt: None }
    }
}

/// When a request arrived, and the prompt cache's TTL to judge it by: a
/// request more than the TTL after its conversation's previous one finds
/// the cache cold, where a cut costs nothing (`crate::budget`). The time
/// comes in with the request (the HTTP layer's clock, `lam replay`'s
/// transcript timestamps), never from a clock read deeper in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Unix milliseconds; `None`: unknown (the request is never cold).
    pub at_ms: Option<i64>,
    /// The TTL in place of the proxy's (`--cache-ttl`, else the request's
    /// `cache_control.ttl`, else the provider's default).
    pub ttl: Option<crate::bill::CacheTtl>,
}

impl Arrival {
    /// Now, by the system clock.
    pub fn now() -> Self {
        let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Self { at_ms: Some(ms), ttl: None }
    }

    /// At `at_ms` (Unix milliseconds).
    pub fn at(at_ms: Option<i64>) -> Self {
        Self { at_ms, ttl: None }
    }
}

/// The proxy's state: engine, sessions, counters. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

/// The requests per compacted route and every other proxy-wide counter.
#[derive(Debug, Default)]
struct RouteCounters {
    requests: [AtomicU64; Api::ALL.len()],
    counts: Counters,
}

#[derive(Debug)]
struct Inner {
    cfg: ServeConfig,
    engine: Engine,
    sessions: Mutex<Registry>,
    counters: RouteCounters,
    run: String,
    /// Where `--log` lines go.
    log: crate::log::Log,
}

/// The store session that records the settings of run `name` (`--run`):
/// [`SessionId::settings_of`], the rule `lam recall --list` reads back.
pub(crate) fn settings_session(name: &str) -> SessionId {
    SessionId::settings_of(name)
}

/// Record this proxy's settings as run `name`'s, or check them against the
/// ones recorded by the replica that started the run first (one atomic
/// claim of the store session [`settings_session`]): a replica with other
/// settings would forward other bytes for the run's conversations, so it
/// does not start.
fn claim_run(engine: &Engine, cfg: &ServeConfig, name: &str) -> Result<(), Error> {
    if !crate::config::valid_run(name) {
        return Err(Error::Setting(format!("--run `{name}`: expected 1 to 64 letters, digits, `-`, `_` or `.`")));
    }
    let mut ours = cfg.engine.identity(&engine.model_id);
    if let (None, Some(d)) = (cfg.engine.budget, cfg.default_budget) {
        ours.push_str(&format!("budget: default ceiling {} keep {}\n", d.ceiling, d.keep.unwrap_or(crate::config::Budget::KEEP)));
    }
    let session = settings_session(name);
    let rec = Record { index: 0, action: "lam serve --run".into(), observation: ours.clone().into_bytes(), returncode: None };
    let store_err = |e: lam_core::Error| Error::Store { spec: cfg.store.display(), source: Box::new(e.into()) };
    if (&engine.store).claim(&session, &rec, 0).map_err(store_err)?.is_some() {
        return Ok(());
    }
    let first = (&engine.store).ids(&session).map_err(store_err)?.into_iter().next();
    let theirs = match first {
        Some(id) => (&engine.store).get(&session, &id).map_err(store_err)?.map(|b| String::from_utf8_lossy(&b).into_owned()),
        None => None,
    };
    let indent = |t: &str| t.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n");
    let differs = theirs.as_deref().map(|t| settings_differences(t, &ours)).filter(|d| !d.is_empty());
    let differs = differs.map_or(String::new(), |d| format!(" (differs: {})", d.join("; ")));
    Err(Error::Setting(format!(
        "--run `{name}`: the store {} holds this run with other settings than this process's{differs}; a replica with other settings \
         would forward other bytes for the run's conversations, so it does not start. Start it with the run's settings, or \
         give it another --run name (its conversations then start new store sessions).\n  the run's (store session `{}`):\n{}\n  this process's:\n{}",
        cfg.store.display(),
        session.0,
        indent(theirs.as_deref().unwrap_or("(unreadable)")),
        indent(&ours)
    )))
}

/// The settings that differ between two [`crate::EngineSettings::identity`]
/// texts (`key: value` lines; a line only one has counts as unset in the
/// other; a line without `: `, the format's name, is `format`): `key: ours
/// (the run's: theirs)`, in the order of `ours`.
fn settings_differences(theirs: &str, ours: &str) -> Vec<String> {
    let pairs = |t: &str| -> Vec<(String, String)> {
        let pair = |l: &str| l.split_once(": ").map_or(("format".to_string(), l.to_string()), |(k, v)| (k.to_string(), v.to_string()));
        t.lines().filter(|l| !l.trim().is_empty()).map(pair).collect()
    };
    let (theirs, ours) = (pairs(theirs), pairs(ours));
    let value = |kv: &[(String, String)], k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let mut keys: Vec<&String> = ours.iter().map(|(k, _)| k).collect();
    keys.extend(theirs.iter().map(|(k, _)| k).filter(|k| !ours.iter().any(|(o, _)| o == *k)));
    let shown = |v: Option<String>| match v {
        None => "(not set)".to_string(),
        Some(v) if v.is_empty() => "(none)".to_string(),
        Some(v) => v,
    };
    keys.into_iter()
        .filter_map(|k| {
            let (o, t) = (value(&ours, k), value(&theirs, k));
            (o != t).then(|| format!("{k}: {} (the run's: {})", shown(o), shown(t)))
        })
        .collect()
}

/// The `--log` line for a request forwarded over its budget: plain values.
fn over_budget_warning(session: &str, conversation: u64, tokens: u64) -> String {
    format!(
        "lam serve: warning: session {session} (conversation {conversation}) forwarded {tokens} tokens, over its budget: what cannot be cited (text, the system prompt and tools, the newest results) exceeds it"
    )
}

impl Proxy {
    /// Open the store (the one writer) and load the encoders.
    /// A PostgreSQL store retries a lost connection for
    /// `crate::store::RECONNECT_FOR` only: past it, the store is marked
    /// down and requests go on without it (`crate::store`).
    pub fn open(cfg: ServeConfig) -> Result<Self, Error> {
        let store = arc_store::open_with_reconnect(&cfg.store, Access::ReadWrite, crate::store::RECONNECT_FOR)
            .map_err(|source| Error::Store { spec: cfg.store.display(), source: Box::new(source) })?;
        Self::open_on(cfg, store)
    }

    /// [`Proxy::open`] on a store already open (`cfg.store` names it in
    /// messages): several proxies in one process on one store handle are
    /// replicas of a deployment (tests; a file store has one writer).
    pub fn open_on(cfg: ServeConfig, store: arc_store::AnyStore) -> Result<Self, Error> {
        let mut engine = Engine::open(&cfg.engine, store, cfg.store.display())?;
        engine.cite_order = cfg.cite_order;
        if let Some(p) = &cfg.prices {
            engine.prices = p.clone();
        }
        let run = match &cfg.run {
            Some(name) => {
                claim_run(&engine, &cfg, name)?;
                name.clone()
            }
            None => {
                let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                format!("serve-{secs}-{}", std::process::id())
            }
        };
        let counters = RouteCounters::default();
        let log = crate::log::Log::open(&cfg)?;
        Ok(Self { inner: Arc::new(Inner { cfg, engine, sessions: Mutex::new(Registry::default()), counters, run, log }) })
    }

    /// The exact bytes archived under `shown` (`§id`, with or without the
    /// `§`), from whichever session holds them (`arc_store::find`).
    pub fn recall(&self, shown: &str) -> Result<Vec<u8>, Error> {
        let store = &self.inner.engine.store;
        arc_store::find(&store, None, shown).map(|f| f.bytes).map_err(|e| Error::Store { spec: self.inner.cfg.store.display(), source: Box::new(e) })
    }

    /// The price table requests are put in dollars by (`--prices`, else the built-in).
    pub fn prices(&self) -> &crate::bill::prices::Prices {
        &self.inner.engine.prices
    }

    /// The settings.
    pub fn config(&self) -> &ServeConfig {
        &self.inner.cfg
    }

    /// Where `--log` lines go.
    pub(crate) fn log(&self) -> &crate::log::Log {
        &self.inner.log
    }

    /// This proxy's run: the store sessions it names itself are
    /// `RUN-<conversation key>` (`RUN-<key>@K` where the store already holds
    /// that name for another conversation, `arc_store::claim_session`); a
    /// client's `x-lam-session` name is its own.
    pub fn run_id(&self) -> &str {
        &self.inner.run
    }

    /// The body to forward for a request to `api`'s route: its conversation
    /// matched to a session (named by `session`, else by prefix) and rewritten.
    /// Blocks while new observations are encoded; sessions rewrite in parallel.
    /// A body holding a conversation or preamble member twice is forwarded as
    /// it came ([`Proxy::try_rewrite`] refuses it).
    pub fn rewrite(&self, api: Api, session: Option<&str>, body: &[u8]) -> Rewritten {
        self.try_rewrite(api, session, body).unwrap_or_else(|_| Rewritten::as_it_came(body))
    }

    /// [`Proxy::rewrite`], refusing ([`Error::DuplicateKey`]) a body that
    /// holds `messages`, `input`, `system` or `instructions` twice.
    pub fn try_rewrite(&self, api: Api, session: Option<&str>, body: &[u8]) -> Result<Rewritten, Error> {
        self.try_rewrite_within(api, session, body, None)
    }

    /// [`Proxy::try_rewrite`] under `budget` in place of the proxy's
    /// `--budget` (the `x-lam-budget` header). A conversation's cuts are a
    /// function of its items and the budget, so a client sends the same
    /// budget with every request of a conversation.
    pub fn try_rewrite_within(&self, api: Api, session: Option<&str>, body: &[u8], budget: Option<crate::config::Budget>) -> Result<Rewritten, Error> {
        self.try_rewrite_at(api, session, body, budget, Arrival::default())
    }

    /// [`Proxy::rewrite`] of a request that arrived at `arrival`: with a
    /// budget, a request that finds the prompt cache cold is cut to the
    /// target (`crate::budget`). Without a time it is never cold.
    pub fn rewrite_at(&self, api: Api, session: Option<&str>, body: &[u8], arrival: Arrival) -> Rewritten {
        self.try_rewrite_at(api, session, body, None, arrival).unwrap_or_else(|_| Rewritten::as_it_came(body))
    }

    /// [`Proxy::try_rewrite_within`] of a request that arrived at `arrival`
    /// (the HTTP layer: [`Arrival::now`] when the request came).
    pub fn try_rewrite_at(
        &self,
        api: Api,
        session: Option<&str>,
        body: &[u8],
        budget: Option<crate::config::Budget>,
        arrival: Arrival,
    ) -> Result<Rewritten, Error> {
        let c = &self.inner.counters;
        c.requests[api as usize].fetch_add(1, Ordering::Relaxed);
        let Some(req) = Parsed::parse(api, body) else {
            if let Some(k) = json::duplicate_key(body) {
                c.counts.refused.fetch_add(1, Ordering::Relaxed);
                return Err(Error::DuplicateKey(k));
            }
            c.counts.unparsed.fetch_add(1, Ordering::Relaxed);
            return Ok(Rewritten::as_it_came(body));
        };
        let inner = &self.inner;
        let found = registry::find_or_start(&inner.sessions, &inner.engine, &inner.run, session, &req, inner.cfg.max_sessions);
        let handle = match found {
            Ok(h) => h,
            Err(e) => {
                c.counts.unparsed.fetch_add(1, Ordering::Relaxed);
                self.log().line(format_args!("lam serve: no session ({e}); forwarding the request as it came"));
                return Ok(Rewritten::as_it_came(body));
            }
        };
        // The calibration its answers gave so far: this request's own
        // terms, which reach the bytes only as the ledger records them.
        let factor = handle.calibration.get();
        let budget = self.inner.cfg.budget_for(budget, req.model().as_deref());
        let rewritten = {
            let mut conv = lock(&handle.conv);
            // A panic inside admission must not answer 500 for the rest of
            // the conversation: its session is dropped (its state may be
            // half-updated) and this request goes as it came.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let ttl = crate::budget::cache_ttl(&req, arrival.ttl.or(self.inner.cfg.cache_ttl));
                let asked = crate::budget::Asked { budget, factor, at: arrival.at_ms, ttl };
                let (out, report) = conv.rewrite(&req, &self.inner.engine, asked);
                (out, report, conv.bytes())
            }))
        };
        let Ok((out, report, held)) = rewritten else {
            c.counts.failed_open.fetch_add(1, Ordering::Relaxed);
            lock(&self.inner.sessions).retire(&handle);
            say!("lam serve: rewriting a request failed inside lam (a bug; please report it); forwarding it as it came and starting a new session");
            return Ok(Rewritten::as_it_came(body));
        };
        lock(&self.inner.sessions).account(&handle, held, self.inner.cfg.max_memory);
        if report.outage.unavailable > 0 {
            c.counts.store_unavailable.fetch_add(1, Ordering::Relaxed);
        }
        c.counts.archived_late.fetch_add(report.outage.archived_late, Ordering::Relaxed);
        let agent_session = req.agent_session();
        let mut st = lock(&handle.stats);
        st.apply(&report);
        st.budget_tokens = budget.map_or(0, |b| b.tokens);
        if agent_session.is_some() {
            st.agent_session = agent_session;
        }
        let (session, conversation) = (Some(st.session.clone()), Some(st.conversation));
        drop(st);
        if report.budget.over_budget && self.log().on() {
            self.log().line(format_args!(
                "{}",
                over_budget_warning(session.as_deref().unwrap_or_default(), conversation.unwrap_or_default(), report.budget.input_tokens.unwrap_or(0))
            ));
        }
        let note = report.budget.usage_at.clone().map(|(session, point)| {
            let proxy = self.clone();
            crate::usage::Note(Arc::new(move |factor| proxy.note_usage(&session, point, factor)))
        });
        let sink = report.budget.input_tokens.map(|local| crate::usage::Sink { handle: handle.clone(), local, api, note });
        Ok(Rewritten { body: out, session, conversation, sink, receipt: report.receipt })
    }

    /// Record the factor an answer's count gave ([`crate::budget::ledger::Ledger::note_usage`]);
    /// a store that cannot take it is an error counted, and the next
    /// request of the conversation is folded as if it had not come.
    pub(crate) fn note_usage(&self, session: &SessionId, point: u128, factor: f64) {
        let engine = &self.inner.engine;
        if let Err(e) = engine.ledger.note_usage(&engine.store, session, point, factor) {
            self.inner.counters.counts.usage_unrecorded.fetch_add(1, Ordering::Relaxed);
            self.log().line(format_args!("lam serve: the count of an answer could not be recorded in store session `{}`: {e}", session.0));
        }
    }

    /// Every session's counters and the proxy's.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        let requests = Api::ALL.iter().map(|a| (a.name(), c.requests[*a as usize].load(Ordering::Relaxed))).collect();
        let held = {
            let reg = lock(&self.inner.sessions);
            let (evicted_sessions, evicted) = reg.evicted();
            Held { sessions: reg.stats(), created: reg.made(), evicted_sessions, evicted, requests, memory_bytes: reg.held() as u64, ..Held::default() }
        };
        let store = &self.inner.engine.store;
        c.counts.read(Held {
            memory_budget: self.inner.cfg.max_memory as u64,
            store_down: store.is_down(),
            store_outages: store.outages(),
            budget_tokens: self.inner.cfg.engine.budget.map(|b| b.tokens),
            ..held
        })
    }

    /// The counters in the Prometheus text format (`GET /metrics`).
    pub fn metrics(&self) -> String {
        self.stats().prometheus()
    }

    /// Whether the store is marked down now (an outage: `crate::store`).
    pub fn store_is_down(&self) -> bool {
        self.inner.engine.store.is_down()
    }

    /// Make every archived original durable and save the embedding cache.
    pub fn close(&self) -> Result<(), Error> {
        self.inner.engine.close()
    }

    /// Add one to a proxy-wide counter.
    pub(crate) fn count(&self, which: fn(&Counters) -> &AtomicU64) {
        which(&self.inner.counters.counts).fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(turns: &[&str]) -> Vec<u8> {
        let mut msgs = vec![serde_json::json!({"role": "user", "content": "fix the bug"})];
        for (i, out) in turns.iter().enumerate() {
            let id = format!("call_{i}");
            msgs.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"cat a.py\"}"}}]}));
            msgs.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": out}));
        }
        serde_json::to_vec(&serde_json::json!({"model": "m", "messages": msgs})).unwrap()
    }

    /// Each request is billed direct and as forwarded by `lam replay`'s
    /// rule: a first read goes whole and costs the same; a second read of
    /// the same output costs less through lam; the session sums the receipts.
    #[test]
    fn each_request_is_billed_direct_and_as_forwarded() {
        let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
        let out: String = (0..40).map(|i| format!("tests/test_{i}.py::test_case PASSED\n")).collect();
        let r1 = proxy.try_rewrite(Api::ChatCompletions, None, &chat(&[&out])).unwrap().receipt.unwrap();
        assert_eq!(r1.direct, r1.lam, "the first read goes whole");
        assert!(r1.direct > 300.0, "{r1:?}");
        let r2 = proxy.try_rewrite(Api::ChatCompletions, None, &chat(&[&out, &out])).unwrap().receipt.unwrap();
        assert!(r2.lam < r2.direct && r2.saved() > 200.0, "{r2:?}");
        // The shared prefix is a cache read (0.1): the second request costs less than the first direct.
        assert!(r2.direct < r1.direct + 0.2 * r1.direct, "{r1:?} {r2:?}");
        let st = proxy.stats();
        let s = &st.sessions[0];
        assert_eq!((s.billed_direct, s.billed_lam), (r1.direct + r2.direct, r1.lam + r2.lam));
        assert!(proxy.metrics().contains(&format!("lam_serve_billed_tokens_total {}\n", r1.lam + r2.lam)));
    }

    #[test]
    fn a_preamble_member_twice_is_refused_on_every_route() {
        let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
        let cases: [(Api, &str); 4] = [
            (Api::Messages, r#"{"model":"m","system":"a","max_tokens":5,"system":"b","messages":[{"role":"user","content":"hi"}]}"#),
            (Api::Messages, r#"{"model":"m","system":[{"type":"text","text":"a"}],"messages":[{"role":"user","content":"hi"}],"s\u0079stem":"b"}"#),
            (Api::Responses, r#"{"model":"m","instructions":"a","input":[{"role":"user","content":"hi"}],"instructions":"b"}"#),
            (Api::ChatCompletions, r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"messages":[]}"#),
        ];
        for (api, body) in cases {
            match proxy.try_rewrite(api, None, body.as_bytes()) {
                Err(Error::DuplicateKey(_)) => {}
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    /// A `shell_call_output` read twice and an Anthropic `search_result`
    /// are archived and compacted in place, every other byte as sent.
    #[test]
    fn new_tool_result_shapes_are_archived_and_compacted() {
        let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
        let out: String = (0..40).map(|i| format!("tests/test_{i}.py::test_case PASSED\n")).collect();
        let call =
            |k: usize| serde_json::json!({"type": "shell_call", "call_id": format!("sh_{k}"), "action": {"commands": ["pytest -v"], "timeout_ms": 60000}});
        let result = |k: usize| serde_json::json!({"type": "shell_call_output", "call_id": format!("sh_{k}"), "output": [{"stdout": out, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]});
        let items = vec![serde_json::json!({"type": "message", "role": "user", "content": "run the tests"}), call(0), result(0), call(1), result(1)];
        let body = serde_json::to_vec(&serde_json::json!({"model": "m", "input": items})).unwrap();
        let r = proxy.try_rewrite(Api::Responses, None, &body).unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(sent["input"][2]["output"][0]["stdout"], out.as_str(), "the first read goes whole");
        let second = sent["input"][4]["output"][0]["stdout"].as_str().unwrap();
        assert!(second.starts_with("[lam: same output as last time"), "{second}");
        assert_eq!(sent["input"][4]["output"][0]["outcome"], serde_json::json!({"type": "exit", "exit_code": 0}));
        let msgs = serde_json::json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "search"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "tu", "name": "search", "input": {"q": "x"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu", "content": [
                {"type": "search_result", "source": "https://a", "title": "A", "content": [{"type": "text", "text": out}]}]}]}]});
        let r = proxy.try_rewrite(Api::Messages, None, &serde_json::to_vec(&msgs).unwrap()).unwrap();
        assert!(r.session.is_some());
        let st = proxy.stats();
        assert_eq!(st.sessions.iter().map(|s| s.observations).sum::<u64>(), 3, "every result archived");
    }

    #[test]
    fn a_panic_in_admission_forwards_the_request_as_it_came_and_the_conversation_goes_on() {
        let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
        let first = chat(&["line one\nline two\n"]);
        let r1 = proxy.try_rewrite(Api::ChatCompletions, None, &first).unwrap();
        assert!(r1.session.is_some());
        crate::admission::fault::arm("BOOM");
        let second = chat(&["line one\nline two\n", "BOOM\nline three\n"]);
        let r2 = proxy.try_rewrite(Api::ChatCompletions, None, &second).expect("fails open, not an error");
        assert_eq!(r2.body, second, "forwarded exactly as it came");
        assert_eq!(r2.session, None);
        let st = proxy.stats();
        assert_eq!((st.failed_open, st.sessions.len()), (1, 0), "the session was dropped");
        assert!(proxy.metrics().contains("lam_serve_failed_open_total 1"));
        // The next request of the conversation is rewritten in a new session
        // (and fails open again while the fault lasts).
        crate::admission::fault::arm("NEVER");
        let third = chat(&["line one\nline two\n", "BOOM\nline three\n", "line one\nline two\n"]);
        let r3 = proxy.try_rewrite(Api::ChatCompletions, None, &third).unwrap();
        assert!(r3.session.is_some());
        assert_eq!(proxy.stats().sessions_created, 2);
    }

    /// A named conversation keeps its store session across proxies (a
    /// restart, an evicted session) and ids; another conversation given the
    /// same name never appends to it (`arc_store::claim_session`).
    #[test]
    fn a_named_session_is_claimed_by_its_first_observation() {
        let dir = tempfile::tempdir().unwrap();
        let open =
            || Proxy::open(ServeConfig { store: arc_store::StoreSpec::Dir(dir.path().join("arc")), ..ServeConfig::for_tests("http://127.0.0.1:9") }).unwrap();
        let a = chat(&["line one\nline two\n"]);
        let first = open();
        assert_eq!(first.try_rewrite(Api::ChatCompletions, Some("X"), &a).unwrap().session.as_deref(), Some("X"));
        first.close().unwrap();
        drop(first);
        let again = open();
        let more = chat(&["line one\nline two\n", "line three\n"]);
        assert_eq!(again.try_rewrite(Api::ChatCompletions, Some("X"), &more).unwrap().session.as_deref(), Some("X"), "the same conversation, resumed");
        let other = chat(&["another output\n"]);
        assert_eq!(again.try_rewrite(Api::ChatCompletions, Some("Y"), &other).unwrap().session.as_deref(), Some("Y"));
        again.close().unwrap();
        drop(again);
        let third = open();
        assert_eq!(third.try_rewrite(Api::ChatCompletions, Some("X"), &other).unwrap().session.as_deref(), Some("X@2"), "another conversation named X");
        let ids = lam_core::ObsStore::ids(&&third.inner.engine.store, &lam_core::SessionId::new("X")).unwrap();
        assert_eq!(ids.len(), 2, "the resumed conversation appended only its new observation");
    }

    /// Replicas of one run (`--run`, one store) archive every unnamed
    /// conversation in the run's store session and forward the same bytes:
    /// a replica that never saw a conversation's first requests rebuilds it
    /// there, writing nothing twice, and the `§id`s of two conversations
    /// never collide. A replica with other settings does not start.
    #[test]
    fn replicas_of_a_run_share_its_store_session_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = |t: f64| {
            let mut c = ServeConfig { store: arc_store::StoreSpec::Dir(dir.path().join("arc")), ..ServeConfig::for_tests("http://127.0.0.1:9") };
            c.run = Some("team".into());
            c.engine.threshold = lam_core::Threshold::from_cosine(t).unwrap();
            c
        };
        let turns = ["line one\nline two\n", "line one\nline two\nline three\n", "line one\nline two\n"];
        let a = Proxy::open(cfg(0.95)).unwrap();
        assert_eq!(a.run_id(), "team");
        a.try_rewrite(Api::ChatCompletions, None, &chat(&turns[..2])).unwrap();
        let r3 = a.try_rewrite(Api::ChatCompletions, None, &chat(&turns)).unwrap();
        assert_eq!(r3.session.as_deref(), Some("team"));
        a.close().unwrap();
        drop(a);
        let b = Proxy::open(cfg(0.95)).unwrap();
        let rebuilt = b.try_rewrite(Api::ChatCompletions, None, &chat(&turns)).unwrap();
        assert_eq!((rebuilt.session.as_deref(), &rebuilt.body), (Some("team"), &r3.body), "the same store session, the same bytes");
        let other = b.try_rewrite(Api::ChatCompletions, None, &chat(&["another first output\n"])).unwrap();
        assert_eq!(other.session.as_deref(), Some("team"));
        b.close().unwrap();
        drop(b);
        let st = arc_store::open(&arc_store::StoreSpec::Dir(dir.path().join("arc")), Access::ReadOnly).unwrap();
        let ids = st.ids(&SessionId::new("team")).unwrap();
        assert_eq!(ids.len(), 3, "three distinct observations of two conversations, each archived once");
        assert_eq!(st.sessions().unwrap(), [SessionId::new("team"), settings_session("team")]);
        let err = Proxy::open(cfg(0.9)).unwrap_err().to_string();
        assert!(err.contains("other settings") && err.contains("threshold: 0.9") && err.contains("threshold: 0.95"), "{err}");
        assert!(err.contains("other settings than this process's (differs: threshold: 0.9 (the run's: 0.95));"), "the differing setting first: {err}");
        let mut with_budget = cfg(0.95);
        with_budget.engine.budget = crate::config::Budget::new(4000, None, None).ok();
        let err = Proxy::open(with_budget).unwrap_err().to_string();
        assert!(err.contains("(differs: budget: 4000 target 2000 keep 3 (the run's: (not set)));"), "{err}");
        // `lam serve --budget auto` (the default budget) is a setting too.
        let mut auto = cfg(0.95);
        auto.default_budget = Some(crate::DefaultBudget::new(None));
        let err = Proxy::open(auto).unwrap_err().to_string();
        assert!(err.contains("(differs: budget: default ceiling 100000 keep 3 (the run's: (not set)));"), "{err}");
        let bad = Proxy::open(ServeConfig { run: Some("a@b".into()), ..cfg(0.95) }).unwrap_err().to_string();
        assert!(bad.contains("--run `a@b`"), "{bad}");
    }

    /// The default budget is resolved per request from its `model`: the
    /// ceiling, or the model's level when lower; `--budget` comes first.
    #[test]
    fn the_default_budget_follows_the_request_s_model() {
        let held = |default: Option<crate::budget::DefaultBudget>, budget: Option<crate::config::Budget>, model: &str| {
            let mut c = ServeConfig::for_tests("http://127.0.0.1:9");
            (c.default_budget, c.engine.budget) = (default, budget);
            let p = Proxy::open(c).unwrap();
            let body = serde_json::json!({"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
            p.try_rewrite(Api::Messages, None, &serde_json::to_vec(&body).unwrap()).unwrap();
            p.stats().sessions[0].budget_tokens
        };
        let high = Some(crate::budget::DefaultBudget { ceiling: 500_000, keep: None });
        assert_eq!(held(high, None, "claude-sonnet-4-5-20250929"), 133_000);
        assert_eq!(held(high, None, "claude-opus-4-7"), 500_000);
        assert_eq!(held(high, None, "gpt-5-codex"), 195_000);
        assert_eq!(held(Some(crate::DefaultBudget::new(None)), None, "claude-sonnet-4-5"), crate::DefaultBudget::CEILING);
        assert_eq!(held(high, crate::config::Budget::new(4000, None, None).ok(), "claude-sonnet-4-5"), 4000);
        assert_eq!(held(None, None, "claude-sonnet-4-5"), 0, "no budget");
    }

    #[test]
    fn settings_differences_name_each_differing_line() {
        let run = "lam settings/1\nthreshold: 0.95\nencoder: m\nkeep-tools: Edit\nbudget: 10 target 5 keep 3\n";
        let ours = "lam settings/2\nthreshold: 0.95\nencoder: n\nkeep-tools: \nuser-turns: true\n";
        assert_eq!(
            settings_differences(run, ours),
            [
                "format: lam settings/2 (the run's: lam settings/1)",
                "encoder: n (the run's: m)",
                "keep-tools: (none) (the run's: Edit)",
                "user-turns: true (the run's: (not set))",
                "budget: (not set) (the run's: 10 target 5 keep 3)",
            ]
        );
        assert!(settings_differences(ours, ours).is_empty());
    }

    /// The over-budget warning names the session and conversation as
    /// plain values, not as Rust's debug text.
    #[test]
    fn the_over_budget_warning_prints_plain_values() {
        let line = over_budget_warning("serve-1-2", 3, 5100);
        assert!(line.starts_with("lam serve: warning: session serve-1-2 (conversation 3) forwarded 5100 tokens, over its budget"), "{line}");
        assert!(!line.contains("Some(") && !line.contains('"'), "{line}");
    }

    /// An upstream that counts more than lam does tightens the budget:
    /// after it reports twice lam's count, the conversation is kept under
    /// half the budget in lam's tokens.
    #[test]
    fn the_upstream_s_count_calibrates_the_budget() {
        let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
        cfg.engine.budget = Some(crate::config::Budget::new(6000, Some(3000), Some(1)).unwrap());
        let proxy = Proxy::open(cfg).unwrap();
        let out = |k: usize| (0..40).map(|i| format!("src/m{k}/f{i}.py:{i}: def handler_{k}_{i}(request):\n")).collect::<String>();
        let outs: Vec<String> = (0..8).map(out).collect();
        let refs: Vec<&str> = outs.iter().map(String::as_str).collect();
        let first = proxy.try_rewrite(Api::ChatCompletions, None, &chat(&refs[..3])).unwrap();
        let sink = first.sink.expect("a budget reads the answer's usage");
        assert_eq!(lock(&sink.handle.stats).cuts, 0);
        sink.report(sink.local * 2);
        let st = proxy.stats();
        assert_eq!((st.sessions[0].upstream_input_tokens, st.sessions[0].calibration), (sink.local * 2, 2.0));
        let next = proxy.try_rewrite(Api::ChatCompletions, None, &chat(&refs[..4])).unwrap();
        let local = next.sink.unwrap().local;
        assert!(local <= 3000, "{local} lam tokens: over the budget on the upstream's count");
        assert!(proxy.stats().sessions[0].cuts >= 1);
    }
}
