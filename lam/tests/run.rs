//! `lam run -- AGENT`: fake `claude` and `codex` programs (Python) run
//! through the proxy against a loopback upstream stub; the base URL, the MCP
//! registration, the requests upstream, the summary, the store and the exit
//! code are checked.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

/// Records argv, the base URLs and the MCP config, then sends 3 growing
/// requests in the agent's shape (Claude Code: `/v1/messages`, Codex:
/// `/v1/responses`) and exits with code 3.
const FAKE: &str = r#"#!/usr/bin/env python3
import json, os, sys, urllib.request
name = os.path.basename(sys.argv[0])
rec = {"argv": sys.argv[1:], "anthropic": os.environ.get("ANTHROPIC_BASE_URL"), "openai": os.environ.get("OPENAI_BASE_URL")}
if "--mcp-config" in sys.argv:
    rec["mcp"] = json.load(open(sys.argv[sys.argv.index("--mcp-config") + 1]))
log = "".join("tests/test_mod_%d.py::test_case_%d PASSED [%d%%]\n" % (i, i, i) for i in range(60))
logs = [log, log if os.environ.get("FAKE_SAME") else log.replace("test_case_7 PASSED", "test_case_7 FAILED")]
eph = {"type": "ephemeral"}

def claude(n):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}]
    for k in range(n):
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_%d" % k, "name": "Bash", "input": {"command": "pytest -q"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_%d" % k, "content": logs[k]}]})
    for m in msgs[-2:]:
        m["content"][-1]["cache_control"] = eph
    return "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": False,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": eph}],
        "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "messages": msgs}

def codex(n):
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]}]
    for k in range(n):
        items.append({"type": "function_call", "call_id": "call_%d" % k, "name": "shell", "arguments": "{\"command\":[\"pytest\",\"-q\"]}"})
        items.append({"type": "function_call_output", "call_id": "call_%d" % k, "output": logs[k]})
    return "/responses", {"model": "gpt-5-codex", "instructions": "You are Codex.", "stream": False,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}], "input": items}

base = rec["anthropic"] if name == "claude" else rec["openai"]
rec["sent"] = []
for n in range(3):
    path, body = (claude if name == "claude" else codex)(n)
    data = json.dumps(body).encode()
    rec["sent"].append(len(data))
    req = urllib.request.Request(base + path, data=data, headers={"content-type": "application/json", "x-api-key": "k"})
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
        json.load(r)
if os.environ.get("FAKE_TOP"):
    import subprocess
    top = subprocess.run([os.environ["FAKE_TOP"], "top", "--once"], capture_output=True, text=True)
    rec["top"] = {"code": top.returncode, "out": top.stdout, "err": top.stderr}
json.dump(rec, open(os.environ["FAKE_RECORD"], "w"))
sys.exit(3)
"#;

/// Every request the upstream stub received: path and body.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A loopback upstream answering every request with a fixed JSON 200.
fn upstream() -> (String, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let seen = Seen::default();
    let s = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let s = s.clone();
            std::thread::spawn(move || answer(conn, &s));
        }
    });
    (url, seen)
}

/// Answer the requests of one keep-alive connection.
fn answer(conn: TcpStream, seen: &Seen) {
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
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
        seen.lock().unwrap().push((path, body));
        let reply = br#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", reply.len());
        w.write_all(head.as_bytes()).and_then(|()| w.write_all(reply)).unwrap();
    }
}

/// The fake agent `name` in `dir`.
fn fake(dir: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, FAKE).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `lam run` in `dir` with a model-free encoder, no cache, no base URLs
/// inherited, and the agents' homes (their transcripts) under `dir`.
fn lam(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lam"));
    c.args(["run", "--encoder", "hashing", "--no-cache"]).args(args).current_dir(dir);
    c.env_remove("ANTHROPIC_BASE_URL").env_remove("OPENAI_BASE_URL");
    c.env("LAM_HOME", dir.join("home")).env("FAKE_RECORD", dir.join("record.json"));
    c.env("CLAUDE_CONFIG_DIR", dir.join("claude-home")).env("CODEX_HOME", dir.join("codex-home"));
    c.envs(env.iter().copied()).output().unwrap()
}

