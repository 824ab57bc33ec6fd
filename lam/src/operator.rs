//! The LAM operator: online (Algorithm 1, one arrival at a time) and batch
//! (Algorithm 2, a finished trajectory), with identical residuals.

use lam_core::{
    CandidateIndex, DeletionDigest, Decision, Encoder, Error, IdBook, ObsId, ObsStore, Record, SessionId, Threshold,
};
use lam_hash::{L0Stats, LineDedup, Segment};
use lam_lsh::{BandParams, BandedIndex, ExhaustiveIndex, Greedy, L1Index};
use std::ops::Range;
use std::time::Instant;

/// Which layer runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Order {
    /// L1 (near-duplicate chunks) then L0 (lines): the default (LAM B.3).
    #[default]
    #[serde(rename = "l1-l0")]
    L1L0,
    /// L0 then L1 (the paper's ablation "A").
    #[serde(rename = "l0-l1")]
    L0L1,
}

/// Candidate index choice.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum IndexChoice {
    /// Full-recall band setting for the threshold, exhaustive where none is known.
    #[default]
    Default,
    /// Exhaustive scan.
    Exhaustive,
    /// Explicit band settings.
    Banded(BandParams),
}

/// Operator settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Merge threshold.
    pub threshold: Threshold,
    /// Layer order.
    pub order: Order,
    /// Candidate index.
    pub index: IndexChoice,
    /// Chunks per encoder call in the batch form.
    pub encode_batch: usize,
}

impl Config {
    /// Defaults at threshold `t`.
    pub fn new(threshold: Threshold) -> Self {
        Self { threshold, order: Order::default(), index: IndexChoice::default(), encode_batch: 64 }
    }

    fn make_index(&self, dim: usize) -> L1Index {
        match self.index {
            IndexChoice::Default => L1Index::default_for(dim, self.threshold),
            IndexChoice::Exhaustive => L1Index::Exhaustive(ExhaustiveIndex::new()),
            IndexChoice::Banded(p) => L1Index::Banded(BandedIndex::new(dim, p)),
        }
    }
}

/// The L1 outcome of one chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkOutcome {
    /// Session chunk index (arrival order).
    pub index: u32,
    /// Position within its record.
    pub ordinal: u32,
    /// Byte range in the text that was chunked.
    pub range: Range<usize>,
    /// Retained or dropped.
    pub decision: Decision,
}

/// What admitting one record produced.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Record index.
    pub record: u32,
    /// Visible id (`§id` without the `§`).
    pub id: String,
    /// The residual observation (what is prefilled).
    pub residual: Vec<u8>,
    /// L1 outcomes of this record's chunks.
    pub chunks: Vec<ChunkOutcome>,
    /// Every stub line emitted for this record (L1 and L0).
    pub stubs: Vec<String>,
    /// L0 counters.
    pub l0: L0Stats,
    /// Text left after the first layer, without its stubs (for attribution).
    pub first_layer_plain: Vec<u8>,
    /// Nanoseconds spent encoding (0 when embeddings were given).
    pub encode_ns: u64,
    /// Nanoseconds spent deciding, hashing and rendering (the admission test).
    pub admit_ns: u64,
}

/// One session's online operator state. `Send`: sessions admit in parallel.
#[derive(Debug)]
pub struct Session {
    cfg: Config,
    greedy: Greedy<L1Index>,
    l0: LineDedup,
    book: IdBook,
    ids: Vec<String>,
    homes: Vec<(u32, u32)>,
    next_record: u32,
    digest: DeletionDigest,
}

/// One dropped chunk, before its run is written as a stub.
#[derive(Debug, Clone)]
struct Drop {
    range: Range<usize>,
    ordinal: u32,
    rep_id: String,
    rep_ordinal: u32,
    d: f32,
}

