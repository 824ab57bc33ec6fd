//! Gemini CLI: everything lam knows of it (0.61.0, docs/agents.md "Gemini
//! CLI 0.61.0").
//!
//! - **Launch**: program `gemini`; `GOOGLE_GEMINI_BASE_URL` at the proxy,
//!   the key (`GEMINI_API_KEY`) passed through; its settings in a per-run
//!   home (`GEMINI_CLI_HOME`) whose `.gemini/settings.json` is the user's
//!   plus `mcpServers.lam` (`lam mcp`, `trust: true`) and the API-key auth
//!   type (the only one that reads the base URL), every other entry of the
//!   user's `~/.gemini` linked in ([`GeminiCli::launch`]); the recall
//!   tool `mcp_lam_recall`; `-p` is the batch form.
//! - **Wire**: the Gemini API, `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`
//!   ([`GeminiCli::request`]).
//! - **Transcripts**: `~/.gemini/tmp/<project>/chats/session-*.jsonl`
//!   (JSON Lines; a message written again under its `id` replaces the
//!   first: [`GeminiCli::read`]); resumed by `gemini --resume ID`.
//! - **Compaction**: when the last answer's `promptTokenCount` reaches half
//!   the token limit, 1,048,576 for every current model: 524,288
//!   ([`GeminiCli::compaction_threshold`]), at a user message. Before that, in any
//!   turn, it masks old tool outputs in its own history once its estimate
//!   of them passes 80,000 tokens (not a setting in 0.61.0).
//! - **Forks**: none (`invoke_agent` starts a fresh subagent).

#[cfg(feature = "readers")]
use super::Agent;
#[cfg(feature = "readers")]
use super::jsonl::{Session, line_error, objects, stem, texts_at, timestamp};
use super::jsonl_in;
use super::launch::{Home, Launch, Setup};
use super::opencode::{parse_jsonc, set};
use super::requests::Call as Recorded;
use super::room::Room;
#[cfg(feature = "readers")]
use crate::trajectory::{Format, ReadError, Trajectory, kind};
#[cfg(feature = "readers")]
use lam_core::wire::{self, Api};
use serde_json::{Map, Value, json};
#[cfg(feature = "readers")]
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variable it reads its API base URL from (with no `/v1beta`).
pub const BASE_URL_ENV: &str = "GOOGLE_GEMINI_BASE_URL";

/// Google's Gemini API origin, when the environment names none.
pub const VENDOR: &str = "https://generativelanguage.googleapis.com";

/// Where it moves its home (`$GEMINI_CLI_HOME/.gemini`).
pub const HOME_ENV: &str = "GEMINI_CLI_HOME";

/// The token limit of every current Gemini model, as it counts it.
pub const TOKEN_LIMIT: u64 = 1_048_576;

/// The auth type lam runs it with: the only one that sends its requests to
/// `GOOGLE_GEMINI_BASE_URL` (with `GEMINI_API_KEY`, sent as
/// `x-goog-api-key`); a Google login (`oauth-personal`) talks to Code
/// Assist, which ignores the base URL.
pub const AUTH_TYPE: &str = "gemini-api-key";

/// Its home: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub fn home(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = env(HOME_ENV).filter(|v| !v.trim().is_empty()).or_else(|| env("HOME"))?;
    Some(PathBuf::from(base).join(".gemini"))
}

/// The variable naming Gemini CLI's experiments file, read before any
/// server is asked (so with the API-key auth type too).
pub const EXPERIMENTS_ENV: &str = "GEMINI_EXP";
/// The run's experiments file, in its home.
const EXPERIMENTS_FILE: &str = "lam-experiments.json";
/// The experiment flag of its tool-output masking's protected tokens
/// (`MASKING_PROTECTION_THRESHOLD`).
const MASKING_PROTECTION_FLAG: u64 = 45_758_817;

