//! Quantiser, band hashing and the candidate indexes.

use lam_core::{CandidateIndex, Threshold};
use nohash_hasher::BuildNoHashHasher;
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// `Q_eps(x) = round(x / 2eps)`, with `eps = rel * sigma` and `sigma = 1/sqrt(D)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantizer {
    step: f32,
}

impl Quantizer {
    /// Quantiser for unit vectors of dimension `dim` at step `eps = rel / sqrt(dim)`.
    pub fn new(dim: usize, rel: f32) -> Self {
        assert!(dim > 0 && rel > 0.0 && rel.is_finite(), "bad quantiser settings");
        let sigma = 1.0 / (dim as f64).sqrt();
        Self { step: (2.0 * f64::from(rel) * sigma) as f32 }
    }

    /// The quantisation step `2 eps`.
    pub fn step(&self) -> f32 {
        self.step
    }

    /// Quantise one coordinate. Division (not a reciprocal) so every platform agrees.
    #[inline]
    pub fn q(&self, x: f32) -> i32 {
        (x / self.step).round() as i32
    }
}

/// Band width `r` and relative quantiser step `rel = eps / sigma`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandParams {
    /// Coordinates per band.
    pub r: usize,
    /// `eps / sigma`.
    pub rel: f32,
}

impl BandParams {
    /// The measured full-recall setting for threshold `t` (LAM F.10, Table 26):
    /// `r = 8, rel = 0.2` for `t >= 0.99` (1.46 % of pairs examined) and
    /// `r = 4, rel = 0.2` for `0.95 <= t < 0.99` (31.6 %; full recall at 0.95
    /// implies it at any higher threshold, whose pairs are a subset). Below
    /// 0.95 the paper measured no full-recall band setting, so there is no
    /// default and callers use the exhaustive index.
    pub fn full_recall_default(t: Threshold) -> Option<Self> {
        let c = t.cosine();
        if c >= 0.99 {
            Some(Self { r: 8, rel: 0.2 })
        } else if c >= 0.95 {
            Some(Self { r: 4, rel: 0.2 })
        } else {
            None
        }
    }
}

/// Banded LSH over quantised coordinates; holds ids of retained vectors only.
#[derive(Debug, Clone)]
pub struct BandedIndex {
    dim: usize,
    params: BandParams,
    quant: Quantizer,
    table: HashMap<u64, Vec<u32>, BuildNoHashHasher<u64>>,
    len: usize,
    max_id: u32,
}

impl BandedIndex {
    /// An empty index for vectors of dimension `dim`.
    pub fn new(dim: usize, params: BandParams) -> Self {
        assert!(params.r > 0 && params.r <= dim, "band width must be in 1..=dim");
        Self {
            dim,
            params,
            quant: Quantizer::new(dim, params.rel),
            table: HashMap::default(),
            len: 0,
            max_id: 0,
        }
    }

    /// Band settings.
    pub fn params(&self) -> BandParams {
        self.params
    }

    /// Number of bands (`ceil(D / r)`; the last band may be shorter).
    pub fn bands(&self) -> usize {
        self.dim.div_ceil(self.params.r)
    }

    /// The band digests of `v`, one per band, into `out` (cleared first).
    /// The band number seeds the hash, so equal values in different bands differ.
    pub fn digests(&self, v: &[f32], out: &mut Vec<u64>) {
        assert_eq!(v.len(), self.dim, "dimension mismatch");
        out.clear();
        let mut q: Vec<i32> = Vec::with_capacity(self.params.r);
        for (b, band) in v.chunks(self.params.r).enumerate() {
            q.clear();
            q.extend(band.iter().map(|&x| self.quant.q(x)));
            out.push(xxh3_64_with_seed(as_bytes(&q), b as u64));
        }
    }
}

fn as_bytes(q: &[i32]) -> &[u8] {
    // Hash the little-endian bytes of each value; on little-endian targets this
    // is the in-memory layout. Big-endian targets take the slow, equal path.
    #[cfg(target_endian = "little")]
    {
        // SAFETY: i32 has no padding and u8 has alignment 1.
        unsafe { std::slice::from_raw_parts(q.as_ptr().cast::<u8>(), std::mem::size_of_val(q)) }
    }
    #[cfg(not(target_endian = "little"))]
    {
        compile_error!("lam-lsh band digests assume a little-endian target");
    }
}

