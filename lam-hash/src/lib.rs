//! L0 of LAM: exact line deduplication with xxHash3.
//!
//! [`LineDedup`] holds one session's residual-line table. Each observation's
//! surviving text (after L1) is fed as [`Segment`]s; a non-blank line whose
//! exact bytes are already present in the session's residual text is replaced,
//! and runs of consecutive replaced lines collapse into one stub line:
//!
//! ```text
//! [lam: lines 40-51 of `cat src/app.py`; _recall §e5f6]
//! ```
//!
//! Rules (documented in `ARCHITECTURE.md`, invariant "L0 stubs point at text"):
//! - a line is the bytes up to and excluding `\n`; the last line may lack one;
//! - only lines the model can read in the session's residuals are
//!   replaced, so the cited place (the call whose output holds them, or
//!   this output above the stub, and its lines there: by their printed line
//!   numbers in a numbered listing, else counted from 1 in that residual,
//!   `lam_core::expand::place_of`) holds readable text;
//! - blank (whitespace-only) lines are never replaced alone, but blank lines
//!   between two replaced lines join the run;
//! - a run repeats one stretch of one residual line for line (blank lines
//!   where it has blank lines), so its stub names it exactly: `lines
//!   40-52 of `cat a.py``. It is the longest such stretch starting at one of
//!   the newest [`MAX_STARTS`] visible copies of its first line (greedy, line
//!   by line, like an LZ77 parse over lines): a file read again is one run
//!   even where some of its lines were first seen in other outputs. Of the
//!   copies that repeat the whole run the stub names the call the record's
//!   stub line above named (written `lines 60-72 ditto`), else this
//!   output's, else the call with the shortest name, the newest of equals;
//! - a run is replaced only when its stub costs fewer tokens than the run
//!   (`lam_core::stub::worth_replacing`: by the session's token counter, or
//!   without one when the run holds at least twice the stub's bytes), so L0
//!   never lengthens the text;
//! - a run right after a stub line (nothing written between them) that
//!   repeats lines of the same output with the same shift joins that line
//!   as a further span (`lines 1-4,7-12 of `cat a.py``) when the line still
//!   reads back exactly and the span is worth its bytes;
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
//! assert_eq!(out, "[lam: lines 1-40 of `cat src/lib.rs`; _recall §e5f6]\n".as_bytes());
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use lam_core::TokenCounter;
use lam_core::stub::{Recall, Stub};
use nohash_hasher::BuildNoHashHasher;
use std::collections::HashMap;
use stubs::{How, Stubs};
use table::{Cand, Table, put};
use writer::{LineMap, Out};
use xxhash_rust::xxh3::xxh3_64;

mod lines;
pub mod naive;
mod stubs;
mod table;
mod tag;
mod writer;

pub use table::MAX_STARTS;
pub use writer::Writer;

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
#[derive(Debug, Default, Clone)]
pub struct LineDedup {
    table: Table,
    /// Each record's call name (`lam_core::action::referent`), as its
    /// index in `names` (`u32::MAX`: not written).
    calls: Vec<u32>,
    /// Every distinct call name of the session, once.
    names: Vec<String>,
    stubs: Stubs,
    /// The places the open run may repeat, newest first (scratch).
    cands: Vec<Cand>,
    /// The open run's line tags (scratch), so a run kept verbatim is not
    /// hashed twice.
    run_tags: Vec<u64>,
    /// The open run's line numbers, beside `run_tags`.
    run_numbers: Vec<u32>,
    /// The spans of the record's last stub line while a run right after it
    /// may join it ([`Writer::merge`]): each as named, and its lines.
    merge_spans: Vec<((u32, u32), std::ops::Range<usize>)>,
    counter: Option<&'static dyn TokenCounter>,
    recall: Recall<'static>,
    /// Each distinct call name's index in `names` (its group,
    /// `Table::group`), by the name's xxh3.
    groups: HashMap<u64, u32, BuildNoHashHasher<u64>>,
    /// The call the record's last stub line named (`Stub::ditto_call`): a
    /// stub naming that call again is written `ditto`.
    above: Option<String>,
    /// Never write `ditto` ([`LineDedup::without_ditto`]).
    no_ditto: bool,
    /// The next record written runs the action of the newest earlier record
    /// of its name again ([`LineDedup::rerun`]).
    rerun: bool,
}

