//! The L0 rule written the obvious way, as the reference the fast
//! [`crate::LineDedup`] is tested against (same residuals, same stubs) and
//! benchmarked beside: lines split one by one, the whole line bytes as the
//! table key (no hash), each record's residual kept as lines, each run of
//! lines collected before it is judged.

use crate::stubs::pick;
use crate::{LineLoc, MAX_STARTS, Segment};
use lam_core::TokenCounter;
use lam_core::expand::place_of;
use lam_core::newlines::Numbered;
use lam_core::stub::{LineStub, Place, Recall, Stub, more_span, more_span_len, worth_replacing};
use std::collections::HashMap;

/// A residual line as a run may repeat it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    /// A stub line.
    Stub,
    /// A line written in pieces (its bytes so far): text, but no run
    /// repeats it.
    Pieces(Vec<u8>),
    Blank(Vec<u8>),
    Text(Vec<u8>),
}

/// One session's L0 state, the obvious way.
#[derive(Debug, Default)]
pub struct NaiveLineDedup {
    /// Each record's residual, line by line.
    res: Vec<Vec<Line>>,
    /// Each non-blank line's visible copies, oldest first.
    copies: HashMap<Vec<u8>, Vec<LineLoc>>,
    /// Each numbered line's visible copies by [`body`], oldest first.
    numbered: HashMap<Vec<u8>, Vec<LineLoc>>,
    calls: Vec<String>,
    counter: Option<&'static dyn TokenCounter>,
    /// The record's last line stub while a run right after it may join it.
    merge: Option<Merge>,
}

/// A line stub just written: where it starts and ends in the output, the
/// record its spans are in, their shift and their names.
#[derive(Debug, Clone)]
struct Merge {
    start: usize,
    end: usize,
    record: u32,
    shift: i32,
    names: Vec<(u32, u32)>,
}

fn blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

fn strip(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// A numbered line's field width, separator and body (what a renumbered
/// run compares), and its number.
fn body(line: &[u8]) -> Option<(Vec<u8>, u32)> {
    let n = Numbered::of(line)?;
    let mut key = n.field.to_string().into_bytes();
    key.push(b':');
    key.extend_from_slice(&line[n.field..]);
    Some((key, n.number))
}

/// Whether `old`, a residual line, reads as the line `new` once its line
/// number moves by `shift` (a line without a number must be the same).
fn fits(old: Option<&Line>, new: &[u8], shift: i32) -> bool {
    let Some(old) = old else { return false };
    match (shift, body(new)) {
        (0, _) => *old == as_line(new),
        (_, None) => *old == as_line(new) && !matches!(old, Line::Text(b) if body(b).is_some()),
        (k, Some((key, n))) => matches!(old, Line::Text(b) if body(b).is_some_and(|(bk, bn)| bk == key && i64::from(bn) + i64::from(k) == i64::from(n))),
    }
}

/// A residual line's printed line number (0: none), `None` for a stub line.
fn number(line: &Line) -> Option<u32> {
    match line {
        Line::Stub => None,
        Line::Pieces(b) | Line::Blank(b) | Line::Text(b) => Some(Numbered::of(b).map_or(0, |n| n.number)),
    }
}

fn as_line(key: &[u8]) -> Line {
    if blank(key) { Line::Blank(key.to_vec()) } else { Line::Text(key.to_vec()) }
}

/// One record's residual being written: its bytes from `start` of `out`.
struct Rec<'o> {
    record: u32,
    out: &'o mut Vec<u8>,
    start: usize,
}

impl Rec<'_> {
    fn mid_line(&self) -> bool {
        self.out.len() > self.start && self.out.last() != Some(&b'\n')
    }
}

impl NaiveLineDedup {
    /// An empty session, judging stubs with `counter` (bytes without one).
    pub fn new(counter: Option<&'static dyn TokenCounter>) -> Self {
        Self { counter, ..Self::default() }
    }

    fn at(&self, loc: LineLoc) -> Option<&Line> {
        self.res.get(loc.record as usize)?.get(loc.line as usize - 1)
    }

    /// Write one line (with its newline, if any) of text as it is.
    fn put(&mut self, r: &mut Rec<'_>, line: &[u8]) {
        let lines = &mut self.res[r.record as usize];
        if r.mid_line() {
            // It goes on with the residual's last line.
            let last = lines.last_mut().expect("a line is open");
            let mut bytes = match last {
                Line::Pieces(b) | Line::Blank(b) | Line::Text(b) => std::mem::take(b),
                Line::Stub => unreachable!("a stub line ends with its newline"),
            };
            bytes.extend_from_slice(strip(line));
            *last = Line::Pieces(bytes);
        } else {
            let l = as_line(strip(line));
            if let Line::Text(key) = &l {
                let loc = LineLoc { record: r.record, line: lines.len() as u32 + 1 };
                self.copies.entry(key.clone()).or_default().push(loc);
                if let Some((b, _)) = body(key) {
                    self.numbered.entry(b).or_default().push(loc);
                }
            }
            lines.push(l);
        }
        r.out.extend_from_slice(line);
    }

