//! What `lam run` tells a room and what the room answers: how to point the
//! agent at the proxy and register `lam mcp`, as plain data that `lam run`
//! applies the same way for every agent.

use std::ffi::OsString;
use std::path::PathBuf;

/// What `lam run` knows when it launches an agent.
pub struct Setup<'a> {
    /// The path of this `lam` (for `lam mcp`, `lam status-line`).
    pub lam: &'a str,
    /// `lam mcp`'s arguments for this run (`mcp --store S [--run R]`).
    pub mcp: &'a [String],
    /// The proxy's origin, `http://127.0.0.1:PORT`.
    pub origin: &'a str,
    /// The user's arguments to the agent.
    pub args: &'a [OsString],
    /// The working directory it runs in.
    pub cwd: &'a std::path::Path,
    /// Register lam's status line (an interactive run, `LAM_STATUS_LINE` not `0`).
    pub status_line: bool,
    /// The tokens the run's budget holds each request to (`--budget N`,
    /// else the default's ceiling); `None` with `--budget off`.
    pub budget: Option<u64>,
    /// The user's environment (`std::env::var`, or a test's).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl std::fmt::Debug for Setup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Setup { lam, mcp, origin, args, cwd, status_line, budget, env: _ } = self;
        let mut s = f.debug_struct("Setup");
        s.field("lam", lam).field("mcp", mcp).field("origin", origin).field("args", args).field("cwd", cwd);
        s.field("status_line", status_line).field("budget", budget).finish_non_exhaustive()
    }
}

impl Setup<'_> {
    /// The user's value of `key`, when set and not blank.
    pub fn var(&self, key: &str) -> Option<String> {
        (self.env)(key).filter(|v| !v.trim().is_empty())
    }
}

/// How to run an agent through the proxy.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Launch {
    /// Environment variables set for the agent.
    pub env: Vec<(String, String)>,
    /// Arguments put before the user's.
    pub before: Vec<Arg>,
    /// Arguments put after the user's.
    pub after: Vec<Arg>,
    /// Files only this user can read, written before the agent starts and
    /// removed after it exits: a name and the contents ([`Arg::File`]
    /// names one).
    pub files: Vec<(&'static str, String)>,
    /// What `lam run` tells the user before the agent starts (a setting of
    /// theirs it could not keep, say).
    pub notes: Vec<String>,
    /// A home of the agent's own for the run ([`Home`]).
    pub home: Option<Home>,
}

/// A directory only this user can read that `lam run` makes for the agent
/// before it starts and removes after it exits (its links with it, never
/// what they point at), and the variable that names it: an agent whose
/// settings can only be given in files of its home (Gemini CLI's
/// `GEMINI_CLI_HOME`) gets the user's home with lam's settings in it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Home {
    /// The variable set to its path.
    pub var: &'static str,
    /// Files in it: a path below it and the contents.
    pub files: Vec<(PathBuf, String)>,
    /// Directories made first (with their parents) where they are missing,
    /// so that links to them lead somewhere (absolute paths).
    pub make: Vec<PathBuf>,
    /// Links in it: a path below it and what it points at; one whose
    /// target does not exist is left out.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// Variables set to the path of one of its files (Gemini CLI's
    /// `GEMINI_EXP`, which names a file rather than a folder).
    pub vars: Vec<(&'static str, PathBuf)>,
}

/// One argument of a [`Launch`].
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// This text.
    Text(OsString),
    /// The path of the launch's file of this name.
    File(&'static str),
}

impl Arg {
    /// A text argument.
    pub fn text(s: impl Into<OsString>) -> Self {
        Arg::Text(s.into())
    }
}

/// `-c KEY=VALUE` pairs, as TOML-configured agents take them.
pub(crate) fn dash_c(settings: impl IntoIterator<Item = String>) -> Vec<Arg> {
    settings.into_iter().flat_map(|kv| [Arg::text("-c"), Arg::text(kv)]).collect()
}

/// `s` as a JSON (and TOML basic) string.
pub(crate) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The origin a base URL names: trimmed, without a trailing `/` and, when
/// `v1`, without a trailing `/v1`.
pub(crate) fn origin_of(url: &str, v1: bool) -> String {
    let v = url.trim().trim_end_matches('/');
    let v = if v1 { v.strip_suffix("/v1").unwrap_or(v) } else { v };
    v.to_string()
}
