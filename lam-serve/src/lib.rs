//! `lam serve`: a drop-in OpenAI/Anthropic-compatible HTTP proxy that keeps
//! an agent's context small without breaking provider prompt caches.
//!
//! Point an agent's base URL at the proxy. For OpenAI `POST
//! /v1/chat/completions` and `POST /v1/responses` and Anthropic `POST
//! /v1/messages` (streaming or not) it archives every tool result verbatim
//! (`arc-store`), admits it once with the LAM operator (`lam-operator`), and
//! forwards the residual in its place, in that request and every later one of
//! the session. Every item a session has forwarded is forwarded byte for byte
//! the same ever after (prefix stability), so the provider's prompt cache keeps
//! hitting. Responses stream back event by event; every other path passes
//! through unchanged. Protocol and session rule: `docs/serve.md`.
//!
//! ```
//! use lam_serve::{Api, Proxy, ServeConfig};
//!
//! let cfg = ServeConfig::for_tests("http://127.0.0.1:9"); // mem: store, hashing encoder
//! let proxy = Proxy::open(cfg)?;
//! let log: String = (0..40).map(|i| format!("tests/test_{i}.py::test_case PASSED\n")).collect();
//! let turn = |n: usize| {
//!     let mut m = vec![serde_json::json!({"role": "user", "content": "fix the bug"})];
//!     for k in 0..n {
//!         let id = format!("call_{k}");
//!         m.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"pytest\"}"}}]}));
//!         m.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": log}));
//!     }
//!     serde_json::to_vec(&serde_json::json!({"model": "m", "messages": m})).unwrap()
//! };
//! let first = proxy.rewrite(Api::ChatCompletions, None, &turn(1));
//! let second = proxy.rewrite(Api::ChatCompletions, None, &turn(2));
//! assert_eq!(first.session, second.session); // the second request continues the first
//! assert!(second.body.len() < turn(2).len()); // the rerun's log became a stub
//! let sent: serde_json::Value = serde_json::from_slice(&second.body)?;
//! // One line naming the earlier call as the model saw it (`docs/stubs.md`).
//! assert!(sent["messages"][4]["content"].as_str().unwrap().starts_with("[lam: same output as `pytest` above"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod api;
mod canon;
mod engine;
mod json;
mod metrics;
pub mod replay;
mod request;
mod server;
mod session;

pub use api::{Api, Policy};
pub use server::{run, serve};
pub use session::SessionStats;

