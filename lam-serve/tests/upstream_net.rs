//! The upstream's network, as a deployment meets it: a TLS upstream whose
//! certificate a private CA signed (trusted only when given, `upstream_ca`),
//! and an HTTP/2 upstream that closes every connection after a few streams
//! (GOAWAY, and `REFUSED_STREAM` for streams past them) under concurrent
//! streaming requests: none may fail, none may reach it twice.
//! `scripts/test-network.sh` runs the same against nginx and a real `lam serve`.

mod support;

use axum::body::Bytes;
use axum::http::Response;
use lam_serve::ServeConfig;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::start_proxy;

/// A throwaway CA (its certificate, PEM) and a server configuration whose
/// certificate for `localhost` and `127.0.0.1` it signed, offering `h2` only.
fn private_ca() -> (String, Arc<rustls::ServerConfig>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "lam test CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap().signed_by(&key, &ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()))
        .unwrap();
    server.alpn_protocols = vec![b"h2".to_vec()];
    (ca.pem(), Arc::new(server))
}

/// What the HTTP/2 upstream counts.
#[derive(Default)]
struct Counts {
    /// Streams answered.
    answered: AtomicUsize,
    /// Streams refused (`REFUSED_STREAM`).
    refused: AtomicUsize,
    connections: AtomicUsize,
}

/// An HTTP/2 upstream over TLS that answers each request with a stream of
/// 6 SSE events, and on each connection, once it has taken `per_conn`
/// streams, starts a graceful shutdown (GOAWAY) and refuses every later
/// stream with `REFUSED_STREAM` (as a server at its `keepalive_requests`).
async fn h2_upstream(tls: Arc<rustls::ServerConfig>, per_conn: usize) -> (std::net::SocketAddr, Arc<Counts>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let c = counts.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let (acceptor, c) = (acceptor.clone(), c.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                c.connections.fetch_add(1, Ordering::Relaxed);
                let Ok(mut conn) = h2::server::handshake(tls).await else { return };
                let mut taken = 0;
                while let Some(Ok((req, mut respond))) = conn.accept().await {
                    taken += 1;
                    if taken > per_conn {
                        c.refused.fetch_add(1, Ordering::Relaxed);
                        respond.send_reset(h2::Reason::REFUSED_STREAM);
                        continue;
                    }
                    if taken == per_conn {
                        conn.graceful_shutdown();
                    }
                    tokio::spawn(answer(req, respond, c.clone()));
                }
            });
        }
    });
    (addr, counts)
}

/// Read the request's body, then stream 6 events.
async fn answer(req: axum::http::Request<h2::RecvStream>, mut respond: h2::server::SendResponse<Bytes>, counts: Arc<Counts>) {
    let mut body = req.into_body();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let head = Response::builder().status(200).header("content-type", "text/event-stream").body(()).unwrap();
    let Ok(mut send) = respond.send_response(head, false) else { return };
    for k in 0..5 {
        if send.send_data(Bytes::from(format!("data: {k}\n\n")), false).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    if send.send_data(Bytes::from_static(b"data: [DONE]\n\n"), true).is_ok() {
        counts.answered.fetch_add(1, Ordering::Relaxed);
    }
}

const STREAMED: &str = "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: [DONE]\n\n";

/// `n` requests at once through the proxy at `base` (a streaming chat
/// request, every fourth a `GET /v1/models`): the failures, as `status body`.
async fn burst(c: &reqwest::Client, base: &str, n: usize) -> Vec<String> {
    let sent = (0..n).map(|k| async move {
        let r = if k % 4 == 3 {
            c.get(format!("{base}/v1/models")).send().await
        } else {
            let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": format!("request {k}")}]});
            c.post(format!("{base}/v1/chat/completions")).json(&body).send().await
        };
        let r = r.map_err(|e| e.to_string())?;
        let status = r.status();
        let text = r.text().await.map_err(|e| e.to_string())?;
        if status == 200 && text == STREAMED { Ok(()) } else { Err(format!("{status} {text}")) }
    });
    futures_util::future::join_all(sent).await.into_iter().filter_map(Result::err).collect()
}

fn ca_file(dir: &tempfile::TempDir, pem: &str) -> std::path::PathBuf {
    let path = dir.path().join("ca.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_on_a_private_ca_is_trusted_only_when_given() {
    let (pem, tls) = private_ca();
    let (addr, _) = h2_upstream(tls, 1000).await;
    let dir = tempfile::tempdir().unwrap();
    let c = reqwest::Client::new();
    let upstream = format!("https://localhost:{}", addr.port());

    let mut run = start_proxy(ServeConfig::for_tests(&upstream));
    let r = c.get(format!("http://{}/v1/models", run.addr)).send().await.unwrap();
    assert_eq!(r.status(), 502);
    let e: Value = r.json().await.unwrap();
    let message = e["error"]["message"].as_str().unwrap();
    assert_eq!(e["error"]["type"], "lam_upstream_unreachable");
    assert!(message.contains("UnknownIssuer") && message.contains("--upstream-ca FILE") && message.contains("SSL_CERT_FILE"), "{message}");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();

    let mut run = start_proxy(ServeConfig { upstream_ca: vec![ca_file(&dir, &pem)], ..ServeConfig::for_tests(&upstream) });
    assert_eq!(burst(&c, &format!("http://{}", run.addr), 4).await, Vec::<String>::new());
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_upstream_ca_file_stops_the_proxy_before_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let bad = ca_file(&dir, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let mut run = start_proxy(ServeConfig { upstream_ca: vec![bad.clone()], ..ServeConfig::for_tests("https://localhost:9") });
    let e = run.done.await.unwrap().unwrap_err().to_string();
    assert!(e.contains(&format!("--upstream-ca {}: no certificate in it", bad.display())), "{e}");
    drop(run.stop.take());
    assert!(lam_serve::read_upstream_ca(&dir.path().join("missing.pem")).is_err());
}

/// The upstream ends each connection after 5 streams (GOAWAY, then
/// `REFUSED_STREAM`) while 20 requests stream at once, three times over:
/// every request is answered whole, each refused one sent again on a new
/// connection, and the upstream answered each request once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_upstream_s_goaway_fails_no_request() {
    let (pem, tls) = private_ca();
    let (addr, counts) = h2_upstream(tls, 5).await;
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("https://localhost:{}", addr.port());
    let mut run = start_proxy(ServeConfig { upstream_ca: vec![ca_file(&dir, &pem)], ..ServeConfig::for_tests(&upstream) });
    let (c, base) = (reqwest::Client::new(), format!("http://{}", run.addr));
    let mut failed = Vec::new();
    for _ in 0..3 {
        failed.extend(burst(&c, &base, 20).await);
    }
    let st: Value = c.get(format!("{base}/lam/stats")).send().await.unwrap().json().await.unwrap();
    let (answered, refused) = (counts.answered.load(Ordering::Relaxed), counts.refused.load(Ordering::Relaxed));
    eprintln!(
        "60 requests: {} failed; upstream: {answered} answered, {refused} refused, {} connections; lam: {} sent again",
        failed.len(),
        counts.connections.load(Ordering::Relaxed),
        st["upstream_retries"]
    );
    assert!(failed.is_empty(), "every request answered whole; {} failed, the first: {:?}", failed.len(), failed.first());
    assert_eq!(answered, 60, "each request answered once");
    assert!(st["upstream_retries"].as_u64() > Some(0), "the upstream refused some: {st}");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}