/// The proxy address `lam run` printed.
fn proxy_url(err: &str) -> String {
    let at = err.find("proxy http://").expect(err) + "proxy ".len();
    err[at..].split_whitespace().next().unwrap().to_string()
}

/// The run `lam run` scoped its `lam mcp` to, from the line that registers it.
fn run_id(err: &str) -> String {
    let at = err.find(" --run ").expect(err) + " --run ".len();
    err[at..].split_whitespace().next().unwrap().to_string()
}

fn record(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("record.json")).unwrap()).unwrap()
}

fn exe() -> String {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_lam")).unwrap().to_string_lossy().into_owned()
}

/// The upstream got 3 requests on `path`; the third lost tokens to stubs.
fn check_upstream(seen: &Seen, path: &str, sent: &serde_json::Value) {
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "{:?}", seen.iter().map(|s| &s.0).collect::<Vec<_>>());
    assert!(seen.iter().all(|(p, _)| p == path), "{path}");
    let last = String::from_utf8_lossy(&seen[2].1);
    assert!(last.contains("[lam: "), "no stub upstream: {last}");
    assert!((seen[2].1.len() as u64) < sent[2].as_u64().unwrap());
}

/// The summary, `lam recall --list`, and the exit code.
fn check_run(out: &Output, store: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("store {store}")), "{err}");
    assert!(err.contains("total: 1 session, 3 requests, 2 observations"), "{err}");
    assert!(err.contains("% removed)"), "{err}");
    let list = Command::new(env!("CARGO_BIN_EXE_lam")).args(["recall", "--store", store, "--list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("\t2 observations"), "{list}");
    let session = list.split('\t').next().unwrap();
    assert!(err.contains(&format!("session {session} (conversation 1): 3 requests, 2 observations")), "{err}");
}

#[test]
fn claude_runs_through_the_proxy_with_lam_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let (up, seen) = upstream();
    let agent = fake(dir.path(), "claude");
    let store = dir.path().join("store").to_string_lossy().into_owned();
    let args = ["--store", &store, "--upstream", &up, "--", agent.to_str().unwrap(), "-p", "hello"];
    let out = lam(dir.path(), &[], &args);
    let err = String::from_utf8_lossy(&out.stderr);
    check_run(&out, &store);
    assert!(err.contains(&format!("-> {up} (--upstream)")), "{err}");
    let rec = record(dir.path());
    assert_eq!(rec["anthropic"], proxy_url(&err), "{err}");
    assert_eq!(rec["argv"][0], "-p");
    assert_eq!(rec["argv"][1], "hello");
    assert_eq!(rec["argv"][2], "--mcp-config");
    let run = run_id(&err);
    let want = serde_json::json!({"mcpServers": {"lam": {"command": exe(), "args": ["mcp", "--store", store, "--run", run]}}});
    assert_eq!(rec["mcp"], want);
    assert!(!Path::new(rec["argv"][3].as_str().unwrap()).exists(), "the MCP config file is removed");
    check_upstream(&seen, "/v1/messages", &rec["sent"]);
}

