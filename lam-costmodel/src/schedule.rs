//! When compaction runs (LAM E.2, M.3): `admit` tests before prefill,
//! `delete-in-place` prefills then removes (voiding the cached suffix),
//! `defer-to-wall` compacts only at the budget wall. Context grows per arrival,
//! `C <- C + Delta (1 - r)` (Table 27, right column); a hard budget evicts.

use crate::error::{Error, Result};
use crate::profile::CompactionRates;
use crate::serving::Serving;
use serde::Serialize;

/// One turn's arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Arrival {
    /// `Delta`: tokens arriving this turn (observation and agent message).
    pub tokens: u64,
    /// Tokens of the arrival the compactor removes (`r Delta`); at most `tokens`.
    pub removed: u64,
    /// `G_a`: tokens the agent decodes this turn.
    pub decoded: u64,
    /// `|C|`: candidate pairs verified for this arrival.
    pub candidate_pairs: u64,
}

impl Arrival {
    /// `n` identical turns of `delta` tokens with removal rate `r` (rounded to tokens).
    pub fn uniform(n: usize, delta: u64, r: f64, decoded: u64, pairs: u64) -> Vec<Arrival> {
        let removed = (delta as f64 * r.clamp(0.0, 1.0)).round() as u64;
        vec![Arrival { tokens: delta, removed, decoded, candidate_pairs: pairs }; n]
    }
}

/// When the compactor's deletions take effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Test each arrival before prefill; only the residual is prefilled; the cache prefix is never touched.
    Admit,
    /// Prefill the whole arrival, then delete its duplicates from the context,
    /// voiding the cache from the deletion on (re-prefill).
    DeleteInPlace,
    /// Prefill everything; at the budget wall delete every pending duplicate at
    /// once and re-prefill.
    DeferToWall,
}

impl Schedule {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Admit => "admit",
            Schedule::DeleteInPlace => "delete-in-place",
            Schedule::DeferToWall => "defer-to-wall",
        }
    }
    /// All three.
    pub const ALL: [Schedule; 3] = [Schedule::Admit, Schedule::DeleteInPlace, Schedule::DeferToWall];
}

/// What bounds the context.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// Growth regime: nothing is evicted; the run stops at the first turn whose
    /// context exceeds the KV capacity of the device at batch 1.
    Growth,
    /// Hard budget: after each arrival the oldest tokens are evicted down to
    /// `tokens`. Evicting the prefix shifts every later position, so with
    /// `reprefill_on_evict` the retained context is re-prefilled (LAM does not
    /// say whether it charges this; it is off by default).
    HardBudget {
        /// `B_ctx`, tokens.
        tokens: f64,
        /// Charge re-prefill of the retained context after an eviction.
        reprefill_on_evict: bool,
    },
}

/// Parameters of a schedule run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScheduleConfig {
    /// Which schedule.
    pub schedule: Schedule,
    /// Growth or hard budget.
    pub limit: Limit,
    /// Context at which `defer-to-wall` compacts; defaults to the hard budget,
    /// or in the growth regime to the KV capacity (compact only when forced).
    pub wall: Option<f64>,
    /// Share of the context a deletion invalidates, in `[0, 1]`. LAM charges the
    /// whole context (1.0); it measures 0.94 on average (E.2).
    pub invalidated_share: f64,
    /// Context already present before the first turn.
    pub initial_context: f64,
}

impl ScheduleConfig {
    /// `schedule` under `limit`, whole-context invalidation, empty start.
    pub fn new(schedule: Schedule, limit: Limit) -> Self {
        ScheduleConfig { schedule, limit, wall: None, invalidated_share: 1.0, initial_context: 0.0 }
    }
}

/// Modeled cost of one run (eq. 2 without overlap).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScheduleCost {
    /// Which schedule.
    pub schedule: Schedule,
    /// Turns served (fewer than offered when the growth regime ran out of KV capacity).
    pub turns: usize,
    /// In the growth regime, the 1-based turn whose context no longer fit.
    pub exhausted_at_turn: Option<usize>,
    /// Prefill of arrivals.
    pub prefill_s: f64,
    /// Decode.
    pub decode_s: f64,
    /// Compaction (encode, hash, codec, verify).
    pub compaction_s: f64,
    /// Re-prefill after deletions (and evictions when charged).
    pub reprefill_s: f64,
    /// Sum of the four.
    pub total_s: f64,
    /// Deletion events that voided part of the cache.
    pub reprefill_events: u64,
    /// Tokens evicted under a hard budget.
    pub evicted_tokens: f64,
    /// Mean context at decode time over served turns.
    pub mean_context: f64,
    /// Context after the last served turn.
    pub final_context: f64,
}

