//! One record's text after L1, written out: retained ranges of original
//! bytes and runs of dropped chunks, each run one stub line (or its own
//! bytes when the stub would not be shorter), through L0 or verbatim.

use lam_core::TokenCounter;
use lam_core::stub::{ChunkStub, Place, Recall, Stub, worth_replacing};
use std::ops::Range;

/// Where a dropped chunk's representative is.
#[derive(Debug, Clone)]
pub(crate) enum Rep {
    /// A retained chunk of an earlier record: that record, and the chunk's
    /// lines in its residual.
    Earlier { record: u32, lines: (u32, u32) },
    /// A retained chunk of this record, above: its byte range.
    Here(Range<usize>),
}

/// One dropped chunk, before its run is written.
#[derive(Debug, Clone)]
pub(crate) struct Dropped {
    pub range: Range<usize>,
    pub ordinal: u32,
    pub rep: Rep,
}

/// A piece of a record's text after L1.
#[derive(Debug, Clone)]
pub(crate) enum Seg {
    /// Original bytes of retained chunks.
    Text(Range<usize>),
    /// A dropped chunk.
    Dropped(Dropped),
}

/// Append a retained chunk, merging with adjacent text.
pub(crate) fn push_text(segs: &mut Vec<Seg>, range: &Range<usize>) {
    match segs.last_mut() {
        Some(Seg::Text(r)) if r.end == range.start => r.end = range.end,
        _ => segs.push(Seg::Text(range.clone())),
    }
}

/// The faithful residual's segments: the record's whole text, as text
/// (`Residual::Faithful`: nothing is hidden behind an L1 stub).
pub(crate) fn whole(text: &[u8]) -> Vec<Seg> {
    if text.is_empty() { Vec::new() } else { vec![Seg::Text(0..text.len())] }
}

/// Where a record's residual goes: L0 (`lam_hash::Writer`), or verbatim
/// ([`Plain`], the `l0-l1` order, where L0 ran first).
pub(crate) trait Sink {
    /// Write original text.
    fn text(&mut self, bytes: &[u8]);
    /// Write a stub line.
    fn stub(&mut self, stub: Stub);
    /// The residual line of every line of text written so far.
    fn lines(&self) -> &[u32];
    /// Whether the residual ends within a line.
    fn mid_line(&self) -> bool;
    /// Stub lines written so far.
    fn stubs(&self) -> usize;
}

impl Sink for lam_hash::Writer<'_> {
    fn text(&mut self, bytes: &[u8]) {
        lam_hash::Writer::text(self, bytes);
    }
    fn stub(&mut self, stub: Stub) {
        lam_hash::Writer::stub(self, stub);
    }
    fn lines(&self) -> &[u32] {
        lam_hash::Writer::lines(self)
    }
    fn mid_line(&self) -> bool {
        lam_hash::Writer::mid_line(self)
    }
    fn stubs(&self) -> usize {
        lam_hash::Writer::stubs(self)
    }
}

/// The verbatim sink: text as it is, every stub on a line of its own.
pub(crate) struct Plain<'o> {
    out: &'o mut Vec<u8>,
    start: usize,
    line: u32,
    map: Vec<u32>,
    how: Recall<'static>,
    pub(crate) written: Vec<Stub>,
}

impl<'o> Plain<'o> {
    pub(crate) fn new(out: &'o mut Vec<u8>, how: Recall<'static>) -> Self {
        let start = out.len();
        Self { out, start, line: 0, map: Vec::new(), how, written: Vec::new() }
    }
}

impl Sink for Plain<'_> {
    fn text(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            self.map.push(self.line + 1);
            self.line += u32::from(piece.ends_with(b"\n"));
        }
        self.out.extend_from_slice(bytes);
    }
    fn stub(&mut self, stub: Stub) {
        if self.mid_line() {
            self.out.push(b'\n');
            self.line += 1;
        }
        self.out.extend_from_slice(stub.with(self.how).to_string().as_bytes());
        self.out.push(b'\n');
        self.line += 1;
        self.written.push(stub);
    }
    fn lines(&self) -> &[u32] {
        &self.map
    }
    fn mid_line(&self) -> bool {
        self.out.len() > self.start && self.out.last() != Some(&b'\n')
    }
    fn stubs(&self) -> usize {
        self.written.len()
    }
}

/// How [`compose`] writes the recall: on a stub only when none was written
/// before (the default order, where L0 puts it on the record's first stub
/// line), or on every stub (`l0-l1`, where L1 may drop the L0 stub that
/// carried it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Every {
    First,
    Every,
}

/// What [`compose`] needs besides the segments.
pub(crate) struct Record<'a> {
    pub id: &'a str,
    pub text: &'a [u8],
    /// How stubs name each record's call, by record.
    pub calls: &'a [String],
    pub counter: Option<&'a dyn TokenCounter>,
    pub how: Recall<'static>,
    pub recall: Every,
    /// Keep the first layer's bytes ([`Composed::plain`]).
    pub plain: bool,
}

/// Text written so far and where its lines went: answers "which residual
/// line holds byte `at`".
struct Fed {
    /// Newline positions of the whole text.
    newlines: Vec<usize>,
    /// Each text range written, with the index of its first line in the sink's map.
    pieces: Vec<(Range<usize>, usize)>,
    /// Original bytes written (first layer, without stubs), when kept.
    plain: Option<Vec<u8>>,
}

impl Fed {
    fn newlines_before(&self, at: usize) -> usize {
        self.newlines.partition_point(|&p| p < at)
    }

