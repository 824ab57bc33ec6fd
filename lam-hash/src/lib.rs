//! L0 of LAM: exact line deduplication with xxHash3.
//!
//! [`LineDedup`] holds one session's residual-line table. Each observation's
//! surviving text (after L1) is fed as [`Segment`]s; a non-blank line whose
//! exact bytes are already present in the session's residual text is replaced,
//! and runs of consecutive replaced lines collapse into one stub line:
//!
//! ```text
//! [lam: same as lines 40-51 of `cat src/app.py`; _recall §e5f6]
//! ```
//!
//! Rules (documented in `ARCHITECTURE.md`, invariant "L0 stubs point at text"):
//! - a line is the bytes up to and excluding `\n`; the last line may lack one;
//! - only lines already present in the residual are replaced, so the cited
//!   location (the call whose output holds the first of them, or this
//!   output, and its 1-based line in that residual) holds readable text;
//! - blank (whitespace-only) lines are never replaced alone, but blank lines
//!   between two replaced lines join the run;
//! - a run repeats one stretch of one residual line for line (its lines
//!   first seen there, one after the other, blank lines where it has blank
//!   lines), so its stub names it exactly: `same as lines 40-52 of `cat
//!   a.py``; a line first seen elsewhere starts a new run;
//! - a run is replaced only when its stub costs fewer tokens than the run
//!   (`lam_core::stub::worth_replacing`: by the session's token counter, or
//!   without one when the run holds at least twice the stub's bytes), so L0
//!   never lengthens the text;
//! - the first stub line of a record carries its `_recall §id`, later ones
//!   do not (`docs/stubs.md`);
//! - lines inside L1 stubs are not hashed.
//!
//! ```
//! use lam_hash::{LineDedup, Segment};
//!
//! let mut d = LineDedup::new();
//! let file: String = (0..40).map(|i| format!("    let value_{i} = compute(input, {i});\n")).collect();
//! let mut out = Vec::new();
//! d.process(0, "a1b2", "cat src/lib.rs", &[Segment::Text(file.as_bytes())], &mut out);
//! assert_eq!(out, file.as_bytes()); // nothing seen before
//! out.clear();
//! let st = d.process(1, "e5f6", "git show HEAD:src/lib.rs", &[Segment::Text(file.as_bytes())], &mut out);
//! assert_eq!(st.lines_replaced, 40);
//! assert_eq!(out, "[lam: same as lines 1-40 of `cat src/lib.rs`; _recall §e5f6]\n".as_bytes());
//! ```
#![warn(missing_docs)]

use lam_core::TokenCounter;
use lam_core::stub::{LineStub, Place, Recall, Stub, line_stub_len, worth_replacing};
use nohash_hasher::BuildNoHashHasher;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::Write as _;
use xxhash_rust::xxh3::xxh3_64;

mod lines;
pub mod naive;

/// Where a line first appears in the residual text of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineLoc {
    /// Record index within the session.
    pub record: u32,
    /// 1-based line number within that record's residual.
    pub line: u32,
}

/// One piece of an observation's surviving text, in order.
#[derive(Debug, Clone, Copy)]
pub enum Segment<'a> {
    /// Original bytes (a contiguous range of the observation).
    Text(&'a [u8]),
    /// A stub produced by an earlier layer; L0 writes it on a line of its
    /// own, with the record's recall when it is the record's first stub.
    Stub(&'a Stub),
}

/// Counters for one record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct L0Stats {
    /// Lines replaced by stubs.
    pub lines_replaced: u64,
    /// Bytes of original text replaced.
    pub bytes_replaced: u64,
    /// Stubs emitted.
    pub stubs: u64,
}

/// One session's L0 state.
#[derive(Debug, Default)]
pub struct LineDedup {
    seen: HashMap<u64, LineLoc, BuildNoHashHasher<u64>>,
    /// How stubs name each record's call (`lam_core::action::referent`).
    calls: Vec<String>,
    stubs: Vec<Stub>,
    counter: Option<&'static dyn TokenCounter>,
    recall: Recall<'static>,
}

