//! Cuts timed by the prompt cache (`--budget`, `--cache-ttl`): a request
//! that comes more than the cache's TTL after the previous one finds the
//! cache cold and is cut down to the target, although under the budget;
//! while warm, nothing is cut below the budget. Whether a request was cold
//! is recorded once, so replicas in round robin and a proxy restarted
//! before every request forward the same bytes.

use arc_store::AnyStore;
use lam_serve::bill::CacheTtl;
use lam_serve::{Api, Arrival, Budget, Proxy, ServeConfig};
use serde_json::json;
use std::path::Path;

mod shared_store;
use shared_store::Shared;

/// Turn `k`'s output: distinct lines (~1000 cl100k tokens).
fn output(k: usize) -> String {
    (0..40).map(|i| format!("src/module_{k}/file_{i}.py:{}: def handler_{k}_{i}(request, *args):\n", i * 7 + k)).collect()
}

/// The conversation after `n` turns (the last result not answered yet).
fn body(n: usize) -> Vec<u8> {
    let mut m = vec![json!({"role": "system", "content": "You are a coding agent."}), json!({"role": "user", "content": "fix the bug"})];
    for k in 0..n {
        let id = format!("call_{k}");
        let cmd = format!("{{\"cmd\":\"cat src/module_{k}.py\"}}");
        m.push(json!({"role": "assistant", "content": format!("step {k}"), "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": cmd}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": output(k)}));
    }
    serde_json::to_vec(&json!({"model": "m", "messages": m})).unwrap()
}

const BUDGET: u64 = 8000;
const TARGET: u64 = 4000;
/// The TTL, shortened for the test (`--cache-ttl 60`).
const TTL: u64 = 60;

fn proxy(store: &Shared, dir: &Path) -> Proxy {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = arc_store::StoreSpec::Dir(dir.to_path_buf());
    cfg.run = Some("cold".into());
    cfg.engine.budget = Some(Budget::new(BUDGET, Some(TARGET), Some(2)).unwrap());
    cfg.cache_ttl = Some(CacheTtl(Some(TTL)));
    Proxy::open_on(cfg, Box::new(store.clone()) as AnyStore).unwrap()
}

/// When request `n` (1..) arrives: every 10 s, and `gap` seconds instead
/// of 10 before request 6.
fn time(n: usize, gap: i64) -> i64 {
    const T0: i64 = 1_700_000_000_000;
    T0 + n as i64 * 10_000 + if n >= 6 { (gap - 10) * 1000 } else { 0 }
}

const REQUESTS: usize = 14;

/// Requests 1..=14 through `pick(n)`, each at its time: the bodies forwarded.
fn conversation(gap: i64, mut pick: impl FnMut(usize) -> Proxy) -> Vec<Vec<u8>> {
    (1..=REQUESTS).map(|n| pick(n).try_rewrite_at(Api::ChatCompletions, None, &body(n), None, Arrival::at(Some(time(n, gap)))).unwrap().body).collect()
}

fn tokens(b: &[u8]) -> u64 {
    lam_tokens::count(b) as u64
}

/// A 120 s gap before request 6 (TTL 60 s): it is cut to the target,
/// under the budget; without the gap it is not cut. While warm, the
/// conversation is cut only at the budget.
#[test]
fn a_request_after_the_ttl_is_cut_to_the_target_and_none_is_cut_warm_below_the_budget() {
    let run = |gap: i64| {
        let dir = tempfile::tempdir().unwrap();
        let store = Shared::new(dir.path());
        let p = proxy(&store, dir.path());
        let mut cuts = Vec::new();
        let sent = conversation(gap, |_| {
            cuts.push(p.stats().total());
            p.clone()
        });
        cuts.push(p.stats().total());
        (sent, cuts)
    };
    let (warm, warm_stats) = run(10);
    let (cold, cold_stats) = run(120);
    // Requests 1 to 5 are the same either way: above the target from
    // request 5 on, under the budget, never cut.
    assert_eq!(warm[..5], cold[..5]);
    let before = tokens(&cold[4]);
    assert!(before > TARGET && before < BUDGET, "request 5: {before} tokens");
    assert_eq!(cold_stats[5].cuts, 0, "no cut while warm below the budget");
    // Request 6, after the gap: cold, cut down to the target.
    let (c, w) = (tokens(&cold[5]), tokens(&warm[5]));
    assert!(w > TARGET && w < BUDGET, "warm request 6: {w} tokens");
    assert_eq!(warm_stats[6].cuts, 0, "warm request 6 is under the budget: not cut");
    assert!(c <= TARGET + 40, "cold request 6: {c} tokens, over the target");
    let s = &cold_stats[6];
    assert_eq!((s.cuts, s.cuts_cold, s.cuts_warm), (1, 1, 0), "{s:?}");
    assert!(String::from_utf8_lossy(&cold[5]).contains("[lam: cited"));
    // Then warm again: cut at the budget only, and counted warm.
    for (n, b) in cold.iter().enumerate().skip(6) {
        assert!(tokens(b) <= BUDGET + 40, "request {}: {} tokens", n + 1, tokens(b));
    }
    let (s, ws) = (cold_stats.last().unwrap(), warm_stats.last().unwrap());
    assert!(s.cuts_warm >= 1 && s.cuts_cold == 1 && s.cuts == s.cuts_cold + s.cuts_warm, "{s:?}");
    assert!(ws.cuts_warm >= 1 && ws.cuts_cold == 0 && ws.cuts == ws.cuts_warm, "{ws:?}");
    let p = {
        let dir = tempfile::tempdir().unwrap();
        let store = Shared::new(dir.path());
        let p = proxy(&store, dir.path());
        conversation(120, |_| p.clone());
        p
    };
    let m = p.metrics();
    assert!(m.contains("lam_serve_cuts_cold_total 1\n") && m.contains("lam_serve_cuts_warm_total "), "{m}");
    let json = serde_json::to_value(p.stats()).unwrap();
    assert_eq!(json["sessions"][0]["cuts_cold"], 1);
}

/// The same conversation, with the gap, through three replicas in round
/// robin and through a proxy restarted before every request (which gets
/// no time at all): 0 bodies differ from one proxy's. A replica that
/// never saw request 5 judges request 6 cold from the ledger's record of
/// it; a restarted proxy reads request 6's decision back.
#[test]
fn replicas_and_restarts_read_the_cold_decision_back() {
    let one = {
        let dir = tempfile::tempdir().unwrap();
        let store = Shared::new(dir.path());
        let p = proxy(&store, dir.path());
        conversation(120, |_| p.clone())
    };
    assert!(String::from_utf8_lossy(&one[5]).contains("[lam: cited"), "request 6 was cut cold");
    let dir = tempfile::tempdir().unwrap();
    let store = Shared::new(dir.path());
    let replicas: Vec<Proxy> = (0..3).map(|_| proxy(&store, dir.path())).collect();
    let round = conversation(120, |n| replicas[n % 3].clone());
    let differ = one.iter().zip(&round).filter(|(a, b)| a != b).count();
    assert_eq!(differ, 0, "replicas in round robin: {differ} bodies differ");
    let cold: Vec<u64> = replicas.iter().map(|p| p.stats().total().cuts_cold).collect();
    assert_eq!(cold, [1, 1, 1], "each replica, rebuilding the conversation, makes the one cold cut");
    // Restarts: a fresh proxy for each request, with no time, on the store
    // the replicas wrote: every request's bytes again.
    let again: Vec<Vec<u8>> =
        (1..=REQUESTS).map(|n| proxy(&store, dir.path()).rewrite_at(Api::ChatCompletions, None, &body(n), Arrival::default()).body).collect();
    let differ = one.iter().zip(&again).filter(|(a, b)| a != b).count();
    assert_eq!(differ, 0, "restarts: {differ} bodies differ");
}
