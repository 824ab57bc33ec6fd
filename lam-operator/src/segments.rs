//! One record's surviving text after L1, as segments of original bytes and
//! stub lines, and the rules that turn runs of dropped chunks into stubs.

use lam_core::stub::{ChunkRef, ChunkStub};
use lam_hash::Segment;
use std::ops::Range;

/// One dropped chunk, before its run is written as a stub.
#[derive(Debug, Clone)]
pub(crate) struct Dropped {
    pub range: Range<usize>,
    pub ordinal: u32,
    pub rep: ChunkRef,
    pub distance: f32,
}

/// A piece of a record's text after L1.
#[derive(Debug, Clone)]
pub(crate) enum Seg {
    /// Original bytes.
    Text(Range<usize>),
    /// A stub and its rendered line.
    Stub(ChunkStub, String),
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

fn chunk_stub(id: &str, run: &[Dropped]) -> ChunkStub {
    ChunkStub {
        id: id.to_string(),
        first: run[0].ordinal + 1,
        last: run[run.len() - 1].ordinal + 1,
        reps: run.iter().map(|d| d.rep.clone()).collect(),
        distance: run.iter().map(|d| d.distance).fold(0.0f32, f32::max),
    }
}

/// Write each run of consecutive dropped chunks of record `id` as one stub
/// line, or as its own bytes when they are no longer than the stub line (a
/// stub never lengthens the text; the decisions and the deletion-set digest
/// are the same either way).
pub(crate) fn collapse(id: &str, segs: Vec<Seg>) -> Vec<Seg> {
    let mut out: Vec<Seg> = Vec::with_capacity(segs.len());
    let mut run: Vec<Dropped> = Vec::new();
    let flush = |out: &mut Vec<Seg>, run: &mut Vec<Dropped>| {
        if run.is_empty() {
            return;
        }
        let stub = chunk_stub(id, run);
        let line = stub.to_string();
        let bytes: usize = run.iter().map(|d| d.range.len()).sum();
        if bytes <= line.len() + 1 {
            for d in run.iter() {
                push_text(out, &d.range);
            }
        } else {
            out.push(Seg::Stub(stub, line));
        }
        run.clear();
    };
    for s in segs {
        match s {
            Seg::Dropped(d) => {
                if run.last().is_some_and(|l| l.ordinal + 1 != d.ordinal) {
                    flush(&mut out, &mut run);
                }
                run.push(d);
            }
            Seg::Text(r) => {
                flush(&mut out, &mut run);
                push_text(&mut out, &r);
            }
            other => {
                flush(&mut out, &mut run);
                out.push(other);
            }
        }
    }
    flush(&mut out, &mut run);
    out
}

/// The segments as L0 reads them.
pub(crate) fn to_l0<'a>(text: &'a [u8], segs: &'a [Seg]) -> Vec<Segment<'a>> {
    segs.iter()
        .filter_map(|s| match s {
            Seg::Text(r) => Some(Segment::Text(&text[r.clone()])),
            Seg::Stub(_, line) => Some(Segment::Stub(line)),
            Seg::Dropped(_) => None,
        })
        .collect()
}

/// Render segments without L0 (the `l0-l1` order): a stub line always
/// starts a line of its own, as in L0.
pub(crate) fn render(text: &[u8], segs: &[Seg], out: &mut Vec<u8>) {
    let start = out.len();
    for s in segs {
        match s {
            Seg::Text(r) => out.extend_from_slice(&text[r.clone()]),
            Seg::Stub(_, line) => {
                if out.len() > start && out.last() != Some(&b'\n') {
                    out.push(b'\n');
                }
                out.extend_from_slice(line.as_bytes());
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
