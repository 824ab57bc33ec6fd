//! Quantiser, band hashing and the candidate indexes.

use lam_core::{CandidateIndex, Threshold};
use nohash_hasher::BuildNoHashHasher;
use std::collections::HashMap;
use std::ops::ControlFlow;
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
    table: HashMap<u64, Bucket, BuildNoHashHasher<u64>>,
    len: usize,
    max_id: u32,
    /// Every id was inserted after every smaller one, so each bucket is
    /// ascending (what the greedy run does); lazy visiting relies on it.
    ascending: bool,
    /// Heap bytes of all buckets' lists, kept as they grow (not summed per call).
    bucket_bytes: usize,
}

impl BandedIndex {
    /// An empty index for vectors of dimension `dim`.
    pub fn new(dim: usize, params: BandParams) -> Self {
        assert!(params.r > 0 && params.r <= dim, "band width must be in 1..=dim");
        Self { dim, params, quant: Quantizer::new(dim, params.rel), table: HashMap::default(), len: 0, max_id: 0, ascending: true, bucket_bytes: 0 }
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
            self.ascending &= self.len == 0 || id > self.max_id;
            self.digests(v, &mut digests);
            for &d in &digests {
                let b = self.table.entry(d).or_default();
                let before = b.heap_bytes();
                b.push(id);
                self.bucket_bytes = self.bucket_bytes + b.heap_bytes() - before;
            }
            self.len += 1;
            self.max_id = self.max_id.max(id);
        }
    }

    fn candidates(&self, query: &[f32], out: &mut Vec<u32>) {
        out.clear();
        let mut window = Vec::new();
        self.visit_candidates(query, &mut window, &mut |c| {
            out.push(c);
            ControlFlow::Continue(())
        });
    }

    fn visit_candidates(&self, query: &[f32], scratch: &mut Vec<u32>, visit: &mut dyn FnMut(u32) -> ControlFlow<()>) {
        let buckets = self.buckets(query);
        if !self.ascending || buckets.iter().map(|b| b.ids.len()).sum::<usize>() <= 256 {
            // Few entries (or buckets out of order): sort them all.
            scratch.clear();
            buckets.iter().for_each(|b| scratch.extend_from_slice(&b.ids));
            scratch.sort_unstable();
            scratch.dedup();
            let _ = scratch.iter().try_for_each(|&c| visit(c));
            return;
        }
        let mut windows = Windows::new(buckets);
        while let Some(ids) = windows.next(scratch) {
            if ids.iter().try_for_each(|&c| visit(c)).is_break() {
                return;
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn heap_bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<(u64, Bucket)>() + 1) + self.bucket_bytes
    }
}

impl BandedIndex {
    /// The buckets `query` falls into, one per band that has one.
    fn buckets(&self, query: &[f32]) -> Vec<&Bucket> {
        if self.len == 0 {
            return Vec::new();
        }
        let mut digests = Vec::with_capacity(self.bands());
        self.digests(query, &mut digests);
        digests.iter().filter_map(|d| self.table.get(d)).collect()
    }
}

/// The ids of one band digest, ascending when inserted in order, and while
/// the bucket is big and dense (no more 64-bit words than entries, dropped at
/// twice that) also a bitmap of them, so a union over many big buckets
/// (sparse vectors share their all-zero bands) ORs words instead of walking
/// entries. The bitmap never takes more than twice the entries' memory.
#[derive(Debug, Clone, Default)]
struct Bucket {
    ids: Vec<u32>,
    bits: Vec<u64>,
}

impl Bucket {
    /// Entries from which a bucket may keep a bitmap too.
    const BITMAP_FROM: usize = 1024;

    fn push(&mut self, id: u32) {
        if self.ids.last() == Some(&id) {
            return;
        }
        self.ids.push(id);
        let words = id as usize / 64 + 1;
        if !self.bits.is_empty() {
            self.set(id);
            if self.bits.len() > 2 * self.ids.len() {
                // Sparse again: the bitmap would cost more than the entries.
                self.bits = Vec::new();
            }
        } else if self.ids.len() >= Self::BITMAP_FROM && words <= self.ids.len() {
            self.ids.clone().into_iter().for_each(|i| self.set(i));
        }
    }

    fn heap_bytes(&self) -> usize {
        self.ids.capacity() * 4 + self.bits.capacity() * 8
    }

    fn set(&mut self, id: u32) {
        let w = id as usize / 64;
        if self.bits.len() <= w {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] |= 1 << (id % 64);
    }

