//! `lam serve` as a process (issue #28): the upstream's password never on
//! standard error nor in an answer; SIGTERM drains within `--drain-timeout-s`
//! even while the upstream hangs, a second signal stops at once, and the
//! store is flushed either way; a non-loopback `--listen` needs a token.

use lam_core::ObsStore;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PLANTED: &str = "pl4nted-S3CRET";

/// A running `lam serve`: its address and everything it wrote on standard error.
struct Serve {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

fn start(args: &[&str], token: Option<&str>) -> Result<Serve, String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lam"));
    cmd.arg("serve").args(["--encoder", "hashing", "--no-cache", "--log"]).args(args);
    cmd.env_remove("LAM_TOKEN").stdout(Stdio::null()).stderr(Stdio::piped());
    if let Some(t) = token {
        cmd.env("LAM_TOKEN", t);
    }
    let mut child = cmd.spawn().unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = mpsc::channel();
    let (pipe, all) = (child.stderr.take().unwrap(), stderr.clone());
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if let Some(rest) = line.split_once("listening on http://").map(|(_, r)| r) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or_default().to_string());
            }
            all.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(a) => Ok(Serve { child, addr: a.parse().unwrap(), stderr }),
        Err(_) => {
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(100));
            Err(stderr.lock().unwrap().clone())
        }
    }
}

impl Serve {
    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap();
        assert!(ok.success());
    }

    /// The exit status, or `None` when still running after `within`.
    fn exited(&mut self, within: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(s) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(100)); // the reader thread catches up
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 request: status and body (as text).
fn http(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string())
}

/// An upstream that answers `200 {}` to every request except those to a
/// path holding `hang`: those it never answers (it says so on the channel).
fn upstream() -> (SocketAddr, mpsc::Receiver<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming().map_while(Result::ok) {
            let tx = tx.clone();
            std::thread::spawn(move || serve_one(s, &tx));
        }
    });
    (addr, rx)
}

fn serve_one(s: TcpStream, hung: &mpsc::Sender<()>) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut s = s;
    loop {
        let (mut len, mut line, mut first) = (0usize, String::new(), String::new());
        while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if first.is_empty() {
                first.clone_from(&line);
            }
            line.clear();
        }
        if line.is_empty() {
            return;
        }
        if first.contains("hang") {
            let _ = hung.send(());
            std::thread::sleep(Duration::from_secs(3600));
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}");
    }
}

fn chat(logs: usize) -> String {
    let log: String = (0..80).map(|i| format!("tests/test_mod.py::test_case_{i} PASSED\n")).collect();
    let mut m = vec![serde_json::json!({"role": "user", "content": "fix it"})];
    for k in 0..logs {
        let id = format!("call_{k}");
        m.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\":\"pytest -k {k}\"}}")}}]}));
        m.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": format!("run {k}\n{log}")}));
    }
    serde_json::json!({"model": "m", "messages": m}).to_string()
}

/// Start a request the upstream never answers, and wait until it holds it.
fn hang(addr: SocketAddr, hung: &mpsc::Receiver<()>) {
    std::thread::spawn(move || http(addr, "GET", "/v1/hang", "", ""));
    hung.recv_timeout(Duration::from_secs(30)).expect("the upstream holds the request");
}

#[test]
fn the_upstream_password_is_never_printed_nor_returned() {
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let up = format!("http://user:{PLANTED}@{dead}/v?password={PLANTED}");
    let store = dir.path().join("s");
    let mut s = start(&["--upstream", &up, "--store", store.to_str().unwrap(), "--listen", "127.0.0.1:0"], None).unwrap();
    for (method, path) in [("POST", "/v1/chat/completions"), ("GET", "/v1/models")] {
        let (status, body) = http(s.addr, method, path, "", &chat(1));
        assert_eq!(status, 502, "{body}");
        assert!(!body.contains(PLANTED) && body.contains("user:***@"), "{body}");
    }
    s.signal("-TERM");
    assert!(s.exited(Duration::from_secs(20)).expect("exits").success());
    let err = s.stderr();
    assert!(err.contains("user:***@") && err.contains("-> 502"), "{err}");
    assert!(!err.contains(PLANTED), "standard error shows the password:\n{err}");
    // A bad --upstream is reported without it too.
    let out = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["serve", "--store", store.to_str().unwrap(), "--upstream", &format!("ftp://u:{PLANTED}@h")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains(PLANTED));
}

