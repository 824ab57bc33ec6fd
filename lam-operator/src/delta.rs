//! The delta residual (`docs/stubs.md`, "Delta"): an output near the
//! newest earlier output of a call the model can read (the representative)
//! is forwarded as one stub naming that call, then one hunk header per
//! changed place, each followed by this output's lines there, verbatim.
//! `lam_core::expand` reads it back byte for byte.

use lam_core::stub::{DeltaStub, Hunk, Recall};
use similar::{Algorithm, DiffOp, capture_diff_slices};
use xxhash_rust::xxh3::xxh3_128;

/// Outputs longer than this (lines, both sides together) are not diffed.
const MAX_LINES: usize = 50_000;
/// Two hunks this close (equal lines between them, each short) are one:
/// the lines cost less than a hunk header.
const JOIN_BYTES: usize = 12;

/// The lines of an output (each with its newline), as xxh3-128 keys.
pub(crate) fn keys(text: &[u8]) -> Vec<u128> {
    text.split_inclusive(|&b| b == b'\n').map(xxh3_128).collect()
}

/// The hunks that turn `old` (the representative's line keys) into the
/// output `new` (its lines `lines`, keys `new`), or `None` when the output
/// is not near it (fewer than half its lines are the representative's) or
/// cannot be written as a delta (a last line without its newline followed
/// by a hunk).
pub(crate) fn hunks(old: &[u128], new: &[u128], lines: &[&[u8]]) -> Option<Vec<Hunk>> {
    if new.is_empty() || old.is_empty() || old.len() + new.len() > MAX_LINES {
        return None;
    }
    let olds: std::collections::HashSet<u128> = old.iter().copied().collect();
    let shared = new.iter().filter(|k| olds.contains(k)).count();
    if 2 * shared < new.len() {
        return None;
    }
    let mut out: Vec<Hunk> = Vec::new();
    // Positions are counted here, op after op (the ops are in order).
    let (mut o, mut n) = (0u32, 0u32);
    for op in capture_diff_slices(Algorithm::Myers, old, new) {
        let (del, ins) = match op {
            DiffOp::Equal { len, .. } => {
                o += len as u32;
                n += len as u32;
                continue;
            }
            DiffOp::Delete { old_len, .. } => (old_len as u32, 0),
            DiffOp::Insert { new_len, .. } => (0, new_len as u32),
            DiffOp::Replace { old_len, new_len, .. } => (old_len as u32, new_len as u32),
        };
        let h = Hunk { at: o, del, new_at: n, ins };
        o += del;
        n += ins;
        match out.last_mut() {
            Some(p) if joins(p, &h, lines) => {
                p.del = h.at + h.del - p.at;
                p.ins = h.new_at + h.ins - p.new_at;
            }
            _ => out.push(h),
        }
    }
    // A last line without its newline can only be the residual's last.
    let open = lines.last().is_some_and(|l| !l.ends_with(b"\n"));
    let ends = |h: &Hunk| (h.new_at + h.ins) as usize == lines.len();
    if open && out.iter().rev().skip(1).any(ends) {
        return None;
    }
    Some(out)
}

/// Whether hunk `b` joins `a` (the equal lines between them are few and short).
fn joins(a: &Hunk, b: &Hunk, lines: &[&[u8]]) -> bool {
    let gap = &lines[(a.new_at + a.ins) as usize..b.new_at as usize];
    gap.iter().map(|l| l.len()).sum::<usize>() <= JOIN_BYTES
}

/// Write the delta residual: the stub line, then each hunk's header and
/// the output's lines it writes.
pub(crate) fn render(d: &DeltaStub, how: Recall<'_>, lines: &[&[u8]], out: &mut Vec<u8>) {
    use std::io::Write as _;
    writeln!(out, "{}", lam_core::Stub::Delta(d.clone()).with(how)).expect("writing to a Vec");
    for h in &d.hunks {
        writeln!(out, "{h}").expect("writing to a Vec");
        lines[h.new_at as usize..(h.new_at + h.ins) as usize].iter().for_each(|l| out.extend_from_slice(l));
    }
}

