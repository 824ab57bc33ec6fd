//! ARC's roofline ("HBM Bandwidth Analysis"): each decoded token streams
//! `M_w / B + L_k kv_b` bytes; `B` is how many requests of the mean length fit
//! in HBM beside the weights; decode time is traffic over bandwidth, prefill
//! time is FLOPs over the FLOP rate.

use crate::error::{Error, Result};
use crate::preset::Deployment;
use crate::serving::{Efficiency, prefill_flops};
use serde::{Deserialize, Serialize};

/// One LLM call of a trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// `p_k`: prompt tokens.
    pub prompt_tokens: u64,
    /// `m_k`: generated tokens.
    pub decoded_tokens: u64,
    /// Leading prompt tokens whose KV is reused from an earlier call (prefix
    /// cache); 0 when every call is prefilled from scratch, as ARC's replay does.
    #[serde(default)]
    pub cached_tokens: u64,
}

impl Call {
    /// A call with no prefix reuse.
    pub fn new(prompt_tokens: u64, decoded_tokens: u64) -> Call {
        Call { prompt_tokens, decoded_tokens, cached_tokens: 0 }
    }
}

/// What `L_k` is while call `k` decodes. ARC writes `L_k` without saying
/// whether generated tokens count; `Prompt` is its formula read literally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvLength {
    /// `L_k = p_k` for every generated token.
    #[default]
    Prompt,
    /// Token `j` of the call reads `p_k + j` cached tokens (exact growth).
    PromptPlusGenerated,
}

/// How the decode batch `B` is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchRule {
    /// ARC: `B = max(1, floor((HBM - M_w - scratch) / (mean L * kv_b)))`, the
    /// mean taken over the trajectory's calls.
    FromCapacity,
    /// A fixed batch.
    Fixed(f64),
}

/// The roofline for one deployment.
#[derive(Debug, Clone)]
pub struct Roofline {
    dep: Deployment,
    /// `L_k` convention.
    pub kv_length: KvLength,
    /// Batch rule.
    pub batch: BatchRule,
    /// Efficiency factors (ARC uses peak: 1.0, 1.0).
    pub eff: Efficiency,
}

/// Cost of one call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CallCost {
    /// Decode HBM traffic, bytes.
    pub decode_bytes: f64,
    /// Decode time, s.
    pub decode_s: f64,
    /// Prefill FLOPs.
    pub prefill_flops: f64,
    /// Prefill time, s.
    pub prefill_s: f64,
}

/// Cost of a trajectory (sum over its calls).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrajectoryCost {
    /// Calls.
    pub calls: usize,
    /// Sum of prompt tokens.
    pub prompt_tokens: u64,
    /// Sum of generated tokens.
    pub decoded_tokens: u64,
    /// Mean prompt length `L-bar`.
    pub mean_prompt: f64,
    /// Decode batch used.
    pub batch: f64,
    /// `BW_decode`, bytes.
    pub decode_bytes: f64,
    /// `T_decode`, s.
    pub decode_s: f64,
    /// `T_prefill`, s.
    pub prefill_s: f64,
    /// `T_total = T_decode + T_prefill`, s.
    pub total_s: f64,
}

impl Roofline {
    /// ARC's settings: `L_k = p_k`, batch from capacity, peak rates.
    pub fn arc(dep: Deployment) -> Roofline {
        Roofline { dep, kv_length: KvLength::Prompt, batch: BatchRule::FromCapacity, eff: Efficiency::MEASURED }
    }

    /// The deployment.
    pub fn deployment(&self) -> &Deployment {
        &self.dep
    }

    /// `B` for a mean live length `mean_len` (ARC's formula, at least 1).
    pub fn batch_for(&self, mean_len: f64) -> f64 {
        match self.batch {
            BatchRule::Fixed(b) => b,
            BatchRule::FromCapacity => {
                let m = &self.dep.model;
                let free = self.dep.device.memory_bytes - m.weight_bytes() - self.dep.scratch_bytes;
                let per = mean_len.max(1.0) * m.kv_bytes_per_token();
                (free / per).floor().max(1.0)
            }
        }
    }

    /// Bytes streamed per decoded token at live length `l`, batch `b`: `M_w / B + L kv_b`.
    pub fn bytes_per_token(&self, l: f64, b: f64) -> f64 {
        self.dep.model.weight_bytes() / b + l * self.dep.model.kv_bytes_per_token()
    }

    /// One call at batch `b`.
    pub fn call(&self, c: &Call, b: f64) -> CallCost {
        let (p, m) = (c.prompt_tokens as f64, c.decoded_tokens as f64);
        let kv_tokens = match self.kv_length {
            KvLength::Prompt => m * p,
            KvLength::PromptPlusGenerated => m * p + m * (m - 1.0).max(0.0) / 2.0,
        };
        let decode_bytes = m * self.dep.model.weight_bytes() / b + kv_tokens * self.dep.model.kv_bytes_per_token();
        let cached = c.cached_tokens.min(c.prompt_tokens) as f64;
        let prefill_flops = prefill_flops(&self.dep.model, p - cached, cached);
        CallCost {
            decode_bytes,
            decode_s: decode_bytes / (self.eff.memory * self.dep.device.bandwidth),
            prefill_flops,
            prefill_s: prefill_flops / (self.eff.compute * self.dep.device.flops),
        }
    }

    /// Sum over a trajectory's calls, `B` from the trajectory's mean prompt length.
    pub fn trajectory(&self, calls: &[Call]) -> Result<TrajectoryCost> {
        if let BatchRule::Fixed(b) = self.batch
            && !(b.is_finite() && b >= 1.0)
        {
            return Err(Error::BadInput(format!("batch must be >= 1, got {b}")));
        }
        let prompt_tokens: u64 = calls.iter().map(|c| c.prompt_tokens).sum();
        let decoded_tokens: u64 = calls.iter().map(|c| c.decoded_tokens).sum();
        let mean_prompt = if calls.is_empty() { 0.0 } else { prompt_tokens as f64 / calls.len() as f64 };
        let batch = self.batch_for(mean_prompt);
        let mut t = TrajectoryCost {
            calls: calls.len(),
            prompt_tokens,
            decoded_tokens,
            mean_prompt,
            batch,
            decode_bytes: 0.0,
            decode_s: 0.0,
            prefill_s: 0.0,
            total_s: 0.0,
        };
        for c in calls {
            let k = self.call(c, batch);
            t.decode_bytes += k.decode_bytes;
            t.decode_s += k.decode_s;
            t.prefill_s += k.prefill_s;
        }
        t.total_s = t.decode_s + t.prefill_s;
        Ok(t)
    }
}
