//! One session's operator state and the one per-record function that both
//! the online form ([`Session::admit`]) and the batch form
//! ([`crate::compact_batch`]) run.

use crate::Error;
use crate::admission::{Admission, ChunkOutcome, Tokens};
use crate::config::{Config, Order, Residual};
use crate::segments::{self, Dropped, Every, Plain, Rep, Seg};
use crate::totals::SessionTotals;
use lam_core::stub::{RepeatStub, worth_replacing};
use lam_core::{CandidateIndex, Decision, DeletionDigest, Encoder, IdBook, ObsId, ObsMeta, ObsStore, Record, SessionId, Stub, TokenCounter, check_unit};
use lam_hash::{L0Stats, LineDedup, Segment};
use lam_lsh::{Greedy, L1Index, L1Stats};
use std::collections::HashMap;
use std::ops::Range;
use std::time::Instant;
use xxhash_rust::xxh3::xxh3_128;

/// One session's online operator state. `Send`: sessions admit in parallel.
///
/// Records arrive in order (`Record::index` 0, 1, 2, ...). Every admission
/// runs the same function, whether its embeddings were computed now
/// ([`Session::admit`]), given ([`Session::admit_embedded`]) or computed in
/// one batched pass over a finished trajectory ([`crate::compact_batch`]).
/// A clone goes on from the same state: the proxy forks a conversation
/// this way when an agent forks a subagent.
#[derive(Clone)]
pub struct Session<I = L1Index> {
    cfg: Config,
    dim: usize,
    greedy: Greedy<I>,
    l0: LineDedup,
    book: IdBook,
    ids: Vec<String>,
    /// How stubs name each record's call (`lam_core::action::referent`).
    calls: Vec<String>,
    /// The records of every distinct output (xxh3-128 of its bytes), in order.
    outputs: HashMap<u128, Vec<u32>>,
    /// Each record's output (xxh3-128).
    output_of: Vec<u128>,
    /// The newest record admitted whose call has each name.
    newest_of: HashMap<String, u32>,
    /// The newest record begun whose call has each name, and what it does
    /// (xxh3-128 of `lam_core::action::call_key`): a record that does the
    /// same runs it again, and its stubs name that output `its last output`
    /// ([`Begun::rerun`]). Kept apart from `newest_of`, which `finish`
    /// updates: a batch begins every record before it finishes one.
    last_run: HashMap<String, (u32, u128)>,
    /// Where every chunk is, by session chunk index.
    homes: Vec<Home>,
    next_record: u32,
    digest: DeletionDigest,
    /// The input tokens `admit_archived` counted for a record (counted once).
    counted: Option<(u32, usize)>,
    /// The content id `archive_then_admit` computed for a record (SHA-1 over
    /// its bytes: computed once).
    known_id: Option<(u32, ObsId)>,
    /// What the admissions so far add up to.
    totals: SessionTotals,
    poisoned: Option<u32>,
    /// Records forgotten ([`Session::forget`]).
    forgotten: std::collections::HashSet<u32>,
    /// The newest record of each call name and its output's line keys: the
    /// representatives a delta residual may name ([`Config::delta`]).
    bases: HashMap<String, (u32, Vec<u128>)>,
}

impl<I: std::fmt::Debug> std::fmt::Debug for Session<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("cfg", &self.cfg)
            .field("dim", &self.dim)
            .field("records", &self.next_record)
            .field("chunks", &self.homes.len())
            .field("digest", &self.digest.hex16())
            .field("counts_tokens", &(self.cfg.count_tokens && self.cfg.counter.is_some()))
            .finish_non_exhaustive()
    }
}

/// Where a chunk is: its record, its ordinal there, and (retained chunks)
/// its first and last line in that record's residual.
#[derive(Debug, Clone, Copy)]
struct Home {
    record: u32,
    ordinal: u32,
    lines: (u32, u32),
}

/// A record between its first layer and L1: its id and the text L1 chunks.
#[derive(Debug)]
pub(crate) struct Begun {
    record: u32,
    id: String,
    /// How stubs name its call.
    call: String,
    started: Instant,
    /// `l0-l1`: what L0 left (L1 chunks it), its stubs and counters.
    l0_first: Option<(Vec<u8>, Vec<Stub>, L0Stats)>,
    /// The record does again what the newest earlier record of its call's
    /// name did (not forgotten): its stubs name that output `its last
    /// output` / `last time` rather than by the name (`docs/stubs.md`).
    rerun: bool,
}

