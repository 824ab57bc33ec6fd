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
use lam_core::stub::{LAST, LineStub, Named, Place, Recall, Stub, line_stub_len, more_span, more_span_len, worth_replacing};
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

/// A residual line is a tag and a number. The tag: [`NONE`] for a stub
/// line, [`PIECES`] for a line written in pieces (text, but no run repeats
/// it), otherwise an xxh3 whose low two bits give its kind: odd, a blank line
/// (whitespace only; compared by its exact bytes too); `..10`, a numbered
/// line (`lam_core::newlines::Numbered`: `   12→body`), whose tag is that of
/// everything but its number (the field's width, the separator, the body)
/// and whose number is kept beside it (`.110` when nothing but spaces
/// follows the number: such a line starts no run, as a blank line does);
/// `..00`, any other line. Lines without
/// a number have the number 0. Two lines are the same when tag and number
/// are; a numbered line repeats another with its number moved by `k` when
/// the tags are the same and the numbers `k` apart.
const NONE: u64 = 0;
const PIECES: u64 = 4;
/// The tag of a line of a forgotten record ([`LineDedup::forget`]): it
/// matches no line, and a newer output of the same call holding it keeps
/// an older one from being named (the model would read the name as the newer).
const GONE: u64 = 8;
/// The tag of the empty line, the most common blank line (not hashed; any odd constant).
const EMPTY: u64 = 0x2d06_8005_38d3_94c3 | 1;

/// A line's tag and number.
#[inline]
fn tag(line: &[u8]) -> (u64, u32) {
    if line.is_empty() {
        (EMPTY, 0)
    } else if is_blank(line) {
        (xxh3_64(line) | 1, 0)
    } else if let Some(n) = numbered_prefix(line) {
        let hollow = if is_blank(&line[n.width..]) { 6 } else { 2 };
        ((xxhash_rust::xxh3::xxh3_64_with_seed(&line[n.field..], n.field as u64) & !7) | hollow, n.number)
    } else {
        ((xxh3_64(line) & !3).max(8), 0)
    }
}

/// `lam_core::newlines::Numbered::of`, asked only when the first byte that
/// is not a space is a digit 1-9 (which a number prefix needs): most lines
/// are indented code, and their spaces are skipped 8 at a time.
#[inline]
fn numbered_prefix(line: &[u8]) -> Option<lam_core::newlines::Numbered> {
    let mut i = 0;
    while let Some(w) = line.get(i..i + 8) {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ 0x2020_2020_2020_2020;
        if x != 0 {
            i += (x.trailing_zeros() / 8) as usize;
            break;
        }
        i += 8;
    }
    while line.get(i) == Some(&b' ') {
        i += 1;
    }
    match line.get(i) {
        Some(b'1'..=b'9') => lam_core::newlines::Numbered::of(line),
        _ => None,
    }
}

#[cfg(test)]
mod prefix_tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn numbered_prefix_is_numbered_of(line in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'0'), Just(b'7'), Just(b'\t'), Just(0xe2), Just(0x86), Just(0x92), any::<u8>()], 0..40)) {
            prop_assert_eq!(super::numbered_prefix(&line), lam_core::newlines::Numbered::of(&line));
        }
    }
}

/// The key of a line's visible copies: its tag, mixed with its number.
#[inline]
fn exact(t: u64, number: u32) -> u64 {
    t ^ u64::from(number).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Whether a tag is a numbered line's.
#[inline]
fn numbered(t: u64) -> bool {
    t & 3 == 2
}

/// Whether a tag is a numbered line's with nothing but spaces after the number.
#[inline]
fn hollow(t: u64) -> bool {
    t & 7 == 6
}

/// Whether a tag is a blank line's.
#[inline]
fn blank(t: u64) -> bool {
    t & 1 == 1
}

/// How many visible copies of a line a run may start from: the newest
/// [`MAX_STARTS`] (part of the rule, so the naive version and the fast one
/// agree).
pub const MAX_STARTS: usize = 8;

/// Every line the model can see in the session's residuals: for each
/// distinct non-blank line its visible copies, and each residual line's tag.
#[derive(Debug, Default, Clone)]
struct Table {
    /// Each distinct non-blank line's newest visible copy (index into
    /// `copies`), by [`exact`] key.
    seen: HashMap<u64, u32, BuildNoHashHasher<u64>>,
    /// Visible copies, each with the index of the next older copy of the
    /// same line (`u32::MAX`: none).
    copies: Vec<(Cand, u32)>,
    /// Every residual line's tag, record after record, line 1 first, each
    /// record's lines after a [`NONE`] (so no run goes on past its end).
    tags: Vec<u64>,
    /// Every residual line's number, beside `tags`.
    numbers: Vec<u32>,
    /// Each distinct numbered line's newest visible copy, by its tag
    /// whatever its number (index into `ncopies`).
    nseen: HashMap<u64, u32, BuildNoHashHasher<u64>>,
    /// Visible copies of numbered lines, as `copies`.
    ncopies: Vec<(Cand, u32)>,
    /// Records begun (the last one begun is `records - 1`).
    records: u32,
    /// Where each record begun starts in `tags` (its line 1).
    bases: Vec<u32>,
    /// Each record's name group (records whose calls have the same name).
    group: Vec<u32>,
    /// Whether each record may hold a line with a printed line number
    /// (then a stub names its lines by [`lam_core::expand::place_of`]'s
    /// scan; otherwise they count from 1).
    has_numbers: Vec<bool>,
    /// Each record's previous record in its group (`u32::MAX`: none).
    prev_same: Vec<u32>,
    /// Each group's newest record before the last one begun.
    group_newest: Vec<u32>,
    /// Where the last record begun starts in `tags`.
    base: usize,
    /// Records forgotten ([`Table::forget`]): the model no longer reads
    /// them as L0 wrote them (cited, or forwarded as a difference whose
    /// lines L0 never saw), so they block older outputs of their name.
    gone: std::collections::BTreeSet<u32>,
}

/// A visible copy of a line: where it is, its index in the table's tags,
/// and how far a run repeating it moves the line numbers (0: exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cand {
    at: LineLoc,
    abs: u32,
    shift: i32,
}

