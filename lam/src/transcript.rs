//! The transcript Claude Code or Codex wrote during a `lam run`: whether the
//! model answered in it (a request that went around lam, when none came
//! through the proxy) and the agent's session id (to resume through lam).
//!
//! Claude Code: `$CLAUDE_CONFIG_DIR` (default `~/.claude`)
//! `/projects/<working directory, each character but letters and digits
//! made '-'>/<session>.jsonl`. Codex: `$CODEX_HOME` (default `~/.codex`)
//! `/sessions/YYYY/MM/DD/rollout-*.jsonl` (a resumed session appends to its
//! first day's file). The newest such file modified since the agent started
//! is this run's; it is read by `lam_trajectory::agents`.

use lam_core::wire::Agent;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What the transcript of this run holds.
#[derive(Debug)]
pub struct Transcript {
    /// The model answered in it.
    pub answered: bool,
    /// The agent's session id (`claude --resume ID`, `codex resume ID`).
    pub session: Option<String>,
}

/// The transcript `agent` wrote in this working directory since `started`; `None` when there is none.
pub fn find(agent: Agent, started: SystemTime) -> Option<Transcript> {
    let since = started.checked_sub(Duration::from_secs(1)).unwrap_or(started);
    let files = match agent {
        Agent::ClaudeCode => claude_files(),
        Agent::Codex => codex_files(),
    };
    let newest = files.into_iter().filter_map(|f| Some((f.metadata().ok()?.modified().ok()?, f))).filter(|(t, _)| *t >= since).max()?.1;
    let bytes = std::fs::read(&newest).ok()?;
    let read = match agent {
        Agent::ClaudeCode => lam_trajectory::agents::read_claude_code(&bytes, &newest),
        Agent::Codex => lam_trajectory::agents::read_codex(&bytes, &newest),
    };
    let session = read.ok().and_then(|t| t.into_iter().next()).map(|t| t.session.0);
    Some(Transcript { answered: lam_trajectory::agents::model_answered(&bytes), session })
}

/// `lam run` to resume `session` of `agent` through lam, with the same `store`.
pub fn resume_command(agent: Agent, store: &str, session: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-:@%+=,".contains(c);
    let store = if store.chars().all(safe) { store.to_string() } else { format!("'{}'", store.replace('\'', "'\\''")) };
    match agent {
        Agent::ClaudeCode => format!("lam run --store {store} -- claude --resume {session}"),
        Agent::Codex => format!("lam run --store {store} -- codex resume {session}"),
    }
}

/// `$VAR`, else `~/.DEFAULT`.
fn home(var: &str, default: &str) -> Option<PathBuf> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(d) => Some(PathBuf::from(d)),
        None => Some(PathBuf::from(std::env::var_os("HOME")?).join(default)),
    }
}

/// Claude Code's transcripts of this working directory (subagents' files, one level down, left out).
fn claude_files() -> Vec<PathBuf> {
    let (Some(root), Ok(cwd)) = (home("CLAUDE_CONFIG_DIR", ".claude"), std::env::current_dir()) else { return Vec::new() };
    let cwd = cwd.to_string_lossy();
    let project: String = cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    jsonl_in(&root.join("projects").join(project))
}

/// Codex's rollouts, every day's.
fn codex_files() -> Vec<PathBuf> {
    let Some(root) = home("CODEX_HOME", ".codex") else { return Vec::new() };
    let mut dirs = vec![root.join("sessions")];
    for _ in 0..3 {
        dirs = dirs.iter().flat_map(|d| subdirs(d)).collect();
    }
    dirs.iter().flat_map(|d| jsonl_in(d)).collect()
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect()
}

fn jsonl_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_command_goes_through_lam_with_the_store() {
        assert_eq!(resume_command(Agent::ClaudeCode, "/s", "abc"), "lam run --store /s -- claude --resume abc");
        assert_eq!(resume_command(Agent::Codex, "/my s", "abc"), "lam run --store '/my s' -- codex resume abc");
        assert_eq!(resume_command(Agent::Codex, "/it's", "x"), r"lam run --store '/it'\''s' -- codex resume x");
    }
}
