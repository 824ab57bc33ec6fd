//! A tokenizer-free [`TokenCounter`] for tests and examples.

use crate::TokenCounter;
use std::ops::Range;

/// Counts a run of letters/digits (and non-ASCII bytes) as one token, every
/// other byte as one token, and a run of whitespace as one token. Additive
/// at entry boundaries like cl100k_base; not any model's tokenizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimpleCounter;

fn class(b: u8) -> u8 {
    if b.is_ascii_alphanumeric() || b >= 0x80 {
        0
    } else if b.is_ascii_whitespace() {
        1
    } else {
        2
    }
}

impl TokenCounter for SimpleCounter {
    fn count(&self, text: &[u8]) -> usize {
        let mut n = 0;
        let mut prev = 3u8;
        for &b in text {
            let c = class(b);
            if c == 2 || c != prev {
                n += 1;
            }
            prev = c;
        }
        n
    }

    fn spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) {
        out.clear();
        let mut start = 0;
        for i in 1..=text.len() {
            let end = i == text.len();
            if end || class(text[i]) == 2 || class(text[i]) != class(text[i - 1]) || class(text[i - 1]) == 2 {
                out.push(start..i);
                start = i;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance() {
        crate::testsuite::token_counter(&SimpleCounter);
    }

    #[test]
    fn spans_cover_and_match_count() {
        for t in [&b"hello, world  \n\nfoo(bar)=1"[..], b"", b"a", b"\xff\xfe ok"] {
            let mut s = Vec::new();
            SimpleCounter.spans(t, &mut s);
            assert_eq!(s.len(), SimpleCounter.count(t), "{t:?}");
            let joined: Vec<u8> = s.iter().flat_map(|r| t[r.clone()].to_vec()).collect();
            assert_eq!(joined, t);
        }
    }
}
