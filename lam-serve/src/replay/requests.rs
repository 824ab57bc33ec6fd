//! The requests an agent sends for a recorded session: Claude Code's
//! `/v1/messages` and Codex's `/v1/responses`, as observed on the wire
//! (`docs/agents.md`), and the tool results read back from a forwarded body.

use lam_core::wire::Agent;
use serde_json::{Value, json};

/// One tool call of a recorded session and its result.
#[derive(Debug, Clone)]
pub struct Call {
    /// Tool name.
    pub name: String,
    /// Its arguments exactly as its action has them: a JSON object's text,
    /// or the raw input of a custom tool (Codex's code-mode `exec` script).
    pub arguments: String,
    /// The result text.
    pub output: String,
    /// The model's text before the call.
    pub thought: String,
    /// When its result was recorded (Unix ms; the transcript's timestamp),
    /// so when the request that carries it was sent; `None` when not recorded.
    pub time: Option<i64>,
}

impl Call {
    /// A call from a record's action (`name(arguments)`, the one action
    /// rule, `lam_core::action`); any other action is a `bash` command.
    pub fn from_action(action: &str, output: String, thought: String) -> Self {
        let (name, arguments) = match lam_core::action::split(action) {
            Some((name, args)) => (name.to_string(), args.to_string()),
            None => ("bash".to_string(), json!({ "command": action }).to_string()),
        };
        Self { name, arguments, output, thought, time: None }
    }

    /// The arguments as a JSON object, when they are one.
    pub fn input(&self) -> Option<Value> {
        serde_json::from_str(&self.arguments).ok().filter(Value::is_object)
    }

    /// The call as Claude Code sends it: a `tool_use` block, whose input is
    /// an object (a call whose arguments are not one becomes a `bash` command
    /// of its action).
    fn claude_tool_use(&self, id: &str) -> Value {
        match self.input() {
            Some(input) => json!({"type": "tool_use", "id": id, "name": self.name, "input": input}),
            None => json!({"type": "tool_use", "id": id, "name": "bash", "input": {"command": lam_core::action::tool_call(&self.name, &self.arguments)}}),
        }
    }

    /// The call and its output as Codex sends them: a `function_call` with
    /// the arguments as written, or a `custom_tool_call` when they are no
    /// JSON object (code mode's `exec`).
    fn codex_items(&self, id: &str) -> [Value; 2] {
        match self.input() {
            Some(_) => [
                json!({"type": "function_call", "name": self.name, "arguments": self.arguments, "call_id": id}),
                json!({"type": "function_call_output", "call_id": id, "output": self.output}),
            ],
            None => [
                json!({"type": "custom_tool_call", "name": self.name, "input": self.arguments, "call_id": id}),
                json!({"type": "custom_tool_call_output", "call_id": id, "output": self.output}),
            ],
        }
    }
}

/// The request bodies an agent sends for `calls`: the task alone, then one
/// more tool result each time.
pub fn requests(agent: Agent, task: &str, calls: &[Call]) -> Vec<Vec<u8>> {
    (0..=calls.len()).map(|k| request(agent, task, &calls[..k], calls)).collect()
}

fn tools(all: &[Call], agent: Agent) -> Vec<Value> {
    let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let schema = json!({"type": "object"});
    match agent {
        Agent::ClaudeCode => names.iter().map(|n| json!({"name": n, "description": n, "input_schema": schema})).collect(),
        Agent::Codex => names.iter().map(|n| json!({"type": "function", "name": n, "description": n, "parameters": schema, "strict": false})).collect(),
    }
}

fn request(agent: Agent, task: &str, calls: &[Call], all: &[Call]) -> Vec<u8> {
    let body = match agent {
        Agent::ClaudeCode => claude_code(task, calls, tools(all, agent)),
        Agent::Codex => codex(task, calls, tools(all, agent)),
    };
    serde_json::to_vec(&body).expect("a JSON value serialises")
}

/// Claude Code 2.1.328's request as observed on the wire (`docs/agents.md`,
/// "Real agents on the wire"): three `system` blocks (the last two marked), a
/// first user turn of a system reminder and the task, a `role: "system"`
/// environment message that is one marked text block while it is the last
/// message and a plain string after, and `cache_control` on the last block
/// of the last message only (tools unmarked).
fn claude_code(task: &str, calls: &[Call], tools: Vec<Value>) -> Value {
    let eph = json!({"type": "ephemeral"});
    let reminder = "<system-reminder>\nAs you answer the user's questions, you can use the following context. (replayed by lam replay)\n</system-reminder>";
    let env = "# Environment\nYou have been invoked in the following environment: (replayed by lam replay)";
    let mut msgs = vec![
        json!({"role": "user", "content": [{"type": "text", "text": reminder}, {"type": "text", "text": task}]}),
        if calls.is_empty() { json!({"role": "system", "content": [{"type": "text", "text": env}]}) } else { json!({"role": "system", "content": env}) },
    ];
    for (k, c) in calls.iter().enumerate() {
        let id = format!("toolu_{k:04}");
        let mut blocks = Vec::new();
        if !c.thought.is_empty() {
            blocks.push(json!({"type": "text", "text": c.thought}));
        }
        blocks.push(c.claude_tool_use(&id));
        msgs.push(json!({"role": "assistant", "content": blocks}));
        msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": c.output}]}));
    }
    if let Some(last) = msgs.last_mut().and_then(|m| m["content"].as_array_mut()).and_then(|b| b.last_mut()) {
        last["cache_control"] = eph.clone();
    }
    json!({
        "model": "claude-opus-4-6", "messages": msgs,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328; cc_entrypoint=cli;"},
                   {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": eph},
                   {"type": "text", "text": "(replayed by lam replay)", "cache_control": eph}],
        "tools": tools,
        "metadata": {"user_id": "{\"device_id\":\"replay\",\"account_uuid\":\"\",\"session_id\":\"replay\"}"},
        "max_tokens": 32000, "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "stream": true,
    })
}

fn codex(task: &str, calls: &[Call], tools: Vec<Value>) -> Value {
    let mut input = vec![json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]})];
    for (k, c) in calls.iter().enumerate() {
        let id = format!("call_{k:04}");
        if !c.thought.is_empty() {
            input.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": c.thought}]}));
        }
        input.extend(c.codex_items(&id));
    }
    json!({
        "model": "gpt-5-codex", "instructions": "You are Codex. (replayed by lam replay)",
        "input": input, "tools": tools, "tool_choice": "auto", "parallel_tool_calls": false,
        "stream": true, "store": false,
    })
}

/// The tool results of a body [`requests`] made for `agent` (as the proxy
/// forwarded it), in order, as text.
pub fn forwarded_results(agent: Agent, body: &[u8]) -> Vec<String> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return Vec::new() };
    let text = |c: &Value| match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    };
    let is = |x: &Value, t: &str| x.get("type").and_then(Value::as_str) == Some(t);
    match agent {
        Agent::ClaudeCode => v["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| is(b, "tool_result"))
            .map(|b| text(&b["content"]))
            .collect(),
        Agent::Codex => {
            let outputs = v["input"].as_array().into_iter().flatten().filter(|x| is(x, "function_call_output") || is(x, "custom_tool_call_output"));
            outputs.map(|x| text(&x["output"])).collect()
        }
    }
}
