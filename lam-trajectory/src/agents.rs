//! Coding-agent session logs read as trajectories: Claude Code transcripts
//! (`~/.claude/projects/<project>/<session>.jsonl`, subagents in
//! `<session>/subagents/agent-*.jsonl`) and Codex CLI rollouts
//! (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`). Both are JSON Lines; which
//! one a `.jsonl` file holds, or lam's own JSONL, is told by its first
//! non-blank line ([`detect`]). Every tool-result text is one record (as the
//! proxy admits them, `lam_core::wire::outputs`) whose action is the call
//! that produced it, named by the one rule ([`lam_core::action`]).

use crate::trajectory::{Format, ReadError, Trajectory, kind};
use lam_core::wire::{self, Api};
use lam_core::{Record, SessionId};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The format of a JSON Lines file, from its first non-blank line: lam JSONL
/// (`session`, `index`), a Claude Code transcript (`type` with `sessionId`,
/// `uuid`, `parentUuid`, `leafUuid` or `messageId`), or a Codex rollout (a
/// `{type, payload}` envelope, a bare response item, or the legacy first line
/// `{id, timestamp, instructions}`). `None` when the line is none of these.
pub fn detect(bytes: &[u8]) -> Option<Format> {
    let line = bytes.split(|&b| b == b'\n').find(|l| !l.iter().all(u8::is_ascii_whitespace))?;
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    let has = |k: &str| o.contains_key(k);
    if has("session") && has("index") {
        return Some(Format::LamJsonl);
    }
    let ty = o.get("type").and_then(Value::as_str);
    if ty.is_some() && has("payload") {
        return Some(Format::Codex);
    }
    if ty.is_some() && ["sessionId", "uuid", "parentUuid", "leafUuid", "messageId"].iter().any(|k| has(k)) {
        return Some(Format::ClaudeCode);
    }
    let legacy_meta = ty.is_none() && has("id") && has("timestamp") && (has("instructions") || has("git"));
    if legacy_meta || has("record_type") || ty.is_some_and(is_codex_item) {
        return Some(Format::Codex);
    }
    None
}

fn is_codex_item(t: &str) -> bool {
    matches!(
        t,
        "message"
            | "reasoning"
            | "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "local_shell_call"
            | "web_search_call"
    )
}

/// Whether a Claude Code transcript or Codex rollout holds something the
/// model answered: an `assistant` line that is no local stand-in (Claude
/// Code writes its own errors, "Please run /login", as `assistant` lines of
/// model `<synthetic>` or `isApiErrorMessage`), or a response item the model
/// produced (Codex: an assistant `message`, `reasoning`, a tool call).
/// Lines that are no JSON objects are skipped; other formats: false.
pub fn model_answered(bytes: &[u8]) -> bool {
    let format = detect(bytes);
    let answer = |o: &Map<String, Value>| match format {
        Some(Format::ClaudeCode) => {
            let synthetic = o.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true)
                || o.get("message").and_then(|m| m.get("model")).and_then(Value::as_str) == Some("<synthetic>");
            o.get("type").and_then(Value::as_str) == Some("assistant") && !synthetic
        }
        Some(Format::Codex) => {
            let item = match (o.get("type").and_then(Value::as_str), o.get("payload").and_then(Value::as_object)) {
                (Some("response_item"), Some(p)) => p,
                (_, None) => o,
                _ => return false,
            };
            match item.get("type").and_then(Value::as_str) {
                Some("message") => item.get("role").and_then(Value::as_str) == Some("assistant"),
                Some(t) => is_codex_item(t) && !t.ends_with("_output"),
                None => false,
            }
        }
        _ => false,
    };
    objects(bytes, "").flatten().any(|(_, o)| answer(&o))
}

