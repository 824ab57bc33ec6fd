//! The agents lam knows, one room each: everything lam knows of an agent
//! is in its module, and no other file of the workspace names an agent
//! (`tests/agent_rooms.rs` checks it).
//!
//! - [`claude_code`]: Claude Code. [`codex`]: Codex CLI. [`opencode`]:
//!   opencode. [`gemini`]: Gemini CLI.
//! - Each room holds: how to launch the agent and point it at the proxy
//!   (environment, configuration, MCP registration, as plain data:
//!   [`Launch`]); the shape of its requests, for `lam replay`
//!   ([`requests`](mod@requests)); where it keeps its transcripts and how to read them;
//!   how it compacts and forks.
//! - Each room implements [`Room`] (in `room.rs`: one method per fact,
//!   defaults for what most agents share) on a unit struct
//!   ([`claude_code::ClaudeCode`], [`codex::Codex`], [`opencode::OpenCode`],
//!   [`gemini::GeminiCli`]).
//! - This module: the [`Agent`] enum (in `agent.rs`, plain data that
//!   [`crate::trajectory::Format`] names), [`Agent::room`], the one map
//!   from an agent to its room, which every method of `Agent` asks;
//!   [`detect`], which tells a transcript's agent (or lam's own JSONL) by
//!   its first line.
//!
//! The API shapes are `lam_core::wire`'s, once per API: the rooms read
//! calls and results with it, as the proxy does. Every tool-result text of
//! a transcript is one record, its action the call that produced it, named
//! by the one rule ([`lam_core::action`]).
//!
//! Adding an agent: its room (one module, its [`Room`] impl and its
//! tests), a variant of [`Agent`] (and in [`Agent::ALL`]), and one line in
//! [`Agent::room`].

pub(crate) mod agent;
pub mod claude_code;
pub mod codex;
pub mod gemini;
#[cfg(feature = "readers")]
mod jsonl;
pub mod launch;
pub mod opencode;
pub mod requests;
pub mod room;

pub use agent::Agent;
#[cfg(feature = "readers")]
pub use jsonl::timestamp;
pub use launch::{Arg, Home, Launch, Setup};
pub use requests::{Call, forwarded_results, requests};
pub use room::Room;