/// An experiments file that turns off Gemini CLI's masking of old tool
/// outputs: once its own estimate of the outputs in its history passes
/// 50,000 protected + 30,000 prunable tokens, it replaces older ones with
/// `<tool_output_masked>` previews, a lossy compaction of its own that
/// counts the full outputs whatever lam forwards. Under lam's budget the
/// view stays bounded and every output is one recall away, so the
/// protected share is set past any context. 0.61.0 reads no setting of it
/// from settings.json (`contextManagement` reaches its config as
/// `{enabled}` alone); the experiments file is the only way. The user's
/// own file (`GEMINI_EXP`) is kept, this one flag set over it.
fn no_masking(s: &Setup<'_>, notes: &mut Vec<String>) -> String {
    let mut exp = s.var(EXPERIMENTS_ENV).map_or(Map::new(), |p| user_experiments(Path::new(&p), notes));
    let flags = exp.entry("flags").or_insert_with(|| json!([]));
    if !flags.is_array() {
        *flags = json!([]);
    }
    if let Value::Array(list) = flags {
        list.retain(|f| f.get("flagId").and_then(Value::as_u64) != Some(MASKING_PROTECTION_FLAG));
        list.push(json!({"flagId": MASKING_PROTECTION_FLAG, "intValue": "1000000000"}));
    }
    exp.entry("experimentIds").or_insert_with(|| json!([]));
    serde_json::to_string_pretty(&Value::Object(exp)).unwrap_or_default()
}

/// The user's experiments file; none, with a note, when it does not read
/// as a JSON object.
fn user_experiments(path: &Path, notes: &mut Vec<String>) -> Map<String, Value> {
    match std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok()) {
        Some(Value::Object(o)) => o,
        _ => {
            notes.push(format!(
                "GEMINI_EXP names {}, which lam could not read as a JSON object: this run's experiments file holds lam's flag alone",
                path.display()
            ));
            Map::new()
        }
    }
}

/// The user's settings (JSON with comments); none when there is no file,
/// and a note when it does not read as an object.
fn user_settings(path: &Path, notes: &mut Vec<String>) -> Map<String, Value> {
    let Ok(text) = std::fs::read_to_string(path) else { return Map::new() };
    match parse_jsonc(&text) {
        Some(Value::Object(o)) => o,
        _ => {
            notes.push(format!("{} is no JSON object: left out (lam's settings alone)", path.display()));
            Map::new()
        }
    }
}

