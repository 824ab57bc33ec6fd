//! Gemini CLI's room: its session file as the real 0.61.0 writes it
//! (`tests/fixtures/gemini-cli`, recorded: see its PROVENANCE.md), how
//! `lam run` launches it (a home of its own with lam's settings), and the
//! requests `lam replay` sends as it.

use lam_core::wire::{self, Api};
use lam_trajectory::agents::{self, Agent, Setup, gemini};
use lam_trajectory::read::{self, Format};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const SID: &str = "0f700217-4158-45ce-8cea-c2dfeb91128e";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemini-cli/session-2026-12-06T09-27-0f700217.jsonl")
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lam-gemini-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every result once (a `gemini` message is written twice, and its results
/// are both in its `toolCalls` and in `user` messages), named by its call.
#[test]
fn a_recorded_session_reads_every_result_once() {
    let bytes = std::fs::read(fixture()).unwrap();
    assert_eq!(agents::detect(&bytes), Some(Format::Agent(Agent::GeminiCli)));
    assert!(agents::model_answered(&bytes));
    let t = read::read_path(&fixture()).unwrap();
    assert_eq!(t.len(), 1);
    let t = &t[0];
    assert_eq!((t.format, t.session.0.as_str()), (Format::Agent(Agent::GeminiCli), SID));
    let actions: Vec<&str> = t.records.iter().map(|r| r.action.as_str()).collect();
    let shell = |c: &str, k: usize| format!(r#"run_shell_command({{"command":"{c}","description":"scripted step {k}"}})"#);
    assert_eq!(
        actions,
        [
            shell("cat app.py", 0),
            r#"read_file({"file_path":"/tmp/h4/run1/work/app.py"})"#.to_string(),
            shell("cat app.py", 2),
            shell("cat app_v2.py", 3),
            shell("ls -la", 4),
            shell("python3 check.py", 5),
            shell("python3 check.py", 6),
            r#"mcp_lam_recall({"id":"7ec3"})"#.to_string(),
        ]
    );
    let first = String::from_utf8_lossy(&t.records[0].observation);
    assert!(first.starts_with("<untrusted_context>\nOutput: def f0(x):\n    return x + 0\n"), "{first}");
    assert!(String::from_utf8_lossy(&t.records[1].observation).starts_with("def f0(x):\n"), "read_file's output is bare");
    assert!(t.task.starts_with("<session_context>\nThis is the Gemini CLI.") && t.task.ends_with("\nLook at app.py and run check.py"), "{}", t.task);
    assert_eq!((t.thoughts.len(), t.times.len()), (8, 8));
    assert!(t.times.iter().all(Option::is_some));
}

/// A session whose results are only in the calls' `result` (no `user`
/// message holds them) reads the same records.
#[test]
fn results_kept_only_with_their_calls_read_the_same() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !(l.contains(r#""type":"user""#) && l.contains("functionResponse"))).collect();
    assert!(kept.len() < text.lines().count());
    let dir = tmp("calls-only");
    let path = dir.join("session-x.jsonl");
    std::fs::write(&path, kept.join("\n")).unwrap();
    let a = &read::read_path(&fixture()).unwrap()[0];
    let b = &read::read_path(&path).unwrap()[0];
    assert_eq!(a.records, b.records);
    // A broken message names its line.
    std::fs::write(&path, format!("{}\n{{\"type\":\"gemini\",\"toolCalls\":{{}}}}\n", kept[0])).unwrap();
    let e = read::read_path(&path).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("message has no string `id`"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `lam run` gives it a home of its own: the user's settings with lam's
/// MCP server and the API-key auth type, every other entry linked in.
#[test]
fn it_runs_in_a_home_of_its_own_with_the_users_settings_and_lams() {
    let home = tmp("home");
    let user = home.join(".gemini");
    std::fs::create_dir_all(user.join("commands")).unwrap();
    std::fs::write(user.join("oauth_creds.json"), "{}").unwrap();
    let settings = r#"{
      // the user's own
      "ui": {"theme": "Dracula"},
      "security": {"auth": {"selectedType": "oauth-personal"}},
      "mcpServers": {"other": {"command": "other-mcp"}},
    }"#;
    std::fs::write(user.join("settings.json"), settings).unwrap();
    let h = home.to_string_lossy().into_owned();
    let env = move |k: &str| match k {
        "HOME" => Some(h.clone()),
        "GEMINI_API_KEY" => Some("k".to_string()),
        _ => None,
    };
    let mcp = vec!["mcp".to_string(), "--store".to_string(), "/s".to_string()];
    let s = Setup { lam: "/bin/lam", mcp: &mcp, origin: "http://127.0.0.1:7", args: &[], cwd: &home, status_line: false, budget: Some(100_000), env: &env };
    let l = Agent::GeminiCli.launch(&s);
    assert_eq!(l.env, [("GOOGLE_GEMINI_BASE_URL".to_string(), "http://127.0.0.1:7".to_string())]);
    assert!(l.before.is_empty() && l.after.is_empty() && l.files.is_empty());
    assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
    assert!(l.notes[0].contains("oauth-personal"), "{:?}", l.notes);
    let home_dir = l.home.expect("a home of its own");
    assert_eq!(home_dir.var, "GEMINI_CLI_HOME");
    assert_eq!(home_dir.files[0].0, Path::new(".gemini/settings.json"));
    let got: Value = serde_json::from_str(&home_dir.files[0].1).unwrap();
    assert_eq!(got["ui"], json!({"theme": "Dracula"}));
    assert_eq!(got["mcpServers"]["other"], json!({"command": "other-mcp"}));
    assert_eq!(got["mcpServers"]["lam"], json!({"command": "/bin/lam", "args": ["mcp", "--store", "/s"], "trust": true}));
    assert_eq!(got["security"]["auth"]["selectedType"], "gemini-api-key");
    let links: Vec<(String, PathBuf)> = home_dir.links.iter().map(|(p, t)| (p.to_string_lossy().into_owned(), t.clone())).collect();
    assert_eq!(
        links,
        [
            (".gemini/commands".to_string(), user.join("commands")),
            (".gemini/oauth_creds.json".to_string(), user.join("oauth_creds.json")),
            (".gemini/tmp".to_string(), user.join("tmp")),
        ]
    );
    assert_eq!(home_dir.make, [user.join("tmp")], "its session files stay the user's");
    // Without a `.gemini` of the user's: lam's settings alone, nothing linked, a note.
    let bare = tmp("bare");
    let b = bare.to_string_lossy().into_owned();
    let fresh = move |k: &str| (k == "HOME").then(|| b.clone());
    let l = Agent::GeminiCli.launch(&Setup { env: &fresh, ..s });
    let h = l.home.unwrap();
    assert!(h.links.is_empty() && h.make.is_empty());
    assert_eq!(l.notes.len(), 2, "no GEMINI_API_KEY, no ~/.gemini: {:?}", l.notes);
    let got: Value = serde_json::from_str(&h.files[0].1).unwrap();
    assert_eq!(
        got,
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}}, "mcpServers": {"lam": {"command": "/bin/lam", "args": ["mcp", "--store", "/s"], "trust": true}}})
    );
    let _ = std::fs::remove_dir_all(bare);
    let _ = std::fs::remove_dir_all(home);
}

