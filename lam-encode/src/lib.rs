//! Encoders for L1, behind [`lam_core::Encoder`].
//!
//! - [`HashingEncoder`]: a model-free lexical encoder (signed feature hashing
//!   of word unigrams and bigrams). It needs no weights, so the pipeline runs
//!   anywhere; it is *not* the paper's neural encoder and its thresholds are
//!   its own (LAM B.4: thresholds are per encoder).
//! - [`PrecomputedEncoder`]: embeddings computed elsewhere, read from a
//!   `lam-embeddings/1` file (spec: `docs/embeddings-format.md`), keyed by the
//!   content of each chunk; [`EmbeddingsWriter`] writes such files.
//!
//! - [`BertFamily<F>`](BertFamily) (feature `bert`): one BERT-family encoder
//!   over a [`Forward`] pass, sharing its [`Front`] (configuration,
//!   tokenisation, chunking, pooling) and its `Encoder` implementation
//!   between backends: [`BertEncoder`] = `BertFamily<CpuForward>`,
//!   `OrtEncoder` = `BertFamily<OrtForward>`, `CudaEncoder` =
//!   `BertFamily<CudaForward>`.
//! - [`BertEncoder`] (feature `bert`, default): BERT-family sentence encoders
//!   (all-MiniLM-L6-v2, bge-base-en-v1.5, ...) on the CPU (own forward pass on
//!   the `gemm` crate, one sequence per thread, no padding), loaded
//!   from a sentence-transformers directory; [`default_model_dir`] is where
//!   lam looks for all-MiniLM-L6-v2.
//! - [`CachedEncoder`]: memoises any encoder by chunk content (and, opt-in,
//!   its chunkings), persisted between runs.
//! - [`EncoderSpec`]: builds any of them with its cache, one way for every
//!   command and binding.
//! - `OrtEncoder` (feature `ort`): the same tokenisation and pooling as
//!   [`BertEncoder`] with the transformer run by ONNX Runtime, loaded at run
//!   time (`ORT_DYLIB_PATH`); `scripts/install-onnx.sh` installs the library
//!   and builds the model's `onnx/model.onnx`.
//! - `CudaEncoder` (feature `cuda`): the same tokenisation, chunking and
//!   pooling with the transformer on an NVIDIA GPU (cuBLAS GEMMs and NVRTC
//!   kernels through cudarc, loaded at run time: builds without a toolkit;
//!   needs the driver, NVRTC and cuBLAS of CUDA 12 or 13 when it runs), in
//!   [`Precision::F32`] (TF32 off), `Bf16` or `F16` (fp32 accumulation).
//!
//! ```
//! use lam_core::Encoder;
//! use lam_encode::{Backend, Cache, EncoderSpec};
//!
//! // The model-free encoder needs no weights; `Backend::Bert` loads all-MiniLM-L6-v2.
//! let (mut enc, _file) = EncoderSpec::new(Backend::Hashing).load_cached(&Cache::Off)?;
//! let mut chunks = Vec::new();
//! enc.chunks(b"FAILED tests/test_stats.py::test_mean\n", &mut chunks)?;
//! let dim = enc.info().dim;
//! let mut v = vec![0.0f32; chunks.len() * dim];
//! enc.encode_batch(&[b"FAILED tests/test_stats.py::test_mean\n".as_slice()], &mut v)?;
//! assert!(lam_core::check_unit(&v).is_ok()); // a unit vector
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(feature = "bert")]
mod bert;
mod builder;
mod cache;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cuda")]
mod cuda_forward;
#[cfg(feature = "bert")]
mod forward;
mod hashing;
mod installed;
#[cfg(feature = "ort")]
mod ort;
mod precision;
mod precomputed;
mod shared;

#[cfg(feature = "ort")]
pub use self::ort::{ONNX_MODEL_PATH, ORT_INSTALL_HINT, OrtEncoder, OrtForward, ort_dylib_path};
#[cfg(feature = "bert")]
pub use bert::{BertEncoder, BertFamily, CpuForward, Forward, Front, Pooling};
pub use builder::{BACKEND_NAMES, Backend, Cache, Cached, EncoderSpec, default_cache_path, has_model};
pub use cache::{CacheReport, CachedEncoder};
#[cfg(feature = "cuda")]
pub use cuda::{BERT_KERNEL_SRC, BERT_KERNELS, CudaEncoder, CudaForward, DEFAULT_BATCH_TOKENS, cuda_libraries, nvrtc_compile_bert_ptx};
pub use hashing::HashingEncoder;
pub use installed::{MODEL_MODULES, MODEL_PACKAGE, MODEL_PACKAGE_VERSION, installed_model};
pub use precision::Precision;
pub use precomputed::{EmbeddingsWriter, FORMAT, PrecomputedEncoder};
pub use shared::MemEmbeddings;

/// Where `lam` looks for the encoder: `$LAM_MODEL`; else
/// `$LAM_HOME/models/all-MiniLM-L6-v2` (`$LAM_HOME` defaults to `~/.cache/lam`;
/// `scripts/install-model.sh` puts it there) when it holds a model; else the
/// [`MODEL_PACKAGE`] installed in the Python environment the running
/// executable was installed into ([`installed_model`]: how `pipx install
/// lam-ctx` and `uv tool install lam-ctx` bring the model, checksum-verified); else
/// `$LAM_HOME/models/all-MiniLM-L6-v2`, where loading says how to install it.
pub fn default_model_dir() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("LAM_MODEL") {
        return p.into();
    }
    let home = lam_home().join("models/all-MiniLM-L6-v2");
    if has_model(&home) {
        return home;
    }
    installed_model().unwrap_or(home)
}

/// `$LAM_HOME`, default `~/.cache/lam`: models and the embedding cache live here.
pub fn lam_home() -> std::path::PathBuf {
    std::env::var_os("LAM_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| ".".into())).join(".cache/lam"))
}

/// The command that installs the default model (printed when it is missing).
pub const INSTALL_HINT: &str = "bash scripts/install-model.sh";

/// Errors of this crate (wrapped into [`lam_core::Error::Encoder`] at the trait boundary).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An embeddings file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// An embeddings file is malformed.
    #[error("{path}:{line}: {message}")]
    Format {
        /// File.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A cache argument (`--cache`, Python `cache=`) that names no file (a URL).
    #[error("{spec}: {reason}")]
    CacheSpec {
        /// The argument, its password masked.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A model directory is incomplete or corrupt.
    #[error("{path}: {message}")]
    Model {
        /// The offending file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The encoder asked for is not compiled into this build.
    #[error(
        "the {backend} encoder is not compiled into this build: rebuild with the `{feature}` feature (lam-encode/{feature}; the `lam` program and the Python package have a `{feature}` feature too)"
    )]
    BackendNotCompiled {
        /// The encoder (`bert`, `ort`, `cuda`).
        backend: &'static str,
        /// The feature that compiles it in.
        feature: &'static str,
    },
    /// A chunk or observation has no precomputed embedding.
    #[error("no precomputed {what} for content {key} (model {model})")]
    Missing {
        /// "embedding" or "chunking".
        what: &'static str,
        /// Content key (xxh3-128 hex).
        key: String,
        /// Model id of the file.
        model: String,
    },
}