/// `--log-file`: the per-request lines (with their receipts) go to the
/// file, none to standard error, where a full-screen agent draws.
#[test]
fn log_lines_go_to_the_log_file() {
    let dir = tempfile::tempdir().unwrap();
    let (up, _seen) = upstream();
    let agent = fake(dir.path(), "claude");
    let (store, log) = (dir.path().join("store"), dir.path().join("run.log"));
    let args = ["--store", store.to_str().unwrap(), "--upstream", &up, "--log-file", log.to_str().unwrap(), "--", agent.to_str().unwrap(), "-p", "hi"];
    let out = lam(dir.path(), &[], &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(!err.contains("lam serve: POST"), "{err}");
    let lines = std::fs::read_to_string(&log).unwrap();
    let posts: Vec<&str> = lines.lines().filter(|l| l.starts_with("lam serve: POST /v1/messages -> 200 session ")).collect();
    assert_eq!(posts.len(), 3, "{lines}");
    assert!(posts.iter().all(|l| l.contains("would have cost")), "{lines}");
}

#[test]
fn codex_runs_through_the_proxy_with_lam_mcp_and_the_inherited_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let (up, seen) = upstream();
    fake(dir.path(), "codex");
    let store = dir.path().join("store").to_string_lossy().into_owned();
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    let gateway = format!("{up}/v1");
    let env = [("PATH", path.as_str()), ("OPENAI_BASE_URL", gateway.as_str())];
    let out = lam(dir.path(), &env, &["--store", &store, "--", "codex", "exec", "fix it"]);
    let err = String::from_utf8_lossy(&out.stderr);
    check_run(&out, &store);
    assert!(err.contains(&format!("-> {up} (from $OPENAI_BASE_URL)")), "{err}");
    let rec = record(dir.path());
    assert_eq!(rec["openai"], format!("{}/v1", proxy_url(&err)), "{err}");
    assert_eq!(rec["anthropic"], serde_json::Value::Null);
    let argv: Vec<&str> = rec["argv"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let command = format!("mcp_servers.lam.command=\"{}\"", exe());
    let margs = format!("mcp_servers.lam.args=[\"mcp\",\"--store\",\"{store}\",\"--run\",\"{}\"]", run_id(&err));
    let base = format!("openai_base_url=\"{}/v1\"", proxy_url(&err));
    let approve = "mcp_servers.lam.default_tools_approval_mode=\"approve\"";
    assert_eq!(argv, ["-c", &base, "-c", &command, "-c", &margs, "-c", approve, "exec", "fix it"]);
    check_upstream(&seen, "/v1/responses", &rec["sent"]);
}

/// A batch agent (`claude -p`, which always asks the model) that sends
/// nothing through the proxy (it read its base URL some other way, or went
/// around lam): for claude and codex an error, and a clean exit of the agent
/// becomes exit 1; for other agents a warning.
#[test]
fn no_request_through_the_proxy_is_reported() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for (name, code, says) in [("claude", 1, "lam run: error: `"), ("other-agent", 0, "lam run: warning: `")] {
        let p = dir.path().join(name);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = lam(dir.path(), &[], &["--upstream", "http://127.0.0.1:9", "--", p.to_str().unwrap(), "-p", "hi"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.contains(says) && err.contains("no model request reached the proxy"), "{err}");
    }
}

/// `claude -p` that never asks the model through the proxy: stopped when
/// `--first-request-timeout-s` passes, with an error, exit non-zero.
#[test]
fn a_batch_agent_without_a_first_request_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let p = script(dir.path(), "claude", "exec sleep 30");
    let t0 = std::time::Instant::now();
    let out = lam(dir.path(), &[], &["--first-request-timeout-s", "1", "--upstream", "http://127.0.0.1:9", "--", p.to_str().unwrap(), "-p", "hi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(t0.elapsed().as_secs() < 20, "stopped at the limit, not after the agent's 30 s");
    assert!(err.contains("reached the proxy within 1 s (--first-request-timeout-s)"), "{err}");
    assert_ne!(out.status.code(), Some(0), "{err}");
}

#[test]
fn a_missing_agent_or_none_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = lam(dir.path(), &[], &["--upstream", "http://127.0.0.1:9", "--", "no-such-agent-lam-test"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert!(err.contains("agent `no-such-agent-lam-test` not found"), "{err}");
    let out = lam(dir.path(), &[], &["--upstream", "http://127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(2));
    let out = lam(dir.path(), &[], &["--upstream", "http://127.0.0.1:9", "--"]);
    assert_eq!(out.status.code(), Some(2));
}

/// SIGTERM, SIGHUP and `kill -INT` to `lam run` while the agent runs: passed
/// on to the agent (it exits 7), then the store is flushed (its records
/// readable) and `lam run` exits 128 + the signal, not the agent's code.
#[test]
fn a_signal_to_lam_run_is_passed_on_and_gives_128_plus_it_after_the_flush() {
    for (sig, code) in [("TERM", 143), ("HUP", 129), ("INT", 130)] {
        let dir = tempfile::tempdir().unwrap();
        let (up, _seen) = upstream();
        let claude = fake(dir.path(), "claude");
        let ready = dir.path().join("ready");
        let body = format!("{} >/dev/null 2>&1\ntrap 'kill $s; exit 7' TERM HUP INT\nsleep 30 & s=$!\ntouch {}\nwait", claude.display(), ready.display());
        let agent = script(dir.path(), "agent", &body);
        let store = dir.path().join("store").to_string_lossy().into_owned();
        let mut lam = Command::new(env!("CARGO_BIN_EXE_lam"))
            .args(["run", "--encoder", "hashing", "--no-cache", "--upstream", &up, "--store", &store, "--", agent.to_str().unwrap()])
            .env("LAM_HOME", dir.path().join("home"))
            .env("FAKE_RECORD", dir.path().join("record.json"))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while !ready.exists() {
            assert!(t0.elapsed().as_secs() < 60, "the agent never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(Command::new("kill").args(["-s", sig, &lam.id().to_string()]).status().unwrap().success());
        let status = wait_at_most(&mut lam, 30);
        let mut err = String::new();
        lam.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert_eq!(status.code(), Some(code), "SIG{sig}: {err}");
        assert!(err.contains("exited with code 7"), "SIG{sig} reached the agent: {err}");
        assert!(err.contains("total: 1 session, 3 requests, 2 observations"), "{err}");
        let list = Command::new(env!("CARGO_BIN_EXE_lam")).args(["recall", "--store", &store, "--list"]).output().unwrap();
        assert!(String::from_utf8_lossy(&list.stdout).contains("\t2 observations"), "SIG{sig}: the store was flushed: {list:?}");
    }
}

/// An agent that dies of a signal: `lam run` exits 128 + that signal.
#[test]
fn an_agent_killed_by_a_signal_gives_128_plus_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["run", "--encoder", "hashing", "--no-cache", "--upstream", "http://127.0.0.1:9", "--store"])
        .arg(dir.path().join("store"))
        .args(["--", "sh", "-c", "kill -9 $$"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(137), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Wait for `child` at most `secs`; kill it and fail when it is still running.
fn wait_at_most(child: &mut std::process::Child, secs: u64) -> std::process::ExitStatus {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed().as_secs() >= secs {
            let _ = child.kill();
            panic!("lam run still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// An executable shell script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `claude -p` that ignores SIGTERM and never asks the model: SIGKILL follows.
#[test]
fn an_agent_ignoring_sigterm_is_killed_after_the_first_request_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = script(dir.path(), "claude", "trap '' TERM\nexec sleep 40");
    let t0 = std::time::Instant::now();
    let out = lam(dir.path(), &[], &["--first-request-timeout-s", "1", "--upstream", "http://127.0.0.1:9", "--", p.to_str().unwrap(), "-p", "hi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(t0.elapsed().as_secs() < 20, "killed 5 s after SIGTERM, not after the agent's 40 s: {err}");
    assert!(err.contains("ignored SIGTERM for 5 s; killing it"), "{err}");
    assert_ne!(out.status.code(), Some(0), "{err}");
}

/// An upstream that accepts connections and never answers.
fn silent_upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    format!("http://{addr}")
}

/// The agent exits while a process it left behind still waits on the
/// upstream through the proxy: `lam run` cuts it after `--drain-timeout-s`,
/// or at once on SIGTERM.
#[test]
fn requests_outliving_the_agent_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let up = silent_upstream();
    let started = dir.path().join("started");
    let body = format!(
        "python3 -c 'import os, urllib.request; urllib.request.urlopen(urllib.request.Request(os.environ[\"ANTHROPIC_BASE_URL\"] + \"/v1/messages\", data=b\"{{}}\", headers={{\"content-type\": \"application/json\"}}), timeout=120)' 2>/dev/null &\nsleep 1\ntouch {}\nexit 0",
        started.display()
    );
    let agent = script(dir.path(), "agent", &body);
    let start = |drain: &str| {
        let _ = std::fs::remove_file(&started);
        Command::new(env!("CARGO_BIN_EXE_lam"))
            .args(["run", "--encoder", "hashing", "--no-cache", "--upstream", &up, "--drain-timeout-s", drain, "--store"])
            .arg(dir.path().join("store"))
            .args(["--", agent.to_str().unwrap()])
            .env("LAM_HOME", dir.path().join("home"))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let t0 = std::time::Instant::now();
    let mut lam = start("1");
    wait_at_most(&mut lam, 30);
    let mut err = String::new();
    lam.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("cutting the requests still in flight"), "{err}");
    assert!(t0.elapsed().as_secs() < 20, "{err}");
    let mut lam = start("600");
    while !started.exists() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(lam.try_wait().unwrap().is_none(), "lam waits for the request in flight");
    assert!(Command::new("kill").args(["-s", "TERM", &lam.id().to_string()]).status().unwrap().success());
    wait_at_most(&mut lam, 10);
}

/// SIGKILL to `lam run` (or the OOM killer) ends the agent too.
#[test]
fn the_agent_ends_when_lam_run_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("agent.pid");
    let agent = script(dir.path(), "agent", &format!("echo $$ > {}\nexec sleep 60", pidfile.display()));
    let mut lam = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["run", "--encoder", "hashing", "--no-cache", "--upstream", "http://127.0.0.1:9", "--store"])
        .arg(dir.path().join("store"))
        .args(["--", agent.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&pidfile).map_or(true, |s| s.trim().is_empty()) {
        assert!(t0.elapsed().as_secs() < 60, "the agent never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_string();
    lam.kill().unwrap();
    lam.wait().unwrap();
    // Gone, or a zombie waiting for a reaper (the agent's parent is dead).
    let alive = || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')));
    let t1 = std::time::Instant::now();
    while alive() {
        assert!(t1.elapsed().as_secs() < 10, "agent {pid} still runs after lam run was killed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A token in the upstream URL is never printed; the run's directories are
/// 0700 under `umask 000`.
#[test]
fn secrets_stay_out_of_the_output_and_directories_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (up, _seen) = upstream();
    let agent = fake(dir.path(), "claude");
    let secret = up.replacen("http://", "http://sk-lam-test-SECRET@", 1);
    let sh = format!("umask 000; exec \"$0\" run --encoder hashing --no-cache --upstream '{secret}' -- '{}' -p hi", agent.display());
    let out = Command::new("sh")
        .args(["-c", &sh, env!("CARGO_BIN_EXE_lam")])
        .env_remove("ANTHROPIC_BASE_URL")
        .env("LAM_HOME", dir.path().join("home"))
        .env("FAKE_RECORD", dir.path().join("record.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("SECRET") && err.contains("-> http://***@127.0.0.1:"), "{err}");
    let runs = dir.path().join("home").join("runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    for d in [dir.path().join("home"), runs, run] {
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700, "{}", d.display());
    }
}

/// `lam top` without `--proxy` finds the run it is called from, in the
/// run's private directory (here `$XDG_RUNTIME_DIR/lam`), which is gone
/// after the run.
#[test]
fn lam_top_finds_the_running_run_in_its_private_directory() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    // As a login's runtime directory is: this user's, 0700 (tempfile makes 0755).
    std::fs::set_permissions(runtime.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let (up, _seen) = upstream();
    let agent = fake(dir.path(), "claude");
    let xdg = runtime.path().to_str().unwrap();
    let out = lam(dir.path(), &[("FAKE_TOP", &exe()), ("XDG_RUNTIME_DIR", xdg)], &["--upstream", &up, "--", agent.to_str().unwrap(), "-p", "hi"]);
    assert!(dir.path().join("record.json").exists(), "{}", String::from_utf8_lossy(&out.stderr));
    let top = &record(dir.path())["top"];
    let table = top["out"].as_str().unwrap();
    assert_eq!(top["code"], 0, "{top}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(table.contains("tokens in -> out") && table.contains("serve-"), "{table}");
    let root = runtime.path().join("lam");
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "the run's directory is removed");
}

/// Run files someone else could have written are never read: a root that
/// others may enter, and a run whose PID is not a `lam` of this user's
/// (PID 1). `LAM_TOKEN` reaches no planted address.
#[test]
fn lam_top_reads_no_planted_proxy_file() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let planted = format!("http://{}", listener.local_addr().unwrap());
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let plant = |root: &Path, mode: u32, pid: u32| {
        let run = root.join(format!("run-{pid}-abcdef"));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(run.join("proxy"), &planted).unwrap();
        std::fs::set_permissions(run.join("proxy"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    plant(&tmp.path().join(format!("lam-{uid}")), 0o777, std::process::id());
    plant(&tmp.path().join(format!("lam-{uid}-zzzzzz")), 0o700, 1);
    let top = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["top", "--once"])
        .env("TMPDIR", tmp.path())
        .env_remove("XDG_RUNTIME_DIR")
        .env("LAM_TOKEN", "VICTOKEN-s3cr3t")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&top.stderr);
    assert!(!top.status.success() && err.contains("no running `lam run` found"), "{err}");
    assert!(listener.accept().is_err(), "nothing connected to the planted address");
}

/// `lam mcp --store-file`: the spec from a file's first line; clear errors.
#[test]
fn lam_mcp_reads_its_store_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_lam")).arg("mcp").args(args).stdin(std::process::Stdio::null()).output().unwrap();
    let missing = dir.path().join("missing");
    let out = mcp(&["--store-file", missing.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading the store file"), "{out:?}");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let out = mcp(&["--store-file", empty.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is empty"), "{out:?}");
    let out = mcp(&["--store", "x", "--store-file", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "one or the other");
    let out = mcp(&[]);
    assert_eq!(out.status.code(), Some(2), "one is needed");
    // A store named in the file serves (stdin closed: the server ends cleanly).
    let spec = dir.path().join("spec");
    std::fs::write(&spec, format!("{}\n", dir.path().join("store").display())).unwrap();
    let out = mcp(&["--store-file", spec.to_str().unwrap(), "--run", "serve-1-2"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("store file"), "{out:?}");
}

/// A closed terminal (standard error gives EPIPE or EIO): `lam run` loses
/// its lines, never the run: no panic (exit 101), the agent's code.
#[test]
fn a_closed_standard_error_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["run", "--encoder", "hashing", "--no-cache", "--upstream", "http://127.0.0.1:9", "--store"])
        .arg(dir.path().join("store"))
        .args(["--", "sh", "-c", "exit 3"])
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "lam run exits with the agent's code: {out:?}");
}

/// An interactive `claude` or `codex` that exits without asking the model
/// (the user typed /exit at once, or was not logged in) and left no
/// transcript with an answer: one plain line, the agent's exit code.
#[test]
fn an_interactive_agent_that_asked_nothing_is_no_alarm() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["claude", "codex"] {
        let p = script(dir.path(), name, "exit 0");
        let out = lam(dir.path(), &[], &["--upstream", "http://127.0.0.1:9", "--", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains(&format!("lam run: `{}` made no model request", p.display())), "{err}");
        assert!(!err.contains("error") && !err.contains("went around lam"), "{err}");
    }
}

/// An agent that ends before any model request and left no transcript
/// with an answer, batch form or not (`gemini -p` in a folder it does not
/// trust exits 55 at once; `claude -p` that failed): one plain line with
/// its exit code and what the code means, never that it went around lam.
#[test]
fn an_agent_that_ended_before_any_request_is_no_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("user");
    let untrusted = "echo 'Gemini CLI is not running in a trusted directory.' >&2; exit 55";
    for (name, body, code, says) in
        [("gemini", untrusted, 55, "it exited 55 (Gemini CLI's untrusted folder"), ("claude", "exit 1", 1, "it exited 1 (its own messages above say why)")]
    {
        let p = script(dir.path(), name, body);
        let out = lam(dir.path(), &[("HOME", home.to_str().unwrap())], &["--upstream", "http://127.0.0.1:9", "--", p.to_str().unwrap(), "-p", "hi"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.contains(&format!("lam run: `{}` made no model request: {says}", p.display())), "{err}");
        assert!(!err.contains("error:") && !err.contains("went around lam"), "{err}");
    }
}

/// The real Gemini CLI (scripts/install-agents.sh; skipped, saying so,
/// when it is not installed) run headless in a folder it does not trust:
/// it exits 55 before any request, and `lam run` says so.
#[test]
fn the_real_gemini_cli_in_an_untrusted_folder_is_no_alarm() {
    let agents = std::env::var_os("LAM_AGENTS_DIR").map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/agents"), PathBuf::from);
    let gemini = agents.join("node_modules/.bin/gemini");
    if !gemini.exists() {
        eprintln!("SKIPPED: the real Gemini CLI is not installed at {} (scripts/install-agents.sh, or LAM_AGENTS_DIR)", gemini.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("user");
    std::fs::create_dir(&home).unwrap();
    let env = [("HOME", home.to_str().unwrap()), ("GEMINI_API_KEY", "not-a-key")];
    let out = lam(dir.path(), &env, &["--upstream", "http://127.0.0.1:9", "--", gemini.to_str().unwrap(), "-p", "hi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(55), "{err}");
    assert!(err.contains("not running in a trusted directory"), "Gemini CLI's own words: {err}");
    assert!(err.contains("made no model request: it exited 55 (Gemini CLI's untrusted folder"), "{err}");
    assert!(!err.contains("error:") && !err.contains("went around lam"), "{err}");
}

/// Where the fake agents write their transcripts: Claude Code's project
/// directory of the working directory, Codex's day directory; a line that
/// names the session, a user line and the model's answer.
const TRANSCRIPT: &str = r#"
if [ "$(basename "$0")" = claude ]; then
  d="$CLAUDE_CONFIG_DIR/projects/$(pwd -P | sed 's/[^A-Za-z0-9]/-/g')"; f="$d/sid-claude-1.jsonl"
  mkdir -p "$d"
  echo '{"type":"user","sessionId":"sid-claude-1","uuid":"u1","message":{"role":"user","content":"hi"}}' > "$f"
  echo '{"type":"assistant","sessionId":"sid-claude-1","uuid":"u2","message":{"role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello"}]}}' >> "$f"
else
  d="$CODEX_HOME/sessions/2025/01/02"; f="$d/rollout-2025-01-02T03-04-05-sid-codex-1.jsonl"
  mkdir -p "$d"
  echo '{"timestamp":"t","type":"session_meta","payload":{"id":"sid-codex-1","cwd":"/"}}' > "$f"
  echo '{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}' >> "$f"
  echo '{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}}' >> "$f"
fi
"#;

/// An interactive agent whose transcript of this run holds the model's
/// answer though no request reached the proxy: its requests went around
/// lam, an error, exit 1 for an agent that exited 0.
#[test]
fn an_answer_in_the_transcript_without_a_request_is_the_alarm() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["claude", "codex"] {
        let p = script(dir.path(), name, &format!("{TRANSCRIPT}\nexit 0"));
        let out = lam(dir.path(), &[], &["--upstream", "http://127.0.0.1:9", "--", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("lam run: error: `") && err.contains("holds a model's answer, yet no model request reached the proxy"), "{err}");
    }
}

/// An interactive conversation through lam: at exit, `lam run` prints the
/// way back in through lam with the agent's session id from its transcript.
#[test]
fn the_way_back_in_goes_through_lam() {
    let dir = tempfile::tempdir().unwrap();
    let (up, _seen) = upstream();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let store = dir.path().join("store").to_string_lossy().into_owned();
    for (name, hint) in [("claude", "-- claude --resume sid-claude-1"), ("codex", "-- codex resume sid-codex-1")] {
        let agent = fake(&real, name);
        let p = script(dir.path(), name, &format!("{TRANSCRIPT}\nexec {} \"$@\"", agent.display()));
        let out = lam(dir.path(), &[], &["--store", &store, "--upstream", &up, "--", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains(&format!("to go on with this conversation through lam: lam run --store {store} {hint} (")), "{err}");
        assert!(err.contains("use this one"), "{err}");
    }
}

/// Two identical tool results are stored once: the summary says how many
/// observations the store holds and how many repeats were stored once.
#[test]
fn the_summary_counts_observations_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (up, _seen) = upstream();
    let agent = fake(dir.path(), "claude");
    let store = dir.path().join("store").to_string_lossy().into_owned();
    let out = lam(dir.path(), &[("FAKE_SAME", "1")], &["--store", &store, "--upstream", &up, "--", agent.to_str().unwrap(), "-p", "hi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("total: 1 session, 3 requests, 2 observations (1 stored; 1 repeat stored once), tool-result tokens"), "{err}");
    let list = Command::new(env!("CARGO_BIN_EXE_lam")).args(["recall", "--store", &store, "--list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains("\t1 observations"), "{list:?}");
}

/// The budget is on by default (the agents' models here: 100,000, the
/// ceiling), and the summary says so, how to turn it off, and what it held
/// the session to; `--budget off` turns it off; `--budget-target` needs a
/// number.
#[test]
fn the_budget_is_on_by_default_and_off_turns_it_off() {
    let dir = tempfile::tempdir().unwrap();
    let (up, _seen) = upstream();
    for name in ["claude", "codex"] {
        let agent = fake(dir.path(), name);
        let run = |extra: &[&str]| {
            let store = dir.path().join(format!("store-{name}-{}", extra.len())).to_string_lossy().into_owned();
            let args =
                [&["--store", &store, "--upstream", &up], extra, &["--", agent.to_str().unwrap(), if name == "claude" { "-p" } else { "exec" }, "hi"]].concat();
            let out = lam(dir.path(), &[], &args);
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        let on = run(&[]);
        let total = on.lines().find(|l| l.starts_with("lam run: total: ")).unwrap_or_else(|| panic!("{on}"));
        assert!(total.contains("; budget: 0 cuts, 0 citations, peak input ") && total.ends_with(", held to 100000"), "{name}: {total}");
        assert!(on.contains("lam run: budget: 100000 tokens, on by default (the smaller of 100000 and a level below"), "{name}: {on}");
        assert!(on.contains("`--budget off` turns it off): no cut made"), "{name}: {on}");
        let off = run(&["--budget", "off"]);
        let total = off.lines().find(|l| l.starts_with("lam run: total: ")).unwrap_or_else(|| panic!("{off}"));
        assert!(!total.contains("budget"), "{name}: {total}");
        assert!(off.contains("lam run: budget: off (--budget off)"), "{name}: {off}");
    }
    let agent = fake(dir.path(), "claude");
    let out = lam(dir.path(), &[], &["--upstream", &up, "--budget-target", "10", "--", agent.to_str().unwrap(), "-p", "hi"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--budget-target needs --budget TOKENS"), "{out:?}");
}

/// A pseudo-terminal: (master, slave); `None` when none can be opened.
fn pty() -> Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty writes two descriptors; no name, default mode and size.
    let ok = unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) } == 0;
    // SAFETY: descriptors openpty just opened, owned here alone.
    ok.then(|| unsafe { (std::os::fd::OwnedFd::from_raw_fd(m), std::os::fd::OwnedFd::from_raw_fd(s)) })
}

/// The mode of terminal `fd`, its flags and control characters.
fn mode(fd: &std::os::fd::OwnedFd) -> (u32, u32, u32, u32, Vec<u8>) {
    use std::os::fd::AsRawFd;
    // SAFETY: tcgetattr into a zeroed termios.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut t) }, 0);
    (t.c_iflag, t.c_oflag, t.c_cflag, t.c_lflag, t.c_cc.to_vec())
}

/// What is waiting on the pty's master side.
fn drain(master: &std::os::fd::OwnedFd) -> String {
    use std::os::fd::AsRawFd;
    let fd = master.as_raw_fd();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // SAFETY: fcntl and read on an open descriptor into a local buffer.
    unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
    while let n @ 1.. = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } {
        out.extend_from_slice(&buf[..n as usize]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An agent that leaves the terminal raw and on the alternate screen (killed
/// in its full-screen interface): `lam run` puts the mode back and leaves
/// the alternate screen; one that left the mode as it was gets no escapes.
#[test]
fn the_terminal_mode_is_restored_after_the_agent() {
    let Some((master, slave)) = pty() else {
        eprintln!("skipped: no pseudo-terminal could be opened");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let before = mode(&slave);
    for (body, left) in [("stty raw -echo\nprintf '\\033[?1049h\\033[?25l'\nexit 0", true), ("exit 0", false)] {
        let agent = script(dir.path(), "agent", body);
        let out = Command::new(env!("CARGO_BIN_EXE_lam"))
            .args(["run", "--encoder", "hashing", "--no-cache", "--upstream", "http://127.0.0.1:9", "--store"])
            .arg(dir.path().join("store"))
            .args(["--", agent.to_str().unwrap()])
            .env("LAM_HOME", dir.path().join("home"))
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(mode(&slave), before, "the mode is restored (the agent left it raw: {left})");
        let shown = drain(&master);
        assert_eq!(shown.contains("\x1b[?1049l") && shown.contains("\x1b[?25h"), left, "{shown:?}");
    }
}
