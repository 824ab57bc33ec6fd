use std::fmt;

/// A boxed error from a backend; backend error types never appear in public signatures.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors shared by every layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An embedding contained NaN or an infinity, or had zero norm.
    #[error("invalid embedding for {what}: {reason}")]
    InvalidVector {
        /// Which vector (e.g. "chunk 3").
        what: String,
        /// Why it was refused.
        reason: VectorFault,
    },
    /// A buffer did not have the length the dimension requires.
    #[error("dimension mismatch: expected {expected} values, got {got}")]
    Dimension {
        /// Expected number of values.
        expected: usize,
        /// Received number of values.
        got: usize,
    },
    /// A threshold outside (-1, 1].
    #[error("merge threshold {0} is outside (-1, 1]")]
    Threshold(f64),
    /// An encoder backend failed. The message includes the backend's, so
    /// it is not also given as `source()` (a report would print it twice).
    #[error("encoder `{model}` failed: {cause}")]
    Encoder {
        /// Model id.
        model: String,
        /// Backend error.
        cause: BoxError,
    },
    /// Any other backend failure (index, codec, store); the message
    /// includes the backend's, which is not also given as `source()`.
    #[error("{what}: {cause}")]
    Backend {
        /// Which component.
        what: &'static str,
        /// Backend error.
        cause: BoxError,
    },
}

/// Why an embedding was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorFault {
    /// A coordinate is NaN.
    NaN {
        /// Coordinate index.
        coord: usize,
    },
    /// A coordinate is +/- infinity.
    Infinite {
        /// Coordinate index.
        coord: usize,
    },
    /// The vector has zero (or subnormal) norm and no direction.
    Zero,
    /// The vector is not of unit norm (when one was required).
    NotUnit {
        /// Its norm, in f32 bits for `Eq`.
        norm_bits: u32,
    },
}

impl fmt::Display for VectorFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VectorFault::NaN { coord } => write!(f, "coordinate {coord} is NaN"),
            VectorFault::Infinite { coord } => write!(f, "coordinate {coord} is infinite"),
            VectorFault::Zero => write!(f, "zero vector has no direction"),
            VectorFault::NotUnit { norm_bits } => {
                write!(f, "norm {} is not 1", f32::from_bits(*norm_bits))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect: a report (anyhow's chain, `lam`'s `Error:` with `Caused by:`)
    /// printed a store error's cause twice, once in the message and once as
    /// its source.
    #[test]
    fn a_backend_cause_is_printed_once() {
        let e = Error::Backend { what: "arc-store", cause: "disk full".into() };
        assert_eq!(e.to_string(), "arc-store: disk full");
        assert!(std::error::Error::source(&e).is_none());
        let e = Error::Encoder { model: "m".into(), cause: "device lost".into() };
        assert!(e.to_string().ends_with("device lost") && std::error::Error::source(&e).is_none());
    }
}
