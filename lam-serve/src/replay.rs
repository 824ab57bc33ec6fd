//! `lam replay`: a recorded session sent through the proxy's engine the way
//! its agent sends it, one request per tool result, and what the provider
//! would bill for it with and without `lam`.
//!
//! Two wire shapes: Claude Code's (`POST /v1/messages` as 2.1.328 sends it:
//! a `system` array, tools, streaming, a `role: "system"` message that turns
//! from a marked block into a string, `cache_control` on the last block of
//! the last message, moved every request) and Codex's (`POST /v1/responses`:
//! `instructions`, `function_call` / `function_call_output` items). The
//! upstream is in-process: each forwarded body is measured, nothing is sent.
//!
//! Billing follows prompt caching: a request's prompt is the preamble and its
//! items; the items it shares, from the start, with the previous request of
//! the session (identity: bytes without annotations) are cache reads, the
//! rest cache writes (or plain input where the provider has no write
//! premium). Tokens are cl100k of each item's JSON bytes, the same for both
//! paths, so the ratio is what matters.

use crate::Proxy;
use crate::canon;
use lam_core::TokenCounter;
use lam_core::wire::Agent;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Instant;

/// Prompt-cache pricing, as multiples of the plain input price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pricing {
    /// Price of a cached prefix token (cache read).
    pub read: f64,
    /// Price of a token not read from the cache (cache write, or plain input).
    pub write: f64,
}

impl Pricing {
    /// Anthropic: cache writes 1.25x, reads 0.1x.
    pub const ANTHROPIC: Pricing = Pricing { read: 0.1, write: 1.25 };
    /// OpenAI: cached input 0.1x, no write premium.
    pub const OPENAI: Pricing = Pricing { read: 0.1, write: 1.0 };

