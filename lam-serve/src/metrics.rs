//! `GET /metrics`: the proxy's counters in the Prometheus text exposition
//! format (version 0.0.4): totals over sessions, requests by route.

use crate::Stats;
use std::fmt::Write as _;

/// One metric family: name, type, help, and its samples (labels, value).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

pub(crate) fn render(s: &Stats) -> String {
    let mut o = String::new();
    let sum = |f: fn(&crate::SessionStats) -> u64| (s.sessions.iter().map(f).sum::<u64>() + f(&s.evicted)) as f64;
    let one = |v: f64| vec![(String::new(), v)];
    let routes: Vec<(String, f64)> = s.requests.iter().map(|(r, n)| (format!("{{route=\"{r}\"}}"), *n as f64)).collect();
    family(&mut o, "lam_serve_requests_total", "counter", "Requests to compacted routes.", &routes);
    family(&mut o, "lam_serve_passthrough_requests_total", "counter", "Requests passed through unchanged.", &one(s.passthrough as f64));
    family(&mut o, "lam_serve_bypassed_requests_total", "counter", "Requests with x-lam-bypass: 1.", &one(s.bypassed as f64));
    family(
        &mut o,
        "lam_serve_unparsed_requests_total",
        "counter",
        "Compacted-route requests forwarded as they came (no conversation found).",
        &one(s.unparsed as f64),
    );
    family(
        &mut o,
        "lam_serve_failed_open_total",
        "counter",
        "Requests forwarded as they came because rewriting them failed inside lam.",
        &one(s.failed_open as f64),
    );
    family(&mut o, "lam_serve_upstream_errors_total", "counter", "Upstream answers with status >= 400.", &one(s.upstream_errors as f64));
    family(&mut o, "lam_serve_upstream_unreachable_total", "counter", "Requests answered 502 (upstream unreachable).", &one(s.upstream_unreachable as f64));
    family(&mut o, "lam_serve_too_large_total", "counter", "Requests refused with 413.", &one(s.too_large as f64));
    family(
        &mut o,
        "lam_serve_upstream_timeouts_total",
        "counter",
        "Requests answered 504, or streams cut, because the upstream fell silent.",
        &one(s.upstream_timeouts as f64),
    );
    family(
        &mut o,
        "lam_serve_refused_total",
        "counter",
        "Requests refused with 400 before reaching the upstream (dot segment, repeated conversation member, bad session name).",
        &one(s.refused as f64),
    );
    family(&mut o, "lam_serve_unauthorized_total", "counter", "Requests refused with 401 (no token or a wrong one).", &one(s.unauthorized as f64));
    family(
        &mut o,
        "lam_serve_upgrades_refused_total",
        "counter",
        "Requests refused with 426: protocol upgrades (WebSocket), which would carry the conversation past compaction.",
        &one(s.upgrades_refused as f64),
    );
    family(&mut o, "lam_serve_memory_bytes", "gauge", "Bytes the held sessions hold (estimate).", &one(s.memory_bytes as f64));
    family(
        &mut o,
        "lam_serve_memory_budget_bytes",
        "gauge",
        "Bytes sessions may hold (--max-memory); beyond, the least recently used are dropped.",
        &one(s.memory_budget as f64),
    );
    family(&mut o, "lam_serve_sessions", "gauge", "Sessions held.", &one(s.sessions.len() as f64));
    family(
        &mut o,
        "lam_serve_evicted_sessions_total",
        "counter",
        "Sessions dropped to stay within --max-sessions or --max-memory.",
        &one(s.evicted_sessions as f64),
    );
    family(&mut o, "lam_serve_sessions_created_total", "counter", "Proxy sessions started (one per conversation).", &one(s.sessions_created as f64));
    family(
        &mut o,
        "lam_serve_new_items_total",
        "counter",
        "Conversation items seen for the first time in their session (the only ones examined).",
        &one(sum(|x| x.new_items)),
    );
    family(&mut o, "lam_serve_reused_items_total", "counter", "Conversation items sent again and forwarded as first forwarded.", &one(sum(|x| x.reused_items)));
    family(&mut o, "lam_serve_observations_total", "counter", "Observations archived and admitted.", &one(sum(|x| x.observations)));
    family(&mut o, "lam_serve_tokens_in_total", "counter", "cl100k_base tokens of admitted originals.", &one(sum(|x| x.tokens_in)));
    family(&mut o, "lam_serve_tokens_out_total", "counter", "cl100k_base tokens forwarded in their place.", &one(sum(|x| x.tokens_out)));
    family(&mut o, "lam_serve_stubs_total", "counter", "Stub lines written.", &one(sum(|x| x.stubs)));
    family(
        &mut o,
        "lam_serve_admission_errors_total",
        "counter",
        "Observations forwarded verbatim because admission failed.",
        &one(sum(|x| x.admission_errors)),
    );
    let secs: f64 = s.sessions.iter().map(|x| x.admit_seconds).sum::<f64>() + s.evicted.admit_seconds;
    family(&mut o, "lam_serve_admit_seconds_total", "counter", "Seconds spent admitting observations (encoding included).", &one(secs));
    o
}
