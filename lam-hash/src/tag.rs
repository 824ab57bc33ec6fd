//! A residual line's tag: the xxh3 of its bytes (of its body, for a line
//! with a printed number) whose low bits say what kind of line it is.

use xxhash_rust::xxh3::xxh3_64;

/// A residual line is a tag and a number. The tag: [`NONE`] for a stub
/// line, [`PIECES`] for a line written in pieces (text, but no run repeats
/// it), otherwise an xxh3 whose low two bits give its kind: odd, a blank line
/// (whitespace only; compared by its exact bytes too); `..10`, a numbered
/// line (`lam_core::newlines::Numbered`: `   12→body`), whose tag is that of
/// everything but its number (the field's width, the separator, the body)
/// and whose number is kept beside it (`.110` when nothing but spaces
/// follows the number: such a line starts no run, as a blank line does);
/// `..00`, any other line. Lines without
/// a number have the number 0. Two lines are the same when tag and number
/// are; a numbered line repeats another with its number moved by `k` when
/// the tags are the same and the numbers `k` apart.
pub(crate) const NONE: u64 = 0;
pub(crate) const PIECES: u64 = 4;
/// The tag of a line of a forgotten record ([`LineDedup::forget`]): it
/// matches no line, and a newer output of the same call holding it keeps
/// an older one from being named (the model would read the name as the newer).
///
/// [`LineDedup::forget`]: crate::LineDedup::forget
pub(crate) const GONE: u64 = 8;
/// The tag of the empty line, the most common blank line (not hashed; any odd constant).
const EMPTY: u64 = 0x2d06_8005_38d3_94c3 | 1;

/// A line's tag and number.
#[inline]
pub(crate) fn tag(line: &[u8]) -> (u64, u32) {
    if line.is_empty() {
        (EMPTY, 0)
    } else if is_blank(line) {
        (xxh3_64(line) | 1, 0)
    } else if let Some(n) = numbered_prefix(line) {
        let hollow = if is_blank(&line[n.width..]) { 6 } else { 2 };
        ((xxhash_rust::xxh3::xxh3_64_with_seed(&line[n.field..], n.field as u64) & !7) | hollow, n.number)
    } else {
        ((xxh3_64(line) & !3).max(8), 0)
    }
}

/// `lam_core::newlines::Numbered::of`, asked only when the first byte that
/// is not a space is a digit 1-9 (which a number prefix needs): most lines
/// are indented code, and their spaces are skipped 8 at a time.
#[inline]
fn numbered_prefix(line: &[u8]) -> Option<lam_core::newlines::Numbered> {
    let mut i = 0;
    while let Some(w) = line.get(i..i + 8) {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ 0x2020_2020_2020_2020;
        if x != 0 {
            i += (x.trailing_zeros() / 8) as usize;
            break;
        }
        i += 8;
    }
    while line.get(i) == Some(&b' ') {
        i += 1;
    }
    match line.get(i) {
        Some(b'1'..=b'9') => lam_core::newlines::Numbered::of(line),
        _ => None,
    }
}

/// The key of a line's visible copies: its tag, mixed with its number.
#[inline]
pub(crate) fn exact(t: u64, number: u32) -> u64 {
    t ^ u64::from(number).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Whether a tag is a numbered line's.
#[inline]
pub(crate) fn numbered(t: u64) -> bool {
    t & 3 == 2
}

/// Whether a tag is a numbered line's with nothing but spaces after the number.
#[inline]
pub(crate) fn hollow(t: u64) -> bool {
    t & 7 == 6
}

/// Whether a tag is a blank line's.
#[inline]
pub(crate) fn blank(t: u64) -> bool {
    t & 1 == 1
}

#[inline]
fn is_blank(line: &[u8]) -> bool {
    // Fast path: most lines start (or, when indented, end) with a visible character.
    match (line.first(), line.last()) {
        (None, _) => true,
        (Some(&a), Some(&z)) if a > b' ' || z > b' ' => false,
        _ => line.iter().all(|b| b.is_ascii_whitespace()),
    }
}

#[cfg(test)]
mod prefix_tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn numbered_prefix_is_numbered_of(line in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'0'), Just(b'7'), Just(b'\t'), Just(0xe2), Just(0x86), Just(0x92), any::<u8>()], 0..40)) {
            prop_assert_eq!(super::numbered_prefix(&line), lam_core::newlines::Numbered::of(&line));
        }
    }
}
