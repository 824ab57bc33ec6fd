//! What each agent's room answers: its names, how `lam run` launches it,
//! its batch form, its upstream, its compaction threshold and its forks.

use lam_core::wire::{self, Api};
use lam_trajectory::agents::{self, Agent, Arg, Setup};
use serde_json::{Map, Value, json};
use std::ffi::OsString;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn setup<'a>(args: &'a [OsString], env: &'a dyn Fn(&str) -> Option<String>, status_line: bool) -> Setup<'a> {
    const MCP: &[String] = &[];
    let cwd = std::path::Path::new("/nonexistent/lam-rooms");
    Setup { lam: "/bin/lam", mcp: MCP, origin: "http://127.0.0.1:7", args, cwd, status_line, budget: Some(100_000), env }
}

fn texts(args: &[Arg]) -> Vec<String> {
    args.iter()
        .map(|a| match a {
            Arg::Text(t) => t.to_string_lossy().into_owned(),
            Arg::File(f) => format!("<{f}>"),
        })
        .collect()
}

#[test]
fn agents_by_name_and_program() {
    for a in Agent::ALL {
        assert_eq!(a.name().parse::<Agent>(), Ok(a));
        assert_eq!(Agent::of_program(a.program()), Some(a));
        assert_eq!(a.program().parse::<Agent>(), Ok(a));
    }
    assert_eq!(Agent::of_program("aider"), None);
    let err = "gpt".parse::<Agent>().unwrap_err();
    assert!(err.starts_with("`gpt`: expected claude-code, codex"), "{err}");
}

#[test]
fn each_agent_has_a_room_of_its_own() {
    let names: std::collections::HashSet<&str> = Agent::ALL.iter().map(|a| a.room().name()).collect();
    let programs: std::collections::HashSet<&str> = Agent::ALL.iter().map(|a| a.room().program()).collect();
    assert_eq!((names.len(), programs.len()), (Agent::ALL.len(), Agent::ALL.len()));
    let db = std::path::Path::new("/x/opencode/opencode.db");
    assert_eq!(agents::database_of(db), Some(Agent::OpenCode));
    assert_eq!(agents::database_of(std::path::Path::new("/x/session.jsonl")), None);
    // A rollout's envelope is Codex's even when it also carries what a
    // Claude Code line does (`type` and `uuid`): the room that owns a first line is asked first.
    let envelope = br#"{"type":"session_meta","uuid":"u","payload":{"id":"c"}}"#;
    assert_eq!(agents::detect(envelope), Some(lam_trajectory::Format::Agent(Agent::Codex)));
    let claude = br#"{"type":"user","uuid":"u","sessionId":"s"}"#;
    assert_eq!(agents::detect(claude), Some(lam_trajectory::Format::Agent(Agent::ClaudeCode)));
}

