//! The proxy's pure part, without HTTP: session matching, rewriting, prefix
//! stability and exact recall, over real trajectories replayed as growing
//! conversations in each API's shape.

use arc_store::{Access, StoreSpec};
use lam_core::TokenCounter;
use lam_serve::{Api, Proxy, Rewritten, ServeConfig};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::path::PathBuf;

/// Up to `n` records of the first mini-swe-agent trajectories of the corpus.
fn trajectories(count: usize, n: usize) -> Vec<lam_trajectory::read::Trajectory> {
    let dir = lam_core::testsuite::corpus().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .take(count)
        .map(|f| {
            let mut t = lam_trajectory::read::read_path(f).unwrap().remove(0);
            t.records.truncate(n);
            t
        })
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The request body after `k` observations, in `api`'s shape.
fn body(api: Api, t: &lam_trajectory::read::Trajectory, k: usize) -> Vec<u8> {
    let task = format!("{}\n(task of {})", t.task, t.session);
    let mut items = vec![json!({"role": "user", "content": task})];
    for (j, r) in t.records.iter().take(k).enumerate() {
        let id = format!("call_{j}");
        let args = json!({"command": r.action}).to_string();
        let obs = text(&r.observation);
        match api {
            Api::ChatCompletions => {
                items.push(json!({"role": "assistant", "content": t.thoughts.get(j), "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": args}}]}));
                items.push(json!({"role": "tool", "tool_call_id": id, "content": obs}));
            }
            Api::Messages => {
                items.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "bash", "input": {"command": r.action}}]}));
                items.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": obs}]}));
            }
            Api::Responses => {
                items.push(json!({"type": "function_call", "call_id": id, "name": "bash", "arguments": args}));
                items.push(json!({"type": "function_call_output", "call_id": id, "output": obs}));
            }
            // Gemini CLI's shape (docs/agents.md): the call's part carries its thought signature.
            Api::Gemini => {
                let call = json!({"functionCall": {"id": id, "name": "run_shell_command", "args": {"command": r.action}}, "thoughtSignature": "skip_thought_signature_validator"});
                items.push(json!({"role": "model", "parts": [call]}));
                items.push(json!({"role": "user", "parts": [{"functionResponse": {"id": id, "name": "run_shell_command", "response": {"output": obs}}}]}));
            }
        }
    }
    if api == Api::Gemini {
        items[0] = json!({"role": "user", "parts": [{"text": task}]});
        return serde_json::to_vec(&json!({"contents": items, "systemInstruction": {"parts": [{"text": "be brief"}]}})).unwrap();
    }
    let field = api.list_field();
    serde_json::to_vec(&json!({"model": "stub", "system": "be brief", field: items})).unwrap()
}

/// The forwarded conversation items, as raw bytes.
fn items(api: Api, forwarded: &[u8]) -> Vec<String> {
    let field = api.list_field();
    // Raw bytes of the body itself, not of a re-serialisation.
    let members: std::collections::BTreeMap<String, Box<RawValue>> = serde_json::from_slice(forwarded).unwrap();
    let list: Vec<Box<RawValue>> = serde_json::from_str(members[field].get()).unwrap();
    list.iter().map(|r| r.get().to_string()).collect()
}

/// The observation texts of forwarded items (tool results only).
fn observations(api: Api, item: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(item).unwrap();
    let s = |x: &Value| x.as_str().map(str::to_string);
    match api {
        Api::ChatCompletions if v["role"] == "tool" => s(&v["content"]).into_iter().collect(),
        Api::Messages => v["content"].as_array().into_iter().flatten().filter(|b| b["type"] == "tool_result").filter_map(|b| s(&b["content"])).collect(),
        Api::Responses if v["type"] == "function_call_output" => s(&v["output"]).into_iter().collect(),
        Api::Gemini => v["parts"].as_array().into_iter().flatten().filter_map(|p| s(&p["functionResponse"]["response"]["output"])).collect(),
        _ => Vec::new(),
    }
}

fn proxy(store: &std::path::Path) -> Proxy {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = StoreSpec::Dir(store.to_path_buf());
    // A recall handle, so that every stub names its observation's id.
    cfg.engine.recall = lam_core::stub::Recall::ARC;
    Proxy::open(cfg).unwrap()
}

