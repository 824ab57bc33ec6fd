//! Issue #28, secure and bounded by default: the upstream's password never
//! reaches a client, request paths cannot leave the upstream's path prefix,
//! ambiguous bodies are refused, a silent upstream times out (a slow live
//! stream does not), sessions stay within a byte budget, and a token guards
//! every route when set.

mod support;

use axum::body::{Body, Bytes};
use lam_serve::{Api, Proxy, ServeConfig, Token};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::{start_proxy, start_upstream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PLANTED: &str = "pl4nted-S3CRET";

/// One raw HTTP/1.1 request (no client-side path normalisation): status and body.
async fn raw(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let (status, _, body) = raw_with_head(addr, method, path, headers, body).await;
    (status, body)
}

/// [`raw`], with the answer's head (status line and headers) as received.
async fn raw_with_head(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n{headers}content-length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").map_or((text.as_str(), ""), |(h, b)| (h, b));
    (status, head.to_string(), body.to_string())
}

fn chat(task: &str, logs: usize, log_bytes: usize) -> Value {
    let line = format!("{task}: tests/test_mod.py::test_case PASSED\n");
    let log: String = line.repeat(log_bytes / line.len() + 1);
    let mut m = vec![json!({"role": "user", "content": task})];
    for k in 0..logs {
        let id = format!("call_{k}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\":\"pytest {k}\"}}")}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": format!("{k}\n{log}")}));
    }
    json!({"model": "stub", "messages": m})
}

