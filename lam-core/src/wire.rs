//! The agents' wire: the four APIs agents send their conversations on,
//! which items of each are tool calls (id, name with its namespace,
//! arguments) and which hold tool results. What lam knows of each agent
//! (launch, requests, transcripts, compaction, forks) is in its room,
//! `lam_trajectory::agents`.
//!
//! One module, so one tool call is read the same way everywhere: by the
//! transcript readers (`lam_trajectory::agents`, for `lam compact`), by the proxy
//! (`lam serve`, `lam run`), and by `lam replay`, which writes requests for
//! a transcript and sends them through the proxy. A call's action is
//! [`Call::action`] ([`crate::action`]), part of every `§id`.
//!
//! ```
//! use lam_core::wire::{self, Api};
//! let item = serde_json::json!({"type": "function_call", "call_id": "c1",
//!     "namespace": "mcp__lam", "name": "recall", "arguments": "{\"id\":\"7cfd\"}"});
//! let calls = wire::calls(Api::Responses, item.as_object().unwrap());
//! assert_eq!(calls[0].id, "c1");
//! assert_eq!(calls[0].action(), r#"mcp__lam__recall({"id":"7cfd"})"#);
//! ```

use crate::action;
use serde_json::{Map, Value};

mod path;
pub use path::{Path, Seg};

/// An API whose conversations lam reads and compacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// OpenAI `POST /v1/chat/completions`: `messages`, tool results `role: "tool"`.
    ChatCompletions,
    /// Anthropic `POST /v1/messages`: `messages`, `tool_result` blocks in user turns.
    Messages,
    /// OpenAI `POST /v1/responses`: `input` items, `function_call_output`.
    Responses,
    /// Google Gemini `POST /v1beta/models/MODEL:generateContent` and
    /// `:streamGenerateContent`: `contents`, `functionCall` parts in `model`
    /// turns, `functionResponse` parts in `user` turns.
    Gemini,
}

impl Api {
    /// Every API, in the order the proxy registers their routes.
    pub const ALL: [Api; 4] = [Api::ChatCompletions, Api::Messages, Api::Responses, Api::Gemini];

    /// The request path. Gemini's names the model: its streaming method's,
    /// with `{model}` standing for the model (Gemini CLI sends it with
    /// `?alt=sse`; [`Api::routes`] are where the proxy answers).
    pub fn path(self) -> &'static str {
        match self {
            Api::ChatCompletions => "/v1/chat/completions",
            Api::Messages => "/v1/messages",
            Api::Responses => "/v1/responses",
            Api::Gemini => "/v1beta/models/{model}:streamGenerateContent",
        }
    }

    /// Where the proxy answers the API, as axum routes: its [`Api::path`],
    /// or for Gemini every model's path of both API versions
    /// (`/v1beta/models/{model}`, which Gemini CLI and the SDKs use by
    /// default, and the stable `/v1/models/{model}`; the last segment is
    /// `MODEL:METHOD`), whose conversations [`Api::carries_conversation`]
    /// tells apart.
    pub fn routes(self) -> &'static [&'static str] {
        match self {
            Api::ChatCompletions => &["/v1/chat/completions"],
            Api::Messages => &["/v1/messages"],
            Api::Responses => &["/v1/responses"],
            Api::Gemini => &["/v1beta/models/{model}", "/v1/models/{model}"],
        }
    }

    /// Whether a request on the API's route at `path` holds a conversation:
    /// always, but for Gemini only a method in [`GEMINI_METHODS`]
    /// (`:countTokens` and the others pass through unchanged).
    pub fn carries_conversation(self, path: &str) -> bool {
        match self {
            Api::Gemini => path.rsplit_once(':').is_some_and(|(_, m)| GEMINI_METHODS.contains(&m)),
            _ => true,
        }
    }

    /// Short name (stats, metrics labels).
    pub fn name(self) -> &'static str {
        match self {
            Api::ChatCompletions => "chat",
            Api::Messages => "messages",
            Api::Responses => "responses",
            Api::Gemini => "gemini",
        }
    }

    /// The member of a request body holding the conversation.
    pub fn list_field(self) -> &'static str {
        match self {
            Api::ChatCompletions | Api::Messages => "messages",
            Api::Responses => "input",
            Api::Gemini => "contents",
        }
    }

    /// Members that set up a conversation outside its list.
    pub fn preamble_fields(self) -> &'static [&'static str] {
        match self {
            Api::ChatCompletions => &[],
            Api::Messages => &["system"],
            Api::Responses => &["instructions"],
            Api::Gemini => &["systemInstruction"],
        }
    }
}

