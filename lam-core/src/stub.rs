//! The stub grammar: the one place where LAM's one-line stubs are written
//! and read back (`docs/stubs.md`).
//!
//! A stub replaces text that admission removed from an observation and says
//! where an equivalent, readable copy is, the way the model saw it: the
//! earlier tool call (its main argument, [`crate::action::referent`]) and
//! line numbers within that call's output as it was given to the model, or
//! lines of the observation's own output above the stub. The first stub line
//! of an observation may also say how to get the exact removed bytes back
//! (`_recall §id`, the archived original; [`Recall`]); later stub lines of
//! the same observation leave it out.
//!
//! ```text
//! [lam: similar to lines 12-51 of `cat src/app.py`; _recall §e5f6]
//! [lam: similar to lines 3-11 of this output, line 4 of `pytest -q`]
//! [lam: lines 40-51 of `cat src/app.py`; _recall §e5f6]
//! [lam: lines 60-72 ditto]
//! [lam: line 7 of this output]
//! [lam: same output as `cat src/app.py` above; _recall §91d9]
//! [lam: lines 1-3 of its last output; _recall §91d9]
//! [lam: same output as last time; _recall §91d9]
//! ```
//!
//! The last two name the observation's own call run again: the newest
//! earlier output of a call with the same name, which ran the same action
//! (`last`: [`LineStub::last`], [`RepeatStub::last`], [`DeltaStub::last`]).
//!
//! Producers build a [`Stub`] and write it with `Display` (or [`Stub::with`]
//! a recall handle); consumers read a line with [`Stub::parse`] or a whole
//! residual with [`parse_residual`] (which fills in the observation's own id
//! on lines that leave it out).

use std::fmt::{self, Write as _};

/// Every stub line starts with this.
pub const PREFIX: &str = "[lam: ";
/// What the one recall-carrying stub line of an observation ends with, before `ID]`.
pub const RECALL: &str = "; _recall §";
/// How a [`RepeatStub`] begins, after [`PREFIX`].
pub const REPEAT: &str = "same output as ";
/// How an L1 stub begins, after [`PREFIX`].
pub const SIMILAR: &str = "similar to ";
/// What an L0 stub writes instead of ` of `CALL`` when the stub line
/// above it in the same residual named that call (`lines 60-72 ditto`).
pub const DITTO: &str = " ditto";
/// What an L0 stub says when the line numbers it repeats moved, before `+K`.
pub const SHIFT: &str = " with line numbers ";
/// How a delta stub begins, after [`PREFIX`]: `as `CALL` above except these lines`.
pub const DELTA: &str = "as ";
/// How a delta stub's referent ends.
pub const DELTA_END: &str = " above except these lines";
/// How a delta stub ends after [`LAST_TIME`].
const DELTA_EXCEPT: &str = " except these lines";
/// How a place names the observation's own output.
pub const THIS: &str = "this output";
/// How a place names an earlier call that has no name.
pub const UNNAMED: &str = "an earlier output";
/// How a place names the newest earlier output of the observation's own
/// call, which ran the same action (a command run again, a file read
/// again): `lines 1-3 of its last output`.
pub const LAST: &str = "its last output";
/// How a whole repeat or a delta names that output: `same output as last
/// time`, `as last time except these lines`.
pub const LAST_TIME: &str = "last time";

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

/// Where readable lines are: lines of an earlier call's output, as the model
/// saw that output (its residual), or of this observation's own output,
/// above the stub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The earlier call whose output holds the lines, named as the model
    /// saw it ([`crate::action::referent`]; holds no backtick; empty: a
    /// call with no name). `None`: this observation's own output.
    pub of: Option<String>,
    /// First line, 1-based, in that output as the model was given it.
    pub first: u32,
    /// Last line (`>= first`).
    pub last: u32,
}

impl Place {
    /// Lines `first..=last` of `of` (`None`: this output).
    pub fn new(of: Option<String>, first: u32, last: u32) -> Self {
        Self { of, first, last }
    }
}