/// The links of the run's `.gemini` to the user's: every entry but
/// `settings.json`, and `tmp` (made first, [`Home::make`]).
fn linked(user: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut names: Vec<OsString> = std::fs::read_dir(user).map(|rd| rd.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    names.push("tmp".into());
    names.sort();
    names.dedup();
    names.into_iter().filter(|n| n != "settings.json").map(|n| (Path::new(".gemini").join(&n), user.join(&n))).collect()
}

/// Gemini CLI's room: its facts, as [`Room`] (what [`super::Agent::GeminiCli`] asks).
#[derive(Debug, Clone, Copy)]
pub struct GeminiCli;

impl Room for GeminiCli {
    fn name(&self) -> &'static str {
        "gemini-cli"
    }

    fn program(&self) -> &'static str {
        "gemini"
    }

    fn api(&self) -> lam_core::wire::Api {
        lam_core::wire::Api::Gemini
    }

    /// `GOOGLE_GEMINI_BASE_URL` at the proxy, and a home of its own for the
    /// run (`GEMINI_CLI_HOME`): its `.gemini/settings.json` the user's with
    /// `lam mcp` as MCP server `lam` (trusted, so `--yolo` or not its calls
    /// need no confirmation) and the API-key auth type, every other entry of
    /// the user's `.gemini` linked in (session files, history, credentials:
    /// `tmp` made first, so the run's session files stay the user's; none
    /// when the user has no `.gemini`). Under a budget, its own masking of
    /// old tool outputs is turned off (`GEMINI_EXP`, `no_masking`).
    fn launch(&self, s: &Setup<'_>) -> Launch {
        let mut notes = Vec::new();
        let user = home(s.env);
        let mut settings = user.as_ref().map_or(Map::new(), |h| user_settings(&h.join("settings.json"), &mut notes));
        let had = settings.get("security").and_then(|v| lam_core::wire::Path::new().key("auth").key("selectedType").str_in(v)).map(str::to_string);
        if let Some(t) = had.filter(|t| t != AUTH_TYPE) {
            notes.push(format!("Gemini CLI's auth type `{t}` does not read GOOGLE_GEMINI_BASE_URL: this run uses `{AUTH_TYPE}` (GEMINI_API_KEY)"));
        }
        if s.var("GEMINI_API_KEY").is_none() {
            notes.push("GEMINI_API_KEY is not set: Gemini CLI needs it for the API-key auth type that goes through lam".into());
        }
        set(&mut settings, &["security", "auth", "selectedType"], json!(AUTH_TYPE));
        set(&mut settings, &["mcpServers", "lam"], json!({"command": s.lam, "args": s.mcp, "trust": true}));
        let settings = serde_json::to_string_pretty(&Value::Object(settings)).unwrap_or_default();
        let (make, links) = match user.filter(|h| h.is_dir()) {
            Some(h) => (vec![h.join("tmp")], linked(&h)),
            None => {
                notes.push("Gemini CLI has no home folder yet (~/.gemini): this run's session files stay in its own home, removed after it".into());
                (Vec::new(), Vec::new())
            }
        };
        let mut home = Home { var: HOME_ENV, files: vec![(".gemini/settings.json".into(), settings)], make, links, vars: Vec::new() };
        if s.budget.is_some() {
            home.files.push((EXPERIMENTS_FILE.into(), no_masking(s, &mut notes)));
            home.vars.push((EXPERIMENTS_ENV, EXPERIMENTS_FILE.into()));
        }
        Launch { env: vec![(BASE_URL_ENV.into(), self.base_url(s.origin))], home: Some(home), notes, ..Launch::default() }
    }

    /// `-p` / `--prompt`: it asks the model at once and exits.
    fn batch(&self, args: &[OsString]) -> bool {
        args.iter().any(|a| a == "-p" || a == "--prompt" || a.to_str().is_some_and(|a| a.starts_with("--prompt=")))
    }

    /// How `lam mcp`'s recall tool reaches the model: `mcp_SERVER_TOOL`.
    fn recall_tool(&self) -> &'static str {
        "mcp_lam_recall"
    }

    fn vendor(&self) -> &'static str {
        VENDOR
    }

    /// The upstream the user configured: `$GOOGLE_GEMINI_BASE_URL`.
    fn configured_upstream(&self, _args: &[OsString], _cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
        let v = env(BASE_URL_ENV).filter(|v| !v.trim().is_empty())?;
        Some((v.trim().trim_end_matches('/').to_string(), format!("from ${BASE_URL_ENV}")))
    }

    fn base_url_env(&self) -> Option<&'static str> {
        Some(BASE_URL_ENV)
    }

    /// The base URL for a proxy at `origin`: it appends `/v1beta/models/...` to the origin.
    fn base_url(&self, origin: &str) -> String {
        origin.to_string()
    }

    /// What `lam run` set to point it at the proxy (for the error when no request came).
    fn pointed_by(&self) -> &'static str {
        "GOOGLE_GEMINI_BASE_URL, with the API-key auth type in GEMINI_CLI_HOME's settings.json"
    }

    /// The arguments that resume `session`, and why its own resume line does not do.
    fn resume(&self, session: &str) -> (String, &'static str) {
        (format!("gemini --resume {session}"), "Gemini CLI's own `gemini --resume` line goes around lam")
    }

    /// Its session files, every project's (`tmp/<project>/chats/session-*.jsonl`).
    fn transcripts(&self, _cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
        let Some(tmp) = home(env).map(|h| h.join("tmp")) else { return Vec::new() };
        let Ok(rd) = std::fs::read_dir(&tmp) else { return Vec::new() };
        let chats = rd.flatten().map(|e| e.path().join("chats"));
        chats.flat_map(|d| jsonl_in(&d)).filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("session-"))).collect()
    }

    #[cfg(feature = "readers")]
    /// Read a Gemini CLI session file: each `functionResponse` of a `user`
    /// message is one record per text of its `response` (`output`, `error`:
    /// `wire::GEMINI_RESPONSE_TEXTS`; none: one empty record), its action the
    /// `toolCalls` entry of that `id` in the `gemini` message before it
    /// (`name(args)`). A call whose result no `user` message holds is read
    /// from the call's own `result`. The task is the user's text before the
    /// first call; the model's text before a call is its thought. The
    /// session is the header's `sessionId`, else the file stem.
    fn read(&self, bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
        let name = path.display().to_string();
        let (session, messages) = messages(bytes, &name)?;
        let answered_by_user: HashSet<String> = messages
            .iter()
            .filter(|(_, m)| m.get("type").and_then(Value::as_str) == Some("user"))
            .flat_map(|(_, m)| wire::result_ids(Api::Gemini, &content(m)).into_iter().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let mut s = Session::default();
        s.name = session;
        let mut task = Vec::new();
        for (n, m) in &messages {
            s.time = timestamp(m);
            match m.get("type").and_then(Value::as_str) {
                Some("user") => {
                    let c = content(m);
                    if wire::result_ids(Api::Gemini, &c).is_empty() {
                        let v = Value::Object(c.clone());
                        task.extend(wire::gemini_texts(&c).iter().filter_map(|p| p.str_in(&v).map(str::to_string)));
                    } else {
                        results(&mut s, &c);
                    }
                }
                Some("gemini") => gemini_message(&mut s, m, &answered_by_user).map_err(|e| line_error(&name, *n, e))?,
                _ => {}
            }
            if !s.records.is_empty() || m.get("toolCalls").is_some() {
                s.task(&task.join("\n"));
            }
        }
        s.task(&task.join("\n"));
        Ok(vec![s.finish(path, Format::Agent(Agent::GeminiCli), stem(path))])
    }

    /// Whether a line is the model's answer: a `gemini` message with text or calls.
    fn answered(&self, o: &Map<String, Value>) -> bool {
        let text = o.get("content").and_then(Value::as_str).is_some_and(|t| !t.trim().is_empty());
        let calls = o.get("toolCalls").and_then(Value::as_array).is_some_and(|c| !c.is_empty());
        o.get("type").and_then(Value::as_str) == Some("gemini") && (text || calls)
    }

    /// Whether a session file's first line is its header:
    /// `{sessionId, projectHash, startTime, ...}`.
    fn is_first_line(&self, o: &Map<String, Value>) -> bool {
        o.get("sessionId").is_some_and(Value::is_string) && o.contains_key("projectHash") && o.contains_key("startTime")
    }

    /// Where it compresses its context on its own for `model`: half the token
    /// limit (`model.compressionThreshold`, default 0.5), 524,288; `None` for
    /// a model that is no Gemini model.
    fn compaction_threshold(&self, model: &str) -> Option<u64> {
        let m = model.trim().to_ascii_lowercase();
        let name = m.rsplit('/').next().unwrap_or(&m);
        name.starts_with("gemini-").then_some(TOKEN_LIMIT / 2)
    }

    /// The path of its conversation's requests: the model it runs by default
    /// (`gemini-3.1-pro-preview`; the model is part of the path), streamed.
    fn path(&self) -> &'static str {
        "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse"
    }

    /// Its request as 0.61.0 sends it (docs/agents.md): the task (its session
    /// context and the user's words, as its transcript keeps them) as the
    /// first user turn, each call a `model` turn (the
    /// model's text, then the `functionCall` with its `thoughtSignature`) and
    /// its result a `user` turn (`functionResponse` with `response.output`),
    /// `systemInstruction`, `tools` as one `functionDeclarations` list, and
    /// its `generationConfig`.
    fn request(&self, task: &str, calls: &[Recorded], tools: &[Value]) -> Value {
        let mut contents = vec![json!({"role": "user", "parts": [{"text": task}]})];
        for (k, c) in calls.iter().enumerate() {
            let id = format!("{}_{k:04}", c.name);
            let args = c.input().unwrap_or_else(|| json!({"command": lam_core::action::tool_call(&c.name, &c.arguments)}));
            let name = if c.input().is_some() { c.name.as_str() } else { "run_shell_command" };
            let mut parts = Vec::new();
            if !c.thought.is_empty() {
                parts.push(json!({"text": c.thought}));
            }
            parts.push(json!({"functionCall": {"id": id, "name": name, "args": args}, "thoughtSignature": "skip_thought_signature_validator"}));
            contents.push(json!({"role": "model", "parts": parts}));
            contents.push(json!({"role": "user", "parts": [{"functionResponse": {"id": id, "name": name, "response": {"output": c.output}}}]}));
        }
        json!({
            "contents": contents,
            "systemInstruction": {"parts": [{"text": "You are Gemini CLI, an autonomous CLI agent. (replayed by lam replay)"}]},
            "tools": [{"functionDeclarations": tools}],
            "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64, "thinkingConfig": {"includeThoughts": true, "thinkingLevel": "HIGH"}},
        })
    }
}

