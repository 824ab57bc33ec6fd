//! Stage one, and the way out: the HTTP side. Routes (here), the token,
//! upgrade and path checks before any route ([`guard`]), forwarding to the
//! upstream and streaming its answer back ([`forward`]), listening and
//! shutting down within the drain deadline ([`listen`]).

mod forward;
mod guard;
mod listen;
mod room;
mod trust;
mod upstream;
mod via;

pub use listen::{run, serve};
pub use trust::read_upstream_ca;

use crate::api::Api;
use crate::error::Error;
use crate::proxy::Proxy;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::time::Instant;

/// Request headers that configure the proxy (never forwarded).
pub(crate) const SESSION: &str = "x-lam-session";
pub(crate) const BYPASS: &str = "x-lam-bypass";
pub(crate) const TOKEN: &str = "x-lam-token";
/// A request's own context budget (`TOKENS`, cut to half; `--keep` as the proxy's).
pub(crate) const BUDGET: &str = "x-lam-budget";

/// Hop-by-hop headers (RFC 9110 7.6.1) and those the client library recomputes.
pub(crate) const HOP: [&str; 9] = ["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length"];

#[derive(Debug, Clone)]
pub(crate) struct App {
    pub(crate) proxy: Proxy,
    pub(crate) client: upstream::Client,
    /// The working memory requests in flight may hold ([`room`]).
    pub(crate) room: room::Room,
}

pub(crate) fn router(app: App) -> Router {
    let mut r = Router::new();
    for api in Api::ALL {
        for route in api.routes() {
            r = r.route(route, post(move |s: State<App>, req: Request| compacted(s, api, req)).fallback(passthrough));
        }
    }
    r.route("/lam/stats", get(stats))
        .route("/metrics", get(metrics))
        .fallback(passthrough)
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard::guard))
        .with_state(app)
}

/// A request on an API's route: its conversation compacted, or (a route
/// of Gemini's that holds none, `:countTokens`) passed through.
async fn compacted(State(app): State<App>, api: Api, req: Request) -> Response {
    if !api.carries_conversation(req.uri().path()) {
        return passthrough(State(app), req).await;
    }
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let max = app.proxy.config().max_body;
    let bypass = parts.headers.get(BYPASS).is_some_and(|v| v.as_bytes() == b"1");
    // A bypassed body is only forwarded: its bytes are all it holds.
    let factor = if bypass { 1 } else { room::WORK_PER_BODY_BYTE };
    // Room first, by the declared length, so a body that must wait is not read yet.
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok()).filter(|n| *n <= max);
    let mut share = match declared {
        Some(n) => match reserve(&app, n, factor).await {
            Ok(s) => Some(s),
            Err(resp) => {
                discard(body, max).await;
                return resp;
            }
        },
        None => None,
    };
    let Ok(bytes) = axum::body::to_bytes(body, max).await else {
        app.proxy.count(|c| &c.too_large);
        return error(StatusCode::PAYLOAD_TOO_LARGE, "lam_request_too_large", &format!("lam serve: the request body exceeds {max} bytes (--max-body-mib)"));
    };
    if share.is_none() {
        share = match reserve(&app, bytes.len(), factor).await {
            Ok(s) => Some(s),
            Err(resp) => return resp,
        };
    }
    let name = match session_name(&parts.headers) {
        Ok(n) => n,
        Err(why) => {
            app.proxy.count(|c| &c.refused);
            return error(StatusCode::BAD_REQUEST, "lam_bad_session", &why);
        }
    };
    // A header's budget keeps `--keep` results, of `--budget` or the default budget.
    let cfg = app.proxy.config();
    let keep_from = cfg.keep_from();
    let budget = match request_budget(&parts.headers, keep_from) {
        Ok(b) => b,
        Err(why) => {
            app.proxy.count(|c| &c.refused);
            return error(StatusCode::BAD_REQUEST, "lam_bad_budget", &why);
        }
    };
    let (body, session, sink, receipt) = if bypass {
        app.proxy.count(|c| &c.bypassed);
        (bytes, None, None, None)
    } else {
        match rewritten(&app, api, (name, budget), bytes, &mut share).await {
            Ok(r) => r,
            Err(resp) => return resp,
        }
    };
    // Until the upstream answers, only the forwarded body is held.
    if let Some(s) = share.as_mut() {
        s.shrink_to(body.len());
    }
    let mut resp = forward::forward(&app, &parts, upstream::Payload::Kept(body), sink).await;
    drop(share);
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        resp.headers_mut().insert(HeaderName::from_static(SESSION), s);
    }
    log(&app, &parts, &resp, started, receipt.as_ref());
    resp
}

/// Read `body` (at most `max` bytes) and drop it as it comes, holding no
/// more than a frame: a client that sends its whole body before reading
/// the answer then gets the answer, not a reset connection.
async fn discard(body: axum::body::Body, max: usize) {
    use futures_util::StreamExt as _;
    let mut s = body.into_data_stream();
    let mut read = 0;
    while let Some(Ok(chunk)) = s.next().await {
        read += chunk.len();
        if read > max {
            break;
        }
    }
}

/// A share of the room for a body of `len` bytes, or the `503` (counted).
async fn reserve(app: &App, len: usize, factor: usize) -> Result<room::Share, Response> {
    let r = app.room.reserve(app.proxy.config(), len, factor).await;
    if r.is_err() {
        app.proxy.count(|c| &c.overloaded);
    }
    r
}

/// The body to forward, its session, where the upstream's count goes, and its receipt.
type Forwarded = (Bytes, Option<String>, Option<crate::usage::Sink>, Option<crate::bill::Receipt>);