/// L1: a run of consecutive dropped chunks of one observation, each within
/// `delta` of a retained chunk, named by the lines that hold those.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkStub {
    /// Visible id of the observation the chunks were dropped from.
    pub id: String,
    /// Where the representatives are, in chunk order; adjacent places of
    /// the same call are written as one (`lines 3-9,12 of `ls``).
    pub like: Vec<Place>,
    /// Whether this line carries the observation's `_recall §id`.
    pub recall: bool,
    /// The dropped chunks (1-based ordinals, first and last) when the
    /// operator made the stub; not written (`None` when parsed).
    pub chunks: Option<(u32, u32)>,
}

/// L0: a run of lines that repeats, line for line, lines already present
/// in the session's residual text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineStub {
    /// Visible id of the observation the lines were removed from.
    pub id: String,
    /// The lines it repeats: lines `first..=last` of an earlier call's
    /// output, or of this one's above the stub (blank lines included), byte
    /// for byte but for the line numbers `shift` moves.
    pub from: Place,
    /// Whether this line carries the observation's `_recall §id`.
    pub recall: bool,
    /// How far each line's number moved (`with line numbers +1`: a line
    /// was inserted above them; [`crate::newlines::renumber`]); 0: none.
    pub shift: i32,
    /// Written `lines A-B ditto`: the stub line just above this one in the
    /// same residual is a line stub naming the same earlier call, which
    /// `from.of` holds (empty when the line was parsed alone, until
    /// [`parse_residual`] or [`Stub::follow`] fills it in).
    pub ditto: bool,
    /// Written `of its last output` (or `ditto` after such a line): `from.of`
    /// is this observation's own call, run again ([`LAST`]; empty when
    /// parsed, until [`Stub::set_own_call`] fills it in).
    pub last: bool,
    /// Further spans of the same output, read after `from`'s, each with the
    /// same shift (`lines 1-3,9-10 of `cat a.py``): two runs one right after
    /// the other, written as one stub line.
    pub more: Vec<(u32, u32)>,
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
    /// Written `same output as last time`: `of` is this observation's own
    /// call, run again ([`LAST_TIME`]; empty when parsed, until
    /// [`Stub::set_own_call`] fills it in).
    pub last: bool,
}

/// An observation forwarded as its difference from the newest earlier
/// output of a call (the representative, which the model can read): this
/// line, then one unified-diff hunk header per changed place, each followed
/// by the lines of this output it puts there (`@@ -12,2 +12,3 @@`); every
/// line between hunks is the representative's (`docs/stubs.md`, "Delta").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaStub {
    /// Visible id of the observation.
    pub id: String,
    /// The earlier call whose newest output is the representative
    /// ([`crate::action::referent`]; not empty, holds no backtick).
    pub of: String,
    /// Whether this line carries the observation's `_recall §id`.
    pub recall: bool,
    /// The changed places, in order (empty when the line was parsed alone;
    /// [`parse_residual`] fills them in).
    pub hunks: Vec<Hunk>,
    /// Written `as last time except these lines`: `of` is this
    /// observation's own call, run again (empty when parsed, until
    /// [`Stub::set_own_call`] fills it in).
    pub last: bool,
}

/// One place where an output differs from its representative: `del` lines
/// of the representative from line `at + 1` on are replaced by the `ins`
/// lines of the output from line `new_at + 1` on (0-based `at`, `new_at`).
/// Written as GNU `diff -u` writes a hunk header, without context lines:
/// `@@ -A[,N] +C[,M] @@` (`,1` left out; a side with no lines names the
/// line before the place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hunk {
    /// Representative lines before the place.
    pub at: u32,
    /// Representative lines the hunk removes.
    pub del: u32,
    /// Output lines before the place.
    pub new_at: u32,
    /// Output lines the hunk writes (they follow its header).
    pub ins: u32,
}