/// A run of replaceable lines within one text segment: `start..body_end`
/// ends with the last repeated line, `body_end..end` are blank lines after it.
#[derive(Debug, Clone)]
struct Run {
    /// The record whose residual lines `first..=last` the run repeats.
    record: u32,
    first: u32,
    last: u32,
    /// The line of that residual the run's next line must be to go on.
    expect: u32,
    start: usize,
    body_end: usize,
    end: usize,
    replaced: u64,
    /// Newlines in `start..body_end` and in `start..end`.
    body_newlines: u32,
    newlines: u32,
    /// Index in the line map of the run's first line, its lines so far,
    /// and how many of them are in `start..body_end`.
    map_at: usize,
    lines: usize,
    body_lines: usize,
}

/// Writer for one record's residual that counts its lines and stubs.
struct Out<'o> {
    buf: &'o mut Vec<u8>,
    start: usize,
    line: u32,
    stubs: usize,
}

impl Out<'_> {
    /// Write `bytes`, which hold `newlines` newlines.
    fn write_text(&mut self, bytes: &[u8], newlines: u32) {
        debug_assert_eq!(memchr::memchr_iter(b'\n', bytes).count(), newlines as usize);
        self.line += newlines;
        self.buf.extend_from_slice(bytes);
    }
    /// A stub starts a line of its own: true when one must be opened first.
    fn mid_line(&self) -> bool {
        self.buf.len() > self.start && self.buf.last() != Some(&b'\n')
    }
    /// The residual line the next stub goes on.
    fn stub_line(&self) -> u32 {
        self.line + 1 + u32::from(self.mid_line())
    }
    fn write_stub(&mut self, stub: &impl std::fmt::Display) {
        if self.mid_line() {
            self.buf.push(b'\n');
            self.line += 1;
        }
        // Formatted straight into the residual (no intermediate String).
        write!(self.buf, "{stub}").expect("writing to a Vec cannot fail");
        self.buf.push(b'\n');
        self.line += 1;
        self.stubs += 1;
    }
}

#[inline]
fn is_blank(line: &[u8]) -> bool {
    // Fast path: most lines start (or, when indented, end) with a visible character.
    match (line.first(), line.last()) {
        (None, _) => true,
        (Some(&a), Some(&z)) if a > b' ' || z > b' ' => false,
        _ => line.iter().all(|b| b.is_ascii_whitespace()),
    }
}

impl LineDedup {
    /// An empty session; stubs are judged by bytes (no token counter).
    pub fn new() -> Self {
        Self::default()
    }

    /// Judge stubs by `counter`'s tokens (`lam_core::stub::worth_replacing`).
    pub fn with_counter(mut self, counter: Option<&'static dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// Write the recall of each record's first stub line with `how`
    /// (default `_recall`; `Recall::None` writes none).
    pub fn with_recall(mut self, how: Recall<'static>) -> Self {
        self.recall = how;
        self
    }

    /// Number of distinct non-blank lines in the residual so far.
    pub fn distinct_lines(&self) -> usize {
        self.seen.len()
    }

    /// How stubs name record `record`'s call (empty: not seen, or no name).
    pub fn call(&self, record: u32) -> &str {
        self.calls.get(record as usize).map_or("", String::as_str)
    }

    /// Process the surviving text of record `record` (visible id `this_id`,
    /// its call named `this_call` as in `lam_core::action::referent`;
    /// records numbered densely from 0 in arrival order), appending its
    /// residual to `out`.
    pub fn process(&mut self, record: u32, this_id: &str, this_call: &str, segments: &[Segment<'_>], out: &mut Vec<u8>) -> L0Stats {
        let mut w = self.writer(record, this_id, this_call, out);
        w.map.on = false;
        for seg in segments {
            match *seg {
                Segment::Stub(s) => w.stub(s.clone()),
                Segment::Text(text) => w.text(text),
            }
        }
        w.finish()
    }

    /// [`Self::process`] one piece at a time: the writer of record
    /// `record`'s residual, which also tells the residual line of every
    /// line written so far ([`Writer::lines`]).
    pub fn writer<'w>(&'w mut self, record: u32, this_id: &'w str, this_call: &str, out: &'w mut Vec<u8>) -> Writer<'w> {
        if self.calls.len() <= record as usize {
            self.calls.resize(record as usize + 1, String::new());
        }
        this_call.clone_into(&mut self.calls[record as usize]);
        self.stubs.clear();
        if self.seen.capacity() == 0 {
            // Sessions hold thousands of distinct lines; skip the small-table growth steps.
            self.seen.reserve(4096);
        }
        let start = out.len();
        Writer {
            d: self,
            record,
            id: this_id,
            w: Out { buf: out, start, line: 0, stubs: 0 },
            stats: L0Stats::default(),
            map: LineMap { on: true, lines: Vec::new() },
        }
    }

