//! The client that sends requests upstream: hyper's pooled client, rustls
//! (ring, TLS 1.2 and 1.3, the CAs of [`super::trust`]) and HTTP/2 by ALPN.
//! It sends the headers it is given and adds only `host` (from the URL): no
//! `accept`, `user-agent` or `accept-encoding` of its own (reqwest, used
//! before, added `accept: */*` to every request without one, issue 57). A
//! redirect is passed back, never followed. Like reqwest it takes its
//! proxy from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
//! `NO_PROXY`; [`super::via`]), and a `user:password@` in the upstream's
//! URL becomes `authorization: Basic` for a request that carries none.
//!
//! A request the upstream refused without processing any of it (HTTP/2:
//! beyond the last stream of its GOAWAY, or reset with `REFUSED_STREAM`;
//! RFC 9113 section 8.7) goes once more, on a new connection of its own,
//! when its body is still in hand ([`Payload::Kept`]). Any other failure,
//! after which the upstream may have acted on it, is never sent again.

use super::trust;
use super::via::{ProxyRefused, ToProxy, Tunnel, Via};
use axum::body::{Body, Bytes, HttpBody as _};
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Uri, header};
use base64::Engine as _;
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::client::legacy::{Client as Pool, ResponseFuture};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

pub(crate) use super::via::{BoxError, Tls};

/// The upstream client (cheap to clone: the pools are shared).
#[derive(Clone)]
pub(crate) struct Client {
    route: Route,
    /// `authorization` from the upstream URL's `user:password@`.
    url_auth: Option<HeaderValue>,
}

#[derive(Clone)]
enum Route {
    Direct(Pools<Timed<Tls<HttpConnector>>>),
    /// An `http://` upstream through an HTTP proxy: requests in absolute
    /// form to the proxy, with its `proxy-authorization`.
    Forward(Pools<Timed<ToProxy>>, Via),
    /// An `https://` upstream through an HTTP proxy: TLS inside a CONNECT tunnel.
    Tunnel(Pools<Timed<Tls<Tunnel>>>),
}

/// A route's connections: the shared pool, and one that opens a new
/// connection for each request (a request sent again goes there: the
/// first stream of a connection of its own).
#[derive(Clone)]
struct Pools<C> {
    shared: Pool<C, Body>,
    fresh: Pool<C, Body>,
}

impl<C: Connect + Clone + Send + Sync + 'static> Pools<C> {
    fn new(c: C) -> Self {
        let builder = || {
            let mut b = Pool::builder(TokioExecutor::new());
            b.timer(TokioTimer::new()).pool_timer(TokioTimer::new()).pool_idle_timeout(Duration::from_secs(90));
            b
        };
        Self { shared: builder().build(c.clone()), fresh: builder().pool_max_idle_per_host(0).build(c) }
    }

    fn request(&self, fresh: bool, req: Request<Body>) -> ResponseFuture {
        if fresh { self.fresh.request(req) } else { self.shared.request(req) }
    }
}

impl Route {
    fn request(&self, fresh: bool, req: Request<Body>) -> ResponseFuture {
        match self {
            Route::Direct(p) => p.request(fresh, req),
            Route::Forward(p, _) => p.request(fresh, req),
            Route::Tunnel(p) => p.request(fresh, req),
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let route = match self.route {
            Route::Direct(_) => "direct",
            Route::Forward(..) => "through a proxy",
            Route::Tunnel(_) => "through a proxy's tunnel",
        };
        f.debug_struct("Client").field("route", &route).finish_non_exhaustive()
    }
}

/// A request's body: kept whole (it can be sent again), or streamed
/// upstream as it comes (it cannot).
#[derive(Debug)]
pub(crate) enum Payload {
    Kept(Bytes),
    Streamed(Body),
}

impl From<Body> for Payload {
    /// A body known to be empty is kept (there is nothing to hold).
    fn from(body: Body) -> Self {
        if body.size_hint().exact() == Some(0) { Payload::Kept(Bytes::new()) } else { Payload::Streamed(body) }
    }
}

impl Client {
    /// The client for `cfg.upstream`, through the environment's proxy for
    /// it if any, trusting the CAs of [`trust`] (with `cfg.upstream_ca`).
    pub(crate) fn new(cfg: &crate::config::ServeConfig) -> Result<Self, String> {
        let tls = trust::client_config(&cfg.upstream_ca)?;
        Self::with_proxies(cfg.connect_timeout, &cfg.upstream, &Matcher::from_system(), &tls)
    }

