//! L0 of LAM: exact line deduplication with xxHash3.
//!
//! [`LineDedup`] holds one session's residual-line table. Each observation's
//! surviving text (after L1) is fed as [`Segment`]s; a non-blank line whose
//! exact bytes are already present in the session's residual text is replaced,
//! and runs of consecutive replaced lines collapse into one stub line:
//!
//! ```text
//! [lam: 12 lines from §a1b2c3d4:40; _recall §e5f6a7b8]
//! ```
//!
//! Rules (documented in `ARCHITECTURE.md`, invariant "L0 stubs point at text"):
//! - a line is the bytes up to and excluding `\n`; the last line may lack one;
//! - only lines already present in the residual are replaced, so the cited
//!   location (`record id : 1-based residual line`) holds readable text;
//! - blank (whitespace-only) lines are never replaced alone, but blank lines
//!   between two replaced lines join the run;
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
//! d.process(0, "a1b2c3d4", &[Segment::Text(file.as_bytes())], &mut out);
//! assert_eq!(out, file.as_bytes()); // nothing seen before
//! out.clear();
//! let st = d.process(1, "e5f6a7b8", &[Segment::Text(file.as_bytes())], &mut out);
//! assert_eq!(st.lines_replaced, 40);
//! assert_eq!(out, b"[lam: 40 lines from \xc2\xa7a1b2c3d4:1; _recall \xc2\xa7e5f6a7b8]\n");
//! ```
#![warn(missing_docs)]

use lam_core::TokenCounter;
use lam_core::stub::{LineStub, Recall, Stub, line_stub_len, worth_replacing};
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
    ids: Vec<String>,
    stubs: Vec<Stub>,
    counter: Option<&'static dyn TokenCounter>,
    recall: Recall<'static>,
}

/// A run of replaceable lines within one text segment: `start..body_end`
/// ends with the last repeated line, `body_end..end` are blank lines after it.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: LineLoc,
    start: usize,
    body_end: usize,
    end: usize,
    replaced: u64,
    /// Newlines in `start..body_end` and in `start..end`.
    body_newlines: u32,
    newlines: u32,
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

    /// Process the surviving text of record `record` (visible id `this_id`,
    /// records numbered densely from 0 in arrival order), appending its
    /// residual to `out`.
    pub fn process(&mut self, record: u32, this_id: &str, segments: &[Segment<'_>], out: &mut Vec<u8>) -> L0Stats {
        if self.ids.len() <= record as usize {
            self.ids.resize(record as usize + 1, String::new());
        }
        this_id.clone_into(&mut self.ids[record as usize]);
        self.stubs.clear();
        if self.seen.capacity() == 0 {
            // Sessions hold thousands of distinct lines; skip the small-table growth steps.
            self.seen.reserve(4096);
        }
        let mut stats = L0Stats::default();
        let start = out.len();
        let mut w = Out { buf: out, start, line: 0, stubs: 0 };
        for seg in segments {
            match *seg {
                Segment::Stub(s) => {
                    let mut s = s.clone();
                    s.set_recall(w.stubs == 0);
                    w.write_stub(&s.with(self.recall));
                    self.stubs.push(s);
                }
                Segment::Text(text) => self.text(record, this_id, text, &mut w, &mut stats),
            }
        }
        stats
    }

    /// Every stub line of the last call to [`Self::process`], in residual
    /// order: its own line stubs and the stubs it was given, each with the
    /// recall as written (the first one carries it).
    pub fn last_stubs(&self) -> &[Stub] {
        &self.stubs
    }

    fn text(&mut self, record: u32, this_id: &str, text: &[u8], w: &mut Out<'_>, stats: &mut L0Stats) {
        // Kept bytes are copied lazily, as whole spans: `copy_from` is the
        // first byte of `text` not yet written or queued in `run`.
        let mut copy_from = 0;
        let mut pos = 0;
        let mut run: Option<Run> = None;
        let mut newlines = lines::Newlines::new(text);
        let how = self.how();
        while pos < text.len() {
            let (next, nl) = match newlines.next() {
                Some(i) => (i + 1, 1u32),
                None => (text.len(), 0),
            };
            let key = &text[pos..next - nl as usize];
            if is_blank(key) {
                match run.as_mut() {
                    None => w.line += nl,
                    Some(r) => {
                        r.end = next;
                        r.newlines += nl;
                        copy_from = next;
                    }
                }
                pos = next;
                continue;
            }
            match self.seen.entry(xxh3_64(key)) {
                Entry::Occupied(e) => {
                    match run.as_mut() {
                        None => {
                            w.buf.extend_from_slice(&text[copy_from..pos]);
                            run = Some(Run { first: *e.get(), start: pos, body_end: next, end: next, replaced: 1, body_newlines: nl, newlines: nl });
                        }
                        Some(r) => {
                            r.body_end = next;
                            r.end = next;
                            r.replaced += 1;
                            r.newlines += nl;
                            r.body_newlines = r.newlines;
                        }
                    }
                    copy_from = next;
                }
                Entry::Vacant(e) => {
                    if let Some(r) = run.take() {
                        flush(how, &self.ids, &mut self.stubs, r, text, this_id, w, stats);
                    }
                    e.insert(LineLoc { record, line: w.line + 1 });
                    w.line += nl;
                }
            }
            pos = next;
        }
        if let Some(r) = run.take() {
            flush(how, &self.ids, &mut self.stubs, r, text, this_id, w, stats);
        }
        w.buf.extend_from_slice(&text[copy_from..]);
    }

    fn how(&self) -> How {
        How { counter: self.counter, recall: self.recall }
    }
}

/// How L0 judges and writes a stub: the token counter and the recall handle.
#[derive(Clone, Copy)]
struct How {
    counter: Option<&'static dyn TokenCounter>,
    recall: Recall<'static>,
}

/// Replace a run by a stub when the stub costs fewer tokens than the run
/// (`worth_replacing`); otherwise keep it verbatim (its lines are already in
/// the residual, so the table needs no update).
#[allow(clippy::too_many_arguments)]
fn flush(how: How, ids: &[String], stubs: &mut Vec<Stub>, r: Run, text: &[u8], this_id: &str, w: &mut Out<'_>, stats: &mut L0Stats) {
    let body = &text[r.start..r.body_end];
    let first_id = &ids[r.first.record as usize];
    let recall = w.stubs == 0;
    let len = line_stub_len(r.replaced, first_id, r.first.line, this_id, recall, how.recall);
    let make = || Stub::Lines(LineStub { id: this_id.to_string(), lines: r.replaced, first_id: first_id.clone(), first_line: r.first.line, recall });
    let newlines = 1 + usize::from(w.mid_line());
    if worth_replacing(how.counter, len, || make().with(how.recall).to_string(), newlines, body) {
        let stub = make();
        w.write_stub(&stub.with(how.recall));
        stubs.push(stub);
        stats.lines_replaced += r.replaced;
        stats.bytes_replaced += body.len() as u64;
        stats.stubs += 1;
    } else {
        w.write_text(body, r.body_newlines);
    }
    w.write_text(&text[r.body_end..r.end], r.newlines - r.body_newlines);
}

#[cfg(test)]
mod tests;
