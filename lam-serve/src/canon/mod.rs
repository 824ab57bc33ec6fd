//! Item identity and annotations, read from the bytes the client sent.
//!
//! An item's identity is its bytes with insignificant whitespace and
//! *annotations* removed: members that clients move between requests and that
//! are not content (Anthropic `cache_control`, [`ANNOTATIONS`]). Everything
//! else counts as sent: key order, string escapes and number literals are
//! compared as written, so two items that differ in any content byte never
//! share an identity. An item with a duplicate key (after unescaping) or
//! nesting deeper than [`MAX_DEPTH`] cannot be read faithfully (an upstream
//! might read either copy); it is [`Unfaithful`] and forwarded exactly as sent.
//!
//! Why a scanner of our own: identity needs the raw text of keys and number
//! literals, which `serde_json::Value` normalises away (without the
//! `arbitrary_precision` feature, which would change every crate's `Value`).
//! The body has already been validated by `serde_json` when this runs.

use lam_core::wire::{Path, Seg};
use std::collections::HashSet;
use std::ops::Range;

/// Members that are annotations, not content (ignored by identity, re-placed
/// as the client puts them now when an earlier item is forwarded again).
pub(crate) const ANNOTATIONS: [&str; 1] = ["cache_control"];

/// Deepest nesting read faithfully (serde_json's own limit).
pub(crate) const MAX_DEPTH: usize = 128;

/// The item cannot be read faithfully: forward it as sent, never admit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unfaithful;

/// One JSON value: where it sits in the bytes and what it holds.
#[derive(Debug)]
pub(crate) struct Node {
    pub span: Range<usize>,
    pub kind: Kind,
}

#[derive(Debug)]
pub(crate) enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    /// A string literal (span includes the quotes).
    Str,
    /// A number, `true`, `false` or `null`.
    Lit,
}

#[derive(Debug)]
pub(crate) struct Member {
    /// The key, unescaped.
    pub key: String,
    /// The key's literal, quotes included.
    pub key_span: Range<usize>,
    pub value: Node,
}

/// Where one annotation sits (the path of the object that carries it), and
/// its name and value as sent.
pub(crate) type Annotation = (Path, String, Vec<u8>);

fn is_annotation(key: &str) -> bool {
    ANNOTATIONS.contains(&key)
}

/// Parse one JSON value that fills `b` (surrounding whitespace allowed).
pub(crate) fn parse(b: &[u8]) -> Result<Node, Unfaithful> {
    let mut p = Parser { b, at: 0 };
    let n = p.value(0)?;
    p.ws();
    if p.at == b.len() { Ok(n) } else { Err(Unfaithful) }
}

struct Parser<'a> {
    b: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Result<(), Unfaithful> {
        self.ws();
        if self.b.get(self.at) == Some(&c) {
            self.at += 1;
            Ok(())
        } else {
            Err(Unfaithful)
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, Unfaithful> {
        if depth > MAX_DEPTH {
            return Err(Unfaithful);
        }
        self.ws();
        let start = self.at;
        let kind = match self.b.get(self.at).ok_or(Unfaithful)? {
            b'{' => Kind::Object(self.object(depth)?),
            b'[' => Kind::Array(self.array(depth)?),
            b'"' => {
                self.string()?;
                Kind::Str
            }
            _ => {
                self.literal()?;
                Kind::Lit
            }
        };
        Ok(Node { span: start..self.at, kind })
    }

    fn string(&mut self) -> Result<Range<usize>, Unfaithful> {
        let start = self.at;
        self.at += 1;
        loop {
            let i = memchr::memchr2(b'"', b'\\', &self.b[self.at..]).ok_or(Unfaithful)?;
            self.at += i;
            if self.b[self.at] == b'"' {
                self.at += 1;
                return Ok(start..self.at);
            }
            self.at += 2; // the backslash and the byte it escapes
        }
    }

    fn literal(&mut self) -> Result<(), Unfaithful> {
        let start = self.at;
        while self.b.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || b"+-.".contains(c)) {
            self.at += 1;
        }
        if self.at == start { Err(Unfaithful) } else { Ok(()) }
    }

    fn object(&mut self, depth: usize) -> Result<Vec<Member>, Unfaithful> {
        self.at += 1;
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        self.ws();
        if self.b.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(out);
        }
        loop {
            self.ws();
            if self.b.get(self.at) != Some(&b'"') {
                return Err(Unfaithful);
            }
            let key_span = self.string()?;
            let key = unescape(&self.b[key_span.clone()])?;
            if !seen.insert(key.clone()) {
                return Err(Unfaithful);
            }
            self.eat(b':')?;
            let value = self.value(depth + 1)?;
            out.push(Member { key, key_span, value });
            self.ws();
            match self.b.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(out);
                }
                _ => return Err(Unfaithful),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Vec<Node>, Unfaithful> {
        self.at += 1;
        let mut out = Vec::new();
        self.ws();
        if self.b.get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(out);
        }
        loop {
            out.push(self.value(depth + 1)?);
            self.ws();
            match self.b.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(out);
                }
                _ => return Err(Unfaithful),
            }
        }
    }
}

