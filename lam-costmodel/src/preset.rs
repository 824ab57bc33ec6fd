//! Devices and models, with the source of every number written next to it.
//!
//! Sizes are in bytes, bandwidth in bytes/s, compute in FLOP/s (decimal units:
//! 1 GB = 1e9 B, 1 TB/s = 1e12 B/s), matching how both papers quote them.

use crate::error::{Error, Result, positive};
use serde::{Deserialize, Serialize};

/// An accelerator as the roofline sees it: memory capacity, streaming bandwidth, dense compute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Preset name (`gb10`, `h200`, ...).
    pub name: String,
    /// Memory that holds weights and KV cache, bytes.
    pub memory_bytes: f64,
    /// Achievable streaming bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Dense 16-bit tensor throughput, FLOP/s.
    pub flops: f64,
    /// Where the numbers come from.
    pub source: String,
}

impl Device {
    /// Every field positive and finite, else [`Error::BadPreset`].
    pub fn validate(&self) -> Result<&Self> {
        positive("device", &self.name, "memory_bytes", self.memory_bytes)?;
        positive("device", &self.name, "bandwidth", self.bandwidth)?;
        positive("device", &self.name, "flops", self.flops)?;
        Ok(self)
    }

    /// Machine balance F/B in FLOP/byte (LAM Table 22: 380 on GB10).
    pub fn balance(&self) -> f64 {
        self.flops / self.bandwidth
    }

    /// A preset by name (case-insensitive), see [`DEVICE_NAMES`].
    pub fn preset(name: &str) -> Result<Device> {
        let n = name.to_ascii_lowercase();
        let d = |name: &str, mem: f64, bw: f64, f: f64, src: &str| Device { name: name.into(), memory_bytes: mem, bandwidth: bw, flops: f, source: src.into() };
        Ok(match n.as_str() {
            "gb10" => d(
                "gb10",
                128e9,
                237.4e9,
                90.3e12,
                "LAM Table 22: triad 237.4 GB/s measured (0.869 of 273 GB/s spec), 8192^3 fp16 GEMM 90.3 TFLOP/s; 128 GB unified LPDDR5x (NVIDIA DGX Spark spec; gives LAM M.2's 854K-token KV capacity for Llama-3.1-8B)",
            ),
            "a100-sxm4-40gb" | "a100" => d(
                "a100-sxm4-40gb",
                40.0 * 1024f64.powi(3),
                1365e9,
                288.5e12,
                "LAM E.2 / issue 6: 1,365 GB/s and 288.5 TFLOP/s measured (spec 1,555 GB/s, 312 TFLOP/s bf16); 40 GiB HBM2 (nvidia-smi 40960 MiB)",
            ),
            "h200" => d("h200", 141e9, 4.8e12, 989e12, "ARC HBM analysis: H200_141GB_SXM spec, 141.0 GB HBM3e, 4.8 TB/s, 989.0 TFLOP/s dense bf16"),
            "h200-measured" => d(
                "h200-measured",
                141e9,
                4.25e12,
                788e12,
                "issue 6: this project's H200 measured 4.1-4.4 TB/s device copy (midpoint 4.25 used) and 788 TFLOP/s bf16 GEMM; 141 GB spec",
            ),
            "mi300x" => d("mi300x", 192e9, 5.3e12, 1300e12, "ARC Table 13 text: AMD MI300X spec, 192 GB HBM3, 5.3 TB/s, 1300 TFLOP/s dense bf16"),
            _ => {
                return Err(Error::UnknownPreset { what: "device", name: name.into(), known: DEVICE_NAMES.join(", ") });
            }
        })
    }
}

/// Names accepted by [`Device::preset`].
pub const DEVICE_NAMES: [&str; 5] = ["gb10", "a100-sxm4-40gb", "h200", "h200-measured", "mi300x"];

