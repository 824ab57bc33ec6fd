//! Before any route: the token (when one is set), protocol upgrades
//! (refused), then the path.

use super::{App, TOKEN, error};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// Before any route: the token (when one is set), protocol upgrades
/// (refused: `426`), then the path. Nothing
/// here reads `Host` or any other header the client could forge to pass.
pub(crate) async fn guard(State(app): State<App>, req: Request, next: Next) -> Response {
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
        app.proxy.count(|c| &c.upgrades_refused);
        let mut resp = error(
            StatusCode::UPGRADE_REQUIRED,
            "lam_upgrade_refused",
            "lam serve: protocol upgrades (WebSocket) are not proxied: a WebSocket would carry the conversation past compaction; send the request over HTTP (SSE streaming works)",
        );
        // RFC 9110 15.5.22: a 426 names the protocol required, here plain HTTP/1.1.
        resp.headers_mut().insert(header::UPGRADE, HeaderValue::from_static("HTTP/1.1"));
        resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        return resp;
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
fn authorized(token: &crate::config::Token, h: &HeaderMap, own: bool) -> bool {
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
