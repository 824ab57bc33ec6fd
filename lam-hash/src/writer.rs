//! The writer of one record's residual: text goes in piece by piece, and
//! runs of lines already visible come out as stub lines.

use crate::stubs::{LineFields, pick};
use crate::table::Cand;
use crate::tag::{PIECES, blank, hollow, numbered, tag};
use crate::{L0Stats, LineDedup, LineLoc, lines};
use lam_core::stub::{Named, Recall, Stub, line_stub_len, more_span, more_span_len, worth_replacing};
use std::io::Write as _;

/// One record's residual being written by L0 ([`LineDedup::writer`]).
pub struct Writer<'w> {
    pub(crate) d: &'w mut LineDedup,
    pub(crate) record: u32,
    pub(crate) id: &'w str,
    pub(crate) w: Out<'w>,
    pub(crate) stats: L0Stats,
    pub(crate) map: LineMap,
    /// The shortest stub line any place could give, by recall and `ditto`
    /// (computed when first needed).
    pub(crate) shortest: [Option<usize>; 4],
    /// This record runs its call's last action again ([`LineDedup::rerun`]).
    pub(crate) rerun: bool,
    /// The record's last stub line, while a run right after it may join it
    /// ([`Writer::merged`]).
    pub(crate) merge: Option<Merge>,
}

/// A line stub just written, which the next run joins as a further span
/// when nothing was written after it (`lines 1-3,9-10 of ...`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Merge {
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
pub(crate) struct LineMap {
    pub(crate) on: bool,
    pub(crate) lines: Vec<u32>,
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
    ///
    /// [`Table::names_exactly`]: crate::table::Table::names_exactly
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
    ///
    /// [`Table::names_exactly`]: crate::table::Table::names_exactly
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

/// Writer for one record's residual that counts its lines and stubs.
pub(crate) struct Out<'o> {
    pub(crate) buf: &'o mut Vec<u8>,
    pub(crate) start: usize,
    pub(crate) line: u32,
    pub(crate) stubs: usize,
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
