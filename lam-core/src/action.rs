//! The one rule for naming the action of a tool call.
//!
//! A record's `action` is part of its content id (`§id` hashes the action and
//! the observation), so every surface that sees the same tool call must name
//! it the same way: the trajectory readers (`lam compact`), the proxy
//! (`lam serve`) and the Python package. A call is `name(arguments)`, the
//! arguments as the client sent them (a JSON string's text, or a JSON value's
//! compact form); several calls answered together are joined by `"; "`.
//!
//! ```
//! use lam_core::action;
//! assert_eq!(action::tool_call("bash", r#"{"cmd":"ls"}"#), r#"bash({"cmd":"ls"})"#);
//! let v = serde_json::json!({"command": "ls"});
//! assert_eq!(action::tool_call_value("Bash", Some(&v)), r#"Bash({"command":"ls"})"#);
//! assert_eq!(action::join(["a()".to_string(), "b(1)".to_string()]), "a(); b(1)");
//! ```

/// The action of one tool call: `name(arguments)`.
pub fn tool_call(name: &str, arguments: &str) -> String {
    let name = if name.is_empty() { "tool" } else { name };
    format!("{name}({arguments})")
}

/// [`tool_call`] with arguments as a JSON value: a string is taken as its
/// text (OpenAI sends arguments as a JSON-encoded string), anything else in
/// its compact form (Anthropic `input` objects); absent arguments are empty.
pub fn tool_call_value(name: &str, arguments: Option<&serde_json::Value>) -> String {
    match arguments {
        Some(serde_json::Value::String(s)) => tool_call(name, s),
        Some(serde_json::Value::Null) | None => tool_call(name, ""),
        Some(v) => tool_call(name, &v.to_string()),
    }
}

/// A tool's name with its namespace, as the one name every surface gives
/// it: Codex lists an MCP server's tools in a namespace `mcp__SERVER` (a
/// Responses `function_call` carries `namespace` and `name` apart) and its
/// code mode calls them `mcp__SERVER__TOOL`; both are `mcp__lam__recall`.
///
/// ```
/// use lam_core::action::namespaced;
/// assert_eq!(namespaced(Some("mcp__lam"), "recall"), "mcp__lam__recall");
/// assert_eq!(namespaced(Some("mcp__lam__"), "recall"), "mcp__lam__recall");
/// assert_eq!(namespaced(None, "exec_command"), "exec_command");
/// assert_eq!(namespaced(Some(""), "exec_command"), "exec_command");
/// ```
pub fn namespaced(namespace: Option<&str>, name: &str) -> String {
    match namespace.filter(|n| !n.is_empty()) {
        Some(ns) if ns.ends_with("__") => format!("{ns}{name}"),
        Some(ns) => format!("{ns}__{name}"),
        None => name.to_string(),
    }
}

/// Several calls answered by one observation, in order.
pub fn join(calls: impl IntoIterator<Item = String>) -> String {
    calls.into_iter().collect::<Vec<_>>().join("; ")
}

/// The action a tool result answers: the call in `assistant` (an OpenAI
/// chat message) whose `id` is the result's `tool_call_id`, as
/// `name(arguments)`; without such a call, the whole message's action
/// ([`of_message`]). The readers, `lam serve` and the Python package all
/// name results this way, so the same call and output get the same `§id`.
///
/// ```
/// use lam_core::action::answered;
/// let m = serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
///     {"id": "a", "function": {"name": "ls", "arguments": "{}"}},
///     {"id": "b", "function": {"name": "cat", "arguments": "{\"path\":\"x\"}"}}]});
/// assert_eq!(answered(&m, Some("b")), r#"cat({"path":"x"})"#);
/// assert_eq!(answered(&m, None), r#"ls({}); cat({"path":"x"})"#);
/// ```
pub fn answered(assistant: &serde_json::Value, tool_call_id: Option<&str>) -> String {
    let calls = assistant.get("tool_calls").and_then(serde_json::Value::as_array);
    let call = tool_call_id.and_then(|id| calls?.iter().find(|c| c.get("id").and_then(serde_json::Value::as_str) == Some(id)));
    match call {
        Some(c) => of_call(c),
        None => of_message(assistant),
    }
}

