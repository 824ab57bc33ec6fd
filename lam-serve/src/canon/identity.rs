//! An item's identity: its bytes without whitespace and annotations, and
//! the one key hashed from them.

use super::{Kind, Node, is_annotation, is_arguments};
use xxhash_rust::xxh3::{Xxh3, xxh3_128};

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