impl fmt::Display for Hunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |f: &mut fmt::Formatter<'_>, sign: char, at: u32, n: u32| {
            let start = if n == 0 { at } else { at + 1 };
            match n {
                1 => write!(f, "{sign}{start}"),
                _ => write!(f, "{sign}{start},{n}"),
            }
        };
        f.write_str("@@ ")?;
        side(f, '-', self.at, self.del)?;
        f.write_char(' ')?;
        side(f, '+', self.new_at, self.ins)?;
        f.write_str(" @@")
    }
}

impl Hunk {
    /// Parse a hunk header in the canonical form [`Hunk`]'s `Display` writes.
    pub fn parse(line: &str) -> Option<Hunk> {
        let body = line.strip_prefix("@@ -")?.strip_suffix(" @@")?;
        let (old, new) = body.split_once(" +")?;
        let side = |s: &str| -> Option<(u32, u32)> {
            let (start, n) = s.split_once(',').unwrap_or((s, "1"));
            let (start, n) = (start.parse::<u32>().ok()?, n.parse::<u32>().ok()?);
            match n {
                0 => Some((start, 0)),
                _ => Some((start.checked_sub(1)?, n)),
            }
        };
        let ((at, del), (new_at, ins)) = (side(old)?, side(new)?);
        let h = Hunk { at, del, new_at, ins };
        (del + ins > 0 && h.to_string() == line).then_some(h)
    }
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
    /// An output forwarded as its difference from an earlier one.
    Delta(DeltaStub),
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
            Stub::Delta(d) => &d.id,
        }
    }

    /// Whether this line carries the observation's `_recall §id`.
    pub fn recall(&self) -> bool {
        match self {
            Stub::Chunks(c) => c.recall,
            Stub::Lines(l) => l.recall,
            Stub::Repeat(r) => r.recall,
            Stub::Delta(d) => d.recall,
        }
    }

    /// Set whether this line carries the recall.
    pub fn set_recall(&mut self, recall: bool) {
        match self {
            Stub::Chunks(c) => c.recall = recall,
            Stub::Lines(l) => l.recall = recall,
            Stub::Repeat(r) => r.recall = recall,
            Stub::Delta(d) => d.recall = recall,
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
            Stub::Delta(d) => d.write(f, how),
        }
    }

    /// The line with the recall set as given (without a newline).
    pub fn line(&self, recall: bool) -> String {
        let mut s = self.clone();
        s.set_recall(recall);
        s.to_string()
    }

    /// Every earlier call the stub names (where its text is readable), each
    /// once, in order; empty names and this observation's own output left out.
    pub fn calls(&self) -> Vec<&str> {
        let named: Vec<&str> = match self {
            Stub::Chunks(c) => c.like.iter().filter_map(|p| p.of.as_deref()).collect(),
            Stub::Lines(l) => l.from.of.as_deref().into_iter().collect(),
            Stub::Repeat(r) => vec![r.of.as_str()],
            Stub::Delta(d) => vec![d.of.as_str()],
        };
        let mut seen = Vec::with_capacity(named.len());
        for c in named {
            if !c.is_empty() && !seen.contains(&c) {
                seen.push(c);
            }
        }
        seen
    }

    /// The stub as its line reads back ([`Stub::parse`]): without what is
    /// not written (the dropped chunks' ordinals).
    pub fn written(&self) -> Stub {
        let mut s = self.clone();
        if let Stub::Chunks(c) = &mut s {
            c.chunks = None;
        }
        s
    }

    /// True for L1 stubs.
    pub fn is_chunks(&self) -> bool {
        matches!(self, Stub::Chunks(_))
    }

    /// Give a stub parsed without its recall the observation's own id.
    pub fn set_own_id(&mut self, own: &str) {
        let id = match self {
            Stub::Chunks(c) => &mut c.id,
            Stub::Lines(l) => &mut l.id,
            Stub::Repeat(r) => &mut r.id,
            Stub::Delta(d) => &mut d.id,
        };
        if id.is_empty() {
            *id = own.to_string();
        }
    }

    /// The call a `ditto` on the next stub line of the residual would mean:
    /// this stub's, when it is a line stub naming an earlier call by name.
    pub fn ditto_call(&self) -> Option<&str> {
        match self {
            // A parsed `of its last output` names the own call, not known yet.
            Stub::Lines(l) => l.from.of.as_deref().filter(|c| !c.is_empty() || l.last),
            _ => None,
        }
    }

    /// Give a stub that names this observation's own call (`of its last
    /// output`, `last time`, and a `ditto` after them), parsed without it,
    /// that call's name (`call`, [`crate::action::referent`]).
    pub fn set_own_call(&mut self, call: &str) {
        let of = match self {
            Stub::Lines(l) if l.last => l.from.of.get_or_insert_default(),
            Stub::Repeat(r) if r.last => &mut r.of,
            Stub::Delta(d) if d.last => &mut d.of,
            _ => return,
        };
        if of.is_empty() {
            call.clone_into(of);
        }
    }

    /// Give a `ditto` stub parsed alone the call of the stub line just above
    /// it in the same residual (`above`); false when it is a `ditto` and
    /// `above` names no call ([`Stub::ditto_call`]).
    pub fn follow(&mut self, above: Option<&Stub>) -> bool {
        let Stub::Lines(l) = self else { return true };
        if !l.ditto {
            return true;
        }
        let last = matches!(above, Some(Stub::Lines(a)) if a.last);
        match above.and_then(Stub::ditto_call) {
            Some(call) if l.from.of.as_deref().is_none_or(|c| c.is_empty() || c == call) => {
                l.from.of = Some(call.to_string());
                l.last = last;
                true
            }
            _ => false,
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
        let stub = if let Some(of) =
            head.strip_prefix(DELTA).and_then(|r| r.strip_prefix('`')).and_then(|r| r.strip_suffix(DELTA_END)).and_then(|r| r.strip_suffix('`'))
        {
            Stub::Delta(DeltaStub { id: own.to_string(), of: of.to_string(), recall: recall.is_some(), hunks: Vec::new(), last: false })
        } else if head.strip_prefix(DELTA).and_then(|r| r.strip_prefix(LAST_TIME)) == Some(DELTA_EXCEPT) {
            Stub::Delta(DeltaStub { id: own.to_string(), of: String::new(), recall: recall.is_some(), hunks: Vec::new(), last: true })
        } else if let Some(rest) = head.strip_prefix(REPEAT) {
            parse_repeat(rest, own, recall.is_some()).map(Stub::Repeat).map_err(fail)?
        } else {
            parse_counted(head, own, recall.is_some()).map_err(fail)?
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
/// Lines that are not stubs are skipped; a `ditto` stub gets the call of
/// the stub line above it ([`Stub::follow`]). Refused: recalls of
/// different ids, a `ditto` with no call named on the stub line above.
pub fn parse_residual(residual: &[u8]) -> Result<Vec<Stub>, StubError> {
    if let Some(d) = parse_delta(residual)? {
        return Ok(vec![Stub::Delta(d)]);
    }
    let mut stubs: Vec<Stub> = residual.split(|&b| b == b'\n').filter_map(Stub::parse_bytes).collect();
    for i in 0..stubs.len() {
        let (above, here) = stubs.split_at_mut(i);
        if !here[0].follow(above.last()) {
            return Err(StubError { line: here[0].to_string(), reason: "`ditto` with no call named on the stub line above" });
        }
    }
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

/// A residual whose first line is a delta stub: that stub with its hunks
/// (each header, then the lines it writes; nothing else may follow).
/// `None` when the first line is not a delta stub.
pub fn parse_delta(residual: &[u8]) -> Result<Option<DeltaStub>, StubError> {
    let mut lines = residual.split_inclusive(|&b| b == b'\n');
    let Some(Stub::Delta(mut d)) = lines.next().and_then(Stub::parse_bytes) else { return Ok(None) };
    let fail = |line: &[u8], reason| StubError { line: String::from_utf8_lossy(line).chars().take(120).collect(), reason };
    let (mut old, mut new) = (0u32, 1u32);
    while let Some(line) = lines.next() {
        let text = std::str::from_utf8(line.strip_suffix(b"\n").unwrap_or(line)).map_err(|_| fail(line, "not a hunk header"))?;
        let h = Hunk::parse(text).ok_or_else(|| fail(line, "not a hunk header"))?;
        if h.at < old || i64::from(h.new_at) - i64::from(new - 1) != i64::from(h.at) - i64::from(old) {
            return Err(fail(line, "hunk out of order"));
        }
        for _ in 0..h.ins {
            lines.next().ok_or_else(|| fail(line, "hunk cut short"))?;
        }
        old = h.at + h.del;
        new = h.new_at + h.ins + 1;
        d.hunks.push(h);
    }
    Ok(Some(d))
}

fn check_id(s: &str) -> Option<&str> {
    crate::is_shown_form(s).then_some(s)
}

fn number(s: &str) -> Result<u32, &'static str> {
    match s.parse::<u32>() {
        Ok(n) if n > 0 && !s.starts_with('0') => Ok(n),
        _ => Err("bad number"),
    }
}

/// Lines `first..=last` of an output, 1-based.
type Span = (u32, u32);

/// `similar to PLACES`, or `PLACE` (an L0 stub: `lines 3-9 of `ls``, `line 4 ditto`).
fn parse_counted(head: &str, own: &str, recall: bool) -> Result<Stub, &'static str> {
    if let Some(places) = head.strip_prefix(SIMILAR) {
        let like = parse_places(places)?;
        return Ok(Stub::Chunks(ChunkStub { id: own.to_string(), like, recall, chunks: None }));
    }
    if !head.starts_with("line") {
        return Err("not a stub kind");
    }
    let (place, shift) = split_shift(head);
    // `lines A-B ditto`: the call is the one the stub line above names;
    // `lines A-B of its last output`: this observation's own call's.
    let (place, ditto, last) = match (place.strip_suffix(DITTO), place.strip_suffix(LAST).and_then(|p| p.strip_suffix(" of "))) {
        (Some(span), _) => (span, true, false),
        (None, Some(span)) => (span, false, true),
        (None, None) => (place, false, false),
    };
    let places = if ditto || last { parse_places(&format!("{place} of {THIS}"))? } else { parse_places(place)? };
    let (from, more) = one_output(places)?;
    let from = if ditto || last { Place { of: Some(String::new()), ..from } } else { from };
    Ok(Stub::Lines(LineStub { id: own.to_string(), from, recall, shift, ditto, last, more }))
}

/// The first place and the spans of the others, when all name one output
/// (`lines 1-3,9-10 of X`, never `lines 1-3 of X, line 4 of Y`).
fn one_output(places: Vec<Place>) -> Result<(Place, Vec<Span>), &'static str> {
    let mut it = places.into_iter();
    let first = it.next().ok_or("no place")?;
    let more: Vec<Span> = it.map(|p| (p.of == first.of).then_some((p.first, p.last)).ok_or("more than one place")).collect::<Result<_, _>>()?;
    Ok((first, more))
}

/// A place and its ` with line numbers +K` (K != 0), or the place alone.
fn split_shift(s: &str) -> (&str, i32) {
    let shift = |k: &str| match k.as_bytes() {
        [b'+' | b'-', b'1'..=b'9', ..] => k.parse::<i32>().ok(),
        _ => None,
    };
    match s.rsplit_once(SHIFT).and_then(|(p, k)| shift(k).map(|k| (p, k))) {
        Some(found) => found,
        None => (s, 0),
    }
}

/// `this output`, `an earlier output` or `` `CALL` ``, then the rest.
fn parse_of(s: &str) -> Result<(Option<String>, &str), &'static str> {
    if let Some(rest) = s.strip_prefix(THIS) {
        return Ok((None, rest));
    }
    if let Some(rest) = s.strip_prefix(UNNAMED) {
        return Ok((Some(String::new()), rest));
    }
    let call = s.strip_prefix('`').ok_or("no call named")?;
    let end = call.find('`').ok_or("no closing backtick")?;
    if end == 0 {
        return Err("empty call");
    }
    Ok((Some(call[..end].to_string()), &call[end + 1..]))
}

