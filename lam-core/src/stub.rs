//! The stub grammar: the one place where LAM's one-line stubs are written
//! and read back (`docs/stubs.md`).
//!
//! A stub replaces text that admission removed from an observation and cites
//! where an equivalent, readable copy is (`§id#chunk` or `§id:line`). The
//! first stub line of an observation also says how to get the exact removed
//! bytes back (`_recall §id`, the archived original); later stub lines of the
//! same observation leave it out, and a citation of the observation itself
//! leaves out its id. No id is written twice within one stub line.
//!
//! ```text
//! [lam: chunks 3-6 ~ §a1b2c3d4#1-2,2 §c0ffee00#4; _recall §e5f6a7b8]
//! [lam: chunk 9 ~ #2]
//! [lam: 12 lines from §a1b2c3d4:40]
//! [lam: 3 lines from :7; _recall §e5f6a7b8]
//! [lam: same output as `cat src/app.py` above; _recall §91d9]
//! ```
//!
//! Producers build a [`Stub`] and write it with `Display`; consumers read a
//! line with [`Stub::parse`] or a whole residual with [`parse_residual`]
//! (which fills in the observation's own id on lines that leave it out).

use std::fmt::{self, Write as _};

/// Every stub line starts with this.
pub const PREFIX: &str = "[lam: ";
/// What the one recall-carrying stub line of an observation ends with, before `ID]`.
pub const RECALL: &str = "; _recall §";
/// How a [`RepeatStub`] begins, after [`PREFIX`].
pub const REPEAT: &str = "same output as ";

/// How the one recall-carrying stub line of an observation says to get the
/// original back: `; NAME §ID`, where NAME is the way to recall that exists
/// where the stub is read (the ARC view's `_recall` action, `lam mcp`'s
/// `recall` tool as the agent names it, the CLI's `lam recall`), or nothing
/// at all (`none`: no handle, no id; the original stays archived).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recall<'a> {
    /// No handle: stubs name no id of their own.
    None,
    /// `; NAME §ID`.
    Via(&'a str),
}

impl Default for Recall<'_> {
    fn default() -> Self {
        Recall::ARC
    }
}

impl Recall<'static> {
    /// The ARC view's action, `_recall §ID` (the default).
    pub const ARC: Recall<'static> = Recall::Via("_recall");

    /// `none`, or a handle name: letters, digits, `_ . : -`, and single
    /// spaces between words (`lam recall`), at most 64 bytes. A name other
    /// than the built-in ones is kept for the life of the process (settings
    /// are parsed once).
    pub fn parse(s: &str) -> Result<Recall<'static>, String> {
        let s = s.trim();
        match s {
            "none" => return Ok(Recall::None),
            "_recall" => return Ok(Recall::ARC),
            "recall" => return Ok(Recall::Via("recall")),
            "lam recall" => return Ok(Recall::Via("lam recall")),
            _ => {}
        }
        if !valid_handle(s) {
            return Err(format!("recall handle `{s}`: expected `none` or a tool or command name (letters, digits, `_.:-`, single spaces; at most 64 bytes)"));
        }
        Ok(Recall::Via(Box::leak(s.to_string().into_boxed_str())))
    }
}

impl Recall<'_> {
    /// Bytes the recall adds to a stub line of observation `id`, when the line carries it.
    pub fn len(self, id: &str) -> usize {
        match self {
            Recall::None => 0,
            Recall::Via(name) => "; ".len() + name.len() + " §".len() + id.len(),
        }
    }

    /// Whether this writes no handle.
    pub fn is_none(self) -> bool {
        self == Recall::None
    }
}

impl fmt::Display for Recall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recall::None => f.write_str("none"),
            Recall::Via(name) => f.write_str(name),
        }
    }
}

fn valid_handle(s: &str) -> bool {
    let word = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
    s.len() <= 64 && s.split(' ').all(word)
}

/// A stub as written with a given recall handle ([`Stub::with`]).
#[derive(Debug, Clone, Copy)]
pub struct Written<'s> {
    stub: &'s Stub,
    how: Recall<'s>,
}

impl fmt::Display for Written<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.stub.write(f, self.how)
    }
}