impl Table {
    /// Bytes held on the heap, from capacities.
    fn heap_bytes(&self) -> usize {
        let map = |m: &HashMap<u64, u32, BuildNoHashHasher<u64>>| m.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        let copies = (self.copies.capacity() + self.ncopies.capacity()) * std::mem::size_of::<(Cand, u32)>();
        let lines = self.tags.capacity() * 8 + self.numbers.capacity() * 4;
        let records =
            (self.bases.capacity() + self.group.capacity() + self.prev_same.capacity() + self.group_newest.capacity()) * 4 + self.has_numbers.capacity();
        map(&self.seen) + map(&self.nseen) + copies + lines + records + self.gone.len() * 32
    }

    /// Index in `tags` of line `at` of the last record begun.
    #[inline]
    fn abs(&self, at: LineLoc) -> usize {
        debug_assert_eq!(at.record + 1, self.records);
        self.base + at.line as usize - 1
    }

    /// Set a line's tag and number; `at` is in the last record begun.
    #[inline(always)]
    fn set(&mut self, at: LineLoc, tag: u64, number: u32) {
        let i = self.abs(at);
        if number != 0 {
            self.has_numbers[at.record as usize] = true;
        }
        match i.cmp(&self.tags.len()) {
            // Lines come in order: almost always the next one.
            std::cmp::Ordering::Equal => {
                self.tags.push(tag);
                self.numbers.push(number);
            }
            std::cmp::Ordering::Less => {
                self.tags[i] = tag;
                self.numbers[i] = number;
            }
            std::cmp::Ordering::Greater => {
                self.tags.resize(i, NONE);
                self.numbers.resize(i, 0);
                self.tags.push(tag);
                self.numbers.push(number);
            }
        }
    }

    /// Begin record `record`'s residual. Records come in order; one written
    /// again, or an earlier one, starts the table afresh (no run may repeat
    /// lines that are gone).
    /// `group`: the name group of its call.
    fn begin(&mut self, record: u32, group: u32) {
        if record < self.records {
            *self = Table::default();
        }
        // The record begun before is complete: its group's newest.
        if let Some(&g) = self.records.checked_sub(1).and_then(|prev| self.group.get(prev as usize)) {
            self.group_newest[g as usize] = self.records - 1;
        }
        self.tags.push(NONE);
        self.numbers.push(0);
        self.base = self.tags.len();
        assert!(u32::try_from(self.base).is_ok(), "fewer than 4 G lines in a session");
        self.records = record.saturating_add(1);
        // Records skipped have no lines and no group.
        put(&mut self.bases, record, self.base as u32, self.base as u32);
        if self.group_newest.len() <= group as usize {
            self.group_newest.resize(group as usize + 1, u32::MAX);
        }
        put(&mut self.group, record, group, u32::MAX);
        self.has_numbers.resize(self.has_numbers.len().max(record as usize), false);
        self.has_numbers.truncate(record as usize);
        self.has_numbers.push(false);
        put(&mut self.prev_same, record, self.group_newest[group as usize], u32::MAX);
        if self.seen.capacity() == 0 {
            // Sessions hold thousands of distinct lines; skip the small-table growth steps.
            self.seen.reserve(4096);
            self.copies.reserve(4096);
            self.tags.reserve(8192);
            self.numbers.reserve(8192);
        }
    }