/// The non-blank lines of a JSONL file as JSON objects, with 1-based line numbers.
fn objects<'a>(bytes: &'a [u8], name: &'a str) -> impl Iterator<Item = Result<(usize, Map<String, Value>), ReadError>> + 'a {
    bytes.split(|&b| b == b'\n').enumerate().filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace)).map(move |(i, line)| {
        let n = i + 1;
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(o)) => Ok((n, o)),
            Ok(other) => Err(line_error(name, n, format!("line is {}, not an object", kind(&other)))),
            Err(e) => Err(line_error(name, n, format!("malformed JSON at column {}: {e}", e.column()))),
        }
    })
}

fn line_error(name: &str, n: usize, message: String) -> ReadError {
    ReadError::Record { path: name.to_string(), record: format!("line {n}"), message }
}

/// A line's `timestamp` (ISO 8601 / RFC 3339, as Claude Code and Codex
/// write it), in Unix milliseconds; `None` when absent or unreadable.
pub fn timestamp(o: &Map<String, Value>) -> Option<i64> {
    let t = o.get("timestamp")?.as_str()?;
    chrono::DateTime::parse_from_rfc3339(t).ok().map(|d| d.timestamp_millis())
}

fn stem(path: &Path) -> String {
    let n = path.file_name().and_then(|n| n.to_str()).unwrap_or("session");
    let n = n.strip_suffix(".gz").unwrap_or(n);
    n.strip_suffix(".jsonl").unwrap_or(n).to_string()
}

/// Records being assembled: calls waiting for their results, the model's text
/// since the last call, and what has been read so far.
#[derive(Default)]
struct Session {
    name: Option<String>,
    task: String,
    pending_thought: String,
    calls: HashMap<String, (String, String)>,
    records: Vec<Record>,
    thoughts: Vec<String>,
    /// The current line's `timestamp` (Unix ms), and each record's.
    time: Option<i64>,
    times: Vec<Option<i64>>,
}

impl Session {
    fn think(&mut self, text: &str) {
        let t = text.trim();
        if !t.is_empty() {
            if !self.pending_thought.is_empty() {
                self.pending_thought.push('\n');
            }
            self.pending_thought.push_str(t);
        }
    }

    /// A call: it takes the text said before it (a later call of the same turn gets none).
    fn call(&mut self, id: &str, action: String) {
        let thought = std::mem::take(&mut self.pending_thought);
        self.calls.insert(id.to_string(), (action, thought));
    }

    /// A result: one record, with the action of its call (empty when the
    /// call was not seen). A result in several texts is a record each: all
    /// name the call; the first takes the text said before it.
    fn result(&mut self, id: &str, observation: String, returncode: Option<i32>) {
        let (action, thought) = match self.calls.get_mut(id) {
            Some((action, thought)) => (action.clone(), std::mem::take(thought)),
            None => Default::default(),
        };
        self.thoughts.push(thought);
        self.times.push(self.time);
        self.records.push(Record { index: self.records.len() as u32, action, observation: observation.into_bytes(), returncode });
    }

    fn task(&mut self, text: &str) {
        if self.task.is_empty() {
            self.task = text.trim_end().to_string();
        }
    }

    fn finish(self, path: &Path, format: Format, default_name: String) -> Trajectory {
        Trajectory {
            session: SessionId(self.name.unwrap_or(default_name)),
            source: path.to_path_buf(),
            format,
            records: self.records,
            thoughts: self.thoughts,
            task: self.task,
            times: self.times,
            cache_ttl: None,
        }
    }
}

