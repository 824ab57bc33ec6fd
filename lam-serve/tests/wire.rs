//! The proxy on the request shapes agents really send: Claude Code moves its
//! `cache_control` marks to the last two messages every request, and items
//! that differ in any content byte are never taken for one another.

use lam_serve::{Api, Proxy, ServeConfig};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::sync::OnceLock;

fn proxy() -> &'static Proxy {
    static P: OnceLock<Proxy> = OnceLock::new();
    P.get_or_init(|| Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap())
}

/// Raw bytes of each conversation item of a forwarded body.
fn raw_items(body: &[u8], field: &str) -> Vec<String> {
    let members: std::collections::BTreeMap<String, Box<RawValue>> = serde_json::from_slice(body).unwrap();
    let list: Vec<Box<RawValue>> = serde_json::from_str(members[field].get()).unwrap();
    list.iter().map(|r| r.get().to_string()).collect()
}

/// Remove every `cache_control` member (what the client moves) from a value.
fn unmarked(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| *k != "cache_control").map(|(k, v)| (k.clone(), unmarked(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(unmarked).collect()),
        other => other.clone(),
    }
}

/// Paths of every `cache_control` member.
fn marks(v: &Value, path: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "cache_control" {
                    out.push(path.clone());
                } else {
                    marks(x, format!("{path}/{k}"), out);
                }
            }
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| marks(x, format!("{path}/{i}"), out)),
        _ => {}
    }
}

/// Claude Code's request for the first `turns` tool calls: system blocks and
/// tools marked, and the last block of the last two messages marked.
fn claude_code_request(turns: usize, log: &str) -> Vec<u8> {
    let eph = json!({"type": "ephemeral"});
    let mut msgs = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"}, {"type": "text", "text": "fix the failing test"}]}),
    ];
    for k in 0..turns {
        let id = format!("toolu_{k:02}");
        msgs.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("step {k}")}, {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "pytest -q", "description": "Run tests"}}]}));
        msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": format!("{log}run {k}\n")}]}));
    }
    let n = msgs.len();
    for m in msgs.iter_mut().skip(n.saturating_sub(2)) {
        let blocks = m["content"].as_array_mut().unwrap();
        blocks.last_mut().unwrap()["cache_control"] = eph.clone();
    }
    let body = json!({
        "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": eph}, {"type": "text", "text": "Env: linux"}],
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}, "cache_control": eph}],
        "messages": msgs,
    });
    serde_json::to_vec(&body).unwrap()
}

#[test]
fn claude_code_marks_move_but_the_session_and_its_bytes_stay() {
    let p = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
    let log: String = (0..60).map(|i| format!("tests/test_mod.py::test_{i} PASSED\n")).collect();
    let mut sent_before: Vec<Value> = Vec::new();
    let mut tool_results = 0;
    for turns in 1..=8 {
        let req = claude_code_request(turns, &log);
        tool_results += 1;
        let out = p.rewrite(Api::Messages, None, &req);
        let fwd: Vec<Value> = raw_items(&out.body, "messages").iter().map(|s| serde_json::from_str(s).unwrap()).collect();
        let sent: Value = serde_json::from_slice(&req).unwrap();
        // Marks exactly where the client put them now, never more.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        marks(&sent["messages"], String::new(), &mut a);
        marks(&Value::Array(fwd.clone()), String::new(), &mut b);
        assert_eq!(a, b, "request {turns}: cache marks moved");
        // Every earlier item unchanged, annotations aside.
        for (i, before) in sent_before.iter().enumerate() {
            assert_eq!(unmarked(before), unmarked(&fwd[i]), "request {turns}: item {i} changed");
        }
        sent_before = fwd;
    }
    let st = p.stats();
    assert_eq!(st.sessions_created, 1, "one conversation, one session");
    let s = &st.sessions[0];
    assert_eq!(s.observations, tool_results, "every tool result admitted once");
    assert_eq!(s.new_items, 1 + 2 * 8, "each item examined once");
    assert!(s.tokens_out < s.tokens_in, "reruns of the same log were compacted");
}

/// Claude Code writes a message whose content is one text block as a list
/// when it marks it (`cache_control` lives on a block) and as a string when
/// it does not: here a note after every tool result, marked while it is last.
fn flipping_request(turns: usize, log: &str) -> Vec<u8> {
    let note = |k: usize, marked: bool| match marked {
        true => json!({"role": "user", "content": [{"type": "text", "text": format!("note {k}"), "cache_control": {"type": "ephemeral"}}]}),
        false => json!({"role": "user", "content": format!("note {k}")}),
    };
    let mut msgs = vec![json!({"role": "user", "content": "fix the failing test"})];
    for k in 0..turns {
        let id = format!("toolu_{k:02}");
        msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "pytest -q"}}]}));
        msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": format!("{log}run {k}\n")}]}));
        msgs.push(note(k, k + 1 == turns));
    }
    serde_json::to_vec(&json!({"model": "m", "max_tokens": 8, "system": "You are Claude Code.", "messages": msgs})).unwrap()
}