/// `lines 3-9,12 of `ls`, line 4 of this output` -> three places.
fn parse_places(mut s: &str) -> Result<Vec<Place>, &'static str> {
    let mut out = Vec::new();
    loop {
        let body = s.strip_prefix("lines ").or_else(|| s.strip_prefix("line ")).ok_or("no `line`")?;
        let (spans, rest) = body.split_once(" of ").ok_or("no `of`")?;
        let (of, rest) = parse_of(rest)?;
        for span in spans.split(',') {
            let (first, last) = match span.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => (number(span)?, number(span)?),
            };
            if last < first {
                return Err("bad line range");
            }
            out.push(Place { of: of.clone(), first, last });
        }
        match rest.strip_prefix(", ") {
            Some(more) => s = more,
            None if rest.is_empty() => return Ok(out),
            None => return Err("text after the places"),
        }
    }
}

/// What follows [`REPEAT`]: `` `referent` above`` or `earlier`.
fn parse_repeat(rest: &str, own: &str, recall: bool) -> Result<RepeatStub, &'static str> {
    let (of, last) = match rest.strip_prefix('`').and_then(|r| r.strip_suffix("` above")) {
        Some(of) if !of.is_empty() && !of.contains('`') => (of, false),
        _ if rest == "earlier" => ("", false),
        _ if rest == LAST_TIME => ("", true),
        _ => return Err("bad repeated call"),
    };
    Ok(RepeatStub { id: own.to_string(), of: of.to_string(), recall, last })
}

