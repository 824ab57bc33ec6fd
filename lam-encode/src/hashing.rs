use lam_core::{Encoder, EncoderInfo, Error, VectorFault, normalize_in_place};
use std::ops::Range;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A model-free lexical encoder: signed feature hashing of word unigrams and
/// bigrams into `dim` coordinates, unit-normalised.
///
/// Tokens are maximal runs of word bytes (ASCII alphanumerics, `_`, and any
/// byte >= 0x80, so invalid UTF-8 needs no decoding) or single punctuation
/// bytes; ASCII whitespace separates tokens.
#[derive(Debug, Clone)]
pub struct HashingEncoder {
    dim: usize,
    max_tokens: usize,
}

impl Default for HashingEncoder {
    fn default() -> Self {
        Self::new(384, 254)
    }
}

impl HashingEncoder {
    /// An encoder with `dim` coordinates and chunks of at most `max_tokens` tokens.
    pub fn new(dim: usize, max_tokens: usize) -> Self {
        assert!(dim > 0 && max_tokens > 0);
        Self { dim, max_tokens }
    }

    fn embed(&self, text: &[u8], spans: &mut Vec<Range<usize>>, row: &mut [f32]) -> Result<(), VectorFault> {
        tokenize(text, spans);
        row.fill(0.0);
        let mut unsigned = vec![0.0f32; 0];
        let mut prev: Option<u64> = None;
        for s in spans.iter() {
            let h = xxh3_64_with_seed(&text[s.clone()], 0x5eed);
            add(row, h);
            if let Some(p) = prev {
                add(row, p.rotate_left(17) ^ h.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            }
            prev = Some(h);
        }
        if let Err(VectorFault::Zero) = normalize_in_place(row) {
            // Signed hashing can cancel exactly; fall back to unsigned counts.
            unsigned.resize(row.len(), 0.0);
            for s in spans.iter() {
                let h = xxh3_64_with_seed(&text[s.clone()], 0x5eed);
                unsigned[(h % row.len() as u64) as usize] += 1.0;
            }
            row.copy_from_slice(&unsigned);
            normalize_in_place(row)?;
        }
        Ok(())
    }
}

fn add(row: &mut [f32], h: u64) {
    let i = ((h >> 1) % row.len() as u64) as usize;
    row[i] += if h & 1 == 0 { 1.0 } else { -1.0 };
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

fn tokenize(text: &[u8], out: &mut Vec<Range<usize>>) {
    out.clear();
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if b.is_ascii_whitespace() {
            i += 1;
        } else if is_word(b) {
            let s = i;
            while i < text.len() && is_word(text[i]) {
                i += 1;
            }
            out.push(s..i);
        } else {
            out.push(i..i + 1);
            i += 1;
        }
    }
}

impl Encoder for HashingEncoder {
    fn info(&self) -> EncoderInfo {
        EncoderInfo { model_id: format!("lam-hashing-v1-d{}", self.dim), dim: self.dim, max_tokens: self.max_tokens }
    }

    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        tokenize(text, out);
        Ok(())
    }

    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        if out.len() != texts.len() * self.dim {
            return Err(Error::Dimension { expected: texts.len() * self.dim, got: out.len() });
        }
        let mut spans = Vec::new();
        for (i, (t, row)) in texts.iter().zip(out.chunks_exact_mut(self.dim)).enumerate() {
            self.embed(t, &mut spans, row).map_err(|reason| Error::InvalidVector { what: format!("text {i} of batch"), reason })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance() {
        lam_core::testsuite::encoder(&mut HashingEncoder::default());
        lam_core::testsuite::encoder(&mut HashingEncoder::new(768, 510));
    }

    #[test]
    fn similar_texts_are_close_and_different_texts_far() {
        let mut e = HashingEncoder::default();
        let a = b"def mean(xs):\n    return sum(xs) / len(xs)\n\ndef median(xs):\n    xs = sorted(xs)\n    n = len(xs)\n    return xs[n // 2]\n";
        let b = b"def mean(xs):\n    return sum(xs) / len(xs)\n\ndef median(xs):\n    xs = sorted(xs)\n    n = len(xs)\n    return xs[(n - 1) // 2]\n";
        let c = b"FAILED tests/test_report.py::test_full_report - AssertionError: lists differ";
        let mut out = vec![0.0; 3 * 384];
        e.encode_batch(&[a, b, c], &mut out).unwrap();
        let cos = |i: usize, j: usize| -> f32 { (0..384).map(|k| out[i * 384 + k] * out[j * 384 + k]).sum() };
        assert!(cos(0, 1) > 0.9, "{}", cos(0, 1));
        assert!(cos(0, 2) < 0.3, "{}", cos(0, 2));
    }

    #[test]
    fn empty_text_is_refused_not_zeroed() {
        let mut e = HashingEncoder::default();
        let mut out = vec![0.0; 384];
        assert!(matches!(e.encode_batch(&[b"   "], &mut out), Err(Error::InvalidVector { .. })));
    }
}
