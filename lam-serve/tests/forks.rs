//! A forked subagent (Claude Code's `Agent` with `subagent_type: "fork"`,
//! Codex's `spawn_agent` with `fork_turns`) sends its parent's whole history
//! followed by its own items. It gets a session of its own that starts from
//! the parent's conversation, the parent keeps its session, and both stay
//! prefix-stable, whichever comes first.
//!
//! Two shapes of the fork's first request: one where it carries a task
//! message after the fork call, and the one the pinned Claude Code sends
//! (recorded by running it against a scripted upstream, `docs/agents.md`,
//! "How the agents fork a subagent"), where the child answers the fork call
//! with a tool result of its own, so the parent and the child both answer it,
//! with different outputs; and Codex's (`codex_forks_in_their_real_shape`):
//! `spawn_agent` in the `collaboration` namespace, the child answering it
//! "aborted" and getting its task as an `agent_message`. Both agents also
//! fork through `lam run` in `scripts/test-agents.sh`.

use lam_serve::{Api, Proxy, ServeConfig};
use serde_json::{Value, json};

fn log(tag: &str) -> String {
    (0..30).map(|i| format!("{tag} line {i} of the test log\n")).collect()
}

fn bash(id: &str, cmd: &str, out: &str) -> [Value; 2] {
    [
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": cmd}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": out}]}),
    ]
}

fn fork_call() -> Value {
    json!({"role": "assistant", "content": [{"type": "tool_use", "id": "fork_1", "name": "Agent", "input": {"description": "try it", "prompt": "Try the other fix.", "subagent_type": "fork"}}]})
}

fn body(items: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "m", "max_tokens": 8, "system": "You are Claude Code.", "messages": items})).unwrap()
}

fn sent(b: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(b).unwrap();
    v["messages"].as_array().unwrap().clone()
}

/// A request's store session and the messages forwarded for it.
type Sent = (Option<String>, Vec<Value>);

/// The parent's history, then the fork's first request and the parent's
/// continuation in `order`; the proxy sessions each request lands in and
/// what it forwarded.
fn run(fork_first: bool, answered: bool) -> (Proxy, Vec<Sent>) {
    let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
    let mut parent = vec![json!({"role": "user", "content": "Fix the failing test."})];
    parent.extend(bash("t1", "pytest -q", &log("A")));
    let mut fork = parent.clone();
    fork.push(fork_call());
    fork.push(match answered {
        // Claude Code 2.1.332: the child answers the call itself.
        true => json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "fork_1", "content": "Fork started \u{2014} that fork is you."},
            {"type": "text", "text": "<fork-boilerplate> You are a worker fork. The transcript above is the parent's history. Your directive: Try the other fix."}
        ]}),
        false => json!({"role": "user", "content": "You are a fork of the conversation above. Try the other fix."}),
    });
    let mut fork2 = fork.clone();
    fork2.extend(bash("t2", "pytest -q", &log("A")));
    let mut cont = parent.clone();
    cont.extend([fork_call(), json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "fork_1", "content": "The other fix works."}]})]);
    let mut cont2 = cont.clone();
    cont2.extend(bash("t3", "pytest -q", &log("A")));
    let order: Vec<&Vec<Value>> = if fork_first { vec![&parent, &fork, &fork2, &cont, &cont2] } else { vec![&parent, &cont, &fork, &cont2, &fork2] };
    let out = order
        .into_iter()
        .map(|items| {
            let r = proxy.rewrite(Api::Messages, None, &body(items));
            (r.session, sent(&r.body))
        })
        .collect();
    (proxy, out)
}

