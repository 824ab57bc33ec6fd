//! opencode: everything lam knows of it (1.18.33; docs/agents.md,
//! "opencode 1.18.33", has how each fact was found).
//!
//! - **Launch**: program `opencode`. Its configuration is merged from
//!   several layers, the last being `OPENCODE_CONFIG_CONTENT` (inline
//!   JSON): `lam run` passes there, merged over the user's own
//!   `OPENCODE_CONFIG_CONTENT`, `provider.anthropic.options.baseURL` and
//!   `provider.openai.options.baseURL` = `ORIGIN/v1` (the AI SDK appends
//!   `/messages`, `/responses`), and `lam mcp` as the local MCP server
//!   `lam` (`mcp.lam`, the model sees its tools as `lam_recall`,
//!   `lam_recall_meta`, `lam_catalog`); with a budget that holds the view
//!   below its compaction threshold, `compaction.auto: false`
//!   ([`OpenCode::launch`]). `OPENCODE_DISABLE_AUTOUPDATE=1` unless the user set it.
//!   `opencode run` is the batch form. No status line hook.
//! - **Upstream**: the provider of its model (`-m PROVIDER/MODEL`, else the
//!   configured `model`, else `anthropic`); that provider's configured
//!   `baseURL` (inline, project, `$OPENCODE_CONFIG`, global config), else
//!   `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else the vendor's.
//! - **Wire**: Anthropic Messages through `@ai-sdk/anthropic` (OpenAI
//!   Responses for the `openai` provider); a title request without tools
//!   first; `cache_control` on the last two messages ([`OpenCode::request`]).
//! - **Transcripts**: SQLite, `$XDG_DATA_HOME/opencode/opencode.db`
//!   (default `~/.local/share/opencode/opencode.db`), tables `session`,
//!   `message`, `part` ([`OpenCode::read`]). Resumed by `opencode --session ID`.
//! - **Compaction**: after an answer whose token count reaches the usable
//!   window: `limit.input - reserved` when the model lists an input limit,
//!   else `limit.context - max output` (`reserved`: min(20,000, max
//!   output); max output 32,000); windows from the models.dev catalog
//!   ([`OpenCode::compaction_threshold`]). Off by `compaction.auto: false`.
//! - **Forks**: none; its `task` tool starts a fresh child session.

#[cfg(feature = "readers")]
use super::RunTranscript;
use super::launch::{Launch, Setup, origin_of};
use super::requests::{Call as Recorded, tool_turns};
use super::room::Room;
use super::{claude_code, codex, home};
#[cfg(feature = "readers")]
use crate::trajectory::{ReadError, Trajectory};
use serde_json::{Map, Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The variable its last configuration layer is read from.
pub const CONFIG_ENV: &str = "OPENCODE_CONFIG_CONTENT";

/// The providers lam points at the proxy, with the variable each reads
/// its base URL from when none is configured, and its vendor's origin.
const PROVIDERS: [(&str, &str, &str); 2] = [("anthropic", claude_code::BASE_URL_ENV, claude_code::VENDOR), ("openai", codex::BASE_URL_ENV, codex::VENDOR)];

/// Its largest answer, `max_tokens` (`OUTPUT_TOKEN_MAX`).
const MAX_OUTPUT: u64 = 32_000;

/// The threshold of the smallest window it is known to run with (a 200k
/// Claude model), for a model not named at launch.
const SMALLEST_THRESHOLD: u64 = 200_000 - MAX_OUTPUT;

/// The threshold the user's configuration sets for `model`
/// (`PROVIDER/MODEL`): its `provider.P.models.M.limit` read as opencode
/// reads it ([`usable_window`]), with `compaction.reserved` when set.
fn configured_threshold(layers: &[(String, Map<String, Value>)], model: &str) -> Option<u64> {
    let (provider, id) = model.split_once('/')?;
    let limit = layers.iter().find_map(|(_, c)| c.get("provider")?.get(provider)?.get("models")?.get(id)?.get("limit"))?;
    let reserved = layers.iter().find_map(|(_, c)| c.get("compaction")?.get("reserved")?.as_u64());
    let n = |k: &str| limit.get(k).and_then(Value::as_u64);
    usable_window(n("context")?, n("input"), n("output"), reserved)
}

/// Where it compacts, from a model's limits: `input - reserved` when it
/// lists an input limit, else `context - max output`; max output is the
/// model's output limit up to 32,000, `reserved` min(20,000, max output)
/// unless configured. `None` for a context of 0 (it never compacts).
fn usable_window(context: u64, input: Option<u64>, output: Option<u64>, reserved: Option<u64>) -> Option<u64> {
    let max_output = output.filter(|&o| o > 0).map_or(MAX_OUTPUT, |o| o.min(MAX_OUTPUT));
    let reserved = reserved.unwrap_or(20_000.min(max_output));
    match input {
        _ if context == 0 => None,
        Some(i) => Some(i.saturating_sub(reserved)),
        None => Some(context.saturating_sub(max_output)),
    }
}

/// `value` at `path` in `config`, making objects on the way (a member that
/// is no object is replaced).
pub(super) fn set(config: &mut Map<String, Value>, path: &[&str], value: Value) {
    let Some((last, inner)) = path.split_last() else { return };
    let mut at = config;
    for k in inner {
        let slot = at.entry(k.to_string()).or_insert_with(|| json!({}));
        if !slot.is_object() {
            *slot = json!({});
        }
        let Value::Object(next) = slot else { return };
        at = next;
    }
    at.insert(last.to_string(), value);
}

/// The model it runs: `-m`/`--model PROVIDER/MODEL`, else the
/// configuration's `model`.
fn model(args: &[OsString], config: &Map<String, Value>) -> Option<String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let flag = args.iter().enumerate().find_map(|(k, a)| match a.as_str() {
        "-m" | "--model" => args.get(k + 1).cloned(),
        _ => a.strip_prefix("--model=").map(str::to_string),
    });
    flag.or_else(|| config.get("model").and_then(Value::as_str).map(str::to_string))
}

