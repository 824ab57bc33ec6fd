//! The client that sends requests upstream: hyper's pooled client, rustls
//! (ring, the webpki roots, TLS 1.2 and 1.3) and HTTP/2 by ALPN. It sends
//! the headers it is given and adds only `host` (from the URL): no
//! `accept`, `user-agent` or `accept-encoding` of its own (reqwest, used
//! before, added `accept: */*` to every request without one, issue 57). A
//! redirect is passed back, never followed. Like reqwest it takes its
//! proxy from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
//! `NO_PROXY`), and a `user:password@` in the upstream's URL becomes
//! `authorization: Basic` for a request that carries none.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Uri, header};
use base64::Engine as _;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connect, Connected, Connection, HttpConnector};
use hyper_util::client::legacy::{Client as Pool, ResponseFuture};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Tls<C> = HttpsConnector<C>;

/// The upstream client (cheap to clone: the pool is shared).
#[derive(Clone)]
pub(crate) struct Client {
    route: Route,
    /// `authorization` from the upstream URL's `user:password@`.
    url_auth: Option<HeaderValue>,
}

#[derive(Clone)]
enum Route {
    Direct(Pool<Timed<Tls<HttpConnector>>, Body>),
    /// An `http://` upstream through an HTTP proxy: requests in absolute
    /// form to the proxy, with its `proxy-authorization`.
    Forward(Pool<Timed<ToProxy>, Body>, Option<HeaderValue>),
    /// An `https://` upstream through an HTTP proxy: TLS inside a CONNECT tunnel.
    Tunnel(Pool<Timed<Tls<Tunnel<Tls<HttpConnector>>>>, Body>),
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

impl Client {
    /// The client for `upstream`, through the environment's proxy for it if any.
    pub(crate) fn new(connect_timeout: Duration, upstream: &str) -> Result<Self, String> {
        Self::with_proxies(connect_timeout, upstream, &Matcher::from_system())
    }

    /// The client for `upstream`, through the proxy `proxies` gives it if any.
    pub(crate) fn with_proxies(connect_timeout: Duration, upstream: &str, proxies: &Matcher) -> Result<Self, String> {
        let parsed = upstream.parse::<Uri>().ok();
        let url_auth = parsed.as_ref().and_then(basic_auth);
        let timed = |inner| Timed { inner, limit: connect_timeout };
        let route = match parsed.as_ref().and_then(|u| proxies.intercept(u)) {
            None => Route::Direct(pool(timed(tls(true, tcp())?))),
            Some(p) if !matches!(p.uri().scheme_str(), Some("http" | "https")) => {
                return Err(format!(
                    "the environment's proxy for the upstream, {}, is not http:// or https:// (lam speaks no other to a proxy); set NO_PROXY to reach the upstream directly",
                    lam_core::redact::url(&p.uri().to_string())
                ));
            }
            Some(p) if parsed.as_ref().and_then(Uri::scheme_str) == Some("https") => {
                let mut tunnel = Tunnel::new(p.uri().clone(), tls(false, tcp())?);
                if let Some(auth) = p.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                Route::Tunnel(pool(Timed { inner: tls(true, tunnel)?, limit: connect_timeout }))
            }
            Some(p) => Route::Forward(
                pool(Timed { inner: ToProxy { inner: tls(false, tcp())?, proxy: p.uri().clone() }, limit: connect_timeout }),
                p.basic_auth().cloned(),
            ),
        };
        Ok(Self { route, url_auth })
    }

