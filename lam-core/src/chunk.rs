//! Cutting an observation into windows at encoder-token boundaries.

use std::ops::Range;

/// Split `len` bytes into consecutive, non-overlapping windows of at most
/// `max_tokens` tokens each, given the byte spans of the tokens in order.
///
/// Windows partition the text: the first starts at byte 0, the last ends at
/// `len`, and each later window starts where the first of its tokens starts,
/// so bytes between tokens (whitespace) belong to the window before them.
/// A text with no tokens yields no windows (nothing to embed).
///
/// # Panics
/// If `max_tokens == 0`.
pub fn chunk_spans(tokens: &[Range<usize>], max_tokens: usize, len: usize, out: &mut Vec<Range<usize>>) {
    assert!(max_tokens > 0, "max_tokens must be positive");
    out.clear();
    if tokens.is_empty() {
        return;
    }
    let mut start = 0usize;
    let mut k = max_tokens;
    while k < tokens.len() {
        let cut = tokens[k].start;
        out.push(start..cut);
        start = cut;
        k += max_tokens;
    }
    out.push(start..len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_the_text() {
        // "aa bb cc dd e"
        let toks = vec![0..2, 3..5, 6..8, 9..11, 12..13];
        let mut out = Vec::new();
        chunk_spans(&toks, 2, 14, &mut out);
        assert_eq!(out, vec![0..6, 6..12, 12..14]);
        chunk_spans(&toks, 5, 14, &mut out);
        assert_eq!(out, vec![0..14]);
        chunk_spans(&[], 5, 3, &mut out);
        assert!(out.is_empty());
    }
}