/// Places grouped by output: `lines 3-9,12 of `ls`, line 4 of this output`.
fn write_places(f: &mut fmt::Formatter<'_>, like: &[Place]) -> fmt::Result {
    let mut i = 0;
    while i < like.len() {
        let mut j = i + 1;
        while j < like.len() && like[j].of == like[i].of {
            j += 1;
        }
        if i > 0 {
            f.write_str(", ")?;
        }
        let group = &like[i..j];
        let one = group.len() == 1 && group[0].first == group[0].last;
        f.write_str(if one { "line " } else { "lines " })?;
        for (k, p) in group.iter().enumerate() {
            if k > 0 {
                f.write_char(',')?;
            }
            write!(f, "{}", p.first)?;
            if p.last != p.first {
                write!(f, "-{}", p.last)?;
            }
        }
        write_of(f, group[0].of.as_deref())?;
        i = j;
    }
    Ok(())
}

/// One place alone: ``lines 3-9 of `ls` ``, `line 4 of this output`.
impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_places(f, std::slice::from_ref(self))
    }
}

fn write_of(f: &mut fmt::Formatter<'_>, of: Option<&str>) -> fmt::Result {
    match of {
        None => write!(f, " of {THIS}"),
        Some("") => write!(f, " of {UNNAMED}"),
        Some(call) => write!(f, " of `{call}`"),
    }
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
        write!(f, "{PREFIX}{SIMILAR}")?;
        write_places(f, &self.like)?;
        write_recall(f, self.recall, &self.id, how)
    }
}