    /// Write a stub line; returns where it starts.
    fn put_stub(&mut self, r: &mut Rec<'_>, stub: &str) -> usize {
        if r.mid_line() {
            r.out.push(b'\n');
        }
        let start = r.out.len();
        r.out.extend_from_slice(stub.as_bytes());
        r.out.push(b'\n');
        self.res[r.record as usize].push(Line::Stub);
        start
    }

    /// The places a run starting with `key` may repeat: the newest
    /// [`MAX_STARTS`] visible copies that still read the same, then of the
    /// newest [`MAX_STARTS`] visible copies of its numbered body those with
    /// another number, with the shift.
    fn starts(&self, key: &[u8]) -> Vec<(LineLoc, i32)> {
        let want = Line::Text(key.to_vec());
        let still = |c: &&LineLoc| self.at(**c) == Some(&want);
        let mut out: Vec<(LineLoc, i32)> = self.copies.get(key).into_iter().flatten().rev().filter(still).take(MAX_STARTS).map(|&c| (c, 0)).collect();
        if let Some((b, n)) = body(key) {
            let numbered = |c: &&LineLoc| matches!(self.at(**c), Some(Line::Text(t)) if body(t).is_some_and(|(tb, _)| tb == b));
            for &c in self.numbered.get(&b).into_iter().flatten().rev().filter(numbered).take(MAX_STARTS) {
                let Some(Line::Text(t)) = self.at(c) else { continue };
                let was = body(t).map_or(0, |(_, m)| m);
                if was != n {
                    out.push((c, (i64::from(n) - i64::from(was)) as i32));
                }
            }
        }
        out
    }

    /// The lines a stub names as `lines first-last` of record `r`, when
    /// they are all text (the reader's rule, `lam_core::expand::place_of`).
    fn place(&self, r: usize, (first, last): (u32, u32)) -> Option<&[Line]> {
        let lines = self.res.get(r)?;
        Some(&lines[place_of(lines.len(), first, last, |i| number(&lines[i]))?])
    }

    /// How a stub names the `n` lines at `c`: by their printed numbers when
    /// they are numbered one after the other, else counted from 1; the first
    /// of the two that reads back as them.
    fn name(&self, c: LineLoc, n: u32) -> Option<(u32, u32)> {
        let lines = self.res.get(c.record as usize)?;
        let at = c.line as usize - 1;
        let run = lines.get(at..at + n as usize)?;
        let first = number(&run[0]).unwrap_or(0);
        let printed = first > 0 && run.iter().zip(first..).all(|(l, k)| number(l) == Some(k));
        let names = [printed.then_some(first), Some(c.line)];
        let here = |f: u32| place_of(lines.len(), f, f + n - 1, |i| number(&lines[i])) == Some(at..at + n as usize);
        names.into_iter().flatten().find(|&f| here(f)).map(|f| (f, f + n - 1))
    }

    /// Whether a stub of `record` naming lines of record `of` as `names`
    /// (its spans) by that record's call name reads back as them: the
    /// newest earlier record of that name whose lines at every span are all
    /// text is `of`, or reads the same.
    fn names_exactly(&self, of: u32, names: &[(u32, u32)], record: u32) -> bool {
        let call = &self.calls[of as usize];
        let reads = |k: u32| names.iter().map(|&name| self.place(k as usize, name)).collect::<Option<Vec<_>>>();
        let newest = (of + 1..record).rev().filter(|&k| self.calls[k as usize] == *call).find(|&k| reads(k).is_some()).unwrap_or(of);
        newest == of || reads(newest) == reads(of)
    }

    /// Join the run at `c` (`n` lines, `body`) to the stub line just
    /// written as a further span, when nothing was written after it, a
    /// place of the same record with the same shift reads back with the
    /// line's other spans, and the span is worth its bytes.
    fn merged(&mut self, r: &mut Rec<'_>, cands: &[(LineLoc, i32)], n: u32, body: &[u8], stubs: &mut [Stub]) -> bool {
        let Some(m) = self.merge.take().filter(|m| m.end == r.out.len()) else { return false };
        let joins = |&(c, k): &(LineLoc, i32)| {
            let name = self.name(c, n).filter(|_| c.record == m.record && k == m.shift)?;
            let all: Vec<(u32, u32)> = m.names.iter().copied().chain([name]).collect();
            self.names_exactly(m.record, &all, r.record).then_some(all)
        };
        let Some(all) = cands.iter().find_map(joins) else {
            self.merge = Some(m);
            return false;
        };
        let (a, b) = all[all.len() - 1];
        let Some(Stub::Lines(l)) = stubs.last_mut().filter(|_| worth_replacing(self.counter, more_span_len(a, b), || more_span(a, b), 0, body)) else {
            self.merge = Some(m);
            return false;
        };
        l.more.push((a, b));
        r.out.truncate(m.start);
        r.out.extend_from_slice(l.to_string().as_bytes());
        r.out.push(b'\n');
        self.merge = Some(Merge { end: r.out.len(), names: all, ..m });
        true
    }

