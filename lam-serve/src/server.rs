//! The HTTP side: routes, the token and path checks, forwarding to the
//! upstream under its timeouts, streaming the answer back as it arrives, and
//! shutting down without cutting streams (within the drain deadline).

use crate::{Api, Error, Proxy, ServeConfig};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Request headers that configure the proxy (never forwarded).
const SESSION: &str = "x-lam-session";
const BYPASS: &str = "x-lam-bypass";
const TOKEN: &str = "x-lam-token";

/// Hop-by-hop headers (RFC 9110 7.6.1) and those the client library recomputes.
const HOP: [&str; 9] = ["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length"];

#[derive(Debug, Clone)]
struct App {
    proxy: Proxy,
    client: reqwest::Client,
}

fn router(app: App) -> Router {
    let mut r = Router::new();
    for api in Api::ALL {
        r = r.route(api.path(), post(move |s: State<App>, req: Request| compacted(s, api, req)).fallback(passthrough));
    }
    r.route("/lam/stats", get(stats))
        .route("/metrics", get(metrics))
        .fallback(passthrough)
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Before any route: the token (when one is set), protocol upgrades
/// (refused: `426`), then the path. Nothing
/// here reads `Host` or any other header the client could forge to pass.
async fn guard(State(app): State<App>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let own = path == "/metrics" || path.starts_with("/lam/");
    if let Some(t) = &app.proxy.config().token
        && !authorized(t, req.headers(), own)
    {
        app.proxy.count(|c| &c.unauthorized);
        let how = if own { "x-lam-token: TOKEN or Authorization: Bearer TOKEN" } else { "x-lam-token: TOKEN" };
        return error(StatusCode::UNAUTHORIZED, "lam_unauthorized", &format!("lam serve: this proxy requires {how}"));
    }
    if req.headers().contains_key(header::UPGRADE) {
        app.proxy.count(|c| &c.upgrades);
        return error(
            StatusCode::UPGRADE_REQUIRED,
            "lam_upgrade_refused",
            "lam serve: protocol upgrades (WebSocket) are not proxied: a WebSocket would carry the conversation past compaction; send the request over HTTP (SSE streaming works)",
        );
    }
    if escapes_prefix(path) {
        app.proxy.count(|c| &c.refused);
        return error(
            StatusCode::BAD_REQUEST,
            "lam_bad_path",
            "lam serve: the request path holds a dot segment (`.`, `..`, also percent-encoded or after `\\`), which could leave the upstream's path prefix",
        );
    }
    next.run(req).await
}

/// Whether the headers carry `token`: in `x-lam-token`, or for the proxy's
/// own routes also as `Authorization: Bearer` (on proxied routes that header
/// is the provider key's and passes through untouched).
fn authorized(token: &crate::Token, h: &HeaderMap, own: bool) -> bool {
    let mut ok = false;
    for v in h.get_all(TOKEN) {
        ok |= token.matches(v.as_bytes());
    }
    if own {
        for v in h.get_all(header::AUTHORIZATION) {
            ok |= v.as_bytes().strip_prefix(b"Bearer ").is_some_and(|t| token.matches(t));
        }
    }
    ok
}

/// Whether `path` (as received) could resolve outside the upstream's path
/// prefix: not starting with `/`, or holding a `.` or `..` segment once
/// percent-decoded (repeatedly: `%252e` too), with `\` and encoded slashes
/// taken as separators and `;params` ignored (`..;`).
pub(crate) fn escapes_prefix(path: &str) -> bool {
    if !path.starts_with('/') {
        return true;
    }
    let mut p = path.as_bytes().to_vec();
    for _ in 0..4 {
        let d = percent_decoded(&p);
        if d == p {
            break;
        }
        p = d;
    }
    p.split(|b| *b == b'/' || *b == b'\\').any(|seg| {
        let seg = seg.split(|b| *b == b';').next().unwrap_or_default();
        seg == b"." || seg == b".."
    })
}

/// `%XX` decoded (any case); other bytes, and malformed escapes, as they are.
fn percent_decoded(p: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        if p[i] == b'%'
            && let (Some(h), Some(l)) = (p.get(i + 1).and_then(|b| hex(*b)), p.get(i + 2).and_then(|b| hex(*b)))
        {
            out.push(h << 4 | l);
            i += 3;
        } else {
            out.push(p[i]);
            i += 1;
        }
    }
    out
}

/// Serve `proxy` on `listener` until `shutdown` completes, then finish the
/// requests in flight (streams included) and return.
pub async fn serve(proxy: Proxy, listener: std::net::TcpListener, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), Error> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    };
    listener.set_nonblocking(true).map_err(io("listening"))?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(io("listening"))?;
    let client = reqwest::Client::builder().connect_timeout(proxy.config().connect_timeout).build().map_err(|e| Error::Setting(format!("HTTP client: {e}")))?;
    let app = App { proxy, client };
    // Small SSE events go out at once (no Nagle delay waiting for an ACK).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(app)).with_graceful_shutdown(shutdown).await.map_err(io("serving"))
}

