//! The agents lam knows, one room each: everything lam knows of an agent
//! is in its module, and no other file of the workspace names an agent
//! (`tests/agent_rooms.rs` checks it).
//!
//! - [`claude_code`]: Claude Code. [`codex`]: Codex CLI. [`opencode`]:
//!   opencode. [`gemini`]: Gemini CLI.
//! - Each room holds: how to launch the agent and point it at the proxy
//!   (environment, configuration, MCP registration, as plain data:
//!   [`Launch`]); the shape of its requests, for `lam replay`
//!   ([`requests`]); where it keeps its transcripts and how to read them;
//!   how it compacts and forks.
//! - This module: the [`Agent`] enum (in `agent.rs`, plain data that
//!   [`crate::trajectory::Format`] names), the dispatch to the rooms, and
//!   [`detect`], which tells a transcript's agent (or lam's own JSONL) by
//!   its first line.
//!
//! The API shapes are `lam_core::wire`'s, once per API: the rooms read
//! calls and results with it, as the proxy does. Every tool-result text of
//! a transcript is one record, its action the call that produced it, named
//! by the one rule ([`lam_core::action`]).
//!
//! Adding an agent: a variant of [`Agent`], its room, a row in each
//! dispatch below, and its tests.

pub(crate) mod agent;
pub mod claude_code;
pub mod codex;
pub mod gemini;
#[cfg(feature = "readers")]
mod jsonl;
pub mod launch;
pub mod opencode;
pub mod requests;

pub use agent::Agent;
#[cfg(feature = "readers")]
pub use jsonl::timestamp;
pub use launch::{Arg, Home, Launch, Setup};
pub use requests::{Call, forwarded_results, requests};

