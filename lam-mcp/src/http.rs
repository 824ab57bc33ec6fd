//! The streamable HTTP transport, guarded: who may call (loopback peers, or
//! any peer with the bearer token) and what reaches the SDK (well-formed
//! JSON-RPC only; anything else gets a JSON-RPC error).
//!
//! - Without a token the server binds loopback addresses only, keeps the
//!   SDK's `Host` check (`localhost`, `127.0.0.1`, `::1`: DNS rebinding) and
//!   refuses every peer that is not a loopback address (403), whatever its
//!   `Host` header says.
//! - With a token ([`HttpAccess::token`]) it may bind any address; every
//!   request must carry `Authorization: Bearer TOKEN` (compared in constant
//!   time), else 401. The `Host` check is off: the token is the check.
//! - A POST body that is not JSON gets `-32700 Parse error` (HTTP 400); JSON
//!   that is not a JSON-RPC 2.0 message (no `"jsonrpc": "2.0"`, an `id` that
//!   is not a string or an integer, no `method` and no `result`/`error`, a
//!   batch) gets `-32600 Invalid Request` (HTTP 400), with `"id": null`
//!   where the id cannot be read: [`crate::jsonrpc::check`], as on stdio.

use crate::{RecallServer, ServeError, archive::Archive};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The largest request body read (bytes); larger bodies get 413.
pub const MAX_BODY: usize = 4 << 20;

/// Who may call the HTTP server: loopback peers only ([`HttpAccess::loopback`]),
/// or holders of a bearer token ([`HttpAccess::token`]).
#[derive(Clone, Default)]
pub struct HttpAccess {
    token: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for HttpAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = if self.token.is_some() { "Some(***)" } else { "None" };
        f.debug_struct("HttpAccess").field("token", &t).finish()
    }
}

impl HttpAccess {
    /// Loopback peers only, no token (the default).
    pub fn loopback() -> Self {
        Self::default()
    }

    /// Every request must carry `Authorization: Bearer TOKEN`. Surrounding
    /// whitespace (a file's final newline) is trimmed; an empty token is refused.
    pub fn token(token: &str) -> Result<Self, ServeError> {
        let t = token.trim();
        if t.is_empty() {
            return Err(ServeError::Refused("the token is empty".into()));
        }
        if t.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(ServeError::Refused("the token must be printable ASCII without spaces".into()));
        }
        Ok(HttpAccess { token: Some(t.as_bytes().into()) })
    }

    /// Whether a token is required.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Refuse to listen on a non-loopback address without a token.
    pub fn check_bind(&self, addr: SocketAddr) -> Result<(), ServeError> {
        if self.token.is_none() && !addr.ip().is_loopback() {
            return Err(ServeError::Refused(format!(
                "{addr} is not a loopback address: serving it to other machines needs a token (--token-file PATH or LAM_TOKEN)"
            )));
        }
        Ok(())
    }

    /// Admit a request from `peer` with `headers`, or answer it.
    #[allow(clippy::result_large_err)] // the error is the response to send, built only on refusal
    fn admit(&self, peer: IpAddr, headers: &HeaderMap) -> Result<(), Response> {
        let Some(token) = &self.token else {
            if loopback(peer) {
                return Ok(());
            }
            return Err((StatusCode::FORBIDDEN, "Forbidden: only loopback peers may call this server (it has no token)\n").into_response());
        };
        let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer);
        if given.is_some_and(|g| ct_eq(g.as_bytes(), token)) {
            return Ok(());
        }
        Err((StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "Unauthorized: send Authorization: Bearer TOKEN\n").into_response())
    }
}

/// A loopback peer, also as an IPv4-mapped IPv6 address.
fn loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(v6.is_loopback(), |v4| v4.is_loopback()),
        v4 => v4.is_loopback(),
    }
}

