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

use std::collections::HashSet;
use std::ops::Range;
use xxhash_rust::xxh3::{Xxh3, xxh3_128};

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

/// A step from a value to one of its children.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// Where one annotation sits (the path of the object that carries it), and
/// its name and value as sent.
pub(crate) type Annotation = (Vec<Seg>, String, Vec<u8>);

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

/// The one identity key of a value (an item, a preamble member): XXH3-128
/// of its identity bytes ([`identity`]) when it reads faithfully (`tree`,
/// its [`parse`]), else of its exact bytes tagged apart, so an unfaithful
/// value never shares a key with a faithful one. The proxy's session keys
/// and `lam replay`'s prefix accounting both use this.
pub(crate) fn identity_key(raw: &[u8], tree: Option<&Node>) -> u128 {
    match tree {
        Some(n) => {
            let mut out = Vec::with_capacity(raw.len());
            identity(raw, n, &mut out);
            xxh3_128(&out)
        }
        None => {
            let mut h = Xxh3::new();
            h.update(b"unfaithful\0");
            h.update(raw);
            h.digest128()
        }
    }
}

/// The identity bytes of `node`: minified, annotations left out, a
/// one-text-block `content` written as its string, every other literal as
/// written. Below a tool call's arguments (a member `input`, as in
/// Anthropic `tool_use` and Responses `custom_tool_call`) nothing is read
/// as an annotation or a shorthand: there a `cache_control` or a `content`
/// is the tool's own argument, and every byte of it counts.
pub(crate) fn identity(b: &[u8], node: &Node, out: &mut Vec<u8>) {
    write_identity(b, node, false, out)
}

/// True for the member whose value is a tool call's arguments.
fn is_arguments(key: &str) -> bool {
    key == "input"
}

fn write_identity(b: &[u8], node: &Node, args: bool, out: &mut Vec<u8>) {
    match &node.kind {
        Kind::Object(ms) => {
            out.push(b'{');
            let mut first = true;
            for m in ms.iter().filter(|m| args || !is_annotation(&m.key)) {
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                out.extend_from_slice(&b[m.key_span.clone()]);
                out.push(b':');
                let below = args || is_arguments(&m.key);
                match (m.key.as_str(), lone_text(b, &m.value)) {
                    ("content", Some(text)) if !args => out.extend_from_slice(&b[text.span.clone()]),
                    _ => write_identity(b, &m.value, below, out),
                }
            }
            out.push(b'}');
        }
        Kind::Array(items) => {
            out.push(b'[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_identity(b, it, args, out);
            }
            out.push(b']');
        }
        Kind::Str | Kind::Lit => out.extend_from_slice(&b[node.span.clone()]),
    }
}

/// The `text` string of an array holding one block `{"type":"text","text":T}`
/// (in either order, annotations aside), the shorthand's long form.
fn lone_text<'n>(b: &[u8], node: &'n Node) -> Option<&'n Node> {
    let Kind::Array(items) = &node.kind else { return None };
    let [block] = &items[..] else { return None };
    let Kind::Object(ms) = &block.kind else { return None };
    let mut content = ms.iter().filter(|m| !is_annotation(&m.key));
    let (x, y) = (content.next()?, content.next()?);
    if content.next().is_some() {
        return None;
    }
    let (ty, text) = if x.key == "type" { (x, y) } else { (y, x) };
    let is_str = |n: &Node| matches!(n.kind, Kind::Str);
    let typed_text = ty.key == "type" && &b[ty.value.span.clone()] == b"\"text\"";
    (typed_text && text.key == "text" && is_str(&text.value)).then_some(&text.value)
}

/// Every annotation in `node`, in document order.
pub(crate) fn annotations(b: &[u8], node: &Node) -> Vec<Annotation> {
    let mut out = Vec::new();
    collect(b, node, &mut Vec::new(), &mut out);
    out
}