#[test]
fn each_room_points_its_agent_at_the_proxy_and_registers_lam_mcp() {
    let none = |_: &str| None;
    let mcp = vec!["mcp".to_string(), "--store".to_string(), "/s".to_string()];
    let s = Setup { mcp: &mcp, ..setup(&[], &none, false) };
    let l = Agent::ClaudeCode.launch(&s);
    assert_eq!(l.env, [("ANTHROPIC_BASE_URL".to_string(), "http://127.0.0.1:7".to_string())]);
    assert_eq!(texts(&l.after), ["--mcp-config", "<mcp.json>"]);
    assert!(l.before.is_empty());
    let file: Value = serde_json::from_str(&l.files[0].1).unwrap();
    assert_eq!(file, json!({"mcpServers": {"lam": {"command": "/bin/lam", "args": ["mcp", "--store", "/s"]}}}));

    let l = Agent::Codex.launch(&s);
    assert_eq!(l.env, [("OPENAI_BASE_URL".to_string(), "http://127.0.0.1:7/v1".to_string())]);
    let before = texts(&l.before);
    assert_eq!(before[..4], ["-c", "openai_base_url=\"http://127.0.0.1:7/v1\"", "-c", "mcp_servers.lam.command=\"/bin/lam\""]);
    assert!(before.contains(&r#"mcp_servers.lam.args=["mcp","--store","/s"]"#.to_string()), "{before:?}");
    assert!(l.after.is_empty() && l.files.is_empty());
}

#[test]
fn the_status_line_is_registered_only_when_asked() {
    let none = |_: &str| None;
    for a in Agent::ALL {
        let (with, without) = (a.launch(&setup(&[], &none, true)), a.launch(&setup(&[], &none, false)));
        let all = |l: &agents::Launch| [texts(&l.before), texts(&l.after)].concat().join(" ");
        assert!(!all(&without).contains("status-line"), "{}", a.name());
        // The agents with a status line hook lam registers.
        let has_hook = [Agent::ClaudeCode, Agent::Codex].contains(&a);
        assert_eq!(all(&with).contains("status-line"), has_hook, "{}", a.name());
    }
    let claude = Agent::ClaudeCode.launch(&setup(&[], &none, true));
    assert!(texts(&claude.after).iter().any(|t| t.contains(r#""statusLine""#)));
}

#[test]
fn batch_forms() {
    let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
    assert!(Agent::ClaudeCode.batch(&args(&["-p", "hi"])) && Agent::ClaudeCode.batch(&args(&["--print"])));
    assert!(!Agent::ClaudeCode.batch(&args(&["--resume", "x"])));
    assert!(Agent::Codex.batch(&args(&["exec", "fix"])) && !Agent::Codex.batch(&args(&["resume", "x"])));
    assert!(Agent::OpenCode.batch(&args(&["run", "fix"])) && Agent::OpenCode.batch(&args(&["--log-level", "DEBUG", "run", "x"])));
    assert!(!Agent::OpenCode.batch(&args(&[])) && !Agent::OpenCode.batch(&args(&["-s", "ses_1"])) && !Agent::OpenCode.batch(&args(&["/work", "run"])));
}

#[test]
fn the_upstream_is_the_configured_base_url_else_the_vendor() {
    let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "https://gw.example/v1/".to_string());
    let cwd = std::env::temp_dir().join("lam-rooms-no-config");
    assert_eq!(Agent::Codex.upstream(&[], &cwd, &env), ("https://gw.example".to_string(), "from $OPENAI_BASE_URL".to_string()));
    assert_eq!(Agent::ClaudeCode.upstream(&[], &cwd, &env), ("https://api.anthropic.com".to_string(), "default for claude-code".to_string()));
    assert_eq!(Agent::ClaudeCode.base_url("http://h:1"), "http://h:1");
    assert_eq!(Agent::Codex.base_url("http://h:1"), "http://h:1/v1");
}

#[test]
fn compaction_thresholds_by_model() {
    for m in ["claude-sonnet-4-5-20250929", "claude-opus-4-6", "claude-haiku-4-5", "claude-opus-4-20250514", "claude-3-7-sonnet-latest"] {
        assert_eq!(Agent::ClaudeCode.compaction_threshold(m), Some(167_000), "{m}");
        assert_eq!(agents::compaction_threshold(m), Some(167_000), "{m}");
    }
    for m in ["claude-opus-4-7", "claude-sonnet-5", "claude-sonnet-4-6[1m]"] {
        assert_eq!(agents::compaction_threshold(m), Some(967_000), "{m}");
    }
    for m in ["gpt-5-codex", "gpt-5.5", "openai/gpt-5.1-codex-max"] {
        assert_eq!(Agent::Codex.compaction_threshold(m), Some(244_800), "{m}");
        assert_eq!(agents::compaction_threshold(m), Some(244_800), "{m}");
    }
    // opencode: the usable window (context less max output; input limit less reserved).
    assert_eq!(Agent::OpenCode.compaction_threshold("anthropic/claude-sonnet-4-5"), Some(168_000));
    assert_eq!(Agent::OpenCode.compaction_threshold("claude-opus-4-7"), Some(968_000));
    assert_eq!(Agent::OpenCode.compaction_threshold("openai/gpt-5"), Some(252_000));
    for m in ["my-proxy-alias", "llama-3-70b", "claude-mystery", ""] {
        assert_eq!(agents::compaction_threshold(m), None, "{m}");
    }
}

#[test]
fn forks_are_told_apart_from_fresh_subagents() {
    let claude = |t: &str| obj(json!({"role":"assistant","content":[{"type":"tool_use","id":"f","name":"Agent","input":{"prompt":"p","subagent_type":t}}]}));
    assert!(wire::calls(Api::Messages, &claude("fork")).iter().all(agents::is_fork));
    assert!(!wire::calls(Api::Messages, &claude("general-purpose")).iter().any(agents::is_fork));
    let codex = |turns: &str| {
        obj(json!({"type":"function_call","call_id":"s","name":"spawn_agent","arguments":format!("{{\"message\":\"m\",\"fork_turns\":\"{turns}\"}}")}))
    };
    assert!(wire::calls(Api::Responses, &codex("all")).iter().all(agents::is_fork));
    assert!(!wire::calls(Api::Responses, &codex("none")).iter().any(agents::is_fork));
    // As Codex 0.171.0 sends it with `--enable multi_agent_v2`.
    let namespaced = obj(json!({"type":"function_call","call_id":"s","name":"spawn_agent","namespace":"collaboration",
        "arguments":"{\"task_name\": \"t\", \"message\": \"m\", \"fork_turns\": \"all\"}"}));
    assert!(wire::calls(Api::Responses, &namespaced).iter().all(agents::is_fork));
    // Another namespace (`features.multi_agent_v2.tool_namespace`).
    let renamed = obj(json!({"type":"function_call","call_id":"s","name":"spawn_agent","namespace":"team",
        "arguments":"{\"message\": \"m\", \"fork_turns\": \"all\"}"}));
    assert!(wire::calls(Api::Responses, &renamed).iter().all(agents::is_fork));
}

#[test]
fn resume_lines_and_status_threads() {
    assert_eq!(Agent::ClaudeCode.resume("abc").0, "claude --resume abc");
    assert_eq!(Agent::OpenCode.resume("ses_1").0, "opencode --session ses_1");
    assert_eq!(Agent::Codex.resume("abc").0, "codex resume abc");
    let params = json!({"uri": "ui://lam/status", "_meta": {"com.openai/codex-statusline-state": {"thread": {"id": "019a"}}}});
    assert_eq!(agents::status_thread(&params), Some("019a"));
    assert_eq!(agents::status_thread(&json!({})), None);
}

/// opencode's one configuration layer for the run: both providers at the
/// proxy, `lam mcp` as server `lam`, merged over the user's inline layer
/// (JSON with comments), and compaction off while the budget is below its
/// threshold.
#[test]
fn opencode_is_configured_inline_over_the_users_settings() {
    let user = r#"{
        // mine
        "model": "anthropic/claude-sonnet-4-5",
        "provider": {"anthropic": {"options": {"apiKey": "k", "baseURL": "https://gw.example/v1"}}},
        "mcp": {"other": {"type": "remote", "url": "http://m"}},
    }"#;
    let env = move |k: &str| (k == "OPENCODE_CONFIG_CONTENT").then(|| user.to_string());
    let mcp = vec!["mcp".to_string(), "--store".to_string(), "/s".to_string(), "--run".to_string(), "r".to_string()];
    let s = Setup { mcp: &mcp, ..setup(&[], &env, true) };
    let l = Agent::OpenCode.launch(&s);
    assert!(l.before.is_empty() && l.after.is_empty() && l.files.is_empty() && l.notes.is_empty());
    let content = &l.env.iter().find(|(k, _)| k == "OPENCODE_CONFIG_CONTENT").expect("the config").1;
    let c: Value = serde_json::from_str(content).unwrap();
    assert_eq!(c["provider"]["anthropic"]["options"], json!({"apiKey": "k", "baseURL": "http://127.0.0.1:7/v1"}));
    assert_eq!(c["provider"]["openai"]["options"]["baseURL"], "http://127.0.0.1:7/v1");
    assert_eq!(c["mcp"]["lam"], json!({"type": "local", "command": ["/bin/lam", "mcp", "--store", "/s", "--run", "r"], "enabled": true}));
    assert_eq!(c["mcp"]["other"]["url"], "http://m");
    assert_eq!(c["model"], "anthropic/claude-sonnet-4-5");
    assert_eq!(c["compaction"]["auto"], false, "100,000 is below 168,000");
    assert!(l.env.contains(&("OPENCODE_DISABLE_AUTOUPDATE".to_string(), "1".to_string())));
    assert_eq!(Agent::OpenCode.recall_tool(), "lam_recall");

    // The user's base URL is the upstream.
    let cwd = std::env::temp_dir().join("lam-rooms-no-config");
    let (url, from) = Agent::OpenCode.upstream(&[], &cwd, &env);
    assert_eq!((url.as_str(), from.as_str()), ("https://gw.example", "from provider.anthropic.options.baseURL in $OPENCODE_CONFIG_CONTENT"));

    // A budget above the threshold, or none: it compacts on its own as it would.
    let none = |_: &str| None;
    for budget in [Some(500_000), None] {
        let l = Agent::OpenCode.launch(&Setup { budget, ..setup(&[], &none, false) });
        let c: Value = serde_json::from_str(&l.env[0].1).unwrap();
        assert!(c.get("compaction").is_none(), "{budget:?}: {c}");
    }
    // An OpenAI model: its vendor, unless configured.
    let args = ["run".into(), "-m".into(), "openai/gpt-5".into(), "x".into()];
    assert_eq!(Agent::OpenCode.upstream(&args, &cwd, &none).0, "https://api.openai.com");
    assert_eq!(Agent::OpenCode.upstream(&[], &cwd, &none).0, "https://api.anthropic.com");
    // A model whose limits the user configured (as the real-agent test does):
    // input 87,000 less min(20,000, 32,000) = 67,000.
    let limited = r#"{"model": "anthropic/m", "provider": {"anthropic": {"models": {"m": {"limit": {"context": 200000, "input": 87000, "output": 64000}}}}}}"#;
    let env = move |k: &str| (k == "OPENCODE_CONFIG_CONTENT").then(|| limited.to_string());
    for (budget, off) in [(67_000, true), (67_001, false)] {
        let l = Agent::OpenCode.launch(&Setup { budget: Some(budget), ..setup(&[], &env, false) });
        let c: Value = serde_json::from_str(&l.env[0].1).unwrap();
        assert_eq!(c["compaction"]["auto"] == json!(false), off, "{budget}");
    }
    // A user's layer that is no JSON: said, and lam's settings alone.
    let bad = |k: &str| (k == "OPENCODE_CONFIG_CONTENT").then(|| "{not json".to_string());
    let l = Agent::OpenCode.launch(&setup(&[], &bad, false));
    assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
}

/// Gemini CLI under a budget: an experiments file of the run's home, named
/// by `GEMINI_EXP`, turns its masking of old tool outputs off (flag
/// 45758817, the protected tokens), over the user's own flags; with no
/// budget its masking stays, and `GEMINI_EXP` is the user's.
#[test]
fn gemini_cli_masks_no_outputs_under_a_budget() {
    let dir = std::env::temp_dir().join(format!("lam-rooms-gemini-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mine = dir.join("exp.json");
    std::fs::write(&mine, r#"{"flags":[{"flagId":1,"boolValue":true},{"flagId":45758817,"intValue":"5"}],"experimentIds":[7]}"#).unwrap();
    let path = mine.to_string_lossy().into_owned();
    let env = move |k: &str| match k {
        "GEMINI_EXP" => Some(path.clone()),
        "HOME" => Some("/nonexistent/lam-rooms".into()),
        _ => None,
    };
    let l = Agent::GeminiCli.launch(&setup(&[], &env, false));
    let home = l.home.expect("a home of its own");
    assert_eq!(home.vars, [("GEMINI_EXP", std::path::PathBuf::from("lam-experiments.json"))]);
    let file = home.files.iter().find(|(p, _)| p.as_os_str() == "lam-experiments.json").expect("the experiments file");
    let exp: Value = serde_json::from_str(&file.1).unwrap();
    assert_eq!(exp["flags"], json!([{"flagId": 1, "boolValue": true}, {"flagId": 45758817, "intValue": "1000000000"}]));
    assert_eq!(exp["experimentIds"], json!([7]));

    let l = Agent::GeminiCli.launch(&Setup { budget: None, ..setup(&[], &env, false) });
    let home = l.home.expect("a home of its own");
    assert!(home.vars.is_empty() && home.files.iter().all(|(p, _)| p.as_os_str() != "lam-experiments.json"));

    let bad = |k: &str| (k == "GEMINI_EXP").then(|| "/nonexistent/lam-rooms/exp.json".to_string());
    let l = Agent::GeminiCli.launch(&setup(&[], &bad, false));
    assert!(l.notes.iter().any(|n| n.contains("GEMINI_EXP")), "{:?}", l.notes);
    std::fs::remove_dir_all(&dir).unwrap();
}
