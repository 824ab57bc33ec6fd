//! What admitting one record produced.

use lam_core::{Decision, Stub};
use lam_hash::L0Stats;
use std::ops::Range;

/// The L1 outcome of one chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkOutcome {
    /// Session chunk index (arrival order): the id the deletion digest uses.
    pub index: u32,
    /// Position within its record.
    pub ordinal: u32,
    /// Byte range in the text that was chunked (the observation in the
    /// default order, L0's residual in `l0-l1`).
    pub range: Range<usize>,
    /// Retained or dropped.
    pub decision: Decision,
}

/// Token counts of one admission, by the session's [`lam_core::TokenCounter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    /// Tokens of the original observation.
    pub input: usize,
    /// Tokens of the residual, stubs included.
    pub output: usize,
}

/// What admitting one record produced: everything a caller needs without
/// recomputing it.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Record index.
    pub record: u32,
    /// Visible id of the archived original (`§id` without the `§`).
    pub id: String,
    /// The residual observation: what the model should see.
    pub residual: Vec<u8>,
    /// L1 outcomes of this record's chunks, in order.
    pub chunks: Vec<ChunkOutcome>,
    /// Every stub written for this record: in residual order (default
    /// order; the first carries the recall), or L0's then L1's (`l0-l1`).
    pub stubs: Vec<Stub>,
    /// L0 counters.
    pub l0: L0Stats,
    /// The original bytes the first layer kept, without its stubs (attribution
    /// of removal to the layers); empty unless `Config::diagnostics`.
    pub first_layer_plain: Vec<u8>,
    /// Unit embeddings of every chunk in [`Admission::chunks`], in order
    /// (`dim` values each; [`Admission::retained`] picks the kept ones);
    /// empty unless `Config::diagnostics`.
    pub vectors: Vec<f32>,
    /// Token counts, when the session counts them (`Config::with_counter`).
    pub tokens: Option<Tokens>,
    /// Nanoseconds spent encoding (0 when embeddings were given).
    pub encode_ns: u64,
    /// Nanoseconds spent deciding, hashing and rendering (the admission test;
    /// neither encoding nor token counting).
    pub admit_ns: u64,
}

impl Admission {
    /// The stub lines, as they appear in the residual.
    pub fn stub_lines(&self) -> Vec<String> {
        self.stubs.iter().map(ToString::to_string).collect()
    }

    /// The residual without its stub lines (for gross removal accounting).
    pub fn residual_without_stubs(&self) -> Vec<u8> {
        if let [lam_core::Stub::Delta(d)] = &self.stubs[..] {
            return crate::delta::strip(&self.residual, d);
        }
        crate::segments::strip_lines(&self.residual, &self.stub_lines())
    }

    /// Embeddings of the retained chunks, in chunk order (what L2 stores);
    /// none without `Config::diagnostics`.
    pub fn retained(&self) -> impl Iterator<Item = &[f32]> {
        let dim = self.vectors.len() / self.chunks.len().max(1);
        let chunks = if dim == 0 { &[][..] } else { &self.chunks[..] };
        chunks.iter().zip(self.vectors.chunks_exact(dim.max(1))).filter(|(c, _)| !c.decision.is_dropped()).map(|(_, v)| v)
    }

    /// Number of chunks L1 dropped.
    pub fn dropped(&self) -> usize {
        self.chunks.iter().filter(|c| c.decision.is_dropped()).count()
    }
}
