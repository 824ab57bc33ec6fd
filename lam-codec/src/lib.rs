//! Byte codecs for retained embeddings (LAM's L2 layer): [`Codec::F16`],
//! [`Codec::Int8PerVector`], [`Codec::SignBinary`] and the error-bounded
//! [`Codec::Szp`] (after cuSZp, Huang et al., SC'23), behind
//! [`lam_core::ByteCodec`].
//!
//! Every codec writes the same self-describing container
//! (`docs/codec-format.md`): magic, version, codec, mode, bound, shape, body,
//! and checksums. Decoding checks all of it first; a damaged stream or one
//! from a newer version is an [`Error`], never garbage, and the decoder
//! neither panics nor sizes anything from the header beyond what the stream's
//! own length can hold.
//!
//! The CPU implementation is the reference. With the `cuda` (NVRTC via
//! cudarc) or `rocm` (hiprtc via libloading) feature, [`gpu::CudaSzp`] and
//! [`gpu::RocmSzp`] run the same Szp codec as a kernel (`kernels/szp.cu`) and
//! produce byte-identical streams; without the feature those types still
//! exist and return [`Error::BackendNotCompiled`]. [`open`] is the one way
//! callers get a codec by name, on any backend, as a `Box<dyn ByteCodec>`.
//!
//! ```
//! use lam_core::{ByteCodec, Shape};
//!
//! let codec = lam_codec::parse_codec("szp-fixed-rel1e-2")?;
//! let v: Vec<f32> = (0..384 * 3).map(|i| ((i as f32) * 0.1).sin() / 14.0).collect();
//! let mut stream = Vec::new();
//! codec.encode(&v, Shape { rows: 3, dim: 384 }, &mut stream)?;
//! let mut back = Vec::new();
//! assert_eq!(codec.decode(&stream, &mut back)?, Shape { rows: 3, dim: 384 });
//! let range = v.iter().cloned().fold(f32::MIN, f32::max) - v.iter().cloned().fold(f32::MAX, f32::min);
//! assert!(v.iter().zip(&back).all(|(a, b)| (a - b).abs() <= 1e-2 * range));
//! assert!(stream.len() < v.len() * 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod error;
pub mod format;
pub mod gpu;
mod name;
mod open;
mod simple;
pub mod szp;

pub use error::Error;
pub use format::{CodecId, Header, SzpMode};
pub use name::{DEFAULT_SZP_BOUND, parse_codec};
pub use open::{BoxCodec, CodecSpec, open};
pub use simple::{decode_binary, decode_f16, decode_int8, encode_binary, encode_f16, encode_int8};
pub use szp::{Bound, Resolved, SzpReader};

use lam_core::{ByteCodec, Shape};

pub(crate) fn check_shape(values: &[f32], rows: usize, dim: usize) -> Result<(), Error> {
    match rows.checked_mul(dim) {
        Some(n) if n == values.len() => Ok(()),
        n => Err(Error::Shape { rows, dim, expected: n.unwrap_or(usize::MAX), got: values.len() }),
    }
}

/// A codec and its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Codec {
    /// IEEE half precision.
    F16,
    /// One f32 scale per vector, one i8 per coordinate.
    Int8PerVector,
    /// One f32 norm per vector, one sign bit per coordinate.
    SignBinary,
    /// Error-bounded block codec.
    Szp {
        /// Fixed or plain (Lorenzo).
        mode: SzpMode,
        /// Absolute or relative bound.
        bound: Bound,
    },
}

impl Codec {
    /// The stream codec id.
    pub fn id(&self) -> CodecId {
        match self {
            Codec::F16 => CodecId::F16,
            Codec::Int8PerVector => CodecId::Int8PerVector,
            Codec::SignBinary => CodecId::SignBinary,
            Codec::Szp { .. } => CodecId::Szp,
        }
    }

    /// Encode `values` (`rows * dim`, row-major), appending one stream to `out`.
    /// For Szp returns the resolved bound.
    pub fn encode_to(&self, values: &[f32], rows: usize, dim: usize, out: &mut Vec<u8>) -> Result<Option<Resolved>, Error> {
        match *self {
            Codec::F16 => encode_f16(values, rows, dim, out).map(|_| None),
            Codec::Int8PerVector => encode_int8(values, rows, dim, out).map(|_| None),
            Codec::SignBinary => encode_binary(values, rows, dim, out).map(|_| None),
            Codec::Szp { mode, bound } => szp::encode(values, rows, dim, mode, bound, out).map(Some),
        }
    }
}

/// Decode any lam-codec stream, appending its values to `out`; returns the
/// checked header (codec, mode, bound, shape).
pub fn decode(bytes: &[u8], out: &mut Vec<f32>) -> Result<Header, Error> {
    match Header::parse(bytes)?.codec {
        CodecId::F16 => decode_f16(bytes, out),
        CodecId::Int8PerVector => decode_int8(bytes, out),
        CodecId::SignBinary => decode_binary(bytes, out),
        CodecId::Szp => szp::decode(bytes, out),
    }
}

fn shape_of(h: &Header) -> Shape {
    Shape { rows: h.rows as usize, dim: h.dim as usize }
}

impl ByteCodec for Codec {
    fn name(&self) -> &str {
        self.id().name()
    }

    fn encode(&self, values: &[f32], shape: Shape, out: &mut Vec<u8>) -> Result<(), lam_core::Error> {
        self.encode_to(values, shape.rows, shape.dim, out)?;
        Ok(())
    }

    /// Decodes a stream of this codec (any mode and bound for Szp); a stream
    /// of another codec is [`Error::WrongCodec`].
    fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<Shape, lam_core::Error> {
        let h = Header::parse(bytes).map_err(lam_core::Error::from)?;
        if h.codec != self.id() {
            return Err(Error::WrongCodec { expected: self.id().name(), found: h.codec.name() }.into());
        }
        Ok(shape_of(&decode(bytes, out)?))
    }
}