    /// Send `method url` with exactly `headers` (plus `host`, and the
    /// URL's or the proxy's credentials where the request has none) and
    /// `body`; its length goes as `content-length` when known, else chunked.
    pub(crate) fn send(
        &self,
        method: Method,
        url: &str,
        mut headers: HeaderMap,
        body: Body,
    ) -> impl Future<Output = Result<Response<Body>, BoxError>> + Send + 'static {
        let sent = without_userinfo(url).map(|uri| {
            if let Some(a) = &self.url_auth {
                headers.entry(header::AUTHORIZATION).or_insert_with(|| a.clone());
            }
            if let Route::Forward(_, Some(a)) = &self.route {
                headers.entry(header::PROXY_AUTHORIZATION).or_insert_with(|| a.clone());
            }
            let mut req = Request::new(body);
            *req.method_mut() = method;
            *req.uri_mut() = uri;
            *req.headers_mut() = headers;
            let sent: ResponseFuture = match &self.route {
                Route::Direct(p) => p.request(req),
                Route::Forward(p, _) => p.request(req),
                Route::Tunnel(p) => p.request(req),
            };
            sent
        });
        async move { Ok(sent?.await?.map(Body::new)) }
    }
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

/// TLS over `inner` for `https://` (plain for `http://`); ALPN offers
/// HTTP/2 then HTTP/1.1 (`h2`), or HTTP/1.1 alone (to a proxy).
fn tls<C>(h2: bool, inner: C) -> Result<Tls<C>, String> {
    let b = HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(Arc::new(rustls::crypto::ring::default_provider()))
        .map_err(|e| format!("TLS: {e}"))?
        .https_or_http();
    Ok(if h2 { b.enable_all_versions().wrap_connector(inner) } else { b.enable_http1().wrap_connector(inner) })
}

fn pool<C: Connect + Clone + Send + Sync + 'static>(c: C) -> Pool<C, Body> {
    Pool::builder(TokioExecutor::new()).timer(TokioTimer::new()).pool_timer(TokioTimer::new()).pool_idle_timeout(Duration::from_secs(90)).build(c)
}

/// A connector whose whole connection (TCP, proxy tunnel, TLS) must be
/// made within `limit`; past it, an `io::ErrorKind::TimedOut` error.
#[derive(Clone)]
struct Timed<C> {
    inner: C,
    limit: Duration,
}

type Connecting<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

impl<C> Service<Uri> for Timed<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Connecting<C::Response>;

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

/// Connects to the proxy whatever the destination, the connection marked
/// as a proxy's (requests go in absolute form).
#[derive(Clone)]
struct ToProxy {
    inner: Tls<HttpConnector>,
    proxy: Uri,
}

type ProxyIo = <Tls<HttpConnector> as Service<Uri>>::Response;

impl Service<Uri> for ToProxy {
    type Response = Proxied<ProxyIo>;
    type Error = BoxError;
    type Future = Connecting<Self::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, _dst: Uri) -> Self::Future {
        let connecting = self.inner.call(self.proxy.clone());
        Box::pin(async move { connecting.await.map(Proxied) })
    }
}

struct Proxied<T>(T);

impl<T: Connection> Connection for Proxied<T> {
    fn connected(&self) -> Connected {
        self.0.connected().proxy(true)
    }
}

impl<T: Read + Unpin> Read for Proxied<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Proxied<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        let c = Client::with_proxies(Duration::from_secs(5), upstream, &proxies).unwrap();
        let r = c.send(Method::GET, &format!("{upstream}/v1/models?x=1"), HeaderMap::new(), Body::empty()).await.unwrap();
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
        let c = Client::with_proxies(Duration::from_secs(5), "https://upstream.invalid", &proxies).unwrap();
        let sent = c.send(Method::POST, "https://upstream.invalid/v1/messages", HeaderMap::new(), Body::empty()).await;
        assert!(sent.is_err(), "the proxy refused the tunnel");
        let head = head.await.unwrap();
        assert!(head.starts_with("connect upstream.invalid:443 http/1.1\r\n"), "{head}");
        assert!(head.contains(&format!("\r\nproxy-authorization: basic {}\r\n", b64("pu:pp"))), "{head}");
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
        let c = Client::with_proxies(Duration::from_secs(5), &upstream, &Matcher::builder().build()).unwrap();
        let sent = tokio::time::timeout(Duration::from_secs(5), c.send(Method::GET, &format!("{upstream}/v1/models"), HeaderMap::new(), Body::empty()));
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
        let e = Client::with_proxies(t, "https://api.example", &socks).unwrap_err();
        assert!(e.contains("socks5://127.0.0.1:1080"), "{e}");
        let bypassed = Matcher::builder().all("http://127.0.0.1:3128").no("api.example").build();
        assert!(format!("{:?}", Client::with_proxies(t, "https://api.example", &bypassed).unwrap()).contains("direct"));
        assert!(format!("{:?}", Client::with_proxies(t, "https://other.example", &bypassed).unwrap()).contains("tunnel"));
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