    /// The client for `upstream`, through the proxy `proxies` gives it if any.
    pub(crate) fn with_proxies(connect_timeout: Duration, upstream: &str, proxies: &Matcher, tls: &rustls::ClientConfig) -> Result<Self, String> {
        let parsed = upstream.parse::<Uri>().ok();
        let url_auth = parsed.as_ref().and_then(basic_auth);
        let timed = |inner| Timed { inner, limit: connect_timeout };
        let https = parsed.as_ref().and_then(Uri::scheme_str) == Some("https");
        let route = match parsed.as_ref().and_then(|u| proxies.intercept(u)) {
            None => Route::Direct(Pools::new(timed(secure(true, tcp(), tls)))),
            Some(p) if !matches!(p.uri().scheme_str(), Some("http" | "https")) => {
                return Err(format!(
                    "the environment's proxy for the upstream, {}, is not http:// or https:// (lam speaks no other to a proxy); set NO_PROXY to reach the upstream directly",
                    lam_core::redact::url(&p.uri().to_string())
                ));
            }
            Some(p) => {
                let via = Via { uri: p.uri().clone(), auth: p.basic_auth().cloned(), var: if https { "HTTPS_PROXY" } else { "HTTP_PROXY" } };
                let to_proxy = secure(false, tcp(), tls);
                if https {
                    Route::Tunnel(Pools::new(Timed { inner: secure(true, Tunnel { inner: to_proxy, via }, tls), limit: connect_timeout }))
                } else {
                    Route::Forward(Pools::new(Timed { inner: ToProxy { inner: to_proxy, proxy: via.uri.clone() }, limit: connect_timeout }), via)
                }
            }
        };
        Ok(Self { route, url_auth })
    }

    /// Send `method url` with exactly `headers` (plus `host`, and the
    /// URL's or the proxy's credentials where the request has none) and
    /// `body`; its length goes as `content-length` when known, else chunked.
    /// A kept body the upstream refused unprocessed goes once more, on a
    /// new connection (`on_retry` is called then). A proxy's `407` is an
    /// error ([`ProxyRefused`]), never the upstream's answer.
    pub(crate) fn send(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Payload,
        on_retry: impl FnOnce() + Send + 'static,
    ) -> impl Future<Output = Result<Response<Body>, BoxError>> + Send + 'static {
        let (client, uri) = (self.clone(), without_userinfo(url));
        async move { client.exchange(Head { method, uri: uri?, headers }, body, on_retry).await }
    }

    async fn exchange(self, mut head: Head, body: Payload, on_retry: impl FnOnce()) -> Result<Response<Body>, BoxError> {
        if let Some(a) = &self.url_auth {
            head.headers.entry(header::AUTHORIZATION).or_insert_with(|| a.clone());
        }
        if let Route::Forward(_, Via { auth: Some(a), .. }) = &self.route {
            head.headers.entry(header::PROXY_AUTHORIZATION).or_insert_with(|| a.clone());
        }
        let (body, kept) = match body {
            Payload::Kept(b) => (Body::from(b.clone()), Some(b)),
            Payload::Streamed(b) => (b, None),
        };
        let answer = match (self.route.request(false, head.request(body)).await, kept) {
            (Err(first), Some(kept)) if unprocessed(&first) => {
                on_retry();
                let again = self.route.request(true, head.request(Body::from(kept))).await;
                again.map_err(|e| Retried { first: chain(&first), source: e.into() })?
            }
            (r, _) => r?,
        };
        self.refused_by_proxy(answer.map(Body::new), head.headers.contains_key(header::PROXY_AUTHORIZATION))
    }

