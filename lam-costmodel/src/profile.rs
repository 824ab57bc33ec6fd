//! Compaction rates (eq. 2's `R_e`, `R_h`, `R_v`, `R_z`) and the device profile
//! JSON that `cargo xtask calibrate` writes.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The compaction-side rates of LAM eq. 2, in base units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompactionRates {
    /// `R_e`: encoder tokens/s.
    pub encode_tokens_s: f64,
    /// `R_h`: line-hashing bytes/s.
    pub hash_bytes_s: f64,
    /// `R_v`: exact-L2 verified candidate pairs/s.
    pub verify_pairs_s: f64,
    /// `R_z`: byte-codec bytes/s; `None` when there is no codec (its term is then 0).
    pub codec_bytes_s: Option<f64>,
    /// `CR`: codec compression ratio (eq. 12's `1 + 1/CR` bytes moved per input byte).
    pub codec_ratio: f64,
    /// `beta`: text bytes per token, converting eq. 2's tokens into the bytes `R_h`, `R_z` count.
    pub bytes_per_token: f64,
}

impl CompactionRates {
    /// LAM Table 1 / Table 22 on GB10: bge-base 71,708 tok/s, xxHash3 38.2 GB/s,
    /// 13.0 M pairs/s at D = 768, cuSZp 53.3 GB/s at ratio 5.18, beta 3.68 B/tok.
    pub const LAM_GB10: CompactionRates = CompactionRates {
        encode_tokens_s: 71_708.0,
        hash_bytes_s: 38.2e9,
        verify_pairs_s: 13.0e6,
        codec_bytes_s: Some(53.3e9),
        codec_ratio: 5.18,
        bytes_per_token: 3.68,
    };

    /// Every rate positive and finite.
    pub fn validate(&self) -> Result<&Self> {
        let mut fields = vec![
            ("encode_tokens_s", self.encode_tokens_s),
            ("hash_bytes_s", self.hash_bytes_s),
            ("verify_pairs_s", self.verify_pairs_s),
            ("codec_ratio", self.codec_ratio),
            ("bytes_per_token", self.bytes_per_token),
        ];
        if let Some(z) = self.codec_bytes_s {
            fields.push(("codec_bytes_s", z));
        }
        for (f, v) in fields {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::BadInput(format!("compaction rate {f} must be positive, got {v}")));
            }
        }
        Ok(self)
    }

    /// Compaction of one event (eq. 2's second sum): encode, hash and codec of
    /// `delta` arriving tokens, plus exact verification of `pairs` candidates.
    /// Eq. 2 writes `Delta/R_h` and `Delta/R_z`; with rates in bytes/s we charge
    /// `beta Delta` bytes for hashing and `beta Delta (1 + 1/CR)` for the codec (eq. 12).
    pub fn event_s(&self, delta: f64, pairs: f64) -> f64 {
        let bytes = self.bytes_per_token * delta;
        let codec = self.codec_bytes_s.map_or(0.0, |z| bytes * (1.0 + 1.0 / self.codec_ratio) / z);
        delta / self.encode_tokens_s + bytes / self.hash_bytes_s + codec + pairs / self.verify_pairs_s
    }
}

/// Format tag of [`DeviceProfile`] files.
pub const PROFILE_FORMAT: &str = "lam-costmodel-profile/1";

/// What `cargo xtask calibrate` measured on one machine with the project's own code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceProfile {
    /// Always [`PROFILE_FORMAT`].
    pub format: String,
    /// Host name (informational).
    pub host: String,
    /// Seconds since the Unix epoch when measured.
    pub created_unix: u64,
    /// Threads available to the measurement.
    pub threads: usize,
    /// `lam_hash::LineDedup::process` throughput over text bytes, GB/s (1e9 B/s).
    pub line_hash_gb_s: f64,
    /// `lam_lsh::sq_l2` exact verification, candidate pairs/s.
    pub verify_pairs_per_s: f64,
    /// Dimension the verification was measured at.
    pub verify_dim: u32,
    /// Encoder throughput, tokens/s.
    pub encoder_tokens_per_s: f64,
    /// Model id of the encoder measured.
    pub encoder: String,
    /// Byte-codec throughput, GB/s; `None` when no codec is built.
    pub codec_gb_s: Option<f64>,
    /// How each number was obtained, and what is missing.
    pub notes: Vec<String>,
}

impl DeviceProfile {
    /// Check the format tag and that every measured rate is positive.
    pub fn validate(&self) -> Result<&Self> {
        if self.format != PROFILE_FORMAT {
            return Err(Error::BadInput(format!("profile format `{}`, expected `{PROFILE_FORMAT}`", self.format)));
        }
        self.rates(CompactionRates::LAM_GB10.bytes_per_token).validate()?;
        Ok(self)
    }

    /// Read and validate a profile file.
    pub fn load(path: &Path) -> Result<DeviceProfile> {
        let err = |m: String| Error::Profile { path: path.display().to_string(), message: m };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let p: DeviceProfile = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
        p.validate().map_err(|e| err(e.to_string()))?;
        Ok(p)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a profile serialises");
        s.push('\n');
        s
    }

    /// The rates eq. 2 uses, with `bytes_per_token` (beta) from the caller
    /// (LAM Table 22 measures 3.68 B/tok on its corpus). The codec ratio keeps
    /// the paper's 5.18 when a codec rate is present.
    pub fn rates(&self, bytes_per_token: f64) -> CompactionRates {
        CompactionRates {
            encode_tokens_s: self.encoder_tokens_per_s,
            hash_bytes_s: self.line_hash_gb_s * 1e9,
            verify_pairs_s: self.verify_pairs_per_s,
            codec_bytes_s: self.codec_gb_s.map(|g| g * 1e9),
            codec_ratio: CompactionRates::LAM_GB10.codec_ratio,
            bytes_per_token,
        }
    }
}