/// The methods of a Gemini model whose body is a conversation (`POST
/// /v1beta/models/MODEL:METHOD`).
pub const GEMINI_METHODS: [&str; 2] = ["generateContent", "streamGenerateContent"];

/// One tool call, as an item of a conversation makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call<'a> {
    /// The id its result names (`tool_call_id`, `tool_use_id`, `call_id`,
    /// Gemini's `functionCall.id`).
    pub id: &'a str,
    /// The tool, with its namespace (`mcp__lam__recall`; `tool` when unnamed).
    pub name: String,
    /// Its arguments as sent (a JSON string for OpenAI, an object for
    /// Anthropic and Gemini, whose `args` they are).
    pub arguments: Option<&'a Value>,
}

impl Call<'_> {
    /// The call's action, `name(arguments)` ([`crate::action`]).
    pub fn action(&self) -> String {
        action::tool_call_value(&self.name, self.arguments)
    }
}

fn str_at<'a>(v: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A conversation item's `role` (`user`, `assistant`, `tool`, ...), if it
/// has one (a Responses output item has none).
pub fn role(v: &Value) -> Option<&str> {
    v.as_object().and_then(|o| str_at(o, "role"))
}

/// Whether item `v` is a message (a turn of text), not a Responses item of
/// another type (a call, an output, reasoning): every item of the other
/// APIs is one.
pub fn is_message(api: Api, v: &Value) -> bool {
    api != Api::Responses || matches!(v.as_object().and_then(|o| str_at(o, "type")), None | Some("message"))
}

/// Whether the model wrote item `v`: role `assistant`, Gemini's `model`.
pub fn is_model_turn(api: Api, v: &Value) -> bool {
    match role(v) {
        Some("assistant") => true,
        Some("model") => api == Api::Gemini,
        _ => false,
    }
}

/// The tool call one Anthropic content block makes (`tool_use`, and the
/// `server_tool_use` of server tools), if any.
pub fn block_call(b: &Map<String, Value>) -> Option<Call<'_>> {
    matches!(str_at(b, "type"), Some("tool_use" | "server_tool_use")).then_some(())?;
    Some(Call { id: str_at(b, "id")?, name: str_at(b, "name").unwrap_or("tool").to_string(), arguments: b.get("input") })
}

/// Every tool call conversation item `v` makes, in order; a call without an
/// id (which no result could name) is left out.
pub fn calls(api: Api, v: &Map<String, Value>) -> Vec<Call<'_>> {
    located(api, v).into_iter().map(|(_, _, c)| c).collect()
}

/// The arguments of every tool call item `v` makes, in order, with their
/// paths (a call without arguments left out; a `local_shell_call`'s once,
/// under its `call_id`).
pub fn arguments(api: Api, v: &Map<String, Value>) -> Vec<Arguments<'_>> {
    let mut out: Vec<Arguments<'_>> = Vec::new();
    for (path, form, c) in located(api, v) {
        let Some(value) = c.arguments else { continue };
        if out.last().is_none_or(|a| a.path != path) {
            out.push(Arguments { call_id: c.id, path, form, value });
        }
    }
    out
}

