//! The HTTP side: routes, forwarding to the upstream, streaming the answer
//! back as it arrives, and shutting down without cutting streams.

use crate::{Api, Error, Proxy, ServeConfig};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Instant;

/// Request headers that configure the proxy (never forwarded).
const SESSION: &str = "x-lam-session";
const BYPASS: &str = "x-lam-bypass";

/// Hop-by-hop headers (RFC 9110 7.6.1) and those the client library recomputes.
const HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

#[derive(Debug, Clone)]
struct App {
    proxy: Proxy,
    client: reqwest::Client,
}

fn router(app: App) -> Router {
    let mut r = Router::new();
    for api in Api::ALL {
        r = r.route(
            api.path(),
            post(move |s: State<App>, req: Request| compacted(s, api, req)).fallback(passthrough),
        );
    }
    r.route("/lam/stats", get(stats))
        .route("/metrics", get(metrics))
        .fallback(passthrough)
        .with_state(app)
}

/// Serve `proxy` on `listener` until `shutdown` completes, then finish the
/// requests in flight (streams included) and return.
pub async fn serve(
    proxy: Proxy,
    listener: std::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    };
    listener.set_nonblocking(true).map_err(io("listening"))?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(io("listening"))?;
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| Error::Setting(format!("HTTP client: {e}")))?;
    let app = App { proxy, client };
    // Small SSE events go out at once (no Nagle delay waiting for an ACK).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(io("serving"))
}

/// Listen on `listen`, call `ready` with the bound address, serve until
/// SIGINT or SIGTERM, finish what is in flight, then make the archive
/// durable and save the embedding cache.
pub fn run(
    cfg: ServeConfig,
    listen: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), Error> {
    let proxy = Proxy::open(cfg)?;
    let listener = std::net::TcpListener::bind(listen).map_err(|source| Error::Io {
        what: format!("listening on {listen}"),
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| Error::Io {
        what: "listening".into(),
        source,
    })?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "starting the runtime".into(),
            source,
        })?;
    ready(addr);
    let served = rt.block_on(serve(proxy.clone(), listener, signalled()));
    let closed = proxy.close();
    served.and(closed)
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn signalled() {
    let int = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => return std::mem::drop(int.await),
            };
        tokio::select! {
            _ = int => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = int.await;
}

async fn compacted(State(app): State<App>, api: Api, req: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let max = app.proxy.config().max_body;
    let Ok(bytes) = axum::body::to_bytes(body, max).await else {
        app.proxy.count(|c| &c.too_large);
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "lam_request_too_large",
            &format!("lam serve: the request body exceeds {max} bytes (--max-body-mib)"),
        );
    };
    let bypass = parts
        .headers
        .get(BYPASS)
        .is_some_and(|v| v.as_bytes() == b"1");
    let name = match session_name(&parts.headers) {
        Ok(n) => n,
        Err(why) => return error(StatusCode::BAD_REQUEST, "lam_bad_session", &why),
    };
    let (body, session) = if bypass {
        app.proxy.count(|c| &c.bypassed);
        (bytes, None)
    } else {
        let p = app.proxy.clone();
        match tokio::task::spawn_blocking(move || p.rewrite(api, name.as_deref(), &bytes)).await {
            Ok(r) => (Bytes::from(r.body), r.session),
            Err(e) => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "lam_internal_error",
                    &format!("lam serve: rewriting failed: {e}"),
                );
            }
        }
    };
    let mut resp = forward(&app, &parts, reqwest::Body::from(body)).await;
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        resp.headers_mut()
            .insert(HeaderName::from_static(SESSION), s);
    }
    log(&app, &parts, &resp, started);
    resp
}

async fn passthrough(State(app): State<App>, req: Request) -> Response {
    let started = Instant::now();
    app.proxy.count(|c| &c.passthrough);
    let (parts, body) = req.into_parts();
    let resp = forward(
        &app,
        &parts,
        reqwest::Body::wrap_stream(body.into_data_stream()),
    )
    .await;
    log(&app, &parts, &resp, started);
    resp
}

/// The `x-lam-session` name: visible ASCII, 1 to 256 bytes (absent or empty: none).
fn session_name(h: &HeaderMap) -> Result<Option<String>, String> {
    let Some(v) = h.get(SESSION) else {
        return Ok(None);
    };
    let bad = || format!("lam serve: {SESSION} must be 1 to 256 visible ASCII characters");
    let s = v.to_str().map_err(|_| bad())?.trim();
    if s.len() > 256 || s.bytes().any(|b| !b.is_ascii_graphic() && b != b' ') {
        return Err(bad());
    }
    Ok((!s.is_empty()).then(|| s.to_string()))
}

/// Send the request upstream; its answer streams back chunk by chunk.
async fn forward(app: &App, parts: &axum::http::request::Parts, body: reqwest::Body) -> Response {
    let cfg = app.proxy.config();
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{pq}", cfg.upstream);
    let sent = app
        .client
        .request(parts.method.clone(), &url)
        .headers(filtered(&parts.headers, true))
        .body(body)
        .send()
        .await;
    let up = match sent {
        Ok(r) => r,
        Err(e) => {
            app.proxy.count(|c| &c.unreachable);
            let why = std::error::Error::source(&e)
                .map_or_else(|| e.to_string(), |s| format!("{e}: {s}"));
            return error(
                StatusCode::BAD_GATEWAY,
                "lam_upstream_unreachable",
                &format!("lam serve: upstream {} unreachable: {why}", cfg.upstream),
            );
        }
    };
    if up.status().as_u16() >= 400 {
        app.proxy.count(|c| &c.upstream_errors);
    }
    let mut resp = Response::builder().status(up.status());
    if let Some(h) = resp.headers_mut() {
        *h = filtered(up.headers(), false);
        if let Some(n) = up.content_length() {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    resp.body(Body::from_stream(up.bytes_stream()))
        .unwrap_or_else(|e| {
            error(
                StatusCode::BAD_GATEWAY,
                "lam_internal_error",
                &format!("lam serve: {e}"),
            )
        })
}

/// Headers without hop-by-hop ones (and, going upstream, without the proxy's own).
fn filtered(h: &HeaderMap, upstream: bool) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(h.len());
    for (k, v) in h {
        let name = k.as_str();
        if HOP.contains(&name) || (upstream && (name == SESSION || name == BYPASS)) {
            continue;
        }
        out.append(k.clone(), v.clone());
    }
    out
}

/// A JSON error both SDKs read (`error.type`, `error.message`).
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn stats(State(app): State<App>) -> Response {
    let body = serde_json::to_string_pretty(&app.proxy.stats()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn metrics(State(app): State<App>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.proxy.metrics(),
    )
        .into_response()
}

/// One line per request when `--log` is on: never a header, never a body.
fn log(app: &App, parts: &axum::http::request::Parts, resp: &Response, started: Instant) {
    if app.proxy.config().log {
        let session = resp
            .headers()
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        eprintln!(
            "lam serve: {} {} -> {} session {session} in {:.1} ms (headers sent)",
            parts.method,
            parts.uri.path(),
            resp.status().as_u16(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}
