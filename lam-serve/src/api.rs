//! The four APIs whose conversations the proxy compacts: where each keeps
//! its conversation, which parts of it are observations, and what action
//! produced each one.

use lam_core::action;
pub use lam_core::wire::Api;
use lam_core::wire::{self, Path};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Which parts of a conversation are compacted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// User turns after the task are observations too (agents that send
    /// tool output as user messages).
    pub user_turns: bool,
    /// Tools whose results are forwarded verbatim (still archived): their
    /// exact output is what the agent must act on.
    pub keep_tools: HashSet<String>,
    /// The recall tool stubs name (`--recall`, as the agent sees it): a
    /// result of a call that names it (the tool itself, or code-mode source
    /// that calls it, as Codex's `exec`) is exact bytes the agent asked for,
    /// forwarded whole (a stub there would point back at itself).
    pub recall_tool: Option<String>,
}

/// Where one observation (a string) sits inside a conversation item and the
/// action that produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    pub path: Path,
    pub action: String,
    /// A kept tool's result: archived and admitted (so later observations
    /// may cite it, as it stays in context) but forwarded verbatim.
    pub keep: bool,
    /// A result of the recall tool (kept too).
    pub recall: bool,
}

/// What a conversation's items so far say about the next one: the action of
/// every tool call id, the task (first user turn), and the action of the
/// last assistant message (the action of a user-turn observation, and of a
/// result whose call is not in the conversation), all by `lam_core::action`.
/// Built item by item ([`Context::note`]) and kept with the conversation,
/// so a request's earlier items are not read again.
#[derive(Debug, Default, Clone)]
pub(crate) struct Context {
    actions: HashMap<String, String>,
    names: HashMap<String, String>,
    task: Option<usize>,
    said: Arc<str>,
    /// Items noted so far (the index of the next one).
    noted: usize,
}

impl Context {
    /// Note the next item of the conversation, `v`.
    pub(crate) fn note(&mut self, api: Api, v: &Value) {
        if self.task.is_none() && wire::role(v) == Some("user") && wire::is_message(api, v) {
            self.task = Some(self.noted);
        }
        let mut nth = Occurrences::default();
        for c in v.as_object().map(|o| wire::calls(api, o)).unwrap_or_default() {
            let key = nth.key(c.id);
            self.actions.insert(key.clone(), c.action());
            self.names.insert(key, c.name);
        }
        if wire::is_model_turn(api, v) {
            self.said = Arc::from(said(api, v));
        }
        self.noted += 1;
    }

    /// Bytes it holds (the calls' actions and names).
    pub(crate) fn heap_bytes(&self) -> usize {
        let map = |m: &HashMap<String, String>| m.iter().map(|(k, v)| k.len() + v.len() + 64).sum::<usize>();
        map(&self.actions) + map(&self.names) + self.said.len()
    }
}

/// Calls and results paired by position where their ids are missing or
/// repeated: the Gemini API (and the google-genai SDKs) send parallel calls
/// without `functionCall.id`, so two `read_file` calls of one turn both go
/// by their name, and so do their two `functionResponse`s, in the same
/// order. Within one item, the `k`-th call (or result) of an id is keyed
/// `id` the first time and `id` + U+001F + `k` after; a result looks up the
/// key its own position gives, so the second result answers the second call.
#[derive(Default)]
struct Occurrences(HashMap<String, usize>);

impl Occurrences {
    fn key(&mut self, id: &str) -> String {
        let k = self.0.entry(id.to_string()).or_default();
        *k += 1;
        if *k == 1 { id.to_string() } else { format!("{id}\u{1f}{k}") }
    }
}

/// Which strings of an API's items are observations under the proxy's
/// [`Policy`], on the wire's calls and results (`lam_core::wire`).
pub(crate) trait Observations {
    /// The observations in the conversation's next item `v`, given what the
    /// items before it say (`cx`, having noted exactly those).
    fn slots(self, v: &Value, cx: &Context, policy: &Policy) -> Vec<Slot>;
}

