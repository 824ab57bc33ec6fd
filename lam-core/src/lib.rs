//! Shared vocabulary of the lam workspace.
//!
//! `lam-core` holds plain data types (records, chunks, decisions, stubs), the
//! five traits every layer implements ([`Encoder`], [`CandidateIndex`],
//! [`ByteCodec`], [`ObsStore`], [`ViewPolicy`]), the `t <-> delta` relation and
//! the deletion-set digest. It names no device, no model runtime and no file
//! format: those live in the crates that implement the traits.
#![warn(missing_docs)]

pub mod chunk;
mod counter;
pub mod digest;
pub mod embedding;
mod error;
pub mod id;
pub mod stub;
pub mod threshold;
pub mod traits;
mod types;

#[cfg(any(test, feature = "testsuite"))]
pub mod testsuite;

pub use chunk::chunk_spans;
pub use digest::{DeletionDigest, ChunkKey};
pub use embedding::{check_unit, normalize_in_place};
pub use error::{BoxError, Error, VectorFault};
pub use id::{IdBook, ObsId};
pub use threshold::Threshold;
pub use counter::SimpleCounter;
pub use stub::Stub;
pub use traits::{previews, ByteCodec, CandidateIndex, Encoder, EncoderInfo, ObsMeta, ObsStore, Rendered, Shape, TokenCounter, Turn, ViewPolicy, PREVIEW_BYTES};
pub use types::{Chunk, Decision, Record, SessionId, file_stem};
