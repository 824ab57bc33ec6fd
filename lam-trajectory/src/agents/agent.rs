//! Which agent: the agents lam knows by name, the programs they are, and
//! the API each speaks. Plain data, importing nothing else of the crate, so
//! [`crate::trajectory::Format`] can name an agent without the rooms, which
//! build on `trajectory`, pointing back at it.

use lam_core::wire::Api;

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
    // A new agent: a variant here, a row in each table below and in each
    // dispatch of `super` (mod.rs), and its room `super::NAME`.
}

impl Agent {
    /// Every agent.
    pub const ALL: [Agent; 4] = [Agent::ClaudeCode, Agent::Codex, Agent::OpenCode, Agent::GeminiCli];

    /// Its name: `claude-code`, `codex`, `opencode`, `gemini-cli`.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::OpenCode => "opencode",
            Agent::GeminiCli => "gemini-cli",
        }
    }

    /// The API it sends its conversation on (opencode: through its default
    /// provider, `anthropic`).
    pub fn api(self) -> Api {
        match self {
            Agent::ClaudeCode | Agent::OpenCode => Api::Messages,
            Agent::Codex => Api::Responses,
            Agent::GeminiCli => Api::Gemini,
        }
    }

    /// The program it is run as (`claude`, `codex`, `opencode`, `gemini`).
    pub fn program(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude",
            Agent::Codex => "codex",
            Agent::OpenCode => "opencode",
            Agent::GeminiCli => "gemini",
        }
    }

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
