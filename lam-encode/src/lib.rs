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
//! Neural encoders (all-MiniLM-L6-v2 and bge-base on candle / ONNX Runtime)
//! are the subject of the encoder issue and plug in through the same trait.
#![warn(missing_docs)]

#[cfg(feature = "bert")]
mod bert;
mod hashing;
mod precomputed;

#[cfg(feature = "bert")]
pub use bert::{BertEncoder, Pooling};
pub use hashing::HashingEncoder;
pub use precomputed::{EmbeddingsWriter, PrecomputedEncoder, FORMAT};

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
    /// A model directory is incomplete or corrupt.
    #[error("{path}: {message}")]
    Model {
        /// The offending file.
        path: String,
        /// What is wrong.
        message: String,
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