#[test]
fn batch_form_upstream_and_compaction() {
    let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
    assert!(Agent::GeminiCli.batch(&args(&["-p", "task", "--yolo"])));
    assert!(Agent::GeminiCli.batch(&args(&["--prompt=task"])));
    assert!(!Agent::GeminiCli.batch(&args(&["-i", "task"])));
    assert_eq!(Agent::of_program("gemini"), Some(Agent::GeminiCli));
    assert_eq!(Agent::GeminiCli.recall_tool(), "mcp_lam_recall");
    assert_eq!(Agent::GeminiCli.compaction_threshold("gemini-3.1-pro-preview"), Some(524_288));
    assert_eq!(Agent::GeminiCli.compaction_threshold("claude-sonnet-4-5"), None);
    let env = |k: &str| (k == "GOOGLE_GEMINI_BASE_URL").then(|| "https://gw.example/ ".to_string());
    let (up, from) = Agent::GeminiCli.upstream(&[], Path::new("/"), &env);
    assert_eq!((up.as_str(), from.as_str()), ("https://gw.example", "from $GOOGLE_GEMINI_BASE_URL"));
    let (up, _) = Agent::GeminiCli.upstream(&[], Path::new("/"), &|_| None);
    assert_eq!(up, gemini::VENDOR);
}

/// `lam replay`'s requests as Gemini CLI: the calls and results read back
/// by `lam_core::wire` as the proxy reads them, one more result each time.
#[test]
fn replay_requests_are_gemini_cli_s() {
    let t = &read::read_path(&fixture()).unwrap()[0];
    let calls: Vec<agents::Call> = t
        .records
        .iter()
        .zip(&t.thoughts)
        .map(|(r, th)| agents::Call::from_action(&r.action, String::from_utf8_lossy(&r.observation).into_owned(), th.clone()))
        .collect();
    let bodies = agents::requests(Agent::GeminiCli, &t.task, &calls);
    assert_eq!(bodies.len(), 9);
    let last: Value = serde_json::from_slice(&bodies[8]).unwrap();
    let items: Vec<serde_json::Map<String, Value>> = last["contents"].as_array().unwrap().iter().map(|v| v.as_object().unwrap().clone()).collect();
    let actions: Vec<String> = items.iter().flat_map(|v| wire::calls(Api::Gemini, v)).map(|c| c.action()).collect();
    assert_eq!(actions, t.records.iter().map(|r| r.action.clone()).collect::<Vec<_>>());
    let outputs: Vec<String> = items.iter().flat_map(|v| wire::outputs(Api::Gemini, v).into_iter().map(|o| o.path.to_string())).collect();
    assert_eq!(outputs.len(), 8);
    let results = agents::forwarded_results(Agent::GeminiCli, &bodies[8]);
    assert_eq!(results, calls.iter().map(|c| c.output.clone()).collect::<Vec<_>>());
    assert_eq!(last["tools"][0]["functionDeclarations"].as_array().unwrap().len(), 3, "run_shell_command, read_file, mcp_lam_recall");
    assert!(last["systemInstruction"]["parts"][0]["text"].is_string());
    assert_eq!(last["contents"][0], json!({"role": "user", "parts": [{"text": t.task}]}), "the task as its transcript keeps it");
    assert_eq!(Agent::GeminiCli.path(), "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse", "the model is in the path");
    assert_eq!(Agent::ClaudeCode.path(), "/v1/messages");
}