/// The action of an assistant message: its `action` field (SWE-agent), its
/// tool calls joined by `"; "` (OpenAI chat), or the last fenced code block
/// of its text (mini-swe-agent and other text agents), else its text, trimmed.
///
/// ```
/// let m = serde_json::json!({"role": "assistant", "content": "Look:\n```bash\nls -la\n```"});
/// assert_eq!(lam_core::action::of_message(&m), "ls -la");
/// ```
pub fn of_message(m: &serde_json::Value) -> String {
    if let Some(a) = m.get("action").and_then(serde_json::Value::as_str) {
        return a.trim().to_string();
    }
    if let Some(serde_json::Value::Array(calls)) = m.get("tool_calls")
        && !calls.is_empty()
    {
        return join(calls.iter().map(of_call));
    }
    let text = message_text(m.get("content"));
    fenced_block(&text).unwrap_or(&text).trim().to_string()
}

/// One OpenAI chat tool call (`{function: {name, arguments}}`) as an action.
fn of_call(c: &serde_json::Value) -> String {
    let f = c.get("function").unwrap_or(c);
    let name = f.get("name").and_then(serde_json::Value::as_str).unwrap_or("tool");
    tool_call_value(name, f.get("arguments"))
}

/// A message's text: the content string, or its parts' texts together.
fn message_text(content: Option<&serde_json::Value>) -> String {
    match content {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(serde_json::Value::as_str))).collect()
        }
        _ => String::new(),
    }
}

/// The body of the last fenced code block, without its language tag.
fn fenced_block(text: &str) -> Option<&str> {
    let end = text.rfind("```")?;
    let start = text[..end].rfind("```")?;
    let block = &text[start + 3..end];
    let tagged = block.split_once('\n').filter(|(lang, _)| lang.trim().chars().all(char::is_alphanumeric));
    Some(tagged.map_or(block, |(_, rest)| rest))
}

/// Longest [`referent`], in characters.
pub const REFERENT_CHARS: usize = 48;

/// The words a stub names a tool call by, so that a model finds the call in
/// its own context: the call's main argument (a command, a file path, a
/// pattern), or the action itself when it is not a `name(arguments)` call
/// (a shell command of mini-swe-agent), shortened: its first line, cut
/// before the first character a JSON encoder or a Markdown code span could
/// write differently (`"`, `\`, `` ` ``, control and non-ASCII characters)
/// and at [`REFERENT_CHARS`] (at a word boundary). A first word longer than
/// that which is a path (an absolute file path of Claude Code's `Read`) keeps
/// its end instead, after `...`: `.../project/src/big.py`. What remains
/// (after any `...`) occurs verbatim in the conversation the model is given,
/// whether the call is shown as text or as JSON. Empty only for an empty
/// action.
///
/// ```
/// use lam_core::action::referent;
/// assert_eq!(referent(r#"Bash({"command":"cat src/app.py","description":"Show it"})"#), "cat src/app.py");
/// assert_eq!(referent(r#"Read({"file_path":"/repo/a.rs"})"#), "/repo/a.rs");
/// assert_eq!(referent("cd repo && grep -n \"def f\" x.py"), "cd repo && grep -n");
/// assert_eq!(referent("ls()"), "ls");
/// ```
pub fn referent(action: &str) -> String {
    shorten(&main_of(action).1)
}

/// The tool's name when `action` is a tool call, and what names the call
/// before [`referent`] shortens it: the main argument, else the tool's
/// name; a code-mode script's first tool call; the whole action.
fn main_of(action: &str) -> (Option<&str>, String) {
    match parse(action) {
        Some((name, Some(args))) => (Some(name), main_argument(&args).unwrap_or_else(|| name.to_string())),
        Some((name, None)) => (Some(name), name.to_string()),
        None => (None, code_mode_call(action).unwrap_or_else(|| action.to_string())),
    }
}

/// [`referent`] and [`call_key`] of one action, parsed once (the operator
/// needs both for every record).
pub fn referent_and_key(action: &str) -> (String, String) {
    let (tool, main) = main_of(action);
    (shorten(&main), key(tool, &main, action))
}

fn key(tool: Option<&str>, main: &str, action: &str) -> String {
    match tool {
        Some(name) => format!("{name}({main})"),
        None => action.to_string(),
    }
}

/// What a call does, for telling a call run again (`last time`,
/// `docs/stubs.md`): its tool's name and its main argument uncut (what
/// [`referent`] shortens; the `description` of Claude Code's `Bash` and
/// other arguments left out), or the whole action when it is not a tool
/// call (a mini-swe-agent shell command).
///
/// ```
/// use lam_core::action::call_key;
/// let a = r#"Bash({"command":"git status","description":"Check status"})"#;
/// let b = r#"Bash({"command":"git status","description":"See what is staged"})"#;
/// assert_eq!(call_key(a), call_key(b));
/// assert_ne!(call_key(a), call_key(r#"Bash({"command":"git status -s"})"#));
/// assert_eq!(call_key("cd /testbed && python -c \"print(1)\""), "cd /testbed && python -c \"print(1)\"");
/// ```
pub fn call_key(action: &str) -> String {
    referent_and_key(action).1
}