use crate::trajectory::Format;
#[cfg(feature = "readers")]
use crate::trajectory::{ReadError, Trajectory};
use lam_core::wire::{self, Api};
use serde_json::{Map, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
#[cfg(feature = "readers")]
use std::time::SystemTime;

impl Agent {
    /// Its room: everything lam knows of it. The one place that maps an
    /// agent to its room; every method below asks it.
    pub fn room(self) -> &'static dyn Room {
        match self {
            Agent::ClaudeCode => &claude_code::ClaudeCode,
            Agent::Codex => &codex::Codex,
            Agent::OpenCode => &opencode::OpenCode,
            Agent::GeminiCli => &gemini::GeminiCli,
        }
    }

    /// Its name: `claude-code`, `codex`, `opencode`, `gemini-cli`.
    pub fn name(self) -> &'static str {
        self.room().name()
    }

    /// The API it sends its conversation on (opencode: through its default
    /// provider, `anthropic`).
    pub fn api(self) -> Api {
        self.room().api()
    }

    /// The program it is run as (`claude`, `codex`, `opencode`, `gemini`).
    pub fn program(self) -> &'static str {
        self.room().program()
    }

    /// How to run it through the proxy (`lam run`).
    pub fn launch(self, s: &Setup<'_>) -> Launch {
        self.room().launch(s)
    }

    /// Whether it runs non-interactively with `args`, asking the model at once.
    pub fn batch(self, args: &[OsString]) -> bool {
        self.room().batch(args)
    }

    /// The name it gives `lam mcp`'s recall tool, registered as server `lam`.
    pub fn recall_tool(self) -> &'static str {
        self.room().recall_tool()
    }

    /// The upstream origin the user configured for it when run with `args`
    /// in `cwd`, with where that came from; else its vendor's (`default for NAME`).
    pub fn upstream(self, args: &[OsString], cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> (String, String) {
        let vendor = self.room().vendor_for(args);
        self.configured_upstream(args, cwd, env).unwrap_or_else(|| (vendor.to_string(), format!("default for {}", self.name())))
    }

    /// The upstream origin the user configured for it (its base URL
    /// without the path the agent adds), with where that came from.
    pub fn configured_upstream(self, args: &[OsString], cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
        self.room().configured_upstream(args, cwd, env)
    }

    /// The environment variable it reads its base URL from, when it has one
    /// (`lam run` sets each for an agent it does not know).
    pub fn base_url_env(self) -> Option<&'static str> {
        self.room().base_url_env()
    }

    /// The base URL it is given for a proxy at `origin` (`http://127.0.0.1:PORT`).
    pub fn base_url(self, origin: &str) -> String {
        self.room().base_url(origin)
    }

    /// Its provider's origin (opencode: its default provider's).
    pub fn vendor(self) -> &'static str {
        self.room().vendor()
    }

    /// What `lam run` set to point it at the proxy (named when no request came through).
    pub fn pointed_by(self) -> &'static str {
        self.room().pointed_by()
    }

    /// What its exit code `code` says (Gemini CLI's fatal errors have codes
    /// of their own); `None` when it has no such code.
    pub fn exit_reason(self, code: i32) -> Option<&'static str> {
        self.room().exit_reason(code)
    }

    /// The agent's arguments that resume `session`, and why its own resume
    /// line does not do (it goes around lam).
    pub fn resume(self, session: &str) -> (String, &'static str) {
        self.room().resume(session)
    }

    /// The transcript files it may have written for working directory `cwd`.
    pub fn transcripts(self, cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
        self.room().transcripts(cwd, env)
    }

    /// Read one of its transcripts (`bytes`, read from `path`; a session
    /// database is read from `path` itself).
    #[cfg(feature = "readers")]
    pub fn read(self, bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
        self.room().read(bytes, path)
    }

    /// What the transcript it wrote for working directory `cwd` since
    /// `since` holds (the newest; `None` when it wrote none): whether the
    /// model answered in it, and its session id.
    #[cfg(feature = "readers")]
    pub fn transcript_since(self, cwd: &Path, since: SystemTime, env: &dyn Fn(&str) -> Option<String>) -> Option<RunTranscript> {
        self.room().transcript_since(cwd, since, env)
    }

    /// Where it compacts its context on its own for `model`, in tokens;
    /// `None` for a model its tables do not name.
    pub fn compaction_threshold(self, model: &str) -> Option<u64> {
        self.room().compaction_threshold(model)
    }

    /// Whether `call` forks it: a subagent that starts from the whole
    /// conversation so far rather than a fresh one.
    pub fn forks(self, call: &wire::Call<'_>) -> bool {
        self.room().forks(call)
    }

    /// The path it sends its conversation's requests to (Gemini CLI's
    /// names its model).
    pub fn path(self) -> &'static str {
        self.room().path()
    }

    /// The request body it sends for `task` and `calls` so far, declaring `tools`.
    pub fn request(self, task: &str, calls: &[Call], tools: &[Value]) -> Value {
        self.room().request(task, calls, tools)
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
    Agent::ALL.into_iter().find(|a| a.room().is_database(path))
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
    Agent::ALL.iter().find_map(|a| a.room().status_thread_at()?.str_in(params))
}

/// The format of a JSON Lines file, from its first non-blank line: lam JSONL
/// (`session`, `index`), or an agent's transcript. `None` when the line is
/// none of these.
pub fn detect(bytes: &[u8]) -> Option<Format> {
    let o = first_object(bytes)?;
    if o.contains_key("session") && o.contains_key("index") {
        return Some(Format::LamJsonl);
    }
    // A line one agent owns first (a rollout's envelope may also carry an id).
    let owner = Agent::ALL.into_iter().find(|a| a.room().owns_first_line(&o));
    let agent = owner.or_else(|| Agent::ALL.into_iter().find(|a| a.room().is_first_line(&o)))?;
    Some(Format::Agent(agent))
}

/// The agent whose transcript a JSON document (a `.json` file read whole)
/// is: Gemini CLI's session files of the form before 0.39. `None` for
/// any other document.
pub fn detect_document(doc: &Value) -> Option<Agent> {
    let o = doc.as_object()?;
    Agent::ALL.into_iter().find(|a| a.room().is_document(o))
}

#[cfg(feature = "readers")]
/// Whether an agent's transcript (JSON Lines, or a JSON document its room
/// reads) holds something the model answered (not a local stand-in such
/// as a login error). Lines that are no JSON objects are skipped; other
/// formats: false.
pub fn model_answered(bytes: &[u8]) -> bool {
    let agent = match detect(bytes) {
        Some(Format::Agent(a)) => Some(a),
        Some(_) => None,
        None => serde_json::from_slice::<Value>(bytes).ok().as_ref().and_then(detect_document),
    };
    agent.is_some_and(|a| a.room().answered_in(bytes))
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
    files_in(dir, &["jsonl"])
}

/// The files of `dir` whose extension is one of `extensions`.
fn files_in(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| extensions.iter().any(|e| x == *e)) && p.is_file()).collect()
}