/// Replay every trajectory turn by turn, interleaved (as parallel agents would);
/// returns every session's forwarded requests.
fn replay(p: &Proxy, api: Api, ts: &[lam_trajectory::read::Trajectory]) -> Vec<Vec<Rewritten>> {
    let mut out: Vec<Vec<Rewritten>> = vec![Vec::new(); ts.len()];
    let most = ts.iter().map(|t| t.records.len()).max().unwrap();
    for k in 1..=most {
        for (i, t) in ts.iter().enumerate().filter(|(_, t)| t.records.len() >= k) {
            out[i].push(p.rewrite(api, None, &body(api, t, k)));
        }
    }
    out
}

#[test]
fn replayed_trajectories_are_compacted_prefix_stable_and_recallable() {
    let ts = trajectories(2, 25);
    let mut repeats = 0;
    for api in Api::ALL {
        let dir = tempfile::tempdir().unwrap();
        let p = proxy(dir.path());
        let runs = replay(&p, api, &ts);
        let mut sessions = Vec::new();
        for (t, run) in ts.iter().zip(&runs) {
            let s = run[0].conversation.expect("a conversation");
            assert!(run.iter().all(|r| r.conversation == Some(s)), "{api:?}: one trajectory, one session");
            sessions.push(s);
            let mut prev: Vec<String> = Vec::new();
            for r in run {
                let now = items(api, &r.body);
                assert!(now.len() > prev.len());
                assert_eq!(now[..prev.len()], prev[..], "{api:?}: earlier items forwarded byte-identically");
                prev = now;
            }
            // Fewer tokens forwarded than received, and every stub recalls exactly.
            let last = runs_last(run);
            let originals: Vec<String> = t.records.iter().map(|r| text(&r.observation)).collect();
            let sent: Vec<String> = items(api, &last.body).iter().flat_map(|i| observations(api, i)).collect();
            assert_eq!(sent.len(), originals.len());
            let tok = |v: &[String]| v.iter().map(|s| lam_trajectory::Cl100k.count(s.as_bytes())).sum::<usize>();
            assert!(tok(&sent) < tok(&originals), "{api:?}: {} tokens forwarded of {}", tok(&sent), tok(&originals));
            check_recall(dir.path(), &sent, &originals);
            repeats += check_referents(&last.body, &sent);
        }
        assert_ne!(sessions[0], sessions[1], "two trajectories, two sessions");
        let st = p.stats();
        assert_eq!(st.sessions.len(), 2);
        let mut total = 0;
        for (s, t) in st.sessions.iter().zip(&ts) {
            assert!(s.tokens_out < s.tokens_in && s.stubs > 0 && s.admission_errors == 0, "{s:?}");
            let n = t.records.iter().filter(|r| !r.observation.is_empty()).count() as u64;
            assert_eq!(s.observations, n, "each observation admitted once");
            total += n;
        }
        assert!(p.metrics().contains(&format!("lam_serve_observations_total {total}\n")));
        p.close().unwrap();
    }
    eprintln!("{repeats} whole-repeat stubs, each naming a call earlier in the forwarded body");
}

/// Every call a stub names occurs verbatim in the forwarded body before
/// the stub, and lines of "this output" lie above the stub in its
/// observation (the operator's tests check the named call is an earlier
/// observation's, never the stub's own). Returns how many whole-repeat
/// stubs there were.
fn check_referents(body: &[u8], sent: &[String]) -> usize {
    let body = text(body);
    let mut repeats = 0;
    for s in sent {
        for (at_line, line) in s.lines().enumerate() {
            let Some(stub) = lam_core::Stub::parse_bytes(line.as_bytes()) else { continue };
            let at = body.find(line).expect("the stub is in the body");
            for call in stub.calls() {
                // A long path is named by its end, after `...`.
                let call = call.strip_prefix("...").unwrap_or(call);
                assert!(body[..at].contains(call), "`{call}` is not earlier in the forwarded body: {line}");
            }
            if let lam_core::Stub::Chunks(c) = &stub {
                assert!(c.like.iter().all(|p| p.of.is_some() || (p.last as usize) <= at_line), "{line}: lines of this output below the stub");
            }
            if let lam_core::Stub::Lines(l) = &stub {
                // By the reader's rule (printed numbers in a numbered listing).
                let above: String = s.lines().take(at_line).map(|x| format!("{x}\n")).collect();
                let ok = l.from.of.is_some() || lam_core::expand::place_in(above.as_bytes(), l.from.first, l.from.last).is_some();
                assert!(ok, "{line}: names no lines of this output above the stub");
            }
            repeats += usize::from(matches!(stub, lam_core::Stub::Repeat(_)));
        }
    }
    repeats
}

