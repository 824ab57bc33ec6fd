//! With `--budget`: cuts. When the input a conversation forwards would
//! exceed the budget, the oldest tool results the model has answered, and
//! large tool-call inputs, are replaced by ARC citations (`lam_core::cite`:
//! `§id`, the call, size, head and tail, the recall handle) until it is at
//! or under the target; the newest `keep` results, kept tools' results
//! (recall results among them) and results not answered yet are never
//! cited. Citations of an earlier cut shrink to their line at the next.
//!
//! The rule is a fold over the conversation's items: after each item the
//! input so far (the preamble, every item as forwarded, each counted in its
//! identity form, without the client's `cache_control` marks) is checked
//! against the budget tightened by the calibration factor, and a cut made
//! there is frozen for good. The items and their counts are the
//! conversation's; the preamble's tokens, the budget and the factor are
//! terms that another request or the upstream's answers may change, so each
//! stretch of items is folded under the terms recorded for it in the store
//! ([`crate::budget::ledger`]), the first process to forward it having recorded
//! its own. So a restarted proxy or another replica makes the same cuts and
//! forwards the same bytes (tested: `tests/replicas.rs`). Between cuts the
//! prefix is byte-stable.
//!
//! **What is cited first.** An output whose lines appear again in a newer
//! output is *superseded*: a file read again after an edit, a test run
//! again, a listing repeated. The operator already says so: a newer
//! output's stubs name the older one's lines (its `refs`,
//! [`lam_operator::Session::refers`]: L0's line stubs and whole-output
//! repeats name the call, L1's dropped chunks their representative's
//! record), read by [`plan::Cuts::superseded`]. [`plan::CiteOrder::Superseded`] cites
//! superseded results first, then the others, oldest first each;
//! [`plan::CiteOrder::Oldest`] (the default) cites oldest first. Either is a
//! function of the citable list, so of the conversation's items. Measured
//! with `lam replay`'s `cited_then_used` (cited results whose distinctive
//! lines the agent later quoted, visible nowhere else; `docs/serve.md`) on
//! the shared real transcripts, the two orders take away the same to
//! within one result in 400 (`--budget 100000`: 67 of 404 cited oldest
//! first, 68 of 408 superseded first; 50,000 and 25,000: equal), because a
//! superseded result's group holds the newer output that names it (cited
//! with it, or forwarded whole): so oldest first stays the default.
//!
//! After a cut the operator forgets the cited records, so no later stub
//! names lines only a citation stands for; a result whose stubs name a
//! cited record is cited with it, or, when protected, forwarded whole.
//!
//! Cuts are timed by the provider's prompt cache. A cut changes the prompt
//! from its first changed item on, so the provider re-writes it there at
//! the write price where it would have read it at the read price.
//!
//! - **Cold.** A request that arrives more than the cache's TTL after the
//!   conversation's previous request finds the cache cold: the provider
//!   re-writes its whole prompt anyway, so a cut there costs nothing. At
//!   such a request the input is cut down to the target whenever it is
//!   above the target, not only above the budget (one cut, at the last item
//!   of the request; none at its earlier items).
//! - **Warm.** Otherwise a cut is made only when the input is over the
//!   budget, and only when it pays back its re-write: with `P` the input
//!   before the cut, `R` the tokens it removes, `s` the tokens before its
//!   first changed item, and `w`, `r` the write and read prices, it costs at
//!   most `(P - s - R) (w - r)` once (what stays after the cut point,
//!   written instead of read) and saves `R r` on this request and each
//!   later one, so it pays back after `k = (P - s - R)(w - r) / (R r)`
//!   requests. A warm cut is made when `k <= 40` ([`timing::PAYBACK_REQUESTS`]:
//!   about the requests a cut is read before the cache next goes cold or
//!   the session ends). With the default target (half the budget) a cut
//!   removes about as much as it keeps, so `k <= 11.5` at Anthropic's
//!   5-minute prices (`w` 1.25, `r` 0.1) and it is made; a cut that removes
//!   little next to what it re-writes (a narrow `--budget-target`, a prompt
//!   mostly uncitable, a cut that would only just reach the budget) waits:
//!   the input grows until a cut pays back, or the cache goes cold.
//!
//! The TTL ([`timing::cache_ttl`]): `--cache-ttl` when given (`none`: the cache
//! never goes cold); else the longest `cache_control.ttl` the request sets
//! (Anthropic: `"5m"` or `"1h"`); else the provider's documented default,
//! 5 minutes for both (Anthropic's default; OpenAI keeps cached prefixes
//! 5 to 10 minutes of inactivity, the lower bound: [`crate::bill::CacheTtl::OPENAI`]).
//! The prices are [`crate::bill::Bills::pricing`]'s, with Anthropic's
//! 1-hour writes at 2x. The time is the request's arrival, given by the
//! caller (`lam_serve::Arrival`: the HTTP layer's clock, `lam replay`'s
//! transcript timestamps); a request without one is never cold. Whether a
//! request was cold is recorded with its stretch ([`crate::budget::ledger`]), so a
//! replica or a restart makes the same cut.

