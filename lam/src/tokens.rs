//! Token accounting with cl100k_base (LAM B.2: whole texts, never sums of pieces).

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

#[cfg(test)]
mod tests {
    #[test]
    fn counts_like_tiktoken() {
        // tiktoken cl100k_base: "hello world" -> [15339, 1917]
        assert_eq!(super::count(b"hello world"), 2);
        assert_eq!(super::count(b""), 0);
    }
}
