//! Options shared by several commands: the encoder, the view policy and its
//! budget, the store.

use anyhow::{Context, Result};
use clap::ValueEnum;
use lam_encode::{Backend, Cache, CachedEncoder, EncoderSpec};
use lam_eval::policy::{PolicyKind, PolicySettings};
use std::path::PathBuf;

/// `--encoder`: a [`Backend`] by its name (`lam_encode::BACKEND_NAMES`).
pub fn encoder(s: &str) -> Result<Backend, String> {
    s.parse().map_err(|_| format!("`{s}`: expected {}", lam_encode::BACKEND_NAMES))
}

/// The encoder behind its embedding cache.
pub type Cached = CachedEncoder<Box<dyn lam_core::Encoder>>;

#[derive(clap::Args, Clone, Debug)]
pub struct EncoderOpts {
    /// Encoder: bert (BERT-family sentence encoder on the CPU; default model all-MiniLM-L6-v2),
    /// hashing (model-free lexical hashing; not the papers' encoder), ort (the transformer in
    /// ONNX Runtime; build feature `ort`, scripts/install-onnx.sh), cuda, cuda-bf16, cuda-f16
    /// (the BERT forward on an NVIDIA GPU in fp32, bf16 or fp16 GEMMs; build feature `cuda`).
    /// Default: bert for the papers' commands (`lam compact`, `lam eval`, ...); hashing on the wire
    /// (`lam serve`, `lam run`, `lam replay`), where BERT forwarded the same bytes for far more time
    /// (README, "Which encoder").
    #[arg(long, value_parser = encoder)]
    pub encoder: Option<Backend>,
    /// Model directory (sentence-transformers layout); default $LAM_MODEL or $LAM_HOME/models/all-MiniLM-L6-v2.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Texts per encoder forward pass.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
}

/// The encoder of the papers' commands when `--encoder` is not given.
pub const PAPER_ENCODER: Backend = Backend::Bert;

/// The encoder of the proxy's commands (`lam serve`, `lam run`, `lam
/// replay`) when `--encoder` is not given: on the shared real transcripts
/// BERT forwarded the same bytes as hashing (the same removal, a bill 0.1 %
/// higher) and added 43 ms per request at the median and 3.6 s at p99 with
/// a cold embedding cache, against 3 ms and 14 ms (README, "Which encoder").
pub const WIRE_ENCODER: Backend = Backend::Hashing;

impl EncoderOpts {
    /// `--encoder`, else the papers' default ([`PAPER_ENCODER`]).
    pub fn backend(&self) -> Backend {
        self.encoder.unwrap_or(PAPER_ENCODER)
    }

    pub fn spec(&self) -> EncoderSpec {
        self.spec_or(PAPER_ENCODER)
    }

    /// The encoder, `default` when `--encoder` is not given.
    pub fn spec_or(&self, default: Backend) -> EncoderSpec {
        EncoderSpec { backend: self.encoder.unwrap_or(default), model: self.model.clone(), batch: self.batch as usize }
    }

    pub fn load(&self) -> Result<Box<dyn lam_core::Encoder>> {
        Ok(self.spec().load()?)
    }

    /// The encoder behind its embedding cache (`--cache FILE`, `--no-cache`),
    /// and the file to save the cache to.
    pub fn load_cached(&self, cache: &Option<String>, no_cache: bool) -> Result<(Cached, Option<PathBuf>)> {
        Ok(lam_operator::load_cached(&self.spec(), &cache_choice(cache, no_cache)?)?)
    }
}