/// Read a Claude Code transcript: each text of a `tool_result` block of a
/// `user` line is one record (a block with no text, one empty record); its action is the `tool_use` with that id,
/// `name(compact JSON input)`. Lines of other types are skipped. The session
/// is the first `sessionId` (a subagent file, whose lines are `isSidechain`,
/// is `<sessionId>.<file stem>`), else the file stem. A file with no `user`
/// or `assistant` line holds no session.
///
/// A compaction (`/compact`, or automatic: a `system` line of subtype
/// `compact_boundary`) ends a conversation: Claude Code then sends a new one
/// that opens with the summary (the `isCompactSummary` user line) instead of
/// everything before. Each conversation is its own trajectory, the ones after
/// the first named `<session>.compact-N` (when it holds tool results), with
/// the summary as its task, so no stub cites an observation the model no
/// longer sees.
pub fn read_claude_code(bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
    let name = path.display().to_string();
    let mut parts = vec![Part::default()];
    let mut base = None;
    let mut seen = HashSet::new();
    // Which prompt caches the answers wrote to: [5 minutes, 1 hour].
    let mut writes = [false; 2];
    for line in objects(bytes, &name) {
        let (n, o) = line?;
        let err = |m: String| line_error(&name, n, m);
        let ty = match o.get("type") {
            Some(Value::String(t)) => t.as_str(),
            _ => return Err(err("has no string `type`".into())),
        };
        if let Some(Value::Object(c)) = o.get("message").and_then(|m| m.get("usage")).and_then(|u| u.get("cache_creation")) {
            for (k, key) in ["ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"].iter().enumerate() {
                writes[k] |= c.get(*key).and_then(Value::as_u64).is_some_and(|t| t > 0);
            }
        }
        if ty == "system" && o.get("subtype").and_then(Value::as_str) == Some("compact_boundary") {
            parts.push(Part::default());
            continue;
        }
        if ty != "user" && ty != "assistant" {
            continue;
        }
        if let Some(u) = o.get("uuid").and_then(Value::as_str)
            && !seen.insert(u.to_string())
        {
            continue;
        }
        if base.is_none()
            && let Some(id) = o.get("sessionId").and_then(Value::as_str)
        {
            let side = o.get("isSidechain").and_then(Value::as_bool) == Some(true);
            base = Some(if side { format!("{id}.{}", stem(path)) } else { id.to_string() });
        }
        let part = parts.last_mut().expect("one part at least");
        part.any_message = true;
        let content = message_content(&o).map_err(err)?;
        let meta = o.get("isMeta").and_then(Value::as_bool) == Some(true);
        let s = &mut part.session;
        s.time = timestamp(&o);
        if ty == "assistant" { claude_assistant(s, content) } else { claude_user(s, content, meta) }.map_err(err)?;
    }
    let base = base.unwrap_or_else(|| stem(path));
    // After a compaction, a conversation without tool results has nothing to compact.
    let named = parts.into_iter().enumerate().filter(|(k, p)| p.any_message && (*k == 0 || !p.session.records.is_empty()));
    let cache_ttl = match writes {
        [true, _] => Some(300),
        [false, true] => Some(3600),
        [false, false] => None,
    };
    let finish = |(k, p): (usize, Part)| {
        let t = p.session.finish(path, Format::ClaudeCode, if k == 0 { base.clone() } else { format!("{base}.compact-{k}") });
        Trajectory { cache_ttl, ..t }
    };
    Ok(named.map(finish).collect())
}

/// One conversation of a transcript: the part before the first compaction,
/// or after one.
#[derive(Default)]
struct Part {
    session: Session,
    any_message: bool,
}

fn message_content(o: &Map<String, Value>) -> Result<&Value, String> {
    match o.get("message") {
        Some(Value::Object(m)) => match m.get("content") {
            Some(c @ (Value::String(_) | Value::Array(_))) => Ok(c),
            Some(other) => Err(format!("message content is {}, not text or blocks", kind(other))),
            None => Err("message has no `content`".into()),
        },
        Some(other) => Err(format!("`message` is {}, not an object", kind(other))),
        None => Err("has no `message`".into()),
    }
}

fn blocks(content: &Value) -> Result<Vec<&Map<String, Value>>, String> {
    let Value::Array(bs) = content else { return Ok(Vec::new()) };
    bs.iter().map(|b| b.as_object().ok_or_else(|| format!("content block is {}, not an object", kind(b)))).collect()
}

fn str_field<'a>(b: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str, String> {
    b.get(key).and_then(Value::as_str).ok_or_else(|| format!("{what} has no string `{key}`"))
}