    /// Record that non-blank line `t` (number `number`) is visible at `at`.
    fn add(&mut self, t: u64, number: u32, at: LineLoc) {
        let older = self.seen.insert(exact(t, number), self.copies.len() as u32).unwrap_or(u32::MAX);
        self.push(t, number, at, older);
    }

    /// [`Self::add`] when the line's newest visible copy (`older`) is known.
    #[inline(always)]
    fn push(&mut self, t: u64, number: u32, at: LineLoc, older: u32) {
        self.set(at, t, number);
        let c = Cand { at, abs: self.abs(at) as u32, shift: 0 };
        assert!(u32::try_from(self.copies.len()).is_ok(), "fewer than 4 G lines in a session");
        self.copies.push((c, older));
        if numbered(t) {
            if self.nseen.capacity() == 0 {
                // A session with numbered lines (`cat -n`, an editor's view) has hundreds.
                self.nseen.reserve(1024);
                self.ncopies.reserve(1024);
            }
            let older = self.nseen.insert(t, self.ncopies.len() as u32).unwrap_or(u32::MAX);
            self.ncopies.push((c, older));
        }
    }

    /// The places a run starting with non-blank line `t` (number `number`)
    /// may repeat, into `out`: its newest visible copies, at most
    /// [`MAX_STARTS`], newest first; then, for a numbered line, those of the
    /// newest [`MAX_STARTS`] visible copies of its body that have another
    /// number (repeated with the numbers moved). When there are none the
    /// line is new: it becomes visible at `at`.
    fn starts_or_add(&mut self, t: u64, number: u32, at: LineLoc, out: &mut Vec<Cand>) -> bool {
        out.clear();
        let vacant = match self.seen.entry(exact(t, number)) {
            Entry::Occupied(e) => {
                let mut i = *e.get();
                while i != u32::MAX && out.len() < MAX_STARTS {
                    let (c, older) = self.copies[i as usize];
                    // A key two lines share by chance names no copy of this one.
                    if self.tags[c.abs as usize] == t && self.numbers[c.abs as usize] == number {
                        out.push(c);
                    }
                    i = older;
                }
                None
            }
            Entry::Vacant(e) => Some(e),
        };
        if numbered(t) {
            let mut i = self.nseen.get(&t).copied().unwrap_or(u32::MAX);
            for _ in 0..MAX_STARTS {
                let Some(&(c, older)) = self.ncopies.get(i as usize) else { break };
                let was = self.numbers[c.abs as usize];
                if was != number && self.tags[c.abs as usize] == t {
                    out.push(Cand { shift: (i64::from(number) - i64::from(was)) as i32, ..c });
                }
                i = older;
            }
        }
        if !out.is_empty() {
            return true;
        }
        match vacant {
            Some(e) => {
                e.insert(self.copies.len() as u32);
                self.push(t, number, at, u32::MAX);
            }
            None => self.add(t, number, at),
        }
        false
    }

    /// The residual's last line, at `at`, goes on in the next text: it is
    /// no longer a visible copy of what it held (it was the last one added).
    fn unsee(&mut self, at: LineLoc) {
        let i = self.abs(at);
        let tag = self.tags.get(i).copied().unwrap_or(NONE);
        let number = self.numbers.get(i).copied().unwrap_or(0);
        self.set(at, PIECES, 0);
        if tag == NONE || tag == PIECES || blank(tag) {
            return;
        }
        unlink(&mut self.copies, &mut self.seen, exact(tag, number), at);
        if numbered(tag) {
            unlink(&mut self.ncopies, &mut self.nseen, tag, at);
        }
    }
}

/// Set `v[i]` to `x`, first filling any gap before it with `fill` (records
/// come in order: almost always one push).
#[inline]
fn put(v: &mut Vec<u32>, i: u32, x: u32, fill: u32) {
    let i = i as usize;
    if i < v.len() {
        v[i] = x;
        return;
    }
    if i > v.len() {
        v.resize(i, fill);
    }
    v.push(x);
}

/// Drop the newest visible copy of `tag` when it is the one at `at` (the last added).
fn unlink(copies: &mut Vec<(Cand, u32)>, seen: &mut HashMap<u64, u32, BuildNoHashHasher<u64>>, tag: u64, at: LineLoc) {
    if copies.last().is_none_or(|&(c, _)| c.at != at) {
        return;
    }
    let (_, older) = copies.pop().expect("checked above");
    if older == u32::MAX {
        seen.remove(&tag);
    } else {
        seen.insert(tag, older);
    }
}