#[test]
fn what_is_forwarded_depends_on_the_request_alone() {
    // A replica that never saw the earlier requests forwards the same bytes.
    let seen_all = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
    let log: String = (0..40).map(|i| format!("tests/test_mod.py::test_{i} PASSED\n")).collect();
    let mut stubbed = 0;
    for turns in 1..=6 {
        let req = flipping_request(turns, &log);
        let fresh = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
        let a = seen_all.rewrite(Api::Messages, None, &req).body;
        let b = fresh.rewrite(Api::Messages, None, &req).body;
        assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b), "request {turns}: other bytes than a proxy that saw only it");
        let items = raw_items(&a, "messages");
        // Each note goes as the client wrote it this time, string or list.
        assert_eq!(
            items,
            raw_items(&req, "messages").iter().zip(&items).map(|(s, f)| if s.contains("note") { s.clone() } else { f.clone() }).collect::<Vec<_>>()
        );
        stubbed = items.iter().filter(|i| i.contains("[lam: ")).count();
    }
    assert!(stubbed >= 4, "the reruns were stubbed ({stubbed}), so items with residuals were compared too");
}

#[test]
fn kept_tools_are_forwarded_verbatim_and_still_archived() {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.engine.keep_tools = vec!["Bash".into()];
    let p = Proxy::open(cfg).unwrap();
    let log: String = (0..60).map(|i| format!("tests/test_mod.py::test_{i} PASSED\n")).collect();
    let req = claude_code_request(3, &log);
    let out = p.rewrite(Api::Messages, None, &req);
    assert_eq!(out.body, req, "nothing compacted");
    let s = &p.stats().sessions[0];
    assert_eq!(s.observations, 3, "every result archived and admitted");
    assert_eq!((s.tokens_out, s.stubs), (s.tokens_in, 0), "forwarded whole");
}

/// A JSON text with the shapes that collide under a lossy parse: big
/// integers, long floats, escapes, duplicate and reordered keys.
fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("18446744073709551616".to_string()),
        Just("0.1000000000000000000001".to_string()),
        Just("1e400".to_string()),
        Just("-0".to_string()),
        Just("\"\\u0041\\n\"".to_string()),
        Just("\"A\\n\"".to_string()),
        "[a-z]{0,6}".prop_map(|s| format!("\"{s}\"")),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((prop::sample::select(vec!["a", "b", "type", "text", "\\u0061"]), inner), 0..4)
                .prop_map(|v| format!("{{{}}}", v.iter().map(|(k, x)| format!("\"{k}\":{x}")).collect::<Vec<_>>().join(","))),
        ]
    })
}

fn conversation(item: &str) -> Vec<u8> {
    format!(r#"{{"model":"m","messages":[{{"role":"user","content":"task"}},{item}]}}"#).into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, max_global_rejects: 20_000, ..ProptestConfig::default() })]

    /// An item mutated by one byte is never forwarded as the unmutated one.
    #[test]
    fn one_byte_apart_is_another_item(a in json_text(), at in any::<prop::sample::Index>(), byte in prop::sample::select(b"0123456789aAeEu.-+\\\"{}[],:".to_vec())) {
        // Mostly inside literals (numbers, strings, escapes), where a lossy
        // parse would hide the change; sometimes anywhere.
        let spots: Vec<usize> = a.bytes().enumerate().filter(|(_, c)| c.is_ascii_alphanumeric()).map(|(i, _)| i).collect();
        let pos = if spots.is_empty() || at.index(4) == 0 { at.index(a.len()) } else { spots[at.index(spots.len())] };
        let mut b = a.clone().into_bytes();
        b[pos] = byte;
        prop_assume!(b != a.as_bytes());
        prop_assume!(serde_json::from_slice::<Value>(&b).is_ok());
        prop_assume!(serde_json::from_str::<Value>(&a).is_ok());
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = format!("prop-{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let p = proxy();
        p.rewrite(Api::ChatCompletions, Some(&name), &conversation(&a));
        let out = p.rewrite(Api::ChatCompletions, Some(&name), &conversation(std::str::from_utf8(&b).unwrap()));
        let items = raw_items(&out.body, "messages");
        prop_assert_eq!(items[1].as_bytes(), &b[..]);
    }
}
