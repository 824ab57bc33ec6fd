//! Forwarding to the upstream under its timeouts, and its answer streamed
//! back chunk by chunk as it arrives.

use super::upstream::{BoxError, Payload, causes, chain, find, unprocessed};
use super::via::ProxyRefused;
use super::{App, BUDGET, BYPASS, HOP, SESSION, TOKEN, error, trust};
use crate::proxy::Proxy;
use crate::usage::{self, Sink};
use axum::body::{Body, Bytes, HttpBody as _};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use std::time::Duration;

/// Send the request upstream; its answer streams back chunk by chunk, each
/// awaited at most `idle_timeout`.
/// With `sink`, the answer's `usage` is read as it streams ([`crate::usage`]).
/// The request goes with the client's headers as sent, less hop-by-hop
/// ones and the proxy's own ([`filtered`]); the client adds only `host`.
/// A kept body the upstream refused unprocessed goes once more (counted).
pub(crate) async fn forward(app: &App, parts: &axum::http::request::Parts, body: Payload, sink: Option<Sink>) -> Response {
    let cfg = app.proxy.config();
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{pq}", cfg.upstream);
    let proxy = app.proxy.clone();
    let retried = move || proxy.count(|c| &c.upstream_retries);
    let send = app.client.send(parts.method.clone(), &url, filtered(&parts.headers, true), body, retried);
    let up = match tokio::time::timeout(cfg.idle_timeout, send).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return unreachable(app, e),
        Err(_) => {
            app.proxy.count(|c| &c.upstream_timeouts);
            return error(
                StatusCode::GATEWAY_TIMEOUT,
                "lam_upstream_timeout",
                &format!("lam serve: upstream {} sent nothing for {} s (--upstream-idle-timeout-s)", cfg.upstream_shown(), cfg.idle_timeout.as_secs_f64()),
            );
        }
    };
    answer(app, up, sink)
}

/// `502` (or `504` for a connect timeout) for a request that got no answer;
/// the upstream shown with its password masked, never the request's URL.
/// A proxy's refusal is its own kind; an unknown CA and a request the
/// upstream left unprocessed say what to do.
fn unreachable(app: &App, e: BoxError) -> Response {
    let cfg = app.proxy.config();
    let timeout = timed_out(&*e);
    if timeout {
        app.proxy.count(|c| &c.upstream_timeouts);
    } else {
        app.proxy.count(|c| &c.upstream_unreachable);
    }
    let shown = cfg.upstream_shown();
    if let Some(p) = find::<ProxyRefused>(&*e) {
        return error(StatusCode::BAD_GATEWAY, "lam_proxy_refused", &format!("lam serve: upstream {shown} not reached: {p}"));
    }
    let why = chain(&*e).replace(&cfg.upstream, &shown);
    let help = if find::<rustls::Error>(&*e).is_some_and(trust::unknown_issuer) {
        format!("; {}", trust::UNKNOWN_ISSUER_HELP)
    } else if unprocessed(&*e) {
        "; the upstream never processed the request (it was closing the connection): sending it again is safe".to_string()
    } else {
        String::new()
    };
    let (status, kind) = if timeout { (StatusCode::GATEWAY_TIMEOUT, "lam_upstream_timeout") } else { (StatusCode::BAD_GATEWAY, "lam_upstream_unreachable") };
    error(status, kind, &format!("lam serve: upstream {shown} unreachable: {why}{help}"))
}

/// Whether `e` or one of its causes is a timeout (the connect timeout's among them).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    causes(e).any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut))
}

/// The upstream's answer, passed back as it streams.
fn answer(app: &App, up: Response, sink: Option<Sink>) -> Response {
    if up.status().as_u16() >= 400 {
        app.proxy.count(|c| &c.upstream_errors);
    }
    let mut resp = Response::builder().status(up.status());
    if let Some(h) = resp.headers_mut() {
        *h = filtered(up.headers(), false);
        if let Some(n) = up.body().size_hint().exact() {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    let idle = app.proxy.config().idle_timeout;
    let sink = sink.filter(|_| up.status().is_success());
    resp.body(Body::from_stream(idle_limited(up.into_body().into_data_stream(), idle, app.proxy.clone(), sink)))
        .unwrap_or_else(|e| error(StatusCode::BAD_GATEWAY, "lam_internal_error", &format!("lam serve: {e}")))
}

/// `s`, cut with an error (the client sees the answer end abruptly, never
/// as complete) when the upstream sends nothing for `idle`; every chunk
/// restarts the timer, so a slow but live stream is never cut.
fn idle_limited(
    s: impl Stream<Item = Result<Bytes, axum::Error>> + Send + 'static,
    idle: Duration,
    proxy: Proxy,
    sink: Option<Sink>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let scan = sink.map(|k| (usage::Scan::new(k.api), k));
    futures_util::stream::unfold(Some((Box::pin(s), scan)), move |s| {
        let proxy = proxy.clone();
        async move {
            let (mut s, mut scan) = s?;
            match tokio::time::timeout(idle, s.next()).await {
                Ok(Some(Ok(b))) => {
                    // Reported as soon as read: a client that knows the
                    // answer's length stops reading at its last byte.
                    if let Some((sc, sink)) = scan.as_mut() {
                        let before = sc.input();
                        sc.feed(&b);
                        if let Some(n) = sc.input().filter(|n| Some(*n) != before) {
                            // Recorded in the store before this chunk goes on (`usage::Sink::report`).
                            let k = sink.clone();
                            let _ = tokio::task::spawn_blocking(move || k.report(n)).await;
                        }
                    }
                    Some((Ok(b), Some((s, scan))))
                }
                Ok(Some(Err(e))) => Some((Err(std::io::Error::other(e)), None)),
                Ok(None) => None,
                Err(_) => {
                    proxy.count(|c| &c.upstream_timeouts);
                    let why = format!("upstream silent for {} s", idle.as_secs_f64());
                    Some((Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why)), None))
                }
            }
        }
    })
}

/// Headers without hop-by-hop ones (and, going upstream, without the proxy's own).
fn filtered(h: &HeaderMap, upstream: bool) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(h.len());
    for (k, v) in h {
        let name = k.as_str();
        if HOP.contains(&name) || (upstream && [SESSION, BYPASS, TOKEN, BUDGET].contains(&name)) {
            continue;
        }
        out.append(k.clone(), v.clone());
    }
    out
}
