//! Codex CLI: everything lam knows of it.
//!
//! - **Launch**: program `codex`; base URL `-c openai_base_url=ORIGIN/v1`
//!   (0.171 reads only the config key; earlier versions read
//!   `OPENAI_BASE_URL`, so both are set); `lam mcp` registered as server
//!   `lam` by `-c mcp_servers.lam.*` before the user's arguments, its tools
//!   approved (so `codex exec`, approval policy never, may call them), the
//!   recall tool `recall` in namespace `mcp__lam`, `mcp__lam__recall`;
//!   lam's status line as MCP server `lam_status` (`lam status-line
//!   --mcp`); `exec` is the batch form.
//! - **Wire**: OpenAI Responses ([`Codex::request`]).
//! - **Transcripts**: `$CODEX_HOME` (default `~/.codex`)
//!   `/sessions/YYYY/MM/DD/rollout-*.jsonl` (a resumed session appends to
//!   its first day's file) ([`read`]); resumed by `codex resume ID`.
//! - **Compaction**: at 90 % of the window, 272,000 for the gpt-5 family
//!   ([`Codex::compaction_threshold`]).
//! - **Forks**: `spawn_agent` with `fork_turns` other than `"none"`, bare
//!   or in any namespace ([`Codex::forks`]).
//!
//! docs/agents.md has how each fact was found.

use super::launch::{Arg, Launch, Setup, dash_c, origin_of, quoted};
use super::requests::Call as Recorded;
use super::room::Room;
use super::{home, jsonl_in};
use lam_core::wire::Call;
use serde_json::{Map, Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variable earlier versions read their base URL from.
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// OpenAI's origin, when the environment names none.
pub const VENDOR: &str = "https://api.openai.com";

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect()
}