use crate::trajectory::Format;
#[cfg(feature = "readers")]
use crate::trajectory::{ReadError, Trajectory};
use lam_core::wire;
use serde_json::{Map, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
#[cfg(feature = "readers")]
use std::time::SystemTime;

impl Agent {
    /// How to run it through the proxy (`lam run`).
    pub fn launch(self, s: &Setup<'_>) -> Launch {
        match self {
            Agent::ClaudeCode => claude_code::launch(s),
            Agent::Codex => codex::launch(s),
            Agent::OpenCode => opencode::launch(s),
            Agent::GeminiCli => gemini::launch(s),
        }
    }

    /// Whether it runs non-interactively with `args`, asking the model at once.
    pub fn batch(self, args: &[OsString]) -> bool {
        match self {
            Agent::ClaudeCode => claude_code::batch(args),
            Agent::Codex => codex::batch(args),
            Agent::OpenCode => opencode::batch(args),
            Agent::GeminiCli => gemini::batch(args),
        }
    }

    /// The name it gives `lam mcp`'s recall tool, registered as server `lam`.
    pub fn recall_tool(self) -> &'static str {
        match self {
            Agent::ClaudeCode => claude_code::RECALL_TOOL,
            Agent::Codex => codex::RECALL_TOOL,
            Agent::OpenCode => opencode::RECALL_TOOL,
            Agent::GeminiCli => gemini::RECALL_TOOL,
        }
    }

    /// The upstream origin the user configured for it when run with `args`
    /// in `cwd`, with where that came from; else its vendor's (`default for NAME`).
    pub fn upstream(self, args: &[OsString], cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> (String, String) {
        let vendor = match self {
            Agent::OpenCode => opencode::vendor(args),
            _ => self.vendor(),
        };
        self.configured_upstream(args, cwd, env).unwrap_or_else(|| (vendor.to_string(), format!("default for {}", self.name())))
    }

    /// The upstream origin the user configured for it (its base URL
    /// without the path the agent adds), with where that came from.
    pub fn configured_upstream(self, args: &[OsString], cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
        match self {
            Agent::ClaudeCode => claude_code::upstream(env),
            Agent::Codex => codex::upstream(env),
            Agent::OpenCode => opencode::upstream(args, cwd, env),
            Agent::GeminiCli => gemini::upstream(env),
        }
    }

    /// The environment variable it reads its base URL from, when it has one
    /// (`lam run` sets each for an agent it does not know).
    pub fn base_url_env(self) -> Option<&'static str> {
        match self {
            Agent::ClaudeCode => Some(claude_code::BASE_URL_ENV),
            Agent::Codex => Some(codex::BASE_URL_ENV),
            Agent::OpenCode => None,
            Agent::GeminiCli => Some(gemini::BASE_URL_ENV),
        }
    }

    /// The base URL it is given for a proxy at `origin` (`http://127.0.0.1:PORT`).
    pub fn base_url(self, origin: &str) -> String {
        match self {
            Agent::ClaudeCode => claude_code::base_url(origin),
            Agent::Codex => codex::base_url(origin),
            Agent::OpenCode => opencode::base_url(origin),
            Agent::GeminiCli => gemini::base_url(origin),
        }
    }

    /// Its provider's origin (opencode: its default provider's).
    pub fn vendor(self) -> &'static str {
        match self {
            Agent::ClaudeCode | Agent::OpenCode => claude_code::VENDOR,
            Agent::Codex => codex::VENDOR,
            Agent::GeminiCli => gemini::VENDOR,
        }
    }

    /// What `lam run` set to point it at the proxy (named when no request came through).
    pub fn pointed_by(self) -> &'static str {
        match self {
            Agent::ClaudeCode => claude_code::POINTED_BY,
            Agent::Codex => codex::POINTED_BY,
            Agent::OpenCode => opencode::POINTED_BY,
            Agent::GeminiCli => gemini::POINTED_BY,
        }
    }

    /// The agent's arguments that resume `session`, and why its own resume
    /// line does not do (it goes around lam).
    pub fn resume(self, session: &str) -> (String, &'static str) {
        match self {
            Agent::ClaudeCode => claude_code::resume(session),
            Agent::Codex => codex::resume(session),
            Agent::OpenCode => opencode::resume(session),
            Agent::GeminiCli => gemini::resume(session),
        }
    }

    /// The transcript files it may have written for working directory `cwd`.
    pub fn transcripts(self, cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
        match self {
            Agent::ClaudeCode => claude_code::transcripts(cwd, env),
            Agent::Codex => codex::transcripts(env),
            Agent::OpenCode => opencode::transcripts(env),
            Agent::GeminiCli => gemini::transcripts(env),
        }
    }

    /// Read one of its transcripts (`bytes`, read from `path`; a session
    /// database is read from `path` itself).
    #[cfg(feature = "readers")]
    pub fn read(self, bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
        match self {
            Agent::ClaudeCode => claude_code::read(bytes, path),
            Agent::Codex => codex::read(bytes, path),
            Agent::OpenCode => opencode::read_database(path),
            Agent::GeminiCli => gemini::read(bytes, path),
        }
    }

    /// What the transcript it wrote for working directory `cwd` since
    /// `since` holds (the newest; `None` when it wrote none): whether the
    /// model answered in it, and its session id.
    #[cfg(feature = "readers")]
    pub fn transcript_since(self, cwd: &Path, since: SystemTime, env: &dyn Fn(&str) -> Option<String>) -> Option<RunTranscript> {
        if self == Agent::OpenCode {
            return opencode::transcript_since(cwd, since, env);
        }
        let dated = self.transcripts(cwd, env).into_iter().filter_map(|f| Some((f.metadata().ok()?.modified().ok()?, f)));
        let newest = dated.filter(|(t, _)| *t >= since).max()?.1;
        let bytes = std::fs::read(&newest).ok()?;
        let session = self.read(&bytes, &newest).ok().and_then(|t| t.into_iter().next()).map(|t| t.session.0);
        Some(RunTranscript { answered: model_answered(&bytes), session })
    }

    /// Whether a line of its transcript is the model's answer.
    #[cfg(feature = "readers")]
    fn answered(self, line: &Map<String, Value>) -> bool {
        match self {
            Agent::ClaudeCode => claude_code::answered(line),
            Agent::Codex => codex::answered(line),
            Agent::OpenCode => false,
            Agent::GeminiCli => gemini::answered(line),
        }
    }

    /// Whether a transcript's first line is one of its transcripts'.
    fn is_first_line(self, line: &Map<String, Value>) -> bool {
        match self {
            Agent::ClaudeCode => claude_code::is_first_line(line),
            Agent::Codex => codex::is_first_line(line),
            Agent::OpenCode => false,
            Agent::GeminiCli => gemini::is_first_line(line),
        }
    }

    /// Where it compacts its context on its own for `model`, in tokens;
    /// `None` for a model its tables do not name.
    pub fn compaction_threshold(self, model: &str) -> Option<u64> {
        match self {
            Agent::ClaudeCode => claude_code::compaction_threshold(model),
            Agent::Codex => codex::compaction_threshold(model),
            Agent::OpenCode => opencode::compaction_threshold(model),
            Agent::GeminiCli => gemini::compaction_threshold(model),
        }
    }

    /// Whether `call` forks it: a subagent that starts from the whole
    /// conversation so far rather than a fresh one.
    pub fn forks(self, call: &wire::Call<'_>) -> bool {
        match self {
            Agent::ClaudeCode => claude_code::forks(call),
            Agent::Codex => codex::forks(call),
            Agent::OpenCode => false,
            Agent::GeminiCli => gemini::forks(call),
        }
    }

    /// The path it sends its conversation's requests to (Gemini CLI's
    /// names its model).
    pub fn path(self) -> &'static str {
        match self {
            Agent::ClaudeCode | Agent::Codex | Agent::OpenCode => self.api().path(),
            Agent::GeminiCli => gemini::PATH,
        }
    }

    /// The request body it sends for `task` and `calls` so far, declaring `tools`.
    pub fn request(self, task: &str, calls: &[Call], tools: &[Value]) -> Value {
        match self {
            Agent::ClaudeCode => claude_code::request(task, calls, tools),
            Agent::Codex => codex::request(task, calls, tools),
            Agent::OpenCode => opencode::request(task, calls, tools),
            Agent::GeminiCli => gemini::request(task, calls, tools),
        }
    }
}