    /// Every stub line of the last record written, in residual order: its
    /// own line stubs and the stubs it was given, each with the recall as
    /// written (the first one carries it).
    pub fn last_stubs(&self) -> &[Stub] {
        &self.stubs
    }

    fn how(&self) -> How {
        How { counter: self.counter, recall: self.recall }
    }
}

/// One record's residual being written by L0 ([`LineDedup::writer`]).
pub struct Writer<'w> {
    d: &'w mut LineDedup,
    record: u32,
    id: &'w str,
    w: Out<'w>,
    stats: L0Stats,
    map: LineMap,
}

/// The residual line of every input line of a record, when kept
/// ([`LineDedup::process`] needs none).
#[derive(Debug, Default)]
struct LineMap {
    on: bool,
    lines: Vec<u32>,
}

impl LineMap {
    /// The residual line of the next input line (0: filled in when its run is written).
    #[inline]
    fn mark(&mut self, line: u32) {
        if self.on {
            self.lines.push(line);
        }
    }

    fn len(&self) -> usize {
        self.lines.len()
    }
}

impl std::fmt::Debug for Writer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("record", &self.record).field("id", &self.id).field("lines", &self.w.line).finish_non_exhaustive()
    }
}

impl Writer<'_> {
    /// Write a stub produced by an earlier layer on a line of its own, with
    /// the record's recall when it is the record's first stub line.
    pub fn stub(&mut self, mut stub: Stub) {
        stub.set_recall(self.w.stubs == 0);
        self.w.write_stub(&stub.with(self.d.recall));
        self.d.stubs.push(stub);
    }

    /// Whether the residual so far ends within a line (a stub written now
    /// opens a new line first).
    pub fn mid_line(&self) -> bool {
        self.w.mid_line()
    }

    /// The residual line (1-based) of every line of the text written so
    /// far, in order: a line of each [`Self::text`] call per newline, plus
    /// its last bytes when they do not end with one. A replaced line has the
    /// line of the stub that stands in it.
    pub fn lines(&self) -> &[u32] {
        &self.map.lines
    }

    /// Stub lines written so far for this record.
    pub fn stubs(&self) -> usize {
        self.w.stubs
    }

    /// The record's L0 counters.
    pub fn finish(self) -> L0Stats {
        self.stats
    }

    /// Write original text: lines already in the session's residual become
    /// stubs where that is worth it.
    pub fn text(&mut self, text: &[u8]) {
        // Kept bytes are copied lazily, as whole spans: `copy_from` is the
        // first byte of `text` not yet written or queued in `run`.
        let mut copy_from = 0;
        let mut pos = 0;
        let mut run: Option<Run> = None;
        let mut newlines = lines::Newlines::new(text);
        let how = self.d.how();
        let d = &mut *self.d;
        let l0 = L0 { how, calls: &d.calls, record: self.record, id: self.id };
        while pos < text.len() {
            let (next, nl) = match newlines.next() {
                Some(i) => (i + 1, 1u32),
                None => (text.len(), 0),
            };
            let key = &text[pos..next - nl as usize];
            if is_blank(key) {
                match run.as_mut() {
                    None => {
                        self.map.mark(self.w.line + 1);
                        self.w.line += nl;
                    }
                    Some(r) => {
                        r.end = next;
                        r.newlines += nl;
                        r.expect += 1;
                        copy_from = next;
                        r.lines += 1;
                        self.map.mark(0);
                    }
                }
                pos = next;
                continue;
            }
            match d.seen.entry(xxh3_64(key)) {
                Entry::Occupied(e) => {
                    let loc = *e.get();
                    // A run repeats one stretch of one residual, line for line.
                    let goes_on = run.as_ref().is_some_and(|r| r.record == loc.record && r.expect == loc.line);
                    match run.as_mut() {
                        Some(r) if goes_on => {
                            r.last = loc.line;
                            r.expect = loc.line + 1;
                            r.body_end = next;
                            r.end = next;
                            r.replaced += 1;
                            r.newlines += nl;
                            r.body_newlines = r.newlines;
                            r.lines += 1;
                            r.body_lines = r.lines;
                        }
                        _ => {
                            if let Some(r) = run.take() {
                                l0.flush(&mut d.stubs, r, text, &mut self.w, &mut self.stats, &mut self.map.lines);
                            }
                            self.w.buf.extend_from_slice(&text[copy_from..pos]);
                            let map_at = self.map.len();
                            let lines = 1;
                            let (record, first) = (loc.record, loc.line);
                            run = Some(Run {
                                record,
                                first,
                                last: first,
                                expect: first + 1,
                                start: pos,
                                body_end: next,
                                end: next,
                                replaced: 1,
                                body_newlines: nl,
                                newlines: nl,
                                map_at,
                                lines,
                                body_lines: 1,
                            });
                        }
                    }
                    self.map.mark(0);
                    copy_from = next;
                }
                Entry::Vacant(e) => {
                    if let Some(r) = run.take() {
                        l0.flush(&mut d.stubs, r, text, &mut self.w, &mut self.stats, &mut self.map.lines);
                    }
                    e.insert(LineLoc { record: self.record, line: self.w.line + 1 });
                    self.map.mark(self.w.line + 1);
                    self.w.line += nl;
                }
            }
            pos = next;
        }
        if let Some(r) = run.take() {
            l0.flush(&mut d.stubs, r, text, &mut self.w, &mut self.stats, &mut self.map.lines);
        }
        self.w.buf.extend_from_slice(&text[copy_from..]);
    }
}

