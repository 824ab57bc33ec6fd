//! L0 of LAM: exact line deduplication with xxHash3.
//!
//! [`LineDedup`] holds one session's residual-line table. Each observation's
//! surviving text (after L1) is fed as [`Segment`]s; a non-blank line whose
//! exact bytes are already present in the session's residual text is replaced,
//! and runs of consecutive replaced lines collapse into one stub line:
//!
//! ```text
//! [lam: 12 repeated lines, first at §a1b2c3d4:40; _recall §e5f6a7b8]
//! ```
//!
//! Rules (documented in `ARCHITECTURE.md`, invariant "L0 stubs point at text"):
//! - a line is the bytes up to and excluding `\n`; the last line may lack one;
//! - only lines already present in the residual are replaced, so the cited
//!   location (`record id : 1-based residual line`) holds readable text;
//! - blank (whitespace-only) lines are never replaced alone, but blank lines
//!   between two replaced lines join the run;
//! - a run is replaced only when it holds at least twice the stub's bytes
//!   (stub ids cost about twice the tokens per byte of code), so L0 never
//!   lengthens the text and, in practice, shortens it in tokens too;
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
//! assert_eq!(out, b"[lam: 40 repeated lines, first at \xc2\xa7a1b2c3d4:1; _recall \xc2\xa7e5f6a7b8]\n");
//! ```
#![warn(missing_docs)]

use lam_core::stub::{LineStub, line_stub_len};
use nohash_hasher::BuildNoHashHasher;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use xxhash_rust::xxh3::xxh3_64;

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
    /// A stub line produced by an earlier layer (no trailing newline).
    Stub(&'a str),
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
    stubs: Vec<LineStub>,
}

/// A line to be emitted or replaced.
struct Pending<'a> {
    first: Option<LineLoc>,
    lines: Vec<&'a [u8]>,
    replaced: u64,
    trailing_blanks: usize,
}

impl<'a> Pending<'a> {
    fn new() -> Self {
        Self { first: None, lines: Vec::new(), replaced: 0, trailing_blanks: 0 }
    }
    fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// Writer for one record's residual that counts its lines.
struct Out<'o> {
    buf: &'o mut Vec<u8>,
    start: usize,
    line: u32,
}

impl Out<'_> {
    fn write_text(&mut self, bytes: &[u8]) {
        self.line += memchr::memchr_iter(b'\n', bytes).count() as u32;
        self.buf.extend_from_slice(bytes);
    }
    fn write_stub(&mut self, line: &str) {
        if self.buf.len() > self.start && self.buf.last() != Some(&b'\n') {
            self.buf.push(b'\n');
            self.line += 1;
        }
        self.buf.extend_from_slice(line.as_bytes());
        self.buf.push(b'\n');
        self.line += 1;
    }
}

#[inline]
fn is_blank(line: &[u8]) -> bool {
    // Fast path: most lines start with a visible character.
    match line.first() {
        None => true,
        Some(&b) if b > b' ' => false,
        _ => line.iter().all(|b| b.is_ascii_whitespace()),
    }
}

impl LineDedup {
    /// An empty session.
    pub fn new() -> Self {
        Self::default()
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
        self.ids[record as usize] = this_id.to_string();
        self.stubs.clear();
        if self.seen.capacity() == 0 {
            // Sessions hold thousands of distinct lines; skip the small-table growth steps.
            self.seen.reserve(4096);
        }
        let mut stats = L0Stats::default();
        let start = out.len();
        let mut w = Out { buf: out, start, line: 0 };
        let mut run = Pending::new();
        for seg in segments {
            match *seg {
                Segment::Stub(s) => {
                    self.flush(&mut run, this_id, &mut w, &mut stats);
                    w.write_stub(s);
                }
                Segment::Text(text) => {
                    // Kept bytes are copied lazily, as whole spans: `copy_from`
                    // is the first byte of `text` not yet written or queued.
                    let mut copy_from = 0;
                    let mut pos = 0;
                    while pos < text.len() {
                        let next = match memchr::memchr(b'\n', &text[pos..]) {
                            Some(i) => pos + i + 1,
                            None => text.len(),
                        };
                        let line = &text[pos..next];
                        let nl = u32::from(line.last() == Some(&b'\n'));
                        let key = &line[..line.len() - nl as usize];
                        if is_blank(key) {
                            if run.is_empty() {
                                w.line += nl;
                            } else {
                                run.lines.push(line);
                                run.trailing_blanks += 1;
                                copy_from = next;
                            }
                            pos = next;
                            continue;
                        }
                        match self.seen.entry(xxh3_64(key)) {
                            Entry::Occupied(e) => {
                                if run.is_empty() {
                                    w.buf.extend_from_slice(&text[copy_from..pos]);
                                    run.first = Some(*e.get());
                                }
                                run.lines.push(line);
                                run.trailing_blanks = 0;
                                run.replaced += 1;
                                copy_from = next;
                            }
                            Entry::Vacant(e) => {
                                if !run.is_empty() {
                                    Self::flush_run(&self.ids, &mut self.stubs, &mut run, this_id, &mut w, &mut stats);
                                }
                                e.insert(LineLoc { record, line: w.line + 1 });
                                w.line += nl;
                            }
                        }
                        pos = next;
                    }
                    w.buf.extend_from_slice(&text[copy_from..]);
                }
            }
        }
        self.flush(&mut run, this_id, &mut w, &mut stats);
        stats
    }

    /// The stub lines emitted by the last call to [`Self::process`].
    pub fn last_stubs(&self) -> &[LineStub] {
        &self.stubs
    }

    fn flush(&mut self, run: &mut Pending<'_>, this_id: &str, w: &mut Out<'_>, stats: &mut L0Stats) {
        if !run.is_empty() {
            Self::flush_run(&self.ids, &mut self.stubs, run, this_id, w, stats);
        }
    }

    fn flush_run(ids: &[String], stubs: &mut Vec<LineStub>, run: &mut Pending<'_>, this_id: &str, w: &mut Out<'_>, stats: &mut L0Stats) {
        let keep = run.lines.len() - run.trailing_blanks;
        let (body, tail) = run.lines.split_at(keep);
        let bytes: usize = body.iter().map(|l| l.len()).sum();
        let first = run.first.expect("a run starts with a replaced line");
        let first_id = &ids[first.record as usize];
        // Replace a run only when it is at least twice the stub's bytes: a
        // stub is mostly hex ids, which cost about twice as many cl100k tokens
        // per byte as code, so a shorter run would grow the prompt in tokens
        // (measured by `lam eval`: net removal rises, gross falls). Short runs
        // stay verbatim (their lines are already in the residual, so the
        // table needs no update).
        let stub_len = line_stub_len(run.replaced, first_id, first.line, this_id);
        if 2 * (stub_len + 1) <= bytes {
            let stub = LineStub { id: this_id.to_string(), lines: run.replaced, first_id: first_id.clone(), first_line: first.line };
            w.write_stub(&stub.to_string());
            stubs.push(stub);
            stats.lines_replaced += run.replaced;
            stats.bytes_replaced += bytes as u64;
            stats.stubs += 1;
        } else {
            for l in body {
                w.write_text(l);
            }
        }
        for l in tail {
            w.write_text(l);
        }
        *run = Pending::new();
    }
}

#[cfg(test)]
mod tests;