#[test]
fn a_fork_gets_its_own_session_and_the_parent_keeps_its_own() {
    for (fork_first, answered) in [(true, false), (false, false), (true, true), (false, true)] {
        let (proxy, out) = run(fork_first, answered);
        let st = proxy.stats();
        assert_eq!(st.sessions_created, 2, "fork_first {fork_first}: one session for the parent, one for the fork");
        let by_session = |s: &Option<String>| out.iter().filter(|(x, _)| x == s).count();
        assert_eq!(by_session(&out[0].0), 5, "both archive in the parent's store session");
        let mut requests: Vec<u64> = st.sessions.iter().map(|s| s.requests).collect();
        if answered {
            // Both answer the call: whichever comes first keeps the session.
            requests.sort_unstable_by(|a, b| b.cmp(a));
        }
        assert_eq!(requests, [3, 2], "fork_first {fork_first}, answered {answered}: the parent keeps its session (3 requests), the fork has 2");
        // Every request forwards the parent's history exactly as the first did.
        let first = &out[0].1;
        for (_, items) in &out[1..] {
            assert_eq!(&items[..first.len()], &first[..], "fork_first {fork_first}: prefix-stable");
        }
        // Each branch's own later requests forward its earlier items as before.
        let (fork1, fork2) = if fork_first { (&out[1].1, &out[2].1) } else { (&out[2].1, &out[4].1) };
        assert_eq!(&fork2[..fork1.len()], &fork1[..]);
        let (cont1, cont2) = if fork_first { (&out[3].1, &out[4].1) } else { (&out[1].1, &out[3].1) };
        assert_eq!(&cont2[..cont1.len()], &cont1[..]);
        // Both branches saw log A in the parent's history: its rerun is a stub in each.
        for last in [fork2, cont2] {
            let text = last.last().unwrap()["content"][0]["content"].as_str().unwrap();
            assert!(text.starts_with("[lam: same output as last time"), "fork_first {fork_first}: {text}");
        }
    }
}

fn exec(id: &str, cmd: &str, out: &str) -> [Value; 2] {
    let args = serde_json::to_string(&json!({"cmd": cmd})).unwrap();
    [
        json!({"type": "function_call", "call_id": id, "name": "exec_command", "arguments": args}),
        json!({"type": "function_call_output", "call_id": id, "output": out}),
    ]
}

fn responses(items: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "m", "instructions": "You are Codex.", "input": items, "stream": true})).unwrap()
}

/// Codex 0.171.0 with `--enable multi_agent_v2`, as recorded against a
/// scripted upstream (`docs/agents.md`): the namespaced `spawn_agent` call,
/// answered "aborted" in the child and with the task's name in the parent.
#[test]
fn codex_forks_in_their_real_shape() {
    for fork_first in [true, false] {
        let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
        let mut parent = vec![json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]})];
        parent.extend(exec("c1", "pytest -q", &log("A")));
        let args = r#"{"task_name": "forktest", "message": "Try the other fix.", "fork_turns": "all"}"#;
        let call = json!({"type": "function_call", "call_id": "s1", "name": "spawn_agent", "namespace": "collaboration", "arguments": args});
        let mut fork = parent.clone();
        fork.extend([
            call.clone(),
            json!({"type": "function_call_output", "call_id": "s1", "output": "aborted"}),
            json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are now a newly spawned child agent."}]}),
            json!({"type": "agent_message", "author": "/root", "recipient": "/root/forktest", "content": [{"type": "input_text", "text": "Message Type: NEW_TASK\nTry the other fix."}]}),
        ]);
        fork.extend(exec("c2", "pytest -q", &log("A")));
        let mut cont = parent.clone();
        cont.extend([call, json!({"type": "function_call_output", "call_id": "s1", "output": "{\"task_name\":\"/root/forktest\"}"})]);
        cont.extend(exec("c3", "pytest -q", &log("A")));
        let order = if fork_first { [&parent, &fork, &cont] } else { [&parent, &cont, &fork] };
        let out: Vec<(Option<String>, Vec<Value>)> = order
            .iter()
            .map(|items| {
                let r = proxy.rewrite(Api::Responses, None, &responses(items));
                let v: Value = serde_json::from_slice(&r.body).unwrap();
                (r.session, v["input"].as_array().unwrap().clone())
            })
            .collect();
        let st = proxy.stats();
        assert_eq!(st.sessions_created, 2, "fork_first {fork_first}: one session for the parent, one for the fork");
        assert!(out.iter().all(|(s, _)| s == &out[0].0), "both archive in the parent's store session");
        assert_eq!(st.sessions.iter().map(|s| s.observations).sum::<u64>(), 1 + 2 + 2, "the fork does not admit the parent's history again");
        for (_, items) in &out[1..] {
            assert_eq!(&items[..out[0].1.len()], &out[0].1[..], "fork_first {fork_first}: prefix-stable");
            let text = items.last().unwrap()["output"].as_str().unwrap();
            assert!(text.starts_with("[lam: same output as last time"), "fork_first {fork_first}: {text}");
        }
    }
}
