//! How the proxy runs: its settings and the token clients present.

use arc_store::StoreSpec;
pub use lam_operator::{Budget, EngineSettings};
use std::time::Duration;

/// Working memory a request may hold per byte of its body while it is
/// parsed and rewritten: the body, its items, the new session's state and
/// the rewritten body (`tests/memory_accounting.rs` measures 10x to 13x and
/// fails above 16x).
pub(crate) const WORK_PER_BODY_BYTE: usize = 16;

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Upstream origin (`https://api.openai.com`); the request's path and
    /// query are appended as they came.
    pub upstream: String,
    /// Where originals are archived.
    pub store: StoreSpec,
    /// What decides the bytes forwarded: threshold, encoder, recall handle, ...
    pub engine: EngineSettings,
    /// Which results a budget's cut cites first (default: the oldest;
    /// `lam_serve::budget`). Replicas must agree on it.
    pub cite_order: crate::budget::CiteOrder,
    /// Largest request body a compacted route accepts, in bytes.
    pub max_body: usize,
    /// Sessions held at most; beyond, the least recently used is dropped
    /// (its archive stays; a later request of it starts a new session).
    /// [`ServeConfig::max_memory`] bounds them by bytes too.
    pub max_sessions: usize,
    /// One line per request on standard error (method, path, status, session; never headers).
    pub log: bool,
    /// With `log`: append the lines to this file (created 0600) instead of
    /// standard error (`lam run` with a full-screen agent on the terminal).
    pub log_file: Option<std::path::PathBuf>,
    /// CA certificates (PEM files) the upstream's certificate may chain to,
    /// besides the Mozilla roots and the system's store (or `SSL_CERT_FILE`
    /// and `SSL_CERT_DIR` in its place): `--upstream-ca`, and under `lam
    /// run` `NODE_EXTRA_CA_CERTS`. A file that gives no certificate stops
    /// the proxy before it listens ([`crate::read_upstream_ca`]).
    pub upstream_ca: Vec<std::path::PathBuf>,
    /// Longest wait for the upstream's TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Longest silence from the upstream: before its answer's headers, and
    /// between two chunks of its body (the timer restarts on every chunk).
    pub idle_timeout: Duration,
    /// After the first SIGINT/SIGTERM, how long in-flight requests may take
    /// before the proxy exits anyway (`run`; a second signal exits at once).
    pub drain_timeout: Duration,
    /// Bytes all sessions may hold (`Stats::memory_bytes`); beyond, the
    /// least recently used sessions are dropped. Requests in flight may
    /// hold as much again, at most what the largest body needs
    /// ([`ServeConfig::in_flight_budget`]).
    pub max_memory: usize,
    /// How long a request may wait for its share of
    /// [`ServeConfig::in_flight_budget`] before it is refused (`503`,
    /// `lam_overloaded`).
    pub queue_timeout: Duration,
    /// When set, every request must carry it (`x-lam-token`; the proxy's own
    /// routes also take `Authorization: Bearer`); required to listen beyond loopback.
    pub token: Option<Token>,
    /// The run's name (`--run`): every conversation the client does not name
    /// is archived in the store session `RUN`. Replicas given the same name
    /// on one store archive all of them there, whichever replica serves a
    /// request, and must run with the same settings ([`crate::Proxy::open`]
    /// refuses to start otherwise). Default: `serve-<unix seconds>-<pid>`,
    /// this process's own.
    pub run: Option<String>,
    /// The prompt cache's TTL (`--cache-ttl SECONDS|none`): a request that
    /// comes more than this after its conversation's previous one finds the
    /// cache cold, and a budget cuts there to its target (`none`: never
    /// cold). `None`: the request's `cache_control.ttl`, else the provider's
    /// default, 5 minutes (`lam_serve::budget`'s rule, docs/serve.md).
    pub cache_ttl: Option<crate::bill::CacheTtl>,
    /// The budget a request is held to when neither `engine.budget`
    /// (`--budget N`) nor its `x-lam-budget` header sets one: resolved from
    /// its `model` ([`crate::budget::DefaultBudget`]). `lam run` and `lam replay`
    /// set it unless `--budget off`; `lam serve` only with `--budget auto`.
    pub default_budget: Option<crate::budget::DefaultBudget>,
    /// What the models cost (`--prices FILE`); `None`: the built-in table
    /// ([`crate::bill::prices::Prices::builtin`]). Dollars are reported,
    /// never acted on: no byte forwarded depends on them.
    pub prices: Option<std::sync::Arc<crate::bill::prices::Prices>>,
}

/// Whether `name` can name a run: 1 to 64 letters, digits, `-`, `_`, `.`.
pub fn valid_run(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
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
    /// Defaults for `upstream`: the default engine ([`EngineSettings`]),
    /// 32 MiB bodies, an in-memory store (set `store`).
    pub fn new(upstream: &str) -> Self {
        Self {
            upstream: upstream.trim_end_matches('/').to_string(),
            store: StoreSpec::Memory,
            engine: EngineSettings::default(),
            cite_order: crate::budget::CiteOrder::default(),
            max_body: 32 << 20,
            max_sessions: 4096,
            log: false,
            log_file: None,
            upstream_ca: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            drain_timeout: Duration::from_secs(30),
            max_memory: default_max_memory(),
            queue_timeout: Duration::from_secs(30),
            token: None,
            run: None,
            cache_ttl: None,
            default_budget: None,
            prices: None,
        }
    }

    /// Bytes of working memory the requests in flight may hold together
    /// (the bodies being read, parsed and rewritten, 16 bytes a byte of
    /// body): `max_memory`, but no more than the largest body needs
    /// (`16 x max_body`), and at least 1 MiB. So the process holds at most
    /// `max_memory` for sessions, this for requests, and a constant
    /// (`docs/serve.md`, "Memory").
    pub fn in_flight_budget(&self) -> usize {
        self.max_memory.min(self.max_body.saturating_mul(WORK_PER_BODY_BYTE)).max(1 << 20)
    }

    /// The upstream as it may be printed or returned: a password in its
    /// userinfo or query masked.
    pub fn upstream_shown(&self) -> String {
        lam_core::redact::url(&self.upstream)
    }

    /// The budget a request is held to: the one its `x-lam-budget` header
    /// gives (`header`, already cut to keep [`ServeConfig::keep_from`]'s
    /// `--keep`), else `--budget`, else the default budget for its `model`
    /// ([`crate::budget::DefaultBudget`]); `None`: no budget. The one place a
    /// request's budget is resolved (the HTTP layer, the proxy and `lam
    /// replay` all ask here).
    pub fn budget_for(&self, header: Option<Budget>, model: Option<&str>) -> Option<Budget> {
        header.or(self.engine.budget).or_else(|| self.default_budget.map(|d| d.for_model(model)))
    }

    /// The budget a header's budget takes `--keep` from: `--budget`, else
    /// the default budget's (for no model in particular).
    pub fn keep_from(&self) -> Option<Budget> {
        self.engine.budget.or_else(|| self.default_budget.map(|d| d.for_model(None)))
    }

    /// [`ServeConfig::new`] with the model-free hashing encoder and no cache file.
    pub fn for_tests(upstream: &str) -> Self {
        Self { engine: EngineSettings::for_tests(), ..Self::new(upstream) }
    }
}