//!
//! **The stage and its state.** One stage owns the budget's state:
//!
//! - `mod.rs` — this rule, and what the crate uses of the stage.
//! - `plan.rs` — [`plan::Cuts`], a conversation's budget state (every
//!   item's tokens as forwarded, what a cut may cite, what the cuts did),
//!   and the plan: [`plan::Cuts::plan`] in the [`CiteOrder`], whether a cut
//!   is worth one, the citations of earlier cuts that shrink.
//! - `cut.rs` — [`Stage`]: the fold the conversation runs (the ledger's
//!   terms per request, [`Stage::after_item`] after each item, the one
//!   entry point) and the cut itself (citations written into the items it
//!   changes, which the conversation freezes).
//! - `citable.rs` — what a cut may cite ([`Citable`]), built in one place
//!   ([`Citable::new`]) for admitted results and large tool-call inputs,
//!   and its citation's two forms.
//! - `timing.rs` — when a cut is made: the cold/warm rule, the TTL, the
//!   prices.
//! - `calibration.rs` — [`Calibration`], the factor learnt from the
//!   upstream's `usage`, held by the session and read as the next
//!   request's terms; the one path from the answers back to the forwarded
//!   bytes, through the ledger's record (`/lam/stats` only reports it).

mod calibration;
mod citable;
mod cut;
pub(crate) mod default;
pub(crate) mod ledger;
mod plan;
mod timing;

pub(crate) use calibration::{Calibration, factor};

/// What a request brings to the budget: the budget it is held to (the
/// header's, `--budget`, or the default for its model:
/// [`crate::config::BudgetSettings::resolve`], the one place it is
/// resolved; none: no budget), the calibration factor its conversation's
/// answers gave ([`Calibration`]), when it arrived (Unix ms) and the prompt
/// cache's TTL ([`cache_ttl`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    /// The budget, or none.
    pub budget: Option<lam_operator::Budget>,
    /// Upstream tokens per token of lam's (1 before any answer).
    pub factor: f64,
    /// When the request arrived (`None`: unknown, never cold).
    pub at: Option<i64>,
    /// How long the provider keeps a cached prompt.
    pub ttl: crate::bill::CacheTtl,
}

/// What the budget reads the run's ledger with: the store, this process's
/// books of it, and the order cuts cite in (the engine's, lent).
#[derive(Clone, Copy)]
pub(crate) struct Books<'e> {
    /// The store the ledger is recorded in.
    pub store: &'e crate::store::SharedStore,
    /// What this process has read of it.
    pub ledger: &'e ledger::Ledger,
    /// Which results a cut cites first.
    pub order: CiteOrder,
}

/// What the budget did for one request: its part of the request's report
/// ([`crate::report::Report`]).
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// What the cuts of this request did.
    pub cut: CutTotals,
    /// The input it forwards (tokens, lam's count) and whether that is over the budget.
    pub input_tokens: Option<u64>,
    /// See `input_tokens`.
    pub over_budget: bool,
    /// Where the count of this request's answer is recorded (the ledger's
    /// session and the request's point, [`ledger::point`]).
    pub usage_at: Option<(lam_core::SessionId, u128)>,
    /// The ledger or an original a cut needed could not be read: the request
    /// was folded under this process's terms, the result left whole.
    pub errors: u64,
    /// See `errors`.
    pub last_error: Option<String>,
}

impl Report {
    fn error(&mut self, why: String) {
        self.errors += 1;
        self.last_error = Some(why);
    }
}
pub use citable::CITED_LEAD;
pub(crate) use citable::{Admitted, Archived, Citable, Place};
pub(crate) use cut::{Reach, Stage};
pub use default::DefaultBudget;
pub use plan::CiteOrder;
pub(crate) use plan::CutTotals;
pub(crate) use timing::cache_ttl;