impl LineStub {
    /// Bytes of the line as written with `how` (without a newline),
    /// computed without formatting it: L0 sizes many runs that stay verbatim.
    pub fn rendered_len(&self, how: Recall<'_>) -> usize {
        let named = if self.ditto {
            Named::Ditto
        } else if self.last {
            Named::Last
        } else {
            Named::Of(self.from.of.as_deref())
        };
        let one = line_stub_len(named, (self.from.first, self.from.last), &self.id, self.recall, how, self.shift);
        // `line 7` becomes `lines 7,9-10`.
        let word = usize::from(!self.more.is_empty() && self.from.first == self.from.last);
        one + word + self.more.iter().map(|&(a, b)| more_span_len(a, b)).sum::<usize>()
    }

    /// Where its lines are, as its places would be written
    /// (``lines 1-4,7-12 of `cat a.py` ``; `ditto` and `its last output`
    /// written out as the call).
    pub fn places_text(&self) -> String {
        struct Places(Vec<Place>);
        impl fmt::Display for Places {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_places(f, &self.0)
            }
        }
        Places(self.spans().map(|(a, b)| Place::new(self.from.of.clone(), a, b)).collect()).to_string()
    }

    /// Its spans: `from`'s, then `more`.
    pub fn spans(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        std::iter::once((self.from.first, self.from.last)).chain(self.more.iter().copied())
    }
}

