//! The stub grammar: the one place where LAM's one-line stubs are written
//! and read back (`docs/stubs.md`).
//!
//! A stub replaces text that admission removed from an observation and cites
//! where an equivalent, readable copy is (`§id#chunk` or `§id:line`) and how
//! to get the exact removed bytes back (`_recall §id`, the archived
//! original). Two kinds exist:
//!
//! ```text
//! [lam: chunk 3 of §e5f6a7b8 ~ §a1b2c3d4#1, d=0.210; _recall §e5f6a7b8]
//! [lam: chunks 3-6 of §e5f6a7b8 ~ §a1b2c3d4#1-2,2 §c0ffee00#4, d<=0.210; _recall §e5f6a7b8]
//! [lam: 12 repeated lines, first at §a1b2c3d4:40; _recall §e5f6a7b8]
//! ```
//!
//! Producers build a [`Stub`] and write it with `Display`; consumers read a
//! residual line with [`Stub::parse`]. `Stub::parse(&s.to_string())` gives
//! back `s` with its distance rounded to the three printed decimals.

use std::fmt::{self, Write as _};

/// Every stub line starts with this.
pub const PREFIX: &str = "[lam: ";

/// A chunk of a retained observation that a dropped chunk is represented by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRef {
    /// Visible id of the observation holding the representative (no `§`).
    pub id: String,
    /// 1-based chunk number within that observation.
    pub chunk: u32,
}

/// L1: a run of consecutive dropped chunks of one observation.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkStub {
    /// Visible id of the observation the chunks were dropped from.
    pub id: String,
    /// First dropped chunk, 1-based.
    pub first: u32,
    /// Last dropped chunk, 1-based (`== first` for one chunk).
    pub last: u32,
    /// The representative of each dropped chunk, in chunk order (`last - first + 1` entries).
    pub reps: Vec<ChunkRef>,
    /// The largest distance to a representative in the run.
    pub distance: f32,
}

/// L0: a run of lines already present in the session's residual text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineStub {
    /// Visible id of the observation the lines were removed from.
    pub id: String,
    /// Lines replaced.
    pub lines: u64,
    /// Visible id of the observation whose residual holds the first line.
    pub first_id: String,
    /// 1-based line number of the first line in that residual.
    pub first_line: u32,
}

/// One stub line.
#[derive(Debug, Clone, PartialEq)]
pub enum Stub {
    /// Near-duplicate chunks (L1).
    Chunks(ChunkStub),
    /// Repeated lines (L0).
    Lines(LineStub),
}

/// Why a line is not a stub.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a lam stub ({reason}): {line:?}")]
pub struct StubError {
    /// The line (cut to 120 characters).
    pub line: String,
    /// What did not match the grammar.
    pub reason: &'static str,
}

impl Stub {
    /// Visible id of the observation the stub stands in (its `_recall §id`).
    pub fn id(&self) -> &str {
        match self {
            Stub::Chunks(c) => &c.id,
            Stub::Lines(l) => &l.id,
        }
    }

    /// Every id the stub names: the observation it stands in, then where its
    /// text is readable (representatives, or the first repeated line).
    pub fn cited_ids(&self) -> Vec<&str> {
        let mut ids = vec![self.id()];
        match self {
            Stub::Chunks(c) => ids.extend(c.reps.iter().map(|r| r.id.as_str())),
            Stub::Lines(l) => ids.push(&l.first_id),
        }
        ids.dedup();
        ids
    }

    /// True for L1 stubs.
    pub fn is_chunks(&self) -> bool {
        matches!(self, Stub::Chunks(_))
    }

    /// Parse one residual line (without its newline).
    pub fn parse(line: &str) -> Result<Stub, StubError> {
        let fail = |reason| StubError { line: line.chars().take(120).collect(), reason };
        let body = line.strip_prefix(PREFIX).and_then(|r| r.strip_suffix(']')).ok_or_else(|| fail("no `[lam: ...]` frame"))?;
        let (head, recall) = body.rsplit_once("; _recall §").ok_or_else(|| fail("no `; _recall §id`"))?;
        check_id(recall).ok_or_else(|| fail("bad recall id"))?;
        if head.starts_with("chunk") {
            parse_chunks(head, recall).map(Stub::Chunks).map_err(fail)
        } else {
            parse_lines(head, recall).map(Stub::Lines).map_err(fail)
        }
    }

    /// Parse a residual line given as bytes; `None` when it is not a stub.
    pub fn parse_bytes(line: &[u8]) -> Option<Stub> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        if !line.starts_with(PREFIX.as_bytes()) {
            return None;
        }
        Stub::parse(std::str::from_utf8(line).ok()?).ok()
    }
}

fn check_id(s: &str) -> Option<&str> {
    (s.len() >= 8 && s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())).then_some(s)
}

