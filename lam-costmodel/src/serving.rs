//! LAM's serving model (section 2.6, E.1): prefill from FLOPs, decode from
//! bandwidth, the context-scaling share `phi` and its Amdahl ceiling.

use crate::error::{Error, Result};
use crate::preset::{Deployment, Model};
use serde::Serialize;

/// Fractions of peak the serving stack reaches: `mu_c` of the FLOP rate in
/// prefill, `mu_m` of the bandwidth in decode (LAM M.1's fairness rule).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Efficiency {
    /// `mu_c`, fraction of the device FLOP rate reached in prefill.
    pub compute: f64,
    /// `mu_m`, fraction of the device bandwidth reached in decode.
    pub memory: f64,
}

impl Efficiency {
    /// 1.0 and 1.0: the device numbers are already measured anchors (LAM Table 1
    /// takes `R_p`, `t_d` straight from Table 22; ARC uses spec peaks as they are).
    pub const MEASURED: Efficiency = Efficiency { compute: 1.0, memory: 1.0 };
    /// LAM M.1's near-peak allowance for LLM baselines: `mu_c = 0.70`, `mu_m = 1.00`.
    pub const LAM_BASELINE: Efficiency = Efficiency { compute: 0.70, memory: 1.00 };

    fn check(self) -> Result<Self> {
        for (n, v) in [("compute", self.compute), ("memory", self.memory)] {
            if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                return Err(Error::BadInput(format!("efficiency {n} must be in (0, 1], got {v}")));
            }
        }
        Ok(self)
    }
}

impl Default for Efficiency {
    fn default() -> Self {
        Efficiency::MEASURED
    }
}

/// One model serving requests on one device at a fixed decode batch.
#[derive(Debug, Clone)]
pub struct Serving {
    dep: Deployment,
    batch: f64,
    eff: Efficiency,
}

/// One turn split into what scales with the context `C` and what does not.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TurnCost {
    /// Prefill of the arrivals that does not depend on `C`: `2 P Delta + 2 L d Delta^2`.
    pub prefill_fixed_s: f64,
    /// Prefill attention of the arrivals against the existing context: `4 L d C Delta`.
    pub prefill_context_s: f64,
    /// Decode weight streaming, `G M_w / B` bytes.
    pub decode_weights_s: f64,
    /// Decode KV reads, `G C kv_b` bytes.
    pub decode_kv_s: f64,
}

impl TurnCost {
    /// Turn latency.
    pub fn total_s(&self) -> f64 {
        self.prefill_fixed_s + self.prefill_context_s + self.decode_weights_s + self.decode_kv_s
    }
    /// The part that scales with `C`.
    pub fn context_s(&self) -> f64 {
        self.prefill_context_s + self.decode_kv_s
    }
    /// `phi`, the context-scaling share of the turn.
    pub fn phi(&self) -> f64 {
        self.context_s() / self.total_s()
    }
    /// Amdahl ceiling on speedup from context reduction, `1 / (1 - phi)`.
    pub fn ceiling(&self) -> f64 {
        amdahl_ceiling(self.phi())
    }
}

/// `1 / (1 - phi)`; infinite at `phi = 1`.
pub fn amdahl_ceiling(phi: f64) -> f64 {
    1.0 / (1.0 - phi)
}

impl Serving {
    /// `batch` concurrent requests share each decode step's weight stream.
    pub fn new(dep: Deployment, batch: f64, eff: Efficiency) -> Result<Serving> {
        if !(batch.is_finite() && batch >= 1.0) {
            return Err(Error::BadInput(format!("batch must be >= 1, got {batch}")));
        }
        Ok(Serving { dep, batch, eff: eff.check()? })
    }

    /// The deployment.
    pub fn deployment(&self) -> &Deployment {
        &self.dep
    }

    /// The decode batch.
    pub fn batch(&self) -> f64 {
        self.batch
    }

    /// FLOPs to prefill `new` tokens after `cached` tokens already in the KV
    /// cache: `2 P new + 2 L d ((cached + new)^2 - cached^2)` (LAM eq. 11's
    /// prefill with `T^2` split at the cache boundary; causal attention).
    pub fn prefill_flops(&self, new: f64, cached: f64) -> f64 {
        prefill_flops(&self.dep.model, new, cached)
    }

    /// Seconds to prefill `new` tokens after `cached` ones (compute-bound; a
    /// request's prefill is not shared with the batch).
    pub fn prefill_s(&self, new: f64, cached: f64) -> f64 {
        self.prefill_flops(new, cached) / (self.eff.compute * self.dep.device.flops)
    }

    /// Seconds to rebuild the KV cache of a whole `context` (the re-prefill term).
    pub fn reprefill_s(&self, context: f64) -> f64 {
        self.prefill_s(context, 0.0)
    }

    /// `t_d(C)`: one request's share of one decode step at context `C`,
    /// `(M_w / B + C kv_b) / (mu_m BW)`.
    pub fn decode_step_s(&self, context: f64) -> f64 {
        let m = &self.dep.model;
        (m.weight_bytes() / self.batch + context * m.kv_bytes_per_token()) / (self.eff.memory * self.dep.device.bandwidth)
    }

    /// One turn: prefill `delta` arriving tokens against context `context`, then
    /// decode `decoded` tokens at that context (eq. 2's `Delta/R_p + G_a t_d(C)`).
    pub fn turn(&self, context: f64, delta: f64, decoded: f64) -> TurnCost {
        let m = &self.dep.model;
        let f = self.eff.compute * self.dep.device.flops;
        let bw = self.eff.memory * self.dep.device.bandwidth;
        let ld = m.layers as f64 * m.attn_dim();
        TurnCost {
            prefill_fixed_s: (2.0 * m.params * delta + 2.0 * ld * delta * delta) / f,
            prefill_context_s: 4.0 * ld * context * delta / f,
            decode_weights_s: decoded * m.weight_bytes() / self.batch / bw,
            decode_kv_s: decoded * context * m.kv_bytes_per_token() / bw,
        }
    }
}

/// FLOPs to prefill `new` tokens after `cached` ones:
/// `2 P new + 2 L d ((cached + new)^2 - cached^2)`.
pub fn prefill_flops(m: &Model, new: f64, cached: f64) -> f64 {
    let end = cached + new;
    2.0 * m.params * new + 2.0 * m.layers as f64 * m.attn_dim() * (end * end - cached * cached)
}

/// One row of the `phi` table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhiRow {
    /// Decode batch.
    pub batch: f64,
    /// Context length `C` in tokens.
    pub context: f64,
    /// Context-scaling share of a turn.
    pub phi: f64,
    /// Amdahl ceiling `1 / (1 - phi)`.
    pub ceiling: f64,
}

/// `phi` and its ceiling for every (batch, context) pair, batch-major (LAM Table 7).
pub fn phi_table(dep: &Deployment, eff: Efficiency, delta: f64, decoded: f64, batches: &[f64], contexts: &[f64]) -> Result<Vec<PhiRow>> {
    let mut rows = Vec::new();
    for &b in batches {
        let s = Serving::new(dep.clone(), b, eff)?;
        for &c in contexts {
            if !(c.is_finite() && c >= 0.0) {
                return Err(Error::BadInput(format!("context must be >= 0, got {c}")));
            }
            let t = s.turn(c, delta, decoded);
            rows.push(PhiRow { batch: b, context: c, phi: t.phi(), ceiling: t.ceiling() });
        }
    }
    Ok(rows)
}
