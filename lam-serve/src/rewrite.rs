//! Stage five: the bytes forwarded. A new item goes with each residual
//! spliced in, every other byte as received; an item forwarded before goes
//! as the client sends it now when the proxy changed nothing in it, else
//! with the bytes it was first forwarded with, carrying the annotations the
//! client puts on it now; the body goes with every member as received and
//! the conversation list replaced.

use crate::canon::{self, Annotation, Node};
use crate::request::Parsed;
use std::ops::Range;
use std::sync::Arc;

/// One string of an item to replace: its span in the item's bytes and the
/// JSON literal to put there.
pub(crate) type Edit = (Range<usize>, Vec<u8>);

/// A residual as a JSON string literal (bytes that are not UTF-8, which an
/// observation read from a JSON string never holds, replaced).
pub(crate) fn json_string(residual: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(residual).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    serde_json::to_vec(&text).unwrap_or_else(|_| b"\"\"".to_vec())
}

/// An item's bytes with `edits` applied.
pub(crate) fn spliced(raw: &[u8], edits: Vec<Edit>) -> Vec<u8> {
    canon::splice(raw, edits)
}

/// One item of the forwarded body: the client's bytes of this request, or
/// the bytes the session froze for it.
pub(crate) enum Piece<'a> {
    Sent(&'a [u8]),
    Frozen(Arc<[u8]>),
}

impl AsRef<[u8]> for Piece<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            Piece::Sent(b) => b,
            Piece::Frozen(b) => b,
        }
    }
}

/// The body to forward: `req`'s members as received, its conversation `items`.
pub(crate) fn body(req: &Parsed, items: &[Piece<'_>]) -> Vec<u8> {
    req.body_with(items.iter().map(AsRef::as_ref))
}

/// What a session forwarded for one item. An item the proxy changed nothing
/// in is forwarded as the client sends it each time, so nothing is kept for
/// it: what goes upstream is then a function of the request alone, the same
/// from a replica that never saw the earlier requests (Claude Code writes a
/// message's one text block as a list where it marks it and as a string
/// where it does not; both go as sent). An item with residuals keeps the
/// bytes (residuals in place), the annotations they carried and, when they
/// carried any, which bytes to drop for the item without them. Claude Code
/// marks the last message and unmarks it in the next request; that common
/// move is a splice, never a parse. Any other move is read again
/// ([`canon::reannotate`]).
#[derive(Debug, Clone)]
pub(crate) struct Frozen {
    /// None: forwarded as sent.
    edited: Option<Edited>,
}

#[derive(Debug, Clone)]
struct Edited {
    bytes: Arc<[u8]>,
    annotations: Arc<[Annotation]>,
    bare: Box<[Range<usize>]>,
}

impl Frozen {
    /// An item forwarded as the client sends it.
    pub(crate) fn as_sent() -> Self {
        Self { edited: None }
    }

    /// Freeze the bytes forwarded for an item whose observations were
    /// replaced by residuals, which carried `annotations`; `tree`, when
    /// given, is their reading, else they are read here if they carry
    /// annotations.
    pub(crate) fn edited(bytes: Arc<[u8]>, annotations: Vec<Annotation>, tree: Option<&Node>) -> Self {
        let bare = if annotations.is_empty() {
            Vec::new()
        } else {
            let read = match tree {
                Some(t) => Some(canon::reannotate(&bytes, t, &[])),
                None => canon::parse(&bytes).ok().map(|t| canon::reannotate(&bytes, &t, &[])),
            };
            read.and_then(|bare| deletions(&bytes, &bare)).unwrap_or_default()
        };
        Self { edited: Some(Edited { bytes, annotations: annotations.into(), bare: bare.into() }) }
    }

    /// The bytes to forward for the item the client now sends as `raw`,
    /// annotated with `now`.
    pub(crate) fn forward<'a>(&self, raw: &'a [u8], now: &[Annotation]) -> Piece<'a> {
        match &self.edited {
            None => Piece::Sent(raw),
            Some(e) => Piece::Frozen(e.with(now)),
        }
    }

    /// The identity of what it forwards for an item of identity `sent`:
    /// `sent` when it goes as sent, else that of the bytes frozen (the
    /// client's annotations aside, so moving `cache_control` keeps it; a
    /// cut, which freezes other bytes, changes it). Billing compares them.
    pub(crate) fn identity(&self, sent: u128) -> u128 {
        self.edited.as_ref().map_or(sent, |e| xxhash_rust::xxh3::xxh3_128(&e.bytes))
    }

    /// Bytes it holds, its map entry aside.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.edited.as_ref().map_or(0, |e| e.bytes.len() + std::mem::size_of_val(&e.annotations[..]) + std::mem::size_of_val(&e.bare[..]) + 96)
    }
}

impl Edited {
    /// The bytes to forward when the client now annotates the item with `now`.
    fn with(&self, now: &[Annotation]) -> Arc<[u8]> {
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
        let f = Frozen::edited(marked[..].into(), canon::annotations(marked, &tree), None);
        let with = |now: &[Annotation]| f.forward(b"", now).as_ref().to_vec();
        assert_eq!(with(&canon::annotations(marked, &tree)), marked);
        let bare = with(&[]);
        assert_eq!(&bare[..], &canon::reannotate(marked, &tree, &[])[..], "the same bytes a reading would give");
        assert_eq!(&bare[..], br#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"out"}]}"#);
        let spaced = br#"{"role" : "user", "content":[{"type":"text","text":"x"}], "cache_control": {"type":"ephemeral"} }"#;
        let tree = canon::parse(spaced).unwrap();
        let f = Frozen::edited(spaced[..].into(), canon::annotations(spaced, &tree), Some(&tree));
        assert_eq!(f.forward(b"", &[]).as_ref(), &canon::reannotate(spaced, &tree, &[])[..]);
        assert_eq!(Frozen::as_sent().forward(b"sent", &[]).as_ref(), b"sent");
        assert_eq!(deletions(b"abcdxe", b"ade"), Some(vec![1..3, 4..5]));
        assert_eq!(deletions(b"abc", b"abd"), None);
    }
}