impl Begun {
    /// The text L1 chunks: the observation, or what L0 left of it.
    pub(crate) fn text<'a>(&'a self, rec: &'a Record) -> &'a [u8] {
        self.l0_first.as_ref().map_or(&rec.observation, |(t, _, _)| t)
    }
}

impl Session<L1Index> {
    /// A new session for embeddings of dimension `dim`, with the candidate
    /// index `cfg.index` names.
    pub fn new(cfg: Config, dim: usize) -> Result<Self, Error> {
        let index = cfg.index.build(dim, cfg.threshold)?;
        Ok(Self::with_index(cfg, dim, index))
    }
}

impl<I: CandidateIndex> Session<I> {
    /// A new session over an empty candidate index of your own.
    pub fn with_index(cfg: Config, dim: usize, index: I) -> Self {
        Self {
            cfg,
            dim,
            greedy: Greedy::new(dim, cfg.threshold, index),
            l0: match LineDedup::new().with_counter(cfg.counter).with_recall(cfg.recall) {
                // L1 may drop the stub line a `ditto` refers to.
                l0 if cfg.order == Order::L0L1 => l0.without_ditto(),
                l0 => l0,
            },
            book: IdBook::new(),
            ids: Vec::new(),
            calls: Vec::new(),
            outputs: HashMap::new(),
            output_of: Vec::new(),
            newest_of: HashMap::new(),
            last_run: HashMap::new(),
            homes: Vec::new(),
            next_record: 0,
            digest: DeletionDigest::new(),
            counted: None,
            known_id: None,
            totals: SessionTotals::default(),
            poisoned: None,
            forgotten: Default::default(),
            bases: HashMap::new(),
        }
    }