/// A delta residual without its stub line and hunk headers (gross accounting).
pub(crate) fn strip(residual: &[u8], d: &DeltaStub) -> Vec<u8> {
    let lines: Vec<&[u8]> = residual.split_inclusive(|&b| b == b'\n').collect();
    let mut out = Vec::with_capacity(residual.len());
    let mut at = 1;
    for h in &d.hunks {
        let body = lines.get(at + 1..(at + 1 + h.ins as usize).min(lines.len())).unwrap_or_default();
        body.iter().for_each(|l| out.extend_from_slice(l));
        at += 1 + h.ins as usize;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lam_core::expand::{Seen, expand};
    use proptest::prelude::*;

    fn delta(old: &[u8], new: &[u8]) -> Option<Vec<u8>> {
        let lines: Vec<&[u8]> = new.split_inclusive(|&b| b == b'\n').collect();
        let hunks = hunks(&keys(old), &keys(new), &lines)?;
        let d = DeltaStub { id: "ab12".into(), of: "cat a.py".into(), recall: true, hunks, last: false };
        let mut out = Vec::new();
        render(&d, Recall::ARC, &lines, &mut out);
        let parsed = lam_core::stub::parse_residual(&out).expect("parses");
        assert_eq!(parsed, vec![lam_core::Stub::Delta(d.clone())]);
        assert_eq!(strip(&out, &d).len(), d.hunks.iter().map(|h| lines[h.new_at as usize..(h.new_at + h.ins) as usize].concat().len()).sum::<usize>());
        Some(out)
    }

    fn reads_back(old: &[u8], new: &[u8]) {
        if let Some(out) = delta(old, new) {
            let seen = [Seen { call: "cat a.py", residual: old, output: old }];
            assert_eq!(expand(&out, "cat a.py", &seen).expect("reads back").text, new, "{}", String::from_utf8_lossy(&out));
        }
    }

    #[test]
    fn an_edited_file_is_one_stub_and_its_hunks() {
        let old = b"a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\n";
        let new = b"a = 1\nb = 20\nc = 3\nd = 4\ne = 5\ninserted\nf = 6\n";
        let out = delta(old, new).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[lam: as `cat a.py` above except these lines; _recall §ab12]\n@@ -2 +2 @@\nb = 20\n@@ -5,0 +6 @@\ninserted\n"
        );
        reads_back(old, new);
        let gone = b"a = 1\nb = 2\ne = 5\nf = 6";
        assert_eq!(
            String::from_utf8(delta(old, gone).unwrap()).unwrap(),
            "[lam: as `cat a.py` above except these lines; _recall §ab12]\n@@ -3,4 +3,2 @@\ne = 5\nf = 6"
        );
        reads_back(old, gone);
        assert!(delta(old, b"x\ny\nz\n").is_none(), "not near");
    }

    proptest! {
        #[test]
        fn deltas_read_back_exactly(old in prop::collection::vec(0u8..6, 1..30), edits in prop::collection::vec((0usize..40, 0u8..3, 0u8..8), 0..8), open in any::<bool>(), open_old in any::<bool>()) {
            let line = |k: u8| format!("line {k}\n");
            let mut a: Vec<String> = old.iter().map(|&k| line(k)).collect();
            let mut b = a.clone();
            for (at, kind, k) in edits {
                let at = at % (b.len() + 1);
                match kind {
                    0 => b.insert(at, line(k + 3)),
                    1 if at < b.len() => { b.remove(at); }
                    _ if at < b.len() => b[at] = line(k),
                    _ => {}
                }
            }
            for (v, open) in [(&mut a, open_old), (&mut b, open)] {
                if let (true, Some(l)) = (open, v.last_mut()) { l.pop(); }
            }
            reads_back(a.concat().as_bytes(), b.concat().as_bytes());
        }
    }
}