/// The stub of a run of consecutive dropped chunks of record `id`: one line,
/// whatever the run's length (SYSTEM.md step 5), e.g.
/// `[lam: chunk 3 of §e5f6a7b8 ~ §a1b2c3d4#1, d=0.210; _recall §e5f6a7b8]` or
/// `[lam: chunks 3-6 of §e5f6a7b8 ~ §a1b2c3d4#1-2,2 §c0ffee00#4, d<=0.210; _recall §e5f6a7b8]`.
/// Representatives are listed in chunk order: chunks of one record once per
/// stretch (`§id#` then a comma list), consecutive chunks as a range (`1-2`).
fn l1_stub(id: &str, run: &[Drop]) -> String {
    let first = run[0].ordinal + 1;
    let mut reps = String::new();
    let mut i = 0;
    while i < run.len() {
        let mut j = i + 1;
        while j < run.len() && run[j].rep_ordinal == run[j - 1].rep_ordinal + 1 && run[j].rep_id == run[i].rep_id {
            j += 1;
        }
        if i > 0 && run[i].rep_id == run[i - 1].rep_id {
            reps.push(',');
        } else {
            if i > 0 {
                reps.push(' ');
            }
            reps.push_str(&format!("§{}#", run[i].rep_id));
        }
        reps.push_str(&format!("{}", run[i].rep_ordinal + 1));
        if j > i + 1 {
            reps.push_str(&format!("-{}", run[j - 1].rep_ordinal + 1));
        }
        i = j;
    }
    if run.len() == 1 {
        format!("[lam: chunk {first} of §{id} ~ {reps}, d={:.3}; _recall §{id}]", run[0].d)
    } else {
        let d = run.iter().map(|x| x.d).fold(0.0f32, f32::max);
        format!("[lam: chunks {first}-{} of §{id} ~ {reps}, d<={d:.3}; _recall §{id}]", run[run.len() - 1].ordinal + 1)
    }
}

/// Render segments without L0 (used for the `l0-l1` order), same line rule as L0.
fn render(text: &[u8], segs: &[OwnedSeg], out: &mut Vec<u8>) {
    let start = out.len();
    for s in segs {
        match s {
            OwnedSeg::Text(r) => out.extend_from_slice(&text[r.clone()]),
            OwnedSeg::Stub(line) => {
                if out.len() > start && out.last() != Some(&b'\n') {
                    out.push(b'\n');
                }
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
            OwnedSeg::Dropped(_) => unreachable!("segments are collapsed before use"),
        }
    }
}

/// Remove exactly the given stub lines (first occurrence each) from `text`.
fn strip_stubs(text: &[u8], stubs: &[String]) -> Vec<u8> {
    if stubs.is_empty() {
        return text.to_vec();
    }
    let mut pending: Vec<&[u8]> = stubs.iter().map(|s| s.as_bytes()).collect();
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        let key = line.strip_suffix(b"\n").unwrap_or(line);
        if let Some(p) = pending.iter().position(|s| *s == key) {
            pending.remove(p);
            continue;
        }
        out.extend_from_slice(line);
    }
    out
}

/// Append a retained chunk, merging with adjacent text.
fn push_text(segs: &mut Vec<OwnedSeg>, range: &Range<usize>) {
    match segs.last_mut() {
        Some(OwnedSeg::Text(r)) if r.end == range.start => r.end = range.end,
        _ => segs.push(OwnedSeg::Text(range.clone())),
    }
}

/// Append a dropped chunk; [`collapse`] writes its run's stub.
fn push_dropped(segs: &mut Vec<OwnedSeg>, drop: Drop) {
    segs.push(OwnedSeg::Dropped(drop));
}

/// Write each run of consecutive dropped chunks as one stub line, or as its
/// own bytes when they are no longer than the stub line (a stub never
/// lengthens the text; the decisions and the deletion-set digest are the
/// same either way).
fn collapse(id: &str, segs: Vec<OwnedSeg>) -> Vec<OwnedSeg> {
    let mut out: Vec<OwnedSeg> = Vec::with_capacity(segs.len());
    let mut run: Vec<Drop> = Vec::new();
    let flush = |out: &mut Vec<OwnedSeg>, run: &mut Vec<Drop>| {
        if run.is_empty() {
            return;
        }
        let stub = l1_stub(id, run);
        let bytes: usize = run.iter().map(|d| d.range.len()).sum();
        if bytes <= stub.len() + 1 {
            for d in run.iter() {
                push_text(out, &d.range);
            }
        } else {
            out.push(OwnedSeg::Stub(stub));
        }
        run.clear();
    };
    for s in segs {
        match s {
            OwnedSeg::Dropped(d) => {
                if run.last().is_some_and(|l| l.ordinal + 1 != d.ordinal) {
                    flush(&mut out, &mut run);
                }
                run.push(d);
            }
            OwnedSeg::Text(r) => {
                flush(&mut out, &mut run);
                push_text(&mut out, &r);
            }
            other => {
                flush(&mut out, &mut run);
                out.push(other);
            }
        }
    }
    flush(&mut out, &mut run);
    out
}

#[derive(Debug, Clone)]
enum OwnedSeg {
    Text(Range<usize>),
    Stub(String),
    /// Only between deciding a record's chunks and [`collapse`].
    Dropped(Drop),
}