impl CandidateIndex for BandedIndex {
    fn describe(&self) -> String {
        format!("banded r={} rel={}", self.params.r, self.params.rel)
    }

    fn insert_batch(&mut self, ids: &[u32], vectors: &[f32]) {
        assert_eq!(vectors.len(), ids.len() * self.dim, "dimension mismatch");
        let mut digests = Vec::with_capacity(self.bands());
        for (&id, v) in ids.iter().zip(vectors.chunks_exact(self.dim)) {
            self.digests(v, &mut digests);
            for &d in &digests {
                let bucket = self.table.entry(d).or_default();
                if bucket.last() != Some(&id) {
                    bucket.push(id);
                }
            }
            self.len += 1;
            self.max_id = self.max_id.max(id);
        }
    }

    fn candidates(&self, query: &[f32], out: &mut Vec<u32>) {
        out.clear();
        if self.len == 0 {
            return;
        }
        let mut digests = Vec::with_capacity(self.bands());
        self.digests(query, &mut digests);
        let buckets: Vec<&Vec<u32>> = digests.iter().filter_map(|d| self.table.get(d)).collect();
        let total: usize = buckets.iter().map(|b| b.len()).sum();
        if total <= 256 {
            for ids in buckets {
                out.extend_from_slice(ids);
            }
            out.sort_unstable();
            out.dedup();
            return;
        }
        // Large buckets (long sessions, bands that many vectors share): a
        // bitmap union, linear in the bucket entries, instead of sorting them
        // all (which grew as n log n per arrival).
        let mut bits = vec![0u64; self.max_id as usize / 64 + 1];
        for ids in buckets {
            for &id in ids {
                bits[id as usize / 64] |= 1 << (id % 64);
            }
        }
        for (w, &word) in bits.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                out.push(w as u32 * 64 + word.trailing_zeros());
                word &= word - 1;
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// Every retained id is a candidate: the reference the banded index is tested against.
#[derive(Debug, Clone, Default)]
pub struct ExhaustiveIndex {
    ids: Vec<u32>,
}

impl ExhaustiveIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }
}

impl CandidateIndex for ExhaustiveIndex {
    fn describe(&self) -> String {
        "exhaustive".to_string()
    }

    fn insert_batch(&mut self, ids: &[u32], _vectors: &[f32]) {
        self.ids.extend_from_slice(ids);
        if !self.ids.is_sorted() {
            self.ids.sort_unstable();
            self.ids.dedup();
        }
    }

    fn candidates(&self, _query: &[f32], out: &mut Vec<u32>) {
        out.clear();
        out.extend_from_slice(&self.ids);
    }

    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// The index chosen for a run: static dispatch inside the per-chunk loop.
#[derive(Debug, Clone)]
pub enum L1Index {
    /// Banded LSH.
    Banded(BandedIndex),
    /// Exhaustive scan.
    Exhaustive(ExhaustiveIndex),
}

impl L1Index {
    /// The default for threshold `t`: the full-recall band setting where the
    /// paper measured one, the exhaustive index otherwise.
    pub fn default_for(dim: usize, t: Threshold) -> Self {
        match BandParams::full_recall_default(t) {
            Some(p) => Self::Banded(BandedIndex::new(dim, BandParams { r: p.r.min(dim), ..p })),
            None => Self::Exhaustive(ExhaustiveIndex::new()),
        }
    }
}

impl CandidateIndex for L1Index {
    fn describe(&self) -> String {
        match self {
            Self::Banded(i) => i.describe(),
            Self::Exhaustive(i) => i.describe(),
        }
    }
    fn insert_batch(&mut self, ids: &[u32], vectors: &[f32]) {
        match self {
            Self::Banded(i) => i.insert_batch(ids, vectors),
            Self::Exhaustive(i) => i.insert_batch(ids, vectors),
        }
    }
    fn candidates(&self, query: &[f32], out: &mut Vec<u32>) {
        match self {
            Self::Banded(i) => i.candidates(query, out),
            Self::Exhaustive(i) => i.candidates(query, out),
        }
    }
    fn len(&self) -> usize {
        match self {
            Self::Banded(i) => i.len(),
            Self::Exhaustive(i) => i.len(),
        }
    }
}