impl LineDedup {
    /// Bytes this L0 holds on the heap (its line table, call names, name
    /// groups), from capacities: what a memory budget counts.
    pub fn heap_bytes(&self) -> usize {
        let names: usize = self.names.iter().map(|c| c.capacity() + 24).sum::<usize>() + self.calls.capacity() * 4 + self.groups.capacity() * 13;
        self.table.heap_bytes() + names + self.stubs.all.capacity() * std::mem::size_of::<Stub>()
    }

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

    /// Name every stub's call in full, never `ditto` (the `l0-l1` ablation:
    /// L1 may drop the stub line a `ditto` refers to).
    pub fn without_ditto(mut self) -> Self {
        self.no_ditto = true;
        self
    }

    /// Say that the next record written ([`Self::process`], [`Self::writer`])
    /// runs again the action of the newest earlier record of its call name
    /// (the operator knows actions; L0 knows names): its stubs name that
    /// output `of its last output` instead of `` of `CALL` `` (a command
    /// run again, a file read again; `docs/stubs.md`). Holds for that one
    /// record.
    pub fn rerun(&mut self, yes: bool) {
        self.rerun = yes;
    }

    /// Record `record`, the last one written, was forwarded as `residual`
    /// (the difference form, `docs/stubs.md`) instead of what L0 wrote: its
    /// lines are now those, `stub_lines` (1-based, ascending) being stub
    /// lines, so later stubs name its text lines and, where it holds no
    /// text, older outputs of its name, as the model reads them. Any other
    /// record is forgotten ([`Self::forget`]).
    pub fn forwarded_as(&mut self, record: u32, residual: &[u8], stub_lines: &[u32]) {
        if record + 1 == self.table.records {
            self.table.relay(record, residual, stub_lines);
        } else {
            self.forget(record);
        }
    }

    /// Forget record `record`'s residual lines: the model no longer sees
    /// them (a context budget cited the observation), so no later stub
    /// names them. A line seen only there is new again when it next comes.
    pub fn forget(&mut self, record: u32) {
        self.table.forget(record);
    }

    /// Number of distinct non-blank lines in the residual so far.
    pub fn distinct_lines(&self) -> usize {
        self.table.seen.len()
    }

    /// How stubs name record `record`'s call (empty: not seen, or no name).
    pub fn call(&self, record: u32) -> &str {
        self.calls.get(record as usize).and_then(|&g| self.names.get(g as usize)).map_or("", String::as_str)
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
        let group = self.group_of(this_call);
        put(&mut self.calls, record, group, u32::MAX);
        self.stubs.live = 0;
        self.above = None;
        let rerun = std::mem::take(&mut self.rerun);
        self.table.begin(record, group);
        let start = out.len();
        Writer {
            d: self,
            record,
            id: this_id,
            w: Out { buf: out, start, line: 0, stubs: 0 },
            stats: L0Stats::default(),
            map: LineMap { on: true, lines: Vec::new() },
            shortest: [None; 4],
            rerun,
            merge: None,
        }
    }

    /// Every stub line of the last record written, in residual order: its
    /// own line stubs and the stubs it was given, each with the recall as
    /// written (the first one carries it).
    pub fn last_stubs(&self) -> &[Stub] {
        &self.stubs.all[..self.stubs.live]
    }

    /// The index of call name `call` in `names`, added when new.
    fn group_of(&mut self, call: &str) -> u32 {
        let next = self.names.len() as u32;
        let g = *self.groups.entry(xxh3_64(call.as_bytes())).or_insert(next);
        if g != next && self.names[g as usize] == call {
            return g;
        }
        // New, or (never seen yet) another name with the same hash: scanned for.
        match self.names.iter().position(|n| n == call) {
            Some(i) => i as u32,
            None => {
                self.names.push(call.to_string());
                next
            }
        }
    }

    fn set_above(&mut self, call: Option<&str>) {
        match call {
            Some(c) => c.clone_into(self.above.get_or_insert_default()),
            None => self.above = None,
        }
    }

    fn how(&self) -> How {
        How { counter: self.counter, recall: self.recall }
    }
}

#[cfg(test)]
mod tests;