    /// Same contract as [`crate::LineDedup::process`]; returns the stubs written.
    pub fn process(&mut self, record: u32, this_id: &str, this_call: &str, segments: &[Segment<'_>], out: &mut Vec<u8>) -> Vec<Stub> {
        let n = record as usize + 1;
        self.calls.resize(self.calls.len().max(n), String::new());
        self.calls[record as usize] = this_call.to_string();
        self.res.resize(self.res.len().max(n), Vec::new());
        self.res[record as usize].clear();
        let start = out.len();
        let mut r = Rec { record, out, start };
        let mut stubs: Vec<Stub> = Vec::new();
        self.merge = None;
        for seg in segments {
            match *seg {
                Segment::Stub(s) => {
                    self.merge = None;
                    let mut s = s.clone();
                    s.set_recall(stubs.is_empty());
                    self.put_stub(&mut r, &s.to_string());
                    stubs.push(s);
                }
                Segment::Text(text) => self.text(&mut r, this_id, text, &mut stubs),
            }
        }
        stubs
    }

    fn text(&mut self, r: &mut Rec<'_>, this_id: &str, text: &[u8], stubs: &mut Vec<Stub>) {
        let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
        let joined = r.mid_line();
        let mut i = 0;
        while i < lines.len() {
            let key = strip(lines[i]);
            let hollow = Numbered::of(key).is_some_and(|n| blank(&key[n.width..]));
            let mut cands = if blank(key) || hollow || (joined && i == 0) || !lines[i].ends_with(b"\n") { Vec::new() } else { self.starts(key) };
            if cands.is_empty() {
                self.put(r, lines[i]);
                i += 1;
                continue;
            }
            // A run: it goes on while some copy has the next line next.
            let mut j = i + 1;
            let mut body_end = i + 1;
            // A line without its newline is never replaced.
            while j < lines.len() && lines[j].ends_with(b"\n") {
                let next = as_line(strip(lines[j]));
                let off = (j - i) as u32;
                let fit: Vec<(LineLoc, i32)> =
                    cands.iter().filter(|(c, k)| fits(self.at(LineLoc { record: c.record, line: c.line + off }), strip(lines[j]), *k)).copied().collect();
                if fit.is_empty() {
                    break;
                }
                cands = fit;
                j += 1;
                if !matches!(next, Line::Blank(_)) {
                    body_end = j;
                }
            }
            let n = (body_end - i) as u32;
            let body: Vec<u8> = lines[i..body_end].concat();
            if self.merged(r, &cands, n, &body, stubs) {
                lines[body_end..j].iter().for_each(|l| self.put(r, l));
                i = j;
                continue;
            }
            // The call the stub line above names: named again, it is written `ditto`.
            let above = stubs.last().and_then(Stub::ditto_call).map(str::to_string);
            let at = pick(
                cands.iter().copied().filter(|(c, _)| self.name(*c, n).is_some_and(|name| self.names_exactly(c.record, &[name], r.record))),
                r.record,
                |k| self.calls[k as usize].as_str(),
                above.as_deref(),
                // Never told of reruns (`LineDedup::rerun`): names every call.
                None,
            );
            let stub = at.and_then(|(at, shift)| {
                let of = (at.record != r.record).then(|| self.calls[at.record as usize].clone());
                let ditto = above.is_some() && of == above;
                let (first, last) = self.name(at, n)?;
                let more = Vec::new();
                Some((
                    at.record,
                    LineStub { id: this_id.to_string(), from: Place::new(of, first, last), recall: stubs.is_empty(), shift, ditto, last: false, more },
                ))
            });
            let newlines = 1 + usize::from(r.mid_line());
            let worth = |(_, s): &(u32, LineStub)| worth_replacing(self.counter, s.rendered_len(Recall::ARC), || s.to_string(), newlines, &body);
            if let Some((of, stub)) = stub.filter(worth) {
                let start = self.put_stub(r, &stub.to_string());
                let names = vec![(stub.from.first, stub.from.last)];
                self.merge = Some(Merge { start, end: r.out.len(), record: of, shift: stub.shift, names });
                stubs.push(Stub::Lines(stub));
            } else {
                lines[i..body_end].iter().for_each(|l| self.put(r, l));
            }
            lines[body_end..j].iter().for_each(|l| self.put(r, l));
            i = j;
        }
    }
}
