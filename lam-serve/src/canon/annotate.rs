//! Annotations: where an item carries them, and the item's bytes carrying
//! others (as a client moves its `cache_control` marks).

use super::{Annotation, Kind, Member, Node, is_annotation, is_arguments, splice};
use lam_core::wire::{Path, Seg};

/// Every annotation in `node`, in document order.
pub(crate) fn annotations(b: &[u8], node: &Node) -> Vec<Annotation> {
    let mut out = Vec::new();
    collect(b, node, &mut Path::new(), &mut out);
    out
}

fn collect(b: &[u8], node: &Node, path: &mut Path, out: &mut Vec<Annotation>) {
    match &node.kind {
        Kind::Object(ms) => {
            for m in ms {
                if is_annotation(&m.key) {
                    out.push((path.clone(), m.key.clone(), b[m.value.span.clone()].to_vec()));
                } else if !is_arguments(&m.key) {
                    path.push(Seg::Key(m.key.clone().into()));
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

/// `b` (the bytes of `node`) carrying the annotations `want` instead of its
/// own: objects whose annotations differ are re-written (members as they
/// were, the wanted annotations last), in the client's own style: the
/// members' bytes and the white space around them kept, the separators
/// between members and after keys as the client writes them (`,` or `, `,
/// `:` or `: `; [`Style`]), so that a mark taken off gives the bytes the
/// client sends without it, whichever serializer it uses; everything else
/// is copied as it is.
pub(crate) fn reannotate(b: &[u8], node: &Node, want: &[Annotation]) -> Vec<u8> {
    let mut path = Path::new();
    let style = Style::of(b, node);
    match emit(b, node, &mut path, want, &style) {
        Some(out) => out,
        None => b[node.span.clone()].to_vec(),
    }
}

/// How a client separates what it writes: the bytes between a value and the
/// next member's key (`,`, `, `, a new line and indent) and between a key
/// and its value (`:`, `: `), as the first object with two members (for the
/// comma) and the first member (for the colon) show; compact where nothing
/// shows it.
#[derive(Debug, Clone, PartialEq)]
struct Style {
    comma: Vec<u8>,
    colon: Vec<u8>,
}

impl Style {
    fn of(b: &[u8], node: &Node) -> Self {
        let mut s = Self { comma: b",".to_vec(), colon: b":".to_vec() };
        let (mut comma, mut colon) = (None, None);
        seen(b, node, &mut comma, &mut colon);
        if let Some(c) = comma {
            s.comma = c;
        }
        if let Some(c) = colon {
            s.colon = c;
        }
        s
    }

    /// This object's own separators where it shows them, else `self`'s.
    fn within(&self, b: &[u8], ms: &[Member]) -> Self {
        let comma = ms.windows(2).next().map_or_else(|| self.comma.clone(), |w| b[w[0].value.span.end..w[1].key_span.start].to_vec());
        let colon = ms.first().map_or_else(|| self.colon.clone(), |m| b[m.key_span.end..m.value.span.start].to_vec());
        Self { comma, colon }
    }
}

/// The first comma and colon separators in `node`, depth first.
fn seen(b: &[u8], node: &Node, comma: &mut Option<Vec<u8>>, colon: &mut Option<Vec<u8>>) {
    if comma.is_some() && colon.is_some() {
        return;
    }
    match &node.kind {
        Kind::Object(ms) => {
            if let (None, Some(m)) = (colon.as_ref(), ms.first()) {
                *colon = Some(b[m.key_span.end..m.value.span.start].to_vec());
            }
            if let (None, Some(w)) = (comma.as_ref(), ms.windows(2).next()) {
                *comma = Some(b[w[0].value.span.end..w[1].key_span.start].to_vec());
            }
            ms.iter().for_each(|m| seen(b, &m.value, comma, colon));
        }
        Kind::Array(items) => items.iter().for_each(|it| seen(b, it, comma, colon)),
        Kind::Str | Kind::Lit => {}
    }
}

/// The new bytes of `node`, or `None` when nothing in it changes.
fn emit(b: &[u8], node: &Node, path: &mut Path, want: &[Annotation], style: &Style) -> Option<Vec<u8>> {
    match &node.kind {
        Kind::Object(ms) => emit_object(b, node, ms, path, want, style),
        Kind::Array(items) => {
            let mut edits = Vec::new();
            for (i, it) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                if let Some(new) = emit(b, it, path, want, style) {
                    edits.push((it.span.start - node.span.start..it.span.end - node.span.start, new));
                }
                path.pop();
            }
            (!edits.is_empty()).then(|| splice(&b[node.span.clone()], edits))
        }
        Kind::Str | Kind::Lit => None,
    }
}

fn emit_object(b: &[u8], node: &Node, ms: &[Member], path: &mut Path, want: &[Annotation], style: &Style) -> Option<Vec<u8>> {
    let mine: Vec<(&str, &[u8])> = want.iter().filter(|(p, _, _)| *p == *path).map(|(_, k, v)| (k.as_str(), &v[..])).collect();
    let have: Vec<(&str, &[u8])> = ms.iter().filter(|m| is_annotation(&m.key)).map(|m| (m.key.as_str(), &b[m.value.span.clone()])).collect();
    let here = style.within(b, ms);
    let mut children = Vec::new();
    for m in ms.iter().filter(|m| !is_annotation(&m.key)) {
        path.push(Seg::Key(m.key.clone().into()));
        let new = match m.value.kind {
            _ if is_arguments(&m.key) => None,
            Kind::Str if m.key == "content" => long_form(b, &m.value, path, want, &here),
            _ => emit(b, &m.value, path, want, style),
        };
        children.push((m, new));
        path.pop();
    }
    if mine == have {
        let base = node.span.start;
        let edits: Vec<_> = children.into_iter().filter_map(|(m, new)| new.map(|n| (m.value.span.start - base..m.value.span.end - base, n))).collect();
        return (!edits.is_empty()).then(|| splice(&b[node.span.clone()], edits));
    }
    // The white space inside the braces, as the client wrote it.
    let open = ms.first().map_or(node.span.start + 1, |m| m.key_span.start);
    let close = ms.last().map_or(node.span.start + 1, |m| m.value.span.end);
    let mut out = b[node.span.start..open].to_vec();
    for (i, (m, new)) in children.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(&here.comma);
        }
        out.extend_from_slice(&b[m.key_span.start..m.value.span.start]);
        out.extend_from_slice(new.as_deref().unwrap_or(&b[m.value.span.clone()]));
    }
    for (n, (k, v)) in mine.into_iter().enumerate() {
        if n + children.len() > 0 {
            out.extend_from_slice(&here.comma);
        }
        write_member(&mut out, k, v, &here);
    }
    out.extend_from_slice(&b[close..node.span.end]);
    Some(out)
}

/// `"KEY"` + the colon as the client writes it + `VALUE`, the value's bytes as they are.
fn write_member(out: &mut Vec<u8>, key: &str, value: &[u8], style: &Style) {
    serde_json::to_writer(&mut *out, key).expect("a string writes to a Vec");
    out.extend_from_slice(&style.colon);
    out.extend_from_slice(value);
}

/// A string `content` (at `path`) for which the client now sends the long
/// form with annotations on its block (`content/0`): the one-block array
/// `[{"type":"text","text":...}]` carrying them (in the client's `style`),
/// the string's literal as it was. `None` when no annotation is wanted there.
fn long_form(b: &[u8], node: &Node, path: &mut Path, want: &[Annotation], style: &Style) -> Option<Vec<u8>> {
    path.push(Seg::Index(0));
    let marks: Vec<_> = want.iter().filter(|(p, _, _)| *p == *path).collect();
    path.pop();
    if marks.is_empty() {
        return None;
    }
    let mut out = b"[{".to_vec();
    write_member(&mut out, "type", b"\"text\"", style);
    out.extend_from_slice(&style.comma);
    write_member(&mut out, "text", &b[node.span.clone()], style);
    for (_, k, v) in marks {
        out.extend_from_slice(&style.comma);
        write_member(&mut out, k, v, style);
    }
    out.extend_from_slice(b"}]");
    Some(out)
}
