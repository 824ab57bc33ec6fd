//! Reading a residual back the way a model reads its context: every stub
//! replaced by the lines it names. For the faithful residual this gives the
//! original output byte for byte (the operator's and the proxy's tests
//! check it); a `similar to` stub (the paper's residual) names lines that
//! are only *like* the text it stands for, so it cannot be read back.
//!
//! ```
//! use lam_core::expand::{Seen, expand};
//!
//! let first = b"SCALE = 3\nprint(SCALE)\nsave()\n";
//! let seen = [Seen { call: "cat big.py", residual: first, output: first }];
//! let next = b"SCALE = 4\n[lam: lines 2-3 of `cat big.py`]\n";
//! assert_eq!(expand(next, "cat big.py", &seen)?.text, b"SCALE = 4\nprint(SCALE)\nsave()\n");
//! // The same call run again: `its last output` is the newest of its name.
//! let again = b"[lam: line 1 of its last output]\nprint(SCALE)\n";
//! assert_eq!(expand(again, "cat big.py", &seen)?.text, b"SCALE = 3\nprint(SCALE)\n");
//! # Ok::<(), lam_core::expand::ExpandError>(())
//! ```

use crate::newlines::renumber;
use crate::stub::Stub;

/// An earlier output in the model's context.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// How stubs name its call ([`crate::action::referent`]; empty: no name).
    pub call: &'a str,
    /// What the model was given for it.
    pub residual: &'a [u8],
    /// The output it stands for, read back (the original).
    pub output: &'a [u8],
}

/// What a residual reads back to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// The text.
    pub text: Vec<u8>,
    /// Stubs whose name fits more than one earlier output that reads
    /// differently there (the newest was read).
    pub ambiguous: usize,
}

/// Why a residual cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("residual line {line}: {why}")]
pub struct ExpandError {
    /// 1-based line of the residual.
    pub line: usize,
    /// What is wrong with the stub there.
    pub why: String,
}