fn parse_chunks(head: &str, recall: &str) -> Result<ChunkStub, &'static str> {
    let (range, rest) = if let Some(r) = head.strip_prefix("chunks ") {
        r.split_once(" of §").ok_or("no `of §id`")?
    } else {
        head.strip_prefix("chunk ").and_then(|r| r.split_once(" of §")).ok_or("no `chunk K of §id`")?
    };
    let (first, last) = match range.split_once('-') {
        Some((a, b)) => (a.parse().map_err(|_| "bad chunk range")?, b.parse().map_err(|_| "bad chunk range")?),
        None => {
            let k = range.parse().map_err(|_| "bad chunk number")?;
            (k, k)
        }
    };
    let (id, rest) = rest.split_once(" ~ ").ok_or("no ` ~ ` before the representatives")?;
    let (reps, d) = rest.rsplit_once(", d").ok_or("no distance")?;
    let d = d.strip_prefix("<=").or_else(|| d.strip_prefix('=')).ok_or("bad distance")?;
    let distance: f32 = d.parse().map_err(|_| "bad distance")?;
    if id != recall {
        return Err("an L1 stub recalls the observation it stands in");
    }
    let reps = parse_reps(reps)?;
    if first == 0 || last < first || reps.len() as u64 != u64::from(last - first) + 1 {
        return Err("the representatives do not match the chunk range");
    }
    Ok(ChunkStub { id: id.to_string(), first, last, reps, distance })
}

/// `§a#1-2,2 §b#4` -> a#1, a#2, a#2, b#4.
fn parse_reps(s: &str) -> Result<Vec<ChunkRef>, &'static str> {
    let mut out = Vec::new();
    for group in s.split(' ') {
        let (id, list) = group.strip_prefix('§').and_then(|g| g.split_once('#')).ok_or("bad representative")?;
        check_id(id).ok_or("bad representative id")?;
        for item in list.split(',') {
            let (a, b) = match item.split_once('-') {
                Some((a, b)) => (a.parse::<u32>().map_err(|_| "bad chunk")?, b.parse::<u32>().map_err(|_| "bad chunk")?),
                None => {
                    let k = item.parse::<u32>().map_err(|_| "bad chunk")?;
                    (k, k)
                }
            };
            if a == 0 || b < a || b - a > 1 << 20 {
                return Err("bad representative range");
            }
            out.extend((a..=b).map(|chunk| ChunkRef { id: id.to_string(), chunk }));
        }
    }
    Ok(out)
}

fn parse_lines(head: &str, recall: &str) -> Result<LineStub, &'static str> {
    let (n, rest) = head.split_once(" repeated line").ok_or("neither a chunk nor a line stub")?;
    let lines: u64 = n.parse().map_err(|_| "bad line count")?;
    let rest = rest.strip_prefix('s').filter(|_| lines != 1).unwrap_or(rest);
    let loc = rest.strip_prefix(", first at §").ok_or("no `first at §id:line`")?;
    let (first_id, line) = loc.split_once(':').ok_or("no `:line`")?;
    check_id(first_id).ok_or("bad first id")?;
    let first_line = line.parse().map_err(|_| "bad line number")?;
    if lines == 0 || first_line == 0 {
        return Err("zero lines");
    }
    Ok(LineStub { id: recall.to_string(), lines, first_id: first_id.to_string(), first_line })
}

impl fmt::Display for ChunkRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "§{}#{}", self.id, self.chunk)
    }
}

/// Representatives in chunk order: chunks of one observation once per
/// stretch (`§id#` then a comma list), consecutive chunks as a range (`1-2`).
fn write_reps(f: &mut fmt::Formatter<'_>, reps: &[ChunkRef]) -> fmt::Result {
    let mut i = 0;
    while i < reps.len() {
        let mut j = i + 1;
        while j < reps.len() && reps[j].chunk == reps[j - 1].chunk + 1 && reps[j].id == reps[i].id {
            j += 1;
        }
        if i > 0 && reps[i].id == reps[i - 1].id {
            f.write_char(',')?;
        } else {
            if i > 0 {
                f.write_char(' ')?;
            }
            write!(f, "§{}#", reps[i].id)?;
        }
        write!(f, "{}", reps[i].chunk)?;
        if j > i + 1 {
            write!(f, "-{}", reps[j - 1].chunk)?;
        }
        i = j;
    }
    Ok(())
}

impl fmt::Display for ChunkStub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = &self.id;
        if self.first == self.last {
            write!(f, "{PREFIX}chunk {} of §{id} ~ ", self.first)?;
            write_reps(f, &self.reps)?;
            write!(f, ", d={:.3}; _recall §{id}]", self.distance)
        } else {
            write!(f, "{PREFIX}chunks {}-{} of §{id} ~ ", self.first, self.last)?;
            write_reps(f, &self.reps)?;
            write!(f, ", d<={:.3}; _recall §{id}]", self.distance)
        }
    }
}

