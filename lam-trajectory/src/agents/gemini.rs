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
//!   (JSON Lines since 0.39; a message written again under its `id`
//!   replaces the first, `$set` and `$rewindTo` as Gemini CLI loads them:
//!   [`GeminiCli::read`]), and `session-*.json` of versions 0.6 to 0.38
//!   (one JSON document: the header with every message in `messages`;
//!   0.61 still reads them), both read by one rule; resumed by
//!   `gemini --resume ID`.
//! - **Compaction**: when the last answer's `promptTokenCount` reaches half
//!   the token limit, 1,048,576 for every current model: 524,288
//!   ([`GeminiCli::compaction_threshold`]), at a user message. Before that, in any
//!   turn, it masks old tool outputs in its own history once its estimate
//!   of them passes 80,000 tokens (not a setting in 0.61.0).
//! - **Forks**: none (`invoke_agent` starts a fresh subagent).

#[cfg(feature = "readers")]
use super::Agent;
use super::files_in;
#[cfg(feature = "readers")]
use super::jsonl::{Session, objects, stem, texts_at, timestamp};
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

    /// Its fatal errors' exit codes (0.61.0, `FatalError` and its
    /// subclasses); each ends it before or instead of a model request.
    fn exit_reason(&self, code: i32) -> Option<&'static str> {
        Some(match code {
            41 => "Gemini CLI's authentication error, FatalAuthenticationError",
            42 => "Gemini CLI's input error, FatalInputError",
            44 => "Gemini CLI's sandbox error, FatalSandboxError",
            52 => "Gemini CLI's configuration error, FatalConfigError",
            53 => "Gemini CLI's turn limit, FatalTurnLimitedError",
            54 => "Gemini CLI's tool execution error, FatalToolExecutionError",
            55 => {
                "Gemini CLI's untrusted folder, FatalUntrustedWorkspaceError: run headless in a folder it does not trust, it stops before \
                 any model request; trust the folder, pass --skip-trust or set GEMINI_CLI_TRUST_WORKSPACE=true"
            }
            130 => "Gemini CLI cancelled, FatalCancellationError",
            _ => return None,
        })
    }

    /// Its session files, every project's (`tmp/<project>/chats/session-*.jsonl`,
    /// and `session-*.json` of versions before 0.39).
    fn transcripts(&self, _cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
        let Some(tmp) = home(env).map(|h| h.join("tmp")) else { return Vec::new() };
        let Ok(rd) = std::fs::read_dir(&tmp) else { return Vec::new() };
        let chats = rd.flatten().map(|e| e.path().join("chats"));
        chats
            .flat_map(|d| files_in(&d, &["jsonl", "json"]))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("session-")))
            .collect()
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
        for (at, m) in &messages {
            s.time = timestamp(m);
            if let Some(model) = m.get("model").and_then(Value::as_str) {
                s.model = Some(model.to_string());
            }
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
                Some("gemini") => gemini_message(&mut s, m, &answered_by_user).map_err(|e| record_error(&name, at, e))?,
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
        is_header(o) && o.contains_key("startTime")
    }

    /// Whether a JSON document is a session file of the form before 0.39
    /// (`session-*.json`): the header with the `messages` array.
    fn is_document(&self, o: &Map<String, Value>) -> bool {
        is_header(o) && o.get("messages").is_some_and(Value::is_array)
    }

    #[cfg(feature = "readers")]
    /// Whether the model answered in a session file, in either form: a
    /// message of the conversation as Gemini CLI loads it ([`messages`]).
    fn answered_in(&self, bytes: &[u8]) -> bool {
        messages(bytes, "").is_ok_and(|(_, ms)| ms.iter().any(|(_, m)| self.answered(m)))
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
/// A message of a session file and where it came from, for errors.
type Message = (At, Map<String, Value>);

#[cfg(feature = "readers")]
/// Where a message is: its line (JSON Lines) and record (`line 7`,
/// `line 2: $set.messages[0]`, `messages[3]`).
#[derive(Debug, Clone)]
struct At {
    line: Option<usize>,
    record: String,
}

#[cfg(feature = "readers")]
/// A record of a session file and its line (none for the one JSON document).
type Record = (Option<usize>, Map<String, Value>);

#[cfg(feature = "readers")]
/// The records of a session file, each with where it is: the whole file
/// when it is one JSON object (the form before 0.39, `session-*.json`:
/// `{sessionId, projectHash, startTime, lastUpdated, messages: [...]}`,
/// the same message objects), else its lines (JSON Lines, `.jsonl`).
fn records(bytes: &[u8], name: &str) -> Result<Vec<Record>, ReadError> {
    if let Ok(Value::Object(doc)) = serde_json::from_slice::<Value>(bytes) {
        return Ok(vec![(None, doc)]);
    }
    objects(bytes, name).map(|r| r.map(|(n, o)| (Some(n), o))).collect()
}

#[cfg(feature = "readers")]
/// The messages of a session file in either form, by the rule Gemini CLI
/// loads it with (`loadConversationRecord`): a message (a record with a
/// `type`, or a string `id`) written again under its `id` replaces the
/// first in place (a `gemini` message is written again with its
/// `toolCalls`); a `$set` of `messages` replaces them all; `$rewindTo: ID`
/// drops that message and every later one (all of them when no message
/// has that id); the header (`sessionId`, `projectHash`) names the session
/// and adds the `messages` it holds (the whole conversation, in the one
/// JSON document form). Other records (`$set` of `lastUpdated`) say nothing
/// of the conversation.
fn messages(bytes: &[u8], name: &str) -> Result<(Option<String>, Vec<Message>), ReadError> {
    let mut c = Conversation::default();
    for (n, o) in records(bytes, name)? {
        let at = |what: String| At {
            line: n,
            record: match (n, what.is_empty()) {
                (Some(n), true) => format!("line {n}"),
                (Some(n), false) => format!("line {n}: {what}"),
                (None, true) => "the document".to_string(),
                (None, false) => what,
            },
        };
        if let Some(id) = o.get("$rewindTo").and_then(Value::as_str) {
            c.rewind(id);
        } else if let Some(set) = o.get("$set").filter(|s| s.is_object()) {
            if let Some(list) = set.get("messages").and_then(Value::as_array) {
                c.clear();
                c.put_all(list, "$set.messages", &at, name)?;
            }
        } else if is_header(&o) {
            c.session = o.get("sessionId").and_then(Value::as_str).map(str::to_string);
            c.put_all(o.get("messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice), "messages", &at, name)?;
        } else if o.contains_key("type") || o.get("id").is_some_and(Value::is_string) {
            c.put(at(String::new()), o, name)?;
        }
    }
    Ok((c.session, c.order.iter().filter_map(|id| c.last.remove(id)).collect()))
}

/// A session file's header, in either form: a string `sessionId` and
/// `projectHash` (Gemini CLI's `isPartialMetadataRecord`).
fn is_header(o: &Map<String, Value>) -> bool {
    o.get("sessionId").is_some_and(Value::is_string) && o.get("projectHash").is_some_and(Value::is_string)
}

#[cfg(feature = "readers")]
/// The conversation as the records so far leave it: its messages by id, in
/// the order their ids came.
#[derive(Default)]
struct Conversation {
    session: Option<String>,
    order: Vec<String>,
    last: HashMap<String, Message>,
}

#[cfg(feature = "readers")]
impl Conversation {
    fn put(&mut self, at: At, m: Map<String, Value>, name: &str) -> Result<(), ReadError> {
        let id = m.get("id").and_then(Value::as_str).ok_or_else(|| record_error(name, &at, "message has no string `id`".into()))?.to_string();
        if self.last.insert(id.clone(), (at, m)).is_none() {
            self.order.push(id);
        }
        Ok(())
    }

    /// Every message of `list` (a `messages` array found at `field`).
    fn put_all(&mut self, list: &[Value], field: &str, at: &dyn Fn(String) -> At, name: &str) -> Result<(), ReadError> {
        for (i, m) in list.iter().enumerate() {
            let here = at(format!("{field}[{i}]"));
            let m = m.as_object().ok_or_else(|| record_error(name, &here, format!("message is {}, not an object", kind(m))))?;
            self.put(here, m.clone(), name)?;
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.order.clear();
        self.last.clear();
    }

    /// `$rewindTo: id`: that message and every later one gone (all when none has that id).
    fn rewind(&mut self, id: &str) {
        let from = self.order.iter().position(|o| o == id).unwrap_or(0);
        for gone in self.order.drain(from..) {
            self.last.remove(&gone);
        }
    }
}

#[cfg(feature = "readers")]
fn record_error(name: &str, at: &At, message: String) -> ReadError {
    ReadError::Record { path: name.to_string(), record: at.record.clone(), line: at.line, message }
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
