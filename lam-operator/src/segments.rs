//! One record's surviving text after L1, as segments of original bytes and
//! stub lines, and the rules that turn runs of dropped chunks into stubs.

use lam_core::TokenCounter;
use lam_core::stub::{ChunkRef, ChunkStub, Recall, Stub, worth_replacing, would_repeat_id};
use lam_hash::Segment;
use std::ops::Range;

/// One dropped chunk, before its run is written as a stub.
#[derive(Debug, Clone)]
pub(crate) struct Dropped {
    pub range: Range<usize>,
    pub ordinal: u32,
    pub rep: ChunkRef,
}

/// A piece of a record's text after L1.
#[derive(Debug, Clone)]
pub(crate) enum Seg {
    /// Original bytes.
    Text(Range<usize>),
    /// An L1 stub.
    Stub(Stub),
    /// Only between deciding a record's chunks and [`collapse`].
    Dropped(Dropped),
}

/// Append a retained chunk, merging with adjacent text.
pub(crate) fn push_text(segs: &mut Vec<Seg>, range: &Range<usize>) {
    match segs.last_mut() {
        Some(Seg::Text(r)) if r.end == range.start => r.end = range.end,
        _ => segs.push(Seg::Text(range.clone())),
    }
}

/// How [`collapse`] writes the recall: on the first stub it writes (the
/// default order, where L0 then moves it to the record's first stub line),
/// or on every stub (`l0-l1`, where L1 may drop the L0 stub that carried it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Every {
    First,
    Every,
}

/// The state of one record's collapse: the run being gathered and whether
/// the next stub written carries the recall.
struct Collapse<'a> {
    id: &'a str,
    text: &'a [u8],
    counter: Option<&'a dyn TokenCounter>,
    how: Recall<'static>,
    recall: Every,
    pending_recall: bool,
    out: Vec<Seg>,
    run: Vec<Dropped>,
    reps: Vec<ChunkRef>,
}

impl Collapse<'_> {
    /// Write the run as one stub line when the stub costs fewer tokens than
    /// its bytes (`worth_replacing`), else as its own bytes (the decisions and
    /// the deletion-set digest are the same either way).
    fn flush(&mut self) {
        if self.run.is_empty() {
            return;
        }
        let recall = self.recall == Every::Every || self.pending_recall;
        let stub = Stub::Chunks(ChunkStub {
            id: self.id.to_string(),
            first: self.run[0].ordinal + 1,
            last: self.run[self.run.len() - 1].ordinal + 1,
            reps: std::mem::take(&mut self.reps),
            recall,
        });
        let line = stub.with(self.how).to_string();
        let bytes = &self.text[self.run[0].range.start..self.run[self.run.len() - 1].range.end];
        // A stub opens a line of its own when the text before it ends mid-line.
        let mid_line = matches!(self.out.last(), Some(Seg::Text(r)) if !r.is_empty() && self.text[r.end - 1] != b'\n');
        if worth_replacing(self.counter, line.len(), || line.clone(), 1 + usize::from(mid_line), bytes) {
            self.out.push(Seg::Stub(stub));
            self.pending_recall = false;
        } else {
            for d in &self.run {
                push_text(&mut self.out, &d.range);
            }
        }
        self.run.clear();
    }

    fn push(&mut self, d: Dropped) {
        let breaks = self.run.last().is_some_and(|l| l.ordinal + 1 != d.ordinal) || would_repeat_id(&self.reps, self.id, &d.rep);
        if breaks {
            self.flush();
        }
        self.reps.push(d.rep.clone());
        self.run.push(d);
    }
}

/// Write each run of consecutive dropped chunks of record `id` as one stub
/// line (a run breaks where its representatives would name an id twice),
/// or as its own bytes when the stub would not cost fewer tokens (a stub
/// never lengthens the text in tokens).
pub(crate) fn collapse(id: &str, text: &[u8], segs: Vec<Seg>, counter: Option<&dyn TokenCounter>, how: Recall<'static>, recall: Every) -> Vec<Seg> {
    let mut c = Collapse { id, text, counter, how, recall, pending_recall: true, out: Vec::with_capacity(segs.len()), run: Vec::new(), reps: Vec::new() };
    for s in segs {
        match s {
            Seg::Dropped(d) => c.push(d),
            Seg::Text(r) => {
                c.flush();
                push_text(&mut c.out, &r);
            }
            other => {
                c.flush();
                c.out.push(other);
            }
        }
    }
    c.flush();
    c.out
}

/// The segments as L0 reads them.
pub(crate) fn to_l0<'a>(text: &'a [u8], segs: &'a [Seg]) -> Vec<Segment<'a>> {
    segs.iter()
        .filter_map(|s| match s {
            Seg::Text(r) => Some(Segment::Text(&text[r.clone()])),
            Seg::Stub(stub) => Some(Segment::Stub(stub)),
            Seg::Dropped(_) => None,
        })
        .collect()
}

/// Render segments without L0 (the `l0-l1` order): a stub line always
/// starts a line of its own, as in L0.
pub(crate) fn render(text: &[u8], segs: &[Seg], out: &mut Vec<u8>, how: Recall<'_>) {
    let start = out.len();
    for s in segs {
        match s {
            Seg::Text(r) => out.extend_from_slice(&text[r.clone()]),
            Seg::Stub(stub) => {
                if out.len() > start && out.last() != Some(&b'\n') {
                    out.push(b'\n');
                }
                out.extend_from_slice(stub.with(how).to_string().as_bytes());
                out.push(b'\n');
            }
            Seg::Dropped(_) => {}
        }
    }
}

/// The original bytes the segments keep.
pub(crate) fn plain(text: &[u8], segs: &[Seg]) -> Vec<u8> {
    let mut v = Vec::new();
    for s in segs {
        if let Seg::Text(r) = s {
            v.extend_from_slice(&text[r.clone()]);
        }
    }
    v
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
