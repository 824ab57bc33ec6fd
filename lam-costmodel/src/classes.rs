//! LAM M.1: what compacting `T` tokens costs each class of method.

use crate::error::{Error, Result};
use crate::preset::{Deployment, Device};
use crate::profile::CompactionRates;
use crate::serving::Efficiency;
use serde::Serialize;

/// Class 1, a decode-bound LLM summarizer (eq. 11), split into its three terms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Class1Cost {
    /// `(2 P T + 2 L d T^2) / (mu_c F)`.
    pub prefill_s: f64,
    /// `(G P b_w + 2 L H_kv d_h b_kv (G T + G^2/2)) / (mu_m B)`.
    pub decode_s: f64,
    /// `G tau`.
    pub overhead_s: f64,
}

impl Class1Cost {
    /// Sum.
    pub fn total_s(&self) -> f64 {
        self.prefill_s + self.decode_s + self.overhead_s
    }
}

/// Eq. 11: summarize `t` tokens at ratio `rho` (decoding `G = T / rho`), with
/// `tau` seconds of per-token overhead.
pub fn class1_summarize(dep: &Deployment, eff: Efficiency, t: f64, rho: f64, tau: f64) -> Result<Class1Cost> {
    if !(rho.is_finite() && rho > 0.0 && t >= 0.0 && tau >= 0.0) {
        return Err(Error::BadInput(format!("class 1 needs T >= 0, rho > 0, tau >= 0 (got {t}, {rho}, {tau})")));
    }
    let m = &dep.model;
    let g = t / rho;
    let ld = m.layers as f64 * m.attn_dim();
    Ok(Class1Cost {
        prefill_s: (2.0 * m.params * t + 2.0 * ld * t * t) / (eff.compute * dep.device.flops),
        decode_s: (g * m.weight_bytes() + m.kv_bytes_per_token() * (g * t + g * g / 2.0)) / (eff.memory * dep.device.bandwidth),
        overhead_s: g * tau,
    })
}

/// A prefill-only compressor network (class 2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compressor {
    /// Name.
    pub name: String,
    /// Parameters `P`.
    pub params: f64,
    /// Layers `L`.
    pub layers: f64,
    /// Width `d`.
    pub width: f64,
    /// Attention window `W` for a chunked encoder; `None` for a causal backbone over all of `T`.
    pub window: Option<f64>,
    /// Source.
    pub source: String,
}

impl Compressor {
    /// XLM-RoBERTa-large, LLMLingua-2's backbone in LAM's cost model.
    pub fn xlm_roberta_large() -> Compressor {
        Compressor {
            name: "xlm-roberta-large".into(),
            params: 560e6,
            layers: 24.0,
            width: 1024.0,
            window: Some(512.0),
            source: "FacebookAI/xlm-roberta-large: 24 layers, hidden 1024, 560M params (model card), max 512 positions".into(),
        }
    }
}

/// Class 2: one forward pass. Causal: `(2 P T + 2 L d T^2) / (mu_c F)`;
/// chunked encoder: `(2 P T + 4 L d T W) / (mu_c F)`.
pub fn class2_prefill_only(c: &Compressor, device: &Device, eff: Efficiency, t: f64) -> f64 {
    let attn = match c.window {
        None => 2.0 * c.layers * c.width * t * t,
        Some(w) => 4.0 * c.layers * c.width * t * w,
    };
    (2.0 * c.params * t + attn) / (eff.compute * device.flops)
}

/// Eq. 12's extra inputs besides the compaction rates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Class3Inputs {
    /// `N`: chunks.
    pub chunks: f64,
    /// `D`: embedding dimension.
    pub dim: f64,
    /// `n_cand`: verified candidate pairs.
    pub candidate_pairs: f64,
    /// `B_q`: quantizer bytes/s (LAM Table 22: 65.4 GB/s, 6 B per element moved).
    pub quantize_bytes_s: f64,
}

/// Class 3, LAM's own layers (eq. 12), term by term.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Class3Cost {
    /// `T / R_enc`.
    pub encode_s: f64,
    /// `6 N D / B_q`.
    pub quantize_s: f64,
    /// `2 N D / R_hash`.
    pub hash_s: f64,
    /// `n_cand / R_l2`.
    pub verify_s: f64,
    /// `beta T (1 + 1/CR) / R_cuSZp` (0 without a codec).
    pub codec_s: f64,
}

impl Class3Cost {
    /// Sum.
    pub fn total_s(&self) -> f64 {
        self.encode_s + self.quantize_s + self.hash_s + self.verify_s + self.codec_s
    }
}

/// Eq. 12 for `t` tokens.
pub fn class3_lam(rates: &CompactionRates, x: &Class3Inputs, t: f64) -> Result<Class3Cost> {
    rates.validate()?;
    if !(x.quantize_bytes_s.is_finite() && x.quantize_bytes_s > 0.0) {
        return Err(Error::BadInput(format!("quantizer rate must be positive, got {}", x.quantize_bytes_s)));
    }
    let nd = x.chunks * x.dim;
    Ok(Class3Cost {
        encode_s: t / rates.encode_tokens_s,
        quantize_s: 6.0 * nd / x.quantize_bytes_s,
        hash_s: 2.0 * nd / rates.hash_bytes_s,
        verify_s: x.candidate_pairs / rates.verify_pairs_s,
        codec_s: rates.codec_bytes_s.map_or(0.0, |z| rates.bytes_per_token * t * (1.0 + 1.0 / rates.codec_ratio) / z),
    })
}
