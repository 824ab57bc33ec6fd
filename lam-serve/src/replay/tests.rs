use super::*;
use crate::bill::carries_tool_result;
use lam_core::wire::Api;
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
    let opencode = [r#"bash({"command":"ls","description":"list"})"#, r#"lam_recall({"id":"7cfd"})"#, r#"read({"filePath":"/a.py"})"#];
    for (agent, actions) in [(Agent::ClaudeCode, &claude[..]), (Agent::Codex, &codex[..]), (Agent::OpenCode, &opencode[..])] {
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
    assert_eq!(Pricing::parse("gemini"), Ok(Pricing::GEMINI));
    assert_eq!(Pricing::of(Api::Gemini), Pricing::GEMINI);
    assert_eq!(Pricing::of(Api::Messages), Pricing::ANTHROPIC);
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
    b.add(Api::Responses, &[x], 0, Pricing::OPENAI, &counter);
    b.add(Api::Responses, &[x, y], 0, Pricing::OPENAI, &counter);
    b.add(Api::Responses, &[z, y], 0, Pricing::OPENAI, &counter);
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
    for agent in Agent::ALL {
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
        assert!(carries_tool_result(Api::Responses, item.to_string().as_bytes()), "{t}");
    }
    let anthropic = br#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}"#;
    assert!(carries_tool_result(Api::Messages, anthropic));
    let gemini = br#"{"role":"user","parts":[{"functionResponse":{"id":"r","name":"read_file","response":{"output":"x"}}}]}"#;
    assert!(carries_tool_result(Api::Gemini, gemini));
    assert!(carries_tool_result(Api::ChatCompletions, br#"{"role":"tool","tool_call_id":"c","content":"x"}"#));
    for other in [&br#"{"type":"function_call","call_id":"c","arguments":"{}"}"#[..], br#"{"role":"user","content":"hi"}"#, b"not json", b"[]"] {
        assert!(Api::ALL.iter().all(|&api| !carries_tool_result(api, other)));
    }
}

#[test]
fn cache_ttl_parses_seconds_and_none_and_expires_past_it() {
    assert_eq!(CacheTtl::parse("300"), Ok(CacheTtl(Some(300))));
    assert_eq!(CacheTtl::parse("none"), Ok(CacheTtl::NONE));
    for bad in ["5m", "-1", "1.5", ""] {
        assert!(CacheTtl::parse(bad).is_err(), "{bad}");
    }
    let ttl = CacheTtl(Some(300));
    assert!(!ttl.expired(Some(0), Some(300_000)), "exactly the TTL: still warm");
    assert!(ttl.expired(Some(0), Some(300_001)));
    assert!(!ttl.expired(None, Some(10_000_000)) && !ttl.expired(Some(0), None), "unknown times never expire");
    assert!(!CacheTtl::NONE.expired(Some(0), Some(i64::MAX)), "none never expires");
}

/// After `expire`, a request reads nothing from the cache: every item and
/// the preamble are written, while `changed` still compares earlier items.
#[test]
fn an_expired_cache_writes_the_whole_prompt() {
    let counter = lam_core::SimpleCounter;
    let (x, y): (&[u8], &[u8]) = (b"\"a a\"", b"\"b b\"");
    let t = |s: &[u8]| counter.count(s) as f64;
    let mut b = Bill::default();
    b.add(Api::Messages, &[x], 5, Pricing::ANTHROPIC, &counter);
    b.expire();
    let billed = b.add(Api::Messages, &[x, y], 5, Pricing::ANTHROPIC, &counter);
    assert!((billed - (5.0 + t(x) + t(y)) * 1.25).abs() < 1e-9, "{billed}");
    let warm = b.add(Api::Messages, &[x, y], 5, Pricing::ANTHROPIC, &counter);
    assert!((warm - (5.0 + t(x) + t(y)) * 0.1).abs() < 1e-9, "the next one reads again: {warm}");
    assert_eq!(b.changed, 0);
}

/// A session replayed with timestamps: the request after a gap longer than
/// the TTL is a cache miss on both bills; `none` never expires, and a
/// session without timestamps bills as with `none`.
#[test]
fn a_gap_past_the_ttl_makes_the_next_request_a_miss_both_ways() {
    let counter = lam_core::SimpleCounter;
    let call = |out: &str, time| Call { time, ..Call::from_action("cat a.py", format!("{out}\nline two of {out}\n"), String::new()) };
    let minute = 60_000;
    let timed = [call("one", Some(0)), call("two", Some(minute)), call("three", Some(12 * minute)), call("four", Some(13 * minute))];
    let untimed: Vec<Call> = timed.iter().map(|c| Call { time: None, ..c.clone() }).collect();
    for agent in Agent::ALL {
        let pricing = Pricing::ANTHROPIC;
        let run = |calls: &[Call], ttl| {
            let proxy = Proxy::open(crate::config::ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
            replay(&proxy, agent, "s", "task", calls, (pricing, ttl), &counter)
        };
        let (warm, cold) = (run(&timed, CacheTtl::NONE), run(&timed, CacheTtl(Some(300))));
        assert_eq!((warm.requests_after_expiry, cold.requests_after_expiry), (0, 1), "{agent:?}");
        assert!(cold.billed_direct > warm.billed_direct && cold.billed_lam > warm.billed_lam, "{agent:?}: both bills pay the miss");
        // The miss re-writes what was read: 1.25x instead of 0.1x for the cached part, on each bill.
        let extra = cold.billed_direct - warm.billed_direct;
        assert!(cold.billed_direct_expired > extra && cold.expired_share() > 0.0 && warm.expired_share() == 0.0, "{agent:?}");
        assert_eq!(cold.earlier_changed, warm.earlier_changed);
        let untimed = run(&untimed, CacheTtl(Some(300)));
        assert_eq!((untimed.requests_after_expiry, untimed.billed_direct, untimed.billed_lam), (0, warm.billed_direct, warm.billed_lam), "{agent:?}");
    }
}

/// `cited_then_used`: a cut cites the first log; the agent's next turns
/// quote a line of it (counted once), a line another result still shows
/// (not counted: it is visible) and a short line (not distinctive).
#[test]
fn a_cited_line_the_agent_quotes_later_is_counted_once() {
    let counter = lam_core::SimpleCounter;
    let needed = "ERROR: the frobnicator failed at step 42 with code 7";
    let shared = "shared line that the fifth output shows again, verbatim";
    let log = |tag: &str, extra: &str| -> String {
        let mut lines: Vec<String> = (0..40).map(|i| format!("{tag} record {i}: value {} of the {tag} series", i * 7 + tag.len())).collect();
        lines.insert(20, extra.to_string());
        lines.join("\n") + "\n"
    };
    let quote = |thought: &str, cmd: &str| Call::from_action(&format!(r#"Bash({{"command":{}}})"#, serde_json::json!(cmd)), "ok\n".into(), thought.into());
    let mut calls = vec![
        Call::from_action("cat first.log", log("alpha", &format!("{needed}\n{shared}")), String::new()),
        Call::from_action("cat second.log", log("beta", "-"), String::new()),
        Call::from_action("cat third.log", log("gamma", "-"), String::new()),
        Call::from_action("cat fourth.log", log("delta", "-"), String::new()),
        Call::from_action("cat fifth.log", log("epsilon", shared), String::new()),
    ];
    calls.push(quote(&format!("The log said `{needed}`, and `{shared}`."), "echo ok"));
    calls.push(quote("again", &format!("grep -n '{needed}' first.log; echo code 7")));
    let run = |calls: &[Call], budget: Option<u64>| {
        let mut cfg = crate::config::ServeConfig::for_tests("http://127.0.0.1:9");
        cfg.engine.budget = budget.map(|b| crate::config::Budget::new(b, None, Some(1)).unwrap());
        let proxy = Proxy::open(cfg).unwrap();
        replay(&proxy, Agent::ClaudeCode, "s", "task", calls, (Pricing::ANTHROPIC, CacheTtl::NONE), &counter)
    };
    let r = run(&calls, Some(1500));
    assert!(r.citations >= 1, "the budget cites the first log: {r:?}");
    assert_eq!(r.cited_then_used, 1, "quoted twice, counted once");
    assert_eq!(run(&calls, None).cited_then_used, 0, "nothing cited");
    // Only the line another result shows, and a short one: nothing taken away was used.
    let mut unused = calls.clone();
    (unused[5], unused[6]) = (quote(&format!("`{shared}`"), "echo step 42"), quote("no quote", "ls"));
    let r = run(&unused, Some(1500));
    assert!(r.citations >= 1);
    assert_eq!(r.cited_then_used, 0);
    assert_eq!(
        distinctive_lines("     1→fn main() { println!(\"hello, world\"); }\n     2→}\n3\tshort\n12\tlet answer_to_everything = 42;\n"),
        ["fn main() { println!(\"hello, world\"); }", "let answer_to_everything = 42;"],
        "line numbers are no part of a line; short ones are not distinctive"
    );
}

/// A citation's `§id` is its first one, 4 hex digits or more.
#[test]
fn a_citation_s_id_is_read_from_its_text() {
    let c = format!("{} `cat a.py` → §9f3a rc=0 12 tok 40 B\n  _recall §9f3a", crate::budget::CITED_LEAD);
    assert_eq!(super::section_ids(&c).next(), Some("9f3a"));
    assert_eq!(super::section_ids("no id here").next(), None);
    assert_eq!(super::section_ids("§9f3").next(), None, "too short");
}
