//! Token accounting with cl100k_base (LAM B.2: whole texts, never sums of
//! pieces), on its own so that whatever counts tokens (the proxy, the MCP
//! server) needs no trajectory reader.

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use std::ops::Range;
use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

fn bpe() -> &'static CoreBPE {
    static BPE: OnceLock<CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().expect("cl100k_base ships inside tiktoken-rs"))
}

/// The longest run of one character class (letters, spaces, or other
/// symbols: what cl100k's pre-tokenizer makes one piece of) given to the
/// tokenizer whole. A longer run (a minified line of `=`, a blob of one
/// letter, a megabyte of spaces) is counted in pieces of this many
/// characters: byte-pair merging is quadratic in a piece's length (50 KB of
/// `=` took 2 s, 400 KB minutes, 1 MiB overflowed the regex stack), so
/// counting stays linear in the text. Texts without such runs, i.e. nearly
/// every tool output, are counted exactly as tiktoken does.
pub const LONGEST_RUN: usize = 256;

/// cl100k_base tokens of `text` (invalid UTF-8 is decoded lossily for
/// counting only; runs longer than [`LONGEST_RUN`] in pieces).
pub fn count(text: &[u8]) -> usize {
    let s = String::from_utf8_lossy(text);
    pieces(&s).map(|p| bpe().encode_ordinary(p).len()).sum()
}

/// What cl100k's pre-tokenizer would join into one piece: letters, spaces,
/// or other symbols (digits it takes three at a time).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Space,
    Symbol,
    Digit,
}

fn class(c: char) -> Class {
    if c.is_alphabetic() {
        Class::Letter
    } else if c.is_whitespace() {
        Class::Space
    } else if c.is_numeric() {
        Class::Digit
    } else {
        Class::Symbol
    }
}

/// `s` cut inside every run of one class (digits aside) longer than
/// [`LONGEST_RUN`] characters, after each [`LONGEST_RUN`] of them; nothing
/// else is cut. One piece for ordinary text.
fn pieces(s: &str) -> impl Iterator<Item = &str> {
    let mut cuts = Vec::new();
    let (mut run, mut last) = (0usize, None);
    for (i, c) in s.char_indices() {
        let k = class(c);
        run = if Some(k) == last && k != Class::Digit { run + 1 } else { 1 };
        last = Some(k);
        if run > LONGEST_RUN {
            cuts.push(i);
            run = 1;
        }
    }
    cuts.push(s.len());
    let mut from = 0;
    cuts.into_iter().map(move |to| {
        let p = &s[from..to];
        from = to;
        p
    })
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
            for piece in pieces(chunk.valid()) {
                for tok in bpe()._decode_native_and_split(bpe().encode_ordinary(piece)) {
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
    fn ordinary_text_is_one_piece() {
        let t = format!("{}\n{}  x\n", "=".repeat(80), "word ".repeat(400));
        assert_eq!(super::pieces(&t).count(), 1);
        assert_eq!(super::pieces(&"=".repeat(600)).map(str::len).collect::<Vec<_>>(), [256, 256, 88]);
        assert_eq!(super::pieces(&"7".repeat(600)).count(), 1, "digits are taken three at a time anyway");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Long unbroken runs of every class count (in linear time: before, 50 KB
        /// of one class took seconds and 1 MiB panicked), and their spans
        /// cover the bytes; text around them counts as tiktoken does.
        #[test]
        fn long_runs_count_in_linear_time(c in proptest::prop_oneof![
            proptest::prelude::Just('='), proptest::prelude::Just('a'), proptest::prelude::Just(' '), proptest::prelude::Just('\n'),
            proptest::prelude::Just('7'), proptest::prelude::Just('é'), proptest::prelude::Just('/'), proptest::prelude::Just('\t'),
            proptest::prelude::Just('中')
        ], n in 20_000usize..200_000, head in "[a-z ]{0,40}") {
            let text = format!("{head}{}", c.to_string().repeat(n));
            let k = super::count(text.as_bytes());
            let mut spans = Vec::new();
            super::Cl100k.spans(text.as_bytes(), &mut spans);
            proptest::prop_assert_eq!(spans.last().map(|r| r.end), Some(text.len()));
            proptest::prop_assert!(k >= 1 && k <= text.len());
            proptest::prop_assert_eq!(super::count(head.as_bytes()), super::bpe().encode_ordinary(&head).len());
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