#[cfg(feature = "readers")]
/// A message of a session file and its line.
type Message = (usize, Map<String, Value>);

#[cfg(feature = "readers")]
/// The messages of a session file: every message line and every message of
/// a `$set` of `messages`, the last written under each `id` in place of the
/// earlier ones (a `gemini` message is written again with its `toolCalls`),
/// in the order their ids first came; the header and the other `$set`s
/// (`lastUpdated`) say nothing of the conversation.
fn messages(bytes: &[u8], name: &str) -> Result<(Option<String>, Vec<Message>), ReadError> {
    let (mut session, mut order, mut last) = (None, Vec::new(), HashMap::new());
    let mut put = |n: usize, m: Map<String, Value>, order: &mut Vec<String>| -> Result<(), ReadError> {
        let id = m.get("id").and_then(Value::as_str).ok_or_else(|| line_error(name, n, "message has no string `id`".into()))?.to_string();
        if last.insert(id.clone(), (n, m)).is_none() {
            order.push(id);
        }
        Ok(())
    };
    for line in objects(bytes, name) {
        let (n, o) = line?;
        if GeminiCli.is_first_line(&o) {
            session = o.get("sessionId").and_then(Value::as_str).map(str::to_string);
        } else if let Some(set) = o.get("$set") {
            for m in set.get("messages").and_then(Value::as_array).into_iter().flatten() {
                let m = m.as_object().ok_or_else(|| line_error(name, n, format!("a message of `$set` is {}, not an object", kind(m))))?;
                put(n, m.clone(), &mut order)?;
            }
        } else if o.contains_key("type") {
            put(n, o, &mut order)?;
        }
    }
    Ok((session, order.iter().filter_map(|id| last.remove(id)).collect()))
}

