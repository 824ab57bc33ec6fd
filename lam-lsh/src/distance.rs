//! Exact squared L2 distance with a fixed summation order.
//!
//! Coordinate `i` is accumulated into lane `i % 16`; lanes are combined by a
//! fixed pairwise tree; no fused multiply-add is used. The result is therefore
//! the same bit pattern whatever SIMD width the compiler or CPU uses (scalar,
//! SSE2, AVX2), which keeps decisions and digests identical across machines.

const LANES: usize = 16;

#[inline(always)]
fn kernel(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dimension mismatch");
    let mut acc = [0.0f32; LANES];
    let n = a.len() / LANES * LANES;
    for (ca, cb) in a[..n].chunks_exact(LANES).zip(b[..n].chunks_exact(LANES)) {
        for i in 0..LANES {
            let d = ca[i] - cb[i];
            acc[i] += d * d;
        }
    }
    for (i, (x, y)) in a[n..].iter().zip(&b[n..]).enumerate() {
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

/// The portable path (whatever the build's baseline target features are).
pub fn sq_l2_scalar(a: &[f32], b: &[f32]) -> f32 {
    kernel(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn kernel_avx2(a: &[f32], b: &[f32]) -> f32 {
    kernel(a, b)
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
            return unsafe { kernel_avx2(a, b) };
        }
    }
    kernel(a, b)
}