/// Bytes a further span adds to a line stub (`,9-10`; [`LineStub::more`]).
pub fn more_span_len(first: u32, last: u32) -> usize {
    1 + span_len(first, last)
}

/// A further span as a line stub writes it (`,9-10`; [`LineStub::more`]).
pub fn more_span(first: u32, last: u32) -> String {
    if first == last { format!(",{first}") } else { format!(",{first}-{last}") }
}

/// How a line stub names the output its lines are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named<'a> {
    /// `of `CALL``, `of this output` (`None`), `of an earlier output` (empty).
    Of(Option<&'a str>),
    /// ` ditto`: the call the stub line above names.
    Ditto,
    /// `of its last output`: this observation's own call, run again.
    Last,
}

/// [`LineStub::rendered_len`] of the stub these fields would make (lines
/// `first..=last` of the output `named`, see [`Place`]), without building it.
pub fn line_stub_len(named: Named<'_>, (first, last): (u32, u32), id: &str, recall: bool, how: Recall<'_>, shift: i32) -> usize {
    let recall = if recall { how.len(id) } else { 0 };
    let word = if first == last { "line ".len() } else { "lines ".len() };
    let shift = if shift == 0 { 0 } else { SHIFT.len() + 1 + digits(u64::from(shift.unsigned_abs())) };
    let of = match named {
        Named::Ditto => DITTO.len(),
        Named::Last => " of ".len() + LAST.len(),
        Named::Of(of) => of_len(of),
    };
    PREFIX.len() + word + span_len(first, last) + of + shift + recall + 1
}

/// Bytes of `first` or `first-last`.
fn span_len(first: u32, last: u32) -> usize {
    digits(u64::from(first)) + if last != first { 1 + digits(u64::from(last)) } else { 0 }
}

/// Bytes of ` of ` and the output named.
fn of_len(of: Option<&str>) -> usize {
    " of ".len()
        + match of {
            None => THIS.len(),
            Some("") => UNNAMED.len(),
            Some(call) => call.len() + 2,
        }
}

