//! Claude Code: everything lam knows of it.
//!
//! - **Launch**: program `claude`; base URL `ANTHROPIC_BASE_URL` (the
//!   origin: it appends `/v1/messages`); `lam mcp` registered as server
//!   `lam` by `--mcp-config FILE` after the user's arguments, its recall
//!   tool `mcp__lam__recall`; lam's status line by `--settings`
//!   (`statusLine`, layered over the user's settings); `-p`/`--print` is
//!   the batch form.
//! - **Wire**: Anthropic Messages, as 2.1.328 sends it ([`ClaudeCode::request`]).
//! - **Transcripts**: `$CLAUDE_CONFIG_DIR` (default `~/.claude`)
//!   `/projects/<working directory, each character but letters and digits
//!   made '-'>/<session>.jsonl`, subagents in
//!   `<session>/subagents/agent-*.jsonl` ([`read`]); resumed by
//!   `claude --resume ID`.
//! - **Compaction**: at the window less min(max output, 20,000) less
//!   13,000 ([`ClaudeCode::compaction_threshold`]); a compaction starts a new
//!   conversation (`compact_boundary`), read as `<session>.compact-N`.
//! - **Forks**: `Agent` or `Task` with `subagent_type: "fork"` ([`ClaudeCode::forks`]).
//!
//! docs/agents.md has how each fact was found.