/// Listen on `listen`, call `ready` with the bound address, serve until
/// SIGINT or SIGTERM, finish what is in flight, then make the archive
/// durable and save the embedding cache.
pub fn run(cfg: ServeConfig, listen: SocketAddr, ready: impl FnOnce(SocketAddr)) -> Result<(), Error> {
    if !listen.ip().is_loopback() && cfg.token.is_none() {
        return Err(Error::Setting(format!(
            "--listen {listen} is not a loopback address: give a token (--token-file PATH or LAM_TOKEN) that every client must send"
        )));
    }
    let drain = cfg.drain_timeout;
    let proxy = Proxy::open(cfg)?;
    let listener = std::net::TcpListener::bind(listen).map_err(|source| Error::Io { what: format!("listening on {listen}"), source })?;
    let addr = listener.local_addr().map_err(|source| Error::Io { what: "listening".into(), source })?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|source| Error::Io { what: "starting the runtime".into(), source })?;
    // Handlers first: a signal right after `ready` is a stop, never a kill.
    let signals = {
        let _in = rt.enter();
        Signals::new().map_err(|source| Error::Io { what: "installing signal handlers".into(), source })?
    };
    ready(addr);
    let served = rt.block_on(serve_until_signalled(proxy.clone(), listener, signals, drain));
    let closed = proxy.close();
    // Requests cut by the deadline may still run blocking work: do not wait.
    rt.shutdown_background();
    served.and(closed)
}

/// Serve until the first signal, then drain: return when every in-flight
/// request is done, at a second signal, or after `drain`, whichever is first
/// (the last two: [`Error::Cut`]).
async fn serve_until_signalled(proxy: Proxy, listener: std::net::TcpListener, mut signals: Signals, drain: Duration) -> Result<(), Error> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = serve(proxy, listener, async move {
        let _ = stopped.await;
    });
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return r,
        () = signals.next() => {}
    }
    let _ = stop.send(());
    eprintln!(
        "lam serve: stopping: no new connections; finishing in-flight requests for at most {} s (--drain-timeout-s; a second signal stops now)",
        drain.as_secs_f64()
    );
    tokio::select! {
        r = &mut server => r,
        () = signals.next() => {
            eprintln!("lam serve: second signal: stopping now, cutting in-flight requests");
            Err(Error::Cut("a second signal"))
        }
        () = tokio::time::sleep(drain) => {
            eprintln!("lam serve: drain deadline reached: stopping now, cutting in-flight requests");
            Err(Error::Cut("the drain deadline, --drain-timeout-s"))
        }
    }
}

/// SIGINT (Ctrl-C) and SIGTERM, each as often as they come.
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    /// Install the handlers (inside a runtime).
    fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())? })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.int.recv() => {},
            _ = self.term.recv() => {},
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn compacted(State(app): State<App>, api: Api, req: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let max = app.proxy.config().max_body;
    let Ok(bytes) = axum::body::to_bytes(body, max).await else {
        app.proxy.count(|c| &c.too_large);
        return error(StatusCode::PAYLOAD_TOO_LARGE, "lam_request_too_large", &format!("lam serve: the request body exceeds {max} bytes (--max-body-mib)"));
    };
    let bypass = parts.headers.get(BYPASS).is_some_and(|v| v.as_bytes() == b"1");
    let name = match session_name(&parts.headers) {
        Ok(n) => n,
        Err(why) => {
            app.proxy.count(|c| &c.refused);
            return error(StatusCode::BAD_REQUEST, "lam_bad_session", &why);
        }
    };
    let (body, session) = if bypass {
        app.proxy.count(|c| &c.bypassed);
        (bytes, None)
    } else {
        match rewritten(&app, api, name, bytes).await {
            Ok(r) => r,
            Err(resp) => return resp,
        }
    };
    let mut resp = forward(&app, &parts, reqwest::Body::from(body)).await;
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        resp.headers_mut().insert(HeaderName::from_static(SESSION), s);
    }
    log(&app, &parts, &resp, started);
    resp
}

/// The body to forward and its session, or the error answer.
async fn rewritten(app: &App, api: Api, name: Option<String>, bytes: Bytes) -> Result<(Bytes, Option<String>), Response> {
    let (p, sent) = (app.proxy.clone(), bytes.clone());
    match tokio::task::spawn_blocking(move || p.try_rewrite(api, name.as_deref(), &sent)).await {
        Ok(Ok(r)) => Ok((Bytes::from(r.body), r.session)),
        Ok(Err(e @ Error::DuplicateKey(_))) => {
            Err(error(StatusCode::BAD_REQUEST, "lam_duplicate_key", &format!("lam serve: {e}; which one the upstream would read is unknown")))
        }
        // Fail open: what lam could not rewrite goes as it came.
        Ok(Err(e)) => {
            app.proxy.count(|c| &c.failed_open);
            eprintln!("lam serve: rewriting failed ({e}); forwarding the request as it came");
            Ok((bytes, None))
        }
        Err(e) => {
            app.proxy.count(|c| &c.failed_open);
            eprintln!("lam serve: rewriting failed inside lam ({e}; a bug, please report it); forwarding the request as it came");
            Ok((bytes, None))
        }
    }
}