impl Table {
    /// Where record `r`'s lines are in `tags`, when it was begun.
    fn bounds(&self, r: u32) -> Option<std::ops::Range<usize>> {
        let base = *self.bases.get(r as usize)? as usize;
        let end = match self.bases.get(r as usize + 1) {
            Some(&next) => (next as usize).saturating_sub(1),
            None => self.tags.len(),
        };
        Some(base..end.max(base))
    }

    /// Where the lines a stub names as `lines first-last` of record `r` are
    /// in `tags`, by the reader's rule (`lam_core::expand::place_of`: by
    /// printed line numbers where the record shows `first` as one, else
    /// counted from 1), when they are all text (no stub line).
    fn place(&self, r: u32, first: u32, last: u32) -> Option<std::ops::Range<usize>> {
        let lines = self.bounds(r)?;
        let number = |i: usize| (self.tags[lines.start + i] != NONE).then(|| self.numbers[lines.start + i]);
        let range = if self.has_numbers[r as usize] {
            lam_core::expand::place_of(lines.len(), first, last, number)?
        } else {
            // No line is numbered: what `place_of` finds, without its scan.
            let range = (first as usize).checked_sub(1)?..last as usize;
            (range.end <= lines.len() && range.clone().all(|i| number(i).is_some())).then_some(range)?
        };
        Some(lines.start + range.start..lines.start + range.end)
    }

    /// How a stub names the `n` lines at `c`: by their printed line
    /// numbers when they carry consecutive ones (`lines 173-180` of a
    /// `Read` from line 100), else by their lines counted from 1; the first
    /// of the two that reads back as them ([`Self::place`]), if any.
    fn name(&self, c: &Cand, n: usize) -> Option<(u32, u32)> {
        let at = c.abs as usize;
        let n32 = n as u32;
        let a = self.numbers[at];
        let printed = a > 0 && (0..n).all(|k| self.numbers[at + k] == a + k as u32);
        let names = [printed.then_some(a), Some(c.at.line)];
        names.into_iter().flatten().map(|f| (f, f + n32 - 1)).find(|&(f, l)| self.place(c.at.record, f, l) == Some(at..at + n))
    }

    /// Make record `r`'s lines match nothing ([`GONE`]): every copy of them
    /// is checked against its tag before use, and a run compares tags, so
    /// nothing found later repeats them.
    fn forget(&mut self, r: u32) {
        let Some(&base) = self.bases.get(r as usize) else { return };
        self.gone.insert(r);
        let end = self.bases.get(r as usize + 1).map_or(self.tags.len(), |&next| (next as usize).saturating_sub(1));
        for t in self.tags.get_mut(base as usize..end).unwrap_or_default() {
            *t = GONE;
        }
    }

    /// The last record begun, `r`, was forwarded as `residual` instead of
    /// what L0 wrote: its lines become those (`stub_lines`, 1-based and
    /// ascending, are stub lines; the others are visible text), and its
    /// lines past them stub lines (no line there to read). Copies of what L0
    /// wrote are checked against the tags before use, so none is named.
    fn relay(&mut self, r: u32, residual: &[u8], stub_lines: &[u32]) {
        let old_end = self.tags.len();
        let mut stubs = stub_lines.iter().peekable();
        let mut n = 0u32;
        for line in residual.split_inclusive(|&b| b == b'\n') {
            n += 1;
            let at = LineLoc { record: r, line: n };
            if stubs.next_if_eq(&&n).is_some() {
                self.set(at, NONE, 0);
                continue;
            }
            let (t, number) = tag(line.strip_suffix(b"\n").unwrap_or(line));
            if blank(t) || hollow(t) { self.set(at, t, number) } else { self.add(t, number, at) }
        }
        for i in self.base + n as usize..old_end {
            (self.tags[i], self.numbers[i]) = (NONE, 0);
        }
    }

    /// Whether the lines at `a` and `b` are the same, tag and number.
    fn same(&self, a: std::ops::Range<usize>, b: std::ops::Range<usize>) -> bool {
        self.tags[a.clone()] == self.tags[b.clone()] && self.numbers[a] == self.numbers[b]
    }

    /// Whether a stub naming lines of record `record` reads back as them:
    /// each of its spans as a stub names it (`lines first-last`,
    /// [`Self::name`]) with the lines it stands for there. The reader takes
    /// the newest earlier output of that record's name whose lines at every
    /// span are all text (no stub line), and that must be `record` or one
    /// that reads the same (`lam_core::expand`). A newer forgotten output
    /// of the name blocks it: what the model reads there (a difference
    /// form's lines, a citation) is not what L0 wrote.
    fn names_exactly(&self, record: u32, spans: &[((u32, u32), std::ops::Range<usize>)]) -> bool {
        // Newest first: the group's newest record before this one, then back.
        let mut r = self.group.get(record as usize).map_or(u32::MAX, |&g| self.group_newest[g as usize]);
        while r != u32::MAX && r > record {
            if self.gone.contains(&r) {
                return false;
            }
            // Readable at every span: the reader takes this one.
            let mut same = true;
            let readable = spans.iter().all(|((first, last), mine)| {
                let there = self.place(r, *first, *last);
                same &= there.clone().is_some_and(|t| self.same(t, mine.clone()));
                there.is_some()
            });
            if readable {
                return same;
            }
            r = self.prev_same[r as usize];
        }
        true
    }
}