    /// The counter admissions are counted by ([`Config::with_counter`] and
    /// [`Config::count_tokens`]).
    fn token_counter(&self) -> Option<&'static dyn TokenCounter> {
        self.cfg.counter.filter(|_| self.cfg.count_tokens)
    }

    /// The tokens of an admission: its input's (counted once, also when
    /// archived first) and its residual's.
    fn tokens(&mut self, rec: &Record, residual: &[u8]) -> Option<Tokens> {
        let c = self.token_counter()?;
        let input = match self.counted.take() {
            Some((record, n)) if record == rec.index => n,
            _ => c.count(&rec.observation),
        };
        Some(Tokens { input, output: c.count(residual) })
    }

    /// Settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Records admitted so far (the index the next one must carry).
    pub fn records(&self) -> u32 {
        self.next_record
    }

    /// Largest substitution distance used so far (`delta_hat <= delta`).
    pub fn delta_hat(&self) -> f64 {
        self.greedy.stats().delta_hat
    }

    /// L1 counters.
    pub fn l1_stats(&self) -> L1Stats {
        self.greedy.stats()
    }

    /// Bytes this session holds on the heap (L1's index and retained
    /// vectors, L0's line table, ids, call names, chunk places), from
    /// capacities: what a memory budget such as `lam serve --max-memory`
    /// counts.
    pub fn heap_bytes(&self) -> usize {
        let strings = |v: &[String]| v.iter().map(|s| s.capacity() + 24).sum::<usize>();
        let outputs = self.outputs.capacity() * (std::mem::size_of::<(u128, Vec<u32>)>() + 1) + self.outputs.values().map(|v| v.capacity() * 4).sum::<usize>();
        let newest = self.newest_of.keys().chain(self.last_run.keys()).map(|k| k.capacity() + 48).sum::<usize>();
        let homes = self.homes.capacity() * std::mem::size_of::<Home>() + self.output_of.capacity() * 16;
        let bases = self.bases.iter().map(|(k, (_, v))| k.capacity() + 56 + v.capacity() * 16).sum::<usize>();
        self.greedy.heap_bytes() + self.l0.heap_bytes() + strings(&self.ids) + strings(&self.calls) + outputs + newest + homes + bases
    }

    /// Description of the candidate index.
    pub fn index_description(&self) -> String {
        self.greedy.index().describe()
    }

    /// Digest of the deletion set so far (session index 0, `docs/digest.md`).
    pub fn digest(&self) -> &DeletionDigest {
        &self.digest
    }

    /// Unit embeddings of every retained chunk so far, in arrival order
    /// (`dim` values each): what L2 stores.
    pub fn retained_vectors(&self) -> &[f32] {
        self.greedy.retained_vectors()
    }

    /// What the admissions so far add up to (every residual counted as sent).
    pub fn totals(&self) -> SessionTotals {
        self.totals
    }

    /// Visible ids of the records admitted so far, in order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The earlier records whose lines `a`'s stubs name: each dropped
    /// chunk's representative's record, and for a line or whole-output
    /// stub every earlier record of the call it names (a name does not
    /// say which of them, so all are counted). What a context budget must
    /// keep visible while `a`'s residual is.
    pub fn refers(&self, a: &Admission) -> Vec<u32> {
        let mut out: Vec<u32> = a
            .chunks
            .iter()
            .filter_map(|c| match c.decision {
                lam_core::Decision::Dropped { representative, .. } => self.homes.get(representative as usize).map(|h| h.record),
                lam_core::Decision::Retained => None,
            })
            .collect();
        for stub in &a.stubs {
            let of = match stub {
                Stub::Lines(l) => l.from.of.as_deref(),
                Stub::Repeat(r) => Some(r.of.as_str()),
                Stub::Delta(d) => Some(d.of.as_str()),
                Stub::Chunks(_) => None,
            };
            if let Some(of) = of {
                out.extend((0..a.record).filter(|&r| self.calls[r as usize] == of));
            }
        }
        out.retain(|&r| r != a.record);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Forget `records`: the model no longer sees their residuals (a
    /// context budget replaced them by citations), so no later admission
    /// drops a chunk as a near-duplicate of theirs, names their lines, or
    /// says its output is theirs. Their ids and archive stay.
    pub fn forget(&mut self, records: &[u32]) {
        self.forgotten.extend(records.iter().copied());
        let gone = &self.forgotten;
        for (chunk, home) in self.homes.iter().enumerate() {
            if gone.contains(&home.record) {
                self.greedy.forget(chunk as u32);
            }
        }
        for &r in records {
            self.l0.forget(r);
        }
        let gone = &self.forgotten;
        for same in self.outputs.values_mut() {
            same.retain(|r| !gone.contains(r));
        }
        self.bases.retain(|_, (r, _)| !gone.contains(r));
    }

    /// Admit one arrival, chunking and encoding it with `enc` (Algorithm 1).
    pub fn admit<E: Encoder + ?Sized>(&mut self, enc: &mut E, rec: &Record) -> Result<Admission, Error> {
        self.check_next(rec)?;
        if self.cfg.order == Order::L1L0 {
            // Encode before touching the session: an encoder error leaves it as it was.
            let t = Instant::now();
            let (chunks, vectors) = embed(enc, &rec.observation)?;
            let encode_ns = t.elapsed().as_nanos() as u64;
            let mut a = self.admit_embedded(rec, &chunks, &vectors)?;
            a.encode_ns = encode_ns;
            self.totals.encode_ns += encode_ns;
            return Ok(a);
        }
        let b = self.begin(rec);
        let t = Instant::now();
        let embedded = embed(enc, b.text(rec));
        let encode_ns = t.elapsed().as_nanos() as u64;
        let a = embedded.and_then(|(chunks, vectors)| self.finish(rec, b, &chunks, &vectors));
        self.poison_on_error(rec, a).map(|mut a| {
            a.encode_ns = encode_ns;
            a.admit_ns = a.admit_ns.saturating_sub(encode_ns);
            // Counted with the whole admit time by poison_on_error; now split.
            self.totals.encode_ns += encode_ns;
            self.totals.admit_ns = self.totals.admit_ns.saturating_sub(encode_ns);
            a
        })
    }

    /// Admit one arrival whose chunks (a partition of the observation, in
    /// order) and unit embeddings (`dim` values per chunk) are given. Order
    /// `l1-l0` only. Nothing changes in the session when the input is refused.
    pub fn admit_embedded(&mut self, rec: &Record, chunks: &[Range<usize>], vectors: &[f32]) -> Result<Admission, Error> {
        if self.cfg.order != Order::L1L0 {
            return Err(Error::EmbeddingsNeedL1First);
        }
        self.check_next(rec)?;
        validate(rec.index, rec.observation.len(), chunks, vectors, self.dim)?;
        let b = self.begin(rec);
        let a = self.finish(rec, b, chunks, vectors);
        self.poison_on_error(rec, a)
    }

    /// Archive `rec` verbatim in `store` (session `session`) before anything
    /// else, then admit it with `enc`. Every stub of the admission cites the
    /// archived original with `_recall §id`, and that id resolves in `store`
    /// to the exact observation bytes. The archive records the observation's
    /// tokens by the session's counter (0 without one; counted once).
    pub fn admit_archived<E: Encoder + ?Sized, S: ObsStore + ?Sized>(
        &mut self,
        store: &mut S,
        session: &SessionId,
        enc: &mut E,
        rec: &Record,
    ) -> Result<Admission, Error> {
        self.check_next(rec)?;
        let tokens = self.token_counter().map_or(0, |c| c.count(&rec.observation));
        self.counted = Some((rec.index, tokens));
        self.archive_then_admit(store, session, enc, rec, tokens).map(|(a, _)| a)
    }

    /// The one archive -> admit -> compare path (what [`Session::admit_archived`]
    /// and the LAM-over-ARC view use): append `rec` to `store` recording
    /// `tokens`, and admit it under the visible id the archive gives it
    /// ([`IdBook::adopt`]; a session other conversations share may give a
    /// longer one than this conversation's ids alone would). An archive id
    /// that cannot be this observation's, or differs from the one it had,
    /// poisons the session. Returns the admission and what the archive recorded.
    pub fn archive_then_admit<E: Encoder + ?Sized, S: ObsStore + ?Sized>(
        &mut self,
        store: &mut S,
        session: &SessionId,
        enc: &mut E,
        rec: &Record,
        tokens: usize,
    ) -> Result<(Admission, ObsMeta), Error> {
        self.check_next(rec)?;
        let meta = store.append(session, rec, u32::try_from(tokens).unwrap_or(u32::MAX))?;
        // The archive's visible id is the one stubs cite: in a session other
        // conversations share (a proxy run's), it may differ from what this
        // conversation's ids alone would give.
        let id = ObsId::of(rec.action.as_bytes(), &rec.observation);
        if !self.book.adopt(id, &meta.shown) {
            self.poisoned = Some(rec.index);
            let operator = self.book.visible(id).to_string();
            return Err(Error::ArchiveMismatch { record: rec.index, session: session.clone(), archive: meta.shown, operator });
        }
        // `begin` takes it; whatever `admit` does, it is gone after it.
        self.known_id = Some((rec.index, id));
        let a = self.admit(enc, rec);
        self.known_id = None;
        let a = a?;
        if a.id != meta.shown {
            self.poisoned = Some(rec.index);
            return Err(Error::ArchiveMismatch { record: rec.index, session: session.clone(), archive: meta.shown, operator: a.id });
        }
        Ok((a, meta))
    }

    fn check_next(&self, rec: &Record) -> Result<(), Error> {
        if let Some(record) = self.poisoned {
            return Err(Error::Poisoned { record });
        }
        if rec.index != self.next_record {
            return Err(Error::OutOfOrder { expected: self.next_record, got: rec.index });
        }
        Ok(())
    }

    /// Every admission passes here once: an error poisons the session, a
    /// success is counted in [`Session::totals`].
    fn poison_on_error(&mut self, rec: &Record, r: Result<Admission, Error>) -> Result<Admission, Error> {
        match &r {
            Ok(a) => self.totals.add(a),
            Err(_) => self.poisoned = Some(rec.index),
        }
        r
    }

    /// The first half of the per-record function: the record's id and, in
    /// the `l0-l1` order, L0 over the raw observation.
    pub(crate) fn begin(&mut self, rec: &Record) -> Begun {
        let started = Instant::now();
        let record = self.next_record;
        self.next_record += 1;
        let oid = match self.known_id.take() {
            Some((r, id)) if r == rec.index => id,
            _ => ObsId::of(rec.action.as_bytes(), &rec.observation),
        };
        let id = self.book.visible(oid).to_string();
        self.ids.push(id.clone());
        let (call, key) = lam_core::action::referent_and_key(&rec.action);
        self.calls.push(call.clone());
        let action = xxh3_128(key.as_bytes());
        let before = self.last_run.insert(call.clone(), (record, action));
        let rerun = before.is_some_and(|(k, a)| a == action && !self.forgotten.contains(&k));
        let l0_first = (self.cfg.order == Order::L0L1).then(|| {
            let mut r0 = Vec::with_capacity(rec.observation.len());
            self.l0.rerun(rerun);
            let st = self.l0.process(record, &id, &call, &[Segment::Text(&rec.observation)], &mut r0);
            (r0, self.l0.last_stubs().to_vec(), st)
        });
        Begun { record, id, call, started, l0_first, rerun }
    }

    /// The second half: L1 over the chunks of [`Begun::text`], then L0 (or,
    /// in `l0-l1`, the rendering of L1's stubs into what L0 left).
    pub(crate) fn finish(&mut self, rec: &Record, b: Begun, chunks: &[Range<usize>], vectors: &[f32]) -> Result<Admission, Error> {
        let text = b.text(rec);
        validate(b.record, text.len(), chunks, vectors, self.dim)?;
        let (segs, outcomes) = self.l1(&b, text, chunks, vectors)?;
        let earlier = self.repeated(&rec.observation, b.record);
        let delta_on = self.cfg.delta && self.cfg.order == Order::L1L0 && self.cfg.residual == Residual::Faithful;
        let keys = delta_on.then(|| crate::delta::keys(&rec.observation));
        if let Some(stub) = self.whole_repeat(rec, &b, earlier, &outcomes) {
            if let Some(keys) = keys {
                self.bases.insert(b.call.clone(), (b.record, keys));
            }
            return Ok(self.repeat_admission(rec, b, stub, outcomes, vectors));
        }
        let mut residual = Vec::with_capacity(text.len());
        let retained: Vec<&ChunkOutcome> = outcomes.iter().filter(|o| !o.decision.is_dropped()).collect();
        let ranges: Vec<Range<usize>> = retained.iter().map(|o| o.range.clone()).collect();
        let every = if b.l0_first.is_some() { Every::Every } else { Every::First };
        let r = segments::Record {
            id: &b.id,
            text,
            calls: &self.calls,
            counter: self.cfg.counter,
            how: self.cfg.recall,
            recall: every,
            plain: self.cfg.diagnostics,
        };
        let segs = match self.cfg.residual {
            Residual::Paper => segs,
            // What the model has not seen reaches it: the whole text goes
            // to the second layer (L0 or verbatim), which replaces only
            // lines the model can read, line for line.
            Residual::Faithful => segments::whole(text),
        };
        let (l0, stubs, first_layer_plain, spans) = match &b.l0_first {
            None => {
                // L0 writes every stub line, in residual order, and puts the
                // recall on the first.
                self.l0.rerun(b.rerun);
                let mut w = self.l0.writer(b.record, &b.id, &b.call, &mut residual);
                let c = segments::compose(&r, segs, &mut w, &ranges);
                let l0 = w.finish();
                let mut stubs = self.l0.last_stubs().to_vec();
                if let Some(keys) = keys {
                    if let Some((d, text)) = self.delta(rec, &b, &keys, &stubs, &outcomes, &residual) {
                        // The model reads the delta: L0 takes its lines as the record's.
                        self.l0.forwarded_as(b.record, &text, &d.stub_lines());
                        residual = text;
                        stubs = vec![Stub::Delta(d)];
                    }
                    self.bases.insert(b.call.clone(), (b.record, keys));
                }
                (l0, stubs, c.plain, c.spans)
            }
            Some((r0, l0_stubs, l0)) => {
                let mut p = Plain::new(&mut residual, self.cfg.recall);
                let c = segments::compose(&r, segs, &mut p, &ranges);
                let lines: Vec<String> = l0_stubs.iter().map(|s| s.with(self.cfg.recall).to_string()).collect();
                let mut stubs = l0_stubs.clone();
                stubs.extend(p.written);
                let plain = if self.cfg.diagnostics { segments::strip_lines(r0, &lines) } else { Vec::new() };
                (*l0, stubs, plain, c.spans)
            }
        };
        for (o, lines) in retained.iter().zip(spans) {
            self.homes[o.index as usize].lines = lines;
        }
        let admit_ns = b.started.elapsed().as_nanos() as u64;
        let tokens = self.tokens(rec, &residual);
        Ok(Admission {
            record: b.record,
            id: b.id,
            residual,
            chunks: outcomes,
            stubs,
            l0,
            first_layer_plain,
            vectors: self.diagnostic_vectors(vectors),
            tokens,
            encode_ns: 0,
            admit_ns,
        })
    }

    /// The delta residual of a record ([`Config::delta`]), when it costs
    /// fewer tokens (bytes without a counter) than L0's `residual`: against
    /// the newest earlier output of its own call, of a call L0's stubs name,
    /// or of an L1 representative's call, whichever is shortest.
    fn delta(
        &self,
        rec: &Record,
        b: &Begun,
        keys: &[u128],
        stubs: &[Stub],
        outcomes: &[ChunkOutcome],
        residual: &[u8],
    ) -> Option<(lam_core::stub::DeltaStub, Vec<u8>)> {
        let mut calls: Vec<&str> = vec![b.call.as_str()];
        let reps = outcomes.iter().filter_map(|o| match o.decision {
            Decision::Dropped { representative, .. } => self.homes.get(representative as usize).map(|h| self.calls[h.record as usize].as_str()),
            Decision::Retained => None,
        });
        for c in stubs.iter().flat_map(|s| s.calls()).chain(reps) {
            if calls.len() < 4 && !calls.contains(&c) {
                calls.push(c);
            }
        }
        let lines: Vec<&[u8]> = rec.observation.split_inclusive(|&x| x == b'\n').collect();
        let mut best: Option<(lam_core::stub::DeltaStub, Vec<u8>)> = None;
        for call in calls.into_iter().filter(|c| !c.is_empty() && !c.contains('`')) {
            let Some((r, old)) = self.bases.get(call) else { continue };
            if *r >= b.record || self.forgotten.contains(r) {
                continue;
            }
            let Some(hunks) = crate::delta::hunks(old, keys, &lines) else { continue };
            let last = b.rerun && call == b.call;
            let d = lam_core::stub::DeltaStub { id: b.id.clone(), of: call.to_string(), recall: true, hunks, last };
            let mut text = Vec::new();
            crate::delta::render(&d, self.cfg.recall, &lines, &mut text);
            if best.as_ref().is_none_or(|(_, t)| text.len() < t.len()) {
                best = Some((d, text));
            }
        }
        let (d, text) = best?;
        let cheaper = match self.cfg.counter {
            Some(c) => c.count(&text) < c.count(residual),
            None => text.len() < residual.len(),
        };
        cheaper.then_some((d, text))
    }

    /// The name of an earlier call whose output `observation` repeats whole,
    /// such that the newest call of that name has this output (the model
    /// reads `same output as `NAME` above` as the newest such output): the
    /// first such call's. Then notes this record's output and name.
    fn repeated(&mut self, observation: &[u8], record: u32) -> Option<String> {
        let hash = xxh3_128(observation);
        let same = self.outputs.entry(hash).or_default();
        let name = same
            .iter()
            .map(|&r| &self.calls[r as usize])
            .find(|n| self.newest_of.get(*n).is_some_and(|&k| self.output_of[k as usize] == hash && !self.forgotten.contains(&k)))
            .cloned();
        same.push(record);
        self.output_of.push(hash);
        self.newest_of.insert(self.calls[record as usize].clone(), record);
        name
    }

    /// The one line that stands in a record whose output repeats record
    /// `earlier`'s whole (default order), when L1 dropped every chunk and
    /// the line costs fewer tokens than the output.
    fn whole_repeat(&self, rec: &Record, b: &Begun, earlier: Option<String>, outcomes: &[ChunkOutcome]) -> Option<Stub> {
        let all_dropped = !outcomes.is_empty() && outcomes.iter().all(|c| c.decision.is_dropped());
        let of = earlier.filter(|_| self.cfg.order == Order::L1L0 && all_dropped)?;
        let last = b.rerun && of == b.call;
        let stub = Stub::Repeat(RepeatStub { id: b.id.clone(), of, recall: true, last });
        let line = stub.with(self.cfg.recall).to_string();
        worth_replacing(self.cfg.counter, line.len(), || line.clone(), 1, &rec.observation).then_some(stub)
    }

    /// The admission of a whole repeat: its residual is the stub's line (L0 does not see it).
    fn repeat_admission(&mut self, rec: &Record, b: Begun, stub: Stub, chunks: Vec<ChunkOutcome>, vectors: &[f32]) -> Admission {
        let mut residual = stub.with(self.cfg.recall).to_string().into_bytes();
        residual.push(b'\n');
        let admit_ns = b.started.elapsed().as_nanos() as u64;
        let tokens = self.tokens(rec, &residual);
        let stubs = vec![stub];
        Admission {
            record: b.record,
            id: b.id,
            residual,
            chunks,
            stubs,
            l0: L0Stats::default(),
            first_layer_plain: Vec::new(),
            vectors: self.diagnostic_vectors(vectors),
            tokens,
            encode_ns: 0,
            admit_ns,
        }
    }

    /// L1: decide every chunk in order.
    /// The chunk vectors an admission carries: all of them with
    /// [`Config::diagnostics`], else none.
    fn diagnostic_vectors(&self, vectors: &[f32]) -> Vec<f32> {
        if self.cfg.diagnostics { vectors.to_vec() } else { Vec::new() }
    }

    fn l1(&mut self, b: &Begun, text: &[u8], chunks: &[Range<usize>], vectors: &[f32]) -> Result<(Vec<Seg>, Vec<ChunkOutcome>), Error> {
        let mut segs = Vec::new();
        let mut outcomes = Vec::with_capacity(chunks.len());
        if chunks.is_empty() && !text.is_empty() {
            segs.push(Seg::Text(0..text.len()));
        }
        for (k, (range, v)) in chunks.iter().zip(vectors.chunks_exact(self.dim.max(1))).enumerate() {
            let index = self.homes.len() as u32;
            let decision = self.greedy.decide(index, v)?;
            self.homes.push(Home { record: b.record, ordinal: k as u32, lines: (0, 0) });
            match decision {
                Decision::Retained => segments::push_text(&mut segs, range),
                Decision::Dropped { representative, .. } => {
                    self.digest.push(0, index);
                    let home = self.homes[representative as usize];
                    let rep = match home.record == b.record {
                        true => Rep::Here(chunks[home.ordinal as usize].clone()),
                        false => Rep::Earlier { record: home.record, lines: home.lines },
                    };
                    segs.push(Seg::Dropped(Dropped { range: range.clone(), ordinal: k as u32, rep }));
                }
            }
            outcomes.push(ChunkOutcome { index, ordinal: k as u32, range: range.clone(), decision });
        }
        Ok((segs, outcomes))
    }
}

/// Chunk `text` with `enc` and embed every chunk (one batch).
pub(crate) fn embed<E: Encoder + ?Sized>(enc: &mut E, text: &[u8]) -> Result<(Vec<Range<usize>>, Vec<f32>), Error> {
    let mut chunks = Vec::new();
    enc.chunks(text, &mut chunks)?;
    let dim = enc.info().dim;
    let texts: Vec<&[u8]> = chunks.iter().map(|c| &text[c.clone()]).collect();
    let mut v = vec![0.0f32; texts.len() * dim];
    enc.encode_batch(&texts, &mut v)?;
    Ok((chunks, v))
}

/// Chunks partition `len` bytes in order, and every vector is a finite unit
/// vector of dimension `dim`: checked before any state changes.
fn validate(record: u32, len: usize, chunks: &[Range<usize>], vectors: &[f32], dim: usize) -> Result<(), Error> {
    let bad = |reason: String| Error::BadChunks { record, reason };
    if vectors.len() != chunks.len() * dim {
        return Err(lam_core::Error::Dimension { expected: chunks.len() * dim, got: vectors.len() }.into());
    }
    let mut at = 0;
    for (k, c) in chunks.iter().enumerate() {
        if c.start != at || c.end < c.start {
            return Err(bad(format!("chunk {} is {c:?}, expected it to start at byte {at}", k + 1)));
        }
        at = c.end;
    }
    if !chunks.is_empty() && at != len {
        return Err(bad(format!("the chunks end at byte {at} of {len}")));
    }
    for (k, v) in vectors.chunks_exact(dim.max(1)).enumerate() {
        check_unit(v).map_err(|reason| lam_core::Error::InvalidVector { what: format!("record {record} chunk {}", k + 1), reason })?;
    }
    Ok(())
}