impl LineStub {
    /// Bytes of the rendered line (without a newline), computed without
    /// formatting it: L0 sizes many runs that stay verbatim.
    pub fn rendered_len(&self) -> usize {
        line_stub_len(self.lines, &self.first_id, self.first_line, &self.id)
    }
}

/// [`LineStub::rendered_len`] of the stub these fields would make, without building it.
pub fn line_stub_len(lines: u64, first_id: &str, first_line: u32, id: &str) -> usize {
    PREFIX.len()
        + digits(lines)
        + " repeated line".len()
        + usize::from(lines != 1)
        + ", first at §".len()
        + first_id.len()
        + 1
        + digits(u64::from(first_line))
        + "; _recall §".len()
        + id.len()
        + 1
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

impl fmt::Display for LineStub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.lines == 1 { "" } else { "s" };
        write!(f, "{PREFIX}{} repeated line{s}, first at §{}:{}; _recall §{}]", self.lines, self.first_id, self.first_line, self.id)
    }
}

impl fmt::Display for Stub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stub::Chunks(c) => c.fmt(f),
            Stub::Lines(l) => l.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(id: &str, chunk: u32) -> ChunkRef {
        ChunkRef { id: id.into(), chunk }
    }

    #[test]
    fn formats_as_documented() {
        let one = ChunkStub { id: "e5f6a7b8".into(), first: 3, last: 3, reps: vec![r("a1b2c3d4", 1)], distance: 0.21 };
        assert_eq!(one.to_string(), "[lam: chunk 3 of §e5f6a7b8 ~ §a1b2c3d4#1, d=0.210; _recall §e5f6a7b8]");
        let run = ChunkStub {
            id: "e5f6a7b8".into(),
            first: 3,
            last: 6,
            reps: vec![r("a1b2c3d4", 1), r("a1b2c3d4", 2), r("a1b2c3d4", 2), r("c0ffee00", 4)],
            distance: 0.21,
        };
        assert_eq!(run.to_string(), "[lam: chunks 3-6 of §e5f6a7b8 ~ §a1b2c3d4#1-2,2 §c0ffee00#4, d<=0.210; _recall §e5f6a7b8]");
        let l = LineStub { id: "e5f6a7b8".into(), lines: 12, first_id: "a1b2c3d4".into(), first_line: 40 };
        assert_eq!(l.to_string(), "[lam: 12 repeated lines, first at §a1b2c3d4:40; _recall §e5f6a7b8]");
        assert_eq!(l.rendered_len(), l.to_string().len());
        let l1 = LineStub { lines: 1, ..l };
        assert_eq!(l1.to_string(), "[lam: 1 repeated line, first at §a1b2c3d4:40; _recall §e5f6a7b8]");
        assert_eq!(l1.rendered_len(), l1.to_string().len());
    }

    #[test]
    fn parses_back() {
        for line in [
            "[lam: chunk 3 of §e5f6a7b8 ~ §a1b2c3d4#1, d=0.210; _recall §e5f6a7b8]",
            "[lam: chunks 3-6 of §e5f6a7b8 ~ §a1b2c3d4#1-2,2 §c0ffee00#4, d<=0.210; _recall §e5f6a7b8]",
            "[lam: chunks 1-2 of §e5f6a7b8aaaa ~ §a1b2c3d4#7,2, d<=0.000; _recall §e5f6a7b8aaaa]",
            "[lam: chunks 1-3 of §e5f6a7b8 ~ §a1b2c3d4#7 §c0ffee00#2 §a1b2c3d4#8, d<=1.414; _recall §e5f6a7b8]",
            "[lam: 12 repeated lines, first at §a1b2c3d4:40; _recall §e5f6a7b8]",
            "[lam: 1 repeated line, first at §a1b2c3d4:1; _recall §e5f6a7b8]",
        ] {
            let s = Stub::parse(line).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.to_string(), line);
            assert_eq!(Stub::parse_bytes(format!("{line}\n").as_bytes()), Some(s));
        }
    }

    #[test]
    fn refuses_what_is_not_a_stub() {
        for line in [
            "",
            "[lam: chunk 3 of §e5f6a7b8 ~ §a1b2c3d4#1, d=0.210]",
            "[lam: chunks 3-6 of §e5f6a7b8 ~ §a1b2c3d4#1, d<=0.210; _recall §e5f6a7b8]",
            "[lam: chunk 3 of §e5f6a7b8 ~ §a1b2c3d4#1, d=0.210; _recall §00000000]",
            "[lam: 0 repeated lines, first at §a1b2c3d4:40; _recall §e5f6a7b8]",
            "[lam: 2 repeated lines, first at §A1B2C3D4:40; _recall §e5f6a7b8]",
            "[lam: chunk 1 of §e5f6a7b8 ~ §a1b2c3d4#1-4294967295, d=0.2; _recall §e5f6a7b8]",
            "plain text",
        ] {
            assert!(Stub::parse(line).is_err(), "{line}");
        }
        assert_eq!(Stub::parse_bytes(b"plain"), None);
    }
}