/// An action written by [`tool_call`] split back into its name and its
/// arguments exactly as written (the text between the first `(` and the
/// last `)`); `None` when it is not `name(...)` with a tool's name.
///
/// ```
/// use lam_core::action::split;
/// assert_eq!(split(r#"exec_command({"cmd": "ls"})"#), Some(("exec_command", r#"{"cmd": "ls"}"#)));
/// assert_eq!(split("exec(const r = await tools.x({});)"), Some(("exec", "const r = await tools.x({});")));
/// assert_eq!(split("ls -la"), None);
/// ```
pub fn split(action: &str) -> Option<(&str, &str)> {
    let (name, rest) = action.split_once('(')?;
    let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-:".contains(&b));
    Some((name, rest.strip_suffix(')')?)).filter(|_| valid)
}

/// The one parser of an action written by [`tool_call`]: `name(json)` as
/// (name, the JSON value), `(name, None)` for `name()`; `None` when the
/// action is not such a call (a shell command, arguments that are not one
/// JSON value). Every surface that reads a call back from its action
/// (`lam replay`, the stubs' referents) uses this one.
///
/// ```
/// use lam_core::action::parse;
/// let (name, args) = parse(r#"mcp__lam__recall({"id":"7cfd"})"#).unwrap();
/// assert_eq!((name, args.unwrap()["id"].as_str()), ("mcp__lam__recall", Some("7cfd")));
/// assert_eq!(parse("ls()").map(|(n, a)| (n, a.is_none())), Some(("ls", true)));
/// assert!(parse("ls -la").is_none() && parse("f(raw text)").is_none());
/// ```
pub fn parse(action: &str) -> Option<(&str, Option<serde_json::Value>)> {
    let (name, rest) = action.split_once('(')?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-:".contains(&b)) {
        return None;
    }
    if rest.starts_with(')') {
        return Some((name, None));
    }
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
    let value = values.next()?.ok()?;
    rest[values.byte_offset()..].starts_with(')').then_some((name, Some(value)))
}

/// A Codex code-mode call (`exec(SOURCE)`, JavaScript that calls
/// `tools.NAME(ARGS)`) named by the first tool it calls: the main argument
/// of `ARGS` when they are one JSON value, else `NAME`. `None` for any other
/// action, and for a script that calls no tool.
///
/// ```text
/// exec(const r = await tools.exec_command({"cmd": "cargo test"});)  ->  cargo test
/// exec(const r = await tools.exec_command({cmd: 'ls'});)            ->  exec_command
/// ```
fn code_mode_call(action: &str) -> Option<String> {
    let source = action.strip_prefix("exec(")?;
    let at = source.find("tools.")? + "tools.".len();
    let rest = &source[at..];
    let name_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let (name, args) = rest.split_at(name_len);
    let args = args.strip_prefix('(')?;
    let value = serde_json::Deserializer::from_str(args).into_iter::<serde_json::Value>().next().and_then(Result::ok);
    (!name.is_empty()).then(|| value.as_ref().and_then(main_argument).unwrap_or_else(|| name.to_string()))
}

/// The argument that names what a call did.
fn main_argument(args: &serde_json::Value) -> Option<String> {
    const KEYS: [&str; 10] = ["command", "cmd", "file_path", "path", "filePath", "pattern", "query", "url", "file", "code"];
    match args {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(a) => argv(a),
        // Responses `shell_call`: `{"commands": ["pytest -q", "git status"]}`, run in order.
        serde_json::Value::Object(m) if m.get("commands").and_then(|c| c.as_array()).is_some_and(|c| c.iter().all(|x| x.is_string())) => {
            let c = m["commands"].as_array().map(|c| c.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join("; "));
            c.filter(|c| !c.is_empty())
        }
        serde_json::Value::Object(m) => {
            let preferred = KEYS.iter().find_map(|k| m.get(*k)).and_then(main_argument);
            preferred.or_else(|| m.values().find_map(|v| v.as_str().map(str::to_string)))
        }
        _ => None,
    }
}