fn kind(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON error body: {body:?}"));
    v["error"]["type"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_password_never_reaches_the_client() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let cfg = ServeConfig::for_tests(&format!("http://user:{PLANTED}@{dead}/api?password={PLANTED}"));
    assert!(!cfg.upstream_shown().contains(PLANTED), "{}", cfg.upstream_shown());
    let mut run = start_proxy(cfg);
    for path in ["/v1/chat/completions", "/v1/models"] {
        let method = if path == "/v1/models" { "GET" } else { "POST" };
        let (status, body) = raw(run.addr, method, path, "", &chat("t", 1, 100).to_string()).await;
        assert_eq!(status, 502, "{body}");
        assert_eq!(kind(&body), "lam_upstream_unreachable");
        assert!(!body.contains(PLANTED), "the 502 leaks the password: {body}");
        assert!(body.contains("user:***@"), "{body}");
    }
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_never_leave_the_upstream_prefix() {
    let (up_addr, up) = start_upstream().await;
    let mut run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}/api/tenant1")));
    let refused = [
        ("GET", "/../../admin/keys"),
        ("GET", "/%2e%2e/%2e%2e/admin"),
        ("GET", "/v1/%2E%2e/%2e%2E/admin"),
        ("GET", "/v1/.%2e/.%2E/admin"),
        ("GET", "/v1/%2e%2e%2f%2e%2e%2fadmin"),
        ("GET", "/v1/..%2F..%2Fadmin"),
        ("GET", "/v1/%252e%252e/%252e%252e/admin"),
        ("GET", "/v1/..;/..;/admin"),
        ("GET", "/v1/%5c..%5c..%5cadmin"),
        ("GET", "/./v1/models"),
        ("POST", "/v1/chat/completions/../../../admin"),
        ("POST", "/v1/%2e%2e/%2e%2e/%2e%2e/admin"),
    ];
    for (method, path) in refused {
        let (status, body) = raw(run.addr, method, path, "", "{}").await;
        assert_eq!(status, 400, "{method} {path}: {body}");
        assert_eq!(kind(&body), "lam_bad_path", "{path}");
    }
    // A raw backslash: hyper may refuse the request line itself; either way a 400.
    let (status, _) = raw(run.addr, "GET", "/v1\\..\\..\\admin", "", "").await;
    assert_eq!(status, 400);
    assert!(up.seen.lock().unwrap().is_empty(), "nothing reached the upstream");
    // Names with dots that are not dot segments pass, under the prefix.
    for path in ["/v1/models", "/v1/files/a..b", "/v1/.well-known/x", "/v1/...", "/v1/%2e%2e.txt"] {
        let (status, body) = raw(run.addr, "GET", path, "", "").await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let seen: Vec<String> = up.seen.lock().unwrap().iter().map(|s| s.path_and_query.clone()).collect();
    assert!(seen.iter().all(|p| p.starts_with("/api/tenant1/v1/")), "{seen:?}");
    assert!(run.proxy.stats().refused >= 12, "counted");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

/// Codex 0.171 first asks for a WebSocket on `/v1/responses` (`Upgrade:
/// websocket`, the headers below as it sends them); passed on, the
/// conversation would go past compaction. The proxy answers 426 itself,
/// on which Codex falls back to HTTPS at once (a 404 costs it 5 retries).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrades_are_refused_with_426() {
    let (up_addr, up) = start_upstream().await;
    let mut run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}")));
    let ws = "connection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: BFGlCNMSv0svMAhvJBwGKA==\r\nopenai-beta: responses_websockets=2026-02-06\r\n";
    for (method, path) in [("GET", "/v1/responses"), ("GET", "/v1/realtime"), ("POST", "/v1/responses")] {
        let (status, head, body) = raw_with_head(run.addr, method, path, ws, "").await;
        assert_eq!(status, 426, "{method} {path}: {body}");
        assert_eq!(kind(&body), "lam_upgrade_refused");
        // RFC 9110 15.5.22: a 426 carries Upgrade, naming the protocol required (plain HTTP).
        let head = head.to_ascii_lowercase();
        assert!(head.contains("\r\nupgrade: http/1.1\r\n"), "{head}");
        assert!(head.lines().any(|l| l.starts_with("connection:") && l.contains("upgrade")), "{head}");
    }
    assert!(up.seen.lock().unwrap().is_empty(), "nothing reached the upstream");
    assert_eq!(run.proxy.stats().upgrades_refused, 3);
    assert!(run.proxy.metrics().contains("lam_serve_upgrades_refused_total 3"));
    let (status, _) = raw(run.addr, "GET", "/v1/models", "", "").await;
    assert_eq!(status, 200, "plain requests pass");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_conversation_members_are_refused() {
    let (up_addr, up) = start_upstream().await;
    let mut run = start_proxy(ServeConfig::for_tests(&format!("http://{up_addr}")));
    let first = chat("one", 2, 4000)["messages"].to_string();
    let bodies = [
        ("/v1/chat/completions", format!(r#"{{"model":"m","messages":{first},"messages":[{{"role":"user","content":"x"}}]}}"#)),
        ("/v1/chat/completions", format!(r#"{{"messages":{first},"m\u0065ssages":[]}}"#)),
        ("/v1/messages", format!(r#"{{"system":"a","messages":{first},"system":"b"}}"#)),
        ("/v1/responses", r#"{"instructions":"a","input":[],"instructions":"b"}"#.to_string()),
        ("/v1/responses", r#"{"input":[],"input":"text"}"#.to_string()),
    ];
    for (path, body) in &bodies {
        let (status, answer) = raw(run.addr, "POST", path, "content-type: application/json\r\n", body).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert_eq!(kind(&answer), "lam_duplicate_key", "{answer}");
    }
    assert!(up.seen.lock().unwrap().is_empty(), "nothing reached the upstream");
    // The library form forwards such a body untouched (nothing compacted).
    let body = bodies[0].1.as_bytes();
    assert_eq!(run.proxy.rewrite(Api::ChatCompletions, None, body).body, body);
    assert!(run.proxy.try_rewrite(Api::ChatCompletions, None, body).is_err());
    // Other duplicate members are the upstream's to judge.
    let ok = format!(r#"{{"model":"a","model":"b","messages":{first}}}"#);
    let (status, _) = raw(run.addr, "POST", "/v1/chat/completions", "", &ok).await;
    assert_eq!(status, 200);
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

/// An upstream that answers `/slow` with 8 chunks 400 ms apart, `/stall`
/// with one chunk and then silence, and holds every other request unanswered.
async fn start_sluggish() -> SocketAddr {
    async fn answer(req: axum::extract::Request) -> axum::response::Response {
        let path = req.uri().path().to_string();
        if path != "/slow" && path != "/stall" {
            std::future::pending::<()>().await;
        }
        let slow = path == "/slow";
        let n = if slow { 8 } else { 2 };
        let s = futures_util::stream::unfold(0, move |k| async move {
            if k == n {
                return None;
            }
            let wait = if slow {
                400
            } else if k == 0 {
                0
            } else {
                3_600_000
            };
            tokio::time::sleep(Duration::from_millis(wait)).await;
            Some((Ok::<_, std::io::Error>(Bytes::from(format!("data: {k}\n\n"))), k + 1))
        });
        axum::response::Response::new(Body::from_stream(s))
    }
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, axum::Router::new().fallback(answer)).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_upstream_times_out_a_slow_stream_does_not() {
    let up = start_sluggish().await;
    let mut cfg = ServeConfig::for_tests(&format!("http://{up}"));
    cfg.idle_timeout = Duration::from_secs(1);
    let mut run = start_proxy(cfg);
    let c = reqwest::Client::new();
    let base = format!("http://{}", run.addr);
    let t = Instant::now();
    let send = c.post(format!("{base}/v1/chat/completions")).json(&chat("t", 1, 100)).send();
    let r = tokio::time::timeout(Duration::from_secs(10), send).await.expect("answered in time").unwrap();
    assert_eq!(r.status(), 504);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["type"], "lam_upstream_timeout");
    assert!(t.elapsed() >= Duration::from_millis(900) && t.elapsed() < Duration::from_secs(10));
    // 8 chunks over 3.2 s, never 1 s apart: complete.
    let text = c.get(format!("{base}/slow")).send().await.unwrap().text().await.unwrap();
    assert_eq!(text, (0..8).map(|k| format!("data: {k}\n\n")).collect::<String>());
    // One chunk, then silence: the client sees the answer end in error, never as complete.
    let mut r = c.get(format!("{base}/stall")).send().await.unwrap();
    assert_eq!(r.chunk().await.unwrap().unwrap(), "data: 0\n\n");
    let t = Instant::now();
    let rest = tokio::time::timeout(Duration::from_secs(10), r.chunk()).await.expect("cut in time");
    assert!(rest.is_err(), "the stream is cut: {rest:?}");
    assert!(t.elapsed() >= Duration::from_millis(900));
    assert_eq!(run.proxy.stats().upstream_timeouts, 2);
    run.stop.take().unwrap().send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), run.done).await.unwrap().unwrap().unwrap();
}

#[test]
fn sessions_stay_within_the_byte_budget() {
    let budget = 600 << 10;
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.max_memory = budget;
    let proxy = Proxy::open(cfg).unwrap();
    let tasks: Vec<String> = (0..12).map(|i| format!("task {i}")).collect();
    for turn in 1..=3 {
        for t in &tasks {
            let body = serde_json::to_vec(&chat(t, turn, 30_000)).unwrap();
            proxy.rewrite(Api::ChatCompletions, None, &body);
            let st = proxy.stats();
            assert!(st.memory_bytes <= budget as u64, "{} > {budget}", st.memory_bytes);
        }
    }
    let st = proxy.stats();
    assert!(st.evicted_sessions > 0, "evicted by bytes, not by count (4096)");
    assert!(st.memory_bytes > (budget / 4) as u64, "the budget is used: {}", st.memory_bytes);
    assert_eq!(st.memory_budget, budget as u64);
    assert!(st.sessions.len() < tasks.len() && !st.sessions.is_empty());
    // Least recently used first: the last task's session is still held and continues.
    let body = serde_json::to_vec(&chat(&tasks[11], 4, 30_000)).unwrap();
    let before = proxy.stats().sessions_created;
    let r = proxy.rewrite(Api::ChatCompletions, None, &body);
    assert_eq!(proxy.stats().sessions_created, before, "{:?}", r.session);
}

#[test]
fn a_session_over_the_budget_alone_is_dropped_after_its_request() {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.max_memory = 4 << 10;
    let proxy = Proxy::open(cfg).unwrap();
    let body = serde_json::to_vec(&chat("big", 2, 30_000)).unwrap();
    let r = proxy.rewrite(Api::ChatCompletions, None, &body);
    assert!(r.session.is_some());
    let st = proxy.stats();
    assert_eq!((st.sessions.len(), st.evicted_sessions, st.memory_bytes), (0, 1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_every_route() {
    let (up_addr, up) = start_upstream().await;
    let mut cfg = ServeConfig::for_tests(&format!("http://{up_addr}"));
    cfg.token = Token::new("t0ken-xyz\n");
    let mut run = start_proxy(cfg);
    let a = run.addr;
    let body = chat("t", 1, 100).to_string();
    let ct = "content-type: application/json\r\n";
    let denied = [
        ("GET", "/lam/stats", String::new()),
        ("GET", "/metrics", "x-lam-token: t0ken-xy\r\n".to_string()),
        ("GET", "/lam/stats", "host: localhost\r\nx-forwarded-for: 127.0.0.1\r\n".to_string()),
        ("GET", "/v1/models", "authorization: Bearer wrong\r\n".to_string()),
        // On proxied routes `Authorization` is the provider's key, never the proxy's token.
        ("POST", "/v1/chat/completions", format!("{ct}authorization: Bearer t0ken-xyz\r\n")),
        ("GET", "/../admin", String::new()),
    ];
    for (method, path, headers) in &denied {
        let (status, answer) = raw(a, method, path, headers, if *method == "POST" { &body } else { "" }).await;
        assert_eq!(status, 401, "{method} {path} {headers}: {answer}");
        assert_eq!(kind(&answer), "lam_unauthorized");
    }
    assert!(up.seen.lock().unwrap().is_empty());
    for h in ["x-lam-token: t0ken-xyz\r\n", "authorization: Bearer t0ken-xyz\r\n"] {
        assert_eq!(raw(a, "GET", "/lam/stats", h, "").await.0, 200, "{h}");
        assert_eq!(raw(a, "GET", "/metrics", h, "").await.0, 200, "{h}");
    }
    let h = format!("{ct}x-lam-token: t0ken-xyz\r\nauthorization: Bearer sk-provider\r\nx-api-key: k\r\n");
    let (status, answer) = raw(a, "POST", "/v1/chat/completions", &h, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(raw(a, "GET", "/v1/models", "x-lam-token: t0ken-xyz\r\n", "").await.0, 200);
    let seen = up.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-provider", "the provider key passes untouched");
    assert_eq!(seen[0].headers["x-api-key"], "k");
    assert!(seen.iter().all(|s| s.headers.get("x-lam-token").is_none()), "the token is never forwarded");
    assert_eq!(run.proxy.stats().unauthorized, denied.len() as u64);
    let (_, metrics) = raw(a, "GET", "/metrics", "x-lam-token: t0ken-xyz\r\n", "").await;
    assert!(metrics.contains(&format!("lam_serve_unauthorized_total {}", denied.len())), "{metrics}");
    assert!(metrics.contains("# TYPE lam_serve_memory_bytes gauge") && metrics.contains("lam_serve_refused_total 0"), "{metrics}");
    assert!(!format!("{:?}", run.proxy.config()).contains("t0ken-xyz"), "Debug never prints it");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    let e = lam_serve::run(cfg, "0.0.0.0:0".parse().unwrap(), |_| panic!("must not start")).unwrap_err();
    assert!(e.to_string().contains("token"), "{e}");
    assert!(Token::new(" \n").is_none());
    let t = Token::new("abc").unwrap();
    assert!(t.matches(b"abc") && !t.matches(b"abd") && !t.matches(b"ab") && !t.matches(b"abcd"));
}