/// Run `arrivals` through one schedule: serving from `serving`, compaction from `rates`.
pub fn run_schedule(serving: &Serving, rates: &CompactionRates, arrivals: &[Arrival], cfg: &ScheduleConfig) -> Result<ScheduleCost> {
    rates.validate()?;
    let share = cfg.invalidated_share;
    if !(0.0..=1.0).contains(&share) {
        return Err(Error::BadInput(format!("invalidated share must be in [0, 1], got {share}")));
    }
    if !(cfg.initial_context.is_finite() && cfg.initial_context >= 0.0) {
        return Err(Error::BadInput(format!("initial context must be >= 0, got {}", cfg.initial_context)));
    }
    let capacity = serving.deployment().kv_capacity_tokens();
    let (budget, evict_reprefill) = match cfg.limit {
        Limit::Growth => (f64::INFINITY, false),
        Limit::HardBudget { tokens, reprefill_on_evict } => {
            if !(tokens.is_finite() && tokens > 0.0) {
                return Err(Error::BadInput(format!("hard budget must be > 0 tokens, got {tokens}")));
            }
            (tokens, reprefill_on_evict)
        }
    };
    let wall = match (cfg.schedule, cfg.wall, cfg.limit) {
        (Schedule::DeferToWall, Some(w), _) => w,
        (Schedule::DeferToWall, None, Limit::HardBudget { tokens, .. }) => tokens,
        (Schedule::DeferToWall, None, Limit::Growth) => capacity,
        _ => f64::INFINITY,
    };
    let mut c = cfg.initial_context;
    let mut pending = 0.0; // duplicates prefilled but not yet deleted (defer-to-wall)
    let mut out = ScheduleCost {
        schedule: cfg.schedule,
        turns: 0,
        exhausted_at_turn: None,
        prefill_s: 0.0,
        decode_s: 0.0,
        compaction_s: 0.0,
        reprefill_s: 0.0,
        total_s: 0.0,
        reprefill_events: 0,
        evicted_tokens: 0.0,
        mean_context: 0.0,
        final_context: c,
    };
    let mut ctx_sum = 0.0;
    // Re-prefill of the voided suffix against the still-valid prefix.
    let reprefill = |ctx: f64| serving.prefill_s(share * ctx, (1.0 - share) * ctx);
    for (i, a) in arrivals.iter().enumerate() {
        if a.removed > a.tokens {
            return Err(Error::BadInput(format!("turn {}: removed {} > arriving {}", i + 1, a.removed, a.tokens)));
        }
        let (delta, kept) = (a.tokens as f64, (a.tokens - a.removed) as f64);
        // Compaction work is the same for every schedule: each arrival is tested once.
        out.compaction_s += rates.event_s(delta, a.candidate_pairs as f64);
        match cfg.schedule {
            Schedule::Admit => {
                out.prefill_s += serving.prefill_s(kept, c);
                c += kept;
            }
            Schedule::DeleteInPlace => {
                out.prefill_s += serving.prefill_s(delta, c);
                c += kept;
                if a.removed > 0 {
                    out.reprefill_s += reprefill(c);
                    out.reprefill_events += 1;
                }
            }
            Schedule::DeferToWall => {
                out.prefill_s += serving.prefill_s(delta, c);
                c += delta;
                pending += delta - kept;
                if c > wall && pending > 0.0 {
                    c -= pending;
                    pending = 0.0;
                    out.reprefill_s += reprefill(c);
                    out.reprefill_events += 1;
                }
            }
        }
        if c > budget {
            let ev = c - budget;
            out.evicted_tokens += ev;
            // Evicted tokens take their share of not-yet-deleted duplicates with them.
            pending = (pending - ev).max(0.0);
            c = budget;
            if evict_reprefill {
                out.reprefill_s += serving.reprefill_s(c);
            }
        }
        if c > capacity {
            out.exhausted_at_turn = Some(i + 1);
            break;
        }
        out.decode_s += a.decoded as f64 * serving.decode_step_s(c);
        ctx_sum += c;
        out.turns += 1;
    }
    out.final_context = c;
    out.mean_context = if out.turns > 0 { ctx_sum / out.turns as f64 } else { 0.0 };
    out.total_s = out.prefill_s + out.decode_s + out.compaction_s + out.reprefill_s;
    Ok(out)
}

/// Turns until the context passes `capacity` in the growth regime: the first
/// `n` with `initial + n Delta (1 - r) > capacity` (LAM E.1: 1,341 without compaction).
pub fn turns_to_capacity(capacity: f64, initial: f64, delta: f64, r: f64) -> f64 {
    ((capacity - initial) / (delta * (1.0 - r))).floor() + 1.0
}

/// The snapshot accounting LAM Table 27 rejects: `C <- C (1 - r)` every event
/// converges to `C* = Delta / r` (2.8K at Delta = 637, r = 0.2247).
pub fn snapshot_steady_state(delta: f64, r: f64) -> f64 {
    delta / r
}
