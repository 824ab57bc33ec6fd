//! What every reader produces: a [`Trajectory`] of one session, the
//! [`Format`] it was read as, and the [`ReadError`] that names the file and
//! the record. Both the generic readers ([`crate::read`]) and the coding
//! agents' readers ([`crate::agents`]) build on this module, and neither on
//! the other's internals: `read` dispatches to `agents`, never the reverse.
//! This module names an agent by the plain enum of `agents/agent.rs`, which
//! imports nothing of the crate, so no module points back at itself.

use crate::agents::agent::Agent;
use std::path::PathBuf;

/// One agent session's tool observations, in arrival order.
#[derive(Debug, Clone)]
pub struct Trajectory {
    /// Session name (instance id, or the file stem).
    pub session: lam_core::SessionId,
    /// File it came from.
    pub source: PathBuf,
    /// Format it was read as.
    pub format: Format,
    /// Observations with their actions.
    pub records: Vec<lam_core::Record>,
    /// The model's free text before each action (parallel to `records`; empty when not recorded).
    pub thoughts: Vec<String>,
    /// The immutable task prefix: system and task messages before the first action (empty when not recorded).
    pub task: String,
    /// When each record's result was written, Unix milliseconds (parallel to
    /// `records`; empty, or `None` for a record, when not recorded): Claude
    /// Code's and Codex's per-line `timestamp`.
    pub times: Vec<Option<i64>>,
    /// The model that made each record's call (parallel to `records`;
    /// empty, or `None` for a record, when not recorded): Claude Code's
    /// `message.model`, Codex's `turn_context` `model`, Gemini CLI's `model`.
    pub models: Vec<Option<String>>,
    /// The prompt-cache TTL, in seconds, the agent's requests asked for, as
    /// far as the transcript shows it (Claude Code: its `usage` wrote to the
    /// 1-hour cache only, 3600, or to the 5-minute one, 300); `None` when not recorded.
    pub cache_ttl: Option<u64>,
}

impl Trajectory {
    /// The session as completed turns (thought, action, observation).
    pub fn turns(&self) -> Vec<lam_core::Turn> {
        self.records.iter().enumerate().map(|(i, r)| lam_core::Turn { thought: self.thoughts.get(i).cloned().unwrap_or_default(), record: r.clone() }).collect()
    }
}

/// Supported trajectory formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// mini-swe-agent `{messages, trajectory_format: "mini-swe-agent-1"}`.
    MiniSweAgent,
    /// SWE-agent `.traj` (`trajectory[]` of action/observation, or `history` only).
    SweAgent,
    /// OpenAI chat-completions messages (tool results as `role: tool`).
    OpenAiChat,
    /// lam trajectory JSON Lines v1.
    LamJsonl,
    /// A coding agent's own transcript ([`crate::agents`]).
    Agent(Agent),
}

impl Format {
    /// The agent whose transcripts these are, if any.
    pub fn agent(self) -> Option<Agent> {
        match self {
            Format::Agent(a) => Some(a),
            _ => None,
        }
    }

    /// Its name: `mini-swe-agent`, `swe-agent`, `openai-chat`, `lam-jsonl`,
    /// or the agent's ([`Agent::name`]).
    pub fn name(self) -> &'static str {
        match self {
            Format::MiniSweAgent => "mini-swe-agent",
            Format::SweAgent => "swe-agent",
            Format::OpenAiChat => "openai-chat",
            Format::LamJsonl => "lam-jsonl",
            Format::Agent(a) => a.name(),
        }
    }
}

impl serde::Serialize for Format {
    /// As its [`Format::name`] (`open-ai-chat` for OpenAI chat).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // As serde's kebab-case wrote it when this was derived.
        s.serialize_str(if *self == Format::OpenAiChat { "open-ai-chat" } else { self.name() })
    }
}

/// A reader error that names the input and the record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON (line/column of the JSON text).
    #[error("{path}: malformed JSON at line {line}, column {column}: {message}")]
    Json {
        /// File.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Parser message.
        message: String,
    },
    /// A record has the wrong shape.
    #[error("{path}: {record}: {message}")]
    Record {
        /// File.
        path: String,
        /// Which record, e.g. `trajectory[3]` or `line 7`.
        record: String,
        /// Its 1-based line, in a JSON Lines file.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// No reader recognises the file.
    #[error("{path}: not a recognised trajectory ({message})")]
    Unknown {
        /// File.
        path: String,
        /// Why.
        message: String,
    },
}

impl ReadError {
    /// The file it names.
    pub fn path(&self) -> &str {
        match self {
            ReadError::Io { path, .. } | ReadError::Json { path, .. } | ReadError::Record { path, .. } | ReadError::Unknown { path, .. } => path,
        }
    }

    /// The 1-based line it names: of the JSON text, or a JSON Lines file's record.
    pub fn line(&self) -> Option<usize> {
        match self {
            ReadError::Json { line, .. } => Some(*line),
            ReadError::Record { line, .. } => *line,
            _ => None,
        }
    }

    /// The record it names (`line 7`, `messages[3]`, `trajectory[1]`).
    pub fn record(&self) -> Option<&str> {
        match self {
            ReadError::Record { record, .. } => Some(record),
            _ => None,
        }
    }
}

/// An input a run could not use, as `lam compact` and `lam replay`
/// (`--json`: `unreadable`) and `lam eval` (`failed`) report it: the file,
/// the line and record when a reader named them, and the error. The run
/// goes on with the other inputs and fails at the end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unreadable {
    /// The input.
    pub path: String,
    /// The 1-based line ([`ReadError::line`]).
    pub line: Option<usize>,
    /// The record ([`ReadError::record`]).
    pub record: Option<String>,
    /// The error, on one line, naming the file.
    pub error: String,
}

impl Unreadable {
    /// `file`, which failed with `error` (on one line); `read`, the
    /// [`ReadError`] behind it when there is one, gives the line and record.
    pub fn new(file: &std::path::Path, read: Option<&ReadError>, error: &str) -> Self {
        Unreadable {
            path: file.display().to_string(),
            line: read.and_then(ReadError::line),
            record: read.and_then(ReadError::record).map(str::to_string),
            error: error.lines().collect::<Vec<_>>().join(" "),
        }
    }

    /// The file, and its line when known: `a.jsonl line 182`.
    pub fn place(&self) -> String {
        self.line.map_or(self.path.clone(), |l| format!("{} line {l}", self.path))
    }
}

/// How a JSON value is named in an error: "a string", "an array".
#[cfg(feature = "readers")]
pub(crate) fn kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