/// Its configuration layers that may name a base URL, the one that wins
/// first, each with where it came from; unreadable ones left out.
fn config_layers(cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, Map<String, Value>)> {
    let mut out = Vec::new();
    if let Some(Value::Object(o)) = env(CONFIG_ENV).and_then(|t| parse_jsonc(&t)) {
        out.push((format!("${CONFIG_ENV}"), o));
    }
    let global = env("XDG_CONFIG_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| home(env, "", ".config")).map(|d| d.join("opencode"));
    let mut files: Vec<PathBuf> = ["opencode.json", "opencode.jsonc"].iter().map(|n| cwd.join(n)).collect();
    files.extend(env("OPENCODE_CONFIG").filter(|v| !v.is_empty()).map(PathBuf::from));
    files.extend(global.iter().flat_map(|d| [d.join("opencode.json"), d.join("opencode.jsonc")]));
    for f in files {
        if let Some(Value::Object(o)) = std::fs::read_to_string(&f).ok().and_then(|t| parse_jsonc(&t)) {
            out.push((f.display().to_string(), o));
        }
    }
    out
}

/// JSON with comments (`//`, `/* */`) and trailing commas, as its
/// configuration may be written; `None` when it does not parse.
pub fn parse_jsonc(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let b = text.as_bytes();
    let (mut out, mut i, mut in_str) = (Vec::with_capacity(b.len()), 0, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 1;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            continue;
        } else if c == b',' && b[i + 1..].iter().find(|x| !x.is_ascii_whitespace()).is_some_and(|x| *x == b'}' || *x == b']') {
            // A trailing comma: dropped.
        } else {
            in_str = c == b'"';
            out.push(c);
        }
        i += 1;
    }
    serde_json::from_slice(&out).ok()
}

/// opencode's room: its facts, as [`Room`] (what [`super::Agent::OpenCode`] asks).
#[derive(Debug, Clone, Copy)]
pub struct OpenCode;