/// The token of an `Authorization: Bearer TOKEN` value (scheme case-insensitive).
fn bearer(v: &str) -> Option<&str> {
    let (scheme, rest) = v.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

/// The guard in front of the SDK: the peer and token, then the body.
async fn guard(State(access): State<HttpAccess>, ConnectInfo(peer): ConnectInfo<SocketAddr>, req: Request, next: Next) -> Response {
    if let Err(r) = access.admit(peer.ip(), req.headers()) {
        return r;
    }
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return (StatusCode::PAYLOAD_TOO_LARGE, format!("Payload Too Large: at most {MAX_BODY} bytes\n")).into_response(),
    };
    if let Err(r) = check_jsonrpc(&bytes) {
        return r;
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// `Ok` for one well-formed JSON-RPC 2.0 message; else its error response (HTTP 400).
#[allow(clippy::result_large_err)] // the error is the response to send, built only on refusal
fn check_jsonrpc(body: &[u8]) -> Result<(), Response> {
    match crate::jsonrpc::check(body) {
        Ok(_) => Ok(()),
        Err(refusal) => Err((StatusCode::BAD_REQUEST, [(header::CONTENT_TYPE, "application/json")], refusal.to_json().to_string()).into_response()),
    }
}

/// Serve `archive` over MCP streamable HTTP at `http://ADDR/mcp`, admitting
/// requests as `access` says, until `shutdown` resolves (in-flight requests
/// finish first).
pub async fn serve_http(
    archive: Arc<Archive>,
    listener: tokio::net::TcpListener,
    access: HttpAccess,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager};
    let addr = listener.local_addr().map_err(|error| ServeError::Io { what: "listener address".into(), error })?;
    access.check_bind(addr)?;
    let ct = tokio_util::sync::CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(ct.child_token());
    if access.has_token() {
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(move || Ok(RecallServer::new(archive.clone())), LocalSessionManager::default().into(), config);
    let router = axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn_with_state(access, guard));
    axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(async move {
            shutdown.await;
            ct.cancel();
        })
        .await
        .map_err(|error| ServeError::Io { what: format!("serving http://{addr}/mcp"), error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd") && !ct_eq(b"abc", b"ab") && !ct_eq(b"", b"a"));
        assert_eq!(bearer("Bearer  t0k "), Some("t0k"));
        assert_eq!(bearer("Basic t0k"), None);
        assert!(HttpAccess::token(" \n").is_err());
        assert!(format!("{:?}", HttpAccess::token("s3cret\n").unwrap()).contains("***"));
    }

    #[test]
    fn non_loopback_needs_a_token() {
        let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
        assert!(HttpAccess::loopback().check_bind(any).is_err());
        assert!(HttpAccess::loopback().check_bind("127.0.0.1:0".parse().unwrap()).is_ok());
        assert!(HttpAccess::token("t").unwrap().check_bind(any).is_ok());
        assert!(loopback("::ffff:127.0.0.1".parse().unwrap()) && !loopback("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn bodies_are_checked() {
        let code = |b: &str| check_jsonrpc(b.as_bytes()).err().map(|r| r.status());
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), None);
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        for bad in [
            "{",
            "",
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            assert_eq!(code(bad), Some(StatusCode::BAD_REQUEST), "{bad}");
        }
    }
}

#[cfg(test)]
mod peer_tests {
    use super::*;

    #[test]
    fn a_host_header_does_not_make_a_remote_peer_local() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "localhost".parse().unwrap());
        let open = HttpAccess::loopback();
        assert_eq!(open.admit("192.0.2.7".parse().unwrap(), &h).unwrap_err().status(), StatusCode::FORBIDDEN);
        assert!(open.admit("127.0.0.1".parse().unwrap(), &h).is_ok());
        let guarded = HttpAccess::token("t0k").unwrap();
        assert_eq!(guarded.admit("127.0.0.1".parse().unwrap(), &h).unwrap_err().status(), StatusCode::UNAUTHORIZED);
        h.insert(header::AUTHORIZATION, "Bearer t0k".parse().unwrap());
        assert!(guarded.admit("192.0.2.7".parse().unwrap(), &h).is_ok());
    }
}