/// Every call of item `v` ([`calls`]) with where its arguments sit (had it
/// any) and how they are written.
fn located(api: Api, v: &Map<String, Value>) -> Vec<(Path, Form, Call<'_>)> {
    let listed = |key: &'static str| v.get(key).and_then(Value::as_array).into_iter().flatten().enumerate().filter_map(|(k, x)| Some((k, x.as_object()?)));
    let at = |key: &'static str, k: usize| Path::new().key(key).index(k);
    match api {
        Api::ChatCompletions => {
            listed("tool_calls").filter_map(|(k, c)| Some((at("tool_calls", k).key("function").key("arguments"), Form::JsonText, chat_call(c)?))).collect()
        }
        Api::Messages => listed("content").filter_map(|(k, b)| Some((at("content", k).key("input"), Form::Value, block_call(b)?))).collect(),
        Api::Responses => {
            let (key, form) = match str_at(v, "type") {
                Some("function_call") => ("arguments", Form::JsonText),
                Some("custom_tool_call") => ("input", Form::Value),
                _ => ("action", Form::ShellAction),
            };
            responses_calls(v).into_iter().map(|c| (Path::new().key(key), form, c)).collect()
        }
        Api::Gemini => gemini_parts(v).filter_map(|(k, p)| Some((at("parts", k).key("functionCall").key("args"), Form::Value, gemini_call(p)?))).collect(),
    }
}

/// The call one Chat Completions `tool_calls` entry makes.
fn chat_call(c: &Map<String, Value>) -> Option<Call<'_>> {
    let f = c.get("function").and_then(Value::as_object);
    let name = f.and_then(|f| str_at(f, "name")).unwrap_or("tool").to_string();
    Some(Call { id: str_at(c, "id")?, name, arguments: f.and_then(|f| f.get("arguments")) })
}

/// The calls of one Responses item: `function_call` (named with its
/// namespace), `custom_tool_call`, `local_shell_call` (under its `call_id`
/// and its `id`: its output names the call by `id`, openai-python
/// `LocalShellCallOutput`) and `shell_call`.
fn responses_calls(v: &Map<String, Value>) -> Vec<Call<'_>> {
    let id = str_at(v, "call_id");
    let one = |name: String, arguments| id.map(|id| Call { id, name, arguments }).into_iter().collect();
    match str_at(v, "type") {
        Some("function_call") => one(action::namespaced(str_at(v, "namespace"), str_at(v, "name").unwrap_or("tool")), v.get("arguments")),
        Some("custom_tool_call") => one(str_at(v, "name").unwrap_or("tool").to_string(), v.get("input")),
        Some("local_shell_call") => {
            let ids = [id, str_at(v, "id")].into_iter().flatten();
            ids.map(|id| Call { id, name: "local_shell".into(), arguments: v.get("action") }).collect()
        }
        Some("shell_call") => one("shell".into(), v.get("action")),
        _ => Vec::new(),
    }
}

/// How a tool call's arguments are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// JSON as a string (OpenAI `function.arguments`, a Responses
    /// `function_call`'s `arguments`).
    JsonText,
    /// A JSON value (Anthropic `input`, Gemini `args`) or free-form text
    /// (a Responses `custom_tool_call`'s `input`).
    Value,
    /// A Responses shell call's `action` (`local_shell_call`, `shell_call`).
    ShellAction,
}

/// Where one tool call's arguments sit in its item.
#[derive(Debug, Clone, PartialEq)]
pub struct Arguments<'a> {
    /// The call's id (as [`Call::id`]).
    pub call_id: &'a str,
    /// Their path from the item.
    pub path: Path,
    /// How they are written.
    pub form: Form,
    /// Their value as sent.
    pub value: &'a Value,
}

/// The Responses item types that carry a tool's output (`output`).
pub const RESPONSES_OUTPUTS: [&str; 4] = ["function_call_output", "custom_tool_call_output", "local_shell_call_output", "shell_call_output"];

/// The types of the text parts of a Responses output item's `output`.
pub const OUTPUT_TEXT_TYPES: [&str; 3] = ["input_text", "output_text", "text"];

/// The id of the call a Responses output item answers (`call_id`; a
/// `local_shell_call_output` names it by `id`).
pub fn output_call_id(v: &Map<String, Value>) -> Option<&str> {
    str_at(v, "call_id").or_else(|| str_at(v, "id"))
}

