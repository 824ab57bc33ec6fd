//! What a room tells of its agent: the [`Room`] trait, one method per fact,
//! implemented by each room on its unit struct ([`super::claude_code::ClaudeCode`]
//! and the others). [`Agent`](super::Agent)'s methods ask it through
//! [`Agent::room`](super::Agent::room); the defaults are what most agents
//! share (no status thread, no session database, no forks).

#[cfg(feature = "readers")]
use super::RunTranscript;
use super::launch::{Launch, Setup};
use super::requests::Call as Recorded;
#[cfg(feature = "readers")]
use crate::trajectory::{ReadError, Trajectory};
use lam_core::wire::{self, Api};
use serde_json::{Map, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
#[cfg(feature = "readers")]
use std::time::SystemTime;

/// Everything lam knows of one agent, asked through [`super::Agent`]'s
/// methods of the same names (their docs say what each answers).
pub trait Room: Sync {
    /// Its name (`claude-code`).
    fn name(&self) -> &'static str;

    /// The program it is run as (`claude`).
    fn program(&self) -> &'static str;

    /// The API it sends its conversation on.
    fn api(&self) -> Api;

    /// How to run it through the proxy.
    fn launch(&self, s: &Setup<'_>) -> Launch;

    /// Whether it runs non-interactively with `args`.
    fn batch(&self, args: &[OsString]) -> bool;

    /// The name it gives `lam mcp`'s recall tool.
    fn recall_tool(&self) -> &'static str;

    /// Its provider's origin.
    fn vendor(&self) -> &'static str;

    /// Its provider's origin when run with `args` (by default [`Room::vendor`]).
    fn vendor_for(&self, _args: &[OsString]) -> &'static str {
        self.vendor()
    }

    /// The upstream origin the user configured for it, with where that came from.
    fn configured_upstream(&self, args: &[OsString], cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)>;

    /// The environment variable it reads its base URL from (by default none).
    fn base_url_env(&self) -> Option<&'static str> {
        None
    }

    /// The base URL it is given for a proxy at `origin`.
    fn base_url(&self, origin: &str) -> String;

    /// What `lam run` set to point it at the proxy.
    fn pointed_by(&self) -> &'static str;

    /// What its exit code `code` says, when it has a code of its own for
    /// it (by default none).
    fn exit_reason(&self, _code: i32) -> Option<&'static str> {
        None
    }

    /// The arguments that resume `session`, and why its own resume line does not do.
    fn resume(&self, session: &str) -> (String, &'static str);

    /// The transcript files it may have written for `cwd`.
    fn transcripts(&self, cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf>;

    /// Read one of its transcripts.
    #[cfg(feature = "readers")]
    fn read(&self, bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError>;

    /// What its newest transcript for `cwd` since `since` holds (by
    /// default: the newest of [`Room::transcripts`], read by [`Room::read`]).
    #[cfg(feature = "readers")]
    fn transcript_since(&self, cwd: &Path, since: SystemTime, env: &dyn Fn(&str) -> Option<String>) -> Option<RunTranscript> {
        let dated = self.transcripts(cwd, env).into_iter().filter_map(|f| Some((f.metadata().ok()?.modified().ok()?, f)));
        let newest = dated.filter(|(t, _)| *t >= since).max()?.1;
        let bytes = std::fs::read(&newest).ok()?;
        let session = self.read(&bytes, &newest).ok().and_then(|t| t.into_iter().next()).map(|t| t.session.0);
        Some(RunTranscript { answered: self.answered_in(&bytes), session })
    }

    /// Whether a line of its transcript is the model's answer (by default never).
    fn answered(&self, _line: &Map<String, Value>) -> bool {
        false
    }

    /// Whether the model answered in one of its transcripts (by default:
    /// a line [`Room::answered`] names, lines that are no JSON objects skipped).
    #[cfg(feature = "readers")]
    fn answered_in(&self, bytes: &[u8]) -> bool {
        super::jsonl::objects(bytes, "").flatten().any(|(_, o)| self.answered(&o))
    }

    /// Whether a JSON document (a `.json` file read whole) is one of its
    /// transcripts (by default never).
    fn is_document(&self, _doc: &Map<String, Value>) -> bool {
        false
    }

    /// Whether a JSONL file's first line is one of its transcripts' (by default never).
    fn is_first_line(&self, _line: &Map<String, Value>) -> bool {
        false
    }

    /// Whether a first line is its and no other agent's, asked of every
    /// agent before [`Room::is_first_line`] (by default never).
    fn owns_first_line(&self, _line: &Map<String, Value>) -> bool {
        false
    }

    /// Whether `path` is its session database (by default never).
    fn is_database(&self, _path: &Path) -> bool {
        false
    }

    /// Where the thread id sits in its status line provider's
    /// `resources/read` params (by default it has none).
    fn status_thread_at(&self) -> Option<wire::Path> {
        None
    }

    /// Where it compacts its context on its own for `model`, in tokens.
    fn compaction_threshold(&self, model: &str) -> Option<u64>;

    /// Whether `call` forks it (by default never).
    fn forks(&self, _call: &wire::Call<'_>) -> bool {
        false
    }

    /// The path it sends its conversation's requests to (by default its API's).
    fn path(&self) -> &'static str {
        self.api().path()
    }

    /// The request body it sends for `task` and `calls` so far, declaring `tools`.
    fn request(&self, task: &str, calls: &[Recorded], tools: &[Value]) -> Value;
}
