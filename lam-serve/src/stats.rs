//! The last stage: what the proxy counts. Every counter is declared once, in
//! one of the two tables below, which give its field (in `GET /lam/stats`),
//! its Prometheus metric and help (`GET /metrics`), and how it is summed.

use crate::report::Report;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Declares the proxy-wide counters: the atomics the stages add to
/// ([`Counters`]), the fields of [`Stats`], and their metrics.
macro_rules! proxy_counters {
    ($( $(#[doc = $doc:literal])+ $field:ident => $metric:literal, $help:literal; )*) => {
        /// Proxy-wide counters, one atomic each (added to by the HTTP stage
        /// and the proxy; read by [`Counters::read`]).
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $( pub(crate) $field: AtomicU64, )*
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
            $( $(#[doc = $doc])+ pub $field: u64, )*
            /// Bytes the held sessions hold (estimate: frozen forwarded bytes and operator state).
            pub memory_bytes: u64,
            /// Their budget (`--max-memory`).
            pub memory_budget: u64,
            /// Whether the store is marked down now (an outage: requests go
            /// on without it, and what they carry is archived once it is back).
            pub store_down: bool,
            /// Times the store was marked down since the proxy started.
            pub store_outages: u64,
            /// The proxy's `--budget` in tokens, when it has one (a request's
            /// `x-lam-budget` may set its own).
            pub budget_tokens: Option<u64>,
        }

        impl Counters {
            /// The values, with the held sessions' figures, as [`Stats`].
            pub(crate) fn read(&self, held: Held) -> Stats {
                Stats {
                    sessions: held.sessions,
                    sessions_created: held.created,
                    evicted_sessions: held.evicted_sessions,
                    evicted: held.evicted,
                    requests: held.requests,
                    $( $field: self.$field.load(Ordering::Relaxed), )*
                    memory_bytes: held.memory_bytes,
                    memory_budget: held.memory_budget,
                    store_down: held.store_down,
                    store_outages: held.store_outages,
                    budget_tokens: held.budget_tokens,
                }
            }
        }

        impl Stats {
            /// The proxy-wide counters as (metric, help, value), in table order.
            fn counter_metrics(&self) -> Vec<(&'static str, &'static str, f64)> {
                vec![ $( ($metric, $help, self.$field as f64), )* ]
            }
        }
    };
}

proxy_counters! {
    /// Requests passed through unchanged on other paths.
    passthrough => "lam_serve_passthrough_requests_total", "Requests passed through unchanged.";
    /// Requests with `x-lam-bypass: 1`.
    bypassed => "lam_serve_bypassed_requests_total", "Requests with x-lam-bypass: 1.";
    /// Requests to compacted routes whose body held no conversation (forwarded as they came).
    unparsed => "lam_serve_unparsed_requests_total", "Compacted-route requests forwarded as they came (no conversation found).";
    /// Requests forwarded as they came because rewriting them failed inside
    /// lam (a bug: each one is logged); the session was dropped, so the
    /// conversation's next request starts a new one.
    failed_open => "lam_serve_failed_open_total", "Requests forwarded as they came because rewriting them failed inside lam.";
    /// Upstream answers with status >= 400 (passed through).
    upstream_errors => "lam_serve_upstream_errors_total", "Upstream answers with status >= 400.";
    /// Requests answered 502 because the upstream could not be reached.
    upstream_unreachable => "lam_serve_upstream_unreachable_total", "Requests answered 502 (upstream unreachable).";
    /// Requests sent once more, on a new connection, because the upstream
    /// refused them without processing any of them (HTTP/2: beyond the
    /// last stream of its GOAWAY, or `REFUSED_STREAM`).
    upstream_retries => "lam_serve_upstream_retries_total", "Requests sent again on a new connection because the upstream refused them unprocessed (HTTP/2 GOAWAY, REFUSED_STREAM).";
    /// Requests refused with 413.
    too_large => "lam_serve_too_large_total", "Requests refused with 413.";
    /// Requests answered 504, or streams cut, because the upstream fell
    /// silent for `--upstream-idle-timeout-s`.
    upstream_timeouts => "lam_serve_upstream_timeouts_total", "Requests answered 504, or streams cut, because the upstream fell silent.";
    /// Requests refused with 400 before reaching the upstream (a dot
    /// segment in the path, a conversation member twice, a bad session name).
    refused => "lam_serve_refused_total", "Requests refused with 400 before reaching the upstream (dot segment, repeated conversation member, bad session name).";
    /// Requests refused with 401 (no or a wrong token).
    unauthorized => "lam_serve_unauthorized_total", "Requests refused with 401 (no token or a wrong one).";
    /// Requests refused with 426 because they asked to switch protocols
    /// (`Upgrade: websocket`): a WebSocket would carry the conversation
    /// past compaction, so the client is told to use HTTP (Codex falls
    /// back to HTTPS at once).
    upgrades_refused => "lam_serve_upgrades_refused_total", "Requests refused with 426: protocol upgrades (WebSocket), which would carry the conversation past compaction.";
    /// Requests refused with 503 (`lam_overloaded`): the working memory
    /// their body needs does not fit what `--max-memory` leaves requests in
    /// flight, at all or within the wait (`ServeConfig::in_flight_budget`).
    overloaded => "lam_serve_overloaded_total", "Requests refused with 503: the working memory their body needs did not fit what --max-memory leaves requests in flight.";
    /// Answers whose count (`usage`) could not be recorded in the run's
    /// ledger (the store out of reach): the conversation's next point is
    /// recorded without it (`lam_serve::ledger`).
    usage_unrecorded => "lam_serve_usage_unrecorded_total", "Answers whose usage could not be recorded in the run's ledger.";
    /// Requests that carried a new observation the store was out of reach
    /// for (an outage): it went upstream whole, unarchived, at once.
    store_unavailable => "lam_serve_store_unavailable_total", "Requests forwarded with observations left whole and unarchived because the store was out of reach.";
    /// Observations (and large tool inputs) archived late: left unarchived
    /// in an outage, archived when a later request carried them again.
    archived_late => "lam_serve_archived_late_total", "Observations archived after an outage, when a later request carried them again.";
}

/// What the registry reports for [`Counters::read`].
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub sessions: Vec<SessionStats>,
    pub created: u64,
    pub evicted_sessions: u64,
    pub evicted: SessionStats,
    pub requests: std::collections::BTreeMap<&'static str, u64>,
    pub memory_bytes: u64,
    pub memory_budget: u64,
    pub store_down: bool,
    pub store_outages: u64,
    pub budget_tokens: Option<u64>,
}

/// Declares a session's summable counters: the fields of [`SessionStats`],
/// how two are added ([`SessionStats::absorb`]) and their metrics.
macro_rules! session_counters {
    ($( $(#[doc = $doc:literal])+ $field:ident: $ty:ty => $metric:literal, $help:literal; )*) => {
        /// One session's counters, as `GET /lam/stats` reports them.
        #[derive(Debug, Clone, Serialize)]
        pub struct SessionStats {
            /// This proxy's number for the conversation: 1, 2, ... in the
            /// order its sessions started (0 for sums of several).
            pub conversation: u64,
            /// The store session its originals are archived in (`lam recall --session`).
            pub session: String,
            /// The `x-lam-session` name, when the client gave one.
            pub name: Option<String>,
            /// The agent's own id for its run, as its last request sent it
            /// (Claude Code: `metadata.user_id`'s `session_id`; Codex:
            /// `prompt_cache_key`): one run's main conversation, subagents
            /// and compactions share it.
            pub agent_session: Option<String>,
            $( $(#[doc = $doc])+ pub $field: $ty, )*
            /// `(tokens_in - tokens_out) / tokens_in` (0 before any observation; `lam_operator::removal`).
            pub removal: f64,
            /// With `--budget`: the largest input a request of it forwarded
            /// (cl100k of the forwarded body less its non-conversation
            /// members but `system`/`instructions`/tools; 0 without a budget).
            pub peak_input_tokens: u64,
            /// The input the upstream counted for the last request it
            /// answered (its answer's `usage`; 0 before one).
            pub upstream_input_tokens: u64,
            /// Upstream tokens per token lam counts, the largest seen (at
            /// least 1, and 1 before any answer's `usage`; `--budget` is
            /// tightened by it). Reported only: the budget's state is the
            /// session's calibration (`budget::Calibration`), copied here when
            /// the counters are read.
            pub calibration: f64,
            /// The budget its last request was held to, in tokens (before
            /// calibration): `--budget`, `x-lam-budget`, or the default for
            /// its model ([`crate::budget::DefaultBudget`]); 0 with none.
            pub budget_tokens: u64,
            /// The last admission error.
            pub last_error: Option<String>,
        }

        /// Every counter 0, `calibration` 1 (no factor yet).
        impl Default for SessionStats {
            fn default() -> Self {
                Self {
                    conversation: 0,
                    session: String::new(),
                    name: None,
                    agent_session: None,
                    $( $field: Default::default(), )*
                    removal: 0.0,
                    peak_input_tokens: 0,
                    upstream_input_tokens: 0,
                    calibration: 1.0,
                    budget_tokens: 0,
                    last_error: None,
                }
            }
        }

        impl SessionStats {
            /// Add another session's counters (`last_error` stays this one's).
            pub fn absorb(&mut self, o: &SessionStats) {
                $( self.$field += o.$field; )*
                self.peak_input_tokens = self.peak_input_tokens.max(o.peak_input_tokens);
                self.upstream_input_tokens = self.upstream_input_tokens.max(o.upstream_input_tokens);
                self.calibration = self.calibration.max(o.calibration);
                self.budget_tokens = self.budget_tokens.max(o.budget_tokens);
                self.removal = lam_operator::removal(self.tokens_in, self.tokens_out);
            }

            /// The counters as (metric, help, value), in table order.
            fn metrics(&self) -> Vec<(&'static str, &'static str, f64)> {
                vec![ $( ($metric, $help, self.$field as f64), )* ]
            }
        }
    };
}

session_counters! {
    /// Requests that continued this session.
    requests: u64 => "lam_serve_session_requests_total", "Requests rewritten in a session (its first included).";
    /// Items of this session's requests seen for the first time (the only
    /// ones the proxy examines; observations among them are admitted).
    new_items: u64 => "lam_serve_new_items_total", "Conversation items seen for the first time in their session (the only ones examined).";
    /// Items sent again by the client, not examined again: forwarded as
    /// sent, or with the residuals they were first forwarded with.
    reused_items: u64 => "lam_serve_reused_items_total", "Conversation items sent again, not examined again (forwarded as sent, or with their first residuals).";
    /// Observations admitted (each once).
    observations: u64 => "lam_serve_observations_total", "Observations archived and admitted.";
    /// cl100k_base tokens of the admitted originals.
    tokens_in: u64 => "lam_serve_tokens_in_total", "cl100k_base tokens of admitted originals.";
    /// cl100k_base tokens of what was forwarded in their place (stubs included).
    tokens_out: u64 => "lam_serve_tokens_out_total", "cl100k_base tokens forwarded in their place.";
    /// Stub lines written.
    stubs: u64 => "lam_serve_stubs_total", "Stub lines written.";
    /// Observations forwarded verbatim because admission failed.
    admission_errors: u64 => "lam_serve_admission_errors_total", "Observations forwarded verbatim because admission failed.";
    /// Seconds spent admitting (encoding included).
    admit_seconds: f64 => "lam_serve_admit_seconds_total", "Seconds spent admitting observations (encoding included).";
    /// With `--budget`: cuts made (each changes the prefix once).
    cuts: u64 => "lam_serve_cuts_total", "Cuts made to keep a conversation within --budget.";
    /// Of `cuts`, those made at a request that found the prompt cache cold
    /// (more than its TTL after the previous one): down to the target,
    /// whenever the input was above it; free, the whole prompt being
    /// written anyway.
    cuts_cold: u64 => "lam_serve_cuts_cold_total", "Cuts made where the prompt cache was cold (free: the whole prompt is re-written anyway).";
    /// Of `cuts`, those made while the cache was warm: at the budget, when
    /// the cut pays back its re-write (`cuts = cuts_cold + cuts_warm`).
    cuts_warm: u64 => "lam_serve_cuts_warm_total", "Cuts made while the prompt cache was warm (at --budget, when the cut pays back its re-write).";
    /// Tool results replaced by ARC citations.
    citations: u64 => "lam_serve_citations_total", "Tool results replaced by ARC citations (--budget).";
    /// Tokens the citations kept out (forwarded before the cut, less after).
    tokens_cited: u64 => "lam_serve_tokens_cited_total", "cl100k_base tokens the citations kept out of the input (--budget).";
    /// Requests forwarded over the budget: what cannot be cited (user and
    /// assistant text, the system prompt, the newest results) exceeded it.
    over_budget: u64 => "lam_serve_over_budget_total", "Requests forwarded over --budget (what cannot be cited exceeded it).";
    /// Results of the recall tool (`--recall`) the agent received, forwarded whole.
    recalls: u64 => "lam_serve_recalls_total", "Results of the recall tool the agent received (forwarded whole).";
    /// What the requests would have been billed for their input sent
    /// direct, in plain-input tokens at prompt-cache prices (`lam replay`'s
    /// rule: the prefix shared with the conversation's previous request is
    /// read from the cache, the rest written; Anthropic's prices on
    /// `/v1/messages`, OpenAI's on the other routes).
    billed_direct: f64 => "lam_serve_billed_direct_tokens_total", "Input the requests would have been billed sent direct (plain-input tokens at prompt-cache prices).";
    /// What the requests as lam forwarded them were billed, the same way.
    billed_lam: f64 => "lam_serve_billed_tokens_total", "Input the requests as forwarded were billed (plain-input tokens at prompt-cache prices).";
}

impl SessionStats {
    /// Count one request of this session: what admitting it changed.
    pub(crate) fn apply(&mut self, d: &Report) {
        let one = SessionStats {
            requests: 1,
            new_items: d.admission.new_items,
            reused_items: d.admission.reused,
            observations: d.admission.totals.observations,
            tokens_in: d.admission.totals.tokens_in,
            tokens_out: d.admission.totals.tokens_out,
            stubs: d.admission.totals.stubs,
            admission_errors: d.errors(),
            admit_seconds: d.admission.totals.seconds(),
            cuts: d.budget.cut.cuts,
            cuts_cold: d.budget.cut.cold,
            cuts_warm: d.budget.cut.cuts - d.budget.cut.cold,
            citations: d.budget.cut.citations,
            tokens_cited: d.budget.cut.kept_out,
            over_budget: u64::from(d.budget.over_budget),
            recalls: d.admission.recalls,
            peak_input_tokens: d.budget.input_tokens.unwrap_or(0),
            billed_direct: d.receipt.map_or(0.0, |r| r.direct),
            billed_lam: d.receipt.map_or(0.0, |r| r.lam),
            ..SessionStats::default()
        };
        self.absorb(&one);
        if let Some(s) = &d.admission.store_session {
            self.session.clone_from(s);
        }
        if let Some(e) = d.last_error() {
            self.last_error = Some(e.clone());
        }
    }
}

impl Stats {
    /// Every session's counters summed: those held and those dropped.
    pub fn total(&self) -> SessionStats {
        let mut t = self.evicted.clone();
        self.sessions.iter().for_each(|s| t.absorb(s));
        t.session.clear();
        t.conversation = 0;
        t
    }

    /// Requests over every compacted route.
    pub fn model_requests(&self) -> u64 {
        self.requests.values().sum()
    }

    /// The counters in the Prometheus text exposition format (version 0.0.4).
    pub fn prometheus(&self) -> String {
        let mut o = String::new();
        let routes: Vec<(String, f64)> = self.requests.iter().map(|(r, n)| (format!("{{route=\"{r}\"}}"), *n as f64)).collect();
        family(&mut o, "lam_serve_requests_total", "counter", "Requests to compacted routes.", &routes);
        for (name, help, v) in self.counter_metrics() {
            family(&mut o, name, "counter", help, &[(String::new(), v)]);
        }
        let gauges = [
            ("lam_serve_memory_bytes", "Bytes the held sessions hold (estimate).", self.memory_bytes as f64),
            (
                "lam_serve_memory_budget_bytes",
                "Bytes sessions may hold (--max-memory); beyond, the least recently used are dropped.",
                self.memory_budget as f64,
            ),
            ("lam_serve_sessions", "Sessions held.", self.sessions.len() as f64),
            ("lam_serve_store_down", "1 while the store is marked down (out of reach), else 0.", f64::from(u8::from(self.store_down))),
        ];
        for (name, help, v) in gauges {
            family(&mut o, name, "gauge", help, &[(String::new(), v)]);
        }
        let sessions = [
            ("lam_serve_evicted_sessions_total", "Sessions dropped to stay within --max-sessions or --max-memory.", self.evicted_sessions as f64),
            ("lam_serve_sessions_created_total", "Proxy sessions started (one per conversation).", self.sessions_created as f64),
            ("lam_serve_store_outages_total", "Times the store was marked down (out of reach).", self.store_outages as f64),
        ];
        for (name, help, v) in sessions.into_iter().chain(self.total().metrics()) {
            family(&mut o, name, "counter", help, &[(String::new(), v)]);
        }
        o
    }
}

/// One metric family: name, type, help, and its samples (labels, value).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_has_one_metric_and_totals_sum_held_and_evicted() {
        let c = Counters::default();
        c.refused.fetch_add(2, Ordering::Relaxed);
        let s = |name: &str, obs, tin, tout| SessionStats { session: name.into(), observations: obs, tokens_in: tin, tokens_out: tout, ..Default::default() };
        let held = Held { sessions: vec![s("a", 1, 100, 50), s("b", 2, 100, 0)], evicted: s("", 4, 200, 150), ..Held::default() };
        let st = c.read(held);
        let total = st.total();
        assert_eq!((total.observations, total.tokens_in, total.tokens_out), (7, 400, 200));
        assert!((total.removal - 0.5).abs() < 1e-12);
        let text = st.prometheus();
        assert!(text.contains("lam_serve_refused_total 2\n"), "{text}");
        assert!(text.contains("lam_serve_observations_total 7\n"), "{text}");
        let names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).map(|l| l.split(' ').next().unwrap_or("")).collect();
        let unique: std::collections::HashSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "one family per metric: {names:?}");
    }

    /// Before any upstream `usage` the factor is 1 (what a budget is scaled
    /// by), never 0; summing keeps the largest.
    #[test]
    fn calibration_reads_1_until_the_upstream_counts_and_sums_to_the_largest() {
        let mut t = SessionStats::default();
        assert_eq!(t.calibration, 1.0);
        t.apply(&Report::default());
        assert_eq!(t.calibration, 1.0, "a request counted without an answer yet");
        t.absorb(&SessionStats { calibration: 1.25, ..Default::default() });
        t.absorb(&SessionStats::default());
        assert_eq!(t.calibration, 1.25);
        let st = Counters::default().read(Held { sessions: vec![SessionStats::default()], ..Held::default() });
        assert_eq!((st.sessions[0].calibration, st.evicted.calibration, st.total().calibration), (1.0, 1.0, 1.0));
        let json = serde_json::to_value(&st).unwrap();
        assert_eq!(json["sessions"][0]["calibration"], 1.0);
    }
}