    /// Read through the bitmap: it has one and no more words than entries.
    fn by_words(&self) -> bool {
        !self.bits.is_empty() && self.bits.len() <= self.ids.len()
    }
}

/// The union of ascending buckets, produced in ascending, 64-aligned
/// windows of ids that double in width: a search that stops early reads only
/// the start of each bucket, and one that does not reads every entry (or
/// bitmap word) once, plus one look per bucket and window (about
/// `log2(ids)` windows).
struct Windows<'a> {
    lists: Vec<&'a [u32]>,
    cursors: Vec<usize>,
    maps: Vec<&'a [u64]>,
    /// Every id below this was produced.
    done: u64,
    /// One past the largest id of any bucket.
    end: u64,
    width: u64,
    bits: Vec<u64>,
}

impl<'a> Windows<'a> {
    fn new(buckets: Vec<&'a Bucket>) -> Self {
        let end = buckets.iter().filter_map(|b| b.ids.last()).max().map_or(0, |&id| u64::from(id) + 1);
        let (maps, lists): (Vec<_>, Vec<_>) = buckets.into_iter().partition(|b| b.by_words());
        let cursors = vec![0; lists.len()];
        let (lists, maps) = (lists.iter().map(|b| b.ids.as_slice()).collect(), maps.iter().map(|b| b.bits.as_slice()).collect());
        Self { lists, cursors, maps, done: 0, end, width: 64, bits: Vec::new() }
    }

    /// The first id of the next window: the smallest unread list entry, or
    /// where the last window ended while bitmaps remain.
    fn start(&self) -> Option<u64> {
        let list = self.lists.iter().zip(&self.cursors).filter_map(|(b, &c)| b.get(c)).min().map(|&id| u64::from(id));
        let map = (!self.maps.is_empty() && self.done < self.end).then_some(self.done);
        list.into_iter().chain(map).min()
    }

    /// The next window's ids, ascending and unique, into `out`; `None` when
    /// every bucket is used up.
    fn next<'o>(&mut self, out: &'o mut Vec<u32>) -> Option<&'o [u32]> {
        let lo = self.start()? / 64 * 64;
        let width = self.width.min((self.end - lo).next_multiple_of(64));
        let hi = lo + width;
        self.bits.clear();
        self.bits.resize(width as usize / 64, 0);
        for (b, c) in self.lists.iter().zip(self.cursors.iter_mut()) {
            while let Some(&id) = b.get(*c).filter(|&&id| u64::from(id) < hi) {
                let k = (u64::from(id) - lo) as usize;
                self.bits[k / 64] |= 1 << (k % 64);
                *c += 1;
            }
        }
        let first = (lo / 64) as usize;
        for m in &self.maps {
            for (w, &word) in self.bits.iter_mut().zip(m.iter().skip(first)) {
                *w |= word;
            }
        }
        out.clear();
        for (w, &word) in self.bits.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                out.push((lo + w as u64 * 64) as u32 + word.trailing_zeros());
                word &= word - 1;
            }
        }
        (self.done, self.width) = (hi, self.width * 2);
        Some(out)
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

    fn heap_bytes(&self) -> usize {
        self.ids.capacity() * 4
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
    fn visit_candidates(&self, query: &[f32], scratch: &mut Vec<u32>, visit: &mut dyn FnMut(u32) -> ControlFlow<()>) {
        match self {
            Self::Banded(i) => i.visit_candidates(query, scratch, visit),
            Self::Exhaustive(i) => i.visit_candidates(query, scratch, visit),
        }
    }
    fn len(&self) -> usize {
        match self {
            Self::Banded(i) => i.len(),
            Self::Exhaustive(i) => i.len(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Self::Banded(i) => i.heap_bytes(),
            Self::Exhaustive(i) => i.heap_bytes(),
        }
    }
}

#[cfg(test)]
mod heap {
    use super::{BandParams, BandedIndex, Bucket};
    use lam_core::CandidateIndex;

    #[test]
    fn heap_bytes_kept_as_buckets_grow_equal_a_full_count() {
        let dim = 32;
        let mut idx = BandedIndex::new(dim, BandParams { r: 4, rel: 0.2 });
        for id in 0..3000u32 {
            let v: Vec<f32> = (0..dim).map(|k| if k == id as usize % dim { 1.0 } else { 0.0 }).collect();
            idx.insert_batch(&[id], &v);
        }
        let full: usize = idx.table.values().map(Bucket::heap_bytes).sum();
        assert_eq!(idx.bucket_bytes, full);
        assert!(idx.heap_bytes() > full);
    }
}
