//! A loopback upstream that records every request and answers in each API's
//! shape (JSON, or an SSE stream whose second event waits for the test when
//! the request carries `x-stub-gate: 1`), and a proxy in front of it.
#![allow(dead_code)]

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lam_serve::{Proxy, ServeConfig};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

#[derive(Debug, Clone, Default)]
pub struct Upstream {
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub gate: Arc<Notify>,
}

/// The SSE events the stub streams (`n` of them, then the API's end marker).
pub fn events(path: &str, n: usize) -> Vec<String> {
    let mut ev: Vec<String> = (0..n)
        .map(|k| {
            if path.ends_with("/messages") {
                format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"tok{k} \"}}}}\n\n")
            } else {
                format!("data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"stub\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{k} \"}},\"finish_reason\":null}}]}}\n\n")
            }
        })
        .collect();
    ev.push(if path.ends_with("/messages") { "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into() } else { "data: [DONE]\n\n".into() });
    ev
}

pub const REPLY: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"stub","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

async fn answer(State(up): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let pq = parts.uri.path_and_query().map_or("/".to_string(), |p| p.to_string());
    up.seen.lock().unwrap().push(Seen { method: parts.method.to_string(), path_and_query: pq.clone(), headers: parts.headers.clone(), body: body.clone() });
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if v["model"] == "error" {
        return (StatusCode::TOO_MANY_REQUESTS, [(header::CONTENT_TYPE, "application/json")], r#"{"error":{"message":"slow down","type":"rate_limit"}}"#)
            .into_response();
    }
    if parts.method == "GET" {
        return ([(header::CONTENT_TYPE, "application/json")], serde_json::json!({"path": pq}).to_string()).into_response();
    }
    if v["stream"] != true {
        return ([(header::CONTENT_TYPE, "application/json")], REPLY).into_response();
    }
    let gated = parts.headers.get("x-stub-gate").is_some_and(|g| g == "1");
    let ev = events(parts.uri.path(), 8);
    let gate = up.gate.clone();
    let stream = futures_util::stream::unfold(0usize, move |k| {
        let (ev, gate) = (ev.clone(), gate.clone());
        async move {
            if k == ev.len() {
                return None;
            }
            if k == 1 && gated {
                // Never sends the rest unless the client saw the first event.
                if tokio::time::timeout(Duration::from_secs(10), gate.notified()).await.is_err() {
                    return Some((Ok::<_, std::io::Error>(Bytes::from("data: GATE-TIMEOUT\n\n")), ev.len()));
                }
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Some((Ok(Bytes::from(ev[k].clone())), k + 1))
        }
    });
    ([(header::CONTENT_TYPE, "text/event-stream")], Body::from_stream(stream)).into_response()
}

pub async fn start_upstream() -> (SocketAddr, Upstream) {
    let up = Upstream::default();
    let app = axum::Router::new().fallback(answer).with_state(up.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let l = axum::serve::ListenerExt::tap_io(l, |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (addr, up)
}

pub struct Running {
    pub addr: SocketAddr,
    pub proxy: Proxy,
    pub stop: Option<oneshot::Sender<()>>,
    pub done: tokio::task::JoinHandle<Result<(), lam_serve::Error>>,
}

pub fn start_proxy(cfg: ServeConfig) -> Running {
    let proxy = Proxy::open(cfg).unwrap();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let done = tokio::spawn(lam_serve::serve(proxy.clone(), l, async move {
        let _ = rx.await;
    }));
    Running { addr, proxy, stop: Some(stop), done }
}
