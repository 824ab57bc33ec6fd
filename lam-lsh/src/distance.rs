//! Exact squared L2 distance with a fixed summation order.
//!
//! Coordinate `i` of each full block of 32 is accumulated into lane `i % 32`;
//! the tail (`D mod 32` coordinates) is added to lanes `0..` once; lanes are
//! combined by a fixed pairwise tree; no fused multiply-add is used. The result
//! is therefore the same bit pattern on every path (portable scalar code or
//! AVX2 intrinsics), which keeps decisions and digests identical across machines.

const LANES: usize = 32;

/// Tail and reduction, shared by every path.
#[inline(always)]
fn finish(mut acc: [f32; LANES], ta: &[f32], tb: &[f32]) -> f32 {
    for (i, (x, y)) in ta.iter().zip(tb).enumerate() {
        let d = x - y;
        acc[i] += d * d;
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            acc[i] += acc[i + w];
        }
    }
    acc[0]
}

/// Coordinates between two looks at the partial sum in the bounded forms.
const CHECK: usize = 2 * LANES;

/// A partial sum above `bound` by this factor proves the full sum is above
/// `bound` whatever the reduction's rounding (each lane only grows, and 31
/// additions move a sum of non-negative terms by far less than 2^-16).
const SLACK: f32 = 1.0 + 1.0 / 65536.0;

/// The portable path.
pub fn sq_l2_scalar(a: &[f32], b: &[f32]) -> f32 {
    sq_l2_scalar_within(a, b, f32::INFINITY).unwrap_or(f32::INFINITY)
}

/// The portable path of [`sq_l2_within`].
pub fn sq_l2_scalar_within(a: &[f32], b: &[f32], bound: f32) -> Option<f32> {
    assert_eq!(a.len(), b.len(), "dimension mismatch");
    let n = a.len() / LANES * LANES;
    let mut acc = [0.0f32; LANES];
    for (k, (x, y)) in a[..n].chunks_exact(LANES).zip(b[..n].chunks_exact(LANES)).enumerate() {
        for i in 0..LANES {
            let d = x[i] - y[i];
            acc[i] += d * d;
        }
        let done = (k + 1) * LANES;
        if done.is_multiple_of(CHECK) && done < a.len() && finish(acc, &[], &[]) > bound * SLACK {
            return None;
        }
    }
    Some(finish(acc, &a[n..], &b[n..]))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sq_l2_avx2_within(a: &[f32], b: &[f32], bound: f32) -> Option<f32> {
    use std::arch::x86_64::{_mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps, _mm256_sub_ps};
    assert_eq!(a.len(), b.len(), "dimension mismatch");
    let n = a.len() / LANES * LANES;
    let mut acc = [_mm256_setzero_ps(); LANES / 8];
    let mut i = 0;
    while i < n {
        for (j, s) in acc.iter_mut().enumerate() {
            // SAFETY: i + 8 * j + 8 <= n <= len of both slices.
            let (x, y) = unsafe { (_mm256_loadu_ps(a.as_ptr().add(i + 8 * j)), _mm256_loadu_ps(b.as_ptr().add(i + 8 * j))) };
            let d = _mm256_sub_ps(x, y);
            *s = _mm256_add_ps(*s, _mm256_mul_ps(d, d));
        }
        i += LANES;
        if i.is_multiple_of(CHECK) && i < a.len() && reduce_avx2(&acc) > bound * SLACK {
            return None;
        }
    }
    if n == a.len() {
        return Some(reduce_avx2(&acc));
    }
    let mut lanes = [0.0f32; LANES];
    for (j, s) in acc.iter().enumerate() {
        // SAFETY: lanes has room for 8 floats at 8 * j.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr().add(8 * j), *s) };
    }
    Some(finish(lanes, &a[n..], &b[n..]))
}

/// The pairwise tree of `finish` (no tail) on registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn reduce_avx2(acc: &[std::arch::x86_64::__m256; LANES / 8]) -> f32 {
    use std::arch::x86_64::{
        _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_movehl_ps, _mm_shuffle_ps, _mm256_add_ps, _mm256_castps256_ps128, _mm256_extractf128_ps,
    };
    // w = 16: lanes 0..16 += 16..32; w = 8: 0..8 += 8..16.
    let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    // w = 4: 0..4 += 4..8; w = 2: 0..2 += 2..4; w = 1: 0 += 1.
    let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let h = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let o = _mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h));
    _mm_cvtss_f32(o)
}

/// `||a - b||^2` when it may be at most `bound`, bit for bit what [`sq_l2`]
/// gives; `None` once a partial sum proves it is above `bound` (checked every
/// 64 coordinates), so far pairs cost a fraction of a full distance.
///
/// # Panics
/// If `a.len() != b.len()`.
#[inline]
pub fn sq_l2_within(a: &[f32], b: &[f32], bound: f32) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { sq_l2_avx2_within(a, b, bound) };
        }
    }
    sq_l2_scalar_within(a, b, bound)
}

/// `||a - b||^2`, exact in the sense of the fixed order above.
///
/// # Panics
/// If `a.len() != b.len()`.
#[inline]
pub fn sq_l2(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { sq_l2_avx2_within(a, b, f32::INFINITY) }.unwrap_or(f32::INFINITY);
        }
    }
    sq_l2_scalar(a, b)
}