/// A command as an argument vector: `["bash", "-lc", "pytest -q"]`
/// (Codex) is its script; `["ls", "-la"]` (Responses `local_shell_call`)
/// its words joined; anything else, its last argument that names something.
fn argv(a: &[serde_json::Value]) -> Option<String> {
    let words: Option<Vec<&str>> = a.iter().map(|x| x.as_str()).collect();
    match words.as_deref() {
        Some([_, flag, script]) if matches!(*flag, "-c" | "-lc") => Some(script.to_string()),
        Some(w) if !w.is_empty() => Some(w.join(" ")),
        _ => a.iter().rev().find_map(main_argument),
    }
}

fn shorten(text: &str) -> String {
    let line = text.trim_start().lines().next().unwrap_or("");
    let end = line.find(|c: char| c == '"' || c == '\\' || c == '`' || c.is_control() || !c.is_ascii()).unwrap_or(line.len());
    let line = &line[..end];
    match line.char_indices().nth(REFERENT_CHARS) {
        None => line.trim_end().to_string(),
        // Too long: cut at the last space within the limit, so no word is
        // cut in half (unless the first word alone is that long).
        Some((limit, _)) => {
            let cut = &line[..limit];
            let at_word = line[limit..].starts_with(' ') || cut.ends_with(' ');
            match cut.rsplit_once(' ') {
                _ if at_word => cut.trim_end().to_string(),
                Some((head, _)) => head.trim_end().to_string(),
                None => path_tail(line.split(' ').next().unwrap_or(line)).unwrap_or_else(|| cut.to_string()),
            }
        }
    }
}

/// A path too long to name whole, as `...` and its last components, in at
/// most [`REFERENT_CHARS`] characters; `None` when it is no path.
fn path_tail(word: &str) -> Option<String> {
    let room = REFERENT_CHARS - "...".len();
    let from = word.char_indices().filter(|&(i, c)| c == '/' && word.len() - i <= room).map(|(i, _)| i).next()?;
    Some(format!("...{}", &word[from..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referents_name_the_call_as_the_model_saw_it() {
        assert_eq!(referent(r#"bash({"cmd":"ls -la"})"#), "ls -la");
        assert_eq!(referent(r#"shell({"command":["bash","-lc","pytest -q"]})"#), "pytest -q");
        assert_eq!(referent(r#"local_shell({"type":"exec","command":["ls","-la"],"env":{}})"#), "ls -la");
        assert_eq!(referent(r#"shell({"commands":["pytest -q","git status"],"timeout_ms":1000})"#), "pytest -q; git status");
        assert_eq!(referent(r#"apply_patch({"input":"*** Begin Patch\n"})"#), "*** Begin Patch");
        assert_eq!(referent("f(raw text)"), "f(raw text)", "not JSON: the action itself");
        assert_eq!(referent("python -c 'print(1)'"), "python -c 'print(1)'");
        assert_eq!(referent(&"x".repeat(100)).len(), REFERENT_CHARS);
        assert_eq!(referent("sed -n '660,690p' astropy/io/fits/hdu/compressed_data.py"), "sed -n '660,690p'", "no word cut in half");
        assert_eq!(referent(&format!("{} tail", "y".repeat(47))), "y".repeat(47));
        assert_eq!(referent("  \n"), "");
        let read = r#"Read({"file_path":"/tmp/agw/claude-code-changes-6c7md5oi/work/big.py"})"#;
        assert_eq!(referent(read), ".../agw/claude-code-changes-6c7md5oi/work/big.py", "a long path keeps its end");
        assert_eq!(referent(&format!("/{}", "z".repeat(60))), format!("/{}", "z".repeat(47)), "no part of it fits");
        assert_eq!(referent("echo héllo"), "echo h");
        assert_eq!(referent(&join([tool_call("a", r#"{"path":"p"}"#), tool_call("b", "{}")])), "p", "the first call");
        // Codex code mode: the script's first tool call, not its first line.
        let exec = "exec(const r = await tools.exec_command({\"cmd\": \"cargo test -q\"});\ntext(r.output);)";
        assert_eq!(referent(exec), "cargo test -q");
        assert_eq!(referent("exec(const r = await tools.exec_command({cmd: 'ls'});)"), "exec_command", "JS, not JSON: the tool");
        assert_eq!(referent("exec(text('hello');)"), "exec(text('hello');)", "no tool called: the action");
    }

    #[test]
    fn unnamed_calls_are_tools() {
        assert_eq!(tool_call("", "x"), "tool(x)");
        assert_eq!(tool_call_value("f", None), "f()");
        assert_eq!(tool_call_value("f", Some(&serde_json::json!("raw text"))), "f(raw text)");
    }
}