/// A run of replaceable lines within one text segment: `start..body_end`
/// ends with the last repeated line, `body_end..end` are blank lines after
/// it. The places it repeats are the writer's `cands`.
#[derive(Debug, Clone)]
struct Run {
    /// The first byte of the text not yet written when the run began.
    pending: usize,
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
    /// A stub starts a line of its own: true when one must be opened first.
    fn mid_line(&self) -> bool {
        self.buf.len() > self.start && self.buf.last() != Some(&b'\n')
    }
    /// The residual line the next stub goes on.
    fn stub_line(&self) -> u32 {
        self.line + 1 + u32::from(self.mid_line())
    }
    /// Write `stub` on a line of its own; returns where that line starts.
    fn write_stub(&mut self, stub: &Stub, how: Recall<'_>) -> usize {
        if self.mid_line() {
            self.buf.push(b'\n');
            self.line += 1;
        }
        let start = self.buf.len();
        // Written straight into the residual (no intermediate String).
        match stub {
            Stub::Lines(l) => l.write_bytes(self.buf, how),
            other => write!(self.buf, "{}", other.with(how)).expect("writing to a Vec cannot fail"),
        }
        self.buf.push(b'\n');
        self.line += 1;
        self.stubs += 1;
        start
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

/// One record's residual being written by L0 ([`LineDedup::writer`]).
pub struct Writer<'w> {
    d: &'w mut LineDedup,
    record: u32,
    id: &'w str,
    w: Out<'w>,
    stats: L0Stats,
    map: LineMap,
    /// The shortest stub line any place could give, by recall and `ditto`
    /// (computed when first needed).
    shortest: [Option<usize>; 4],
    /// This record runs its call's last action again ([`LineDedup::rerun`]).
    rerun: bool,
    /// The record's last stub line, while a run right after it may join it
    /// ([`Writer::merged`]).
    merge: Option<Merge>,
}

/// A line stub just written, which the next run joins as a further span
/// when nothing was written after it (`lines 1-3,9-10 of ...`).
#[derive(Debug, Clone, Copy)]
struct Merge {
    /// Where the stub line starts in the residual, and where it ends (past its newline).
    start: usize,
    end: usize,
    /// The record its spans are in, and their shift.
    record: u32,
    shift: i32,
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
        self.merge = None;
        self.w.write_stub(&stub, self.d.recall);
        self.d.set_above(stub.ditto_call());
        self.d.stubs.push(Ok(stub));
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
        // When the residual ends within a line, this text's first line goes
        // on with it: that line is written as it is and no run repeats it.
        let joined = self.w.mid_line() && !text.is_empty();
        if joined {
            self.d.table.unsee(LineLoc { record: self.record, line: self.w.line + 1 });
        }
        // Kept bytes are copied lazily, as whole spans: `copy_from` is the
        // first byte of `text` not yet written (a run kept verbatim leaves
        // its bytes to the span it is in).
        let mut copy_from = 0;
        let mut pos = 0;
        let mut run: Option<Run> = None;
        let mut newlines = lines::Newlines::new(text);
        while pos < text.len() {
            let (next, nl) = match newlines.next() {
                Some(i) => (i + 1, 1u32),
                None => (text.len(), 0),
            };
            let key = &text[pos..next - nl as usize];
            let (t, number) = tag(key);
            // A line without its newline (the text's last) is never
            // replaced: a stub line ends with one.
            let whole = nl == 1;
            if let Some(r) = run.as_mut() {
                if whole && self.d.goes_on(r.lines as u32, t, number) {
                    r.push(t, next, nl);
                    self.d.run_tags.push(t);
                    self.d.run_numbers.push(number);
                    self.map.mark(0);
                    pos = next;
                    continue;
                }
                let r = run.take().expect("a run is open");
                copy_from = self.flush(r, text);
            }
            let here = LineLoc { record: self.record, line: self.w.line + 1 };
            if joined && pos == 0 {
                // Written as it is: its line keeps the tag PIECES, with the
                // number the reader sees it begin with.
                let number = self.joined_number(key);
                self.d.table.set(here, PIECES, number);
            } else if blank(t) || hollow(t) {
                self.d.table.set(here, t, number);
            } else if !whole {
                self.d.table.add(t, number, here);
            } else if self.d.table.starts_or_add(t, number, here, &mut self.d.cands) {
                run = Some(Run::new(copy_from, pos, next, nl, self.map.len()));
                self.d.run_tags.clear();
                self.d.run_tags.push(t);
                self.d.run_numbers.clear();
                self.d.run_numbers.push(number);
                self.map.mark(0);
                pos = next;
                continue;
            }
            self.map.mark(here.line);
            self.w.line += nl;
            pos = next;
        }
        if let Some(r) = run.take() {
            copy_from = self.flush(r, text);
        }
        self.w.buf.extend_from_slice(&text[copy_from..]);
    }

