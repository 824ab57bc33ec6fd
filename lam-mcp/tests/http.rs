//! `lam mcp --http`: the bearer token, loopback-only without one, and
//! JSON-RPC errors for malformed bodies (issue #28), over raw HTTP/1.1.

use lam_core::{ObsStore, Record, SessionId};
use lam_mcp::{Archive, Config, HttpAccess, ServeError};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

const INIT: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

/// A server on a free loopback port, on its own runtime thread.
fn serve(access: HttpAccess) -> SocketAddr {
    let mut store = arc_store::MemStore::new();
    let rec = Record { index: 0, action: "cat a".into(), observation: b"hello\n".to_vec(), returncode: Some(0) };
    store.append(&SessionId::new("s"), &rec, 2).unwrap();
    let archive = Arc::new(Archive::with_store(Config::new(arc_store::StoreSpec::Memory), Box::new(store)).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            lam_mcp::serve_http(archive, l, access, std::future::pending()).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// Send a POST of `body` to /mcp with extra headers; the connection, to read the answer from.
fn send(addr: SocketAddr, headers: &[&str], body: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        req += &format!("{h}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    s
}

/// POST `body` to /mcp with extra headers; (status, response body).
fn post(addr: SocketAddr, headers: &[&str], body: &str) -> (u16, String) {
    let mut s = send(addr, headers, body);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Read the head and what follows until the server closes or pauses (SSE streams stay open).
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.windows(4).any(|w| w == b"\r\n\r\n") && (out.len() > 200 || out.ends_with(b"\n\n")) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

#[test]
fn a_token_is_required_when_given() {
    let addr = serve(HttpAccess::token("s3cret-t0ken\n").unwrap());
    let (st, body) = post(addr, &[], INIT);
    assert_eq!(st, 401, "{body}");
    assert!(body.contains("WWW-Authenticate: Bearer") || body.to_ascii_lowercase().contains("www-authenticate: bearer"), "{body}");
    assert_eq!(post(addr, &["Authorization: Bearer wrong"], INIT).0, 401);
    assert_eq!(post(addr, &["Authorization: Bearer s3cret-t0ke"], INIT).0, 401);
    let (st, body) = post(addr, &["Authorization: Bearer s3cret-t0ken"], INIT);
    assert_eq!(st, 200, "{body}");
    // With a token the Host header is not the check: another name works.
    let (st, body) = post(addr, &["Authorization: bearer s3cret-t0ken", "X-Pad: 1"], INIT);
    assert_eq!(st, 200, "{body}");
}

#[test]
fn without_a_token_loopback_serves_and_hosts_are_checked() {
    let addr = serve(HttpAccess::loopback());
    let (st, body) = post(addr, &[], INIT);
    assert_eq!(st, 200, "{body}");
}

#[test]
fn malformed_json_rpc_gets_json_rpc_errors() {
    let addr = serve(HttpAccess::loopback());
    let (st, body) = post(addr, &[], "{not json");
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("-32700"), "{body}");
    let (st, body) = post(addr, &[], r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#);
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("-32600"), "{body}");
    let (st, body) = post(addr, &[], r#"[1,2]"#);
    assert!(st == 400 && body.contains("-32600"), "{body}");
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let cfg = Config::new(arc_store::StoreSpec::Memory);
    let e = lam_mcp::run_http(cfg, "0.0.0.0:0".parse().unwrap(), HttpAccess::loopback(), |_| panic!("must not bind")).unwrap_err();
    assert!(matches!(e, ServeError::Refused(_)), "{e}");
    assert!(e.to_string().contains("token"), "{e}");
}

/// POST `body` to /mcp and read until the server closes the connection; (status, head and body).
fn post_all(addr: SocketAddr, headers: &[&str], body: &str) -> (u16, String) {
    let mut s = send(addr, headers, body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

/// Issue 57: JSON that is not one valid Request object (a batch, an `id`
/// that is an object or an array) is answered `-32600 Invalid Request` with
/// `"id": null`, not `-32700 Parse error`.
#[test]
fn a_batch_or_an_object_id_is_an_invalid_request_with_a_null_id() {
    let addr = serve(HttpAccess::loopback());
    for body in [
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        "[]",
        r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
    ] {
        let (st, text) = post_all(addr, &[], body);
        assert_eq!(st, 400, "{body}: {text}");
        let json = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{body}: {e}: {text}"));
        assert_eq!((v["error"]["code"].as_i64(), &v["id"]), (Some(-32600), &serde_json::Value::Null), "{body}: {v}");
    }
}

/// Issue 57: an unknown id of 1,000,000 characters is quoted by a short
/// prefix in the tool's error, over streamable HTTP too.
#[test]
fn a_huge_unknown_id_gets_a_small_answer_over_http() {
    let addr = serve(HttpAccess::loopback());
    let (st, head) = post_all(addr, &[], INIT);
    assert_eq!(st, 200, "{head}");
    let sid = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no session id: {head}"));
    let session = format!("Mcp-Session-Id: {sid}");
    let (st, text) = post_all(addr, &[&session], r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(st, 202, "{text}");
    let id = "a".repeat(1_000_000);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": {"id": id}}});
    let (st, text) = post_all(addr, &[&session], &call.to_string());
    assert_eq!(st, 200, "{}", &text[..text.len().min(500)]);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    assert!(body.len() < 1024, "{} bytes: {}", body.len(), &body[..body.len().min(500)]);
    assert!(body.contains("aaaaaaaa") && body.contains("in the archive") && body.contains(r#""isError":true"#), "{body}");
}
