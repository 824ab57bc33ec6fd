//! Which agent: the agents lam knows, as plain data importing nothing else
//! of the crate, so [`crate::trajectory::Format`] can name an agent without
//! the rooms, which build on `trajectory`, pointing back at it. Its name,
//! program and API are its room's ([`Agent::room`], in mod.rs).

/// The agents lam knows by name: what `lam run` launches and configures,
/// what `lam replay` writes requests as, and whose transcripts the readers
/// know. Everything else lam knows of one is in its room
/// ([`super::claude_code`], [`super::codex`], [`super::opencode`], [`super::gemini`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    /// Claude Code ([`super::claude_code`]).
    ClaudeCode,
    /// Codex CLI ([`super::codex`]).
    Codex,
    /// opencode ([`super::opencode`]).
    OpenCode,
    /// Gemini CLI ([`super::gemini`]).
    GeminiCli,
    // A new agent: a variant here and in `ALL` below, its room `super::NAME`
    // (a unit struct implementing `super::Room`), and its row in `Agent::room` (mod.rs).
}

impl Agent {
    /// Every agent.
    pub const ALL: [Agent; 4] = [Agent::ClaudeCode, Agent::Codex, Agent::OpenCode, Agent::GeminiCli];

    /// The agent a program is, by its file name (`claude`, `codex`, `opencode`, `gemini`).
    pub fn of_program(file_name: &str) -> Option<Self> {
        Agent::ALL.into_iter().find(|a| a.program() == file_name)
    }
}

impl std::str::FromStr for Agent {
    type Err = String;

    /// Its [`Agent::name`], or its program's name (`claude`).
    fn from_str(s: &str) -> Result<Self, String> {
        Agent::ALL.into_iter().find(|a| a.name() == s).or_else(|| Agent::of_program(s)).ok_or_else(|| {
            let names: Vec<&str> = Agent::ALL.iter().map(|a| a.name()).collect();
            format!("`{s}`: expected {}", names.join(", "))
        })
    }
}
