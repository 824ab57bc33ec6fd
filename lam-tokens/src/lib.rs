//! Token accounting with cl100k_base (LAM B.2: whole texts, never sums of
//! pieces), on its own so that whatever counts tokens (the proxy, the MCP
//! server) needs no trajectory reader.

use std::ops::Range;
use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

fn bpe() -> &'static CoreBPE {
    static BPE: OnceLock<CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().expect("cl100k_base ships inside tiktoken-rs"))
}

/// cl100k_base tokens of `text` (invalid UTF-8 is decoded lossily for counting only).
pub fn count(text: &[u8]) -> usize {
    let s = String::from_utf8_lossy(text);
    bpe().encode_ordinary(&s).len()
}

/// cl100k_base as a [`lam_core::TokenCounter`] (the papers' accounting tokenizer).
///
/// `count` decodes invalid UTF-8 lossily; `spans` tokenizes each valid UTF-8
/// run and gives every invalid byte a span of its own, so spans always
/// cover the exact bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cl100k;

impl lam_core::TokenCounter for Cl100k {
    fn count(&self, text: &[u8]) -> usize {
        count(text)
    }

    fn spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) {
        out.clear();
        let mut at = 0;
        for chunk in text.utf8_chunks() {
            let valid = chunk.valid();
            if !valid.is_empty() {
                for tok in bpe()._decode_native_and_split(bpe().encode_ordinary(valid)) {
                    out.push(at..at + tok.len());
                    at += tok.len();
                }
            }
            for _ in chunk.invalid() {
                out.push(at..at + 1);
                at += 1;
            }
        }
        debug_assert_eq!(at, text.len());
    }
}

#[cfg(test)]
mod tests {
    use lam_core::TokenCounter;

    #[test]
    fn conformance() {
        lam_core::testsuite::token_counter(&super::Cl100k);
    }

    #[test]
    fn counts_like_tiktoken() {
        // tiktoken cl100k_base: "hello world" -> [15339, 1917]
        assert_eq!(super::count(b"hello world"), 2);
        assert_eq!(super::count(b""), 0);
    }

    #[test]
    fn spans_cover_the_bytes() {
        for t in [&b"hello world\n  fn main() {}\n"[..], b"caf\xc3\xa9 \xff\xfe tail", b""] {
            let mut s = Vec::new();
            super::Cl100k.spans(t, &mut s);
            let joined: Vec<u8> = s.iter().flat_map(|r| t[r.clone()].to_vec()).collect();
            assert_eq!(joined, t);
            if std::str::from_utf8(t).is_ok() {
                assert_eq!(s.len(), super::count(t));
            }
        }
    }

    #[test]
    fn entries_are_additive_at_marker_boundaries() {
        // The view's bound relies on this: an entry ending in a newline
        // followed by one starting with `[`, `#` or `§` tokenizes apart.
        let a = "foo bar.\n  \n";
        for b in ["[turn 2]\n", "#3 $ ls\n", "§a1b2c3d4 #2\n"] {
            let whole = format!("{a}{b}");
            assert_eq!(super::count(whole.as_bytes()), super::count(a.as_bytes()) + super::count(b.as_bytes()), "{b:?}");
        }
    }
}