fn runs_last(run: &[Rewritten]) -> &Rewritten {
    run.last().unwrap()
}

/// Every stub's observation recalls to exactly the original it stands in
/// (the stub's only id).
fn check_recall(store: &std::path::Path, sent: &[String], originals: &[String]) {
    let st = arc_store::open(&StoreSpec::Dir(store.to_path_buf()), Access::ReadOnly).unwrap();
    let mut stubs = 0;
    for (s, o) in sent.iter().zip(originals) {
        for stub in lam_core::stub::parse_residual(s.as_bytes()).unwrap() {
            stubs += 1;
            assert_eq!(text(&arc_store::find(st.as_ref(), None, stub.id()).unwrap().bytes), *o);
        }
    }
    assert!(stubs > 0);
}

#[test]
fn diverging_runs_of_one_task_split_and_names_win() {
    let t = &trajectories(1, 6)[0];
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(dir.path());
    let api = Api::ChatCompletions;
    // Two runs of one task: identical until their first observation differs.
    let a1 = p.rewrite(api, None, &body(api, t, 1));
    let mut other = t.clone();
    other.records[0].observation = b"a different first observation\n".to_vec();
    let b1 = p.rewrite(api, None, &body(api, &other, 1));
    assert_ne!(a1.conversation, b1.conversation, "diverged conversations never share a session");
    assert_eq!(a1.session, b1.session, "both archive in the run's store session");
    let a2 = p.rewrite(api, None, &body(api, t, 2));
    let b2 = p.rewrite(api, None, &body(api, &other, 2));
    assert_eq!(a2.conversation, a1.conversation);
    assert_eq!(b2.conversation, b1.conversation);
    // A retry of the same request stays in the session and forwards the same bytes.
    assert_eq!(p.rewrite(api, None, &body(api, t, 2)).body, a2.body);
    // A shorter request (a truncated history) is not a continuation: a new
    // session, archiving in the run's store session (so its ids are the same).
    let trunc = p.rewrite(api, None, &body(api, t, 1));
    assert!(trunc.conversation.is_some() && trunc.conversation != a1.conversation && trunc.conversation != b1.conversation);
    assert_eq!(trunc.body, a1.body);
    // A named session continues by name whatever the content.
    let n1 = p.rewrite(api, Some("run-7"), &body(api, t, 3));
    let n2 = p.rewrite(api, Some("run-7"), &body(api, &other, 3));
    assert_eq!(n1.session.as_deref(), Some("run-7"));
    assert_eq!(n2.session.as_deref(), Some("run-7"));
    // Another API never continues a chat session.
    let m = p.rewrite(Api::Messages, None, &body(Api::Messages, t, 2));
    assert!(m.conversation != a2.conversation && m.conversation != b2.conversation);
    // Not a conversation: forwarded as it came.
    let raw = br#"{"model":"m","input":"hello"}"#;
    let r = p.rewrite(Api::Responses, None, raw);
    assert_eq!((r.body.as_slice(), r.session), (&raw[..], None));
    assert_eq!(p.stats().unparsed, 1);
}

#[test]
fn items_seen_before_keep_their_forwarded_bytes_in_any_position() {
    let t = &trajectories(1, 4)[0];
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(dir.path());
    let api = Api::ChatCompletions;
    let full = p.rewrite(api, Some("s"), &body(api, t, 4));
    let sent = items(api, &full.body);
    // The agent drops turns 1-2 from its history: the rest is forwarded as before.
    let mut v: Value = serde_json::from_slice(&body(api, t, 4)).unwrap();
    let m = v["messages"].as_array_mut().unwrap();
    m.drain(1..5);
    let again = p.rewrite(api, Some("s"), &serde_json::to_vec(&v).unwrap());
    let now = items(api, &again.body);
    assert_eq!(now[0], sent[0]);
    assert_eq!(now[1..], sent[5..]);
    assert_eq!(p.stats().sessions[0].observations, 4, "nothing admitted twice");
}