/// The body to forward and its session, or the error answer.
async fn rewritten(
    app: &App,
    api: Api,
    (name, budget): (Option<String>, Option<crate::config::Budget>),
    bytes: Bytes,
    share: &mut Option<room::Share>,
) -> Result<Forwarded, Response> {
    let (p, sent) = (app.proxy.clone(), bytes.clone());
    // The share goes with the work: a client gone meanwhile does not give
    // back room the rewrite still holds.
    let held = share.take();
    // The request's arrival, the one clock reading a cut may depend on
    // (recorded once: `crate::budget::ledger`).
    let arrival = crate::proxy::Arrival::now();
    let done = tokio::task::spawn_blocking(move || (p.try_rewrite_at(api, name.as_deref(), &sent, budget, arrival), held)).await;
    match done.map(|(r, held)| {
        *share = held;
        r
    }) {
        Ok(Ok(r)) => Ok((Bytes::from(r.body), r.session, r.sink, r.receipt)),
        Ok(Err(e @ Error::DuplicateKey(_))) => {
            Err(error(StatusCode::BAD_REQUEST, "lam_duplicate_key", &format!("lam serve: {e}; which one the upstream would read is unknown")))
        }
        // Fail open: what lam could not rewrite goes as it came.
        Ok(Err(e)) => {
            app.proxy.count(|c| &c.failed_open);
            say!("lam serve: rewriting failed ({e}); forwarding the request as it came");
            Ok((bytes, None, None, None))
        }
        Err(e) => {
            app.proxy.count(|c| &c.failed_open);
            say!("lam serve: rewriting failed inside lam ({e}; a bug, please report it); forwarding the request as it came");
            Ok((bytes, None, None, None))
        }
    }
}

async fn passthrough(State(app): State<App>, req: Request) -> Response {
    let started = Instant::now();
    app.proxy.count(|c| &c.passthrough);
    let (parts, body) = req.into_parts();
    let resp = forward::forward(&app, &parts, body.into(), None).await;
    log(&app, &parts, &resp, started, None);
    resp
}

/// The `x-lam-session` name: visible ASCII, 1 to 256 bytes (absent or empty: none).
/// `x-lam-budget: TOKENS`: the request's own budget, cut to half, keeping
/// the proxy's `--keep` (`proxy`: its `--budget`, if any).
fn request_budget(h: &HeaderMap, proxy: Option<crate::config::Budget>) -> Result<Option<crate::config::Budget>, String> {
    let Some(v) = single(h, BUDGET)? else { return Ok(None) };
    let bad = |why: &str| format!("lam serve: {BUDGET} must be a number of tokens, at least 1 ({why})");
    let tokens: u64 = v.to_str().map_err(|_| bad("not text"))?.trim().parse().map_err(|_| bad("not a number"))?;
    if tokens == 0 {
        return Err(bad("0"));
    }
    crate::config::Budget::new(tokens, None, proxy.map(|b| b.keep)).map(Some).map_err(|e| bad(&e))
}

fn session_name(h: &HeaderMap) -> Result<Option<String>, String> {
    let Some(v) = single(h, SESSION)? else {
        return Ok(None);
    };
    let bad = || format!("lam serve: {SESSION} must be 1 to 256 visible ASCII characters");
    let s = v.to_str().map_err(|_| bad())?.trim();
    if s.len() > 256 || s.bytes().any(|b| !b.is_ascii_graphic() && b != b' ') {
        return Err(bad());
    }
    Ok((!s.is_empty()).then(|| s.to_string()))
}

/// Header `name`'s value: none, or one (the same value sent twice, as
/// some clients do, is one). Two different values are ambiguous: which
/// one would apply is not for lam to guess.
fn single<'h>(h: &'h HeaderMap, name: &str) -> Result<Option<&'h HeaderValue>, String> {
    let mut all = h.get_all(name).iter();
    let Some(first) = all.next() else { return Ok(None) };
    if all.any(|v| v.as_bytes().trim_ascii() != first.as_bytes().trim_ascii()) {
        return Err(format!("lam serve: {name} was sent more than once, with different values; send it once"));
    }
    Ok(Some(first))
}

async fn stats(State(app): State<App>) -> Response {
    let body = serde_json::to_string_pretty(&app.proxy.stats()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn metrics(State(app): State<App>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.proxy.metrics()).into_response()
}

/// A JSON error both SDKs read (`error.type`, `error.message`).
pub(crate) fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// One line per request when `--log` is on: never a header, never a body;
/// a compacted request's ends with its receipt ([`receipt_text`]).
fn log(app: &App, parts: &axum::http::request::Parts, resp: &Response, started: Instant, receipt: Option<&crate::bill::Receipt>) {
    if app.proxy.log().on() {
        let session = resp.headers().get(SESSION).and_then(|v| v.to_str().ok()).unwrap_or("-");
        app.proxy.log().line(format_args!(
            "lam serve: {} {} -> {} session {session} in {:.1} ms (headers sent){}",
            parts.method,
            parts.uri.path(),
            resp.status().as_u16(),
            started.elapsed().as_secs_f64() * 1e3,
            receipt.map_or(String::new(), receipt_text)
        ));
    }
}

/// `; input would have cost D, cost L, saved S (P%) plain-input tokens`:
/// what the request's input is billed direct and as forwarded, in tokens at
/// the plain input price (prompt-cache reads and writes priced as `lam
/// replay` prices them).
pub(crate) fn receipt_text(r: &crate::bill::Receipt) -> String {
    let pct = if r.direct > 0.0 { 100.0 * r.saved() / r.direct } else { 0.0 };
    format!("; input would have cost {:.0}, cost {:.0}, saved {:.0} ({pct:.1}%) plain-input tokens", r.direct, r.lam, r.saved())
}