fn to_segments<'a>(text: &'a [u8], segs: &'a [OwnedSeg]) -> Vec<Segment<'a>> {
    segs.iter()
        .map(|s| match s {
            OwnedSeg::Text(r) => Segment::Text(&text[r.clone()]),
            OwnedSeg::Stub(l) => Segment::Stub(l),
            OwnedSeg::Dropped(_) => unreachable!("segments are collapsed before use"),
        })
        .collect()
}

fn plain(text: &[u8], segs: &[OwnedSeg]) -> Vec<u8> {
    let mut v = Vec::new();
    for s in segs {
        if let OwnedSeg::Text(r) = s {
            v.extend_from_slice(&text[r.clone()]);
        }
    }
    v
}

impl Session {
    /// A new session for embeddings of dimension `dim`.
    pub fn new(cfg: Config, dim: usize) -> Self {
        Self {
            cfg,
            greedy: Greedy::new(dim, cfg.threshold, cfg.make_index(dim)),
            l0: LineDedup::new(),
            book: IdBook::new(),
            ids: Vec::new(),
            homes: Vec::new(),
            next_record: 0,
            digest: DeletionDigest::new(),
        }
    }

    /// Settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Largest substitution distance used so far.
    pub fn delta_hat(&self) -> f64 {
        self.greedy.stats().delta_hat
    }

    /// L1 counters.
    pub fn l1_stats(&self) -> lam_lsh::L1Stats {
        self.greedy.stats()
    }

    /// Description of the candidate index.
    pub fn index_description(&self) -> String {
        self.greedy.index().describe()
    }

    /// Digest of the deletion set so far, for session index `session_index`.
    pub fn digest(&self) -> &DeletionDigest {
        &self.digest
    }

    fn next_id(&mut self, rec: &Record) -> Result<(u32, String), Error> {
        if rec.index != self.next_record {
            return Err(Error::Backend {
                what: "operator",
                source: format!("record {} arrived, expected {}", rec.index, self.next_record).into(),
            });
        }
        self.next_record += 1;
        let id = self.book.visible(ObsId::of(rec.action.as_bytes(), &rec.observation)).to_string();
        self.ids.push(id.clone());
        Ok((rec.index, id))
    }

    /// Decide the chunks of `text` (record `record`) and build its segments.
    fn l1(&mut self, record: u32, id: &str, chunks: &[Range<usize>], vectors: &[f32], outcomes: &mut Vec<ChunkOutcome>, text_len: usize) -> Result<Vec<OwnedSeg>, Error> {
        let dim = vectors.len() / chunks.len().max(1);
        let mut segs: Vec<OwnedSeg> = Vec::new();
        if chunks.is_empty() {
            if text_len > 0 {
                segs.push(OwnedSeg::Text(0..text_len));
            }
            return Ok(segs);
        }
        for (k, (range, v)) in chunks.iter().zip(vectors.chunks_exact(dim)).enumerate() {
            let index = self.homes.len() as u32;
            let decision = self.greedy.decide(index, v)?;
            self.homes.push((record, k as u32));
            match decision {
                Decision::Retained => push_text(&mut segs, range),
                Decision::Dropped { representative, distance } => {
                    self.digest.push(0, index);
                    let (rr, ro) = self.homes[representative as usize];
                    push_dropped(&mut segs, Drop { range: range.clone(), ordinal: k as u32, rep_id: self.ids[rr as usize].clone(), rep_ordinal: ro, d: distance });
                }
            }
            outcomes.push(ChunkOutcome { index, ordinal: k as u32, range: range.clone(), decision });
        }
        Ok(collapse(id, segs))
    }

