//! Any bytes as a request body to each compacted route: the proxy never
//! panics, forwards what it cannot read exactly as sent, and otherwise
//! forwards valid JSON that differs from the input only in tool-result text;
//! the same request again in its session is forwarded byte for byte the same.
#![no_main]

use lam_serve::{Api, Proxy, ServeConfig};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

fn proxy() -> &'static Proxy {
    static P: OnceLock<Proxy> = OnceLock::new();
    P.get_or_init(|| {
        let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
        cfg.max_sessions = 64;
        Proxy::open(cfg).expect("the proxy opens")
    })
}

fn is(v: &Value, key: &str, want: &str) -> bool {
    v.get(key).and_then(Value::as_str) == Some(want)
}

/// Whether `path` (keys and indices below the conversation list) names the
/// text of a tool result in `items` (the input's conversation).
fn tool_text(api: Api, items: &[Value], path: &[String]) -> bool {
    let Some(item) = path.first().and_then(|i| items.get(i.parse::<usize>().ok()?)) else {
        return false;
    };
    let p: Vec<&str> = path[1..].iter().map(String::as_str).collect();
    match api {
        Api::ChatCompletions => is(item, "role", "tool") && matches!(p[..], ["content"] | ["content", _, "text"]),
        Api::Messages => match p[..] {
            ["content", k, "content", ..] => {
                let block = item.pointer(&format!("/content/{k}")).unwrap_or(&Value::Null);
                is(block, "type", "tool_result") && matches!(p[3..], [] | [_, "text"])
            }
            // User-turn observations are off in this proxy's policy.
            _ => false,
        },
        Api::Responses => {
            (is(item, "type", "function_call_output") || is(item, "type", "custom_tool_call_output")) && matches!(p[..], ["output"] | ["output", _, "text"])
        }
        Api::Gemini => matches!(p[..], ["parts", _, "functionResponse", "response", "output" | "error" | "result"]),
    }
}

/// Every path where `a` and `b` differ.
fn diff(a: &Value, b: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, bool)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if x.len() == y.len() && x.keys().eq(y.keys()) => {
            for (k, v) in x {
                path.push(k.clone());
                diff(v, &y[k], path, out);
                path.pop();
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                path.push(i.to_string());
                diff(v, w, path, out);
                path.pop();
            }
        }
        _ if a == b => {}
        _ => out.push((path.clone(), a.is_string() && b.is_string())),
    }
}

fuzz_target!(|data: &[u8]| {
    static N: AtomicU64 = AtomicU64::new(0);
    for api in Api::ALL {
        let name = format!("f{}", N.fetch_add(1, Ordering::Relaxed));
        let out = proxy().rewrite(api, Some(&name), data);
        let again = proxy().rewrite(api, Some(&name), data);
        assert_eq!(out.body, again.body, "the same request forwarded twice differs");
        if out.session.is_none() {
            assert_eq!(out.body, data, "an unread request must go as sent");
            continue;
        }
        let (Ok(sent), Ok(fwd)) = (serde_json::from_slice::<Value>(data), serde_json::from_slice::<Value>(&out.body)) else {
            panic!("forwarded a body that is not JSON");
        };
        let field = api.list_field();
        let items = sent.get(field).and_then(Value::as_array).cloned().unwrap_or_default();
        let mut diffs = Vec::new();
        diff(&sent, &fwd, &mut Vec::new(), &mut diffs);
        for (path, strings) in diffs {
            let ok = strings && path.first().map(String::as_str) == Some(field) && tool_text(api, &items, &path[1..]);
            assert!(ok, "{api:?}: forwarded body differs outside tool-result text at /{}", path.join("/"));
        }
    }
});