    /// The printed line number of the residual's last line, which ends
    /// within a line, once `rest` goes on with it (0: none).
    fn joined_number(&self, rest: &[u8]) -> u32 {
        let written = &self.w.buf[self.w.start..];
        let begins = written.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let line = [&written[begins..], rest].concat();
        lam_core::newlines::Numbered::of(&line).map_or(0, |n| n.number)
    }

    /// Replace a run by a stub: as a further span of the stub line just
    /// written ([`Self::merged`]), or on a line of its own
    /// ([`Self::stub_or_keep`]), which may also keep it verbatim. Either
    /// way the run's lines get their residual lines in the line map, and
    /// its blank lines after the last repeated one stay text. The first
    /// byte of `text` still unwritten is returned.
    fn flush(&mut self, r: Run, text: &[u8]) -> usize {
        let written = if self.merged(&r, text) { r.body_end } else { self.stub_or_keep(&r, text) };
        let d = &mut *self.d;
        let run_map = self.map.lines.get_mut(r.map_at..).unwrap_or_default();
        let tail_map = run_map.get_mut(r.body_lines.min(run_map.len())..).unwrap_or_default();
        tail_map.iter_mut().zip(self.w.line + 1..).for_each(|(m, n)| *m = n);
        for (&t, n) in d.run_tags[r.body_lines..r.lines].iter().zip(self.w.line + 1..) {
            d.table.set(LineLoc { record: self.record, line: n }, t, 0);
        }
        self.w.line += r.newlines - r.body_newlines;
        written
    }

    /// Join the run to the record's last stub line as a further span
    /// (`lines 1-3,9-10 of ...`) when nothing was written after that line,
    /// some place the run repeats is in the same output with the same
    /// shift (the first such in the order of `cands`, as [`pick`] would
    /// take among equals), the line still reads back exactly with it
    /// ([`Table::names_exactly`] over all its spans), and the span is worth
    /// its bytes ([`worth_replacing`]).
    fn merged(&mut self, r: &Run, text: &[u8]) -> bool {
        let Some(m) = self.merge.filter(|m| m.end == self.w.buf.len() && r.pending == r.start) else { return false };
        let d = &mut *self.d;
        let (n, how) = (r.body_lines, d.how());
        let body = &text[r.start..r.body_end];
        let mut found = None;
        for c in d.cands.iter().filter(|c| c.at.record == m.record && c.shift == m.shift) {
            let Some(span) = d.table.name(c, n) else { continue };
            d.merge_spans.push((span, c.abs as usize..c.abs as usize + n));
            let reads = d.table.names_exactly(m.record, &d.merge_spans);
            let tried = d.merge_spans.pop();
            if reads {
                found = tried;
                break;
            }
        }
        let Some((span, lines)) = found else { return false };
        if !worth_replacing(how.counter, more_span_len(span.0, span.1), || more_span(span.0, span.1), 0, body) {
            return false;
        }
        let Some(Stub::Lines(l)) = d.stubs.all.get_mut(d.stubs.live.wrapping_sub(1)) else { return false };
        l.more.push(span);
        self.w.buf.truncate(m.start);
        l.write_bytes(self.w.buf, how.recall);
        self.w.buf.push(b'\n');
        self.merge = Some(Merge { end: self.w.buf.len(), ..m });
        d.merge_spans.push((span, lines));
        let run_map = self.map.lines.get_mut(r.map_at..).unwrap_or_default();
        run_map.iter_mut().take(n).for_each(|x| *x = self.w.line);
        self.stats.lines_replaced += r.replaced;
        self.stats.bytes_replaced += body.len() as u64;
        true
    }

