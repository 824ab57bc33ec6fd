//! The way through an HTTP proxy: a `CONNECT` tunnel for an `https://`
//! upstream ([`Tunnel`]), requests in absolute form for an `http://` one
//! ([`ToProxy`]), and what a proxy's refusal says ([`ProxyRefused`]: its
//! status, never a bare "unsuccessful", and for a `407` how to give it
//! credentials).

use axum::http::{HeaderMap, HeaderValue, Uri, header};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tower_service::Service;

/// Any error a connection or a request may end with.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// TLS over a connector (plain for `http://`).
pub(crate) type Tls<C> = HttpsConnector<C>;

pub(crate) type Connecting<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// A connection to the proxy (TLS to an `https://` one).
pub(crate) type ProxyIo = <Tls<HttpConnector> as Service<Uri>>::Response;

/// The largest answer head to a `CONNECT` read.
const MAX_HEAD: usize = 8 << 10;

/// A proxy, as lam names it and reaches it.
#[derive(Clone, Debug)]
pub(crate) struct Via {
    pub(crate) uri: Uri,
    /// Its `proxy-authorization` (from the userinfo of its URL).
    pub(crate) auth: Option<HeaderValue>,
    /// The variable it came from (`HTTPS_PROXY` for an `https://` upstream).
    pub(crate) var: &'static str,
}

impl Via {
    /// The proxy's URL as it may be printed: its password masked.
    pub(crate) fn shown(&self) -> String {
        lam_core::redact::url(self.uri.to_string().trim_end_matches('/'))
    }
}

/// A proxy's refusal: its answer to a `CONNECT`, or its own `407` to a
/// forwarded request.
#[derive(Debug)]
pub(crate) struct ProxyRefused {
    /// The proxy, its password masked.
    proxy: String,
    var: &'static str,
    /// `host:port` of the tunnel asked for; `None` for a forwarded request.
    tunnel: Option<String>,
    status: u16,
    reason: String,
    /// The schemes its `proxy-authenticate` asks for (`Basic`, `Negotiate`, ...).
    asks: Vec<String>,
    /// Whether lam sent it credentials.
    sent_credentials: bool,
    /// Its URL with `USER:PASSWORD@` in place of any userinfo.
    example: String,
}

impl ProxyRefused {
    /// The refusal `status reason` (with `headers`) of `via`.
    pub(crate) fn new(via: &Via, tunnel: Option<String>, (status, reason): (u16, &str), headers: &HeaderMap, sent_credentials: bool) -> Self {
        let asks = headers.get_all(header::PROXY_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()?.split_whitespace().next().map(str::to_string)).collect();
        let host = via.uri.authority().map_or("HOST:PORT", |a| a.as_str().rsplit_once('@').map_or(a.as_str(), |(_, h)| h));
        let example = format!("{}://USER:PASSWORD@{host}", via.uri.scheme_str().unwrap_or("http"));
        Self { proxy: via.shown(), var: via.var, tunnel, status, reason: reason.trim().to_string(), asks, sent_credentials, example }
    }

    /// What to do about a `407`.
    fn credentials_help(&self) -> String {
        let basic = self.asks.is_empty() || self.asks.iter().any(|a| a.eq_ignore_ascii_case("basic"));
        if !basic {
            return format!(
                "it asks for {} and lam sends only Basic credentials (from the proxy's URL in {} or ALL_PROXY): run a local proxy that speaks that scheme (cntlm, px) and point {} at it",
                self.asks.join(", "),
                self.var,
                self.var
            );
        }
        if self.sent_credentials {
            return format!("it refused the credentials lam sent (the user and password of the proxy's URL in {} or ALL_PROXY): check them", self.var);
        }
        format!("it wants credentials: give them in the proxy's URL, {}={} (percent-encode @ : / in them)", self.var, self.example)
    }
}

impl std::fmt::Display for ProxyRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the HTTP proxy {} (from {} or ALL_PROXY) answered {} {}", self.proxy, self.var, self.status, self.reason)?;
        if let Some(t) = &self.tunnel {
            write!(f, " to CONNECT {t}")?;
        }
        if self.status == 407 {
            write!(f, "; {}", self.credentials_help())
        } else {
            write!(f, "; it would not open a tunnel to the upstream: ask its administrator, or set NO_PROXY to the upstream's host to go around it")
        }
    }
}

impl std::error::Error for ProxyRefused {}

/// Connects to the proxy and asks it for a tunnel to the destination
/// (`CONNECT host:port`, with the proxy's credentials); anything but a
/// `2xx` is a [`ProxyRefused`].
#[derive(Clone)]
pub(crate) struct Tunnel {
    pub(crate) inner: Tls<HttpConnector>,
    pub(crate) via: Via,
}