fn collect(b: &[u8], node: &Node, path: &mut Vec<Seg>, out: &mut Vec<Annotation>) {
    match &node.kind {
        Kind::Object(ms) => {
            for m in ms {
                if is_annotation(&m.key) {
                    out.push((path.clone(), m.key.clone(), b[m.value.span.clone()].to_vec()));
                } else if !is_arguments(&m.key) {
                    path.push(Seg::Key(m.key.clone()));
                    collect(b, &m.value, path, out);
                    path.pop();
                }
            }
        }
        Kind::Array(items) => {
            for (i, it) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                collect(b, it, path, out);
                path.pop();
            }
        }
        Kind::Str | Kind::Lit => {}
    }
}

/// The node a JSON pointer (`/content/0/text`) names.
pub(crate) fn find<'n>(node: &'n Node, pointer: &str) -> Option<&'n Node> {
    let mut n = node;
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        n = match &n.kind {
            Kind::Object(ms) => &ms.iter().find(|m| m.key == seg)?.value,
            Kind::Array(items) => items.get(seg.parse::<usize>().ok()?)?,
            Kind::Str | Kind::Lit => return None,
        };
    }
    Some(n)
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

/// `b` (the bytes of `node`) carrying the annotations `want` instead of its
/// own: objects whose annotations differ are re-written (members as they
/// were, the wanted annotations last); everything else is copied as it is.
pub(crate) fn reannotate(b: &[u8], node: &Node, want: &[Annotation]) -> Vec<u8> {
    let mut path = Vec::new();
    match emit(b, node, &mut path, want) {
        Some(out) => out,
        None => b[node.span.clone()].to_vec(),
    }
}

/// The new bytes of `node`, or `None` when nothing in it changes.
fn emit(b: &[u8], node: &Node, path: &mut Vec<Seg>, want: &[Annotation]) -> Option<Vec<u8>> {
    match &node.kind {
        Kind::Object(ms) => emit_object(b, node, ms, path, want),
        Kind::Array(items) => {
            let mut edits = Vec::new();
            for (i, it) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                if let Some(new) = emit(b, it, path, want) {
                    edits.push((it.span.start - node.span.start..it.span.end - node.span.start, new));
                }
                path.pop();
            }
            (!edits.is_empty()).then(|| splice(&b[node.span.clone()], edits))
        }
        Kind::Str | Kind::Lit => None,
    }
}

fn emit_object(b: &[u8], node: &Node, ms: &[Member], path: &mut Vec<Seg>, want: &[Annotation]) -> Option<Vec<u8>> {
    let mine: Vec<(&str, &[u8])> = want.iter().filter(|(p, _, _)| p == path).map(|(_, k, v)| (k.as_str(), &v[..])).collect();
    let have: Vec<(&str, &[u8])> = ms.iter().filter(|m| is_annotation(&m.key)).map(|m| (m.key.as_str(), &b[m.value.span.clone()])).collect();
    let mut children = Vec::new();
    for m in ms.iter().filter(|m| !is_annotation(&m.key)) {
        path.push(Seg::Key(m.key.clone()));
        let new = match m.value.kind {
            _ if is_arguments(&m.key) => None,
            Kind::Str if m.key == "content" => long_form(b, &m.value, path, want),
            _ => emit(b, &m.value, path, want),
        };
        children.push((m, new));
        path.pop();
    }
    if mine == have {
        let base = node.span.start;
        let edits: Vec<_> = children.into_iter().filter_map(|(m, new)| new.map(|n| (m.value.span.start - base..m.value.span.end - base, n))).collect();
        return (!edits.is_empty()).then(|| splice(&b[node.span.clone()], edits));
    }
    let mut out = vec![b'{'];
    for (m, new) in &children {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(&b[m.key_span.clone()]);
        out.push(b':');
        out.extend_from_slice(new.as_deref().unwrap_or(&b[m.value.span.clone()]));
    }
    for (k, v) in mine {
        if out.len() > 1 {
            out.push(b',');
        }
        write_member(&mut out, k, v);
    }
    out.push(b'}');
    Some(out)
}

/// `"KEY":VALUE`, the value's bytes as they are.
fn write_member(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    serde_json::to_writer(&mut *out, key).expect("a string writes to a Vec");
    out.push(b':');
    out.extend_from_slice(value);
}