/// What an agent's transcript of one run holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTranscript {
    /// The model answered in it (not a local stand-in such as a login error).
    pub answered: bool,
    /// The agent's session id (what it resumes by).
    pub session: Option<String>,
}

/// Whether `path` is an agent's session database (read by [`read_path`](crate::read::read_path)).
pub fn is_database(path: &Path) -> bool {
    database_of(path).is_some()
}

/// The agent whose session database `path` is.
pub fn database_of(path: &Path) -> Option<Agent> {
    opencode::is_database(path).then_some(Agent::OpenCode)
}

/// The lowest threshold at which any agent compacts its context on its own
/// for `model` (the proxy sees the model, not the agent); `None` when no
/// agent's tables name it.
pub fn compaction_threshold(model: &str) -> Option<u64> {
    Agent::ALL.iter().filter_map(|a| a.compaction_threshold(model)).min()
}

/// Whether `call` forks the agent that made it (any agent's rule): the
/// fork's requests carry the parent's history, so the proxy gives it a
/// conversation of its own that starts from the parent's.
pub fn is_fork(call: &wire::Call<'_>) -> bool {
    Agent::ALL.iter().any(|a| a.forks(call))
}

/// The thread a status line provider's `resources/read` params name (an
/// agent that asks `lam status-line --mcp` for its line names the thread it shows).
pub fn status_thread(params: &Value) -> Option<&str> {
    codex::status_thread_at().str_in(params)
}

/// The format of a JSON Lines file, from its first non-blank line: lam JSONL
/// (`session`, `index`), or an agent's transcript. `None` when the line is
/// none of these.
pub fn detect(bytes: &[u8]) -> Option<Format> {
    let o = first_object(bytes)?;
    if o.contains_key("session") && o.contains_key("index") {
        return Some(Format::LamJsonl);
    }
    // A rollout's envelope (`{type, payload}`) first: its line may also carry an id.
    if o.get("type").is_some_and(Value::is_string) && o.contains_key("payload") {
        return Some(Format::Agent(Agent::Codex));
    }
    let agent = Agent::ALL.into_iter().find(|a| a.is_first_line(&o))?;
    Some(Format::Agent(agent))
}

#[cfg(feature = "readers")]
/// Whether an agent's transcript holds something the model answered (not
/// a local stand-in such as a login error). Lines that are no JSON objects
/// are skipped; other formats: false.
pub fn model_answered(bytes: &[u8]) -> bool {
    let Some(Format::Agent(agent)) = detect(bytes) else { return false };
    jsonl::objects(bytes, "").flatten().any(|(_, o)| agent.answered(&o))
}

/// The first non-blank line of a JSONL file, when it is a JSON object.
fn first_object(bytes: &[u8]) -> Option<Map<String, Value>> {
    let line = bytes.split(|&b| b == b'\n').find(|l| !l.iter().all(u8::is_ascii_whitespace))?;
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(o)) => Some(o),
        _ => None,
    }
}

/// Argument `key` of `call` as text (its arguments an object, or a JSON string of one).
fn argument(call: &wire::Call<'_>, key: &str) -> Option<String> {
    let args = match call.arguments {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s).ok()?,
        Some(v) => v.clone(),
        None => return None,
    };
    args.get(key).and_then(Value::as_str).map(str::to_string)
}

/// `$VAR`, else `~/DEFAULT`.
fn home(env: &dyn Fn(&str) -> Option<String>, var: &str, default: &str) -> Option<PathBuf> {
    match env(var).filter(|v| !v.is_empty()) {
        Some(d) => Some(PathBuf::from(d)),
        None => Some(PathBuf::from(env("HOME")?).join(default)),
    }
}

/// The `.jsonl` files of `dir`.
fn jsonl_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file()).collect()
}