    /// A proxy's own `407` to a forwarded request, as an error.
    fn refused_by_proxy(&self, answer: Response<Body>, sent_credentials: bool) -> Result<Response<Body>, BoxError> {
        match &self.route {
            Route::Forward(_, via) if answer.status() == axum::http::StatusCode::PROXY_AUTHENTICATION_REQUIRED => {
                let reason = answer.status().canonical_reason().unwrap_or_default();
                Err(ProxyRefused::new(via, None, (407, reason), answer.headers(), sent_credentials).into())
            }
            _ => Ok(answer),
        }
    }
}

/// What a request sends before its body.
struct Head {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl Head {
    fn request(&self, body: Body) -> Request<Body> {
        let mut req = Request::new(body);
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// A request sent again that failed again: both failures.
#[derive(Debug)]
struct Retried {
    first: String,
    source: BoxError,
}

impl std::fmt::Display for Retried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the upstream left the request unprocessed ({}), and sent again on a new connection it failed too", self.first)
    }
}

impl StdError for Retried {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// `e` with its causes, `: `-joined (the last one is what went wrong: a
/// reset, a refusal).
pub(crate) fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut why = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        why = format!("{why}: {c}");
        cause = c.source();
    }
    why
}

/// `e` and its causes, each `io::Error`'s own inner error among them (its
/// `source` skips that one).
pub(crate) fn causes<'a>(e: &'a (dyn StdError + 'static)) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&c: &&'a (dyn StdError + 'static)| match c.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
        Some(inner) => Some(inner as &(dyn StdError + 'static)),
        None => c.source(),
    })
}

/// The first of `e` and its causes that is a `T`.
pub(crate) fn find<'a, T: StdError + 'static>(e: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    causes(e).find_map(|c| c.downcast_ref::<T>())
}

/// Whether the upstream refused the request before processing any of it:
/// an HTTP/2 stream beyond the last one of the upstream's GOAWAY (or opened
/// after it), or one it reset with `REFUSED_STREAM`. A stream the GOAWAY
/// covers and that then broke may have been processed: not this.
pub(crate) fn unprocessed(e: &(dyn StdError + 'static)) -> bool {
    find::<h2::Error>(e).is_some_and(|h| h.is_remote() && (h.is_go_away() || h.reason() == Some(h2::Reason::REFUSED_STREAM)))
}

/// `url` without a `user:password@` (it goes as `authorization`, never in
/// the request line, `host` or `:authority`).
fn without_userinfo(url: &str) -> Result<Uri, BoxError> {
    let uri: Uri = url.parse().map_err(|e| format!("the upstream URL is not valid: {e}"))?;
    let mut parts = uri.into_parts();
    if let Some((_, host)) = parts.authority.as_ref().and_then(|a| a.as_str().rsplit_once('@')) {
        parts.authority = Some(host.parse().map_err(|e| format!("the upstream URL is not valid: {e}"))?);
    }
    Ok(Uri::from_parts(parts)?)
}

/// `authorization: Basic` from `uri`'s `user:password@`, percent-decoded.
fn basic_auth(uri: &Uri) -> Option<HeaderValue> {
    let (userinfo, _) = uri.authority()?.as_str().rsplit_once('@')?;
    let (user, pass) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    if user.is_empty() && pass.is_none() {
        return None;
    }
    let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
    let plain = format!("{}:{}", decode(user), pass.map(decode).unwrap_or_default());
    let mut v = HeaderValue::from_str(&format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(plain))).ok()?;
    v.set_sensitive(true);
    Some(v)
}

/// TCP as reqwest set it: no Nagle delay, keepalive probes every 15 s.
fn tcp() -> HttpConnector {
    let mut c = HttpConnector::new();
    c.enforce_http(false);
    c.set_nodelay(true);
    c.set_keepalive(Some(Duration::from_secs(15)));
    c.set_keepalive_interval(Some(Duration::from_secs(15)));
    c.set_keepalive_retries(Some(3));
    c
}

/// TLS with `tls` over `inner` for `https://` (plain for `http://`); ALPN
/// offers HTTP/2 then HTTP/1.1 (`h2`), or HTTP/1.1 alone (to a proxy).
fn secure<C>(h2: bool, inner: C, tls: &rustls::ClientConfig) -> Tls<C> {
    let b = HttpsConnectorBuilder::new().with_tls_config(tls.clone()).https_or_http();
    if h2 { b.enable_all_versions().wrap_connector(inner) } else { b.enable_http1().wrap_connector(inner) }
}

/// A connector whose whole connection (TCP, proxy tunnel, TLS) must be
/// made within `limit`; past it, an `io::ErrorKind::TimedOut` error.
#[derive(Clone)]
struct Timed<C> {
    inner: C,
    limit: Duration,
}

impl<C> Service<Uri> for Timed<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = super::via::Connecting<C::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let (connecting, limit) = (self.inner.call(dst), self.limit);
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(r) => r.map_err(Into::into),
                Err(_) => {
                    Err(io::Error::new(io::ErrorKind::TimedOut, format!("no connection within {} s (--upstream-connect-timeout-s)", limit.as_secs_f64()))
                        .into())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn tls() -> rustls::ClientConfig {
        trust::client_config(&[]).unwrap()
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s).to_ascii_lowercase()
    }

    /// A one-request proxy: the head it got (lowercase), answered with `reply`.
    async fn fake_proxy(reply: &'static str) -> (std::net::SocketAddr, tokio::sync::oneshot::Receiver<String>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let (mut head, mut b) = (Vec::new(), [0u8; 1]);
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).await.unwrap() == 1 {
                head.push(b[0]);
            }
            let _ = tx.send(String::from_utf8_lossy(&head).to_ascii_lowercase());
            s.write_all(reply.as_bytes()).await.unwrap();
            let _ = s.shutdown().await;
        });
        (addr, rx)
    }

    #[tokio::test]
    async fn an_http_upstream_goes_through_the_environment_s_proxy_in_absolute_form() {
        let (proxy, head) = fake_proxy("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
        let proxies = Matcher::builder().http(format!("http://pu:pp@{proxy}")).build();
        let upstream = "http://u:p%40ss@upstream.invalid:8080/api";
        let c = Client::with_proxies(Duration::from_secs(5), upstream, &proxies, &tls()).unwrap();
        let r = c.send(Method::GET, &format!("{upstream}/v1/models?x=1"), HeaderMap::new(), Payload::Kept(Bytes::new()), || ()).await.unwrap();
        assert_eq!(r.status(), 200);
        let head = head.await.unwrap();
        assert!(head.starts_with("get http://upstream.invalid:8080/api/v1/models?x=1 http/1.1\r\n"), "{head}");
        assert!(head.contains("\r\nhost: upstream.invalid:8080\r\n"), "{head}");
        assert!(head.contains(&format!("\r\nproxy-authorization: basic {}\r\n", b64("pu:pp"))), "{head}");
        assert!(head.contains(&format!("\r\nauthorization: basic {}\r\n", b64("u:p@ss"))), "the URL's credentials, decoded: {head}");
        assert!(!head.contains("accept") && !head.contains("user-agent"), "{head}");
    }

    #[tokio::test]
    async fn an_https_upstream_goes_through_a_connect_tunnel() {
        let (proxy, head) = fake_proxy("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n").await;
        let proxies = Matcher::builder().https(format!("http://pu:pp@{proxy}")).build();
        let c = Client::with_proxies(Duration::from_secs(5), "https://upstream.invalid", &proxies, &tls()).unwrap();
        let sent = c.send(Method::POST, "https://upstream.invalid/v1/messages", HeaderMap::new(), Payload::Kept(Bytes::new()), || ()).await;
        let e = sent.expect_err("the proxy refused the tunnel");
        let refused = find::<ProxyRefused>(&*e).map(ToString::to_string).unwrap_or_else(|| chain(&*e));
        assert!(
            refused
                .starts_with(&format!("the HTTP proxy http://{proxy} (from HTTPS_PROXY or ALL_PROXY) answered 403 Forbidden to CONNECT upstream.invalid:443")),
            "{refused}"
        );
        let head = head.await.unwrap();
        assert!(head.starts_with("connect upstream.invalid:443 http/1.1\r\n"), "{head}");
        assert!(head.contains(&format!("\r\nproxy-authorization: basic {}\r\n", b64("pu:pp"))), "{head}");
    }

    /// A proxy's `407`, to a tunnel or to a forwarded request, is an error
    /// naming the proxy and its status, never the upstream's answer.
    #[tokio::test]
    async fn a_proxy_s_407_is_an_error_naming_it() {
        const ASK: &str = "HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm=\"corp\"\r\ncontent-length: 0\r\n\r\n";
        for upstream in ["https://upstream.invalid", "http://upstream.invalid"] {
            let (proxy, head) = fake_proxy(ASK).await;
            let proxies = Matcher::builder().all(format!("http://{proxy}")).build();
            let c = Client::with_proxies(Duration::from_secs(5), upstream, &proxies, &tls()).unwrap();
            let e = c.send(Method::POST, &format!("{upstream}/v1/messages"), HeaderMap::new(), Payload::Kept(Bytes::new()), || ()).await.unwrap_err();
            let refused = find::<ProxyRefused>(&*e).map(ToString::to_string).unwrap_or_else(|| chain(&*e));
            let var = if upstream.starts_with("https") { "HTTPS_PROXY" } else { "HTTP_PROXY" };
            assert!(
                refused.starts_with(&format!("the HTTP proxy http://{proxy} (from {var} or ALL_PROXY) answered 407 Proxy Authentication Required")),
                "{refused}"
            );
            assert!(refused.contains(&format!("{var}=http://USER:PASSWORD@{proxy} ")), "{refused}");
            head.await.unwrap();
        }
    }

    /// An `https://` upstream: TLS with its name (SNI), offering HTTP/2 and HTTP/1.1 (ALPN).
    #[tokio::test]
    async fn an_https_upstream_is_offered_http2_over_tls() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let hello = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut b = vec![0u8; 4096];
            let n = s.read(&mut b).await.unwrap();
            b.truncate(n);
            b
        });
        let upstream = format!("https://localhost:{port}");
        let c = Client::with_proxies(Duration::from_secs(5), &upstream, &Matcher::builder().build(), &tls()).unwrap();
        let sent = tokio::time::timeout(
            Duration::from_secs(5),
            c.send(Method::GET, &format!("{upstream}/v1/models"), HeaderMap::new(), Payload::Kept(Bytes::new()), || ()),
        );
        let _ = sent.await;
        let hello = hello.await.unwrap();
        let has = |needle: &[u8]| hello.windows(needle.len()).any(|w| w == needle);
        assert_eq!(hello.first(), Some(&0x16), "a TLS handshake");
        assert!(has(b"\x02h2\x08http/1.1"), "ALPN h2, http/1.1");
        assert!(has(b"localhost"), "SNI");
    }

    #[test]
    fn no_proxy_goes_direct_and_a_socks_proxy_is_refused() {
        let t = Duration::from_secs(1);
        let socks = Matcher::builder().all("socks5://127.0.0.1:1080").build();
        let e = Client::with_proxies(t, "https://api.example", &socks, &tls()).unwrap_err();
        assert!(e.contains("socks5://127.0.0.1:1080"), "{e}");
        let bypassed = Matcher::builder().all("http://127.0.0.1:3128").no("api.example").build();
        assert!(format!("{:?}", Client::with_proxies(t, "https://api.example", &bypassed, &tls()).unwrap()).contains("direct"));
        assert!(format!("{:?}", Client::with_proxies(t, "https://other.example", &bypassed, &tls()).unwrap()).contains("tunnel"));
    }

    #[tokio::test]
    async fn a_connection_not_made_in_time_is_a_timeout() {
        #[derive(Clone)]
        struct Never;
        impl Service<Uri> for Never {
            type Response = ();
            type Error = io::Error;
            type Future = std::future::Pending<io::Result<()>>;
            fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn call(&mut self, _: Uri) -> Self::Future {
                std::future::pending()
            }
        }
        let e = Timed { inner: Never, limit: Duration::from_millis(50) }.call(Uri::from_static("http://x")).await.unwrap_err();
        assert_eq!(e.downcast_ref::<io::Error>().map(io::Error::kind), Some(io::ErrorKind::TimedOut), "{e}");
    }
}
