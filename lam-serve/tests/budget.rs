//! `--budget`: a bounded input whose every cut is frozen, the same from a
//! proxy that saw none of the earlier requests, and lossless (each cited
//! output recalls exactly); no stub after a cut names a cited output.

use lam_core::{ObsStore as _, SessionId};
use lam_serve::{Api, Budget, Proxy, ServeConfig};
use serde_json::{Value, json};

/// Turn `k`'s output: distinct lines (~1000 cl100k tokens); turn 9 re-reads turn 1's file.
fn output(k: usize) -> String {
    let k = if k == 9 { 1 } else { k };
    (0..40).map(|i| format!("src/module_{k}/file_{i}.py:{}: def handler_{k}_{i}(request, *args):\n", i * 7 + k)).collect()
}

/// The conversation after `n` turns (the last result not answered yet).
fn body(n: usize) -> Vec<u8> {
    let mut m = vec![json!({"role": "system", "content": "You are a coding agent."}), json!({"role": "user", "content": "fix the bug"})];
    for k in 0..n {
        let id = format!("call_{k}");
        let cmd = format!("{{\"cmd\":\"cat src/module_{}.py\"}}", if k == 9 { 1 } else { k });
        m.push(json!({"role": "assistant", "content": format!("step {k}"), "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": cmd}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": output(k)}));
    }
    serde_json::to_vec(&json!({"model": "m", "messages": m})).unwrap()
}

fn proxy(dir: &std::path::Path) -> Proxy {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = arc_store::StoreSpec::Dir(dir.join("arc"));
    cfg.run = Some("budget".into());
    cfg.engine.recall = lam_core::stub::Recall::Via("mcp__lam__recall");
    cfg.engine.budget = Some(Budget::new(8000, Some(4000), Some(2)).unwrap());
    Proxy::open(cfg).unwrap()
}

fn items(b: &[u8]) -> Vec<Value> {
    serde_json::from_slice::<Value>(b).unwrap()["messages"].as_array().unwrap().clone()
}

fn content(v: &Value) -> &str {
    v["content"].as_str().unwrap_or("")
}

#[test]
fn a_budget_bounds_the_input_with_frozen_lossless_cuts() {
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(dir.path());
    let mut sent = Vec::new();
    for n in 1..=14 {
        let r = p.try_rewrite(Api::ChatCompletions, None, &body(n)).unwrap();
        let tokens = lam_tokens::count(&r.body);
        assert!(tokens <= 8000 + 2 * n + 8, "request {n}: {tokens} tokens forwarded, over the budget");
        sent.push(r.body);
    }
    let st = p.stats().total();
    assert!(st.cuts >= 2 && st.citations >= 6, "{st:?}");
    assert_eq!(st.over_budget, 0);
    assert!(st.peak_input_tokens <= 8000 && st.tokens_cited > 6000, "{st:?}");
    // Between cuts every item forwarded before goes again byte for byte: the
    // prefix changes at most once per cut.
    let changed = sent.windows(2).filter(|w| !items(&w[1]).starts_with(&items(&w[0]))).count();
    assert!(changed as u64 <= st.cuts, "{changed} prefix changes for {} cuts", st.cuts);
    let last = items(sent.last().unwrap());
    let results: Vec<&Value> = last.iter().filter(|v| v["role"] == "tool").collect();
    let cited: Vec<&str> = results.iter().map(|v| content(v)).filter(|c| c.starts_with("[lam: cited")).collect();
    assert_eq!(cited.len() as u64, st.citations);
    assert!(results[results.len() - 2..].iter().all(|v| !content(v).starts_with("[lam: cited")), "the newest 2 are kept");
    // Each citation names its call, size and the recall tool, the newest
    // cut's with head and tail previews (an earlier cut's shrink to one
    // line at the next), and its id recalls the exact original.
    let full = cited.iter().filter(|c| c.contains("\n  head: src/module_") && c.contains("\n  tail: ")).count();
    let lines = cited.iter().filter(|c| c.lines().count() == 1 && c.contains(" tok ")).count();
    assert!(full > 0 && lines > 0 && full + lines == cited.len(), "{full} full, {lines} one-line of {}", cited.len());
    let store = arc_store::open(&arc_store::StoreSpec::Dir(dir.path().join("arc")), arc_store::Access::ReadOnly).unwrap();
    for (k, v) in results.iter().enumerate() {
        let c = content(v);
        let Some(rest) = c.strip_prefix("[lam: cited to keep the context within its budget] `") else { continue };
        assert!(rest.starts_with(&format!("cat src/module_{}.py` → §", if k == 9 { 1 } else { k })), "{c}");
        assert!(c.contains("mcp__lam__recall §"), "{c}");
        let id = rest.split('§').nth(1).unwrap().split(' ').next().unwrap();
        let original = store.get(&SessionId::new("budget"), id).unwrap().expect("archived");
        assert_eq!(original, output(k).into_bytes(), "§{id} recalls turn {k}'s output exactly");
    }
    // Turn 9 re-reads turn 1's file after turn 1 was cited: it comes whole,
    // never as a stub naming a cited output.
    let result = |turn: usize| 3 + 2 * turn;
    assert!(content(&last[result(1)]).starts_with("[lam: cited"), "turn 1 was cited");
    assert_eq!(content(&items(&sent[9])[result(9)]), output(9), "no stub names what only a citation stands for");
    // A proxy that saw none of the earlier requests (a restart, another
    // replica of the run) forwards the same bytes.
    drop(p);
    let fresh = proxy(dir.path());
    assert_eq!(&fresh.try_rewrite(Api::ChatCompletions, None, &body(14)).unwrap().body, sent.last().unwrap());
}

#[test]
fn without_a_budget_nothing_is_cited() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = arc_store::StoreSpec::Dir(dir.path().join("arc"));
    let p = Proxy::open(cfg).unwrap();
    let r = p.try_rewrite(Api::ChatCompletions, None, &body(14)).unwrap();
    assert!(!String::from_utf8_lossy(&r.body).contains("[lam: cited"));
    let st = p.stats().total();
    assert_eq!((st.cuts, st.citations, st.peak_input_tokens), (0, 0, 0));
}

/// Large tool-call inputs are archived and cited too: a patch inside a
/// Responses `function_call`'s JSON-string arguments (Codex's
/// `apply_patch` through its shell tool) becomes a citation there, the
/// arguments still JSON of the same shape, and its id recalls the patch.
#[test]
fn a_large_tool_input_is_cited_inside_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(dir.path());
    let patch = |k: usize| -> String { format!("*** Begin Patch\n*** Update File: m{k}.py\n") + &output(k).replace("src/", "+src/") + "*** End Patch\n" };
    let body = |n: usize| {
        let mut items = vec![json!({"type": "message", "role": "user", "content": "apply the patches"})];
        for k in 0..n {
            let args = json!({"command": ["apply_patch", patch(k)], "workdir": "/w"}).to_string();
            items.push(json!({"type": "function_call", "name": "shell", "call_id": format!("c{k}"), "arguments": args}));
            items.push(json!({"type": "function_call_output", "call_id": format!("c{k}"), "output": format!("Success. Updated m{k}.py\n")}));
        }
        serde_json::to_vec(&json!({"model": "m", "instructions": "be brief", "input": items})).unwrap()
    };
    let mut last = Vec::new();
    for n in 1..=12 {
        last = p.try_rewrite(Api::Responses, None, &body(n)).unwrap().body;
        assert!(lam_tokens::count(&last) <= 8000 + 2 * n + 8, "request {n} over the budget");
    }
    assert!(p.stats().total().citations >= 3);
    let sent: Value = serde_json::from_slice(&last).unwrap();
    let first: Value = serde_json::from_str(sent["input"][1]["arguments"].as_str().unwrap()).expect("still JSON arguments");
    assert_eq!((&first["command"][0], &first["workdir"]), (&json!("apply_patch"), &json!("/w")), "the shape stays");
    let cited = first["command"][1].as_str().unwrap();
    assert!(cited.starts_with("[lam: cited to keep the context within its budget] `command/1 of shell apply_patch"), "{cited}");
    assert!(!cited.lines().next().unwrap().contains("Update File: m0.py"), "the lead names the call, never repeats the input: {cited}");
    let id = cited.split('§').nth(1).unwrap().split(' ').next().unwrap();
    let store = arc_store::open(&arc_store::StoreSpec::Dir(dir.path().join("arc")), arc_store::Access::ReadOnly).unwrap();
    assert_eq!(store.get(&SessionId::new("budget"), id).unwrap().unwrap(), patch(0).into_bytes(), "§{id} recalls the patch exactly");
}