/// One tool-result text of a conversation item: the call it answers (by
/// id; `None` for the deprecated chat `role: "function"` result, which names
/// no call) and where the text sits in the item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output<'a> {
    /// The id of the call it answers.
    pub call_id: Option<&'a str>,
    /// Where the text (a string) sits, from the item.
    pub path: Path,
}

/// Every non-empty tool-result text of conversation item `v`, in order: one
/// observation each (the proxy admits each; the transcript readers make a
/// record of each): the texts of its [`results`].
pub fn outputs(api: Api, v: &Map<String, Value>) -> Vec<Output<'_>> {
    let results = results(api, v).into_iter();
    results.flat_map(|r| r.paths.into_iter().map(move |path| Output { call_id: r.call_id, path })).collect()
}

/// One tool result of a conversation item: the call it answers (as
/// [`Output::call_id`]) and where its non-empty texts sit (none: an empty
/// result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult<'a> {
    /// The id of the call it answers.
    pub call_id: Option<&'a str>,
    /// Where its texts sit, from the item, in order.
    pub paths: Vec<Path>,
}

/// Every tool result of conversation item `v`, in order. Chat: a `role:
/// "tool"` (or `"function"`) message, its content string or `text` parts;
/// Anthropic: each `tool_result` block, its string, `text` blocks and the
/// `text` blocks of its `search_result`s; Responses: an output item, its
/// string or text parts, or the `stdout` / `stderr` of each chunk of a
/// `shell_call_output`; Gemini: each `functionResponse` part, its
/// `response` strings ([`GEMINI_RESPONSE_TEXTS`]).
pub fn results(api: Api, v: &Map<String, Value>) -> Vec<ToolResult<'_>> {
    let content = v.get("content").unwrap_or(&Value::Null);
    let one = |call_id, paths| vec![ToolResult { call_id, paths }];
    let at = |k: &'static str| Path::new().key(k);
    match api {
        Api::ChatCompletions => match str_at(v, "role") {
            Some("tool") => one(str_at(v, "tool_call_id"), texts(content, &at("content"), &["text"])),
            Some("function") => one(None, texts(content, &at("content"), &["text"])),
            _ => Vec::new(),
        },
        Api::Messages => {
            let blocks = content.as_array().into_iter().flatten().enumerate().filter_map(|(k, b)| Some((k, b.as_object()?)));
            let results = blocks.filter(|(_, b)| str_at(b, "type") == Some("tool_result"));
            let texts = |k: usize, b: &Map<String, Value>| result_texts(b.get("content").unwrap_or(&Value::Null), &at("content").index(k).key("content"));
            results.map(|(k, b)| ToolResult { call_id: str_at(b, "tool_use_id"), paths: texts(k, b) }).collect()
        }
        Api::Responses => match str_at(v, "type") {
            Some("shell_call_output") => one(str_at(v, "call_id"), shell_texts(v.get("output").unwrap_or(&Value::Null))),
            Some(t) if RESPONSES_OUTPUTS.contains(&t) => {
                one(output_call_id(v), texts(v.get("output").unwrap_or(&Value::Null), &at("output"), &OUTPUT_TEXT_TYPES))
            }
            _ => Vec::new(),
        },
        Api::Gemini => gemini_responses(v)
            .map(|(k, id, r)| {
                let filled = |m: &&&str| r.and_then(|r| str_at(r, m)).is_some_and(|t| !t.is_empty());
                let path = |m: &&'static str| at("parts").index(k).key("functionResponse").key("response").key(*m);
                ToolResult { call_id: id, paths: GEMINI_RESPONSE_TEXTS.iter().filter(filled).map(path).collect() }
            })
            .collect(),
    }
}

