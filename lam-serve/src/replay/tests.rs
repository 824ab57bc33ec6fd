use super::*;
use serde_json::json;

#[test]
fn actions_round_trip_to_calls() {
    let c = Call::from_action(r#"Bash({"command":"ls","description":"list"})"#, String::new(), String::new());
    assert_eq!((c.name.as_str(), c.arguments.as_str()), ("Bash", r#"{"command":"ls","description":"list"}"#));
    let c = Call::from_action("ls -la", String::new(), String::new());
    assert_eq!((c.name.as_str(), c.input()), ("bash", Some(json!({"command": "ls -la"}))));
}

/// A request synthesised for a transcript reads back (`lam_core::wire`,
/// what the proxy reads) as the transcript's own actions, so every call
/// keeps its `§id` through `lam replay`: Codex arguments as written
/// (spaces, key order), an MCP call with its namespace, a code-mode `exec`.
#[test]
fn a_synthesised_request_reads_back_as_the_same_actions() {
    let claude = [r#"Bash({"command":"ls","description":"list"})"#, r#"mcp__lam__recall({"id":"7cfd"})"#, r#"Read({"file_path":"/a.py"})"#];
    let codex = [
        r#"exec_command({"cmd": "ls", "workdir": "/repo"})"#,
        r#"mcp__lam__recall({"id":"7cfd"})"#,
        "exec(const r = await tools.exec_command({\"cmd\": \"pytest\"});\ntext(r.output);)",
        "apply_patch(*** Begin Patch\n*** End Patch)",
    ];
    for (agent, actions) in [(Agent::ClaudeCode, &claude[..]), (Agent::Codex, &codex[..])] {
        let calls: Vec<Call> = actions.iter().map(|a| Call::from_action(a, "out\n".into(), String::new())).collect();
        let body: Value = serde_json::from_slice(&requests(agent, "task", &calls).pop().unwrap()).unwrap();
        let items = body[agent.api().list_field()].as_array().unwrap();
        let read: Vec<String> = items.iter().filter_map(Value::as_object).flat_map(|o| lam_core::wire::calls(agent.api(), o)).map(|c| c.action()).collect();
        assert_eq!(read, actions, "{agent:?}");
        assert_eq!(forwarded_results(agent, &serde_json::to_vec(&body).unwrap()).len(), actions.len());
    }
}

#[test]
fn pricing_presets_and_custom() {
    assert_eq!(Pricing::parse("anthropic"), Ok(Pricing::ANTHROPIC));
    assert_eq!(Pricing::parse("read=0.25,write=1"), Ok(Pricing { read: 0.25, write: 1.0 }));
    assert!(Pricing::parse("read=x").is_err());
    assert!(Pricing::parse("read=0.1").is_err());
    assert!(Pricing::parse("read=-1,write=1").is_err());
}

#[test]
fn billing_reads_the_shared_prefix() {
    let counter = lam_core::SimpleCounter;
    let mut b = Bill::default();
    let (x, y, z): (&[u8], &[u8], &[u8]) = (b"\"a a\"", b"\"b b\"", b"\"c c\"");
    b.add(&[x], 0, Pricing::OPENAI, &counter);
    b.add(&[x, y], 0, Pricing::OPENAI, &counter);
    b.add(&[z, y], 0, Pricing::OPENAI, &counter);
    let t = |s: &[u8]| counter.count(s) as f64;
    let want = t(x) + (t(x) * 0.1 + t(y)) + (t(z) + t(y));
    assert!((b.billed - want).abs() < 1e-9, "{} vs {want}", b.billed);
    assert_eq!(b.changed, 1, "item 0 changed in the third request");
}

#[test]
fn a_withheld_line_is_counted_in_both_shapes() {
    let counter = lam_core::SimpleCounter;
    let out = |o: &str| Call::from_action("cat a.py", o.to_string(), String::new());
    let calls = [out("x = 1\ny = 2\n"), out("x = 1\ny = 3\n")];
    for agent in [Agent::ClaudeCode, Agent::Codex] {
        let body = requests(agent, "task", &calls).pop().unwrap();
        assert_eq!(forwarded_results(agent, &body), ["x = 1\ny = 2\n", "x = 1\ny = 3\n"]);
        let mut r = SessionReport::default();
        hidden_lines(&mut r, &calls, &forwarded_results(agent, &body), &counter);
        assert_eq!((r.new_lines, r.new_lines_hidden), (3, 0));
        let stubbed = String::from_utf8(body).unwrap().replace("x = 1\\ny = 3\\n", "[lam: similar to lines 1-2 of `cat a.py`]");
        let mut r = SessionReport::default();
        hidden_lines(&mut r, &calls, &forwarded_results(agent, stubbed.as_bytes()), &counter);
        assert_eq!((r.new_lines, r.new_lines_hidden), (3, 1), "{agent:?}");
    }
}

/// The bill's tool-result share knows every output item `lam_core::wire`
/// knows: the four Responses output types and Anthropic `tool_result`s.
#[test]
fn every_output_type_of_the_wire_carries_a_tool_result() {
    for t in lam_core::wire::RESPONSES_OUTPUTS {
        let item = serde_json::json!({"type": t, "call_id": "c", "output": "x"});
        assert!(carries_tool_result(item.to_string().as_bytes()), "{t}");
    }
    let anthropic = br#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}"#;
    assert!(super::carries_tool_result(anthropic));
    for other in [&br#"{"type":"function_call","call_id":"c","arguments":"{}"}"#[..], br#"{"role":"user","content":"hi"}"#, b"not json", b"[]"] {
        assert!(!carries_tool_result(other));
    }
}
