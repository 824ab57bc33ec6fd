//! Requests in flight under `--max-memory`: a body whose working memory
//! (16 bytes a byte) can never fit what is left for requests in flight is
//! refused at once with `503 lam_overloaded`, unread; one that must wait
//! waits its turn, at most `queue_timeout`, then is refused the same way.

mod support;

use lam_serve::ServeConfig;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::start_proxy;
use tokio::sync::Notify;

/// A chat body of about `bytes` bytes: one tool result.
fn chat(task: &str, bytes: usize) -> Vec<u8> {
    let line = format!("{task}: tests/test_mod.py::test_case PASSED\n");
    let log = line.repeat(bytes / line.len() + 1);
    let m = json!([
        {"role": "user", "content": task},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"pytest\"}"}}]},
        {"role": "tool", "tool_call_id": "c0", "content": log},
    ]);
    serde_json::to_vec(&json!({"model": "stub", "messages": m})).unwrap()
}

/// An upstream that answers every request with the stub reply, holding
/// those that carry `x-test-hold: 1` until `release` is notified. Counts requests.
async fn holding_upstream() -> (std::net::SocketAddr, Arc<Notify>, Arc<std::sync::atomic::AtomicUsize>) {
    let release = Arc::new(Notify::new());
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (r, s) = (release.clone(), seen.clone());
    let answer = move |req: axum::extract::Request| {
        let (r, s) = (r.clone(), s.clone());
        async move {
            let hold = req.headers().get("x-test-hold").is_some_and(|v| v == "1");
            let _ = axum::body::to_bytes(req.into_body(), usize::MAX).await;
            s.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if hold {
                r.notified().await;
            }
            ([(axum::http::header::CONTENT_TYPE, "application/json")], support::REPLY)
        }
    };
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, axum::Router::new().fallback(answer)).await });
    (addr, release, seen)
}

async fn post(c: &reqwest::Client, base: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut r = c.post(format!("{base}/v1/chat/completions")).header("content-type", "application/json").body(body);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let retry = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
    let mut v: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null);
    if let Some(r) = retry {
        v["retry_after"] = r.into();
    }
    (status, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_fits_is_refused_at_once_and_a_small_one_goes() {
    let (up, _release, seen) = holding_upstream().await;
    let mut cfg = ServeConfig::for_tests(&format!("http://{up}"));
    cfg.max_memory = 4 << 20;
    assert_eq!(cfg.in_flight_budget(), 4 << 20);
    let mut run = start_proxy(cfg);
    let (base, c) = (format!("http://{}", run.addr), reqwest::Client::new());
    // 300 KiB needs about 4.7 MiB of working memory: more than 4 MiB, ever.
    let (status, v) = post(&c, &base, chat("big", 300 << 10), &[]).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["type"], "lam_overloaded");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("--max-memory 4 MiB") && msg.contains("working memory"), "{msg}");
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 0, "never forwarded");
    // The same body bypassed holds only its bytes: it goes.
    let (status, _) = post(&c, &base, chat("big", 300 << 10), &[("x-lam-bypass", "1")]).await;
    assert_eq!(status, 200);
    let (status, _) = post(&c, &base, chat("small", 16 << 10), &[]).await;
    assert_eq!(status, 200);
    let st = run.proxy.stats();
    assert_eq!(st.overloaded, 1);
    assert!(run.proxy.metrics().contains("lam_serve_overloaded_total 1\n"));
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_waits_for_room_then_goes_or_after_the_wait_is_refused() {
    let (up, release, _) = holding_upstream().await;
    let mut cfg = ServeConfig::for_tests(&format!("http://{up}"));
    cfg.max_memory = 4 << 20;
    cfg.queue_timeout = Duration::from_millis(300);
    let mut run = start_proxy(cfg);
    let (base, c) = (format!("http://{}", run.addr), reqwest::Client::new());
    // A bypassed 3.5 MiB body held at the upstream holds 3.5 MiB of the 4.
    let hold =
        |c: reqwest::Client, base: String| async move { post(&c, &base, chat("hold", 3584 << 10), &[("x-lam-bypass", "1"), ("x-test-hold", "1")]).await };
    let held = tokio::spawn(hold(c.clone(), base.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // 100 KiB needs 1.6 MiB: it waits 300 ms, then 503 with Retry-After.
    let (status, v) = post(&c, &base, chat("late", 100 << 10), &[]).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["type"], "lam_overloaded");
    assert!(v["error"]["message"].as_str().unwrap().contains("waited 0.3 s"), "{v}");
    assert_eq!(v["retry_after"], "1");
    release.notify_one();
    assert_eq!(held.await.unwrap().0, 200);
    // Held again, and released while the next one waits: that one goes.
    let held = tokio::spawn(hold(c.clone(), base.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting = tokio::spawn({
        let (c, base) = (c.clone(), base.clone());
        async move { post(&c, &base, chat("waits", 100 << 10), &[]).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    release.notify_one();
    assert_eq!(held.await.unwrap().0, 200);
    let (status, v) = waiting.await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(run.proxy.stats().overloaded, 1);
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}
