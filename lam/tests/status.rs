//! The savings in view while the agent works: the status line `lam run`
//! registers (a fake `claude` runs its `--settings` command, a fake `codex`
//! asks its `lam_status` MCP provider), `lam top --once` against `lam
//! serve`, and the receipt ending each `--log` line.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};

/// Sends 3 growing requests (the same test log read twice: the second is
/// compacted) with the agent's own session id, then shows lam's status
/// line as the agent would: Claude Code runs the `statusLine` command of
/// its `--settings` with a JSON on stdin; Codex asks the provider named by
/// `tui.status_line_provider`. Records the lines.
const FAKE: &str = r#"#!/usr/bin/env python3
import json, os, subprocess, sys, urllib.request
name = os.path.basename(sys.argv[0])
log = "".join("tests/test_mod_%d.py::test_case_%d PASSED [%d%%]\n" % (i, i, i) for i in range(60))
def claude(n):
    msgs = [{"role": "user", "content": "Fix the failing test."}]
    for k in range(n):
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_%d" % k, "name": "Bash", "input": {"command": "pytest -q"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_%d" % k, "content": log}]})
    return "/v1/messages", {"model": "m", "max_tokens": 9, "system": "You are Claude Code.", "messages": msgs,
        "metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "sess-A"})}}
def codex(n):
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]}]
    for k in range(n):
        items.append({"type": "function_call", "call_id": "c%d" % k, "name": "shell", "arguments": "{\"command\":[\"pytest\"]}"})
        items.append({"type": "function_call_output", "call_id": "c%d" % k, "output": log})
    return "/responses", {"model": "m", "instructions": "You are Codex.", "input": items, "prompt_cache_key": "thread-B"}
base = os.environ["ANTHROPIC_BASE_URL"] if name == "claude" else os.environ["OPENAI_BASE_URL"]
for n in range(3):
    path, body = (claude if name == "claude" else codex)(n)
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()
rec = {}
if name == "claude":
    command = json.loads(sys.argv[sys.argv.index("--settings") + 1])["statusLine"]["command"]
    for who in ["sess-A", "someone-else"]:
        got = subprocess.run(["sh", "-c", command], input=json.dumps({"session_id": who, "cwd": "/x"}), capture_output=True, text=True, timeout=10)
        rec[who] = got.stdout
else:
    conf = dict(sys.argv[i + 1].split("=", 1) for i, a in enumerate(sys.argv) if a == "-c")
    assert conf["tui.status_line_provider"] == '{server="lam_status",tool="status"}', conf
    assert conf["features.tui_extensions_statusline"] == "true"
    cmd = [json.loads(conf["mcp_servers.lam_status.command"])] + json.loads(conf["mcp_servers.lam_status.args"])
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    def ask(i, method, params):
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n"); p.stdin.flush()
        return json.loads(p.stdout.readline())["result"]
    ask(1, "initialize", {"protocolVersion": "2025-06-18"})
    uri = ask(2, "tools/list", {})["tools"][0]["_meta"]["openai/ui"]["entrypoints"][0]["resourceUri"]
    for i, who in enumerate(["thread-B", "someone-else"]):
        state = {"com.openai/codex-statusline-state": {"thread": {"id": who}}}
        text = ask(3 + i, "resources/read", {"uri": uri, "_meta": state})["contents"][0]["text"]
        rec[who] = json.loads(text)["children"][0]
    p.stdin.close(); p.wait()
json.dump(rec, open(os.environ["FAKE_RECORD"], "w"))
"#;

/// A loopback upstream answering every request with a fixed JSON 200.
fn upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            std::thread::spawn(move || answer(conn));
        }
    });
    url
}

fn answer(conn: TcpStream) {
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            match h.trim_end().split_once(':') {
                Some((k, v)) if k.eq_ignore_ascii_case("content-length") => len = v.trim().parse().unwrap(),
                Some(_) => {}
                None => break,
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        let reply =
            br#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":1,"output_tokens":1}}"#;
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", reply.len());
        w.write_all(head.as_bytes()).and_then(|()| w.write_all(reply)).unwrap();
    }
}

