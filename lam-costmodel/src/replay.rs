//! Replay of recorded trajectories under several context policies through the
//! roofline: each policy gives, per trajectory, the prompt length it would have
//! built for every call and the tokens the model decoded there.

use crate::error::{Error, Result};
use crate::roofline::{Call, Roofline};
use serde::Serialize;

/// One policy's calls, grouped by trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCalls {
    /// Policy name (`arc`, `window`, `masking`, `lam`, ...).
    pub policy: String,
    /// Per trajectory, its calls in order.
    pub trajectories: Vec<Vec<Call>>,
}

/// One policy's modeled totals and its ratios to the baseline policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayRow {
    /// Policy name.
    pub policy: String,
    /// Trajectories replayed.
    pub trajectories: usize,
    /// LLM calls.
    pub calls: usize,
    /// Sum of prompt tokens.
    pub prompt_tokens: u64,
    /// Sum of decoded tokens.
    pub decoded_tokens: u64,
    /// Mean decode batch over trajectories.
    pub mean_batch: f64,
    /// Decode HBM traffic, bytes.
    pub decode_bytes: f64,
    /// Decode time, s.
    pub decode_s: f64,
    /// Prefill time, s.
    pub prefill_s: f64,
    /// Total time, s.
    pub total_s: f64,
    /// `total_s / baseline total_s`.
    pub time_ratio: f64,
    /// `decode_bytes / baseline decode_bytes`.
    pub bytes_ratio: f64,
    /// Baseline time over this policy's time (speedup, ARC's column).
    pub speedup: f64,
    /// `100 (1 - bytes_ratio)`: ARC's "Sav." column.
    pub savings_pct: f64,
}

/// Replay every policy; ratios are against `policies[baseline]`. Each
/// trajectory gets its own batch `B` from its own mean prompt length.
pub fn replay(roofline: &Roofline, policies: &[PolicyCalls], baseline: usize) -> Result<Vec<ReplayRow>> {
    if baseline >= policies.len() {
        return Err(Error::BadInput(format!("baseline index {baseline} out of {} policies", policies.len())));
    }
    let mut rows = Vec::with_capacity(policies.len());
    for p in policies {
        let mut r = ReplayRow {
            policy: p.policy.clone(),
            trajectories: p.trajectories.len(),
            calls: 0,
            prompt_tokens: 0,
            decoded_tokens: 0,
            mean_batch: 0.0,
            decode_bytes: 0.0,
            decode_s: 0.0,
            prefill_s: 0.0,
            total_s: 0.0,
            time_ratio: 1.0,
            bytes_ratio: 1.0,
            speedup: 1.0,
            savings_pct: 0.0,
        };
        for t in &p.trajectories {
            let c = roofline.trajectory(t)?;
            r.calls += c.calls;
            r.prompt_tokens += c.prompt_tokens;
            r.decoded_tokens += c.decoded_tokens;
            r.mean_batch += c.batch;
            r.decode_bytes += c.decode_bytes;
            r.decode_s += c.decode_s;
            r.prefill_s += c.prefill_s;
            r.total_s += c.total_s;
        }
        if r.trajectories > 0 {
            r.mean_batch /= r.trajectories as f64;
        }
        rows.push(r);
    }
    let (bt, bb) = (rows[baseline].total_s, rows[baseline].decode_bytes);
    for r in &mut rows {
        r.time_ratio = r.total_s / bt;
        r.bytes_ratio = r.decode_bytes / bb;
        r.speedup = bt / r.total_s;
        r.savings_pct = 100.0 * (1.0 - r.bytes_ratio);
    }
    Ok(rows)
}