#[test]
fn sigterm_drains_within_the_deadline_and_flushes_the_store() {
    let (up, hung) = upstream();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let args = ["--upstream", &format!("http://{up}"), "--store", store.to_str().unwrap(), "--listen", "127.0.0.1:0", "--drain-timeout-s", "2"];
    let mut s = start(&args, None).unwrap();
    let (status, body) = http(s.addr, "POST", "/v1/chat/completions", "", &chat(2));
    assert_eq!(status, 200, "{body}");
    hang(s.addr, &hung);
    let t = Instant::now();
    s.signal("-TERM");
    let exit = s.exited(Duration::from_secs(15)).expect("exits by the drain deadline");
    let took = t.elapsed();
    assert_eq!(exit.code(), Some(1), "requests were cut: not a clean exit\n{}", s.stderr());
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(10), "{took:?}");
    assert!(s.stderr().contains("drain deadline"), "{}", s.stderr());
    // The archive is readable after exit.
    let spec = arc_store::StoreSpec::parse(store.to_str().unwrap()).unwrap();
    let st = arc_store::open(&spec, arc_store::Access::ReadOnly).unwrap();
    let sessions = st.sessions().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let ids = st.ids(&sessions[0]).unwrap();
    assert_eq!(ids.len(), 2, "both tool results archived: {ids:?}");
    let first = st.get(&sessions[0], &ids[0]).unwrap().unwrap();
    assert!(String::from_utf8(first).unwrap().starts_with("run 0\ntests/test_mod.py::test_case_0 PASSED"));
}

#[test]
fn a_second_signal_stops_at_once() {
    let (up, hung) = upstream();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let args = ["--upstream", &format!("http://{up}"), "--store", store.to_str().unwrap(), "--listen", "127.0.0.1:0", "--drain-timeout-s", "600"];
    let mut s = start(&args, None).unwrap();
    assert_eq!(http(s.addr, "POST", "/v1/chat/completions", "", &chat(1)).0, 200);
    hang(s.addr, &hung);
    s.signal("-TERM");
    assert!(s.exited(Duration::from_millis(700)).is_none(), "draining: the hung request holds it");
    assert!(TcpStream::connect(s.addr).is_err(), "no longer accepting");
    let t = Instant::now();
    s.signal("-INT");
    assert_eq!(s.exited(Duration::from_secs(5)).expect("exits at once").code(), Some(1), "requests were cut");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(s.stderr().contains("second signal") && s.stderr().contains("the store was flushed"), "{}", s.stderr());
    let spec = arc_store::StoreSpec::parse(store.to_str().unwrap()).unwrap();
    let st = arc_store::open(&spec, arc_store::Access::ReadOnly).unwrap();
    let sessions = st.sessions().unwrap();
    assert_eq!(st.ids(&sessions[0]).unwrap().len(), 1, "flushed");
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let args = ["--upstream", "http://127.0.0.1:9", "--store", store.to_str().unwrap(), "--listen", "0.0.0.0:0"];
    let err = start(&args, None).err().expect("refused without a token");
    assert!(err.contains("not a loopback address") && err.contains("LAM_TOKEN"), "{err}");
    let mut s = start(&args, Some("tok-123")).unwrap();
    let local: SocketAddr = format!("127.0.0.1:{}", s.addr.port()).parse().unwrap();
    let (status, body) = http(local, "GET", "/lam/stats", "", "");
    assert_eq!(status, 401, "{body}");
    assert_eq!(http(local, "GET", "/lam/stats", "x-lam-token: tok-123\r\n", "").0, 200);
    s.signal("-TERM");
    assert!(s.exited(Duration::from_secs(20)).expect("exits").success());
    assert!(!s.stderr().contains("tok-123"));
}

/// `--upstream .../v1` doubles `/v1` (clients send `/v1/...`): a warning says
/// so; a store URL's password never reaches standard error.
#[test]
fn a_v1_upstream_warns_and_store_passwords_stay_hidden() {
    let out = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["serve", "--encoder", "hashing", "--no-cache", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9/v1"])
        .args(["--store", &format!("lam:{PLANTED}@nowhere.invalid/x")])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an unusable store fails: {err}");
    assert!(err.contains("--upstream ends in /v1") && err.contains("http://127.0.0.1:9"), "{err}");
    assert!(!err.contains(PLANTED), "{err}");
}