/// A chunk of a retained observation that a dropped chunk is represented by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRef {
    /// Visible id of the observation holding the representative (no `§`).
    /// Equal to the stub's own id for a chunk of the same observation
    /// (written `#J`, without the id).
    pub id: String,
    /// 1-based chunk number within that observation.
    pub chunk: u32,
}

/// L1: a run of consecutive dropped chunks of one observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkStub {
    /// Visible id of the observation the chunks were dropped from.
    pub id: String,
    /// First dropped chunk, 1-based.
    pub first: u32,
    /// Last dropped chunk, 1-based (`== first` for one chunk).
    pub last: u32,
    /// The representative of each dropped chunk, in chunk order
    /// (`last - first + 1` entries). No id other than the stub's own may
    /// appear in two stretches that are not adjacent.
    pub reps: Vec<ChunkRef>,
    /// Whether this line carries the observation's `_recall §id`.
    pub recall: bool,
}

/// L0: a run of lines already present in the session's residual text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineStub {
    /// Visible id of the observation the lines were removed from.
    pub id: String,
    /// Lines replaced.
    pub lines: u64,
    /// Visible id of the observation whose residual holds the first line
    /// (the stub's own id when it is this observation's).
    pub first_id: String,
    /// 1-based line number of the first line in that residual.
    pub first_line: u32,
    /// Whether this line carries the observation's `_recall §id`.
    pub recall: bool,
}

/// An observation whose output repeats an earlier observation's whole: its
/// residual is this one line, naming the earlier call the way the model saw
/// it (`lam_core::action::referent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatStub {
    /// Visible id of the observation the line stands in.
    pub id: String,
    /// The earlier call whose output this repeats ([`crate::action::referent`];
    /// holds no backtick). Empty: an earlier call with no name.
    pub of: String,
    /// Whether this line carries the observation's `_recall §id`.
    pub recall: bool,
}

