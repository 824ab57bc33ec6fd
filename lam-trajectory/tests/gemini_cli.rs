//! Gemini CLI's room: its session file as the real 0.61.0 writes it
//! (`tests/fixtures/gemini-cli`, recorded: see its PROVENANCE.md) and the
//! real `.json` chats of earlier versions (`tests/fixtures/gemini-cli/tmp`,
//! public, MIT), how `lam run` launches it (a home of its own with lam's
//! settings) and what its exit codes say, and the requests `lam replay`
//! sends as it.

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
    assert!(Agent::GeminiCli.exit_reason(55).is_some_and(|r| r.contains("untrusted folder") && r.contains("--skip-trust")));
    assert_eq!((Agent::GeminiCli.exit_reason(1), Agent::ClaudeCode.exit_reason(55)), (None, None));
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

/// The real `.json` chats of `tests/fixtures/gemini-cli/tmp` (Gemini CLI
/// before 0.39: one JSON document per session; published by their
/// authors, MIT, see PROVENANCE.md), as `~/.gemini/tmp` holds them.
fn json_chats() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemini-cli/tmp")
}

/// (session, records, non-empty records) of each `.json` chat under
/// `json_chats()`, found by the folder walk as `lam replay ~/.gemini/tmp`
/// finds them. The counts were taken independently, by a Python count
/// of each `toolCalls` entry's `functionResponse` texts (`output`, `error`).
#[test]
fn real_json_chats_read_every_result_once() {
    let inputs = read::expand_inputs(&[json_chats()]).unwrap();
    assert_eq!(inputs.len(), 4);
    assert!(inputs.iter().all(|i| i.optional), "found in a folder");
    let mut got = Vec::new();
    for i in &inputs {
        let bytes = std::fs::read(&i.path).unwrap();
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(agents::detect_document(&doc), Some(Agent::GeminiCli));
        for t in read::read_input(i).unwrap().expect("a Gemini CLI chat, not skipped") {
            assert_eq!(t.format, Format::Agent(Agent::GeminiCli));
            assert!(t.records.iter().all(|r| r.action.contains('(')), "every result found its call");
            assert_eq!(t.times.len(), t.records.len());
            assert!(t.times.iter().all(Option::is_some));
            assert!(!t.task.is_empty());
            got.push((t.session.0.clone(), t.records.len(), t.records.iter().filter(|r| !r.observation.is_empty()).count()));
        }
    }
    got.sort();
    let s = |id: &str, n, e| (id.to_string(), n, e);
    assert_eq!(
        got,
        [
            s("0b23371a-ce2e-4b1c-81a0-44af5d94d9ce", 11, 11),
            s("95ee2bc8-b4a1-47fb-8db8-b0cfe91bee88", 9, 9),
            s("f85cf6cc-5e3e-4b46-9450-6239b8471a9c", 1, 1),
            s("fa5a5754-4fd3-4f6c-acf6-db41f65deaba", 0, 0),
        ]
    );
    // Named alone, the same; the model's answers are found in this form too.
    let one = inputs.iter().find(|i| i.path.to_string_lossy().contains("0b23371a")).unwrap();
    let t = &read::read_path(&one.path).unwrap()[0];
    assert!(t.records[0].action.starts_with(r#"write_file({"content":"<!DOCTYPE html>"#), "{}", t.records[0].action);
    assert_eq!(t.records[0].observation, b"Successfully created and wrote to new file: /Users/yoavfarhi/dev/pomodoro/gemini/index.html.");
    assert!(t.task.starts_with("Build a simple Pomodoro timer web app"), "{}", t.task);
    assert!(agents::model_answered(&std::fs::read(&one.path).unwrap()));
}

/// One rule for both forms: a real `.json` chat written as Gemini CLI 0.61
/// writes a session (its header, then each message on a line of its own)
/// reads the same records.
#[test]
fn a_json_chat_and_its_jsonl_form_read_alike() {
    let inputs = read::expand_inputs(&[json_chats()]).unwrap();
    let dir = tmp("forms");
    for i in &inputs {
        let mut doc: serde_json::Map<String, Value> = serde_json::from_slice(&std::fs::read(&i.path).unwrap()).unwrap();
        let messages = doc.remove("messages").unwrap();
        let mut lines = vec![serde_json::to_string(&doc).unwrap()];
        lines.extend(messages.as_array().unwrap().iter().map(|m| serde_json::to_string(m).unwrap()));
        let path = dir.join(i.path.file_name().unwrap()).with_extension("jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let (a, b) = (&read::read_path(&i.path).unwrap()[0], &read::read_path(&path).unwrap()[0]);
        assert_eq!((&a.session, &a.records, &a.thoughts, &a.task, &a.times), (&b.session, &b.records, &b.thoughts, &b.task, &b.times));
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A `.json` chat is strict once recognised: a broken message names its
/// record, found in a folder too; a `.json` that is no chat (its
/// `logs.json`) is skipped.
#[test]
fn a_broken_json_chat_names_its_record_and_other_json_is_skipped() {
    let dir = tmp("broken-json");
    let chats = dir.join("tmp/p/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let doc = json!({"sessionId": "s1", "projectHash": "p", "startTime": "2025-10-21T20:04:20.819Z", "lastUpdated": "2025-10-21T20:04:20.819Z",
        "messages": [{"id": "u", "type": "user", "content": "go"}, {"id": "g", "type": "gemini", "content": "", "toolCalls": {}}]});
    std::fs::write(chats.join("session-2025-10-21T20-04-s1.json"), doc.to_string()).unwrap();
    let logs = json!([{"sessionId": "s1", "messageId": 0, "type": "user", "message": "go", "timestamp": "2025-10-21T20:04:20.819Z"}]);
    std::fs::write(dir.join("tmp/p/logs.json"), logs.to_string()).unwrap();
    let inputs = read::expand_inputs(&[dir.join("tmp")]).unwrap();
    let results: Vec<_> = inputs.iter().map(read::read_input).collect();
    let e = results.iter().find_map(|r| r.as_ref().err()).expect("the broken chat is an error").to_string();
    assert!(e.contains("session-2025-10-21T20-04-s1.json: messages[1]: `toolCalls` is an object, not an array"), "{e}");
    assert_eq!(results.iter().filter(|r| matches!(r, Ok(None))).count(), 1, "logs.json skipped");
    let _ = std::fs::remove_dir_all(dir);
}

/// Records as Gemini CLI 0.61 loads them: `$rewindTo` drops that message
/// and every later one, a `$set` of `messages` replaces them all.
#[test]
fn rewinds_and_sets_leave_the_conversation_gemini_cli_loads() {
    let dir = tmp("rewind");
    let call = |id: &str, cmd: &str, out: &str| {
        json!({"id": format!("g-{id}"), "type": "gemini", "content": "", "timestamp": "2026-01-01T00:00:01Z",
            "toolCalls": [{"id": id, "name": "run_shell_command", "args": {"command": cmd},
                "result": [{"functionResponse": {"id": id, "name": "run_shell_command", "response": {"output": out}}}]}]})
    };
    let header = json!({"sessionId": "s", "projectHash": "p", "startTime": "2026-01-01T00:00:00Z"});
    let user = json!({"id": "u1", "type": "user", "content": [{"text": "task"}], "timestamp": "2026-01-01T00:00:00Z"});
    let lines = [header, user.clone(), call("c1", "ls", "a"), call("c2", "cat a", "b"), json!({"$rewindTo": "g-c2"}), call("c3", "pwd", "/w")];
    let path = dir.join("session-r.jsonl");
    let write = |ls: &[Value]| std::fs::write(&path, ls.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")).unwrap();
    write(&lines);
    let outputs = |p: &Path| read::read_path(p).unwrap()[0].records.iter().map(|r| String::from_utf8_lossy(&r.observation).into_owned()).collect::<Vec<_>>();
    assert_eq!(outputs(&path), ["a", "/w"], "the rewound call is gone");
    let mut set = lines.to_vec();
    set.push(json!({"$set": {"messages": [user, call("c4", "id", "uid=0")]}}));
    write(&set);
    assert_eq!(outputs(&path), ["uid=0"], "a $set of messages replaces them");
    let _ = std::fs::remove_dir_all(dir);
}
