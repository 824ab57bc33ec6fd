//! Greedy first-occurrence deduplication (LAM Algorithms 1 and 2, C.4, C.5).

use crate::sq_l2;
use lam_core::{CandidateIndex, Decision, Error, Threshold, check_unit};

/// Counters of one session's L1 run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct L1Stats {
    /// Chunks decided.
    pub chunks: u64,
    /// Chunks dropped.
    pub dropped: u64,
    /// Candidate pairs verified with exact L2.
    pub verified_pairs: u64,
    /// Largest substitution distance used (`delta_hat`), 0 when none.
    pub delta_hat: f64,
    /// Smallest decision margin `|cos - t|` over every verified pair nearest
    /// to its chunk (LAM Appendix D); `None` before any pair was verified.
    pub min_margin: Option<f64>,
}

/// One session's retained set, candidate index and measured bound.
///
/// Ids are the session's chunk arrival indices and must be offered in
/// increasing order; decisions are never revised.
#[derive(Debug, Clone)]
pub struct Greedy<I> {
    dim: usize,
    threshold: Threshold,
    delta_sq: f32,
    index: I,
    retained_ids: Vec<u32>,
    retained: Vec<f32>,
    stats: L1Stats,
    last_id: Option<u32>,
    cands: Vec<u32>,
}

impl<I: CandidateIndex> Greedy<I> {
    /// An empty session at threshold `t` using `index` for candidates.
    pub fn new(dim: usize, threshold: Threshold, index: I) -> Self {
        assert!(index.is_empty(), "the index must start empty");
        Self {
            dim,
            threshold,
            delta_sq: threshold.delta_sq_f32(),
            index,
            retained_ids: Vec::new(),
            retained: Vec::new(),
            stats: L1Stats::default(),
            last_id: None,
            cands: Vec::new(),
        }
    }

    /// The threshold in force.
    pub fn threshold(&self) -> Threshold {
        self.threshold
    }

    /// Counters so far.
    pub fn stats(&self) -> L1Stats {
        self.stats
    }

    /// Ids of retained chunks, ascending.
    pub fn retained_ids(&self) -> &[u32] {
        &self.retained_ids
    }

    /// Full-precision embeddings of retained chunks, row `k` for `retained_ids()[k]`.
    pub fn retained_vectors(&self) -> &[f32] {
        &self.retained
    }

    /// The candidate index.
    pub fn index(&self) -> &I {
        &self.index
    }

    /// Decide chunk `id` with unit embedding `v`.
    ///
    /// Refuses vectors that are not finite unit vectors, and ids that do not increase.
    pub fn decide(&mut self, id: u32, v: &[f32]) -> Result<Decision, Error> {
        if v.len() != self.dim {
            return Err(Error::Dimension { expected: self.dim, got: v.len() });
        }
        check_unit(v).map_err(|reason| Error::InvalidVector { what: format!("chunk {id}"), reason })?;
        if let Some(last) = self.last_id {
            assert!(id > last, "chunk ids must increase: {id} after {last}");
        }
        self.last_id = Some(id);
        self.stats.chunks += 1;
        let mut cands = std::mem::take(&mut self.cands);
        self.index.candidates(v, &mut cands);
        let mut decision = Decision::Retained;
        let t = self.threshold.cosine();
        let mut best_d2: Option<f32> = None;
        for &c in &cands {
            let Ok(slot) = self.retained_ids.binary_search(&c) else {
                continue;
            };
            self.stats.verified_pairs += 1;
            let row = &self.retained[slot * self.dim..(slot + 1) * self.dim];
            let d2 = sq_l2(v, row);
            best_d2 = Some(best_d2.map_or(d2, |b| b.min(d2)));
            if d2 <= self.delta_sq {
                // Candidates are ascending, so the first hit is the lowest index.
                let distance = f64::from(d2).sqrt();
                decision = Decision::Dropped { representative: c, distance: distance as f32 };
                self.stats.dropped += 1;
                if distance > self.stats.delta_hat {
                    self.stats.delta_hat = distance;
                }
                break;
            }
        }
        self.cands = cands;
        if let Some(b) = best_d2 {
            // For unit vectors cos = 1 - d^2 / 2.
            let margin = ((1.0 - f64::from(b) / 2.0) - t).abs();
            self.stats.min_margin = Some(self.stats.min_margin.map_or(margin, |m| m.min(margin)));
        }
        if decision == Decision::Retained {
            self.retained_ids.push(id);
            self.retained.extend_from_slice(v);
            self.index.insert_batch(&[id], v);
        }
        Ok(decision)
    }

    /// Decide a batch of chunks in order (`vectors` holds `ids.len()` rows).
    pub fn decide_batch(&mut self, ids: &[u32], vectors: &[f32], out: &mut Vec<Decision>) -> Result<(), Error> {
        if vectors.len() != ids.len() * self.dim {
            return Err(Error::Dimension { expected: ids.len() * self.dim, got: vectors.len() });
        }
        out.reserve(ids.len());
        for (&id, v) in ids.iter().zip(vectors.chunks_exact(self.dim)) {
            out.push(self.decide(id, v)?);
        }
        Ok(())
    }
}
