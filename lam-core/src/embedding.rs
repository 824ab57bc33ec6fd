//! Unit embeddings: validation and normalisation.
//!
//! Every vector that enters L1 is finite, non-zero and unit-normalised; the
//! substitution bound is stated for unit vectors only.

use crate::VectorFault;

/// Tolerance on `| ||v|| - 1 |` accepted by [`check_unit`].
pub const UNIT_TOLERANCE: f32 = 1e-3;

/// Scale `v` to unit L2 norm. Refuses NaN, infinite and zero vectors.
///
/// The norm is accumulated sequentially in f64 and each coordinate is divided
/// in f64, so the result is the same bit pattern on every IEEE machine.
pub fn normalize_in_place(v: &mut [f32]) -> Result<(), VectorFault> {
    let mut ss = 0.0f64;
    for (i, &x) in v.iter().enumerate() {
        if x.is_nan() {
            return Err(VectorFault::NaN { coord: i });
        }
        if x.is_infinite() {
            return Err(VectorFault::Infinite { coord: i });
        }
        ss += f64::from(x) * f64::from(x);
    }
    let norm = ss.sqrt();
    if norm.partial_cmp(&f64::from(f32::MIN_POSITIVE)) != Some(std::cmp::Ordering::Greater) {
        return Err(VectorFault::Zero);
    }
    for x in v.iter_mut() {
        *x = (f64::from(*x) / norm) as f32;
    }
    Ok(())
}

/// Check that `v` is finite and of unit norm (within [`UNIT_TOLERANCE`]).
pub fn check_unit(v: &[f32]) -> Result<(), VectorFault> {
    let mut ss = 0.0f64;
    for (i, &x) in v.iter().enumerate() {
        if x.is_nan() {
            return Err(VectorFault::NaN { coord: i });
        }
        if x.is_infinite() {
            return Err(VectorFault::Infinite { coord: i });
        }
        ss += f64::from(x) * f64::from(x);
    }
    if ss == 0.0 {
        return Err(VectorFault::Zero);
    }
    let norm = ss.sqrt() as f32;
    if (norm - 1.0).abs() > UNIT_TOLERANCE {
        return Err(VectorFault::NotUnit { norm_bits: norm.to_bits() });
    }
    Ok(())
}

/// The next value of the deterministic generator behind
/// [`random_unit_vectors`]: a 64-bit LCG (Knuth's MMIX constants), uniform
/// in `[-0.5, 0.5)` with 24 bits. For synthetic test and benchmark data
/// (vectors, weights), the same on every machine; not for anything that
/// needs real randomness.
pub fn lcg_uniform(state: &mut u64) -> f32 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
}

/// `n` deterministic pseudo-random unit vectors of dimension `dim`, row
/// after row (`n * dim` values; [`lcg_uniform`] from `seed`, each row
/// normalised): the one generator of synthetic embeddings for tests,
/// conformance suites and benchmarks.
pub fn random_unit_vectors(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    let mut v: Vec<f32> = (0..n * dim).map(|_| lcg_uniform(&mut s)).collect();
    for row in v.chunks_exact_mut(dim.max(1)) {
        // Only a row of exact zeros cannot be normalised (never seen in
        // practice); it becomes a basis vector rather than fail a benchmark.
        if normalize_in_place(row).is_err() {
            row[0] = 1.0;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_unit_vectors_are_unit_and_repeatable() {
        let a = random_unit_vectors(5, 384, 7);
        assert_eq!(a.len(), 5 * 384);
        assert_eq!(a, random_unit_vectors(5, 384, 7));
        assert_ne!(a, random_unit_vectors(5, 384, 8));
        assert!(a.chunks_exact(384).all(|r| check_unit(r).is_ok()));
        let mut s = 7;
        assert_eq!(a[0], {
            let first: Vec<f32> = (0..384).map(|_| lcg_uniform(&mut s)).collect();
            (f64::from(first[0]) / first.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt()) as f32
        });
    }

    #[test]
    fn refuses_bad_vectors() {
        assert_eq!(normalize_in_place(&mut [0.0, 0.0]), Err(VectorFault::Zero));
        assert_eq!(normalize_in_place(&mut [1.0, f32::NAN]), Err(VectorFault::NaN { coord: 1 }));
        assert_eq!(normalize_in_place(&mut [f32::NEG_INFINITY, 1.0]), Err(VectorFault::Infinite { coord: 0 }));
        assert!(matches!(check_unit(&[2.0, 0.0]), Err(VectorFault::NotUnit { .. })));
        assert_eq!(check_unit(&[0.0; 4]), Err(VectorFault::Zero));
    }

    #[test]
    fn normalises() {
        let mut v = [3.0f32, 4.0];
        normalize_in_place(&mut v).unwrap();
        assert_eq!(v, [0.6, 0.8]);
        check_unit(&v).unwrap();
    }
}