/// Read `residual` back, given its own call's name (`call`, how stubs
/// name it: `of its last output` and `last time` mean that name) and the
/// outputs before it in the session (oldest first). A line stub (`lines
/// 2-3 of `cat a.py``, `lines 7-9 ditto`: of the call the stub line above
/// names) gives the lines it names, each of its spans in turn (`lines
/// 1-4,7-12`), of this output above it, or of the newest earlier output of
/// that name where those lines are readable text at every span (no stub
/// line, no hunk header of a difference form); places are found by
/// [`place_of`]; a `same
/// output as` line gives that output whole. Refused: a
/// `similar to` stub, a place that is not readable text.
pub fn expand(residual: &[u8], call: &str, earlier: &[Seen<'_>]) -> Result<Reading, ExpandError> {
    let delta = crate::stub::parse_delta(residual).map_err(|e| ExpandError { line: 1, why: e.to_string() })?;
    if let Some(mut d) = delta {
        if d.last {
            d.of = call.to_string();
        }
        return apply_delta(residual, &d, earlier);
    }
    let lines: Vec<&[u8]> = residual.split_inclusive(|&b| b == b'\n').collect();
    let texts = text_lines(residual);
    let mut out = Reading::default();
    let mut above: Option<Stub> = None;
    for (i, line) in lines.iter().enumerate() {
        let err = |why: String| ExpandError { line: i + 1, why };
        let stub = Stub::parse_bytes(line).map(|mut s| {
            let followed = s.follow(above.as_ref());
            s.set_own_call(call);
            (followed, s)
        });
        if let Some((_, s)) = &stub {
            above = Some(s.clone());
        }
        match stub.map(|(followed, s)| if followed { Ok(s) } else { Err(s) }) {
            None => out.text.extend_from_slice(line),
            Some(Err(s)) => return Err(err(format!("`{s}` has no call named on the stub line above"))),
            Some(Ok(Stub::Lines(l))) => {
                // Each span in turn, all in one output.
                let spans = |lines: &[Option<&[u8]>]| l.spans().map(|span| place(lines, span, l.shift)).collect::<Option<Vec<_>>>().map(|v| v.concat());
                let named = match &l.from.of {
                    None => spans(&texts[..i]).ok_or_else(|| err(format!("`{l}` names lines not above it as text")))?,
                    Some(call) => newest(earlier, call, &mut out.ambiguous, |s| spans(&text_lines(s.residual)))
                        .ok_or_else(|| err(format!("`{l}` names no readable lines of an earlier `{call}`")))?,
                };
                out.text.extend_from_slice(&named);
            }
            Some(Ok(Stub::Repeat(r))) if lines.len() == 1 => {
                let whole =
                    newest(earlier, &r.of, &mut out.ambiguous, |s| Some(s.output.to_vec())).ok_or_else(|| err(format!("`{r}` names no earlier output")))?;
                out.text.extend_from_slice(&whole);
            }
            Some(Ok(Stub::Repeat(r))) => return Err(err(format!("`{r}` is not the only line"))),
            Some(Ok(Stub::Chunks(c))) => return Err(err(format!("`{c}` stands for text that is only similar to the lines it names"))),
            Some(Ok(Stub::Delta(d))) => return Err(err(format!("`{d}` is not the first line"))),
        }
    }
    Ok(out)
}

/// A delta residual read back: the representative (the newest earlier
/// output of the call named, read back) with each hunk's lines in place of
/// the lines it removes.
fn apply_delta(residual: &[u8], d: &crate::stub::DeltaStub, earlier: &[Seen<'_>]) -> Result<Reading, ExpandError> {
    let mut out = Reading::default();
    let base = newest(earlier, &d.of, &mut out.ambiguous, |s| Some(s.output.to_vec()))
        .ok_or_else(|| ExpandError { line: 1, why: format!("`{d}` names no earlier output") })?;
    let base = split(&base);
    let lines = split(residual);
    let (mut old, mut at) = (0usize, 1usize);
    for (k, h) in d.hunks.iter().enumerate() {
        let err = |why: &str| ExpandError { line: at + 1, why: format!("hunk {}: {why}", k + 1) };
        let keep = base.get(old..h.at as usize).ok_or_else(|| err("past the end of the representative"))?;
        keep.iter().for_each(|l| out.text.extend_from_slice(l));
        let ins = lines.get(at + 1..at + 1 + h.ins as usize).ok_or_else(|| err("cut short"))?;
        ins.iter().for_each(|l| out.text.extend_from_slice(l));
        old = (h.at + h.del) as usize;
        at += 1 + h.ins as usize;
    }
    let rest = base.get(old..).ok_or_else(|| ExpandError { line: lines.len(), why: "the hunks end past the representative".into() })?;
    rest.iter().for_each(|l| out.text.extend_from_slice(l));
    Ok(out)
}

fn split(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&b| b == b'\n').collect()
}

/// A residual's lines as the model reads them: `None` for a stub line (a
/// `[lam: ...]` line, or a hunk header of a difference form), the text
/// otherwise.
fn text_lines(residual: &[u8]) -> Vec<Option<&[u8]>> {
    let mut lines: Vec<Option<&[u8]>> = split(residual).into_iter().map(|l| Stub::parse_bytes(l).is_none().then_some(l)).collect();
    if let Ok(Some(d)) = crate::stub::parse_delta(residual) {
        for n in d.stub_lines() {
            if let Some(l) = lines.get_mut(n as usize - 1) {
                *l = None;
            }
        }
    }
    lines
}

/// The lines a stub names as `lines first-last` of an output, each with
/// its newline and its line number moved by `shift`
/// ([`crate::newlines::renumber`]), read from that output's lines as the
/// model reads them ([`text_lines`]) by [`place_of`].
fn place(lines: &[Option<&[u8]>], (first, last): (u32, u32), shift: i32) -> Option<Vec<u8>> {
    let number = |i: usize| lines[i].map(|l| crate::newlines::Numbered::of(l).map_or(0, |n| n.number));
    let named = &lines[place_of(lines.len(), first, last, number)?];
    let mut out = Vec::new();
    for l in named {
        let l = (*l)?;
        let l = l.strip_suffix(b"\n").unwrap_or(l);
        out.extend(renumber(l, i64::from(shift))?);
        out.push(b'\n');
    }
    Some(out)
}

/// [`place_of`] over a residual as the model reads it (its stub lines and
/// a difference form's hunk headers are not text): where the lines a stub
/// names as `lines first-last` of it are, 0-based. For `this output`, pass
/// the residual's lines above the stub.
pub fn place_in(residual: &[u8], first: u32, last: u32) -> Option<std::ops::Range<usize>> {
    let lines = text_lines(residual);
    let number = |i: usize| lines[i].map(|l| crate::newlines::Numbered::of(l).map_or(0, |n| n.number));
    place_of(lines.len(), first, last, number)
}

/// Where the lines a stub names as `lines first-last` are among an
/// output's `len` lines (0-based), the one reading rule for everything
/// that writes or reads a line stub (this module, `lam_hash`'s L0 and its
/// naive version). `number(i)` is line `i`'s printed line number (`    12→`,
/// `12\t`: [`crate::newlines::Numbered`]), 0 for a line without one, and
/// `None` for a stub line (not text).
///
/// - When some text line is printed with the number `first`, the place is
///   the first such line and the lines after it, which must be printed
///   `first + 1` ... `last`: a numbered listing is named by the numbers the
///   model sees (after a stub has folded lines of it, or when it starts
///   past line 1, its lines no longer count from 1).
/// - Otherwise lines are counted from 1 at the output's first line.
///
/// `None` when the place is past the end or a line of it is not text.
pub fn place_of(len: usize, first: u32, last: u32, number: impl Fn(usize) -> Option<u32>) -> Option<std::ops::Range<usize>> {
    let n = last.checked_sub(first)? as usize + 1;
    let printed = (0..len).find(|&i| number(i) == Some(first));
    let at = printed.unwrap_or((first as usize).checked_sub(1)?);
    let range = at..at.checked_add(n).filter(|&end| end <= len)?;
    let fits = |(k, i): (usize, usize)| number(i).is_some_and(|m| printed.is_none() || m as usize == first as usize + k);
    range.clone().enumerate().all(fits).then_some(range)
}

/// What `read` gives for the newest earlier output named `call` that it
/// reads; counts an ambiguity when an older one of the same name reads
/// otherwise.
fn newest(earlier: &[Seen<'_>], call: &str, ambiguous: &mut usize, read: impl Fn(&Seen<'_>) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    let mut found: Option<Vec<u8>> = None;
    for s in earlier.iter().rev().filter(|s| s.call == call) {
        match (read(s), &found) {
            (Some(t), None) => found = Some(t),
            (Some(t), Some(f)) if t != *f => {
                *ambiguous += 1;
                break;
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_lines_of_this_and_earlier_outputs() {
        let a = b"x = 1\ny = 2\nz = 3";
        let seen = [Seen { call: "cat a.py", residual: a, output: a }];
        let r = expand(b"x = 1\n[lam: line 1 of this output]\n[lam: lines 2-3 of `cat a.py`; _recall \xc2\xa7abcd]\n", "x", &seen).unwrap();
        assert_eq!(r.text, b"x = 1\nx = 1\ny = 2\nz = 3\n");
        assert_eq!(expand(b"[lam: same output as `cat a.py` above]\n", "x", &seen).unwrap().text, a);
        let r = expand(b"[lam: line 1 of `cat a.py`]\nw = 0\n[lam: lines 2-3 ditto]\n", "x", &seen).unwrap();
        assert_eq!(r.text, b"x = 1\nw = 0\ny = 2\nz = 3\n");
        assert_eq!(expand(b"x = 1\n[lam: lines 2-3 ditto]\n", "x", &seen).unwrap_err().line, 2, "no call above to repeat");
        let n = "     1→x\n     2→y\n".as_bytes();
        let seen = [Seen { call: "Read a.py", residual: n, output: n }];
        let r = expand("     1→new\n[lam: lines 1-2 of `Read a.py` with line numbers +1]\n".as_bytes(), "x", &seen).unwrap();
        assert_eq!(r.text, "     1→new\n     2→x\n     3→y\n".as_bytes());
    }

    #[test]
    fn numbered_listings_are_named_by_their_printed_numbers() {
        // A read from line 100: its first line is printed 100, not 1.
        let read = "   100→a = 1\n   101→b = 2\n   102→c = 3\n".as_bytes();
        let seen = [Seen { call: "Read a.py", residual: read, output: read }];
        let r = expand("[lam: lines 101-102 of `Read a.py`]\n".as_bytes(), "x", &seen).unwrap();
        assert_eq!(r.text, "   101→b = 2\n   102→c = 3\n".as_bytes());
        // After a stub has folded lines, the numbers still name the lines
        // the model sees, not their count.
        let this = "[lam: lines 100-101 of `Read a.py`]\n   102→c = 3\n[lam: line 102 of this output with line numbers +1]\n".as_bytes();
        let r = expand(this, "x", &seen).unwrap();
        assert_eq!(r.text, "   100→a = 1\n   101→b = 2\n   102→c = 3\n   103→c = 3\n".as_bytes());
        // Printed numbers that do not go on one by one do not read.
        assert!(expand("[lam: lines 100-101 of this output]\n".as_bytes(), "x", &seen).is_err());
        let gap = "   100→a\n   105→b\n".as_bytes();
        let seen = [Seen { call: "cat -n", residual: gap, output: gap }];
        assert!(expand("[lam: lines 100-101 of `cat -n`]\n".as_bytes(), "x", &seen).is_err());
        // Where no line is printed with the first number, lines count from 1.
        assert_eq!(expand("[lam: lines 1-2 of `cat -n`]\n".as_bytes(), "x", &seen).unwrap().text, gap);
    }

    #[test]
    fn refuses_what_cannot_be_read_back() {
        let a = b"[lam: line 1 of `x`]\nb\n";
        let seen = [Seen { call: "cat a.py", residual: a, output: b"x\nb\n" }];
        // A stub line is not readable text.
        assert_eq!(expand(b"[lam: line 1 of `cat a.py`]\n", "x", &seen).unwrap_err().line, 1);
        assert!(expand(b"q\n[lam: lines 1-2 of this output]\n", "x", &seen).is_err());
        assert!(expand(b"[lam: similar to line 2 of `cat a.py`]\n", "x", &seen).is_err());
        assert!(expand(b"[lam: line 1 of `ls`]\n", "x", &seen).is_err());
    }

    #[test]
    fn the_newest_output_of_a_name_is_read_and_a_difference_counted() {
        let (a, b) = (b"old\n".as_slice(), b"new\n".as_slice());
        let seen = [Seen { call: "pytest", residual: a, output: a }, Seen { call: "pytest", residual: b, output: b }];
        let r = expand(b"[lam: line 1 of `pytest`]\n", "x", &seen).unwrap();
        assert_eq!((r.text.as_slice(), r.ambiguous), (b"new\n".as_slice(), 1));
    }

    #[test]
    fn its_last_output_is_the_newest_of_its_own_name() {
        let (a, b) = (b"1\n2\n3\n".as_slice(), b"1\n9\n3\n".as_slice());
        let seen = [Seen { call: "pytest", residual: a, output: a }, Seen { call: "ls", residual: b, output: b }];
        let r = expand(b"[lam: lines 1-2 of its last output; _recall \xc2\xa7abcd]\nx\n[lam: line 3 ditto]\n", "pytest", &seen).unwrap();
        assert_eq!(r.text, b"1\n2\nx\n3\n");
        assert_eq!(expand(b"[lam: same output as last time]\n", "ls", &seen).unwrap().text, b);
        let d = b"[lam: as last time except these lines]\n@@ -2 +2 @@\n5\n";
        assert_eq!(expand(d, "pytest", &seen).unwrap().text, b"1\n5\n3\n");
        assert!(expand(b"[lam: line 1 of its last output]\n", "make", &seen).is_err(), "no earlier output of its name");
    }

    #[test]
    fn a_hunk_header_of_a_difference_form_is_no_text_to_name() {
        let (a, b) = (b"1\n2\n3\n".as_slice(), b"[lam: as `t` above except these lines]\n@@ -2 +2 @@\n9\n".as_slice());
        let seen = [Seen { call: "t", residual: a, output: a }, Seen { call: "t", residual: b, output: b"1\n9\n3\n" }];
        // Line 2 of the newest `t` is a hunk header: the older output is read.
        assert_eq!(expand(b"[lam: line 2 of `t`]\n", "x", &seen).unwrap().text, b"2\n");
        // Line 3 of the newest is its text.
        assert_eq!(expand(b"[lam: line 3 of `t`]\n", "x", &seen).unwrap().text, b"9\n");
    }
}
