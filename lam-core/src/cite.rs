//! ARC citations: the one place where an archived observation is written
//! as the short entry that stands for it in a prompt (`§id`, the call as the
//! model saw it, its size, a head and tail preview, the way to recall it).
//! The ARC view writes it with its `_recall` action; `lam serve --budget`
//! with the agent's recall tool (`mcp__lam__recall`).
//!
//! ```text
//! #12 $ pytest -q → §9f3a rc=1 3412 tok 14233 B
//!   head: ============================= test session starts ==…
//!   tail: FAILED tests/test_app.py::test_login - AssertionError⏎1 failed, 41 passed in 3.20s
//!   _recall §9f3a (2 parts of ≤2048 tok: _recall §9f3a 2/2 …)
//! ```

use crate::ObsMeta;
use crate::stub::Recall;

/// How many tokens a part of a recalled output holds at most, by default
/// (`lam mcp`'s recall tool; a citation's `part K/N` counts on it).
pub const PART_TOKENS: usize = 2048;

/// Longest preview (head, tail) in characters, on one line.
pub const PREVIEW_CHARS: usize = 400;

/// At most `n` characters of `s` on one line (newlines shown as `⏎`), with `…` when cut.
pub fn one_line(s: &str, n: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.trim().chars().enumerate() {
        if i == n {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push('⏎'),
            '\r' | '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The last `n` characters of `s` on one line, with `…` before them when cut.
pub fn one_line_end(s: &str, n: usize) -> String {
    let t = s.trim();
    let len = t.chars().count();
    if len <= n {
        return one_line(t, n);
    }
    let start = t.char_indices().nth(len - n).map_or(0, |(i, _)| i);
    format!("…{}", one_line(&t[start..], n))
}

/// The citation of archived observation `m`: `lead` (how the entry names
/// the call), `→ §id`, its return code, tokens and bytes; its head and tail
/// previews on a line each (at most `preview` characters); how to recall it
/// (`how`; none: no line), in parts of at most `part` tokens when it is larger.
/// Every line ends with `\n`.
pub fn citation(m: &ObsMeta, lead: &str, how: Recall<'_>, part: usize, preview: usize) -> String {
    let rc = m.returncode.map_or(String::new(), |r| format!(" rc={r}"));
    let mut s = format!("{lead} → §{}{rc} {} tok {} B\n", m.shown, m.tokens, m.bytes);
    s.push_str(&format!("  head: {}\n", one_line(&String::from_utf8_lossy(&m.head), preview)));
    if !m.tail.is_empty() {
        s.push_str(&format!("  tail: {}\n", one_line_end(&String::from_utf8_lossy(&m.tail), preview)));
    }
    let Recall::Via(name) = how else { return s };
    let parts = (m.tokens as usize).div_ceil(part.max(1)).max(1);
    let id = &m.shown;
    match (parts, how == Recall::ARC) {
        (1, _) => s.push_str(&format!("  {name} §{id}\n")),
        (_, true) => s.push_str(&format!("  {name} §{id} ({parts} parts of ≤{part} tok: {name} §{id} 2/{parts} …)\n")),
        (_, false) => s.push_str(&format!("  {name} §{id} (whole), or in {parts} parts of ≤{part} tok: {name} §{id} part 1/{parts} … part {parts}/{parts}\n")),
    }
    s
}

/// The one-line form of [`citation`]: `lead`, `→ §id`, tokens and bytes,
/// and the recall handle (`how`; none: left out). What an older citation
/// shrinks to.
pub fn line(m: &ObsMeta, lead: &str, how: Recall<'_>) -> String {
    let recall = match how {
        Recall::Via(name) => format!("; {name} §{}", m.shown),
        Recall::None => String::new(),
    };
    format!("{lead} → §{} {} tok {} B{recall}\n", m.shown, m.tokens, m.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObsId;

    fn meta(tokens: u32) -> ObsMeta {
        let obs = b"first line\nsecond line\n";
        ObsMeta {
            id: ObsId::of(b"ls", obs),
            shown: "9f3a".into(),
            action: "ls".into(),
            returncode: Some(0),
            step: 0,
            bytes: obs.len() as u64,
            tokens,
            head: obs.to_vec(),
            tail: Vec::new(),
        }
    }

    #[test]
    fn a_citation_names_the_id_size_preview_and_recall() {
        let c = citation(&meta(6), "#1 $ ls", Recall::ARC, 2048, 400);
        assert_eq!(c, "#1 $ ls → §9f3a rc=0 6 tok 23 B\n  head: first line⏎second line\n  _recall §9f3a\n");
        let c = citation(&meta(5000), "$ ls", Recall::Via("mcp__lam__recall"), 2048, 5);
        assert!(c.contains("  head: first…\n"), "{c}");
        assert_eq!(one_line_end("a\nbcdef", 3), "…def");
        assert_eq!(one_line_end("a\nb", 3), "a⏎b");
        assert!(c.ends_with("mcp__lam__recall §9f3a (whole), or in 3 parts of ≤2048 tok: mcp__lam__recall §9f3a part 1/3 … part 3/3\n"), "{c}");
        assert_eq!(citation(&meta(6), "$ ls", Recall::None, 2048, 400).lines().count(), 2, "no recall line without a handle");
        assert_eq!(line(&meta(6), "$ ls", Recall::Via("recall")), "$ ls → §9f3a 6 tok 23 B; recall §9f3a\n");
    }
}
