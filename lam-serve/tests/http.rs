//! The proxy over HTTP against a loopback upstream stub: streaming event by
//! event, headers, errors, bypass, pass-through, stats, graceful shutdown.

mod support;

use lam_serve::ServeConfig;
use serde_json::{Value, json};
use std::time::Duration;
use support::{REPLY, events, start_proxy, start_upstream};

fn chat(n: usize, stream: bool) -> Value {
    let log: String = (0..60).map(|i| format!("tests/test_mod.py::test_case_{i} PASSED\n")).collect();
    let mut m = vec![json!({"role": "user", "content": "fix it"})];
    for k in 0..n {
        let id = format!("call_{k}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"pytest\"}"}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": log}));
    }
    json!({"model": "stub", "stream": stream, "messages": m})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacts_streams_and_passes_through() {
    let (up_addr, up) = start_upstream().await;
    let mut run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}")));
    let base = format!("http://{}", run.addr);
    let c = reqwest::Client::new();

    // Non-streaming: the answer comes back as the upstream sent it; auth passes through, x-lam-* does not.
    for n in 1..=2 {
        let r = c.post(format!("{base}/v1/chat/completions")).bearer_auth("sk-test").header("x-api-key", "k").json(&chat(n, false)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("x-lam-session").is_some());
        assert_eq!(r.text().await.unwrap(), REPLY);
    }
    let seen = up.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].headers["authorization"], "Bearer sk-test");
    assert_eq!(seen[1].headers["x-api-key"], "k");
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert!(
        sent["messages"][4]["content"].as_str().unwrap().starts_with("[lam: same output as last time"),
        "the second log became a stub naming the first run of its call"
    );
    let raw = |b: &[u8]| -> Vec<String> {
        let m: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> = serde_json::from_slice(b).unwrap();
        serde_json::from_str::<Vec<Box<serde_json::value::RawValue>>>(m["messages"].get()).unwrap().iter().map(|r| r.get().to_string()).collect()
    };
    assert_eq!(raw(&seen[1].body)[..3], raw(&seen[0].body)[..], "earlier messages byte-identical");

    // Streaming: the first event reaches the client before the upstream sends the second.
    let mut r = c.post(format!("{base}/v1/chat/completions")).header("x-stub-gate", "1").json(&chat(3, true)).send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let first = tokio::time::timeout(Duration::from_secs(5), r.chunk()).await.expect("first event in time").unwrap().unwrap();
    let ev = events("/v1/chat/completions", 8);
    assert_eq!(first, ev[0].as_bytes());
    up.gate.notify_one();
    let mut all = first.to_vec();
    while let Some(b) = r.chunk().await.unwrap() {
        all.extend_from_slice(&b);
    }
    assert_eq!(all, ev.concat().as_bytes(), "the stream arrives unchanged");

    // Upstream errors pass through with their status and body.
    let mut e = chat(1, false);
    e["model"] = json!("error");
    let r = c.post(format!("{base}/v1/chat/completions")).json(&e).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.text().await.unwrap().contains("slow down"));

    // Bypass: the body goes as it came.
    let body = serde_json::to_vec(&chat(4, false)).unwrap();
    let r = c.post(format!("{base}/v1/chat/completions")).header("x-lam-bypass", "1").body(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let last = up.seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(last.body, body);
    assert!(last.headers.get("x-lam-bypass").is_none());

    // Other paths (and other methods on compacted paths) pass through unchanged.
    let r = c.get(format!("{base}/v1/models?limit=2")).send().await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["path"], "/v1/models?limit=2");
    let r = c.get(format!("{base}/v1/chat/completions")).send().await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["path"], "/v1/chat/completions");

    // Stats and metrics.
    let st: Value = c.get(format!("{base}/lam/stats")).send().await.unwrap().json().await.unwrap();
    assert_eq!(st["bypassed"], 1);
    assert_eq!(st["upstream_errors"], 1);
    assert_eq!(st["requests"]["chat"], 4);
    let s0 = &st["sessions"][0];
    assert!(s0["tokens_out"].as_u64() < s0["tokens_in"].as_u64() && s0["stubs"].as_u64() > Some(0), "{st}");
    let m = c.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("# TYPE lam_serve_tokens_in_total counter") && m.contains("lam_serve_requests_total{route=\"chat\"} 4"), "{m}");

    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_json_and_shutdown_finishes_streams() {
    // Unreachable upstream: 502 with a JSON error.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut cfg = ServeConfig::for_tests(&format!("http://{dead}"));
    cfg.max_body = 4096;
    let mut run = start_proxy(cfg);
    let c = reqwest::Client::new();
    let r = c.post(format!("http://{}/v1/messages", run.addr)).json(&json!({"model": "m", "messages": []})).send().await.unwrap();
    assert_eq!(r.status(), 502);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["type"], "lam_upstream_unreachable");
    // A session name that is not 1-256 visible ASCII characters: 400.
    let r = c
        .post(format!("http://{}/v1/messages", run.addr))
        .header("x-lam-session", "x".repeat(300))
        .json(&json!({"model": "m", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["type"], "lam_bad_session");
    // Two different session names: ambiguous, 400 (the same name twice is one).
    let post = |names: &[&str]| {
        let mut b = c.post(format!("http://{}/v1/messages", run.addr));
        for n in names {
            b = b.header("x-lam-session", *n);
        }
        b.json(&json!({"model": "m", "messages": []})).send()
    };
    let r = post(&["a", "b"]).await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["type"], "lam_bad_session");
    assert!(e["error"]["message"].as_str().unwrap().contains("x-lam-session was sent more than once, with different values"), "{e}");
    assert_eq!(post(&["a", " a"]).await.unwrap().status(), 502, "one name: on to the (dead) upstream");
    // Too large: 413.
    let r = c.post(format!("http://{}/v1/chat/completions", run.addr)).json(&chat(20, false)).send().await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(run.proxy.stats().too_large, 1);
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();

    // Shutdown while a stream is in flight: the stream still completes.
    let (up_addr, up) = start_upstream().await;
    let mut run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}")));
    let mut r = c.post(format!("http://{}/v1/chat/completions", run.addr)).header("x-stub-gate", "1").json(&chat(1, true)).send().await.unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    run.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    up.gate.notify_one();
    let mut all = first.to_vec();
    while let Some(b) = r.chunk().await.unwrap() {
        all.extend_from_slice(&b);
    }
    assert_eq!(all, events("/v1/chat/completions", 8).concat().as_bytes());
    tokio::time::timeout(Duration::from_secs(10), run.done).await.expect("serve returns once the stream is done").unwrap().unwrap();
    assert!(tokio::net::TcpStream::connect(run.addr).await.is_err(), "no longer listening");
}