/// One stub line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stub {
    /// Near-duplicate chunks (L1).
    Chunks(ChunkStub),
    /// Repeated lines (L0).
    Lines(LineStub),
    /// A whole repeated output.
    Repeat(RepeatStub),
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
    /// Empty for a line parsed alone that does not carry the recall.
    pub fn id(&self) -> &str {
        match self {
            Stub::Chunks(c) => &c.id,
            Stub::Lines(l) => &l.id,
            Stub::Repeat(r) => &r.id,
        }
    }

    /// Whether this line carries the observation's `_recall §id`.
    pub fn recall(&self) -> bool {
        match self {
            Stub::Chunks(c) => c.recall,
            Stub::Lines(l) => l.recall,
            Stub::Repeat(r) => r.recall,
        }
    }

    /// Set whether this line carries the recall.
    pub fn set_recall(&mut self, recall: bool) {
        match self {
            Stub::Chunks(c) => c.recall = recall,
            Stub::Lines(l) => l.recall = recall,
            Stub::Repeat(r) => r.recall = recall,
        }
    }

    /// The stub as written with the recall handle `how` (`Display` writes
    /// the default, [`Recall::ARC`]).
    pub fn with<'s>(&'s self, how: Recall<'s>) -> Written<'s> {
        Written { stub: self, how }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, how: Recall<'_>) -> fmt::Result {
        match self {
            Stub::Chunks(c) => c.write(f, how),
            Stub::Lines(l) => l.write(f, how),
            Stub::Repeat(r) => r.write(f, how),
        }
    }

    /// The line with the recall set as given (without a newline).
    pub fn line(&self, recall: bool) -> String {
        let mut s = self.clone();
        s.set_recall(recall);
        s.to_string()
    }

    /// Every id the stub names: the observation it stands in, then where its
    /// text is readable (representatives, or the first repeated line).
    pub fn cited_ids(&self) -> Vec<&str> {
        let mut ids = vec![self.id()];
        match self {
            Stub::Chunks(c) => ids.extend(c.reps.iter().map(|r| r.id.as_str())),
            Stub::Lines(l) => ids.push(&l.first_id),
            Stub::Repeat(_) => {}
        }
        let mut seen = Vec::with_capacity(ids.len());
        for id in ids {
            if !seen.contains(&id) {
                seen.push(id);
            }
        }
        seen
    }

    /// True for L1 stubs.
    pub fn is_chunks(&self) -> bool {
        matches!(self, Stub::Chunks(_))
    }

    /// Give a stub parsed without its recall the observation's own id (on
    /// itself and on the citations of its own observation).
    pub fn set_own_id(&mut self, own: &str) {
        let fill = |s: &mut String| {
            if s.is_empty() {
                *s = own.to_string();
            }
        };
        match self {
            Stub::Chunks(c) => {
                fill(&mut c.id);
                c.reps.iter_mut().for_each(|r| fill(&mut r.id));
            }
            Stub::Lines(l) => {
                fill(&mut l.id);
                fill(&mut l.first_id);
            }
            Stub::Repeat(r) => fill(&mut r.id),
        }
    }

    /// Parse one line (without its newline). A line without the recall gets
    /// an empty own id ([`Stub::set_own_id`], [`parse_residual`]).
    pub fn parse(line: &str) -> Result<Stub, StubError> {
        let fail = |reason| StubError { line: line.chars().take(120).collect(), reason };
        let body = line.strip_prefix(PREFIX).and_then(|r| r.strip_suffix(']')).ok_or_else(|| fail("no `[lam: ...]` frame"))?;
        // `; NAME §ID` at the end (a repeated call's name may hold `; ` itself).
        let tail = body.rsplit_once("; ").and_then(|(h, t)| t.rsplit_once(" §").map(|(name, id)| (h, name, id)));
        let (head, handle, recall) = match tail.filter(|(_, name, _)| valid_handle(name)) {
            Some((h, name, id)) => (h, Recall::Via(name), Some(check_id(id).ok_or_else(|| fail("bad recall id"))?)),
            None => (body, Recall::None, None),
        };
        let own = recall.unwrap_or("");
        let stub = if let Some(rest) = head.strip_prefix(REPEAT) {
            parse_repeat(rest, own, recall.is_some()).map(Stub::Repeat).map_err(fail)?
        } else if head.starts_with("chunk") {
            parse_chunks(head, own, recall.is_some()).map(Stub::Chunks).map_err(fail)?
        } else {
            parse_lines(head, own, recall.is_some()).map(Stub::Lines).map_err(fail)?
        };
        if stub.with(handle).to_string() != line {
            return Err(fail("an id written twice, or not in the canonical form"));
        }
        Ok(stub)
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

/// Every stub line of one observation's residual, in order, each with the
/// observation's own id (taken from the line that carries the recall).
/// Lines that are not stubs are skipped. Refused: stubs none of which
/// carries the recall, or recalls of different ids.
pub fn parse_residual(residual: &[u8]) -> Result<Vec<Stub>, StubError> {
    let mut stubs: Vec<Stub> = residual.split(|&b| b == b'\n').filter_map(Stub::parse_bytes).collect();
    let mut own: Option<String> = None;
    for s in stubs.iter().filter(|s| s.recall()) {
        match &own {
            Some(o) if o != s.id() => return Err(StubError { line: s.to_string(), reason: "two different recall ids in one observation" }),
            _ => own = Some(s.id().to_string()),
        }
    }
    match own {
        // Written with `Recall::None`: no line names the observation's id.
        None => Ok(stubs),
        Some(own) => {
            stubs.iter_mut().for_each(|s| s.set_own_id(&own));
            Ok(stubs)
        }
    }
}

fn check_id(s: &str) -> Option<&str> {
    crate::is_shown_form(s).then_some(s)
}

fn parse_range(s: &str) -> Result<(u32, u32), &'static str> {
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (a.parse::<u32>().map_err(|_| "bad number")?, b.parse::<u32>().map_err(|_| "bad number")?),
        None => {
            let k = s.parse::<u32>().map_err(|_| "bad number")?;
            (k, k)
        }
    };
    if a == 0 || b < a || b - a > 1 << 20 {
        return Err("bad range");
    }
    Ok((a, b))
}