/// `lam_status`'s rule for a token count.
fn short(n: u64) -> String {
    match n as f64 {
        x if x >= 1e4 => format!("{:.1}k", x / 1e3),
        x if x >= 1e3 => format!("{:.2}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// The total's `tokens IN -> OUT` from `lam run`'s summary.
fn summary_tokens(err: &str) -> (u64, u64) {
    let line = err.lines().find(|l| l.starts_with("lam run: total:")).expect(err);
    let at = line.find("tool-result tokens ").unwrap() + "tool-result tokens ".len();
    let mut w = line[at..].split_whitespace();
    (w.next().unwrap().parse().unwrap(), w.nth(1).unwrap().parse().unwrap())
}

fn run_agent(name: &str) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join(name);
    std::fs::write(&agent, FAKE).unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["run", "--encoder", "hashing", "--no-cache", "--upstream", &upstream(), "--"])
        .arg(&agent)
        .current_dir(dir.path())
        .env("LAM_HOME", dir.path().join("home"))
        .env("FAKE_RECORD", dir.path().join("record.json"))
        .env_remove("LAM_STATUS_LINE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let rec = std::fs::read_to_string(dir.path().join("record.json")).unwrap_or_else(|e| panic!("{e}: {err}"));
    (serde_json::from_str(&rec).unwrap(), err)
}

/// The line names the conversation's figures (as the summary counts them),
/// the default budget's figures, and the bill below direct; another session id gets
/// the run's total, said so.
fn check(rec: &serde_json::Value, err: &str, mine: &str) {
    let (tin, tout) = summary_tokens(err);
    assert!(tout < tin, "the second read was compacted: {err}");
    let line = rec[mine].as_str().unwrap().trim_end();
    assert!(line.starts_with(&format!("lam: tool output {} -> {} tokens (-", short(tin), short(tout))), "{line}\n{err}");
    assert!(line.contains(" | budget 100.0k: peak "), "the default budget, 100,000: {line}");
    let bill = line.split(" | input bill ").nth(1).unwrap_or_else(|| panic!("{line}"));
    assert!(bill.contains(" direct (-"), "lam's bill is below direct: {line}");
    let other = rec["someone-else"].as_str().unwrap();
    assert!(other.starts_with("lam (all conversations): tool output"), "{other}");
}

#[test]
fn claude_s_status_line_shows_lam_s_figures_for_its_session() {
    let (rec, err) = run_agent("claude");
    check(&rec, &err, "sess-A");
}

#[test]
fn codex_s_status_line_provider_shows_lam_s_figures_for_its_thread() {
    let (rec, err) = run_agent("codex");
    check(&rec, &err, "thread-B");
}

/// `lam serve` on a free port, with `--log`: its address and its stderr lines.
fn serve(store: &Path, up: &str) -> (std::process::Child, String, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["serve", "--encoder", "hashing", "--no-cache", "--log", "--listen", "127.0.0.1:0", "--upstream", up, "--store"])
        .arg(store)
        .env_remove("LAM_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr = loop {
        let line = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("lam serve started");
        if let Some((_, rest)) = line.split_once("listening on http://") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    (child, addr, rx)
}

fn post(addr: &str, body: &serde_json::Value) {
    let body = body.to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn lam_top_once_lists_the_conversations_and_the_log_ends_with_a_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, lines) = serve(&dir.path().join("store"), &upstream());
    let log: String = (0..60).map(|i| format!("tests/test_mod_{i}.py::test_case_{i} PASSED\n")).collect();
    let chat = |n: usize| {
        let mut msgs = vec![serde_json::json!({"role": "user", "content": "fix it"})];
        for k in 0..n {
            let call = serde_json::json!([{"id": format!("c{k}"), "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"pytest\"}"}}]);
            msgs.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": call}));
            msgs.push(serde_json::json!({"role": "tool", "tool_call_id": format!("c{k}"), "content": log}));
        }
        serde_json::json!({"model": "m", "messages": msgs})
    };
    post(&addr, &chat(1));
    post(&addr, &chat(2));
    let top = Command::new(env!("CARGO_BIN_EXE_lam")).args(["top", "--once", "--proxy", &format!("http://{addr}")]).env_remove("LAM_TOKEN").output().unwrap();
    let table = String::from_utf8_lossy(&top.stdout).into_owned();
    let _ = child.kill();
    let _ = child.wait();
    assert!(top.status.success(), "{table}{}", String::from_utf8_lossy(&top.stderr));
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 3, "header, one conversation, the total: {table}");
    assert!(rows[0].contains("tokens in -> out") && rows[0].contains("input bill vs direct"), "{table}");
    let cells: Vec<&str> = rows[1].split_whitespace().collect();
    assert_eq!((cells[0], cells[2], cells[3]), ("1", "2", "2"), "conversation 1: 2 requests, 2 observations: {table}");
    assert!(rows[1].contains(" vs ") && rows[1].contains("(-"), "the bill below direct: {table}");
    assert!(rows[2].trim_start().starts_with("all"), "{table}");
    let logged: Vec<String> = lines.try_iter().filter(|l| l.starts_with("lam serve: POST")).collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    for l in &logged {
        assert!(l.contains(" in ") && l.contains(" ms (headers sent); input would have cost "), "{l}");
        assert!(l.contains(", saved ") && l.ends_with("plain-input tokens"), "{l}");
    }
    assert!(logged[1].contains(", saved ") && !logged[1].contains("saved 0 (0.0%)"), "the second request saved: {}", logged[1]);
    let bad = Command::new(env!("CARGO_BIN_EXE_lam")).args(["top", "--once", "--proxy", "http://127.0.0.1:9"]).output().unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("lam top: reading http://127.0.0.1:9/lam/stats"));
}