impl Observations for Api {
    /// The observations in item `i` of a request (empty texts left out).
    /// With `policy.user_turns`, user turns after the task are observations
    /// too (agents that send tool output as user messages); results of the
    /// tools in `policy.keep_tools` are marked `keep` (admitted, forwarded whole).
    fn slots(self, v: &Value, cx: &Context, policy: &Policy) -> Vec<Slot> {
        let Some(obj) = v.as_object() else {
            return Vec::new();
        };
        let recall = |id: &str| policy.recall_tool.as_deref().is_some_and(|r| is_recall(r, cx.names.get(id), cx.actions.get(id)));
        let kept = |id: Option<&str>| id.is_some_and(|id| cx.names.get(id).is_some_and(|n| policy.keep_tools.contains(n)) || recall(id));
        let said = || cx.said.to_string();
        let action = |id: Option<&str>| id.and_then(|id| cx.actions.get(id)).cloned().unwrap_or_else(said);
        let outputs = keyed_outputs(self, obj);
        if !outputs.is_empty() || (self == Api::Messages && wire::has_tool_results(obj)) {
            return outputs
                .into_iter()
                .map(|(path, id)| {
                    let id = id.as_deref();
                    Slot { path, action: action(id), keep: kept(id), recall: id.is_some_and(recall) }
                })
                .collect();
        }
        let user_obs = policy.user_turns && wire::role(v) == Some("user") && wire::is_message(self, v) && cx.task.is_some_and(|t| cx.noted > t);
        if !user_obs {
            return Vec::new();
        }
        wire::message_texts(self, obj).into_iter().map(|path| Slot { path, action: said(), keep: false, recall: false }).collect()
    }
}

/// Where each tool-result text of item `v` sits ([`wire::outputs`]), with
/// the key of the call it answers ([`Occurrences`]).
fn keyed_outputs(api: Api, v: &serde_json::Map<String, Value>) -> Vec<(Path, Option<String>)> {
    let mut nth = Occurrences::default();
    let mut out = Vec::new();
    for r in wire::results(api, v) {
        let key = r.call_id.map(|id| nth.key(id));
        out.extend(r.paths.into_iter().map(|p| (p, key.clone())));
    }
    out
}

/// The action of a message the model wrote ([`action::of_message`]); a
/// Gemini turn's is its calls' actions, else the text of its parts.
fn said(api: Api, v: &Value) -> String {
    let Some(obj) = v.as_object().filter(|_| api == Api::Gemini) else { return action::of_message(v) };
    let calls = wire::calls(api, obj);
    if !calls.is_empty() {
        return action::join(calls.iter().map(wire::Call::action));
    }
    wire::gemini_texts(obj).iter().filter_map(|p| p.str_in(v)).collect::<String>().trim().to_string()
}

/// Tool-call inputs of at least this many bytes may be cited by a budget.
pub(crate) const CITABLE_INPUT_BYTES: usize = 1024;

/// The large tool-call inputs of item `v` a budget may cite (each archived
/// first): every string of at least [`CITABLE_INPUT_BYTES`] in an Anthropic
/// `tool_use` or `server_tool_use` input (a `Write`'s `content`, an
/// `Edit`'s `old_string` and `new_string`), in the JSON-string arguments of a Chat Completions tool
/// call or a Responses `function_call` (Codex's `apply_patch` through its
/// shell tool), a Responses `custom_tool_call`'s free-form `input`, and in
/// the `args` of a Gemini `functionCall` part (`write_file`'s `content`,
/// `replace`'s `old_string` and `new_string`): the calls' arguments where
/// [`wire::arguments`] finds them. Each is a slot and, inside JSON-string
/// arguments, the path within them.
pub(crate) fn citable_inputs(api: Api, v: &Value) -> Vec<(Slot, Option<Path>)> {
    let Some(obj) = v.as_object() else { return Vec::new() };
    let calls = wire::calls(api, obj);
    let action = |id: &str| calls.iter().find(|c| c.id == id).map(wire::Call::action).unwrap_or_default();
    let slot = |path: Path, id: &str| Slot { path, action: action(id), keep: false, recall: false };
    let mut out = Vec::new();
    for a in wire::arguments(api, obj) {
        let slot = |path| slot(path, a.call_id);
        match a.form {
            wire::Form::JsonText => out.extend(in_arguments(a.value, &a.path, slot)),
            wire::Form::Value => out.extend(big_strings(a.value, a.path).into_iter().map(|p| (slot(p), None))),
            // A Responses shell call's action is not cited.
            wire::Form::ShellAction => {}
        }
    }
    out
}

