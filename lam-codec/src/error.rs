//! The crate's one error type.

use std::fmt;

/// Why encoding or decoding failed. Decoding arbitrary bytes returns one of
/// these, never a panic and never garbage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The stream does not start with the `LAMC` magic.
    #[error("not a lam-codec stream (bad magic)")]
    BadMagic,
    /// The stream was written by a newer format version than this decoder knows.
    #[error("stream format version {found} is newer than this decoder's {supported}")]
    UnsupportedVersion {
        /// Version in the stream.
        found: u16,
        /// Highest version this build decodes.
        supported: u16,
    },
    /// A checksum did not match: the stream is damaged.
    #[error("{what} checksum mismatch: the stream is damaged")]
    Checksum {
        /// "header" or "stream".
        what: &'static str,
    },
    /// The stream is structurally invalid (truncated, inconsistent lengths,
    /// unknown codec id, ...).
    #[error("corrupt stream: {0}")]
    Corrupt(String),
    /// A value to encode is NaN or infinite.
    #[error("value {index} is not finite ({value})")]
    NonFinite {
        /// Flat index of the value.
        index: usize,
        /// The value.
        value: f32,
    },
    /// The error bound is not a positive finite number, or relative bound out of range.
    #[error("invalid error bound: {0}")]
    InvalidBound(String),
    /// The bound cannot be met within the format's 30-bit quantisation range
    /// or in f32 arithmetic (bound too small for the data's magnitude).
    #[error("error bound {bound:e} is too small for values up to {max_abs:e}: {why}")]
    BoundTooSmall {
        /// The absolute bound asked for.
        bound: f64,
        /// Largest |value| in the batch.
        max_abs: f64,
        /// What limit was hit.
        why: &'static str,
    },
    /// A value cannot be represented by the codec (e.g. |x| > 65504 for F16).
    #[error("value {index} ({value}) is out of range for codec {codec}")]
    OutOfRange {
        /// Codec name.
        codec: &'static str,
        /// Flat index.
        index: usize,
        /// The value.
        value: f32,
    },
    /// `values.len()` disagrees with the shape.
    #[error("shape {rows}x{dim} needs {expected} values, got {got}")]
    Shape {
        /// Rows.
        rows: usize,
        /// Dimension.
        dim: usize,
        /// rows * dim (saturated).
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// The stream holds a different codec than the one asked to decode it.
    #[error("stream holds codec {found}, not {expected}")]
    WrongCodec {
        /// Codec of this decoder.
        expected: &'static str,
        /// Codec in the stream.
        found: &'static str,
    },
    /// A codec name that [`crate::parse_codec`] does not know.
    #[error("unknown codec `{name}`: expected {expected}")]
    UnknownCodec {
        /// The name given.
        name: String,
        /// The grammar of known names.
        expected: &'static str,
    },
    /// The GPU backend was not compiled into this build (feature off).
    #[error("the {0} backend is not compiled in (enable the lam-codec `{1}` feature)")]
    BackendNotCompiled(&'static str, &'static str),
    /// The GPU backend is compiled in but no usable device or runtime library exists.
    #[error("{backend} unavailable: {why}")]
    DeviceUnavailable {
        /// "cuda" or "rocm".
        backend: &'static str,
        /// What is missing.
        why: String,
    },
    /// cuSZp's library (feature `cuszp`) could not be loaded.
    #[error("cuSZp unavailable: {0}")]
    CuszpUnavailable(String),
    /// A GPU runtime call failed.
    #[error("{backend} error: {msg}")]
    Gpu {
        /// "cuda" or "rocm".
        backend: &'static str,
        /// Runtime message (with compiler log where there is one).
        msg: String,
    },
}

impl Error {
    pub(crate) fn corrupt(msg: impl fmt::Display) -> Self {
        Error::Corrupt(msg.to_string())
    }
}

impl From<Error> for lam_core::Error {
    fn from(e: Error) -> Self {
        lam_core::Error::Backend { what: "lam-codec", cause: Box::new(e) }
    }
}