async fn passthrough(State(app): State<App>, req: Request) -> Response {
    let started = Instant::now();
    app.proxy.count(|c| &c.passthrough);
    let (parts, body) = req.into_parts();
    let resp = forward(&app, &parts, reqwest::Body::wrap_stream(body.into_data_stream())).await;
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

/// Send the request upstream; its answer streams back chunk by chunk, each
/// awaited at most `idle_timeout`.
async fn forward(app: &App, parts: &axum::http::request::Parts, body: reqwest::Body) -> Response {
    let cfg = app.proxy.config();
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{pq}", cfg.upstream);
    let send = app.client.request(parts.method.clone(), &url).headers(filtered(&parts.headers, true)).body(body).send();
    let up = match tokio::time::timeout(cfg.idle_timeout, send).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return unreachable(app, e),
        Err(_) => {
            app.proxy.count(|c| &c.timeouts);
            return error(
                StatusCode::GATEWAY_TIMEOUT,
                "lam_upstream_timeout",
                &format!("lam serve: upstream {} sent nothing for {} s (--upstream-idle-timeout-s)", cfg.upstream_shown(), cfg.idle_timeout.as_secs_f64()),
            );
        }
    };
    answer(app, up)
}

/// `502` (or `504` for a connect timeout) for a request that got no answer;
/// the upstream shown with its password masked, never the request's URL.
fn unreachable(app: &App, e: reqwest::Error) -> Response {
    let cfg = app.proxy.config();
    let timeout = e.is_timeout();
    if timeout {
        app.proxy.count(|c| &c.timeouts);
    } else {
        app.proxy.count(|c| &c.unreachable);
    }
    let e = e.without_url();
    // The whole chain of causes: the last one is what went wrong (a reset, a refusal).
    let mut why = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        why = format!("{why}: {c}");
        cause = c.source();
    }
    let shown = cfg.upstream_shown();
    let why = why.replace(&cfg.upstream, &shown);
    let (status, kind) = if timeout { (StatusCode::GATEWAY_TIMEOUT, "lam_upstream_timeout") } else { (StatusCode::BAD_GATEWAY, "lam_upstream_unreachable") };
    error(status, kind, &format!("lam serve: upstream {shown} unreachable: {why}"))
}

/// The upstream's answer, passed back as it streams.
fn answer(app: &App, up: reqwest::Response) -> Response {
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
    let idle = app.proxy.config().idle_timeout;
    resp.body(Body::from_stream(idle_limited(up.bytes_stream(), idle, app.proxy.clone())))
        .unwrap_or_else(|e| error(StatusCode::BAD_GATEWAY, "lam_internal_error", &format!("lam serve: {e}")))
}

/// `s`, cut with an error (the client sees the answer end abruptly, never
/// as complete) when the upstream sends nothing for `idle`; every chunk
/// restarts the timer, so a slow but live stream is never cut.
fn idle_limited(
    s: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    idle: Duration,
    proxy: Proxy,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures_util::stream::unfold(Some(Box::pin(s)), move |s| {
        let proxy = proxy.clone();
        async move {
            let mut s = s?;
            match tokio::time::timeout(idle, s.next()).await {
                Ok(Some(Ok(b))) => Some((Ok(b), Some(s))),
                Ok(Some(Err(e))) => Some((Err(std::io::Error::other(e.without_url())), None)),
                Ok(None) => None,
                Err(_) => {
                    proxy.count(|c| &c.timeouts);
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
        if HOP.contains(&name) || (upstream && [SESSION, BYPASS, TOKEN].contains(&name)) {
            continue;
        }
        out.append(k.clone(), v.clone());
    }
    out
}

/// A JSON error both SDKs read (`error.type`, `error.message`).
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn stats(State(app): State<App>) -> Response {
    let body = serde_json::to_string_pretty(&app.proxy.stats()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn metrics(State(app): State<App>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.proxy.metrics()).into_response()
}

/// One line per request when `--log` is on: never a header, never a body.
fn log(app: &App, parts: &axum::http::request::Parts, resp: &Response, started: Instant) {
    if app.proxy.config().log {
        let session = resp.headers().get(SESSION).and_then(|v| v.to_str().ok()).unwrap_or("-");
        eprintln!(
            "lam serve: {} {} -> {} session {session} in {:.1} ms (headers sent)",
            parts.method,
            parts.uri.path(),
            resp.status().as_u16(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}
