//! The merge threshold `t` and the substitution bound `delta = sqrt(2 - 2t)`.
//!
//! For unit vectors `||a - b||^2 = 2 - 2 cos(a, b)`, so merging at `cos >= t`
//! is the same test as `||a - b|| <= delta` (LAM equation 1).

use crate::Error;

/// A merge threshold with its substitution bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    t: f64,
}

impl Threshold {
    /// The default: `t = 0.95`, `delta = 0.316` (the papers' setting). The one
    /// default every command, the proxy and the Python package start from.
    pub const DEFAULT: Threshold = Threshold { t: 0.95 };

    /// A threshold on cosine similarity, in `(-1, 1]`.
    pub fn from_cosine(t: f64) -> Result<Self, Error> {
        if t.is_finite() && t > -1.0 && t <= 1.0 { Ok(Self { t }) } else { Err(Error::Threshold(t)) }
    }

    /// The threshold whose bound is `delta`, for `delta` in `[0, 2)`.
    pub fn from_delta(delta: f64) -> Result<Self, Error> {
        Self::from_cosine(1.0 - delta * delta / 2.0)
    }

    /// The cosine threshold `t`.
    pub const fn cosine(&self) -> f64 {
        self.t
    }

    /// The substitution bound `delta = sqrt(2 - 2t)`.
    pub fn delta(&self) -> f64 {
        (2.0 - 2.0 * self.t).max(0.0).sqrt()
    }

    /// `delta^2 = 2 - 2t` rounded to f32: the value squared distances are compared with.
    ///
    /// Comparing squared distances avoids a square root per pair; the
    /// comparison `d2 <= delta2` is the one every index and both operator forms use.
    ///
    /// Rounded *down*, so that `d2 <= delta_sq_f32()` implies `sqrt(d2) <= delta`
    /// exactly: no accepted substitution can exceed the configured bound.
    pub fn delta_sq_f32(&self) -> f32 {
        let exact = (2.0 - 2.0 * self.t).max(0.0);
        let mut x = exact as f32;
        if f64::from(x) > exact {
            x = f32::from_bits(x.to_bits() - 1);
        }
        x
    }
}

impl Default for Threshold {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// `0.95`: the cosine threshold, validated (`--threshold 0.95`).
impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
        Self::from_cosine(t).map_err(|e| e.to_string())
    }
}

/// The cosine threshold `t`, as [`FromStr`](std::str::FromStr) reads it.
impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_default_read_and_written_alike() {
        assert_eq!(Threshold::default().cosine(), 0.95);
        assert_eq!(Threshold::DEFAULT.to_string().parse::<Threshold>(), Ok(Threshold::DEFAULT));
        assert!("1.5".parse::<Threshold>().is_err() && "x".parse::<Threshold>().is_err() && "NaN".parse::<Threshold>().is_err());
    }

    #[test]
    fn paper_values() {
        // LAM section 2.3: at cos >= 0.95, delta = 0.316.
        let t = Threshold::from_cosine(0.95).unwrap();
        assert!((t.delta() - 0.316_227_766).abs() < 1e-9);
        // Table 11 bounds.
        for (c, d) in [(0.99, 0.1414), (0.98, 0.2000), (0.9, 0.4472)] {
            assert!((Threshold::from_cosine(c).unwrap().delta() - d).abs() < 1e-4);
        }
    }

    #[test]
    fn round_trip() {
        for c in [0.5, 0.8, 0.9, 0.95, 0.99, 1.0] {
            let t = Threshold::from_cosine(c).unwrap();
            let back = Threshold::from_delta(t.delta()).unwrap();
            assert!((back.cosine() - c).abs() < 1e-12);
        }
    }

    #[test]
    fn delta_sq_never_exceeds_delta() {
        for k in 0..2000 {
            let t = Threshold::from_cosine(0.5 + f64::from(k) * 0.00025).unwrap();
            assert!(f64::from(t.delta_sq_f32()) <= 2.0 - 2.0 * t.cosine());
            assert!(f64::from(t.delta_sq_f32()).sqrt() <= t.delta());
        }
    }

    #[test]
    fn refuses_out_of_range() {
        assert!(Threshold::from_cosine(1.5).is_err());
        assert!(Threshold::from_cosine(f64::NAN).is_err());
        assert!(Threshold::from_cosine(-1.0).is_err());
    }
}