/// `x-lam-budget: TOKENS` gives a request its own budget (the header is
/// not forwarded); a bad one is refused with 400 before the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_s_own_budget_cuts_its_conversation() {
    let (up_addr, up) = start_upstream().await;
    let run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}")));
    let base = format!("http://{}", run.addr);
    let c = reqwest::Client::new();
    let body = |n: usize| {
        let mut m = vec![json!({"role": "user", "content": "read them"})];
        for k in 0..n {
            let out: String = (0..40).map(|i| format!("src/m{k}/f{i}.py:{i}: def handler_{k}_{i}(request):\n")).collect();
            let id = format!("call_{k}");
            m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\":\"cat m{k}.py\"}}")}}]}));
            m.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
        }
        json!({"model": "stub", "messages": m})
    };
    for n in 1..=8 {
        let r = c.post(format!("{base}/v1/chat/completions")).header("x-lam-budget", "4000").json(&body(n)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let seen = up.seen.lock().unwrap().clone();
    assert!(seen.iter().all(|s| !s.headers.contains_key("x-lam-budget")), "the header stays with the proxy");
    assert!(seen.iter().all(|s| lam_tokens::count(&s.body) <= 4000 + 30), "every body within the request's budget");
    assert!(String::from_utf8_lossy(&seen.last().unwrap().body).contains("[lam: cited to keep the context within its budget]"));
    let r = c.post(format!("{base}/v1/chat/completions")).header("x-lam-budget", "lots").json(&body(1)).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("x-lam-budget must be a number of tokens"));
    // Two different budgets: which one applies is ambiguous.
    let r = c.post(format!("{base}/v1/chat/completions")).header("x-lam-budget", "4000").header("x-lam-budget", "8000").json(&body(1)).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["type"], "lam_bad_budget");
    assert!(e["error"]["message"].as_str().unwrap().contains("x-lam-budget was sent more than once, with different values"), "{e}");
    let r = c.post(format!("{base}/v1/chat/completions")).header("x-lam-budget", "0").json(&body(1)).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(up.seen.lock().unwrap().len(), 8, "refused before the upstream");
    // The same value twice is one; a budget of 1 token is a budget (cut to 1).
    let r = c.post(format!("{base}/v1/chat/completions")).header("x-lam-budget", "4000").header("x-lam-budget", "4000").json(&body(8)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = c.post(format!("{base}/v1/chat/completions")).header("x-lam-budget", "1").json(&body(2)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    assert_eq!(up.seen.lock().unwrap().len(), 10);
}

/// One raw HTTP/1.1 request with exactly `headers` (and `host`,
/// `connection: close`, `content-length` for a body): the answer's head.
async fn raw_head(addr: std::net::SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let length = if body.is_empty() { String::new() } else { format!("content-type: application/json\r\ncontent-length: {}\r\n", body.len()) };
    s.write_all(format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n{headers}{length}\r\n{body}").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await.expect("answered in time").unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    text.split_once("\r\n\r\n").map_or(text.clone(), |(h, _)| h.to_string())
}

/// Issue 57: the upstream gets the client's headers as sent, compacted
/// route or not: no `accept` where the client sent none (reqwest added
/// `accept: */*`), the client's own exactly; no `user-agent` or
/// `accept-encoding` of the proxy's; `host` the upstream's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_reach_the_upstream_as_sent() {
    let (up_addr, up) = start_upstream().await;
    let mut run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}")));
    let body = chat(1, false).to_string();
    for (method, path, body) in [("POST", "/v1/chat/completions", body.as_str()), ("GET", "/v1/models", ""), ("POST", "/v1/other", "{}")] {
        for accept in [None, Some("text/event-stream")] {
            let sent = accept.map(|a| format!("accept: {a}\r\n")).unwrap_or_default();
            let head = raw_head(run.addr, method, path, &sent, body).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            let seen = up.seen.lock().unwrap().last().unwrap().clone();
            let got: Vec<&str> = seen.headers.get_all("accept").iter().map(|v| v.to_str().unwrap()).collect();
            assert_eq!(got, accept.into_iter().collect::<Vec<_>>(), "{method} {path}: accept as sent: {:?}", seen.headers);
            for added in ["user-agent", "accept-encoding"] {
                assert!(!seen.headers.contains_key(added), "{method} {path}: {added} added: {:?}", seen.headers);
            }
            assert_eq!(seen.headers["host"], up_addr.to_string());
            if path != "/v1/chat/completions" {
                assert_eq!(seen.body, body.as_bytes(), "passed through as it came");
            }
        }
    }
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

/// A redirect from the upstream goes back to the client as it came, never followed by the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_pass_back_unfollowed() {
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().fallback(move || {
        h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { (axum::http::StatusCode::TEMPORARY_REDIRECT, [("location", "/v1/elsewhere")], "moved") }
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    let mut run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}")));
    for (method, path, body) in [("GET", "/v1/models", ""), ("POST", "/v1/chat/completions", r#"{"model":"m","messages":[]}"#)] {
        let head = raw_head(run.addr, method, path, "", body).await.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 307"), "{head}");
        assert!(head.contains("\r\nlocation: /v1/elsewhere"), "{head}");
    }
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2, "one request each, not followed");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}