impl Service<Uri> for Tunnel {
    type Response = ProxyIo;
    type Error = BoxError;
    type Future = Connecting<ProxyIo>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.inner.call(self.via.uri.clone());
        let via = self.via.clone();
        Box::pin(async move {
            let host = dst.host().ok_or("the upstream URL has no host")?;
            let port = dst.port_u16().unwrap_or(if dst.scheme_str() == Some("http") { 80 } else { 443 });
            let mut io = TokioIo::new(connecting.await?);
            let target = format!("{host}:{port}");
            let mut ask = format!("CONNECT {target} HTTP/1.1\r\nhost: {target}\r\n").into_bytes();
            if let Some(a) = &via.auth {
                ask.extend_from_slice(b"proxy-authorization: ");
                ask.extend_from_slice(a.as_bytes());
                ask.extend_from_slice(b"\r\n");
            }
            ask.extend_from_slice(b"\r\n");
            io.write_all(&ask).await?;
            let head = read_head(&mut io).await?;
            let (status, reason, headers) = parse_head(&head).ok_or_else(|| format!("the HTTP proxy {} answered CONNECT with no HTTP status", via.shown()))?;
            if !(200..300).contains(&status) {
                return Err(ProxyRefused::new(&via, Some(target), (status, &reason), &headers, via.auth.is_some()).into());
            }
            Ok(io.into_inner())
        })
    }
}

/// The answer's head, up to its blank line (at most [`MAX_HEAD`] bytes).
async fn read_head(io: &mut TokioIo<ProxyIo>) -> Result<Vec<u8>, BoxError> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(format!("the HTTP proxy's answer to CONNECT has a head over {MAX_HEAD} bytes").into());
        }
        let n = io.read(&mut buf).await?;
        if n == 0 {
            return Err("the HTTP proxy closed the connection before answering CONNECT".into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

/// Status, reason and headers of an HTTP/1 answer head.
fn parse_head(head: &[u8]) -> Option<(u16, String, HeaderMap)> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    let reason = parts.next().unwrap_or_default().to_string();
    let mut headers = HeaderMap::new();
    for (name, value) in lines.filter_map(|l| l.split_once(':')) {
        if let (Ok(n), Ok(v)) = (name.trim().parse::<header::HeaderName>(), HeaderValue::from_str(value.trim())) {
            headers.append(n, v);
        }
    }
    Some((status, reason, headers))
}

/// Connects to the proxy whatever the destination, the connection marked
/// as a proxy's (requests go in absolute form).
#[derive(Clone)]
pub(crate) struct ToProxy {
    pub(crate) inner: Tls<HttpConnector>,
    pub(crate) proxy: Uri,
}

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

pub(crate) struct Proxied<T>(T);

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

    fn via(auth: bool) -> Via {
        let auth = auth.then(|| HeaderValue::from_static("Basic dTpw"));
        Via { uri: "http://user:secret@proxy.corp:3128".parse().unwrap(), auth, var: "HTTPS_PROXY" }
    }

    #[test]
    fn a_407_says_who_refused_and_how_to_give_credentials() {
        let (head, ..) = (b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\n\r\n", ());
        let (status, reason, headers) = parse_head(head).unwrap();
        let e = ProxyRefused::new(&via(false), Some("api.example:443".into()), (status, &reason), &headers, false).to_string();
        assert!(e.starts_with("the HTTP proxy http://user:***@proxy.corp:3128 (from HTTPS_PROXY or ALL_PROXY) answered 407 Proxy Authentication Required to CONNECT api.example:443; "), "{e}");
        assert!(e.contains("HTTPS_PROXY=http://USER:PASSWORD@proxy.corp:3128 "), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let sent = ProxyRefused::new(&via(true), None, (status, &reason), &headers, true).to_string();
        assert!(sent.contains("refused the credentials lam sent"), "{sent}");
        let mut ntlm = HeaderMap::new();
        ntlm.append(header::PROXY_AUTHENTICATE, HeaderValue::from_static("Negotiate"));
        ntlm.append(header::PROXY_AUTHENTICATE, HeaderValue::from_static("NTLM"));
        let e = ProxyRefused::new(&via(false), None, (407, "Proxy Authentication Required"), &ntlm, false).to_string();
        assert!(e.contains("it asks for Negotiate, NTLM and lam sends only Basic"), "{e}");
    }

    #[test]
    fn any_other_refusal_keeps_its_status() {
        let (status, reason, headers) = parse_head(b"HTTP/1.0 403 Forbidden\r\n\r\n").unwrap();
        let e = ProxyRefused::new(&via(false), Some("api.example:443".into()), (status, &reason), &headers, false).to_string();
        assert!(e.contains("answered 403 Forbidden to CONNECT api.example:443; it would not open a tunnel"), "{e}");
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n").is_none());
    }
}
