//! The budget `lam run` and `lam replay` hold each conversation to when no
//! `--budget` is given (`--budget off` turns it off; `lam serve` has none
//! unless given `--budget auto` or a number): the smaller of
//!
//! - a **ceiling**, [`DefaultBudget::CEILING`] tokens, chosen by measurement
//!   on the shared real transcripts (docs/serve.md, "The default budget"),
//!   and
//! - a **level below the agent's own compaction threshold** for the
//!   request's model ([`level`]), so that the agent never compacts its
//!   context on its own, which it does lossily (docs/agents.md, "How the
//!   agents compact their own context").
//!
//! The model is each request's `model` field: only the proxy sees it, so the
//! budget is resolved per request ([`DefaultBudget::for_model`]); a client's
//! `x-lam-budget` header and `--budget N` take precedence.

use lam_operator::Budget;

/// The default budget: a ceiling, lowered to [`level`] for models whose
/// agent compacts below it; cutting to half, keeping the newest `keep`
/// results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultBudget {
    /// The ceiling in tokens (cl100k, tightened by the upstream's count
    /// like any budget).
    pub ceiling: u64,
    /// The newest tool results never cited (`--keep`; default [`Budget::KEEP`]).
    pub keep: Option<u32>,
}

/// Tokens kept free below the agent's compaction threshold: a fifth of it,
/// for what the agent adds to its count after the last forwarded input
/// (the answer's output tokens, up to 32,000 for the agents' models, and
/// the tool results it appends before the next request) and for the
/// tokenizer gap before the upstream's first `usage` calibrates the budget.
const HEADROOM_PERCENT: u64 = 20;

impl DefaultBudget {
    /// The ceiling chosen by measurement (docs/serve.md, "The default budget").
    pub const CEILING: u64 = 100_000;

    /// The default: [`DefaultBudget::CEILING`], keeping `keep`.
    pub fn new(keep: Option<u32>) -> Self {
        Self { ceiling: Self::CEILING, keep }
    }

    /// The budget in tokens for a request naming `model`: the ceiling, or
    /// the model's [`level`] when lower.
    pub fn tokens(&self, model: Option<&str>) -> u64 {
        let ceiling = self.ceiling.max(1);
        model.and_then(level).map_or(ceiling, |l| l.min(ceiling))
    }

    /// The budget for a request naming `model` (target half of it).
    pub fn for_model(&self, model: Option<&str>) -> Budget {
        let tokens = self.tokens(model);
        Budget { tokens, target: (tokens / 2).max(1), keep: self.keep.unwrap_or(Budget::KEEP) }
    }
}

/// The budget `lam replay` holds a request `body` to ([`crate::config::ServeConfig::budget_for`]
/// with its `model` member; a replayed request carries no header).
pub fn budget_of(cfg: &crate::config::ServeConfig, body: &[u8]) -> Option<Budget> {
    cfg.budget_for(None, crate::request::model_of(body).as_deref())
}

/// The threshold at which the agent compacts its context on its own for
/// `model`, in tokens: the lowest any agent's room gives
/// (`lam_trajectory::agents::compaction_threshold`, docs/agents.md); `None`
/// for a model no room names (a proxy alias, another vendor's model).
pub fn compaction_threshold(model: &str) -> Option<u64> {
    lam_trajectory::agents::compaction_threshold(model)
}

/// A level below the agent's compaction threshold for `model`: the
/// threshold less a fifth (`HEADROOM_PERCENT`), rounded down to a
/// thousand (133,000 of 167,000, 195,000 of 244,800); `None` for a model
/// the tables do not name.
pub fn level(model: &str) -> Option<u64> {
    compaction_threshold(model).map(|t| t * (100 - HEADROOM_PERCENT) / 100 / 1000 * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_200k_claude_model_is_held_below_claude_code_s_167k_threshold() {
        for m in ["claude-sonnet-4-5-20250929", "claude-opus-4-6", "claude-haiku-4-5", "claude-opus-4-20250514", "claude-3-7-sonnet-latest"] {
            assert_eq!(compaction_threshold(m), Some(167_000), "{m}");
            assert_eq!(level(m), Some(133_000), "{m}");
        }
        // Below the ceiling's default, the ceiling; above it, the level.
        assert_eq!(DefaultBudget::new(None).tokens(Some("claude-sonnet-4-6")), DefaultBudget::CEILING.min(133_000));
        let high = DefaultBudget { ceiling: 500_000, keep: None };
        assert_eq!(high.tokens(Some("claude-sonnet-4-6")), 133_000);
        let b = high.for_model(Some("claude-sonnet-4-6"));
        assert_eq!((b.tokens, b.target, b.keep), (133_000, 66_500, Budget::KEEP));
    }

    #[test]
    fn a_1m_model_compacts_near_967k_so_the_ceiling_decides() {
        for m in ["claude-opus-4-7", "claude-sonnet-5", "claude-sonnet-4-6[1m]"] {
            assert_eq!(compaction_threshold(m), Some(967_000), "{m}");
            assert_eq!(level(m), Some(773_000), "{m}");
        }
        assert_eq!(DefaultBudget::new(None).tokens(Some("claude-opus-4-7")), DefaultBudget::CEILING);
        assert_eq!(DefaultBudget { ceiling: 2_000_000, keep: None }.tokens(Some("claude-opus-4-7")), 773_000);
    }

    #[test]
    fn a_codex_model_is_held_below_90_percent_of_272k() {
        for m in ["gpt-5-codex", "gpt-5.5", "openai/gpt-5.1-codex-max"] {
            assert_eq!(compaction_threshold(m), Some(244_800), "{m}");
            assert_eq!(level(m), Some(195_000), "{m}");
        }
        assert_eq!(DefaultBudget { ceiling: 300_000, keep: Some(5) }.for_model(Some("gpt-5-codex")).keep, 5);
        assert_eq!(DefaultBudget { ceiling: 300_000, keep: None }.tokens(Some("gpt-5-codex")), 195_000);
    }

    #[test]
    fn an_unknown_model_gets_the_ceiling() {
        for m in [Some("my-proxy-alias"), Some("llama-3-70b"), Some("claude-mystery"), Some(""), None] {
            assert_eq!(m.and_then(level), None, "{m:?}");
            assert_eq!(DefaultBudget { ceiling: 900_000, keep: None }.tokens(m), 900_000, "{m:?}");
        }
    }
}