fn is_item(t: &str) -> bool {
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

/// The context window of an OpenAI `model` as it counts it: 272,000 for
/// the gpt-5 family and `*codex*` names; `None` for another model.
pub fn window(model: &str) -> Option<u64> {
    let m = model.trim().to_ascii_lowercase();
    let name = m.rsplit('/').next().unwrap_or(&m);
    (name.starts_with("gpt-5") || name.contains("codex")).then_some(272_000)
}

/// The call and its output as it sends them: a `function_call` with the
/// arguments as written, or a `custom_tool_call` when they are no JSON
/// object (code mode's `exec`).
fn items(c: &Recorded, id: &str) -> [Value; 2] {
    match c.input() {
        Some(_) => [
            json!({"type": "function_call", "name": c.name, "arguments": c.arguments, "call_id": id}),
            json!({"type": "function_call_output", "call_id": id, "output": c.output}),
        ],
        None => [
            json!({"type": "custom_tool_call", "name": c.name, "input": c.arguments, "call_id": id}),
            json!({"type": "custom_tool_call_output", "call_id": id, "output": c.output}),
        ],
    }
}

/// Codex CLI's room: its facts, as [`Room`] (what [`super::Agent::Codex`] asks).
#[derive(Debug, Clone, Copy)]
pub struct Codex;

impl Room for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn program(&self) -> &'static str {
        "codex"
    }

    fn api(&self) -> lam_core::wire::Api {
        lam_core::wire::Api::Responses
    }

    /// `OPENAI_BASE_URL` and `-c openai_base_url` at the proxy, `lam mcp` as
    /// server `lam` and, with the status line, `lam status-line --mcp` as
    /// server `lam_status` with the experimental status line provider on: all
    /// `-c` settings before the user's arguments.
    fn launch(&self, s: &Setup<'_>) -> Launch {
        let base = self.base_url(s.origin);
        let list = serde_json::to_string(s.mcp).unwrap_or_default();
        let mut settings = vec![
            format!("openai_base_url={}", quoted(&base)),
            format!("mcp_servers.lam.command={}", quoted(s.lam)),
            format!("mcp_servers.lam.args={list}"),
            "mcp_servers.lam.default_tools_approval_mode=\"approve\"".to_string(),
        ];
        if s.status_line {
            let args = serde_json::to_string(&["status-line", "--mcp", "--proxy", s.origin]).unwrap_or_default();
            settings.extend([
                format!("mcp_servers.lam_status.command={}", quoted(s.lam)),
                format!("mcp_servers.lam_status.args={args}"),
                "mcp_servers.lam_status.default_tools_approval_mode=\"approve\"".to_string(),
                "features.tui_extensions_statusline=true".to_string(),
                "tui.status_line_provider={server=\"lam_status\",tool=\"status\"}".to_string(),
            ]);
        }
        Launch { env: vec![(BASE_URL_ENV.into(), base)], before: dash_c(settings), after: Vec::<Arg>::new(), ..Launch::default() }
    }

    /// `exec`: it asks the model at once.
    fn batch(&self, args: &[OsString]) -> bool {
        args.iter().any(|x| x == "exec")
    }

    /// How `lam mcp`'s recall tool reaches the model: namespace `mcp__lam`, tool
    /// `recall` (`tools.mcp__lam__recall` in code mode).
    fn recall_tool(&self) -> &'static str {
        "mcp__lam__recall"
    }

    fn vendor(&self) -> &'static str {
        VENDOR
    }

    /// The upstream the user configured: `$OPENAI_BASE_URL`, without its `/v1`.
    fn configured_upstream(&self, _args: &[OsString], _cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
        env(BASE_URL_ENV).filter(|v| !v.trim().is_empty()).map(|v| (origin_of(&v, true), format!("from ${BASE_URL_ENV}")))
    }

    fn base_url_env(&self) -> Option<&'static str> {
        Some(BASE_URL_ENV)
    }

    /// The base URL for a proxy at `origin`: it appends `/responses` to a base ending in `/v1`.
    fn base_url(&self, origin: &str) -> String {
        format!("{origin}/v1")
    }

    /// What `lam run` set to point it at the proxy (for the error when no request came).
    fn pointed_by(&self) -> &'static str {
        "-c openai_base_url=... and OPENAI_BASE_URL"
    }

    /// The arguments that resume `session`, and why its own resume line does not do.
    fn resume(&self, session: &str) -> (String, &'static str) {
        (format!("codex resume {session}"), "Codex's own `codex resume` line goes around lam")
    }

    /// Its rollouts, every day's.
    fn transcripts(&self, _cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
        let Some(root) = home(env, "CODEX_HOME", ".codex") else { return Vec::new() };
        let mut dirs = vec![root.join("sessions")];
        for _ in 0..3 {
            dirs = dirs.iter().flat_map(|d| subdirs(d)).collect();
        }
        dirs.iter().flat_map(|d| jsonl_in(d)).collect()
    }

    #[cfg(feature = "readers")]
    fn read(&self, bytes: &[u8], path: &Path) -> Result<Vec<crate::trajectory::Trajectory>, crate::trajectory::ReadError> {
        read(bytes, path)
    }

    /// Whether a line is a response item the model produced: an assistant
    /// `message`, `reasoning`, a tool call.
    fn answered(&self, o: &Map<String, Value>) -> bool {
        let item = match (o.get("type").and_then(Value::as_str), o.get("payload").and_then(Value::as_object)) {
            (Some("response_item"), Some(p)) => p,
            (_, None) => o,
            _ => return false,
        };
        match item.get("type").and_then(Value::as_str) {
            Some("message") => item.get("role").and_then(Value::as_str) == Some("assistant"),
            Some(t) => is_item(t) && !t.ends_with("_output"),
            None => false,
        }
    }

    /// Whether a rollout's first line is one of its lines: a `{type, payload}`
    /// envelope, a bare response item, or the legacy first line `{id,
    /// timestamp, instructions}`.
    fn is_first_line(&self, o: &Map<String, Value>) -> bool {
        let has = |k: &str| o.contains_key(k);
        let ty = o.get("type").and_then(Value::as_str);
        let legacy_meta = ty.is_none() && has("id") && has("timestamp") && (has("instructions") || has("git"));
        (ty.is_some() && has("payload")) || legacy_meta || has("record_type") || ty.is_some_and(is_item)
    }

    /// The first line of a rollout's `{type, payload}` envelope, which may
    /// also carry what another agent's first line does.
    fn owns_first_line(&self, line: &Map<String, Value>) -> bool {
        line.get("type").is_some_and(Value::is_string) && line.contains_key("payload")
    }

    /// Where the thread id sits in its status line provider's `resources/read`
    /// params (`_meta["com.openai/codex-statusline-state"].thread.id`, which it
    /// also sends as `prompt_cache_key`).
    fn status_thread_at(&self) -> Option<lam_core::wire::Path> {
        Some(lam_core::wire::Path::new().key("_meta").key("com.openai/codex-statusline-state").key("thread").key("id"))
    }

    /// Where it compacts its context on its own for `model`: 90 % of the
    /// window (244,800 of 272,000).
    fn compaction_threshold(&self, model: &str) -> Option<u64> {
        window(model).map(|w| w / 10 * 9)
    }

    /// Whether `call` forks it: `spawn_agent` with `fork_turns` other than
    /// `"none"`, bare or in any namespace (0.171.0 offers it as
    /// `collaboration__spawn_agent`; the namespace is the setting
    /// `features.multi_agent_v2.tool_namespace`).
    fn forks(&self, call: &Call<'_>) -> bool {
        let name = call.name.as_str();
        (name == "spawn_agent" || name.ends_with("__spawn_agent")) && super::argument(call, "fork_turns").is_some_and(|t| t != "none")
    }

    /// Its request: `instructions`, the task as a user message, then each
    /// call's items after the model's text before it.
    fn request(&self, task: &str, calls: &[Recorded], tools: &[Value]) -> Value {
        let mut input = vec![json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]})];
        for (k, c) in calls.iter().enumerate() {
            let id = format!("call_{k:04}");
            if !c.thought.is_empty() {
                input.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": c.thought}]}));
            }
            input.extend(items(c, &id));
        }
        json!({
            "model": "gpt-5-codex", "instructions": "You are Codex. (replayed by lam replay)",
            "input": input, "tools": tools, "tool_choice": "auto", "parallel_tool_calls": false,
            "stream": true, "store": false,
        })
    }
}