fn parse_chunks(head: &str, own: &str, recall: bool) -> Result<ChunkStub, &'static str> {
    let rest = head.strip_prefix("chunks ").or_else(|| head.strip_prefix("chunk ")).ok_or("no `chunk K`")?;
    let (range, reps) = rest.split_once(" ~ ").ok_or("no ` ~ ` before the representatives")?;
    let (first, last) = parse_range(range)?;
    let reps = parse_reps(reps, own)?;
    if reps.len() as u64 != u64::from(last - first) + 1 {
        return Err("the representatives do not match the chunk range");
    }
    Ok(ChunkStub { id: own.to_string(), first, last, reps, recall })
}

/// `§a#1-2,2 #4` -> a#1, a#2, a#2, own#4.
fn parse_reps(s: &str, own: &str) -> Result<Vec<ChunkRef>, &'static str> {
    let mut out = Vec::new();
    let mut written: Vec<&str> = Vec::new();
    for group in s.split(' ') {
        let (id, list) = match group.strip_prefix('§') {
            Some(g) => {
                let (id, list) = g.split_once('#').ok_or("bad representative")?;
                let id = check_id(id).ok_or("bad representative id")?;
                if written.contains(&id) {
                    return Err("an id written twice");
                }
                written.push(id);
                (id, list)
            }
            None => (own, group.strip_prefix('#').ok_or("bad representative")?),
        };
        for item in list.split(',') {
            let (a, b) = parse_range(item)?;
            out.extend((a..=b).map(|chunk| ChunkRef { id: id.to_string(), chunk }));
        }
    }
    Ok(out)
}

/// What follows [`REPEAT`]: `` `referent` above`` or `earlier`.
fn parse_repeat(rest: &str, own: &str, recall: bool) -> Result<RepeatStub, &'static str> {
    let of = match rest.strip_prefix('`').and_then(|r| r.strip_suffix("` above")) {
        Some(of) if !of.is_empty() && !of.contains('`') => of,
        _ if rest == "earlier" => "",
        _ => return Err("bad repeated call"),
    };
    Ok(RepeatStub { id: own.to_string(), of: of.to_string(), recall })
}

fn parse_lines(head: &str, own: &str, recall: bool) -> Result<LineStub, &'static str> {
    let (n, rest) = head.split_once(" line").ok_or("neither a chunk nor a line stub")?;
    let lines: u64 = n.parse().map_err(|_| "bad line count")?;
    let rest = rest.strip_prefix('s').filter(|_| lines != 1).unwrap_or(rest);
    let loc = rest.strip_prefix(" from ").ok_or("no `from §id:line`")?;
    let (first_id, line) = loc.split_once(':').ok_or("no `:line`")?;
    let first_id = match first_id.strip_prefix('§') {
        Some(id) => check_id(id).ok_or("bad first id")?,
        None if first_id.is_empty() => own,
        None => return Err("bad first id"),
    };
    let first_line = line.parse().map_err(|_| "bad line number")?;
    if lines == 0 || first_line == 0 {
        return Err("zero lines");
    }
    Ok(LineStub { id: own.to_string(), lines, first_id: first_id.to_string(), first_line, recall })
}

impl fmt::Display for ChunkRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "§{}#{}", self.id, self.chunk)
    }
}

/// True when appending `next` to `reps` would write an id a second time
/// (an id other than `own` that heads a stretch before the last one).
pub fn would_repeat_id(reps: &[ChunkRef], own: &str, next: &ChunkRef) -> bool {
    next.id != own && reps.last().is_some_and(|l| l.id != next.id) && reps.iter().any(|r| r.id == next.id)
}

/// Representatives in chunk order: chunks of one observation once per
/// stretch (`§id#` then a comma list; `#` alone for the stub's own
/// observation), consecutive chunks as a range (`1-2`).
fn write_reps(f: &mut fmt::Formatter<'_>, own: &str, reps: &[ChunkRef]) -> fmt::Result {
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
            if reps[i].id != own {
                write!(f, "§{}", reps[i].id)?;
            }
            f.write_char('#')?;
        }
        write!(f, "{}", reps[i].chunk)?;
        if j > i + 1 {
            write!(f, "-{}", reps[j - 1].chunk)?;
        }
        i = j;
    }
    Ok(())
}