/// A string `content` (at `path`) for which the client now sends the long
/// form with annotations on its block (`content/0`): the one-block array
/// `[{"type":"text","text":...}]` carrying them, the string's literal as it
/// was. `None` when no annotation is wanted there.
fn long_form(b: &[u8], node: &Node, path: &mut Vec<Seg>, want: &[Annotation]) -> Option<Vec<u8>> {
    path.push(Seg::Index(0));
    let marks: Vec<_> = want.iter().filter(|(p, _, _)| p == path).collect();
    path.pop();
    if marks.is_empty() {
        return None;
    }
    let mut out = br#"[{"type":"text","text":"#.to_vec();
    out.extend_from_slice(&b[node.span.clone()]);
    for (_, k, v) in marks {
        out.push(b',');
        write_member(&mut out, k, v);
    }
    out.extend_from_slice(b"}]");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(s: &str) -> Result<Vec<u8>, Unfaithful> {
        let n = parse(s.as_bytes())?;
        let mut out = Vec::new();
        identity(s.as_bytes(), &n, &mut out);
        Ok(out)
    }

    #[test]
    fn identity_ignores_whitespace_and_annotations_only() {
        let a = ident(r#"{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}"#).unwrap();
        let b = ident(r#"{ "role" : "user", "content": [ {"type":"text", "text":"x"} ] }"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, br#"{"role":"user","content":"x"}"#, "one text block reads as its string");
        let c = ident(r#"{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y","cache_control":{"type":"ephemeral"}}]}"#).unwrap();
        assert_eq!(c, br#"{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}"#);
        for (x, y) in [
            (r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#),
            (r#"{"n":18446744073709551616}"#, r#"{"n":18446744073709551617}"#),
            (r#"{"f":0.10000000000000000001}"#, r#"{"f":0.10000000000000000002}"#),
            (r#"{"s":"A"}"#, r#"{"s":"\u0041"}"#),
            (r#"{"n":1}"#, r#"{"n":1.0}"#),
        ] {
            assert_ne!(ident(x).unwrap(), ident(y).unwrap(), "{x} vs {y}");
        }
    }

    #[test]
    fn one_text_block_is_the_string_it_stands_for() {
        // Claude Code 2.1.328: a `role: "system"` message as the block while it carries the mark, as the string after.
        let block = ident(r##"{"role":"system","content":[{"type":"text","text":"# Env\nx","cache_control":{"type":"ephemeral"}}]}"##).unwrap();
        let string = ident(r##"{"role":"system","content":"# Env\nx"}"##).unwrap();
        assert_eq!(block, string);
        assert_eq!(ident(r#"{"content":[{"text":"t","type":"text"}]}"#).unwrap(), ident(r#"{"content":"t"}"#).unwrap());
        // tool_result content at depth too.
        let a = ident(r#"{"content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"out"}]}]}"#).unwrap();
        let b = ident(r#"{"content":[{"type":"tool_result","tool_use_id":"x","content":"out"}]}"#).unwrap();
        assert_eq!(a, b);
        // Anything more than one plain text block stays itself.
        for other in [
            r#"{"content":[{"type":"text","text":"t"},{"type":"text","text":"u"}]}"#,
            r#"{"content":[{"type":"text","text":"t","citations":[]}]}"#,
            r#"{"content":[{"type":"input_text","text":"t"}]}"#,
            r#"{"content":[{"type":"text","text":1}]}"#,
            r#"{"content":["t"]}"#,
            r#"{"text":[{"type":"text","text":"t"}]}"#,
        ] {
            assert_ne!(ident(other).unwrap(), ident(r#"{"content":"t"}"#).unwrap(), "{other}");
        }
    }

    #[test]
    fn tool_arguments_are_read_byte_for_byte() {
        // A tool whose own arguments are named `content` or `cache_control`.
        let call = |input: &str| format!(r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t1","name":"write","input":{input}}}]}}"#);
        let block = call(r#"{"path":"a","content":[{"type":"text","text":"x"}]}"#);
        let string = call(r#"{"path":"a","content":"x"}"#);
        assert_ne!(ident(&block).unwrap(), ident(&string).unwrap(), "an argument's block is not its string");
        let marked = call(r#"{"path":"a","cache_control":"no-store"}"#);
        let plain = call(r#"{"path":"a"}"#);
        assert_ne!(ident(&marked).unwrap(), ident(&plain).unwrap(), "an argument named cache_control counts");
        let n = parse(marked.as_bytes()).unwrap();
        assert!(annotations(marked.as_bytes(), &n).is_empty(), "nothing inside the arguments is an annotation");
        assert_eq!(reannotate(marked.as_bytes(), &n, &[]), marked.as_bytes(), "arguments are never re-written");
        // The block that carries the call keeps its own mark apart.
        let a = ident(r#"{"content":[{"type":"tool_use","id":"t","name":"n","input":{},"cache_control":{"type":"ephemeral"}}]}"#).unwrap();
        let b = ident(r#"{"content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}"#).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_string_takes_the_mark_the_client_puts_on_its_long_form() {
        let frozen = br#"{"role":"system","content":"s"}"#;
        let later = br#"{"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]}"#;
        let want = annotations(later, &parse(later).unwrap());
        let out = reannotate(frozen, &parse(frozen).unwrap(), &want);
        assert_eq!(String::from_utf8(out.clone()).unwrap(), String::from_utf8(later.to_vec()).unwrap());
        let (mut x, mut y) = (Vec::new(), Vec::new());
        identity(&out, &parse(&out).unwrap(), &mut x);
        identity(frozen, &parse(frozen).unwrap(), &mut y);
        assert_eq!(x, y, "the content is the same");
        // The long form frozen, the string sent now without a mark: the block, unmarked.
        let back = reannotate(later, &parse(later).unwrap(), &[]);
        assert_eq!(back, br#"{"role":"system","content":[{"type":"text","text":"s"}]}"#.to_vec());
    }

    #[test]
    fn duplicates_and_depth_are_unfaithful() {
        assert_eq!(ident(r#"{"a":1,"a":2}"#), Err(Unfaithful));
        assert_eq!(ident(r#"{"a":1,"\u0061":2}"#), Err(Unfaithful));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
        assert_eq!(ident(&deep), Err(Unfaithful));
        assert_eq!(ident("[1,]"), Err(Unfaithful));
        assert_eq!(ident(r#"{"a":1} x"#), Err(Unfaithful));
    }

    #[test]
    fn annotations_move_and_the_rest_stays_byte_for_byte() {
        let frozen = br#"{"role":"user", "content":[{"type":"tool_result","content":"ok","cache_control":{"type":"ephemeral"}}, {"type":"text","text":"t"}]}"#;
        let later =
            br#"{"role":"user","content":[{"type":"tool_result","content":"LONG ORIGINAL"},{"type":"text","text":"t","cache_control":{"type":"ephemeral"}}]}"#;
        let n = parse(frozen).unwrap();
        let want = annotations(later, &parse(later).unwrap());
        assert_eq!(want, vec![(vec![Seg::Key("content".into()), Seg::Index(1)], "cache_control".into(), br#"{"type":"ephemeral"}"#.to_vec())]);
        let out = reannotate(frozen, &n, &want);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            r#"{"role":"user", "content":[{"type":"tool_result","content":"ok"}, {"type":"text","text":"t","cache_control":{"type":"ephemeral"}}]}"#
        );
        // Same annotations: the frozen bytes exactly.
        let own = annotations(frozen, &n);
        assert_eq!(reannotate(frozen, &n, &own), frozen.to_vec());
        // No annotations wanted: every mark removed.
        let none = reannotate(frozen, &n, &[]);
        assert!(!String::from_utf8(none).unwrap().contains("cache_control"));
    }

    #[test]
    fn pointers_and_splices() {
        let b = br#"{"content":[{"text":"a"},{"a/b":"c"}]}"#;
        let n = parse(b).unwrap();
        let s = find(&n, "/content/1/a~1b").unwrap();
        assert_eq!(&b[s.span.clone()], br#""c""#);
        assert!(find(&n, "/content/9").is_none());
        let out = splice(b, vec![(s.span.clone(), br#""z""#.to_vec())]);
        assert_eq!(out, br#"{"content":[{"text":"a"},{"a/b":"z"}]}"#.to_vec());
    }
}