/// Whether an Anthropic message holds `tool_result` blocks (then its other
/// text is no observation of its own).
pub fn has_tool_results(v: &Map<String, Value>) -> bool {
    v.get("content").and_then(Value::as_array).is_some_and(|a| a.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")))
}

/// Where the non-empty texts of a content value at `base` sit: the
/// string itself, or the `text` of every part whose `type` is one of `types`.
pub fn texts(content: &Value, base: &Path, types: &[&str]) -> Vec<Path> {
    match content {
        Value::String(s) if !s.is_empty() => vec![base.clone()],
        Value::Array(parts) => {
            let typed = |p: &Value| p.get("type").and_then(Value::as_str).is_some_and(|t| types.contains(&t));
            let filled = |p: &Value| p.get("text").and_then(Value::as_str).is_some_and(|t| !t.is_empty());
            parts.iter().enumerate().filter(|(_, p)| typed(p) && filled(p)).map(|(k, _)| base.clone().index(k).key("text")).collect()
        }
        _ => Vec::new(),
    }
}

/// Where the texts of an Anthropic `tool_result`'s content at `base`
/// sit (`Path::new()`: from the content itself): its string, its `text`
/// blocks, and the `text` blocks inside its `search_result` blocks, in order.
pub fn result_texts(content: &Value, base: &Path) -> Vec<Path> {
    let Value::Array(parts) = content else {
        return texts(content, base, &["text"]);
    };
    let mut out = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        match p.get("type").and_then(Value::as_str) {
            Some("text") if p.get("text").and_then(Value::as_str).is_some_and(|t| !t.is_empty()) => out.push(base.clone().index(j).key("text")),
            Some("search_result") => out.extend(texts(p.get("content").unwrap_or(&Value::Null), &base.clone().index(j).key("content"), &["text"])),
            _ => {}
        }
    }
    out
}

/// Where the non-empty `stdout` and `stderr` of each chunk of a Responses
/// `shell_call_output`'s `output` sit.
fn shell_texts(output: &Value) -> Vec<Path> {
    let chunks = output.as_array().into_iter().flatten().enumerate();
    let filled = |c: &Value, f: &str| c.get(f).and_then(Value::as_str).is_some_and(|t| !t.is_empty());
    chunks.flat_map(|(k, c)| ["stdout", "stderr"].into_iter().filter(move |f| filled(c, f)).map(move |f| Path::new().key("output").index(k).key(f))).collect()
}

/// The ids of the calls whose results conversation item `v` carries (empty
/// results included).
pub fn result_ids(api: Api, v: &Map<String, Value>) -> Vec<&str> {
    match api {
        Api::ChatCompletions => str_at(v, "tool_call_id").filter(|_| str_at(v, "role") == Some("tool")).into_iter().collect(),
        Api::Messages => {
            let blocks = v.get("content").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object);
            blocks.filter(|b| str_at(b, "type") == Some("tool_result")).filter_map(|b| str_at(b, "tool_use_id")).collect()
        }
        Api::Responses => match str_at(v, "type") {
            Some(t) if RESPONSES_OUTPUTS.contains(&t) => output_call_id(v).into_iter().collect(),
            _ => Vec::new(),
        },
        Api::Gemini => gemini_responses(v).filter_map(|(_, id, _)| id).collect(),
    }
}

/// The members of a Gemini `functionResponse.response` that hold its text,
/// each an observation when a non-empty string: `output` (Gemini CLI's
/// results), `error` (its failed calls), `result` (what the Gemini SDKs'
/// automatic function calling sends).
pub const GEMINI_RESPONSE_TEXTS: [&str; 3] = ["output", "error", "result"];

/// The parts of a Gemini `Content` (`parts`), with their positions.
fn gemini_parts(v: &Map<String, Value>) -> impl Iterator<Item = (usize, &Map<String, Value>)> {
    let parts = v.get("parts").and_then(Value::as_array).into_iter().flatten().enumerate();
    parts.filter_map(|(k, p)| Some((k, p.as_object()?)))
}

/// The tool call one Gemini part makes (`functionCall`: `id`, `name`,
/// `args`), under its `id`, or under its name where it has none (the
/// Gemini API then pairs a call with the `functionResponse` of that name).
pub fn gemini_call(p: &Map<String, Value>) -> Option<Call<'_>> {
    let f = p.get("functionCall")?.as_object()?;
    let name = str_at(f, "name");
    Some(Call { id: str_at(f, "id").or(name)?, name: name.unwrap_or("tool").to_string(), arguments: f.get("args") })
}

