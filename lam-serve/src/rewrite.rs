//! Stage five: the bytes forwarded. A new item goes with each residual
//! spliced in, every other byte as received; an item forwarded before goes
//! with the bytes it was first forwarded with, carrying the annotations the
//! client puts on it now; the body goes with every member as received and
//! the conversation list replaced.

use crate::admission::Edit;
use crate::canon::{self, Annotation, Node};
use crate::request::Parsed;
use std::ops::Range;
use std::sync::Arc;

/// An item's bytes with `edits` applied.
pub(crate) fn spliced(raw: &[u8], edits: Vec<Edit>) -> Vec<u8> {
    canon::splice(raw, edits)
}

/// The body to forward: `req`'s members as received, its conversation `items`.
pub(crate) fn body(req: &Parsed, items: &[Arc<[u8]>]) -> Vec<u8> {
    req.body_with(items.iter().map(|b| &b[..]))
}

/// What a session forwarded for one item: the bytes (residuals in place),
/// the annotations they carried and, when they carried any, which bytes to
/// drop for the item without them. Claude Code marks the last message and
/// unmarks it in the next request; that common move is a splice, never a
/// parse. Any other move is read again ([`canon::reannotate`]).
#[derive(Debug, Clone)]
pub(crate) struct Frozen {
    bytes: Arc<[u8]>,
    annotations: Arc<[Annotation]>,
    bare: Box<[Range<usize>]>,
}

impl Frozen {
    /// Freeze the bytes forwarded for an item that carried `annotations`;
    /// `tree`, when given, is their reading (the item's own, when it goes
    /// unchanged), else they are read here if they carry annotations.
    pub(crate) fn new(bytes: Arc<[u8]>, annotations: Vec<Annotation>, tree: Option<&Node>) -> Self {
        let bare = if annotations.is_empty() {
            Vec::new()
        } else {
            let read = match tree {
                Some(t) => Some(canon::reannotate(&bytes, t, &[])),
                None => canon::parse(&bytes).ok().map(|t| canon::reannotate(&bytes, &t, &[])),
            };
            read.and_then(|bare| deletions(&bytes, &bare)).unwrap_or_default()
        };
        Self { bytes, annotations: annotations.into(), bare: bare.into() }
    }

    /// The bytes as forwarded first.
    pub(crate) fn bytes(&self) -> Arc<[u8]> {
        self.bytes.clone()
    }

    /// The bytes to forward when the client now annotates the item with `now`.
    pub(crate) fn with(&self, now: &[Annotation]) -> Arc<[u8]> {
        if *now == *self.annotations {
            return self.bytes.clone();
        }
        if now.is_empty() && !self.bare.is_empty() {
            return canon::splice(&self.bytes, self.bare.iter().map(|r| (r.clone(), Vec::new())).collect()).into();
        }
        match canon::parse(&self.bytes) {
            Ok(tree) => canon::reannotate(&self.bytes, &tree, now).into(),
            Err(_) => self.bytes.clone(),
        }
    }

    /// Bytes it holds, its map entry aside.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bytes.len() + std::mem::size_of_val(&self.annotations[..]) + std::mem::size_of_val(&self.bare[..]) + 96
    }
}

/// The ranges of `full` to delete to leave `sub`, when `sub` is a
/// subsequence of it (the kept bytes are `sub`, in order).
fn deletions(full: &[u8], sub: &[u8]) -> Option<Vec<Range<usize>>> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < full.len() {
        if j < sub.len() && full[i] == sub[j] {
            (i, j) = (i + 1, j + 1);
            continue;
        }
        let start = i;
        while i < full.len() && (j == sub.len() || full[i] != sub[j]) {
            i += 1;
        }
        out.push(start..i);
    }
    (j == sub.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unmarked_item_is_the_marked_one_without_its_marks_and_never_read_again() {
        let marked = br#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"out","cache_control":{"type":"ephemeral"}}]}"#;
        let tree = canon::parse(marked).unwrap();
        let f = Frozen::new(marked[..].into(), canon::annotations(marked, &tree), None);
        assert_eq!(&f.with(&canon::annotations(marked, &tree))[..], marked);
        let bare = f.with(&[]);
        assert_eq!(&bare[..], &canon::reannotate(marked, &tree, &[])[..], "the same bytes a reading would give");
        assert_eq!(&bare[..], br#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"out"}]}"#);
        let spaced = br#"{"role" : "user", "content":[{"type":"text","text":"x"}], "cache_control": {"type":"ephemeral"} }"#;
        let tree = canon::parse(spaced).unwrap();
        let f = Frozen::new(spaced[..].into(), canon::annotations(spaced, &tree), Some(&tree));
        assert_eq!(&f.with(&[])[..], &canon::reannotate(spaced, &tree, &[])[..]);
        assert_eq!(deletions(b"abcdxe", b"ade"), Some(vec![1..3, 4..5]));
        assert_eq!(deletions(b"abc", b"abd"), None);
    }
}