impl Room for OpenCode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn program(&self) -> &'static str {
        "opencode"
    }

    fn api(&self) -> lam_core::wire::Api {
        lam_core::wire::Api::Messages
    }

    /// `OPENCODE_CONFIG_CONTENT` pointing both providers at the proxy and
    /// registering `lam mcp`, merged over the user's; `compaction.auto: false`
    /// when the run's budget holds each request at or below the threshold
    /// where it would compact (so it never compacts on its own, and a view
    /// lam keeps below its window never needs it).
    fn launch(&self, s: &Setup<'_>) -> Launch {
        let mut notes = Vec::new();
        let mut config = match s.var(CONFIG_ENV).map(|t| parse_jsonc(&t)) {
            Some(Some(Value::Object(user))) => user,
            Some(_) => {
                notes.push(format!("${CONFIG_ENV} is no JSON object: left out (lam's settings alone)"));
                Map::new()
            }
            None => Map::new(),
        };
        let base = self.base_url(s.origin);
        for (provider, _, _) in PROVIDERS {
            set(&mut config, &["provider", provider, "options", "baseURL"], json!(base));
        }
        let command: Vec<&str> = std::iter::once(s.lam).chain(s.mcp.iter().map(String::as_str)).collect();
        set(&mut config, &["mcp", "lam"], json!({"type": "local", "command": command, "enabled": true}));
        let layers = config_layers(s.cwd, s.env);
        let model = layers.iter().find_map(|(_, c)| model(s.args, c)).or_else(|| model(s.args, &Map::new()));
        let threshold = model.as_deref().and_then(|m| configured_threshold(&layers, m).or_else(|| self.compaction_threshold(m)));
        if s.budget.is_some_and(|b| b <= threshold.unwrap_or(SMALLEST_THRESHOLD)) {
            set(&mut config, &["compaction", "auto"], json!(false));
        }
        let mut env = vec![(CONFIG_ENV.to_string(), Value::Object(config).to_string())];
        if s.var("OPENCODE_DISABLE_AUTOUPDATE").is_none() {
            env.push(("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()));
        }
        Launch { env, notes, ..Launch::default() }
    }

    /// `run`: it asks the model at once (the first word that is no option;
    /// `--log-level` takes a value).
    fn batch(&self, args: &[OsString]) -> bool {
        let mut words = args.iter().map(|a| a.to_string_lossy());
        while let Some(w) = words.next() {
            if w == "--log-level" {
                words.next();
            } else if !w.starts_with('-') {
                return w == "run";
            }
        }
        false
    }

    /// How `lam mcp`'s recall tool reaches the model: server `lam`, tool `recall`.
    fn recall_tool(&self) -> &'static str {
        "lam_recall"
    }

    fn vendor(&self) -> &'static str {
        claude_code::VENDOR
    }

    /// The vendor's origin for the provider of its model (`-m`), else Anthropic's.
    fn vendor_for(&self, args: &[OsString]) -> &'static str {
        let provider = model(args, &Map::new());
        let openai = provider.as_deref().is_some_and(|m| m.starts_with("openai/"));
        if openai { PROVIDERS[1].2 } else { PROVIDERS[0].2 }
    }

    /// The upstream the user configured for the provider of its model: that
    /// provider's `baseURL` in its configuration (the inline layer, the
    /// project's `opencode.json`, `$OPENCODE_CONFIG`, the global one, in that
    /// order), else the variable the provider reads, else `None` (the vendor's).
    fn configured_upstream(&self, args: &[OsString], cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
        let layers = config_layers(cwd, env);
        let model = layers.iter().find_map(|(_, c)| model(args, c)).or_else(|| model(args, &Map::new()));
        let provider = model.as_deref().and_then(|m| m.split_once('/')).map_or("anthropic", |(p, _)| p);
        let (name, var, _) = PROVIDERS.iter().find(|(p, _, _)| *p == provider).unwrap_or(&PROVIDERS[0]);
        for (from, c) in &layers {
            let url = c.get("provider").and_then(|p| p.get(*name)).and_then(|p| p.get("options")).and_then(|o| o.get("baseURL")).and_then(Value::as_str);
            if let Some(url) = url.filter(|u| !u.trim().is_empty()) {
                return Some((origin_of(url, true), format!("from provider.{name}.options.baseURL in {from}")));
            }
        }
        env(var).filter(|v| !v.trim().is_empty()).map(|v| (origin_of(&v, true), format!("from ${var}")))
    }

    /// The base URL each provider is given for a proxy at `origin`.
    fn base_url(&self, origin: &str) -> String {
        format!("{origin}/v1")
    }

    /// What `lam run` set to point it at the proxy (for the error when no request came).
    fn pointed_by(&self) -> &'static str {
        "OPENCODE_CONFIG_CONTENT's provider.anthropic and provider.openai options.baseURL"
    }

    /// The arguments that resume `session`, and why its own resume line does not do.
    fn resume(&self, session: &str) -> (String, &'static str) {
        (format!("opencode --session {session}"), "opencode's own `opencode --session` goes around lam")
    }

    /// Its database of sessions: `$XDG_DATA_HOME/opencode/opencode.db`.
    fn transcripts(&self, _cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
        let data = env("XDG_DATA_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| home(env, "", ".local/share"));
        data.map(|d| d.join("opencode").join("opencode.db")).into_iter().filter(|p| p.is_file()).collect()
    }

    #[cfg(feature = "readers")]
    /// Read its database of sessions from `path` itself, not `_bytes`
    /// (read-only; it may be running): one trajectory per session and
    /// conversation, newest session first, sessions of subagents
    /// (`parent_id`) after the others, named `<parent>.<session>`. Each
    /// `tool` part whose call completed or failed is one record: its action
    /// the call as the model made it (`name(input)`, as the proxy names the
    /// `tool_use`), its observation the output the model was sent
    /// (`state.output`, or `state.error`). The task is the first user text;
    /// the model's text and reasoning before a call are its thought. A
    /// `compaction` part ends a conversation: the rest is `<session>.compact-N`
    /// (when it holds tool results), its task the summary.
    fn read(&self, _bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
        let name = path.display().to_string();
        let sql = |e: rusqlite::Error| ReadError::Record { path: name.clone(), record: "database".into(), line: None, message: e.to_string() };
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = rusqlite::Connection::open_with_flags(path, flags).map_err(sql)?;
        let mut sessions = db.prepare("SELECT id, parent_id FROM session ORDER BY parent_id IS NOT NULL, time_created DESC, id").map_err(sql)?;
        let ids: Vec<(String, Option<String>)> = sessions.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
        let mut parts = db
            .prepare("SELECT m.data, p.data, p.id, m.time_created FROM part p JOIN message m ON p.message_id = m.id WHERE p.session_id = ?1 ORDER BY m.time_created, m.id, p.id")
            .map_err(sql)?;
        let mut out = Vec::new();
        for (id, parent) in ids {
            let rows = parts.query_map([&id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?)));
            let rows: Vec<_> = rows.map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
            let base = parent.map_or_else(|| id.clone(), |p| format!("{p}.{id}"));
            out.extend(reader::session(path, &base, &rows).map_err(|(part, message)| ReadError::Record {
                path: name.clone(),
                record: format!("part {part}"),
                line: None,
                message,
            })?);
        }
        Ok(out)
    }

    #[cfg(feature = "readers")]
    /// The newest top-level session of its database started in `cwd` (or
    /// `$PWD`, where it takes its project from) and updated since `since`:
    /// its id, and whether the model answered in it (an assistant message
    /// without an `error`, with a text, reasoning or tool part).
    fn transcript_since(&self, cwd: &Path, since: std::time::SystemTime, env: &dyn Fn(&str) -> Option<String>) -> Option<RunTranscript> {
        let db = self.transcripts(cwd, env).into_iter().next()?;
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = rusqlite::Connection::open_with_flags(db, flags).ok()?;
        let ms = since.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i64;
        let pwd = env("PWD").unwrap_or_default();
        let newest = "SELECT id FROM session WHERE parent_id IS NULL AND directory IN (?1, ?2) AND time_updated >= ?3 ORDER BY time_updated DESC LIMIT 1";
        let id: String = conn.query_row(newest, rusqlite::params![cwd.to_string_lossy(), pwd, ms], |r| r.get(0)).ok()?;
        let answered = "SELECT EXISTS (SELECT 1 FROM message m WHERE m.session_id = ?1 AND json_extract(m.data, '$.role') = 'assistant' \
                        AND json_extract(m.data, '$.error') IS NULL AND EXISTS (SELECT 1 FROM part p WHERE p.message_id = m.id \
                        AND json_extract(p.data, '$.type') IN ('text', 'reasoning', 'tool')))";
        let answered = conn.query_row(answered, [&id], |r| r.get::<_, bool>(0)).unwrap_or(false);
        Some(RunTranscript { answered, session: Some(id) })
    }

    /// Whether `path` names its database (`opencode.db`, a SQLite file).
    fn is_database(&self, path: &Path) -> bool {
        path.file_name().is_some_and(|n| n == "opencode.db")
    }

    /// Where it compacts its context on its own for `model` (`PROVIDER/MODEL`
    /// or the bare id): Anthropic models, the context less the max output
    /// (168,000 on a 200k model, 968,000 on a 1M one); OpenAI's gpt-5 family,
    /// its input limit less `reserved` (252,000 of 272,000).
    fn compaction_threshold(&self, model: &str) -> Option<u64> {
        let id = model.rsplit('/').next().unwrap_or(model);
        match (claude_code::window(id), codex::window(id)) {
            (Some(context), _) => usable_window(context, None, None, None),
            (None, Some(input)) => usable_window(input, Some(input), None, None),
            (None, None) => None,
        }
    }

    /// Its request through the Anthropic provider, as 1.18.33 sends it: one
    /// `system` text block, the task as the first user message, `tools`,
    /// `tool_choice: auto`, `max_tokens` 32,000, streaming, and
    /// `cache_control` on the last block of the last two messages.
    fn request(&self, task: &str, calls: &[Recorded], tools: &[Value]) -> Value {
        let mut msgs = vec![json!({"role": "user", "content": [{"type": "text", "text": task}]})];
        msgs.extend(tool_turns(calls));
        let n = msgs.len();
        for m in msgs.iter_mut().skip(n.saturating_sub(2)) {
            if let Some(last) = m["content"].as_array_mut().and_then(|b| b.last_mut()) {
                last["cache_control"] = json!({"type": "ephemeral"});
            }
        }
        json!({
            "model": "claude-sonnet-4-5", "max_tokens": MAX_OUTPUT,
            "system": [{"type": "text", "text": "You are opencode, an interactive CLI tool. (replayed by lam replay)"}],
            "messages": msgs, "tools": tools, "tool_choice": {"type": "auto"}, "stream": true,
        })
    }
}