fn write_recall(f: &mut fmt::Formatter<'_>, recall: bool, id: &str, how: Recall<'_>) -> fmt::Result {
    match how {
        Recall::Via(name) if recall => write!(f, "; {name} §{id}]"),
        _ => f.write_char(']'),
    }
}

impl fmt::Display for ChunkStub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, Recall::ARC)
    }
}

impl ChunkStub {
    fn write(&self, f: &mut fmt::Formatter<'_>, how: Recall<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{PREFIX}chunk {} ~ ", self.first)?;
        } else {
            write!(f, "{PREFIX}chunks {}-{} ~ ", self.first, self.last)?;
        }
        write_reps(f, &self.id, &self.reps)?;
        write_recall(f, self.recall, &self.id, how)
    }
}

impl LineStub {
    /// Bytes of the line as written with `how` (without a newline),
    /// computed without formatting it: L0 sizes many runs that stay verbatim.
    pub fn rendered_len(&self, how: Recall<'_>) -> usize {
        line_stub_len(self.lines, &self.first_id, self.first_line, &self.id, self.recall, how)
    }
}

/// [`LineStub::rendered_len`] of the stub these fields would make, without building it.
pub fn line_stub_len(lines: u64, first_id: &str, first_line: u32, id: &str, recall: bool, how: Recall<'_>) -> usize {
    let cited = if first_id == id { 0 } else { "§".len() + first_id.len() };
    let recall = if recall { how.len(id) } else { 0 };
    PREFIX.len() + digits(lines) + " line".len() + usize::from(lines != 1) + " from ".len() + cited + 1 + digits(u64::from(first_line)) + recall + 1
}

/// The one rule for whether a stub replaces a run of text: the stub line
/// (`stub_len` bytes; `stub_line` builds it) plus the `newlines` it adds
/// must cost fewer tokens than the run. With a counter, tokens are the
/// counter's; a run with more lines holding a printable ASCII byte than the
/// stub has bytes is worth it without counting (each such line counts a
/// token of its own, the [`crate::TokenCounter`] contract; a token is at
/// least one byte). Without a counter the run must hold at least twice the
/// stub's bytes (stub ids cost about twice the cl100k tokens per byte of
/// code).
pub fn worth_replacing(counter: Option<&dyn crate::TokenCounter>, stub_len: usize, stub_line: impl FnOnce() -> String, newlines: usize, run: &[u8]) -> bool {
    let upper = stub_len + newlines;
    match counter {
        None => 2 * upper <= run.len(),
        Some(_) if printable_lines_exceed(run, upper) => true,
        Some(c) => c.count(stub_line().as_bytes()) + newlines < c.count(run),
    }
}

/// True when more than `n` lines of `text` hold a byte in `0x21..=0x7e`.
fn printable_lines_exceed(text: &[u8], n: usize) -> bool {
    let mut k = 0;
    for line in text.split(|&b| b == b'\n') {
        if line.iter().any(|b| (0x21..=0x7e).contains(b)) {
            k += 1;
            if k > n {
                return true;
            }
        }
    }
    false
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
        self.write(f, Recall::ARC)
    }
}

impl LineStub {
    fn write(&self, f: &mut fmt::Formatter<'_>, how: Recall<'_>) -> fmt::Result {
        let s = if self.lines == 1 { "" } else { "s" };
        write!(f, "{PREFIX}{} line{s} from ", self.lines)?;
        if self.first_id != self.id {
            write!(f, "§{}", self.first_id)?;
        }
        write!(f, ":{}", self.first_line)?;
        write_recall(f, self.recall, &self.id, how)
    }
}

impl fmt::Display for RepeatStub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, Recall::ARC)
    }
}

impl RepeatStub {
    fn write(&self, f: &mut fmt::Formatter<'_>, how: Recall<'_>) -> fmt::Result {
        if self.of.is_empty() {
            write!(f, "{PREFIX}{REPEAT}earlier")?;
        } else {
            write!(f, "{PREFIX}{REPEAT}`{}` above", self.of)?;
        }
        write_recall(f, self.recall, &self.id, how)
    }
}

impl fmt::Display for Stub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, Recall::ARC)
    }
}

#[cfg(test)]
mod tests;
