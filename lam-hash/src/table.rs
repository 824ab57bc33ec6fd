//! The table of every line the model can see in the session's residuals:
//! each distinct line's visible copies, and each residual line's tag.

use crate::LineLoc;
use crate::tag::{GONE, NONE, PIECES, blank, exact, hollow, numbered, tag};
use nohash_hasher::BuildNoHashHasher;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// How many visible copies of a line a run may start from: the newest
/// [`MAX_STARTS`] (part of the rule, so the naive version and the fast one
/// agree).
pub const MAX_STARTS: usize = 8;

/// Every line the model can see in the session's residuals: for each
/// distinct non-blank line its visible copies, and each residual line's tag.
#[derive(Debug, Default, Clone)]
pub(crate) struct Table {
    /// Each distinct non-blank line's newest visible copy (index into
    /// `copies`), by [`exact`] key.
    pub(crate) seen: HashMap<u64, u32, BuildNoHashHasher<u64>>,
    /// Visible copies, each with the index of the next older copy of the
    /// same line (`u32::MAX`: none).
    copies: Vec<(Cand, u32)>,
    /// Every residual line's tag, record after record, line 1 first, each
    /// record's lines after a [`NONE`] (so no run goes on past its end).
    pub(crate) tags: Vec<u64>,
    /// Every residual line's number, beside `tags`.
    pub(crate) numbers: Vec<u32>,
    /// Each distinct numbered line's newest visible copy, by its tag
    /// whatever its number (index into `ncopies`).
    nseen: HashMap<u64, u32, BuildNoHashHasher<u64>>,
    /// Visible copies of numbered lines, as `copies`.
    ncopies: Vec<(Cand, u32)>,
    /// Records begun (the last one begun is `records - 1`).
    pub(crate) records: u32,
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
pub(crate) struct Cand {
    pub(crate) at: LineLoc,
    pub(crate) abs: u32,
    pub(crate) shift: i32,
}

impl Table {
    /// Bytes held on the heap, from capacities.
    pub(crate) fn heap_bytes(&self) -> usize {
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
    pub(crate) fn set(&mut self, at: LineLoc, tag: u64, number: u32) {
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
    pub(crate) fn begin(&mut self, record: u32, group: u32) {
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
    pub(crate) fn add(&mut self, t: u64, number: u32, at: LineLoc) {
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
    pub(crate) fn starts_or_add(&mut self, t: u64, number: u32, at: LineLoc, out: &mut Vec<Cand>) -> bool {
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
    pub(crate) fn unsee(&mut self, at: LineLoc) {
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
pub(crate) fn put(v: &mut Vec<u32>, i: u32, x: u32, fill: u32) {
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
    pub(crate) fn name(&self, c: &Cand, n: usize) -> Option<(u32, u32)> {
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
    pub(crate) fn forget(&mut self, r: u32) {
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
    pub(crate) fn relay(&mut self, r: u32, residual: &[u8], stub_lines: &[u32]) {
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
    pub(crate) fn names_exactly(&self, record: u32, spans: &[((u32, u32), std::ops::Range<usize>)]) -> bool {
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