use arc_store::{Access, StoreSpec};
use engine::{Engine, Pool, SharedStore, lock};
use lam_core::{SessionId, Threshold};
use lam_encode::{Cache, EncoderSpec};
use request::Parsed;
use serde::Serialize;
use session::{Conversation, Handle, Registry};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Errors of `lam-serve`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting that cannot work.
    #[error("{0}")]
    Setting(String),
    /// The store could not be opened or written.
    #[error("store {spec}: {source}")]
    Store {
        /// The store, as given (passwords redacted).
        spec: String,
        /// Why.
        source: Box<arc_store::StoreError>,
    },
    /// The encoder could not be loaded.
    #[error(transparent)]
    Encoder(#[from] lam_encode::Error),
    /// The operator refused its settings.
    #[error(transparent)]
    Operator(#[from] lam_operator::Error),
    /// A store or encoder error while closing.
    #[error(transparent)]
    Core(#[from] lam_core::Error),
    /// A compacted request's body holds a conversation or preamble member
    /// (`messages`, `input`, `system`, `instructions`) twice: which one the
    /// upstream reads is unknown, so the proxy refuses it (`400`).
    #[error("the body holds the member `{0}` twice")]
    DuplicateKey(&'static str),
    /// Stopped before every in-flight request finished (a second signal or
    /// the drain deadline): the store was flushed, the cut requests' clients
    /// saw their connections close. The program exits non-zero.
    #[error("stopped with requests in flight ({0}); the store was flushed")]
    Cut(&'static str),
    /// Listening, serving or writing a file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Upstream origin (`https://api.openai.com`); the request's path and
    /// query are appended as they came.
    pub upstream: String,
    /// Where originals are archived.
    pub store: StoreSpec,
    /// The encoder.
    pub encoder: EncoderSpec,
    /// Its embedding cache.
    pub cache: Cache,
    /// Encoders loaded (sessions admitting at once).
    pub encoders: usize,
    /// Merge threshold t (cosine).
    pub threshold: f64,
    /// User turns after the task are observations too.
    pub user_turns: bool,
    /// Tools whose results are forwarded verbatim (still archived).
    pub keep_tools: Vec<String>,
    /// How stubs name the way to recall an original (`lam_core::stub::Recall`).
    /// Default `Recall::None`: through the proxy the agent usually has no
    /// recall tool, so stubs carry no handle; with `lam mcp` configured in
    /// the agent, name its tool as the agent sees it (`mcp__lam__recall`).
    pub recall: lam_core::stub::Recall<'static>,
    /// Largest request body a compacted route accepts, in bytes.
    pub max_body: usize,
    /// Sessions held at most; beyond, the least recently used is dropped
    /// (its archive stays; a later request of it starts a new session).
    /// [`ServeConfig::max_memory`] bounds them by bytes too.
    pub max_sessions: usize,
    /// One line per request on standard error (method, path, status, session; never headers).
    pub log: bool,
    /// Longest wait for the upstream's TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Longest silence from the upstream: before its answer's headers, and
    /// between two chunks of its body (the timer restarts on every chunk).
    pub idle_timeout: Duration,
    /// After the first SIGINT/SIGTERM, how long in-flight requests may take
    /// before the proxy exits anyway ([`run`]; a second signal exits at once).
    pub drain_timeout: Duration,
    /// Bytes all sessions may hold ([`Stats::memory_bytes`]); beyond, the
    /// least recently used sessions are dropped.
    pub max_memory: usize,
    /// When set, every request must carry it (`x-lam-token`; the proxy's own
    /// routes also take `Authorization: Bearer`); required to listen beyond loopback.
    pub token: Option<Token>,
}

/// The shared secret clients present to the proxy; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token; `None` when `s` is empty after trimming whitespace.
    pub fn new(s: &str) -> Option<Self> {
        let t = s.trim();
        (!t.is_empty()).then(|| Self(t.to_string()))
    }

    /// Whether `presented` is the token, in time independent of where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let want = self.0.as_bytes();
        let mut diff = u8::from(want.len() != presented.len());
        for (i, w) in want.iter().enumerate() {
            diff |= w ^ presented.get(i).copied().unwrap_or(!w);
        }
        std::hint::black_box(diff) == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

/// A quarter of the machine's memory (`/proc/meminfo` `MemTotal`), else 1 GiB.
pub fn default_max_memory() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    });
    total.map_or(1 << 30, |b| b / 4)
}

impl ServeConfig {
    /// Defaults for `upstream`: threshold 0.95, BERT encoder with the default
    /// cache, 32 MiB bodies, an in-memory store (set `store`).
    pub fn new(upstream: &str) -> Self {
        let encoders = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        Self {
            upstream: upstream.trim_end_matches('/').to_string(),
            store: StoreSpec::Memory,
            encoder: EncoderSpec::new(lam_encode::Backend::Bert),
            cache: Cache::Default,
            encoders,
            threshold: 0.95,
            user_turns: false,
            keep_tools: Vec::new(),
            recall: lam_core::stub::Recall::None,
            max_body: 32 << 20,
            max_sessions: 4096,
            log: false,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            drain_timeout: Duration::from_secs(30),
            max_memory: default_max_memory(),
            token: None,
        }
    }

    /// The upstream as it may be printed or returned: a password in its
    /// userinfo or query masked.
    pub fn upstream_shown(&self) -> String {
        lam_core::redact::url(&self.upstream)
    }

    /// [`ServeConfig::new`] with the model-free hashing encoder and no cache file.
    pub fn for_tests(upstream: &str) -> Self {
        Self { encoder: EncoderSpec::new(lam_encode::Backend::Hashing), cache: Cache::Off, encoders: 2, ..Self::new(upstream) }
    }
}

/// What the proxy forwards for one request.
#[derive(Debug, Clone)]
pub struct Rewritten {
    /// The body to send upstream.
    pub body: Vec<u8>,
    /// The store session of the conversation; `None` when the body holds no
    /// conversation the proxy understands (it is then forwarded as it came).
    pub session: Option<String>,
}

/// Proxy-wide counters (`GET /lam/stats`, `GET /metrics`).
#[derive(Debug, Default)]
struct Counters {
    requests: [AtomicU64; 3],
    passthrough: AtomicU64,
    bypassed: AtomicU64,
    unparsed: AtomicU64,
    failed_open: AtomicU64,
    upstream_errors: AtomicU64,
    unreachable: AtomicU64,
    too_large: AtomicU64,
    timeouts: AtomicU64,
    refused: AtomicU64,
    unauthorized: AtomicU64,
    upgrades: AtomicU64,
}

/// `GET /lam/stats`.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// Every session held.
    pub sessions: Vec<SessionStats>,
    /// Sessions started since the proxy started (one per conversation).
    pub sessions_created: u64,
    /// Sessions dropped to stay within `max_sessions` or `max_memory`.
    pub evicted_sessions: u64,
    /// Their counters, summed (`session` empty).
    pub evicted: SessionStats,
    /// Requests per compacted route (`chat`, `messages`, `responses`).
    pub requests: std::collections::BTreeMap<&'static str, u64>,
    /// Requests passed through unchanged on other paths.
    pub passthrough: u64,
    /// Requests with `x-lam-bypass: 1`.
    pub bypassed: u64,
    /// Requests to compacted routes whose body held no conversation (forwarded as they came).
    pub unparsed: u64,
    /// Requests forwarded as they came because rewriting them failed inside
    /// lam (a bug: each one is logged); the session was dropped, so the
    /// conversation's next request starts a new one.
    pub failed_open: u64,
    /// Upstream answers with status >= 400 (passed through).
    pub upstream_errors: u64,
    /// Requests answered 502 because the upstream could not be reached.
    pub upstream_unreachable: u64,
    /// Requests refused with 413.
    pub too_large: u64,
    /// Requests answered 504, or streams cut, because the upstream fell
    /// silent for `--upstream-idle-timeout-s`.
    pub upstream_timeouts: u64,
    /// Requests refused with 400 before reaching the upstream (a dot
    /// segment in the path, a conversation member twice, a bad session name).
    pub refused: u64,
    /// Requests refused with 401 (no or a wrong token).
    pub unauthorized: u64,
    /// Requests refused with 426 because they asked to switch protocols
    /// (`Upgrade: websocket`): a WebSocket would carry the conversation
    /// past compaction, so the client is told to use HTTP (Codex falls
    /// back to HTTPS at once).
    pub upgrades_refused: u64,
    /// Bytes the held sessions hold (estimate: frozen forwarded bytes and operator state).
    pub memory_bytes: u64,
    /// Their budget (`--max-memory`).
    pub memory_budget: u64,
}