    /// `anthropic`, `openai`, or `read=R,write=W`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "anthropic" => return Ok(Self::ANTHROPIC),
            "openai" => return Ok(Self::OPENAI),
            _ if !s.contains('=') => return Err(format!("`{s}`: expected anthropic, openai or read=R,write=W")),
            _ => {}
        }
        let (mut read, mut write) = (None, None);
        for part in s.split(',') {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}`: expected KEY=NUMBER"))?;
            let v: f64 = v.trim().parse().map_err(|_| format!("`{part}`: not a number"))?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("`{part}`: must be a finite number >= 0"));
            }
            match k.trim() {
                "read" => read = Some(v),
                "write" => write = Some(v),
                other => return Err(format!("`{other}`: expected read or write")),
            }
        }
        match (read, write) {
            (Some(read), Some(write)) => Ok(Self { read, write }),
            _ => Err(format!("`{s}`: expected anthropic, openai or read=R,write=W")),
        }
    }
}

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
}

impl Call {
    /// A call from a record's action (`name(arguments)`, the one action
    /// rule, `lam_core::action`); any other action is a `bash` command.
    pub fn from_action(action: &str, output: String, thought: String) -> Self {
        let (name, arguments) = match lam_core::action::split(action) {
            Some((name, args)) => (name.to_string(), args.to_string()),
            None => ("bash".to_string(), json!({ "command": action }).to_string()),
        };
        Self { name, arguments, output, thought }
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

/// One replayed session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionReport {
    /// Session name (the transcript's).
    pub session: String,
    /// Requests sent (the task, then one per tool result).
    pub requests: usize,
    /// Proxy sessions the requests made (1 when every request continued the first).
    pub proxy_sessions: u64,
    /// Tool results sent (non-empty ones: the proxy admits each of those once).
    pub tool_results: u64,
    /// Observations admitted.
    pub admitted: u64,
    /// cl100k tokens of the tool results sent, and of what was forwarded for them.
    pub tool_tokens_in: u64,
    /// See `tool_tokens_in`.
    pub tool_tokens_out: u64,
    /// Earlier items whose bytes (annotations aside) changed between requests: must be 0.
    pub earlier_changed: u64,
    /// Lines of the tool results shown for the first time (`lam_core::newlines`).
    pub new_lines: u64,
    /// New lines that no line of what lam forwarded for their tool result equals: must be 0.
    pub new_lines_hidden: u64,
    /// cl100k tokens of the hidden new lines.
    pub new_tokens_hidden: u64,
    /// Prompt tokens over all requests (direct).
    pub prompt_tokens: u64,
    /// Prompt tokens of the last request (direct): everything the session sent, once.
    pub final_prompt_tokens: u64,
    /// Billed input units, direct to the provider.
    pub billed_direct: f64,
    /// Billed input units through `lam`.
    pub billed_lam: f64,
    /// The part of `billed_direct` for items carrying tool results.
    pub billed_direct_tool: f64,
    /// Milliseconds the proxy took per request (parse, match, archive, admit, write).
    pub added_ms: Vec<f64>,
    /// Milliseconds of it spent admitting the request's new observations.
    pub admit_ms: Vec<f64>,
}

impl SessionReport {
    /// Removal of tool-result tokens.
    pub fn removal(&self) -> f64 {
        lam_operator::removal(self.tool_tokens_in, self.tool_tokens_out)
    }

    /// Share of the session's prompt (sent once) that is tool results.
    pub fn tool_share(&self) -> f64 {
        if self.final_prompt_tokens == 0 { 0.0 } else { (self.tool_tokens_in as f64 / self.final_prompt_tokens as f64).min(1.0) }
    }

    /// Share of the direct bill paid for items carrying tool results.
    pub fn tool_bill_share(&self) -> f64 {
        if self.billed_direct == 0.0 { 0.0 } else { self.billed_direct_tool / self.billed_direct }
    }

    /// Billed input through `lam` over direct.
    pub fn billed_ratio(&self) -> f64 {
        if self.billed_direct == 0.0 { 1.0 } else { self.billed_lam / self.billed_direct }
    }

    /// Add another session (totals).
    pub fn absorb(&mut self, o: &SessionReport) {
        self.requests += o.requests;
        self.proxy_sessions += o.proxy_sessions;
        self.tool_results += o.tool_results;
        self.admitted += o.admitted;
        self.tool_tokens_in += o.tool_tokens_in;
        self.tool_tokens_out += o.tool_tokens_out;
        self.earlier_changed += o.earlier_changed;
        self.new_lines += o.new_lines;
        self.new_lines_hidden += o.new_lines_hidden;
        self.new_tokens_hidden += o.new_tokens_hidden;
        self.prompt_tokens += o.prompt_tokens;
        self.final_prompt_tokens += o.final_prompt_tokens;
        self.billed_direct += o.billed_direct;
        self.billed_lam += o.billed_lam;
        self.billed_direct_tool += o.billed_direct_tool;
        self.added_ms.extend_from_slice(&o.added_ms);
        self.admit_ms.extend_from_slice(&o.admit_ms);
    }
}

/// The `q`-quantile (0..=1) of `xs` (nearest rank; 0 when empty).
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
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

/// Prompt cost of one path (direct or through lam) across a session's requests.
#[derive(Debug, Default)]
struct Bill {
    prev: Vec<u128>,
    /// Tokens of each item seen, and whether it carries a tool result.
    tokens: HashMap<u128, (u64, bool)>,
    billed: f64,
    /// The part of `billed` for items carrying tool results.
    billed_tool: f64,
    prompt: u64,
    last: u64,
    changed: u64,
}

impl Bill {
    /// Add one request's conversation items (raw JSON each) and preamble tokens.
    fn add(&mut self, items: &[&[u8]], preamble: u64, pricing: Pricing, counter: &dyn TokenCounter) {
        let ids: Vec<u128> = items.iter().map(|b| canon::identity_key(b, canon::parse(b).ok().as_ref())).collect();
        let shared = ids.iter().zip(&self.prev).take_while(|(a, b)| a == b).count();
        self.changed += (shared..self.prev.len().min(ids.len())).filter(|&i| ids[i] != self.prev[i]).count() as u64;
        let first = self.prev.is_empty();
        let mut cached = if first { 0 } else { preamble };
        let mut fresh = if first { preamble } else { 0 };
        for (i, (b, id)) in items.iter().zip(&ids).enumerate() {
            let (t, tool) = *self.tokens.entry(*id).or_insert_with(|| (counter.count(b) as u64, carries_tool_result(b)));
            let price = if i < shared { pricing.read } else { pricing.write };
            if tool {
                self.billed_tool += t as f64 * price;
            }
            if i < shared { cached += t } else { fresh += t }
        }
        self.prompt += cached + fresh;
        self.last = cached + fresh;
        self.billed += cached as f64 * pricing.read + fresh as f64 * pricing.write;
        self.prev = ids;
    }
}

/// A Claude Code user turn with `tool_result` blocks, or a Codex `function_call_output`.
fn carries_tool_result(b: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(b) else {
        return false;
    };
    let is = |x: &Value, t: &str| x.get("type").and_then(Value::as_str) == Some(t);
    is(&v, "function_call_output")
        || is(&v, "custom_tool_call_output")
        || v.get("content").and_then(Value::as_array).is_some_and(|bs| bs.iter().any(|x| is(x, "tool_result")))
}

/// The conversation items of a body (raw JSON each) and its preamble's bytes.
fn split(api: lam_core::wire::Api, body: &[u8]) -> (Vec<Box<serde_json::value::RawValue>>, Vec<u8>) {
    let m = crate::json::Members::parse(body).expect("replay bodies are objects");
    let list = m.raw(api.list_field()).unwrap_or("[]");
    let items = serde_json::from_str(list).unwrap_or_default();
    let mut pre = Vec::new();
    for f in api.preamble_fields().iter().chain(&["tools"]) {
        pre.extend_from_slice(m.raw(f).unwrap_or("").as_bytes());
    }
    (items, pre)
}

/// Replay one session through `proxy` (sequentially: the proxy's counters
/// before and after are this session's).
pub fn replay(proxy: &Proxy, agent: Agent, session: &str, task: &str, calls: &[Call], pricing: Pricing, counter: &dyn TokenCounter) -> SessionReport {
    let api = agent.api();
    let before = proxy.stats();
    let (mut direct, mut lam) = (Bill::default(), Bill::default());
    let sent = calls.iter().filter(|c| !c.output.is_empty()).count() as u64;
    let mut r = SessionReport { session: session.to_string(), tool_results: sent, ..Default::default() };
    let mut admitted_s = totals(&before).1;
    let mut last = Vec::new();
    for body in requests(agent, task, calls) {
        let t = Instant::now();
        let out = proxy.rewrite(api, None, &body);
        last.clone_from(&out.body);
        r.added_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let now = totals(&proxy.stats()).1;
        r.admit_ms.push((now - admitted_s) * 1e3);
        admitted_s = now;
        for (bill, b) in [(&mut direct, &body), (&mut lam, &out.body)] {
            let (items, pre) = split(api, b);
            let raws: Vec<&[u8]> = items.iter().map(|x| x.get().as_bytes()).collect();
            bill.add(&raws, counter.count(&pre) as u64, pricing, counter);
        }
        r.requests += 1;
    }
    let after = proxy.stats();
    r.proxy_sessions = after.sessions_created - before.sessions_created;
    let (t0, t1) = (totals(&before).0, totals(&after).0);
    r.admitted = t1[0] - t0[0];
    r.tool_tokens_in = t1[1] - t0[1];
    r.tool_tokens_out = t1[2] - t0[2];
    r.earlier_changed = lam.changed;
    hidden_lines(&mut r, agent, calls, &last, counter);
    r.prompt_tokens = direct.prompt;
    r.final_prompt_tokens = direct.last;
    r.billed_direct = direct.billed;
    r.billed_lam = lam.billed;
    r.billed_direct_tool = direct.billed_tool;
    r
}

/// Count the new lines of `calls`' outputs that the last forwarded body
/// (which holds every tool result, as forwarded) does not show.
fn hidden_lines(r: &mut SessionReport, agent: Agent, calls: &[Call], forwarded: &[u8], counter: &dyn TokenCounter) {
    let shown = forwarded_results(agent, forwarded);
    let mut seen = lam_core::newlines::NewLines::new();
    for (c, f) in calls.iter().zip(shown.iter().map(String::as_str).chain(std::iter::repeat(""))) {
        let o = seen.observe(c.output.as_bytes(), f.as_bytes());
        r.new_lines += o.new as u64;
        r.new_lines_hidden += o.hidden.len() as u64;
        r.new_tokens_hidden += o.hidden.iter().map(|l| counter.count(&[l.as_slice(), b"\n"].concat()) as u64).sum::<u64>();
    }
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

/// Observations, tokens in, tokens out, and admit seconds over every session (evicted included).
fn totals(s: &crate::Stats) -> ([u64; 3], f64) {
    let t = s.total();
    ([t.observations, t.tokens_in, t.tokens_out], t.admit_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            hidden_lines(&mut r, agent, &calls, &body, &counter);
            assert_eq!((r.new_lines, r.new_lines_hidden), (3, 0));
            let stubbed = String::from_utf8(body).unwrap().replace("x = 1\\ny = 3\\n", "[lam: similar to lines 1-2 of `cat a.py`]");
            let mut r = SessionReport::default();
            hidden_lines(&mut r, agent, &calls, stubbed.as_bytes(), &counter);
            assert_eq!((r.new_lines, r.new_lines_hidden), (3, 1), "{agent:?}");
        }
    }
}