fn claude_assistant(s: &mut Session, content: &Value) -> Result<(), String> {
    if let Value::String(t) = content {
        s.think(t);
    }
    for b in blocks(content)? {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => s.think(str_field(b, "text", "text block")?),
            Some("thinking") => s.think(b.get("thinking").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use" | "server_tool_use") => {
                str_field(b, "id", "tool_use block")?;
                str_field(b, "name", "tool_use block")?;
                if let Some(call) = wire::block_call(b) {
                    s.call(call.id, call.action());
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn claude_user(s: &mut Session, content: &Value, meta: bool) -> Result<(), String> {
    let mut text = String::new();
    if let Value::String(t) = content {
        text.push_str(t);
    }
    for b in blocks(content)? {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(str_field(b, "text", "text block")?),
            Some("tool_result") => {
                let id = str_field(b, "tool_use_id", "tool_result block")?;
                for obs in result_texts(b)? {
                    s.result(id, obs, None);
                }
            }
            _ => {}
        }
    }
    if !meta && !text.trim().is_empty() {
        s.task(&slash_command(&text).unwrap_or(text));
    }
    Ok(())
}

/// A slash command as Claude Code logs it (`<command-message>`,
/// `<command-name>/x</command-name>`, `<command-args>...</command-args>`):
/// the command line the user typed, `/x ARGS`.
fn slash_command(text: &str) -> Option<String> {
    let tag = |t: &str| {
        let (open, close) = (format!("<{t}>"), format!("</{t}>"));
        let at = text.find(&open)? + open.len();
        Some(text[at..].split_once(close.as_str())?.0.trim())
    };
    let name = tag("command-name")?;
    Some(match tag("command-args") {
        Some(args) if !args.is_empty() => format!("{name} {args}"),
        _ => name.to_string(),
    })
}

/// A `tool_result`'s texts, one observation each as the proxy admits them
/// (`lam_core::wire::result_texts`): its string content, its `text` blocks,
/// the texts of its `search_result` blocks; one empty text when it has none.
fn result_texts(b: &Map<String, Value>) -> Result<Vec<String>, String> {
    let content = b.get("content").unwrap_or(&Value::Null);
    match content {
        Value::Null | Value::String(_) => {}
        Value::Array(_) => {
            blocks(content)?;
        }
        other => return Err(format!("tool_result content is {}, not text or blocks", kind(other))),
    }
    Ok(texts_at(content, &wire::result_texts(content, "")))
}

/// The texts at `pointers` in `v`; one empty text when there is none.
fn texts_at(v: &Value, pointers: &[String]) -> Vec<String> {
    let texts: Vec<String> = pointers.iter().filter_map(|p| v.pointer(p)?.as_str().map(str::to_string)).collect();
    if texts.is_empty() { vec![String::new()] } else { texts }
}

/// Read a Codex CLI rollout: each `function_call_output` and
/// `custom_tool_call_output` item is one record per text part of its
/// output (a string output: one); its action is the
/// `function_call` (`name(arguments)`), `custom_tool_call` (`name(input)`) or
/// `local_shell_call` (`local_shell(compact JSON action)`) with that
/// `call_id`. Items come in `response_item` envelopes, or bare in older
/// rollouts; other lines are skipped. The session is `session_meta`'s `id`
/// (legacy: the first line's `id`), else the file stem.
pub fn read_codex(bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
    let name = path.display().to_string();
    let mut s = Session::default();
    let mut first = true;
    for line in objects(bytes, &name) {
        let (n, o) = line?;
        let err = |m: String| line_error(&name, n, m);
        let is_first = std::mem::take(&mut first);
        s.time = timestamp(&o);
        match (o.get("type"), o.get("payload")) {
            (Some(Value::String(t)), Some(p)) => {
                let p = p.as_object().ok_or_else(|| err(format!("`payload` is {}, not an object", kind(p))))?;
                match t.as_str() {
                    "session_meta" => codex_meta(&mut s, p),
                    "response_item" => codex_item(&mut s, p).map_err(err)?,
                    _ => {}
                }
            }
            (Some(Value::String(_)), None) => codex_item(&mut s, &o).map_err(err)?,
            (Some(other), _) => return Err(err(format!("`type` is {}, not a string", kind(other)))),
            (None, _) if o.contains_key("record_type") => {}
            (None, _) if is_first => codex_meta(&mut s, &o),
            (None, _) => return Err(err("has no `type`".into())),
        }
    }
    Ok(vec![s.finish(path, Format::Codex, stem(path))])
}

fn codex_meta(s: &mut Session, p: &Map<String, Value>) {
    if s.name.is_none()
        && let Some(id) = p.get("id").and_then(Value::as_str)
    {
        s.name = Some(id.to_string());
    }
}

fn codex_item(s: &mut Session, p: &Map<String, Value>) -> Result<(), String> {
    let ty = str_field(p, "type", "item")?;
    let id = || p.get("call_id").or_else(|| p.get("id")).and_then(Value::as_str).unwrap_or("");
    match ty {
        "message" => codex_message(s, p)?,
        "reasoning" => {
            for part in ["summary", "content"].iter().filter_map(|k| p.get(*k)).filter_map(Value::as_array).flatten() {
                s.think(part.get("text").and_then(Value::as_str).unwrap_or(""));
            }
        }
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            if ty != "local_shell_call" {
                str_field(p, "name", ty)?;
            }
            for call in wire::calls(Api::Responses, p) {
                s.call(call.id, call.action());
            }
        }
        "function_call_output" | "custom_tool_call_output" => match p.get("output") {
            // Text parts: one observation each, as the proxy admits them.
            Some(parts @ Value::Array(_)) => {
                blocks(parts)?;
                for obs in texts_at(parts, &wire::texts(parts, "", &wire::OUTPUT_TEXT_TYPES)) {
                    s.result(id(), obs, None);
                }
            }
            other => {
                let (obs, rc) = codex_output(other)?;
                s.result(id(), obs, rc);
            }
        },
        _ => {}
    }
    Ok(())
}

fn codex_message(s: &mut Session, p: &Map<String, Value>) -> Result<(), String> {
    let mut text = String::new();
    match p.get("content") {
        Some(Value::String(t)) => text.push_str(t),
        Some(c @ Value::Array(_)) => {
            for b in blocks(c)? {
                text.push_str(b.get("text").and_then(Value::as_str).unwrap_or(""));
            }
        }
        None | Some(Value::Null) => {}
        Some(other) => return Err(format!("message content is {}, not text or parts", kind(other))),
    }
    match p.get("role").and_then(Value::as_str) {
        Some("assistant") => s.think(&text),
        // Codex sends its context (`<environment_context>`, `<user_instructions>`, AGENTS.md) as user messages too.
        Some("user") if !text.trim_start().starts_with('<') && !text.starts_with("# AGENTS.md") && !text.trim().is_empty() => s.task(&text),
        _ => {}
    }
    Ok(())
}

/// An output's text and exit code: a string, unwrapped when it is the JSON
/// `{output, metadata: {exit_code}}` that Codex's shell tool writes; an array
/// of content parts (their `text` joined by newlines); or `{content}`.
fn codex_output(o: Option<&Value>) -> Result<(String, Option<i32>), String> {
    match o {
        None | Some(Value::Null) => Ok((String::new(), None)),
        Some(Value::String(t)) => Ok(match serde_json::from_str::<Value>(t) {
            Ok(Value::Object(m)) if m.get("output").is_some_and(Value::is_string) && m.get("metadata").is_some_and(Value::is_object) => {
                let rc = m.get("metadata").and_then(|md| md.get("exit_code")).and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok());
                (m["output"].as_str().unwrap_or_default().to_string(), rc)
            }
            _ => (t.clone(), None),
        }),
        Some(c @ Value::Array(_)) => {
            let parts: Vec<&str> = blocks(c)?.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
            Ok((parts.join("\n"), None))
        }
        Some(Value::Object(m)) => codex_output(m.get("content").or_else(|| m.get("output"))),
        Some(other) => Err(format!("output is {}, not text", kind(other))),
    }
}