/// The proxy's state: engine, sessions, counters. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cfg: ServeConfig,
    engine: Engine,
    sessions: Mutex<Registry>,
    counters: Counters,
    run: String,
}

impl Proxy {
    /// Open the store (the one writer) and load the encoders.
    pub fn open(cfg: ServeConfig) -> Result<Self, Error> {
        if cfg.encoders == 0 {
            return Err(Error::Setting("--encoders must be at least 1".into()));
        }
        let threshold = Threshold::from_cosine(cfg.threshold).map_err(|e| Error::Setting(format!("--threshold {}: {e}", cfg.threshold)))?;
        let store = arc_store::open(&cfg.store, Access::ReadWrite).map_err(|source| Error::Store { spec: cfg.store.display(), source: Box::new(source) })?;
        let mut encoders = Vec::with_capacity(cfg.encoders);
        let mut cache = None;
        for _ in 0..cfg.encoders {
            let (e, path) = cfg.encoder.load_cached(&cfg.cache)?;
            cache = path;
            encoders.push(e);
        }
        let dim = lam_core::Encoder::info(&encoders[0]).dim;
        // Load the cl100k tables now, not in the first request (~70 ms).
        lam_tokens::count(b"warm");
        let engine = Engine {
            store: SharedStore(Mutex::new(store)),
            pool: Pool::new(encoders, cache),
            operator: lam_operator::Config::new(threshold).with_counter(&lam_tokens::Cl100k).with_recall(cfg.recall),
            dim,
            policy: api::Policy {
                user_turns: cfg.user_turns,
                keep_tools: cfg.keep_tools.iter().cloned().collect(),
                recall_tool: match cfg.recall {
                    lam_core::stub::Recall::Via(tool) => Some(tool.to_string()),
                    _ => None,
                },
            },
        };
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let run = format!("serve-{secs}-{}", std::process::id());
        Ok(Self { inner: Arc::new(Inner { cfg, engine, sessions: Mutex::new(Registry::default()), counters: Counters::default(), run }) })
    }