#[cfg(feature = "readers")]
pub use reader::read;

/// Its rollouts read as trajectories (feature `readers`).
#[cfg(feature = "readers")]
mod reader {
    use super::super::jsonl::{Session, blocks, line_error, objects, stem, str_field, texts_at, timestamp};
    use crate::agents::Agent;
    use crate::trajectory::{Format, ReadError, Trajectory, kind};
    use lam_core::wire::{self, Api};
    use serde_json::{Map, Value};
    use std::path::Path;

    /// Read a Codex CLI rollout: each `function_call_output` and
    /// `custom_tool_call_output` item is one record per text part of its
    /// output (a string output: one); its action is the
    /// `function_call` (`name(arguments)`), `custom_tool_call` (`name(input)`) or
    /// `local_shell_call` (`local_shell(compact JSON action)`) with that
    /// `call_id`. Items come in `response_item` envelopes, or bare in older
    /// rollouts; other lines are skipped. The session is `session_meta`'s `id`
    /// (legacy: the first line's `id`), else the file stem.
    pub fn read(bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
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
                        "turn_context" => s.model = p.get("model").and_then(Value::as_str).map(str::to_string).or(s.model.take()),
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
        Ok(vec![s.finish(path, Format::Agent(Agent::Codex), stem(path))])
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
        let id = || wire::output_call_id(p).unwrap_or("");
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
                    for obs in texts_at(parts, &wire::texts(parts, &wire::Path::new(), &wire::OUTPUT_TEXT_TYPES)) {
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
}
