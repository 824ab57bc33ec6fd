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

#[cfg(test)]
mod tests {
    use super::*;

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