    /// The settings.
    pub fn config(&self) -> &ServeConfig {
        &self.inner.cfg
    }

    /// This proxy's run: the store sessions it makes are named `RUN-N`,
    /// or `NAME@RUN-N` for a client's name the store already holds.
    pub fn run_id(&self) -> &str {
        &self.inner.run
    }

    /// The body to forward for a request to `api`'s route: its conversation
    /// matched to a session (named by `session`, else by prefix) and rewritten.
    /// Blocks while new observations are encoded; sessions rewrite in parallel.
    /// A body holding a conversation or preamble member twice is forwarded as
    /// it came ([`Proxy::try_rewrite`] refuses it).
    pub fn rewrite(&self, api: Api, session: Option<&str>, body: &[u8]) -> Rewritten {
        self.try_rewrite(api, session, body).unwrap_or_else(|_| Rewritten { body: body.to_vec(), session: None })
    }

    /// [`Proxy::rewrite`], refusing ([`Error::DuplicateKey`]) a body that
    /// holds `messages`, `input`, `system` or `instructions` twice.
    pub fn try_rewrite(&self, api: Api, session: Option<&str>, body: &[u8]) -> Result<Rewritten, Error> {
        let c = &self.inner.counters;
        c.requests[api as usize].fetch_add(1, Ordering::Relaxed);
        let Some(req) = Parsed::parse(api, body) else {
            if let Some(k) = json::duplicate_key(body) {
                c.refused.fetch_add(1, Ordering::Relaxed);
                return Err(Error::DuplicateKey(k));
            }
            c.unparsed.fetch_add(1, Ordering::Relaxed);
            return Ok(Rewritten { body: body.to_vec(), session: None });
        };
        let handle = match self.session_for(session, &req.keys) {
            Ok(h) => h,
            Err(e) => {
                c.unparsed.fetch_add(1, Ordering::Relaxed);
                if self.inner.cfg.log {
                    eprintln!("lam serve: no session ({e}); forwarding the request as it came");
                }
                return Ok(Rewritten { body: body.to_vec(), session: None });
            }
        };
        let rewritten = {
            let mut conv = lock(&handle.conv);
            // A panic inside admission must not answer 500 for the rest of
            // the conversation: its session is dropped (its state may be
            // half-updated) and this request goes as it came.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let (out, delta) = conv.rewrite(&req, &self.inner.engine);
                (out, delta, conv.bytes())
            }))
        };
        let Ok((out, delta, held)) = rewritten else {
            c.failed_open.fetch_add(1, Ordering::Relaxed);
            lock(&self.inner.sessions).retire(&handle);
            eprintln!("lam serve: rewriting a request failed inside lam (a bug; please report it); forwarding it as it came and starting a new session");
            return Ok(Rewritten { body: body.to_vec(), session: None });
        };
        lock(&self.inner.sessions).account(&handle, held, self.inner.cfg.max_memory);
        let mut st = lock(&handle.stats);
        st.apply(&delta);
        Ok(Rewritten { body: out, session: Some(st.session.clone()) })
    }

    /// The session `keys` continue, or a new one.
    fn session_for(&self, name: Option<&str>, keys: &[u128]) -> Result<Arc<Handle>, Error> {
        let mut reg = lock(&self.inner.sessions);
        if let Some(h) = reg.claim(name, keys) {
            return Ok(h);
        }
        let label = self.new_label(name, reg.made() + 1)?;
        let op = self.inner.engine.operator_session()?;
        let stats = SessionStats { session: label.clone(), name: name.map(str::to_string), ..SessionStats::default() };
        let h = Arc::new(Handle { conv: Mutex::new(Conversation::new(SessionId::new(label), op)), stats: Mutex::new(stats) });
        reg.insert(name, keys, h.clone(), self.inner.cfg.max_sessions);
        Ok(h)
    }

    /// The store session of a new proxy session: the client's name when the
    /// store does not hold it yet, else the name with this run's id.
    fn new_label(&self, name: Option<&str>, n: u64) -> Result<String, Error> {
        let run = &self.inner.run;
        let Some(name) = name else {
            return Ok(format!("{run}-{n}"));
        };
        let held = lam_core::ObsStore::ids(&&self.inner.engine.store, &SessionId::new(name))?;
        Ok(if held.is_empty() { name.to_string() } else { format!("{name}@{run}-{n}") })
    }

    /// Every session's counters and the proxy's.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (sessions, sessions_created, (evicted_sessions, evicted), held) = {
            let reg = lock(&self.inner.sessions);
            (reg.stats(), reg.made(), reg.evicted(), reg.held())
        };
        Stats {
            sessions,
            sessions_created,
            evicted_sessions,
            evicted,
            requests: Api::ALL.iter().map(|a| (a.name(), get(&c.requests[*a as usize]))).collect(),
            passthrough: get(&c.passthrough),
            bypassed: get(&c.bypassed),
            unparsed: get(&c.unparsed),
            failed_open: get(&c.failed_open),
            upstream_errors: get(&c.upstream_errors),
            upstream_unreachable: get(&c.unreachable),
            too_large: get(&c.too_large),
            upstream_timeouts: get(&c.timeouts),
            refused: get(&c.refused),
            unauthorized: get(&c.unauthorized),
            upgrades_refused: get(&c.upgrades),
            memory_bytes: held as u64,
            memory_budget: self.inner.cfg.max_memory as u64,
        }
    }

    /// The counters in the Prometheus text format (`GET /metrics`).
    pub fn metrics(&self) -> String {
        metrics::render(&self.stats())
    }

    /// Make every archived original durable and save the embedding cache.
    pub fn close(&self) -> Result<(), Error> {
        self.inner.engine.close()
    }

    fn count(&self, which: fn(&Counters) -> &AtomicU64) {
        which(&self.inner.counters).fetch_add(1, Ordering::Relaxed);
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
        assert!(second.starts_with("[lam: same output as `pytest -v` above"), "{second}");
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
        session::fault::arm("BOOM");
        let second = chat(&["line one\nline two\n", "BOOM\nline three\n"]);
        let r2 = proxy.try_rewrite(Api::ChatCompletions, None, &second).expect("fails open, not an error");
        assert_eq!(r2.body, second, "forwarded exactly as it came");
        assert_eq!(r2.session, None);
        let st = proxy.stats();
        assert_eq!((st.failed_open, st.sessions.len()), (1, 0), "the session was dropped");
        assert!(proxy.metrics().contains("lam_serve_failed_open_total 1"));
        // The next request of the conversation is rewritten in a new session
        // (and fails open again while the fault lasts).
        session::fault::arm("NEVER");
        let third = chat(&["line one\nline two\n", "BOOM\nline three\n", "line one\nline two\n"]);
        let r3 = proxy.try_rewrite(Api::ChatCompletions, None, &third).unwrap();
        assert!(r3.session.is_some());
        assert_eq!(proxy.stats().sessions_created, 2);
    }
}