/// A decoder-only transformer as the cost models see it, from its public `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Preset name.
    pub name: String,
    /// `num_hidden_layers`.
    pub layers: u32,
    /// `hidden_size`.
    pub hidden: u32,
    /// `num_attention_heads`.
    pub heads: u32,
    /// `num_key_value_heads`.
    pub kv_heads: u32,
    /// `head_dim` (or `hidden_size / num_attention_heads`).
    pub head_dim: u32,
    /// Parameter count (all weights, embeddings included, as LAM eq. 11's `P`).
    pub params: f64,
    /// Bytes per weight (2 for bf16).
    pub weight_bytes_per_param: f64,
    /// Bytes per cached K or V element (2 for bf16).
    pub kv_bytes_per_elem: f64,
    /// Where the numbers come from.
    pub source: String,
}

/// The fields of a Hugging Face `config.json` that fix a Llama/Qwen-style parameter count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchConfig {
    /// `num_hidden_layers`.
    pub layers: u64,
    /// `hidden_size`.
    pub hidden: u64,
    /// `intermediate_size` (SwiGLU: gate, up, down).
    pub intermediate: u64,
    /// `num_attention_heads`.
    pub heads: u64,
    /// `num_key_value_heads`.
    pub kv_heads: u64,
    /// `head_dim`.
    pub head_dim: u64,
    /// `vocab_size`.
    pub vocab: u64,
    /// `tie_word_embeddings`.
    pub tied: bool,
    /// Biases on q, k, v projections (Qwen2).
    pub qkv_bias: bool,
    /// RMSNorm on q and k per head (Qwen3).
    pub qk_norm: bool,
}

impl ArchConfig {
    /// Parameter count: per layer q, k, v, o, SwiGLU MLP and two RMSNorms; embeddings, LM head, final norm.
    pub fn params(&self) -> u64 {
        let (h, q, kv) = (self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let attn = h * q + 2 * h * kv + q * h + if self.qkv_bias { q + 2 * kv } else { 0 };
        let mlp = 3 * h * self.intermediate;
        let norms = 2 * h + if self.qk_norm { 2 * self.head_dim } else { 0 };
        let emb = self.vocab * h * if self.tied { 1 } else { 2 };
        self.layers * (attn + mlp + norms) + emb + h
    }
}

impl Model {
    /// A bf16 model from its config.
    pub fn from_config(name: &str, c: ArchConfig, source: &str) -> Model {
        Model {
            name: name.into(),
            layers: c.layers as u32,
            hidden: c.hidden as u32,
            heads: c.heads as u32,
            kv_heads: c.kv_heads as u32,
            head_dim: c.head_dim as u32,
            params: c.params() as f64,
            weight_bytes_per_param: 2.0,
            kv_bytes_per_elem: 2.0,
            source: source.into(),
        }
    }

    /// Every field positive, else [`Error::BadPreset`].
    pub fn validate(&self) -> Result<&Self> {
        for (field, v) in [("layers", self.layers), ("hidden", self.hidden), ("heads", self.heads), ("kv_heads", self.kv_heads), ("head_dim", self.head_dim)] {
            positive("model", &self.name, field, v as f64)?;
        }
        positive("model", &self.name, "params", self.params)?;
        positive("model", &self.name, "weight_bytes_per_param", self.weight_bytes_per_param)?;
        positive("model", &self.name, "kv_bytes_per_elem", self.kv_bytes_per_elem)?;
        Ok(self)
    }

    /// `M_w`: bytes streamed per decode step for the weights.
    pub fn weight_bytes(&self) -> f64 {
        self.params * self.weight_bytes_per_param
    }

    /// `kv_b`: KV-cache bytes per token, `2 * L * H_kv * d_h * b_kv` (K and V).
    pub fn kv_bytes_per_token(&self) -> f64 {
        2.0 * self.layers as f64 * self.kv_heads as f64 * self.head_dim as f64 * self.kv_bytes_per_elem
    }

    /// Width of attention, `heads * head_dim` (the `d` of LAM eq. 11's `2 L d T^2`;
    /// equal to `hidden` except where the config says otherwise, e.g. Qwen3-32B).
    pub fn attn_dim(&self) -> f64 {
        self.heads as f64 * self.head_dim as f64
    }