    /// Admit one arrival, encoding its chunks with `enc` (Algorithm 1).
    pub fn admit(&mut self, enc: &mut dyn Encoder, rec: &Record) -> Result<Admission, Error> {
        match self.cfg.order {
            Order::L1L0 => {
                let mut chunks = Vec::new();
                enc.chunks(&rec.observation, &mut chunks)?;
                let t = Instant::now();
                let vectors = encode(enc, &rec.observation, &chunks)?;
                let encode_ns = t.elapsed().as_nanos() as u64;
                let mut a = self.admit_embedded(rec, &chunks, &vectors)?;
                a.encode_ns = encode_ns;
                Ok(a)
            }
            Order::L0L1 => {
                let t0 = Instant::now();
                let (record, id) = self.next_id(rec)?;
                let mut r0 = Vec::new();
                let l0 = self.l0.process(record, &id, &[Segment::Text(&rec.observation)], &mut r0);
                let l0_stubs = self.l0.last_stubs().to_vec();
                let mut chunks = Vec::new();
                enc.chunks(&r0, &mut chunks)?;
                let t = Instant::now();
                let vectors = encode(enc, &r0, &chunks)?;
                let encode_ns = t.elapsed().as_nanos() as u64;
                let mut outcomes = Vec::new();
                let segs = self.l1(record, &id, &chunks, &vectors, &mut outcomes, r0.len())?;
                let mut residual = Vec::new();
                render(&r0, &segs, &mut residual);
                let mut stubs = l0_stubs.clone();
                stubs.extend(segs.iter().filter_map(|s| if let OwnedSeg::Stub(l) = s { Some(l.clone()) } else { None }));
                let total = t0.elapsed().as_nanos() as u64;
                Ok(Admission { record, id, residual, chunks: outcomes, stubs, l0, first_layer_plain: strip_stubs(&r0, &l0_stubs), encode_ns, admit_ns: total.saturating_sub(encode_ns) })
            }
        }
    }

    /// Archive `rec` verbatim in `store` (session `session`, `tokens` of the
    /// model's tokens) before anything else, then admit it with `enc`. Every
    /// stub of the admission cites the archived original with `_recall §id`,
    /// and that id resolves in `store` to the exact observation bytes.
    pub fn admit_archived(&mut self, store: &mut dyn ObsStore, session: &SessionId, tokens: u32, enc: &mut dyn Encoder, rec: &Record) -> Result<Admission, Error> {
        let meta = store.append(session, rec, tokens)?;
        let a = self.admit(enc, rec)?;
        if a.id != meta.shown {
            return Err(Error::Backend {
                what: "operator",
                source: format!(
                    "record {}: the archive shows its observation as §{} but the operator as §{}; the store's session `{session}` holds other records with colliding ids",
                    rec.index, meta.shown, a.id
                )
                .into(),
            });
        }
        Ok(a)
    }

    /// Admit one arrival whose chunks and embeddings are given (order `l1-l0` only).
    pub fn admit_embedded(&mut self, rec: &Record, chunks: &[Range<usize>], vectors: &[f32]) -> Result<Admission, Error> {
        if self.cfg.order != Order::L1L0 {
            return Err(Error::Backend { what: "operator", source: "embeddings can be given only in l1-l0 order".into() });
        }
        let t0 = Instant::now();
        let (record, id) = self.next_id(rec)?;
        let mut outcomes = Vec::with_capacity(chunks.len());
        let segs = self.l1(record, &id, chunks, vectors, &mut outcomes, rec.observation.len())?;
        let mut residual = Vec::with_capacity(rec.observation.len());
        let l0 = self.l0.process(record, &id, &to_segments(&rec.observation, &segs), &mut residual);
        let admit_ns = t0.elapsed().as_nanos() as u64;
        let mut stubs: Vec<String> = segs.iter().filter_map(|s| if let OwnedSeg::Stub(l) = s { Some(l.clone()) } else { None }).collect();
        stubs.extend_from_slice(self.l0.last_stubs());
        Ok(Admission { record, id, residual, chunks: outcomes, stubs, l0, first_layer_plain: plain(&rec.observation, &segs), encode_ns: 0, admit_ns })
    }
}

fn encode(enc: &mut dyn Encoder, text: &[u8], chunks: &[Range<usize>]) -> Result<Vec<f32>, Error> {
    let dim = enc.info().dim;
    let texts: Vec<&[u8]> = chunks.iter().map(|c| &text[c.clone()]).collect();
    let mut v = vec![0.0f32; texts.len() * dim];
    enc.encode_batch(&texts, &mut v)?;
    Ok(v)
}

/// The result of the batch form over a whole trajectory.
#[derive(Debug)]
pub struct BatchOutcome {
    /// One admission per record, in order (timings are zero).
    pub admissions: Vec<Admission>,
    /// Deletion-set digest (session index 0).
    pub digest: DeletionDigest,
    /// Largest substitution distance used.
    pub delta_hat: f64,
}

