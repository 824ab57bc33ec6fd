//! The transcript an agent wrote during a `lam run`: whether the model
//! answered in it (a request that went around lam, when none came through
//! the proxy) and the agent's session id (to resume through lam). Where an
//! agent keeps its transcripts and how they read is its room's
//! (`lam_trajectory::agents`); the newest such file modified since the
//! agent started is this run's.

use lam_trajectory::agents::Agent;
use std::time::{Duration, SystemTime};

/// What the transcript of this run holds: whether the model answered in it, and the agent's session id.
pub use lam_trajectory::agents::RunTranscript as Transcript;

/// The transcript `agent` wrote in this working directory since `started`; `None` when there is none.
pub fn find(agent: Agent, started: SystemTime) -> Option<Transcript> {
    let since = started.checked_sub(Duration::from_secs(1)).unwrap_or(started);
    let cwd = std::env::current_dir().ok()?;
    agent.transcript_since(&cwd, since, &|k| std::env::var(k).ok())
}

/// `lam run` to resume `session` of `agent` through lam, with the same `store`.
pub fn resume_command(agent: Agent, store: &str, session: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-:@%+=,".contains(c);
    let store = if store.chars().all(safe) { store.to_string() } else { format!("'{}'", store.replace('\'', "'\\''")) };
    format!("lam run --store {store} -- {}", agent.resume(session).0)
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
