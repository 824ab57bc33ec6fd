//! New lines: what a session shows the model for the first time, and
//! whether what is forwarded for an observation still holds every one.
//!
//! A *new line* of an observation is a line whose text, compared by
//! [`key`] (ASCII whitespace trimmed, a leading line-number prefix such as
//! Claude Code's `    12→`, `cat -n`'s `     12\t` removed), appears in no
//! earlier observation of the session nor earlier in the same one. Blank
//! lines are never new. An agent acts on exactly these lines (an edited
//! line, a test summary that changed, one row of many alike), so the
//! faithful residual forwards every one of them verbatim; a line is
//! *hidden* when what is forwarded for its observation has no line equal to
//! it byte for byte. This is the one definition `lam eval`, `lam compact`,
//! `lam replay` and the operator's property tests count by.
//!
//! ```
//! use lam_core::newlines::NewLines;
//!
//! let mut s = NewLines::new();
//! let first = s.observe(b"SCALE = 3\nprint(SCALE)\n", b"SCALE = 3\nprint(SCALE)\n");
//! assert_eq!((first.new, first.hidden.len()), (2, 0));
//! // The edited line is new; a stub in its place hides it.
//! let edited = s.observe(b"SCALE = 4\nprint(SCALE)\n", b"[lam: similar to lines 1-2 of `cat a.py`]\n");
//! assert_eq!(edited.new, 1);
//! assert_eq!(edited.hidden, vec![b"SCALE = 4".to_vec()]);
//! ```

use std::collections::HashSet;

/// The text a line is compared by: a leading line-number prefix (optional
/// spaces, 1 to 9 digits, then `→` or a tab) removed, then ASCII
/// whitespace trimmed at both ends. A line holding nothing else (`  12→`)
/// keys as blank.
pub fn key(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let spaces = line.iter().take_while(|&&b| b == b' ').count();
    let digits = line[spaces..].iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = &line[spaces + digits..];
    let body = if (1..=9).contains(&digits) { rest.strip_prefix("→".as_bytes()).or_else(|| rest.strip_prefix(b"\t")).unwrap_or(line) } else { line };
    body.trim_ascii()
}

/// One observation's new lines and which of them are hidden.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// New lines in the observation.
    pub new: usize,
    /// The new lines (exact bytes, without the newline) that no line of
    /// what was forwarded equals, in order.
    pub hidden: Vec<Vec<u8>>,
}

/// One session's lines seen so far (by [`key`]), observation after
/// observation in arrival order.
#[derive(Debug, Default)]
pub struct NewLines {
    seen: HashSet<Vec<u8>>,
}

impl NewLines {
    /// A session that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next observation, `original`, and what was forwarded for it:
    /// count its new lines and find those `forwarded` does not hold as a
    /// line of its own; then remember every line of `original`.
    pub fn observe(&mut self, original: &[u8], forwarded: &[u8]) -> Observed {
        let mut out = Observed::default();
        let mut shown: Option<HashSet<&[u8]>> = (original != forwarded).then(|| lines(forwarded).collect());
        for line in lines(original) {
            let k = key(line);
            if k.is_empty() || self.seen.contains(k) {
                continue;
            }
            self.seen.insert(k.to_vec());
            out.new += 1;
            if shown.as_mut().is_some_and(|s| !s.contains(line)) {
                out.hidden.push(line.to_vec());
            }
        }
        out
    }

    /// Whether a line with this [`key`] was seen before.
    pub fn seen(&self, line: &[u8]) -> bool {
        self.seen.contains(key(line))
    }
}

/// The lines of `text`, each without its `\n`.
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_drop_line_numbers_and_whitespace() {
        assert_eq!(key("    12→SCALE = 4".as_bytes()), b"SCALE = 4");
        assert_eq!(key(b"     7\t    return x\r"), b"return x");
        assert_eq!(key(b"12\tx"), b"x");
        assert_eq!(key(b"  indented  "), b"indented");
        // A number that is the line, or one without the separator, stays.
        assert_eq!(key(b"  1234  "), b"1234");
        assert_eq!(key(b"12 passed in 0.41s"), b"12 passed in 0.41s");
        assert_eq!(key(b"1234567890\tx"), b"1234567890\tx");
        assert_eq!(key("  3→".as_bytes()), b"");
    }

    #[test]
    fn repeats_within_and_across_observations_are_not_new() {
        let mut s = NewLines::new();
        let a = s.observe(b"a\nb\na\n\n", b"a\nb\na\n\n");
        assert_eq!(a, Observed { new: 2, hidden: vec![] });
        // Renumbered and re-indented copies are not new.
        let b = s.observe("  1→a\n  2→  b\nc\n".as_bytes(), b"[lam: stub]\nc\n");
        assert_eq!(b, Observed { new: 1, hidden: vec![] });
        let c = s.observe(b"d\ne\n", b"d\n");
        assert_eq!(c, Observed { new: 2, hidden: vec![b"e".to_vec()] });
        // A new line must be forwarded whole, as a line.
        let d = s.observe(b"fgh\n", b"fg\n");
        assert_eq!(d.hidden, vec![b"fgh".to_vec()]);
        assert!(s.seen(b"  fgh "));
    }
}