/// Algorithm 2: chunk every record, encode all chunks in one batched pass,
/// then decide all chunks in trajectory order and render residuals.
pub fn compact_batch(cfg: Config, enc: &mut dyn Encoder, records: &[Record]) -> Result<BatchOutcome, Error> {
    let dim = enc.info().dim;
    let mut book = IdBook::new();
    let ids: Vec<String> = records.iter().map(|r| book.visible(ObsId::of(r.action.as_bytes(), &r.observation)).to_string()).collect();
    let mut l0 = LineDedup::new();
    // For l0-l1, L0 runs first over every record.
    let mut l0_stats = vec![L0Stats::default(); records.len()];
    let mut l0_stubs: Vec<Vec<String>> = vec![Vec::new(); records.len()];
    let texts: Vec<Vec<u8>> = match cfg.order {
        Order::L1L0 => records.iter().map(|r| r.observation.clone()).collect(),
        Order::L0L1 => records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut out = Vec::new();
                l0_stats[i] = l0.process(i as u32, &ids[i], &[Segment::Text(&r.observation)], &mut out);
                l0_stubs[i] = l0.last_stubs().to_vec();
                out
            })
            .collect(),
    };
    // Chunk everything, then encode in batches.
    let mut all_chunks: Vec<Vec<Range<usize>>> = Vec::with_capacity(records.len());
    for t in &texts {
        let mut c = Vec::new();
        enc.chunks(t, &mut c)?;
        all_chunks.push(c);
    }
    let flat: Vec<&[u8]> = texts.iter().zip(&all_chunks).flat_map(|(t, cs)| cs.iter().map(move |c| &t[c.clone()])).collect();
    let mut vectors = vec![0.0f32; flat.len() * dim];
    for (texts, out) in flat.chunks(cfg.encode_batch.max(1)).zip(vectors.chunks_mut(cfg.encode_batch.max(1) * dim)) {
        enc.encode_batch(texts, out)?;
    }
    // Decide all chunks in order.
    let mut greedy = Greedy::new(dim, cfg.threshold, cfg.make_index(dim));
    let ids_flat: Vec<u32> = (0..flat.len() as u32).collect();
    let mut decisions = Vec::with_capacity(flat.len());
    greedy.decide_batch(&ids_flat, &vectors, &mut decisions)?;
    let mut homes = Vec::with_capacity(flat.len());
    for (r, cs) in all_chunks.iter().enumerate() {
        for k in 0..cs.len() {
            homes.push((r as u32, k as u32));
        }
    }
    let mut digest = DeletionDigest::new();
    let mut admissions = Vec::with_capacity(records.len());
    let mut next = 0usize;
    for r in 0..records.len() {
        let text = &texts[r];
        let mut segs: Vec<OwnedSeg> = Vec::new();
        let mut outcomes = Vec::new();
        if all_chunks[r].is_empty() && !text.is_empty() {
            segs.push(OwnedSeg::Text(0..text.len()));
        }
        for (k, range) in all_chunks[r].iter().enumerate() {
            let decision = decisions[next];
            match decision {
                Decision::Retained => push_text(&mut segs, range),
                Decision::Dropped { representative, distance } => {
                    digest.push(0, next as u32);
                    let (rr, ro) = homes[representative as usize];
                    push_dropped(&mut segs, Drop { range: range.clone(), ordinal: k as u32, rep_id: ids[rr as usize].clone(), rep_ordinal: ro, d: distance });
                }
            }
            outcomes.push(ChunkOutcome { index: next as u32, ordinal: k as u32, range: range.clone(), decision });
            next += 1;
        }
        let segs = collapse(&ids[r], segs);
        let l1_stubs: Vec<String> = segs.iter().filter_map(|s| if let OwnedSeg::Stub(l) = s { Some(l.clone()) } else { None }).collect();
        let mut residual = Vec::new();
        let (stats, stubs, first) = match cfg.order {
            Order::L1L0 => {
                let st = l0.process(r as u32, &ids[r], &to_segments(text, &segs), &mut residual);
                let mut stubs = l1_stubs;
                stubs.extend_from_slice(l0.last_stubs());
                (st, stubs, plain(text, &segs))
            }
            Order::L0L1 => {
                render(text, &segs, &mut residual);
                let mut stubs = l0_stubs[r].clone();
                stubs.extend(l1_stubs);
                (l0_stats[r], stubs, strip_stubs(text, &l0_stubs[r]))
            }
        };
        admissions.push(Admission { record: r as u32, id: ids[r].clone(), residual, chunks: outcomes, stubs, l0: stats, first_layer_plain: first, encode_ns: 0, admit_ns: 0 });
    }
    Ok(BatchOutcome { admissions, digest, delta_hat: greedy.stats().delta_hat })
}

/// Remove the given stub lines from a residual (for gross accounting).
pub fn without_stubs(residual: &[u8], stubs: &[String]) -> Vec<u8> {
    strip_stubs(residual, stubs)
}
