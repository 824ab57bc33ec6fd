//! Shared vocabulary of the lam workspace.
//!
//! `lam-core` holds plain data types (records, chunks, decisions, stubs), the
//! five traits every layer implements ([`Encoder`], [`CandidateIndex`],
//! [`ByteCodec`], [`ObsStore`], [`ViewPolicy`]), the `t <-> delta` relation and
//! the deletion-set digest. It names no device, no model runtime and no file
//! format: those live in the crates that implement the traits.
//!
//! ```
//! use lam_core::{DeletionDigest, ObsId, Stub, Threshold};
//!
//! // The merge threshold t and the distance bound delta = sqrt(2 - 2t).
//! let t = Threshold::from_cosine(0.95)?;
//! assert!((t.delta() - 0.1f64.sqrt()).abs() < 1e-12);
//! // Content ids (`§id`) and stubs, written and parsed in one place.
//! let id = &ObsId::of(b"cat a.py", b"print(1)\n").hex()[..8];
//! let line = format!("[lam: lines 2-4 of `cat src/app.py`; _recall §{id}]");
//! assert_eq!(Stub::parse(&line)?.to_string(), line);
//! // The deletion-set digest of a run (docs/digest.md).
//! let mut d = DeletionDigest::new();
//! d.push(0, 7);
//! assert_eq!(d.hex16().len(), 16);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod action;
pub mod chunk;
pub mod cite;
mod counter;
pub mod digest;
pub mod embedding;
mod error;
pub mod expand;
pub mod fsdir;
pub mod id;
pub mod newlines;
pub mod redact;
pub mod stub;
pub mod threshold;
pub mod traits;
mod types;
pub mod wire;

#[cfg(any(test, feature = "testsuite"))]
pub mod testsuite;

/// Where the shared evaluation corpus of real trajectories lives: `$LAM_CORPUS`,
/// else `shared/corpus` beside the checkout (as CI lays it out). Tests,
/// benchmarks and xtask find it here, one way.
pub fn corpus_dir() -> std::path::PathBuf {
    std::env::var_os("LAM_CORPUS").map(std::path::PathBuf::from).unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"))
}

pub use chunk::chunk_spans;
pub use counter::SimpleCounter;
pub use digest::{ChunkKey, DeletionDigest};
pub use embedding::{check_unit, lcg_uniform, normalize_in_place, random_unit_vectors};
pub use error::{BoxError, Error, VectorFault};
pub use id::{IdBook, IdScope, MIN_SHOWN, ObsId, StoreIds, is_shown_form};
pub use stub::Stub;
pub use threshold::Threshold;
pub use traits::{
    ByteCodec, CandidateIndex, EmbeddingStore, Encoder, EncoderInfo, ObsMeta, ObsStore, PREVIEW_BYTES, Rendered, Shape, TokenCounter, Turn, ViewPolicy,
    previews,
};
pub use types::{Chunk, Decision, Record, SessionId, file_stem};