/// A string literal's text (quotes included in `lit`).
fn unescape(lit: &[u8]) -> Result<String, Unfaithful> {
    if !lit.contains(&b'\\') {
        let inner = &lit[1..lit.len() - 1];
        return std::str::from_utf8(inner).map(str::to_string).map_err(|_| Unfaithful);
    }
    serde_json::from_slice(lit).map_err(|_| Unfaithful)
}

/// Bytes a tree holds on the heap (its nodes, members and keys).
pub(crate) fn weight(node: &Node) -> usize {
    match &node.kind {
        Kind::Object(ms) => ms.iter().map(|m| std::mem::size_of::<Member>() + m.key.len() + weight(&m.value)).sum(),
        Kind::Array(items) => items.iter().map(|n| std::mem::size_of::<Node>() + weight(n)).sum(),
        Kind::Str | Kind::Lit => 0,
    }
}

/// The value `node` (read from `b`) holds, as a `serde_json::Value`: built
/// from the tree, never by reading the bytes again (only string and number
/// literals are decoded).
pub(crate) fn value(b: &[u8], node: &Node) -> serde_json::Value {
    use serde_json::Value;
    match &node.kind {
        Kind::Object(ms) => Value::Object(ms.iter().map(|m| (m.key.clone(), value(b, &m.value))).collect()),
        Kind::Array(items) => Value::Array(items.iter().map(|n| value(b, n)).collect()),
        Kind::Str => unescape(&b[node.span.clone()]).map_or(Value::Null, Value::String),
        Kind::Lit => serde_json::from_slice(&b[node.span.clone()]).unwrap_or(Value::Null),
    }
}

/// The node `path` names (as [`Path::get`] names a value in a `serde_json::Value`).
pub(crate) fn find<'n>(node: &'n Node, path: &Path) -> Option<&'n Node> {
    path.segs().iter().try_fold(node, |n, s| match (s, &n.kind) {
        (Seg::Key(k), Kind::Object(ms)) => ms.iter().find(|m| m.key == *k).map(|m| &m.value),
        (Seg::Index(i), Kind::Array(items)) => items.get(*i),
        _ => None,
    })
}

/// `b` with each span replaced (spans disjoint; any order).
pub(crate) fn splice(b: &[u8], mut edits: Vec<(Range<usize>, Vec<u8>)>) -> Vec<u8> {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(b.len());
    let mut at = 0;
    for (r, with) in edits {
        out.extend_from_slice(&b[at..r.start]);
        out.extend_from_slice(&with);
        at = r.end;
    }
    out.extend_from_slice(&b[at..]);
    out
}

/// True for the member whose value is a tool call's arguments: below it
/// nothing is an annotation or a shorthand.
fn is_arguments(key: &str) -> bool {
    key == "input"
}

mod annotate;
mod identity;
#[cfg(test)]
mod tests;

pub(crate) use annotate::{annotations, reannotate};
pub(crate) use identity::{identity, identity_key};
