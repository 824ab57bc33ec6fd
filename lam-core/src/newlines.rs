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

/// The text a line is compared by: its [`Numbered`] prefix removed, then
/// ASCII whitespace trimmed at both ends. A line holding nothing else
/// (`  12→`) keys as blank.
pub fn key(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let body = Numbered::of(line).map_or(line, |n| &line[n.width..]);
    body.trim_ascii()
}

/// A line that starts with a line number, as `cat -n`, `nl` and agents'
/// file readers print them: optional spaces, then 1 to 9 digits (no
/// leading zero), right-aligned in the field, then `→` (Claude Code's
/// `Read`) or a tab (`cat -n`): `     12→SCALE = 4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numbered {
    /// The number.
    pub number: u32,
    /// Bytes of the field (spaces and digits).
    pub field: usize,
    /// Bytes of the field and the separator: where the body starts.
    pub width: usize,
}

impl Numbered {
    /// The line's number prefix, if it has one.
    #[inline]
    pub fn of(line: &[u8]) -> Option<Numbered> {
        match line.first() {
            Some(b' ' | b'1'..=b'9') => {}
            _ => return None,
        }
        let spaces = line.iter().take_while(|&&b| b == b' ').count();
        let digits = line[spaces..].iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=9).contains(&digits) || line[spaces] == b'0' {
            return None;
        }
        let field = spaces + digits;
        let sep = match &line[field..] {
            [b'\t', ..] => 1,
            [0xe2, 0x86, 0x92, ..] => 3,
            _ => return None,
        };
        let number = line[spaces..field].iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        Some(Numbered { number, field, width: field + sep })
    }
}

/// `line` with its line number moved by `shift`, right-aligned in the same
/// field (a line without a number is unchanged); `None` when the new number
/// is below 1 or does not fit the field. What `with line numbers +K` in a
/// stub means (`docs/stubs.md`).
pub fn renumber(line: &[u8], shift: i64) -> Option<Vec<u8>> {
    let Some(n) = Numbered::of(line) else { return Some(line.to_vec()) };
    let number = i64::from(n.number) + shift;
    let digits = number.to_string();
    if number < 1 || digits.len() > n.field {
        return None;
    }
    let mut out = format!("{digits:>w$}", w = n.field).into_bytes();
    out.extend_from_slice(&line[n.field..]);
    Some(out)
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
        assert_eq!(key(b"012\tx"), b"012\tx", "a leading zero is not a line number");
    }

    #[test]
    fn renumbering_keeps_the_field() {
        assert_eq!(renumber("     9→x".as_bytes(), 1).unwrap(), "    10→x".as_bytes());
        assert_eq!(renumber(b"12\tx", -3).unwrap(), b" 9\tx");
        assert_eq!(renumber(b"99\tx", 1), None, "does not fit");
        assert_eq!(renumber(b"  2\tx", -2), None, "below 1");
        assert_eq!(renumber(b"plain", 5).unwrap(), b"plain");
        assert_eq!(Numbered::of("  12→a".as_bytes()), Some(Numbered { number: 12, field: 4, width: 7 }));
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