#[cfg(feature = "readers")]
/// A message's parts as a Gemini `Content` (its `content`: a list of parts,
/// or a text), for `lam_core::wire`.
fn content(m: &Map<String, Value>) -> Map<String, Value> {
    let parts = match m.get("content") {
        Some(Value::Array(a)) => a.clone(),
        Some(Value::String(t)) => vec![json!({ "text": t })],
        _ => Vec::new(),
    };
    let mut c = Map::new();
    c.insert("parts".into(), Value::Array(parts));
    c
}

#[cfg(feature = "readers")]
#[cfg(feature = "readers")]
/// The records of one `Content`'s `functionResponse` parts: one per text
/// of its `response` (none: one empty record), each naming its call.
fn results(s: &mut Session, c: &Map<String, Value>) {
    let v = Value::Object(c.clone());
    for r in wire::results(Api::Gemini, c) {
        for text in texts_at(&v, &r.paths) {
            s.result(r.call_id.unwrap_or(""), text, None);
        }
    }
}

#[cfg(feature = "readers")]
/// A `gemini` message: its text a thought, each `toolCalls` entry a call
/// (and its `result` the call's records when no `user` message holds them).
fn gemini_message(s: &mut Session, m: &Map<String, Value>, answered_by_user: &HashSet<String>) -> Result<(), String> {
    if let Some(t) = m.get("content").and_then(Value::as_str) {
        s.think(t);
    }
    let calls = match m.get("toolCalls") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(format!("`toolCalls` is {}, not an array", kind(other))),
    };
    for c in calls {
        let c = c.as_object().ok_or_else(|| format!("a tool call is {}, not an object", kind(c)))?;
        let mut part = Map::new();
        let call = json!({"id": c.get("id"), "name": c.get("name"), "args": c.get("args")});
        part.insert("functionCall".into(), call);
        let Some(call) = wire::gemini_call(&part) else { return Err("a tool call has neither `id` nor `name`".into()) };
        s.call(call.id, call.action());
        if !answered_by_user.contains(call.id) {
            let mut r = Map::new();
            r.insert("parts".into(), c.get("result").cloned().unwrap_or(Value::Array(Vec::new())));
            results(s, &r);
        }
    }
    Ok(())
}