/// How L0 judges and writes a stub: the token counter and the recall handle.
#[derive(Clone, Copy)]
struct How {
    counter: Option<&'static dyn TokenCounter>,
    recall: Recall<'static>,
}

/// What a run's stub needs: how to judge and write it, each record's call,
/// and the record being written.
struct L0<'a> {
    how: How,
    calls: &'a [String],
    record: u32,
    id: &'a str,
}

impl L0<'_> {
    /// Replace a run by a stub when the stub costs fewer tokens than the run
    /// (`worth_replacing`); otherwise keep it verbatim (its lines are already
    /// in the residual, so the table needs no update). Either way the run's
    /// lines get their residual lines in `map`.
    fn flush(&self, stubs: &mut Vec<Stub>, r: Run, text: &[u8], w: &mut Out<'_>, stats: &mut L0Stats, map: &mut [u32]) {
        let body = &text[r.start..r.body_end];
        let of = (r.record != self.record).then(|| self.calls[r.record as usize].clone());
        let from = Place::new(of, r.first, r.last);
        let recall = w.stubs == 0;
        let len = line_stub_len(&from, self.id, recall, self.how.recall);
        let make = || Stub::Lines(LineStub { id: self.id.to_string(), from: from.clone(), recall });
        let newlines = 1 + usize::from(w.mid_line());
        let run_map = map.get_mut(r.map_at..).unwrap_or_default();
        let (body_map, tail_map) = run_map.split_at_mut(r.body_lines.min(run_map.len()));
        if worth_replacing(self.how.counter, len, || make().with(self.how.recall).to_string(), newlines, body) {
            body_map.fill(w.stub_line());
            let stub = make();
            w.write_stub(&stub.with(self.how.recall));
            stubs.push(stub);
            stats.lines_replaced += r.replaced;
            stats.bytes_replaced += body.len() as u64;
            stats.stubs += 1;
        } else {
            body_map.iter_mut().zip(w.line + 1..).for_each(|(m, l)| *m = l);
            w.write_text(body, r.body_newlines);
        }
        tail_map.iter_mut().zip(w.line + 1..).for_each(|(m, l)| *m = l);
        w.write_text(&text[r.body_end..r.end], r.newlines - r.body_newlines);
    }
}

#[cfg(test)]
mod tests;