use super::launch::{Arg, Launch, Setup, origin_of};
use super::requests::{Call as Recorded, tool_turns};
use super::room::Room;
use super::{home, jsonl_in};
use lam_core::wire::Call;
use serde_json::{Map, Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variable it reads its base URL from.
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";

/// Anthropic's origin, when the environment names none.
pub const VENDOR: &str = "https://api.anthropic.com";

/// The context window its catalog gives an Anthropic `model`: 200,000 for
/// haiku-4-5, sonnet-4-x and opus-4-0 to 4-6 (and the Claude 3 models),
/// 1,000,000 for newer models and `[1m]` names; `None` for another model.
pub fn window(model: &str) -> Option<u64> {
    let m = model.trim().to_ascii_lowercase();
    let at = m.find("claude-")?;
    if m.contains("[1m]") {
        return Some(1_000_000);
    }
    let mut parts = m[at + "claude-".len()..].split(['-', '.', '@', ':']);
    let first = parts.next()?;
    if first.starts_with('3') {
        return Some(200_000);
    }
    // A version part is a short number; a date (8 digits) is not one.
    let num = |p: Option<&str>| p.filter(|p| p.len() <= 2).and_then(|p| p.parse::<u32>().ok());
    let major = num(parts.next())?;
    let minor = num(parts.next()).unwrap_or(0);
    let small = match first {
        "haiku" => major < 4 || (major == 4 && minor <= 5),
        "sonnet" => major <= 4,
        "opus" => major < 4 || (major == 4 && minor <= 6),
        _ => return None,
    };
    Some(if small { 200_000 } else { 1_000_000 })
}

/// Claude Code's room: its facts, as [`Room`] (what [`super::Agent::ClaudeCode`] asks).
#[derive(Debug, Clone, Copy)]
pub struct ClaudeCode;

impl Room for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn program(&self) -> &'static str {
        "claude"
    }

    fn api(&self) -> lam_core::wire::Api {
        lam_core::wire::Api::Messages
    }

    /// `ANTHROPIC_BASE_URL` at the proxy; `--mcp-config FILE` registering
    /// `lam mcp` as server `lam`, and with the status line `--settings`, after
    /// the user's arguments.
    fn launch(&self, s: &Setup<'_>) -> Launch {
        let json = json!({"mcpServers": {"lam": {"command": s.lam, "args": s.mcp}}});
        let mut after = vec![Arg::text("--mcp-config"), Arg::File("mcp.json")];
        if s.status_line {
            let sh = |x: &str| format!("'{}'", x.replace('\'', r"'\''"));
            let command = format!("{} status-line --proxy {}", sh(s.lam), sh(s.origin));
            let settings = json!({"statusLine": {"type": "command", "command": command, "padding": 0}});
            after.extend([Arg::text("--settings"), Arg::text(settings.to_string())]);
        }
        Launch { env: vec![(BASE_URL_ENV.into(), self.base_url(s.origin))], after, files: vec![("mcp.json", json.to_string())], ..Launch::default() }
    }

    /// `-p`/`--print`: it asks the model at once.
    fn batch(&self, args: &[OsString]) -> bool {
        args.iter().any(|x| x == "-p" || x == "--print")
    }

    /// How `lam mcp`'s recall tool reaches the model: server `lam`, tool `recall`.
    fn recall_tool(&self) -> &'static str {
        "mcp__lam__recall"
    }

    fn vendor(&self) -> &'static str {
        VENDOR
    }

    /// The upstream the user configured: `$ANTHROPIC_BASE_URL`.
    fn configured_upstream(&self, _args: &[OsString], _cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
        env(BASE_URL_ENV).filter(|v| !v.trim().is_empty()).map(|v| (origin_of(&v, false), format!("from ${BASE_URL_ENV}")))
    }

    fn base_url_env(&self) -> Option<&'static str> {
        Some(BASE_URL_ENV)
    }

    /// The base URL for a proxy at `origin`: the origin (it appends `/v1/messages`).
    fn base_url(&self, origin: &str) -> String {
        origin.to_string()
    }

    /// What `lam run` set to point it at the proxy (for the error when no request came).
    fn pointed_by(&self) -> &'static str {
        "ANTHROPIC_BASE_URL"
    }

    /// The arguments that resume `session`, and why its own resume line does not do.
    fn resume(&self, session: &str) -> (String, &'static str) {
        (format!("claude --resume {session}"), "Claude Code's own `claude --resume` line goes around lam, with an MCP config file that is gone")
    }

    /// Its transcripts of working directory `cwd` (subagents' files, one level down, left out).
    fn transcripts(&self, cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
        let Some(root) = home(env, "CLAUDE_CONFIG_DIR", ".claude") else { return Vec::new() };
        let cwd = cwd.to_string_lossy();
        let project: String = cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        jsonl_in(&root.join("projects").join(project))
    }

    #[cfg(feature = "readers")]
    fn read(&self, bytes: &[u8], path: &Path) -> Result<Vec<crate::trajectory::Trajectory>, crate::trajectory::ReadError> {
        read(bytes, path)
    }

    /// Whether a line is the model's answer: an `assistant` line that is no
    /// local stand-in (it writes its own errors, "Please run /login", as
    /// `assistant` lines of model `<synthetic>` or `isApiErrorMessage`).
    fn answered(&self, o: &Map<String, Value>) -> bool {
        let synthetic = o.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true)
            || o.get("message").and_then(|m| m.get("model")).and_then(Value::as_str) == Some("<synthetic>");
        o.get("type").and_then(Value::as_str) == Some("assistant") && !synthetic
    }

    /// Whether a transcript's first line is one of its lines: a `type` with
    /// `sessionId`, `uuid`, `parentUuid`, `leafUuid` or `messageId`.
    fn is_first_line(&self, o: &Map<String, Value>) -> bool {
        o.get("type").is_some_and(Value::is_string) && ["sessionId", "uuid", "parentUuid", "leafUuid", "messageId"].iter().any(|k| o.contains_key(*k))
    }

    /// Where it compacts its context on its own for `model`: the window less
    /// 20,000 less 13,000 (167,000 on a 200k model, 967,000 on a 1M one).
    fn compaction_threshold(&self, model: &str) -> Option<u64> {
        window(model).map(|w| w - 20_000 - 13_000)
    }

    /// Whether `call` forks it: `Agent` or `Task` with `subagent_type: "fork"`
    /// (a subagent that starts from the whole conversation so far).
    fn forks(&self, call: &Call<'_>) -> bool {
        matches!(call.name.as_str(), "Agent" | "Task") && super::argument(call, "subagent_type").as_deref() == Some("fork")
    }

    /// Its request as 2.1.328 sends it (docs/agents.md, "Real agents on the
    /// wire"): three `system` blocks (the last two marked), a first user turn
    /// of a system reminder and the task, a `role: "system"` environment
    /// message that is one marked text block while it is the last message and
    /// a plain string after, and `cache_control` on the last block of the last
    /// message only (tools unmarked).
    fn request(&self, task: &str, calls: &[Recorded], tools: &[Value]) -> Value {
        let eph = json!({"type": "ephemeral"});
        let reminder = "<system-reminder>\nAs you answer the user's questions, you can use the following context. (replayed by lam replay)\n</system-reminder>";
        let env = "# Environment\nYou have been invoked in the following environment: (replayed by lam replay)";
        let mut msgs = vec![
            json!({"role": "user", "content": [{"type": "text", "text": reminder}, {"type": "text", "text": task}]}),
            if calls.is_empty() { json!({"role": "system", "content": [{"type": "text", "text": env}]}) } else { json!({"role": "system", "content": env}) },
        ];
        msgs.extend(tool_turns(calls));
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
}

#[cfg(feature = "readers")]
pub use reader::read;

/// Its transcripts read as trajectories (feature `readers`).
#[cfg(feature = "readers")]
mod reader {
    use super::super::jsonl::{Session, blocks, line_error, objects, stem, str_field, texts_at, timestamp};
    use crate::agents::Agent;
    use crate::trajectory::{Format, ReadError, Trajectory, kind};
    use lam_core::wire;
    use serde_json::{Map, Value};
    use std::collections::HashSet;
    use std::path::Path;

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
    pub fn read(bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
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
            if ty == "assistant"
                && let Some(m) = o.get("message").and_then(|m| m.get("model")).and_then(Value::as_str).filter(|m| *m != "<synthetic>")
            {
                s.model = Some(m.to_string());
            }
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
            let t = p.session.finish(path, Format::Agent(Agent::ClaudeCode), if k == 0 { base.clone() } else { format!("{base}.compact-{k}") });
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
        Ok(texts_at(content, &wire::result_texts(content, &wire::Path::new())))
    }
}