/// The big strings inside JSON-string arguments `args` (at `at`): the
/// slot of the arguments and the path within them.
fn in_arguments(args: &Value, at: &Path, slot: impl Fn(Path) -> Slot) -> Vec<(Slot, Option<Path>)> {
    let Some(parsed) = args.as_str().and_then(|a| serde_json::from_str::<Value>(a).ok()) else { return Vec::new() };
    big_strings(&parsed, Path::new()).into_iter().map(|inner| (slot(at.clone()), Some(inner))).collect()
}

/// Where (below `at`) every string of at least [`CITABLE_INPUT_BYTES`] in `v` sits.
fn big_strings(v: &Value, at: Path) -> Vec<Path> {
    match v {
        Value::String(s) if s.len() >= CITABLE_INPUT_BYTES => vec![at],
        Value::Array(xs) => xs.iter().enumerate().flat_map(|(i, x)| big_strings(x, at.clone().index(i))).collect(),
        Value::Object(m) => m.iter().flat_map(|(k, x)| big_strings(x, at.clone().key(k.clone()))).collect(),
        _ => Vec::new(),
    }
}

/// Whether a call (its `name` and action) is a call of the recall tool `r`:
/// named exactly `r`, or a Codex code-mode `exec` whose script calls
/// `tools.r(`. A call that merely mentions the name (a grep, a comment,
/// `rXYZ`) is not one.
fn is_recall(r: &str, name: Option<&String>, action: Option<&String>) -> bool {
    match name.map(String::as_str) {
        Some(n) if n == r => true,
        Some("exec") => action.is_some_and(|a| a.contains(&format!("tools.{r}("))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every observation of a conversation, read item by item as the proxy does.
    fn read(api: Api, items: &[Value], p: &Policy) -> Vec<(usize, Slot)> {
        let mut cx = Context::default();
        let mut out = Vec::new();
        for (i, v) in items.iter().enumerate() {
            out.extend(api.slots(v, &cx, p).into_iter().map(|s| (i, s)));
            cx.note(api, v);
        }
        out
    }

    fn slots(api: Api, items: &[Value], user: bool) -> Vec<(usize, Slot)> {
        read(api, items, &Policy { user_turns: user, ..Policy::default() })
    }

    /// Each slot as `ITEM PATH` (the path as its JSON pointer).
    fn at(slots: &[(usize, Slot)]) -> Vec<String> {
        slots.iter().map(|(i, s)| format!("{i} {}", s.path)).collect()
    }

    /// The tool-result shapes of the SDKs' own types (openai-python 2.54
    /// `LocalShellCallOutput`, `ShellCallOutput`,
    /// `ChatCompletionFunctionMessageParam`; anthropic 0.125
    /// `SearchResultBlockParam` inside `ToolResultBlockParam`).
    #[test]
    fn every_tool_result_shape_is_an_observation() {
        let items = [
            json!({"type":"message","role":"user","content":"fix it"}),
            json!({"type":"local_shell_call","id":"lsh_1","call_id":"call_1","status":"completed","action":{"type":"exec","command":["ls","-la"],"env":{}}}),
            json!({"type":"local_shell_call_output","id":"lsh_1","output":"{\"stdout\":\"a\\nb\\n\"}"}),
            json!({"type":"shell_call","call_id":"sh_2","action":{"commands":["pytest -q","git status"]}}),
            json!({"type":"shell_call_output","call_id":"sh_2","output":[{"stdout":"1 passed\n","stderr":"","outcome":{"type":"exit","exit_code":0}},{"stdout":"","stderr":"fatal: x\n","outcome":{"type":"exit","exit_code":128}}]}),
        ];
        let got = slots(Api::Responses, &items, false);
        assert_eq!(at(&got), ["2 /output", "4 /output/0/stdout", "4 /output/1/stderr"]);
        assert!(got[0].1.action.contains("ls"), "{}", got[0].1.action);
        assert!(got[1].1.action.contains("pytest"), "{}", got[1].1.action);
        let chat = [
            json!({"role":"user","content":"weather?"}),
            json!({"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{}"}}),
            json!({"role":"function","name":"get_weather","content":"sunny\n"}),
        ];
        let got = slots(Api::ChatCompletions, &chat, false);
        assert_eq!(at(&got), ["2 /content"]);
        let msgs = [
            json!({"role":"user","content":"search"}),
            json!({"role":"assistant","content":[{"type":"tool_use","id":"tu","name":"search","input":{"q":"x"}}]}),
            json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"tu","content":[
                {"type":"search_result","source":"https://a","title":"A","content":[{"type":"text","text":"first hit"},{"type":"text","text":""}]},
                {"type":"text","text":"note"},
                {"type":"search_result","source":"https://b","title":"B","content":[{"type":"text","text":"second hit"}]}]}]}),
        ];
        let got = slots(Api::Messages, &msgs, false);
        assert_eq!(at(&got), ["2 /content/0/content/0/content/0/text", "2 /content/0/content/1/text", "2 /content/0/content/2/content/0/text"]);
        assert!(got.iter().all(|(_, s)| s.action.contains("search")));
    }

    #[test]
    fn chat_tool_results_and_user_turns() {
        let items = [
            json!({"role":"system","content":"sys"}),
            json!({"role":"user","content":"task"}),
            json!({"role":"assistant","content":"run it","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]}),
            json!({"role":"tool","tool_call_id":"c1","content":"a\nb\n"}),
            json!({"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"x"},{"type":"image_url"},{"type":"text","text":""}]}),
            json!({"role":"user","content":"obs"}),
        ];
        let s = slots(Api::ChatCompletions, &items, false);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0], (3, Slot { path: Path::new().key("content"), action: "bash({\"cmd\":\"ls\"})".into(), keep: false, recall: false }));
        // A result whose call is not in the request: the assistant message's action.
        assert_eq!(
            s[1],
            (4, Slot { path: Path::new().key("content").index(0).key("text"), action: "bash({\"cmd\":\"ls\"})".into(), keep: false, recall: false })
        );
        let u = slots(Api::ChatCompletions, &items, true);
        assert_eq!(u.len(), 3, "the task is not an observation, later user turns are");
        assert_eq!(u[2], (5, Slot { path: Path::new().key("content"), action: "bash({\"cmd\":\"ls\"})".into(), keep: false, recall: false }));
    }

    #[test]
    fn anthropic_tool_result_blocks() {
        let items = [
            json!({"role":"user","content":"task"}),
            json!({"role":"assistant","content":[{"type":"text","text":"t"},{"type":"tool_use","id":"tu1","name":"bash","input":{"command":"ls"}}]}),
            json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"out"},{"type":"tool_result","tool_use_id":"tu1","content":[{"type":"text","text":"o2"},{"type":"image"}]},{"type":"text","text":"note"}]}),
            json!({"role":"user","content":[{"type":"text","text":"obs"}]}),
        ];
        let s = slots(Api::Messages, &items, true);
        assert_eq!(at(&s), ["2 /content/0/content", "2 /content/1/content/0/text", "3 /content/0/text"]);
        assert_eq!(s[0].1.action, "bash({\"command\":\"ls\"})");
        assert_eq!(s[2].1.action, "t");
    }

    #[test]
    fn results_of_the_recall_tool_are_kept_whole() {
        let p = Policy { recall_tool: Some("mcp__lam__recall".into()), ..Policy::default() };
        let items = [
            json!({"type":"message","role":"user","content":"task"}),
            json!({"type":"function_call","call_id":"a","namespace":"mcp__lam","name":"recall","arguments":"{\"id\":\"7cfd\"}"}),
            json!({"type":"function_call_output","call_id":"a","output":"orig"}),
            json!({"type":"custom_tool_call","call_id":"b","name":"exec","input":"const r = await tools.mcp__lam__recall({\"id\":\"7cfd\"});"}),
            json!({"type":"custom_tool_call_output","call_id":"b","output":[{"type":"input_text","text":"orig"}]}),
            json!({"type":"function_call","call_id":"c","name":"exec_command","arguments":"{\"cmd\":\"cat a\"}"}),
            json!({"type":"function_call_output","call_id":"c","output":"orig"}),
        ];
        let got = read(Api::Responses, &items, &p);
        let keep: Vec<bool> = got.iter().map(|(_, s)| s.keep).collect();
        assert_eq!(keep, [true, true, false]);
        // Only the tool itself: a call that mentions its name is an ordinary call.
        let mentions = [
            json!({"type":"message","role":"user","content":"task"}),
            json!({"type":"function_call","call_id":"g","name":"exec_command","arguments":"{\"cmd\":\"grep -rn mcp__lam__recall src\"}"}),
            json!({"type":"function_call_output","call_id":"g","output":"orig"}),
            json!({"type":"function_call","call_id":"x","name":"mcp__lam__recallXYZ","arguments":"{}"}),
            json!({"type":"function_call_output","call_id":"x","output":"orig"}),
            json!({"type":"custom_tool_call","call_id":"e","name":"exec","input":"// mcp__lam__recall is not called here\nconst r = await tools.exec_command({cmd: 'ls'});"}),
            json!({"type":"custom_tool_call_output","call_id":"e","output":"orig"}),
        ];
        let keep: Vec<bool> = read(Api::Responses, &mentions, &p).iter().map(|(_, s)| s.keep).collect();
        assert_eq!(keep, [false, false, false]);
        assert_eq!(got[0].1.action, "mcp__lam__recall({\"id\":\"7cfd\"})", "the namespace is part of the name");
        let claude = [
            json!({"role":"user","content":"task"}),
            json!({"role":"assistant","content":[{"type":"tool_use","id":"t","name":"mcp__lam__recall","input":{"id":"7cfd"}}]}),
            json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"orig"}]}]}),
        ];
        assert!(read(Api::Messages, &claude, &p)[0].1.keep);
        assert!(!read(Api::Messages, &claude, &Policy::default())[0].1.keep);
    }

    #[test]
    fn responses_function_call_output() {
        let items = [
            json!({"role":"user","content":"task"}),
            json!({"type":"function_call","call_id":"f1","name":"shell","arguments":"{}"}),
            json!({"type":"function_call_output","call_id":"f1","output":"res"}),
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":"obs"}]}),
        ];
        assert_eq!(
            slots(Api::Responses, &items, false),
            [(2, Slot { path: Path::new().key("output"), action: "shell({})".into(), keep: false, recall: false })]
        );
        assert_eq!(slots(Api::Responses, &items, true).len(), 2);
    }

    /// Gemini: `functionResponse` results named by their `functionCall`
    /// (by `id`), the recall tool's kept whole, a later user text turn an
    /// observation with `user_turns` (a thought of the model's never), a
    /// large `args` string citable.
    #[test]
    fn gemini_parts() {
        let p = Policy { recall_tool: Some("mcp_lam_recall".into()), user_turns: true, ..Policy::default() };
        let big = "x".repeat(CITABLE_INPUT_BYTES);
        let items = [
            json!({"role":"user","parts":[{"text":"<session_context>..."},{"text":"Look at app.py"}]}),
            json!({"role":"model","parts":[{"text":"hm","thought":true},{"functionCall":{"id":"r1","name":"read_file","args":{"file_path":"a.py"}}},
                {"functionCall":{"id":"m1","name":"mcp_lam_recall","args":{"id":"7cfd"}}}]}),
            json!({"role":"user","parts":[{"functionResponse":{"id":"r1","name":"read_file","response":{"output":"def f(): ..."}}},
                {"functionResponse":{"id":"m1","name":"mcp_lam_recall","response":{"output":"orig"}}}]}),
            json!({"role":"user","parts":[{"text":"now run it"}]}),
            json!({"role":"model","parts":[{"functionCall":{"id":"w1","name":"write_file","args":{"file_path":"b.py","content":big}}}]}),
        ];
        let slots = read(Api::Gemini, &items, &p);
        assert_eq!(at(&slots), ["2 /parts/0/functionResponse/response/output", "2 /parts/1/functionResponse/response/output", "3 /parts/0/text"]);
        let got: Vec<(&str, bool)> = slots.iter().map(|(_, s)| (s.action.as_str(), s.keep)).collect();
        assert_eq!(
            got,
            [
                (r#"read_file({"file_path":"a.py"})"#, false),
                (r#"mcp_lam_recall({"id":"7cfd"})"#, true),
                (r#"read_file({"file_path":"a.py"}); mcp_lam_recall({"id":"7cfd"})"#, false),
            ]
        );
        let inputs: Vec<String> = citable_inputs(Api::Gemini, &items[4]).into_iter().map(|(s, _)| s.path.to_string()).collect();
        assert_eq!(inputs, ["/parts/0/functionCall/args/content"]);
    }

    /// Gemini's parallel calls without ids (as the Gemini API and the
    /// google-genai SDKs send them) pair with their responses by position:
    /// the second `read_file` response is the second call's, never the
    /// last call's for both.
    #[test]
    fn parallel_calls_without_ids_pair_by_position() {
        let call = |f: &str| json!({"functionCall":{"name":"read_file","args":{"file_path":f}}});
        let answer = |out: &str| json!({"functionResponse":{"name":"read_file","response":{"output":out}}});
        let items = [
            json!({"role":"user","parts":[{"text":"Look at a.py and b.py"}]}),
            json!({"role":"model","parts":[call("a.py"), call("b.py"), {"functionCall":{"name":"list_dir","args":{}}}]}),
            json!({"role":"user","parts":[answer("A"), answer("B"), {"functionResponse":{"name":"list_dir","response":{"output":"a.py b.py"}}}]}),
            json!({"role":"model","parts":[call("c.py")]}),
            json!({"role":"user","parts":[answer("C")]}),
        ];
        let slots = read(Api::Gemini, &items, &Policy::default());
        let got: Vec<&str> = slots.iter().map(|(_, s)| s.action.as_str()).collect();
        assert_eq!(got, [r#"read_file({"file_path":"a.py"})"#, r#"read_file({"file_path":"b.py"})"#, "list_dir({})", r#"read_file({"file_path":"c.py"})"#]);
    }

    /// A large input of a server tool's call (`server_tool_use`) is as
    /// citable as a client tool's (`tool_use`): one reading of the wire.
    #[test]
    fn server_tool_inputs_are_citable_like_tool_inputs() {
        let big = "q".repeat(CITABLE_INPUT_BYTES);
        for t in ["tool_use", "server_tool_use"] {
            let v = json!({"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": t, "id": "s1", "name": "web_search", "input": {"query": big}}]});
            let got: Vec<String> = citable_inputs(Api::Messages, &v).into_iter().map(|(s, _)| s.path.to_string()).collect();
            assert_eq!(got, ["/content/1/input/query"], "{t}");
        }
    }
}