    /// The residual line of byte `at`, which must have been written.
    fn line_of(&self, map: &[u32], at: usize) -> u32 {
        let k = self.pieces.partition_point(|(r, _)| r.end <= at).min(self.pieces.len().saturating_sub(1));
        let (r, base) = &self.pieces[k];
        let at = at.clamp(r.start, r.end.saturating_sub(1).max(r.start));
        map.get(base + self.newlines_before(at) - self.newlines_before(r.start)).copied().unwrap_or(0)
    }

    /// The residual lines of `range` (written).
    fn lines_of(&self, map: &[u32], range: &Range<usize>) -> (u32, u32) {
        (self.line_of(map, range.start), self.line_of(map, range.end.max(range.start + 1) - 1))
    }

    fn write(&mut self, sink: &mut dyn Sink, text: &[u8], range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        self.pieces.push((range.clone(), sink.lines().len()));
        if let Some(p) = &mut self.plain {
            p.extend_from_slice(&text[range.clone()]);
        }
        sink.text(&text[range]);
    }
}

/// What [`compose`] returns: the first layer's kept bytes (empty unless
/// [`Record::plain`]) and the residual
/// lines of every retained range asked for.
pub(crate) struct Composed {
    pub plain: Vec<u8>,
    pub spans: Vec<(u32, u32)>,
}

/// Write a record's segments to `sink`: text as text, each run of
/// consecutive dropped chunks as one stub line naming where its
/// representatives are, or as its own bytes when the stub would not cost
/// fewer tokens (a stub never lengthens the text; the decisions and the
/// deletion digest are the same either way). A run breaks where its
/// representatives would name an earlier record a second time. Returns
/// the residual lines of each range in `spans_of` (retained chunks).
pub(crate) fn compose(r: &Record<'_>, segs: Vec<Seg>, sink: &mut dyn Sink, spans_of: &[Range<usize>]) -> Composed {
    let newlines = memchr::memchr_iter(b'\n', r.text).collect();
    let mut fed = Fed { newlines, pieces: Vec::new(), plain: r.plain.then(Vec::new) };
    let mut run: Vec<Dropped> = Vec::new();
    for s in segs {
        match s {
            Seg::Text(range) => {
                flush(r, &mut fed, sink, &mut run);
                fed.write(sink, r.text, range);
            }
            Seg::Dropped(d) => {
                if breaks(&run, &d) {
                    flush(r, &mut fed, sink, &mut run);
                }
                run.push(d);
            }
        }
    }
    flush(r, &mut fed, sink, &mut run);
    let spans = spans_of.iter().map(|c| fed.lines_of(sink.lines(), c)).collect();
    Composed { plain: fed.plain.unwrap_or_default(), spans }
}

/// A run breaks at a gap, or where the next representative's record was
/// named before, other than just before.
fn breaks(run: &[Dropped], next: &Dropped) -> bool {
    let Some(last) = run.last() else { return false };
    let record = |d: &Dropped| match d.rep {
        Rep::Earlier { record, .. } => Some(record),
        Rep::Here(_) => None,
    };
    let named_before = record(next).is_some_and(|n| record(last) != Some(n) && run.iter().any(|d| record(d) == Some(n)));
    last.ordinal + 1 != next.ordinal || named_before
}

/// Write the run as one stub, or as its bytes when the stub is not worth it.
fn flush(r: &Record<'_>, fed: &mut Fed, sink: &mut dyn Sink, run: &mut Vec<Dropped>) {
    let (Some(first), Some(last)) = (run.first(), run.last()) else { return };
    let bytes = first.range.start..last.range.end;
    let stub = Stub::Chunks(ChunkStub {
        id: r.id.to_string(),
        like: places(r, fed, sink.lines(), run),
        recall: r.recall == Every::Every || sink.stubs() == 0,
        chunks: Some((first.ordinal + 1, last.ordinal + 1)),
    });
    let line = stub.with(r.how).to_string();
    if worth_replacing(r.counter, line.len(), || line.clone(), 1 + usize::from(sink.mid_line()), &r.text[bytes.clone()]) {
        sink.stub(stub);
    } else {
        fed.write(sink, r.text, bytes);
    }
    run.clear();
}

/// The representatives' places, in chunk order; consecutive ones of one
/// record whose lines overlap or touch are one place.
fn places(r: &Record<'_>, fed: &Fed, map: &[u32], run: &[Dropped]) -> Vec<Place> {
    let mut out: Vec<(Option<u32>, Place)> = Vec::with_capacity(run.len());
    for d in run {
        let (record, (first, last)) = match &d.rep {
            Rep::Earlier { record, lines } => (Some(*record), *lines),
            Rep::Here(range) => (None, fed.lines_of(map, range)),
        };
        if let Some((rec, p)) = out.last_mut()
            && *rec == record
            && first <= p.last + 1
            && last + 1 >= p.first
        {
            p.first = p.first.min(first);
            p.last = p.last.max(last);
            continue;
        }
        let of = record.map(|k| r.calls.get(k as usize).cloned().unwrap_or_default());
        out.push((record, Place::new(of, first, last)));
    }
    out.into_iter().map(|(_, p)| p).collect()
}

/// Remove exactly the given stub lines (first occurrence each) from `text`.
pub(crate) fn strip_lines(text: &[u8], lines: &[String]) -> Vec<u8> {
    if lines.is_empty() {
        return text.to_vec();
    }
    let mut pending: Vec<&[u8]> = lines.iter().map(|s| s.as_bytes()).collect();
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        let key = line.strip_suffix(b"\n").unwrap_or(line);
        if let Some(p) = pending.iter().position(|s| *s == key) {
            pending.remove(p);
            continue;
        }
        out.extend_from_slice(line);
    }
    out
}