#[test]
fn user_turn_observations_when_asked() {
    let t = &trajectories(1, 12)[0];
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = StoreSpec::Dir(dir.path().to_path_buf());
    cfg.engine.user_turns = true;
    let p = Proxy::open(cfg).unwrap();
    // mini-swe-agent's own shape: observations as user turns after the task.
    let mut m = vec![json!({"role": "system", "content": "sys"}), json!({"role": "user", "content": t.task})];
    for r in &t.records {
        m.push(json!({"role": "assistant", "content": r.action}));
        m.push(json!({"role": "user", "content": text(&r.observation)}));
    }
    let b = serde_json::to_vec(&json!({"model": "m", "messages": m})).unwrap();
    let out = p.rewrite(Api::ChatCompletions, None, &b);
    let st = &p.stats().sessions[0];
    assert_eq!(st.observations, 12, "the task is not an observation");
    assert!(st.tokens_out < st.tokens_in);
    assert_eq!(items(Api::ChatCompletions, &out.body)[1], items(Api::ChatCompletions, &b)[1], "the task goes as it came");
}

#[test]
fn least_recently_used_sessions_are_evicted_beyond_the_limit() {
    let t = &trajectories(1, 3)[0];
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = StoreSpec::Dir(dir.path().to_path_buf());
    cfg.max_sessions = 2;
    let p = Proxy::open(cfg).unwrap();
    let api = Api::ChatCompletions;
    let tagged = |i: usize| {
        let mut u = t.clone();
        u.task = format!("{} #{i}", u.task);
        u
    };
    let s0 = p.rewrite(api, None, &body(api, &tagged(0), 2)).conversation;
    let s1 = p.rewrite(api, None, &body(api, &tagged(1), 2));
    assert_eq!(p.rewrite(api, None, &body(api, &tagged(0), 3)).conversation, s0, "0 used last");
    p.rewrite(api, None, &body(api, &tagged(2), 1));
    let st = p.stats();
    assert_eq!((st.sessions.len(), st.evicted_sessions), (2, 1));
    assert_eq!((st.evicted.session.as_str(), st.evicted.conversation), ("", 0));
    assert_eq!(st.evicted.requests, 1, "session 1 (least recently used) went");
    assert!(st.sessions.iter().all(|s| Some(s.conversation) != s1.conversation));
    // An evicted conversation starts anew, archiving in the same store session.
    let again = p.rewrite(api, None, &body(api, &tagged(1), 3));
    assert_eq!((again.conversation, again.session), (Some(4), s1.session), "an evicted conversation starts anew");
    assert!(p.metrics().contains("lam_serve_evicted_sessions_total 2\n"));
}

/// Stubs name only a way to recall that exists where they are read: none
/// through the proxy by default, the agent's tool when one is configured.
#[test]
fn the_recall_handle_is_none_by_default_and_the_configured_tool_otherwise() {
    let log: String = (0..40).map(|i| format!("tests/test_{i}.py::test_case PASSED\n")).collect();
    let edited: String = log.replacen("test_7.py::test_case PASSED", "test_7.py::test_case FAILED", 1);
    let turn = |outs: &[&str]| {
        let mut m = vec![json!({"role": "user", "content": "fix the bug"})];
        for (k, out) in outs.iter().enumerate() {
            let id = format!("call_{k}");
            m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\":\"pytest -k {k}\"}}")}}]}));
            m.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
        }
        serde_json::to_vec(&json!({"model": "m", "messages": m})).unwrap()
    };
    let body = turn(&[&log, &log, &edited]);
    let forwarded = |recall: &str| {
        let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
        if !recall.is_empty() {
            cfg.engine.recall = lam_core::stub::Recall::parse(recall).unwrap();
        }
        let out = Proxy::open(cfg).unwrap().rewrite(Api::ChatCompletions, None, &body).body;
        let sent: Value = serde_json::from_slice(&out).unwrap();
        let (repeat, near) = (sent["messages"][4]["content"].as_str().unwrap().to_string(), sent["messages"][6]["content"].as_str().unwrap().to_string());
        assert_eq!(check_referents(&out, &[repeat.clone(), near.clone()]), 1);
        (repeat, near)
    };
    let (repeat, near) = forwarded("");
    assert_eq!(repeat, "[lam: same output as `pytest -k 0` above]\n", "the earlier call as the model saw it; no handle");
    assert!(near.contains("[lam: ") && !near.contains("recall"), "{near}");
    let (repeat, near) = forwarded("mcp__lam__recall");
    assert!(repeat.starts_with("[lam: same output as `pytest -k 0` above; mcp__lam__recall §"), "{repeat}");
    assert!(near.contains("; mcp__lam__recall §"), "{near}");
    // Every stub still parses back through the one parser.
    assert!(!lam_core::stub::parse_residual(near.as_bytes()).unwrap().is_empty());
}
