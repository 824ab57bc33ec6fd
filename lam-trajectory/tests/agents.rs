//! Claude Code transcripts and Codex rollouts (`tests/fixtures/claude-code`,
//! `tests/fixtures/codex`: hand-made from the documented shapes, see their
//! PROVENANCE.md). Record counts were checked by an independent count over the
//! files (`tool_result` blocks; `*_call_output` items).

use lam_trajectory::agents::Agent;
use lam_trajectory::read::{self, Format, Input};
use std::path::{Path, PathBuf};

const SID: &str = "1b6f0c3e-5d7a-4c1e-9a55-3f2d8e9c0a11";
const CODEX_SID: &str = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5";
const LEGACY_SID: &str = "5973b6c0-94b8-487b-a530-2aeb6098ae0e";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn claude_main() -> PathBuf {
    fixtures().join(format!("claude-code/-home-user-demo/{SID}.jsonl"))
}

fn tmp(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lam-agents-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn claude_code_session_reads_every_tool_result() {
    let t = read::read_path(&claude_main()).unwrap();
    assert_eq!(t.len(), 1);
    let t = &t[0];
    assert_eq!(t.format, Format::Agent(Agent::ClaudeCode));
    assert_eq!(t.session.0, SID);
    assert_eq!(t.records.len(), 10);
    assert_eq!(t.thoughts.len(), 10);
    assert_eq!(t.task, "The test for add() fails in calc.py. Find out why and fix it.");
    let r = &t.records;
    assert_eq!(r[0].action, r#"Bash({"command":"python -m pytest -q tests/test_calc.py","description":"Run the calc tests"})"#);
    assert!(String::from_utf8_lossy(&r[0].observation).contains("FAILED tests/test_calc.py::test_add"));
    assert_eq!(t.thoughts[0], "Let me look at the code and run the tests first.\nI'll start by running the tests.");
    // Two calls of one turn: the second gets no thought.
    assert_eq!(r[1].action, r#"Read({"file_path":"/home/user/demo/calc.py"})"#);
    assert_eq!(r[2].action, r#"Glob({"pattern":"tests/**/*.py"})"#);
    assert_eq!(t.thoughts[2], "");
    // Block content: a record per text block, as the proxy admits them
    // (`lam_core::wire::outputs`), each naming the call.
    assert_eq!(r[2].observation, b"/home/user/demo/tests/test_calc.py");
    assert_eq!((r[3].action.as_str(), &r[3].observation[..]), (r[2].action.as_str(), &b"/home/user/demo/tests/__init__.py"[..]));
    assert_eq!(t.thoughts[3], "");
    // The same command twice, the same file read twice: same action, as the rule names it.
    assert_eq!(r[7].action, r[0].action);
    assert_eq!(r[6].action, r[1].action);
    // An image-only result has no text.
    assert_eq!(r[8].action, r#"Read({"file_path":"/home/user/demo/ci.png"})"#);
    assert_eq!(r[8].observation, b"");
    assert!(r.iter().all(|x| x.returncode.is_none()));
}

#[test]
fn claude_code_actions_follow_the_one_rule() {
    let t = &read::read_path(&claude_main()).unwrap()[0];
    let input = serde_json::json!({"file_path": "/home/user/demo/calc.py", "old_string": "return a - b", "new_string": "return a + b"});
    assert_eq!(t.records[5].action, lam_core::action::tool_call_value("Edit", Some(&input)));
}

#[test]
fn claude_code_subagent_is_named_after_its_session_and_file() {
    let p = fixtures().join(format!("claude-code/-home-user-demo/{SID}/subagents/agent-a3f9c2d1.jsonl"));
    let t = &read::read_path(&p).unwrap()[0];
    assert_eq!(t.session.0, format!("{SID}.agent-a3f9c2d1"));
    assert_eq!(t.records.len(), 2);
    assert_eq!(t.task, "List every caller of calc.add in the repository.");
}

#[test]
fn a_claude_code_project_folder_reads_transcripts_and_skips_metadata() {
    let inputs = read::expand_inputs(&[fixtures().join("claude-code")]).unwrap();
    assert_eq!(inputs.len(), 3, "{inputs:?}");
    let mut sessions = Vec::new();
    for i in &inputs {
        if let Some(ts) = read::read_input(i).unwrap() {
            sessions.extend(ts.into_iter().map(|t| (t.session.0, t.records.len())));
        }
    }
    // Sorted by path: the session's folder (its subagents) comes before its file.
    assert_eq!(sessions, vec![(format!("{SID}.agent-a3f9c2d1"), 2), (SID.to_string(), 10)]);
}

#[test]
fn codex_rollout_reads_every_call_output() {
    let p = fixtures().join(format!("codex/sessions/2025/10/29/rollout-2025-10-29T00-59-38-{CODEX_SID}.jsonl"));
    let t = &read::read_path(&p).unwrap()[0];
    assert_eq!(t.format, Format::Agent(Agent::Codex));
    assert_eq!(t.session.0, CODEX_SID);
    assert_eq!(t.records.len(), 6);
    assert_eq!(t.task, "The test for add() fails. Fix calc.py.");
    let r = &t.records;
    assert_eq!(r[0].action, r#"shell({"command":["bash","-lc","python -m pytest -q tests/test_calc.py"],"workdir":"/home/user/demo","timeout_ms":120000})"#);
    assert_eq!(r[0].returncode, Some(1));
    assert!(r[0].observation.starts_with(b"F.\n"));
    assert_eq!(t.thoughts[0], "**Running the tests**");
    assert_eq!(r[1].observation, b"def add(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n");
    assert!(r[3].action.starts_with("apply_patch(*** Begin Patch\n"));
    assert_eq!(t.thoughts[3], "`add` subtracts; patching it.");
    assert_eq!(r[4].action, r[1].action);
    // A plain-text output is kept as it is.
    assert!(r[5].observation.starts_with(b"Exit code: 0\n"));
    assert_eq!(r[5].returncode, None);
}

#[test]
fn legacy_codex_rollout_without_envelopes() {
    let p = fixtures().join(format!("codex/sessions/rollout-2025-05-07T17-24-21-{LEGACY_SID}.jsonl"));
    let t = &read::read_path(&p).unwrap()[0];
    assert_eq!(t.format, Format::Agent(Agent::Codex));
    assert_eq!(t.session.0, LEGACY_SID);
    assert_eq!(t.records.len(), 3);
    assert_eq!(t.records[0].action, r#"shell({"command":["bash","-lc","ls"]})"#);
    assert_eq!(t.records[1].observation, b"3\n");
    // The action object in its compact form (key order as serde_json keeps it).
    let a = &t.records[2].action;
    assert!(a.starts_with("local_shell({") && a.contains(r#""command":["bash","-lc","ls tests"]"#), "{a}");
    assert_eq!(t.task, "How many Python files are there?");
}

#[test]
fn a_codex_sessions_folder_reads_every_rollout() {
    let inputs = read::expand_inputs(&[fixtures().join("codex")]).unwrap();
    let n: Vec<usize> = inputs.iter().map(|i| read::read_input(i).unwrap().unwrap()[0].records.len()).collect();
    assert_eq!(n, vec![6, 3]);
}

#[test]
fn errors_name_the_file_and_line() {
    let head = r#"{"type":"user","sessionId":"s","uuid":"u1","message":{"role":"user","content":"hi"}}"#;
    let p = tmp("cc-bad.jsonl", &format!("{head}\n\n{{not json\n"));
    let e = read::read_path(&p).unwrap_err().to_string();
    assert!(e.contains("cc-bad.jsonl: line 3: malformed JSON"), "{e}");
    let bad = r#"{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":7}]}}"#;
    let p = tmp("cc-shape.jsonl", &format!("{head}\n{bad}\n"));
    let e = read::read_path(&p).unwrap_err().to_string();
    assert!(e.ends_with("cc-shape.jsonl: line 2: tool_result content is a number, not text or blocks"), "{e}");
    let p = tmp("cc-type.jsonl", &format!("{head}\n{}\n", r#"{"uuid":"u3"}"#));
    let e = read::read_path(&p).unwrap_err().to_string();
    assert!(e.ends_with("cc-type.jsonl: line 2: has no string `type`"), "{e}");
    let meta = r#"{"timestamp":"t","type":"session_meta","payload":{"id":"c"}}"#;
    let bad = r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":3}}"#;
    let p = tmp("cx-bad.jsonl", &format!("{meta}\n{bad}\n"));
    let e = read::read_path(&p).unwrap_err().to_string();
    assert!(e.ends_with("cx-bad.jsonl: line 2: output is a number, not text"), "{e}");
    let p = tmp("cx-payload.jsonl", &format!("{meta}\n{}\n", r#"{"type":"response_item","payload":[1]}"#));
    let e = read::read_path(&p).unwrap_err().to_string();
    assert!(e.ends_with("cx-payload.jsonl: line 2: `payload` is an array, not an object"), "{e}");
}

#[test]
fn unknown_line_types_are_skipped() {
    let body = [
        r#"{"type":"queue-operation","operation":"dequeue","timestamp":"t","sessionId":"q"}"#,
        r#"{"type":"progress","data":{"x":1},"sessionId":"q","uuid":"p1"}"#,
        r#"{"type":"assistant","sessionId":"q","uuid":"a1","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#,
        r#"{"type":"user","sessionId":"q","uuid":"u1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a\nb"}]}}"#,
        r#"{"type":"attachment","sessionId":"q","uuid":"x1"}"#,
    ]
    .join("\n");
    let t = &read::read_path(&tmp("cc-types.jsonl", &body)).unwrap()[0];
    assert_eq!(t.session.0, "q");
    assert_eq!(t.records.len(), 1);
    assert_eq!(t.records[0].action, r#"Bash({"command":"ls"})"#);
    assert_eq!(t.task, "");
    let codex = [r#"{"timestamp":"t","type":"session_meta","payload":{"id":"c"}}"#, r#"{"timestamp":"t","type":"some_future_line","payload":{}}"#].join("\n");
    let t = &read::read_path(&tmp("cx-types.jsonl", &codex)).unwrap()[0];
    assert_eq!((t.session.0.as_str(), t.records.len()), ("c", 0));
}

/// A Codex MCP call carries its server's namespace apart from its name; the
/// reader names it as the proxy does (`mcp__lam__recall`), so the call has
/// one `§id` whether it is read from the rollout or seen on the wire.
#[test]
fn codex_mcp_calls_are_named_with_their_namespace() {
    let body = [
        r#"{"timestamp":"t","type":"session_meta","payload":{"id":"ns"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","namespace":"mcp__lam","name":"recall","arguments":"{\"id\":\"7cfd\"}","call_id":"c1"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"orig"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c2"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c2","output":"a"}}"#,
    ]
    .join("\n");
    let t = &read::read_path(&tmp("cx-ns.jsonl", &body)).unwrap()[0];
    let actions: Vec<&str> = t.records.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, [r#"mcp__lam__recall({"id":"7cfd"})"#, r#"exec_command({"cmd":"ls"})"#]);
}

#[test]
fn lam_jsonl_is_still_lam_jsonl() {
    let p = tmp("lam.jsonl", "\n{\"session\":\"s\",\"index\":0,\"action\":\"ls\",\"observation\":\"x\"}\n");
    let t = read::read_path(&p).unwrap();
    assert_eq!(t[0].format, Format::LamJsonl);
    // Not any agent's first line: read (and refused) as lam JSONL, as before.
    let p = tmp("other.jsonl", "{\"type\":\"x\",\"foo\":1}\n");
    let e = read::read_path(&p).unwrap_err().to_string();
    assert!(e.contains("other.jsonl: line 1: malformed JSON") && e.contains("unknown field"), "{e}");
    assert_eq!(lam_trajectory::agents::detect(b"\n  \n"), None);
}

#[test]
fn a_folder_walk_skips_jsonl_that_is_no_trajectory() {
    let dir = std::env::temp_dir().join(format!("lam-agents-walk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("journal.jsonl"), "{\"event\":\"start\"}\n").unwrap();
    std::fs::write(dir.join("s.jsonl"), "{\"session\":\"s\",\"index\":0,\"observation\":\"x\"}\n").unwrap();
    let inputs = read::expand_inputs(std::slice::from_ref(&dir)).unwrap();
    assert!(inputs.iter().all(|i| i.optional));
    let read: Vec<_> = inputs.iter().map(|i| read::read_input(i).unwrap().map(|t| t.len())).collect();
    assert_eq!(read, vec![None, Some(1)]);
    // Named on the command line, the same file is strict.
    let named = Input { path: dir.join("journal.jsonl"), optional: false };
    assert!(read::read_input(&named).is_err());
    // A recognised file found by a walk is strict too.
    std::fs::write(dir.join("t.jsonl"), "{\"session\":\"t\",\"index\":1,\"observation\":\"x\"}\n").unwrap();
    let t = Input { path: dir.join("t.jsonl"), optional: true };
    assert!(read::read_input(&t).is_err());
}

/// A model's answer in a transcript: Claude Code's `assistant` lines but the
/// ones it writes itself (`<synthetic>`, API errors), Codex's assistant
/// messages and calls; user lines and session metadata alone are none.
#[test]
fn a_model_answer_is_told_from_the_agents_own_lines() {
    use lam_trajectory::agents::model_answered;
    let user = r#"{"type":"user","sessionId":"s","uuid":"u1","message":{"role":"user","content":"hi"}}"#;
    let answer = r#"{"type":"assistant","sessionId":"s","uuid":"u2","message":{"role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello"}]}}"#;
    let login = r#"{"type":"assistant","sessionId":"s","uuid":"u3","isApiErrorMessage":true,"message":{"role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"Invalid API key · Please run /login"}]}}"#;
    assert!(!model_answered(user.as_bytes()));
    assert!(!model_answered(format!("{user}\n{login}\n").as_bytes()));
    assert!(model_answered(format!("{user}\n{answer}\n").as_bytes()));
    let meta = r#"{"timestamp":"t","type":"session_meta","payload":{"id":"c"}}"#;
    let asked = r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#;
    let call = r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}}"#;
    assert!(!model_answered(format!("{meta}\n{asked}\n").as_bytes()));
    assert!(model_answered(format!("{meta}\n{asked}\n{call}\n").as_bytes()));
    assert!(!model_answered(b"not json\n"));
}

/// Each record carries its result line's `timestamp` (Unix ms): Claude
/// Code's per-line one and Codex's envelope one; a line without one, or
/// with an unreadable one, gives `None`. Claude Code's TTL comes from which
/// cache its answers wrote to.
#[test]
fn records_carry_their_lines_timestamps() {
    let tu = |id: &str| format!(r#"{{"type":"tool_use","id":"{id}","name":"Bash","input":{{"command":"ls"}}}}"#);
    let tr = |id: &str| format!(r#"{{"type":"tool_result","tool_use_id":"{id}","content":"out"}}"#);
    let claude = [
        format!(
            r#"{{"type":"assistant","sessionId":"s","uuid":"a1","timestamp":"2026-01-06T09:15:59.901Z","message":{{"role":"assistant","content":[{}],"usage":{{"cache_creation":{{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":12}}}}}}}}"#,
            tu("t1")
        ),
        format!(r#"{{"type":"user","sessionId":"s","uuid":"u1","timestamp":"2026-01-06T09:16:06.951Z","message":{{"role":"user","content":[{}]}}}}"#, tr("t1")),
        format!(r#"{{"type":"assistant","sessionId":"s","uuid":"a2","message":{{"role":"assistant","content":[{}]}}}}"#, tu("t2")),
        format!(r#"{{"type":"user","sessionId":"s","uuid":"u2","timestamp":"not a time","message":{{"role":"user","content":[{}]}}}}"#, tr("t2")),
        format!(r#"{{"type":"user","sessionId":"s","uuid":"u3","timestamp":"2026-01-06T10:16:06+01:00","message":{{"role":"user","content":[{}]}}}}"#, tr("t1")),
    ]
    .join("\n");
    let t = &read::read_path(&tmp("times.jsonl", &claude)).unwrap()[0];
    assert_eq!(t.format, Format::Agent(Agent::ClaudeCode));
    let base = 1_767_690_966_951; // 2026-01-06T09:16:06.951Z
    assert_eq!(t.times, [Some(base), None, Some(base - 951)]);
    assert_eq!(t.cache_ttl, Some(3600), "the answers wrote to the 1-hour cache only");

    let codex = [
        r#"{"timestamp":"2025-11-01T01:02:58.871Z","type":"session_meta","payload":{"id":"c","cwd":"/r"}}"#,
        r#"{"timestamp":"2025-11-01T01:03:00.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}}"#,
        r#"{"timestamp":"2025-11-01T01:03:01.250Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"out"}}"#,
        r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"again"}}"#,
    ]
    .join("\n");
    let t = &read::read_path(&tmp("rollout-times.jsonl", &codex)).unwrap()[0];
    assert_eq!(t.format, Format::Agent(Agent::Codex));
    assert_eq!(t.times, [Some(1_761_958_981_250), None]);
    assert_eq!(t.cache_ttl, None);
}