/// The `functionResponse` parts of a Gemini `Content`: position, the call
/// it answers (its `id`, else its `name`: [`gemini_call`]) and its `response`.
fn gemini_responses(v: &Map<String, Value>) -> impl Iterator<Item = (usize, Option<&str>, Option<&Map<String, Value>>)> {
    gemini_parts(v).filter_map(|(k, p)| {
        let f = p.get("functionResponse")?.as_object()?;
        Some((k, str_at(f, "id").or_else(|| str_at(f, "name")), f.get("response").and_then(Value::as_object)))
    })
}

/// Where the non-empty texts of message `v` sit: its `content` string or
/// text parts (`text`; Chat and Responses `input_text` too), a Gemini
/// `Content`'s text parts ([`gemini_texts`]).
pub fn message_texts(api: Api, v: &Map<String, Value>) -> Vec<Path> {
    let content = v.get("content").unwrap_or(&Value::Null);
    match api {
        Api::Gemini => gemini_texts(v),
        Api::Messages => texts(content, &Path::new().key("content"), &["text"]),
        _ => texts(content, &Path::new().key("content"), &["text", "input_text"]),
    }
}

/// Where the non-empty `text` of each part of a Gemini `Content` sits
/// (`/parts/K/text`), its thoughts (`thought: true`) left out.
pub fn gemini_texts(v: &Map<String, Value>) -> Vec<Path> {
    let thought = |p: &Map<String, Value>| p.get("thought").and_then(Value::as_bool) == Some(true);
    let filled = |p: &Map<String, Value>| str_at(p, "text").is_some_and(|t| !t.is_empty());
    gemini_parts(v).filter(|(_, p)| filled(p) && !thought(p)).map(|(k, _)| Path::new().key("parts").index(k).key("text")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn calls_of_every_api() {
        let chat = obj(json!({"role":"assistant","tool_calls":[{"id":"a","function":{"name":"ls","arguments":"{}"}},{"function":{"name":"x"}}]}));
        assert_eq!(calls(Api::ChatCompletions, &chat).iter().map(Call::action).collect::<Vec<_>>(), ["ls({})"]);
        let msg = obj(
            json!({"role":"assistant","content":[{"type":"text","text":"t"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"q"}}]}),
        );
        let got: Vec<(&str, String)> = calls(Api::Messages, &msg).iter().map(|c| (c.id, c.action())).collect();
        assert_eq!(got, [("t1", r#"Bash({"command":"ls"})"#.to_string()), ("s1", r#"web_search({"query":"q"})"#.to_string())]);
        let lsh = obj(json!({"type":"local_shell_call","id":"lsh_1","call_id":"call_1","action":{"command":["ls"]}}));
        assert_eq!(calls(Api::Responses, &lsh).iter().map(|c| c.id).collect::<Vec<_>>(), ["call_1", "lsh_1"]);
        let custom = obj(json!({"type":"custom_tool_call","call_id":"e","name":"exec","input":"text(1)"}));
        assert_eq!(calls(Api::Responses, &custom)[0].action(), "exec(text(1))");
        assert!(calls(Api::Responses, &obj(json!({"type":"message","role":"user"}))).is_empty());
    }

    #[test]
    fn arguments_sit_where_their_paths_say() {
        let cases = [
            (
                Api::ChatCompletions,
                json!({"tool_calls":[{"function":{"arguments":"{}"}},{"id":"a","function":{"name":"ls","arguments":"{\"p\":1}"}}]}),
                Form::JsonText,
            ),
            (Api::Messages, json!({"content":[{"type":"text","text":"t"},{"type":"server_tool_use","id":"s","name":"w","input":{"q":"x"}}]}), Form::Value),
            (Api::Responses, json!({"type":"function_call","call_id":"f","name":"sh","arguments":"{}"}), Form::JsonText),
            (Api::Responses, json!({"type":"custom_tool_call","call_id":"c","name":"exec","input":"text(1)"}), Form::Value),
            (Api::Responses, json!({"type":"local_shell_call","id":"l","call_id":"c","action":{"command":["ls"]}}), Form::ShellAction),
            (Api::Gemini, json!({"parts":[{"text":"t"},{"functionCall":{"name":"read","args":{"p":"a"}}}]}), Form::Value),
        ];
        let got: Vec<(String, &str, Form)> = cases
            .iter()
            .flat_map(|(api, v, _)| {
                arguments(*api, v.as_object().unwrap()).into_iter().map(|a| {
                    assert_eq!(a.path.get(v), Some(a.value), "{}", a.path);
                    (a.path.to_string(), a.call_id, a.form)
                })
            })
            .collect();
        let want: Vec<(String, &str, Form)> =
            ["/tool_calls/1/function/arguments", "/content/1/input", "/arguments", "/input", "/action", "/parts/1/functionCall/args"]
                .into_iter()
                .zip(["a", "s", "f", "c", "c", "read"])
                .zip(cases.iter().map(|c| c.2))
                .map(|((p, id), f)| (p.to_string(), id, f))
                .collect();
        assert_eq!(got, want);
        assert!(arguments(Api::Responses, &obj(json!({"type":"shell_call","call_id":"s"}))).is_empty(), "no arguments, no entry");
    }

    #[test]
    fn result_ids_name_the_answered_calls() {
        let result = obj(json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"f","content":""},{"type":"text","text":"x"}]}));
        assert_eq!(result_ids(Api::Messages, &result), ["f"]);
        assert_eq!(result_ids(Api::Responses, &obj(json!({"type":"function_call_output","call_id":"s","output":""}))), ["s"]);
    }

    /// Gemini CLI 0.61.0's request (docs/agents.md, "Gemini CLI 0.61.0",
    /// trimmed): calls are `functionCall` parts of `model` turns, results
    /// `functionResponse` parts of `user` turns, paired by `id`.
    fn gemini_request() -> Value {
        json!({"contents":[
          {"role":"user","parts":[{"text":"<session_context>\nThis is the Gemini CLI. ..."},{"text":"Look at app.py and run check.py"}]},
          {"role":"model","parts":[{"functionCall":{"id":"run_shell_command_1796538409209_0","name":"run_shell_command",
             "args":{"command":"cat app.py","description":"Show app.py"}},"thoughtSignature":"skip_thought_signature_validator"}]},
          {"role":"user","parts":[{"functionResponse":{"id":"run_shell_command_1796538409209_0","name":"run_shell_command",
             "response":{"output":"<untrusted_context>\nOutput: def f1(x): ...\nProcess Group PGID: 24310\n</untrusted_context>"}}}]},
          {"role":"model","parts":[{"text":"Reading it.","thought":true},{"functionCall":{"id":"read_file_1796538411322_0","name":"read_file","args":{"file_path":"/abs/app.py"}}},
             {"functionCall":{"id":"mcp_lam_recall_1796538411322_1","name":"mcp_lam_recall","args":{"id":"a1b2c3d4"}}}]},
          {"role":"user","parts":[{"functionResponse":{"id":"read_file_1796538411322_0","name":"read_file","response":{"output":"def f1(x): ..."}}},
             {"functionResponse":{"id":"mcp_lam_recall_1796538411322_1","name":"mcp_lam_recall","response":{"error":"no §a1b2c3d4 in the archive"}}}]}],
         "systemInstruction":{"parts":[{"text":"You are Gemini CLI, an autonomous CLI agent ..."}]},
         "tools":[{"functionDeclarations":[{"name":"run_shell_command","description":"...","parametersJsonSchema":{"type":"object"}}]}]})
    }

    #[test]
    fn gemini_calls_and_results() {
        let body = gemini_request();
        let items: Vec<Map<String, Value>> = body[Api::Gemini.list_field()].as_array().unwrap().iter().map(|v| obj(v.clone())).collect();
        let actions: Vec<(&str, String)> = items.iter().flat_map(|v| calls(Api::Gemini, v)).map(|c| (c.id, c.action())).collect();
        assert_eq!(
            actions,
            [
                ("run_shell_command_1796538409209_0", r#"run_shell_command({"command":"cat app.py","description":"Show app.py"})"#.to_string()),
                ("read_file_1796538411322_0", r#"read_file({"file_path":"/abs/app.py"})"#.to_string()),
                ("mcp_lam_recall_1796538411322_1", r#"mcp_lam_recall({"id":"a1b2c3d4"})"#.to_string()),
            ]
        );
        let outs: Vec<Output<'_>> = items.iter().flat_map(|v| outputs(Api::Gemini, v)).collect();
        let got: Vec<(Option<&str>, String)> = outs.iter().map(|o| (o.call_id, o.path.to_string())).collect();
        assert_eq!(
            got,
            [
                (Some("run_shell_command_1796538409209_0"), "/parts/0/functionResponse/response/output".to_string()),
                (Some("read_file_1796538411322_0"), "/parts/0/functionResponse/response/output".to_string()),
                (Some("mcp_lam_recall_1796538411322_1"), "/parts/1/functionResponse/response/error".to_string()),
            ]
        );
        let item = Value::Object(items[2].clone());
        assert!(outs[0].path.get(&item).and_then(Value::as_str).is_some_and(|t| t.starts_with("<untrusted_context>")));
        assert_eq!(result_ids(Api::Gemini, &items[4]), ["read_file_1796538411322_0", "mcp_lam_recall_1796538411322_1"]);
        assert!(calls(Api::Gemini, &items[2]).is_empty() && outputs(Api::Gemini, &items[1]).is_empty());
        assert_eq!(gemini_texts(&items[0]).iter().map(Path::to_string).collect::<Vec<_>>(), ["/parts/0/text", "/parts/1/text"]);
        assert!(gemini_texts(&items[3]).is_empty(), "a thought is no text of the turn");
        let turns: Vec<bool> = body["contents"].as_array().unwrap().iter().map(|v| is_model_turn(Api::Gemini, v)).collect();
        assert_eq!(turns, [false, true, false, true, false]);
        assert!(!is_model_turn(Api::Messages, &json!({"role": "model"})));
    }

    /// Without ids (the Gemini API does not require them) a call and its
    /// result pair by name; an empty or non-string response is no text.
    #[test]
    fn gemini_pairs_by_name_without_ids() {
        let call = obj(json!({"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}}]}));
        assert_eq!(calls(Api::Gemini, &call)[0].id, "get_weather");
        let result =
            obj(json!({"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"result":"sunny","output":"","error":{"code":1}}}}]}));
        let outs = outputs(Api::Gemini, &result);
        assert_eq!(
            outs,
            [Output { call_id: Some("get_weather"), path: Path::new().key("parts").index(0).key("functionResponse").key("response").key("result") }]
        );
    }

    #[test]
    fn gemini_routes_and_methods() {
        assert_eq!(Api::Gemini.list_field(), "contents");
        assert_eq!(Api::Gemini.preamble_fields(), ["systemInstruction"]);
        assert_eq!(Api::Gemini.name(), "gemini");
        assert_eq!(Api::Messages.routes(), [Api::Messages.path()]);
        assert!(Api::ALL.iter().all(|a| a.routes().iter().any(|r| a.path().starts_with(r))), "each API's path is on one of its routes");
        assert!(Api::Gemini.carries_conversation("/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent"));
        assert!(Api::Gemini.carries_conversation("/v1beta/models/gemini-3.5-flash-lite:generateContent"));
        assert!(!Api::Gemini.carries_conversation("/v1beta/models/gemini-3.8-flash:countTokens"));
        assert!(!Api::Gemini.carries_conversation("/v1beta/models/gemini-3.8-flash"));
        assert!(Api::Responses.carries_conversation("/v1/responses"));
    }
}