/// The embedding cache `--cache FILE` and `--no-cache` choose (default
/// `$LAM_HOME/cache/MODEL.lamemb`): a file or a shared `postgres://` cache
/// ([`Cache::parse`]; no other URL is taken for a file).
pub fn cache_choice(cache: &Option<String>, no_cache: bool) -> Result<Cache> {
    // Parsed even when unused, so a bad value is always an error.
    let named = cache.as_deref().map(Cache::parse).transpose().context("--cache")?;
    Ok(match (no_cache, named) {
        (true, _) => Cache::Off,
        (false, Some(c)) => c,
        (false, None) => Cache::Default,
    })
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum PolicyArg {
    /// ARC: summary with citations, catalog page, exact recall.
    Arc,
    /// ARC over LAM residuals: near-duplicate chunks and repeated lines as stubs citing the archive.
    Lam,
    /// The last N turns (--window).
    Window,
    /// Every action, the last K observations (--mask).
    Masking,
    /// Everything verbatim (overflows).
    Full,
}

impl PolicyArg {
    pub fn kind(self) -> PolicyKind {
        match self {
            PolicyArg::Arc => PolicyKind::Arc,
            PolicyArg::Lam => PolicyKind::Lam,
            PolicyArg::Window => PolicyKind::Window,
            PolicyArg::Masking => PolicyKind::Masking,
            PolicyArg::Full => PolicyKind::Full,
        }
    }
}

/// The budget and policy parameters shared by `lam view` and `lam costmodel replay`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct PolicyOpts {
    /// Context window in cl100k_base tokens (L_ctx).
    #[arg(long, default_value_t = 16_000)]
    pub budget: usize,
    /// Tokens reserved for the model's answer (G_max); the view gets the rest (L = budget - completion).
    #[arg(long, default_value_t = 0)]
    pub completion: usize,
    /// Turns kept by the `window` policy.
    #[arg(long, default_value_t = 5)]
    pub window: usize,
    /// Observations kept by the `masking` policy.
    #[arg(long, default_value_t = 10)]
    pub mask: usize,
    /// Merge threshold of the `lam` policy.
    #[arg(long, default_value_t = lam_core::Threshold::DEFAULT.cosine(), value_parser = threshold)]
    pub threshold: f64,
}

impl PolicyOpts {
    pub fn settings(&self, encode_batch: usize) -> PolicySettings {
        PolicySettings { budget: self.budget, completion: self.completion, window: self.window, mask: self.mask, threshold: self.threshold, encode_batch }
    }

    /// The view limit L = budget - completion.
    pub fn limit(&self) -> Result<usize> {
        self.budget.checked_sub(self.completion).context("--completion exceeds --budget")
    }
}

/// A merge threshold t in (-1, 1].
/// `--recall`: `none`, `_recall`, `recall`, `lam recall` or a tool name (`lam_core::stub::Recall::parse`).
pub fn recall(s: &str) -> Result<lam_core::stub::Recall<'static>, String> {
    lam_core::stub::Recall::parse(s)
}

pub fn threshold(s: &str) -> Result<f64, String> {
    let t: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    lam_core::Threshold::from_cosine(t).map(|_| t).map_err(|e| e.to_string())
}

/// An error with its causes on one line, leaving out a cause that the
/// message before it already ends with (errors that print their source too).
pub fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for c in e.chain() {
        let c = c.to_string();
        if !out.ends_with(&c) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&c);
        }
    }
    out
}

/// A finite number > 0 (rates, sizes, batches of the cost models).
pub fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        Ok(_) => Err(format!("`{s}` must be a finite number greater than 0")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

/// A share in [0, 1].
pub fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        Ok(_) => Err(format!("`{s}` must be a share between 0 and 1")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

/// Open the store a `--store` argument names (a directory, `postgres://...`),
/// printing on stderr what opening found and did (torn tail cut, damage
/// skipped, quarantine copies).
pub fn open_store(spec: &str, access: arc_store::Access) -> Result<arc_store::AnyStore> {
    open_store_reported(spec, access).map(|(s, _)| s)
}

/// [`open_store`], also returning the recovery report.
pub fn open_store_reported(spec: &str, access: arc_store::Access) -> Result<(arc_store::AnyStore, arc_store::Recovery)> {
    let spec = arc_store::StoreSpec::parse(spec)?;
    let (store, rec) = arc_store::open_reported(&spec, access).with_context(|| format!("opening store {}", spec.display()))?;
    if !rec.is_clean() {
        eprintln!("{rec}");
    }
    Ok((store, rec))
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_leaves_out_repeated_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let read = lam_trajectory::ReadError::Io { path: "a.jsonl".into(), source: io };
        let e = anyhow::Error::new(read).context("reading inputs");
        assert_eq!(super::one_line(&e), "reading inputs: a.jsonl: gone");
    }
}
