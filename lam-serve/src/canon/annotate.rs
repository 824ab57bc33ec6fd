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
/// were, the wanted annotations last); everything else is copied as it is.
pub(crate) fn reannotate(b: &[u8], node: &Node, want: &[Annotation]) -> Vec<u8> {
    let mut path = Path::new();
    match emit(b, node, &mut path, want) {
        Some(out) => out,
        None => b[node.span.clone()].to_vec(),
    }
}

/// The new bytes of `node`, or `None` when nothing in it changes.
fn emit(b: &[u8], node: &Node, path: &mut Path, want: &[Annotation]) -> Option<Vec<u8>> {
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

fn emit_object(b: &[u8], node: &Node, ms: &[Member], path: &mut Path, want: &[Annotation]) -> Option<Vec<u8>> {
    let mine: Vec<(&str, &[u8])> = want.iter().filter(|(p, _, _)| *p == *path).map(|(_, k, v)| (k.as_str(), &v[..])).collect();
    let have: Vec<(&str, &[u8])> = ms.iter().filter(|m| is_annotation(&m.key)).map(|m| (m.key.as_str(), &b[m.value.span.clone()])).collect();
    let mut children = Vec::new();
    for m in ms.iter().filter(|m| !is_annotation(&m.key)) {
        path.push(Seg::Key(m.key.clone().into()));
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
fn long_form(b: &[u8], node: &Node, path: &mut Path, want: &[Annotation]) -> Option<Vec<u8>> {
    path.push(Seg::Index(0));
    let marks: Vec<_> = want.iter().filter(|(p, _, _)| *p == *path).collect();
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