    /// Replace a run by a stub line when some place it repeats can be named
    /// exactly ([`Table::names_exactly`]) and the stub costs fewer tokens
    /// than the run (`worth_replacing`); otherwise keep it verbatim, its
    /// lines now visible copies too. The bytes before the run not yet
    /// written (`r.pending..r.start`) are written before a stub; the first
    /// byte of `text` still unwritten is returned.
    fn stub_or_keep(&mut self, r: &Run, text: &[u8]) -> usize {
        let d = &mut *self.d;
        let body = &text[r.start..r.body_end];
        let recall = self.w.stubs == 0;
        let how = d.how();
        // Unwritten bytes before the run end with a newline.
        let newlines = 1 + usize::from(r.pending == r.start && self.w.mid_line());
        // Judged by bytes, a run shorter than twice the shortest stub any place
        // could give stays verbatim: no place need be named.
        let above = d.above.as_deref().filter(|_| !d.no_ditto);
        let shortest = self.shortest[usize::from(recall) * 2 + usize::from(above.is_some())]
            .get_or_insert_with(|| line_stub_len(if above.is_some() { Named::Ditto } else { Named::Of(Some("x")) }, (1, 1), self.id, recall, how.recall, 0));
        let hopeless = how.counter.is_none() && 2 * (*shortest + newlines) > body.len();
        let n = r.body_lines;
        let named =
            d.cands.iter().filter(|c| d.table.name(c, n).is_some_and(|span| d.table.names_exactly(c.at.record, &[(span, c.abs as usize..c.abs as usize + n)])));
        let name = |r: u32| d.names[d.calls[r as usize] as usize].as_str();
        let own = self.rerun.then(|| name(self.record));
        let at = if hopeless { None } else { pick(named.map(|c| (c.at, c.shift)), self.record, name, above, own) };
        // The place picked, with the lines its stub names and where they are.
        let at = at.and_then(|(loc, shift)| {
            let c = d.cands.iter().find(|c| c.at == loc && c.shift == shift)?;
            Some((loc, shift, d.table.name(c, n)?, c.abs as usize))
        });
        let of = at.map(|(at, ..)| (at.record != self.record).then(|| name(at.record)));
        let ditto = above.is_some() && of.flatten() == above;
        let last = own.is_some() && of.flatten() == own;
        let fields = |(_, shift, (first, end), _): (LineLoc, i32, (u32, u32), usize), of| LineFields {
            id: self.id,
            of,
            first,
            last: end,
            recall,
            shift,
            ditto,
            own: last,
        };
        let run_map = self.map.lines.get_mut(r.map_at..).unwrap_or_default();
        let body_map = run_map.get_mut(..r.body_lines.min(run_map.len())).unwrap_or_default();
        let worth = at.zip(of).is_some_and(|(at, of)| {
            let named = if ditto {
                Named::Ditto
            } else if last {
                Named::Last
            } else {
                Named::Of(of)
            };
            let len = line_stub_len(named, at.2, self.id, recall, how.recall, at.1);
            worth_replacing(how.counter, len, || fields(at, of).stub().with(how.recall).to_string(), newlines, body)
        });
        if let (true, Some(at), Some(of)) = (worth, at, of) {
            self.w.buf.extend_from_slice(&text[r.pending..r.start]);
            body_map.fill(self.w.stub_line());
            let stub = d.stubs.push(Err(fields(at, of)));
            let start = self.w.write_stub(stub, how.recall);
            match stub.ditto_call() {
                Some(c) => c.clone_into(d.above.get_or_insert_default()),
                None => d.above = None,
            }
            self.merge = Some(Merge { start, end: self.w.buf.len(), record: at.0.record, shift: at.1 });
            d.merge_spans.clear();
            d.merge_spans.push((at.2, at.3..at.3 + n));
            self.stats.lines_replaced += r.replaced;
            self.stats.bytes_replaced += body.len() as u64;
            self.stats.stubs += 1;
            r.body_end
        } else {
            body_map.iter_mut().zip(self.w.line + 1..).for_each(|(m, n)| *m = n);
            for ((&t, &number), n) in d.run_tags[..r.body_lines].iter().zip(&d.run_numbers).zip(self.w.line + 1..) {
                let here = LineLoc { record: self.record, line: n };
                if blank(t) || hollow(t) { d.table.set(here, t, number) } else { d.table.add(t, number, here) }
            }
            self.w.line += r.body_newlines;
            r.pending
        }
    }
}

impl Run {
    /// A run opened by one repeated line `start..next` (`nl` newlines), the
    /// `map_at`-th line of the record's line map; `pending..start` are the
    /// bytes before it not yet written.
    fn new(pending: usize, start: usize, next: usize, nl: u32, map_at: usize) -> Self {
        Run { pending, start, body_end: next, end: next, replaced: 1, body_newlines: nl, newlines: nl, map_at, lines: 1, body_lines: 1 }
    }

