//! Newline positions of a text, found 64 bytes at a time.
//!
//! One bitmask per 64-byte block (SSE2 compares on x86_64, word-at-a-time
//! arithmetic elsewhere), then one `trailing_zeros` per line: on tool output
//! (about 35 bytes a line) this costs a fraction of one `memchr` call per
//! line, which L0 made before.

/// Iterator over the positions of `\n` in a text, in ascending order.
#[derive(Debug, Clone)]
pub(crate) struct Newlines<'a> {
    text: &'a [u8],
    /// Offset of the block `mask` describes.
    base: usize,
    /// Newlines of the current block not yet returned (bit `i` = byte `base + i`).
    mask: u64,
}

impl<'a> Newlines<'a> {
    pub(crate) fn new(text: &'a [u8]) -> Self {
        Self { text, base: 0, mask: block_mask(text, 0) }
    }
}

impl Iterator for Newlines<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.base += 64;
            if self.base >= self.text.len() {
                return None;
            }
            self.mask = block_mask(self.text, self.base);
        }
        let i = self.base + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(i)
    }
}

/// The newline mask of the 64 bytes at `at` (zero past the end of `text`).
#[inline]
fn block_mask(text: &[u8], at: usize) -> u64 {
    match text.get(at..at + 64) {
        Some(block) => mask64(block.try_into().expect("64 bytes")),
        None => {
            let rest = text.get(at..).unwrap_or_default();
            let mut pad = [0u8; 64];
            pad[..rest.len()].copy_from_slice(rest);
            mask64(&pad)
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn mask64(block: &[u8; 64]) -> u64 {
    // SAFETY: `sse2_mask64` only needs SSE2, which this cfg proves is enabled
    // for the whole build (it is part of every x86_64 target's baseline).
    unsafe { sse2_mask64(block) }
}

/// Four 16-byte compares and byte masks; no memory access beyond `block`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn sse2_mask64(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8};
    let nl = _mm_set1_epi8(b'\n' as i8);
    let mut m = 0u64;
    for (k, part) in block.chunks_exact(16).enumerate() {
        let v: __m128i = bytemuck::cast(<[u8; 16]>::try_from(part).expect("16 bytes"));
        m |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)) as u16) << (16 * k);
    }
    m
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
fn mask64(block: &[u8; 64]) -> u64 {
    swar_mask64(block)
}

/// Word-at-a-time newline mask: exact (no false positives), no `unsafe`.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn swar_mask64(block: &[u8; 64]) -> u64 {
    const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const NL: u64 = 0x0a0a_0a0a_0a0a_0a0a;
    // Gathers bit 8k (k = 0..7) into bit 56 + k; the products never overlap.
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let mut m = 0u64;
    for (k, word) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ NL;
        // High bit of each byte set exactly where the byte of `x` is zero.
        let zero = !(((x & LO7) + LO7) | x) & !LO7;
        m |= ((zero >> 7).wrapping_mul(GATHER) >> 56) << (8 * k);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(text: &[u8]) -> Vec<usize> {
        memchr::memchr_iter(b'\n', text).collect()
    }

    proptest! {
        #[test]
        fn same_positions_as_memchr(text in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'\n' | 0x80), Just(0x0b), any::<u8>()], 0..300)) {
            prop_assert_eq!(Newlines::new(&text).collect::<Vec<_>>(), reference(&text));
        }

        #[test]
        fn swar_is_exact(block in proptest::array::uniform32(prop_oneof![Just(b'\n'), Just(0x8a), Just(0x09), Just(0x0b), any::<u8>()])) {
            let mut b = [0u8; 64];
            b[..32].copy_from_slice(&block);
            b[32..].copy_from_slice(&block);
            let want = (0..64).filter(|&i| b[i] == b'\n').fold(0u64, |m, i| m | 1 << i);
            prop_assert_eq!(swar_mask64(&b), want);
            prop_assert_eq!(mask64(&b), want);
        }
    }

    #[test]
    fn block_edges() {
        for len in [0usize, 1, 63, 64, 65, 127, 128, 129, 200] {
            for at in [0, len / 2, len.saturating_sub(1)] {
                let mut text = vec![b'x'; len];
                if at < len {
                    text[at] = b'\n';
                }
                assert_eq!(Newlines::new(&text).collect::<Vec<_>>(), reference(&text), "len {len} at {at}");
            }
        }
    }
}