/// What [`OpenCode::read`] reads its database's sessions with (feature `readers`).
#[cfg(feature = "readers")]
mod reader {
    use super::super::jsonl::Session;
    use crate::agents::Agent;
    use crate::trajectory::{Format, Trajectory};
    use serde_json::Value;
    use std::path::Path;

    /// One session's trajectories from its parts (message data, part data,
    /// part id, message time), in order; an error names the part.
    pub(super) fn session(path: &Path, base: &str, rows: &[(String, String, String, i64)]) -> Result<Vec<Trajectory>, (String, String)> {
        let mut convs = vec![Session::default()];
        let mut summary_next = false;
        for (message, part, id, created) in rows {
            let err = |m: String| (id.clone(), m);
            let message: Value = serde_json::from_str(message).map_err(|e| err(format!("message data: {e}")))?;
            let part: Value = serde_json::from_str(part).map_err(|e| err(format!("part data: {e}")))?;
            let role = message.get("role").and_then(Value::as_str);
            let s = convs.last_mut().expect("one conversation at least");
            s.time = Some(*created);
            if let Some(m) = message.get("modelID").and_then(Value::as_str) {
                s.model = Some(m.to_string());
            }
            match (part.get("type").and_then(Value::as_str), role) {
                (Some("compaction"), _) => {
                    convs.push(Session::default());
                    summary_next = true;
                }
                (Some("text"), Some("assistant")) if summary_next || message.get("summary").and_then(Value::as_bool) == Some(true) => {
                    s.task(part.get("text").and_then(Value::as_str).unwrap_or(""));
                    summary_next = false;
                }
                (Some("text"), Some("user")) if part.get("synthetic").and_then(Value::as_bool) != Some(true) => {
                    s.task(part.get("text").and_then(Value::as_str).unwrap_or(""))
                }
                (Some("text" | "reasoning"), Some("assistant")) => s.think(part.get("text").and_then(Value::as_str).unwrap_or("")),
                (Some("tool"), _) => tool(s, &part).map_err(err)?,
                _ => {}
            }
        }
        let named = convs.into_iter().enumerate().filter(|(k, s)| *k == 0 || !s.records.is_empty());
        Ok(named.map(|(k, s)| s.finish(path, Format::Agent(Agent::OpenCode), if k == 0 { base.to_string() } else { format!("{base}.compact-{k}") })).collect())
    }

    /// A `tool` part: its call, and its result once it completed or failed.
    fn tool(s: &mut Session, part: &Value) -> Result<(), String> {
        let id = part.get("callID").and_then(Value::as_str).ok_or("tool part has no string `callID`")?;
        let name = part.get("tool").and_then(Value::as_str).ok_or("tool part has no string `tool`")?;
        let state = part.get("state").ok_or("tool part has no `state`")?;
        s.call(id, lam_core::action::tool_call_value(name, state.get("input")));
        let text = |k: &str| state.get(k).and_then(Value::as_str).map(str::to_string);
        let output = match state.get("status").and_then(Value::as_str) {
            Some("completed") => text("output"),
            Some("error") => text("error"),
            _ => None,
        };
        if let Some(output) = output {
            if let Some(end) = lam_core::wire::Path::new().key("time").key("end").get(state).and_then(Value::as_i64) {
                s.time = Some(end);
            }
            s.result(id, output, None);
        }
        Ok(())
    }
}