    /// The run goes on with the line ending at `next`, tagged `t`.
    fn push(&mut self, t: u64, next: usize, nl: u32) {
        self.end = next;
        self.newlines += nl;
        self.lines += 1;
        if !blank(t) {
            self.body_end = next;
            self.replaced += 1;
            self.body_newlines = self.newlines;
            self.body_lines = self.lines;
        }
    }
}

impl LineDedup {
    /// Whether the open run, `offset` lines long, goes on with a line tagged
    /// `t` (numbered `num`): some place it repeats has that line next, with
    /// its number moved by the place's shift (a line without a number must
    /// be the same). The places that do not are dropped.
    #[inline]
    fn goes_on(&mut self, offset: u32, t: u64, number: u32) -> bool {
        let (tags, numbers) = (&self.table.tags, &self.table.numbers);
        let fits = |c: &Cand| {
            let i = c.abs as usize + offset as usize;
            tags.get(i) == Some(&t) && (!numbered(t) || i64::from(numbers[i]) + i64::from(c.shift) == i64::from(number))
        };
        // One pass: the places that fit move to the front; none fitting
        // leaves them as they are (the run's stub is chosen among them).
        let cands = &mut self.cands;
        let mut kept = 0;
        for j in 0..cands.len() {
            let c = cands[j];
            if fits(&c) {
                cands[kept] = c;
                kept += 1;
            }
        }
        if kept == 0 {
            return false;
        }
        cands.truncate(kept);
        true
    }
}

/// The place a run's stub names among those it repeats (with the shift of
/// their line numbers; exact copies first, each kind newest first): one
/// repeated exactly before one with moved numbers, then one of the call the
/// stub line above named (`above`: written `ditto`), then this output's,
/// else the call with the shortest name (the record's own call, `own`, when
/// it runs again: written `its last output`), the first of equals.
pub(crate) fn pick<'n>(
    cands: impl IntoIterator<Item = (LineLoc, i32)>,
    record: u32,
    name: impl Fn(u32) -> &'n str,
    above: Option<&str>,
    own: Option<&str>,
) -> Option<(LineLoc, i32)> {
    let cost = |(c, shift): &(LineLoc, i32)| {
        let call = name(c.record);
        let name = match call.len() {
            _ if c.record == record => 1,
            _ if above == Some(call) => 0,
            _ if own == Some(call) => LAST.len(),
            0 => "an earlier output".len(),
            n => n + 2,
        };
        (*shift != 0, name)
    };
    cands.into_iter().min_by_key(cost)
}

/// The last record's stub lines, `all[..live]`; the slots after them are
/// kept so that their strings are reused.
#[derive(Debug, Default, Clone)]
struct Stubs {
    all: Vec<Stub>,
    live: usize,
}

impl Stubs {
    /// Add a stub line: given whole, or (`Err`) a line stub's fields,
    /// written into a spare slot's strings when there is one.
    fn push(&mut self, stub: Result<Stub, LineFields<'_>>) -> &Stub {
        match (stub, self.all.get_mut(self.live)) {
            (Err(f), Some(Stub::Lines(l))) => f.write_into(l),
            (Ok(stub), Some(slot)) => *slot = stub,
            (Err(f), Some(slot)) => *slot = f.stub(),
            (Ok(stub), None) => self.all.push(stub),
            (Err(f), None) => self.all.push(f.stub()),
        }
        self.live += 1;
        &self.all[self.live - 1]
    }
}

/// The fields of a line stub L0 writes (`LineStub`), borrowed.
struct LineFields<'a> {
    id: &'a str,
    of: Option<&'a str>,
    first: u32,
    last: u32,
    recall: bool,
    shift: i32,
    ditto: bool,
    /// `of` is the record's own call, run again (written `of its last output`).
    own: bool,
}

impl LineFields<'_> {
    fn stub(&self) -> Stub {
        let from = Place::new(self.of.map(str::to_string), self.first, self.last);
        Stub::Lines(LineStub { id: self.id.to_string(), from, recall: self.recall, shift: self.shift, ditto: self.ditto, last: self.own, more: Vec::new() })
    }

    /// Overwrite `l` with these fields, reusing its strings.
    fn write_into(&self, l: &mut LineStub) {
        self.id.clone_into(&mut l.id);
        match (self.of, &mut l.from.of) {
            (Some(of), Some(was)) => of.clone_into(was),
            (of, was) => *was = of.map(str::to_string),
        }
        (l.from.first, l.from.last, l.recall, l.shift, l.ditto, l.last) = (self.first, self.last, self.recall, self.shift, self.ditto, self.own);
        l.more.clear();
    }
}

/// How L0 judges and writes a stub: the token counter and the recall handle.
#[derive(Clone, Copy)]
struct How {
    counter: Option<&'static dyn TokenCounter>,
    recall: Recall<'static>,
}

#[cfg(test)]
mod tests;