/// A cut that cites an output which the newest result's stubs name sends
/// that result whole (its archived original) instead: no line the model
/// is told is "as above" is only in a citation.
#[test]
fn a_protected_result_naming_a_cited_output_goes_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = arc_store::StoreSpec::Dir(dir.path().join("arc"));
    cfg.engine.budget = Some(Budget::new(7000, Some(1000), Some(1)).unwrap());
    let p = Proxy::open(cfg).unwrap();
    let extra: String = (0..60).map(|i| format!("tests/test_new_{i}.py::test_case_{i} PASSED in {}ms\n", i * 13)).collect();
    let rerun = output(5) + &extra;
    let body = |n: usize| {
        let mut m = vec![json!({"role": "user", "content": "fix the bug"})];
        for k in 0..n {
            let id = format!("call_{k}");
            m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\":\"run {k}\"}}")}}]}));
            m.push(json!({"role": "tool", "tool_call_id": id, "content": if k == 6 { rerun.clone() } else { output(k) }}));
        }
        serde_json::to_vec(&json!({"model": "m", "messages": m})).unwrap()
    };
    for n in 1..=6 {
        p.try_rewrite(Api::ChatCompletions, None, &body(n)).unwrap();
    }
    assert_eq!(p.stats().total().cuts, 0);
    let last = items(&p.try_rewrite(Api::ChatCompletions, None, &body(7)).unwrap().body);
    assert_eq!(p.stats().total().cuts, 1);
    assert!(content(&last[2 * 5 + 2]).starts_with("[lam: cited"), "output 5 is cited: {}", content(&last[12]));
    assert_eq!(content(&last[2 * 6 + 2]), rerun, "the newest result named output 5's lines: it goes whole");
    let unbounded = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
    let stubbed = items(&unbounded.try_rewrite(Api::ChatCompletions, None, &body(7)).unwrap().body);
    assert!(content(&stubbed[14]).starts_with("[lam: lines 1-40 of `run 5`"), "without a budget it names output 5: {}", content(&stubbed[14]));
}
