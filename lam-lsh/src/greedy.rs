//! Greedy first-occurrence deduplication (LAM Algorithms 1 and 2, C.4, C.5).

use crate::sq_l2_within;
use lam_core::{CandidateIndex, Decision, Error, Threshold, check_unit};
use nohash_hasher::BuildNoHashHasher;
use std::collections::HashMap;
use std::ops::ControlFlow;

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
    /// Row of each retained id (one probe per candidate, not a search).
    slots: HashMap<u32, u32, BuildNoHashHasher<u32>>,
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
            slots: HashMap::default(),
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

    /// Forget retained chunk `id`: no later chunk is dropped as its
    /// near-duplicate (the model no longer sees it; a context budget cited
    /// its observation). Its row stays allocated and in
    /// [`Self::retained_vectors`]; only the search skips it. Returns whether
    /// `id` was retained and not yet forgotten.
    pub fn forget(&mut self, id: u32) -> bool {
        self.slots.remove(&id).is_some()
    }

    /// Bytes held on the heap: the index, the retained vectors and ids.
    pub fn heap_bytes(&self) -> usize {
        let slots = self.slots.capacity() * (std::mem::size_of::<(u32, u32)>() + 1);
        self.index.heap_bytes() + self.retained.capacity() * 4 + (self.retained_ids.capacity() + self.cands.capacity()) * 4 + slots
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
        let mut scratch = std::mem::take(&mut self.cands);
        let (best_d2, hit) = self.nearest_first(v, &mut scratch);
        self.cands = scratch;
        let mut decision = Decision::Retained;
        let t = self.threshold.cosine();
        if let Some((c, d2)) = hit {
            let distance = f64::from(d2).sqrt();
            decision = Decision::Dropped { representative: c, distance: distance as f32 };
            self.stats.dropped += 1;
            if distance > self.stats.delta_hat {
                self.stats.delta_hat = distance;
            }
        }
        if let Some(b) = best_d2 {
            // For unit vectors cos = 1 - d^2 / 2.
            let margin = ((1.0 - f64::from(b) / 2.0) - t).abs();
            self.stats.min_margin = Some(self.stats.min_margin.map_or(margin, |m| m.min(margin)));
        }
        if decision == Decision::Retained {
            self.slots.insert(id, self.retained_ids.len() as u32);
            self.retained_ids.push(id);
            self.retained.extend_from_slice(v);
            self.index.insert_batch(&[id], v);
        }
        Ok(decision)
    }

    /// Verify the candidates for `v` in ascending order up to the first one
    /// within delta (the lowest index, the representative): the smallest
    /// squared distance verified and the hit.
    ///
    /// A pair is verified only as far as it can matter: a candidate proved
    /// farther than [`Self::bound`] is neither a hit nor able to lower the
    /// smallest margin, so its distance is cut short (`sq_l2_within`); every
    /// decision, `delta_hat` and `min_margin` are what full distances give.
    fn nearest_first(&mut self, v: &[f32], scratch: &mut Vec<u32>) -> (Option<f32>, Option<(u32, f32)>) {
        let (dim, delta_sq, bound) = (self.dim, self.delta_sq, self.bound());
        let (slots, rows, stats) = (&self.slots, &self.retained, &mut self.stats);
        let (mut best_d2, mut hit) = (None::<f32>, None);
        self.index.visit_candidates(v, scratch, &mut |c| {
            let Some(&slot) = slots.get(&c) else {
                return ControlFlow::Continue(());
            };
            let slot = slot as usize;
            stats.verified_pairs += 1;
            let Some(d2) = sq_l2_within(v, &rows[slot * dim..(slot + 1) * dim], bound) else {
                return ControlFlow::Continue(());
            };
            best_d2 = Some(best_d2.map_or(d2, |b| b.min(d2)));
            if d2 <= delta_sq {
                hit = Some((c, d2));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        (best_d2, hit)
    }

    /// The squared distance beyond which a pair changes nothing: above
    /// `delta^2` it is no hit, and above `2 (1 - t) + 2 m` (with `m` the
    /// smallest margin so far) its margin `d^2 / 2 - (1 - t)` exceeds `m`.
    /// Infinite before the first margin.
    fn bound(&self) -> f32 {
        let Some(m) = self.stats.min_margin else {
            return f32::INFINITY;
        };
        let b = ((2.0 * (1.0 - self.threshold.cosine()) + 2.0 * m) as f32).next_up();
        b.max(self.delta_sq)
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