/// The one rule for whether a stub replaces a run of text: the run must
/// cost more than one and a half times the stub line (`stub_len` bytes;
/// `stub_line` builds it) plus the `newlines` it adds, so that a stub saves
/// at least half of what it costs; a run that would save less stays
/// verbatim, where the model reads it without a lookup (issue 55: the
/// stubs that saved a token or two were a fifth of the stub cost). With a
/// counter, tokens are the counter's; a run with more lines holding a
/// printable ASCII byte than one and a half times the stub's bytes is worth
/// it without counting (each such line counts a token of its own, the
/// [`crate::TokenCounter`] contract; a token is at least one byte). Without
/// a counter the run must hold at least twice the stub's bytes (stub ids
/// cost about twice the cl100k tokens per byte of code).
pub fn worth_replacing(counter: Option<&dyn crate::TokenCounter>, stub_len: usize, stub_line: impl FnOnce() -> String, newlines: usize, run: &[u8]) -> bool {
    let upper = stub_len + newlines;
    match counter {
        None => 2 * upper <= run.len(),
        Some(_) if printable_lines_exceed(run, upper + upper / 2) => true,
        Some(c) => 3 * (c.count(stub_line().as_bytes()) + newlines) < 2 * c.count(run),
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

/// Append `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_all(out: &mut Vec<u8>, parts: &[&str]) {
    for p in parts {
        out.extend_from_slice(p.as_bytes());
    }
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
    /// Append the line as [`Stub::with`] writes it (without a newline) to
    /// `out`, without `core::fmt`: L0 writes thousands of stubs per pass,
    /// and formatting cost a twentieth of its time.
    pub fn write_bytes(&self, out: &mut Vec<u8>, how: Recall<'_>) {
        let Place { ref of, first, last } = self.from;
        out.extend_from_slice(PREFIX.as_bytes());
        out.extend_from_slice(if first == last && self.more.is_empty() { b"line " } else { b"lines " });
        for (k, (a, b)) in self.spans().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            push_decimal(out, u64::from(a));
            if b != a {
                out.push(b'-');
                push_decimal(out, u64::from(b));
            }
        }
        match of.as_deref() {
            _ if self.ditto => out.extend_from_slice(DITTO.as_bytes()),
            _ if self.last => push_all(out, &[" of ", LAST]),
            None => push_all(out, &[" of ", THIS]),
            Some("") => push_all(out, &[" of ", UNNAMED]),
            Some(call) => push_all(out, &[" of `", call, "`"]),
        }
        if self.shift != 0 {
            out.extend_from_slice(SHIFT.as_bytes());
            out.push(if self.shift > 0 { b'+' } else { b'-' });
            push_decimal(out, u64::from(self.shift.unsigned_abs()));
        }
        match how {
            Recall::Via(name) if self.recall => push_all(out, &["; ", name, " §", &self.id, "]"]),
            _ => out.push(b']'),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, how: Recall<'_>) -> fmt::Result {
        // One writer: the bytes L0 writes (a stub line is UTF-8).
        let mut out = Vec::new();
        self.write_bytes(&mut out, how);
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Display for RepeatStub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, Recall::ARC)
    }
}

impl RepeatStub {
    fn write(&self, f: &mut fmt::Formatter<'_>, how: Recall<'_>) -> fmt::Result {
        if self.last {
            write!(f, "{PREFIX}{REPEAT}{LAST_TIME}")?;
        } else if self.of.is_empty() {
            write!(f, "{PREFIX}{REPEAT}earlier")?;
        } else {
            write!(f, "{PREFIX}{REPEAT}`{}` above", self.of)?;
        }
        write_recall(f, self.recall, &self.id, how)
    }
}

impl DeltaStub {
    /// The lines of its residual (1-based) that are stub lines: its own
    /// (line 1) and each hunk header; every other line is output text.
    pub fn stub_lines(&self) -> Vec<u32> {
        let mut at = 2u32;
        let mut out = vec![1];
        for h in &self.hunks {
            out.push(at);
            at = at.saturating_add(1).saturating_add(h.ins);
        }
        out
    }
}

impl fmt::Display for DeltaStub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, Recall::ARC)
    }
}

impl DeltaStub {
    fn write(&self, f: &mut fmt::Formatter<'_>, how: Recall<'_>) -> fmt::Result {
        if self.last {
            write!(f, "{PREFIX}{DELTA}{LAST_TIME}{DELTA_EXCEPT}")?;
        } else {
            write!(f, "{PREFIX}{DELTA}`{}`{DELTA_END}", self.of)?;
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
