//! The requests an agent sends for a recorded session, for `lam replay`:
//! the calls of a transcript ([`Call`]), the request bodies each room
//! writes for them ([`requests`]), and the tool results read back from a
//! forwarded body ([`forwarded_results`]).

use super::Agent;
use lam_core::wire::{self, Api};
use serde_json::{Value, json};

/// One tool call of a recorded session and its result.
#[derive(Debug, Clone)]
pub struct Call {
    /// Tool name.
    pub name: String,
    /// Its arguments exactly as its action has them: a JSON object's text,
    /// or the raw input of a custom tool (a code-mode `exec` script).
    pub arguments: String,
    /// The result text.
    pub output: String,
    /// The model's text before the call.
    pub thought: String,
    /// When its result was recorded (Unix ms; the transcript's timestamp),
    /// so when the request that carries it was sent; `None` when not recorded.
    pub time: Option<i64>,
    /// The model that made the call, as the transcript records it (`None`:
    /// not recorded); what the request that carries its result is priced by.
    pub model: Option<String>,
}

impl Call {
    /// A call from a record's action (`name(arguments)`, the one action
    /// rule, `lam_core::action`); any other action is a `bash` command.
    pub fn from_action(action: &str, output: String, thought: String) -> Self {
        let (name, arguments) = match lam_core::action::split(action) {
            Some((name, args)) => (name.to_string(), args.to_string()),
            None => ("bash".to_string(), json!({ "command": action }).to_string()),
        };
        Self { name, arguments, output, thought, time: None, model: None }
    }

    /// The arguments as a JSON object, when they are one.
    pub fn input(&self) -> Option<Value> {
        serde_json::from_str(&self.arguments).ok().filter(Value::is_object)
    }

    /// The call as a Messages `tool_use` block, whose input is an object (a
    /// call whose arguments are not one becomes a `bash` command of its action).
    pub(crate) fn tool_use(&self, id: &str) -> Value {
        match self.input() {
            Some(input) => json!({"type": "tool_use", "id": id, "name": self.name, "input": input}),
            None => json!({"type": "tool_use", "id": id, "name": "bash", "input": {"command": lam_core::action::tool_call(&self.name, &self.arguments)}}),
        }
    }
}

/// `calls` as Messages turns: each an `assistant` message of the model's
/// text (when there is one) and its `tool_use` (id `toolu_NNNN`), then a
/// `user` message of its `tool_result`.
pub(crate) fn tool_turns(calls: &[Call]) -> Vec<Value> {
    let mut msgs = Vec::new();
    for (k, c) in calls.iter().enumerate() {
        let id = format!("toolu_{k:04}");
        let mut blocks = Vec::new();
        if !c.thought.is_empty() {
            blocks.push(json!({"type": "text", "text": c.thought}));
        }
        blocks.push(c.tool_use(&id));
        msgs.push(json!({"role": "assistant", "content": blocks}));
        msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": c.output}]}));
    }
    msgs
}

/// The request bodies `agent` sends for `calls`: the task alone, then one
/// more tool result each time.
pub fn requests(agent: Agent, task: &str, calls: &[Call]) -> Vec<Vec<u8>> {
    let tools = tools(agent.api(), calls);
    (0..=calls.len()).map(|k| serde_json::to_vec(&agent.request(task, &calls[..k], &tools)).expect("a JSON value serialises")).collect()
}

/// The tools of `all`'s calls, by name, as `api` declares them.
fn tools(api: Api, all: &[Call]) -> Vec<Value> {
    let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let schema = json!({"type": "object"});
    match api {
        Api::Responses => names.iter().map(|n| json!({"type": "function", "name": n, "description": n, "parameters": schema, "strict": false})).collect(),
        Api::Gemini => names.iter().map(|n| json!({"name": n, "description": n, "parametersJsonSchema": schema})).collect(),
        _ => names.iter().map(|n| json!({"name": n, "description": n, "input_schema": schema})).collect(),
    }
}

/// The tool results of a body [`requests`] made for `agent` (as the proxy
/// forwarded it), in order, as text: each result's texts
/// ([`lam_core::wire::results`]) joined, an empty result as an empty text.
pub fn forwarded_results(agent: Agent, body: &[u8]) -> Vec<String> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return Vec::new() };
    let api = agent.api();
    let items = v[api.list_field()].as_array().into_iter().flatten().filter_map(|item| Some((item, item.as_object()?)));
    let text = |item: &Value, paths: &[wire::Path]| paths.iter().filter_map(|p| p.str_in(item)).collect::<String>();
    items.flat_map(|(item, o)| wire::results(api, o).into_iter().map(move |r| text(item, &r.paths))).collect()
}