    /// A preset by name (case-insensitive), see [`MODEL_NAMES`].
    pub fn preset(name: &str) -> Result<Model> {
        let n = name.to_ascii_lowercase();
        let c = |layers, hidden, intermediate, heads, kv_heads, vocab, tied, qkv_bias, qk_norm| ArchConfig {
            layers,
            hidden,
            intermediate,
            heads,
            kv_heads,
            head_dim: 128,
            vocab,
            tied,
            qkv_bias,
            qk_norm,
        };
        Ok(match n.as_str() {
            "llama-3.1-8b" => Model::from_config(
                "llama-3.1-8b",
                c(32, 4096, 14336, 32, 8, 128256, false, false, false),
                "meta-llama/Llama-3.1-8B config.json (32 layers, hidden 4096, 32 heads, 8 KV heads, head_dim 128, intermediate 14336, vocab 128256, untied); 8,030,261,248 params, bf16",
            ),
            "qwen2.5-7b-instruct" | "qwen2.5-7b" => Model::from_config(
                "qwen2.5-7b-instruct",
                c(28, 3584, 18944, 28, 4, 152064, false, true, false),
                "Qwen/Qwen2.5-7B-Instruct config.json (28 layers, hidden 3584, 28 heads, 4 KV heads, head_dim 128, intermediate 18944, vocab 152064, qkv bias, untied); 7,615,616,512 params, bf16",
            ),
            "qwen3-8b" => Model::from_config(
                "qwen3-8b",
                c(36, 4096, 12288, 32, 8, 151936, false, false, true),
                "Qwen/Qwen3-8B config.json (36 layers, hidden 4096, 32 heads, 8 KV heads, head_dim 128, intermediate 12288, vocab 151936, q/k norm, untied); 8,190,735,360 params, bf16",
            ),
            "qwen3-32b" => Model::from_config(
                "qwen3-32b",
                c(64, 5120, 25600, 64, 8, 151936, false, false, true),
                "Qwen/Qwen3-32B config.json (64 layers, hidden 5120, 64 heads x 128 = 8192 attention width, 8 KV heads, intermediate 25600, vocab 151936, q/k norm, untied); 32,762,123,264 params, bf16",
            ),
            _ => return Err(Error::UnknownPreset { what: "model", name: name.into(), known: MODEL_NAMES.join(", ") }),
        })
    }
}

/// Names accepted by [`Model::preset`].
pub const MODEL_NAMES: [&str; 4] = ["llama-3.1-8b", "qwen2.5-7b-instruct", "qwen3-8b", "qwen3-32b"];

/// A validated model on a validated device, with memory reserved for activations.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// The device.
    pub device: Device,
    /// The model.
    pub model: Model,
    /// Bytes reserved besides weights and KV (activations, workspace): ARC's `scratch`.
    pub scratch_bytes: f64,
}

impl Deployment {
    /// Validate both presets and check that the weights, the scratch space and at
    /// least one token of KV cache fit the device memory.
    pub fn new(device: Device, model: Model, scratch_bytes: f64) -> Result<Deployment> {
        device.validate()?;
        model.validate()?;
        if !(scratch_bytes.is_finite() && scratch_bytes >= 0.0) {
            return Err(Error::BadInput(format!("scratch bytes must be finite and >= 0, got {scratch_bytes}")));
        }
        let need = model.weight_bytes() + scratch_bytes + model.kv_bytes_per_token();
        if need > device.memory_bytes {
            return Err(Error::DoesNotFit { model: model.name.clone(), device: device.name.clone(), need_bytes: need, have_bytes: device.memory_bytes });
        }
        Ok(Deployment { device, model, scratch_bytes })
    }

    /// Presets by name, no scratch.
    pub fn preset(device: &str, model: &str) -> Result<Deployment> {
        Deployment::new(Device::preset(device)?, Model::preset(model)?, 0.0)
    }

    /// Tokens of KV cache that fit beside the weights and scratch (LAM M.2: 854K
    /// for Llama-3.1-8B on GB10 at batch 1).
    pub fn kv_capacity_tokens(&self) -> f64 {
        ((self.device.memory_bytes - self.model.weight_bytes() - self.scratch_bytes) / self.model.kv_bytes_per_token()).floor()
    }
}
