//! GPU backends of the Szp codec. The types exist in every build; without
//! their feature they return [`Error::BackendNotCompiled`]. Both implement
//! [`lam_core::ByteCodec`] (mode and bound set with `with_codec`), so callers
//! loop over CPU and GPU codecs through the trait.
//!
//! Both backends compile [`SZP_KERNEL_SRC`] at run time (NVRTC / hiprtc), with
//! FMA contraction off, and compute the same integers as the CPU reference:
//! quantisation `rint((double)x * inv_step)`, widths, sign word and bit
//! planes. The host resolves the bound (same code as the CPU path), computes
//! the block offsets from the widths the device returns, and assembles the
//! same container, so the streams are byte-identical.

#[allow(unused_imports)]
use crate::{Bound, Error, Header, SzpMode};

/// The Szp kernel source, shared by CUDA and HIP.
pub const SZP_KERNEL_SRC: &str = include_str!("../../kernels/szp.cu");

/// Kernel entry points in [`SZP_KERNEL_SRC`].
pub const SZP_KERNELS: [&str; 3] = ["szp_widths", "szp_pack", "szp_unpack"];

/// Mode, bound and report name of a GPU codec used through [`lam_core::ByteCodec`].
#[derive(Debug, Clone)]
#[allow(dead_code)]
struct Params {
    mode: SzpMode,
    bound: Bound,
    name: String,
}

#[allow(dead_code)]
impl Params {
    fn new(backend: &str, mode: SzpMode, bound: Bound) -> Self {
        Params { mode, bound, name: format!("{backend}:{}", crate::Codec::Szp { mode, bound }) }
    }
}

/// `ByteCodec` for a GPU Szp type with inherent `params`, `encode` and `decode`.
macro_rules! gpu_byte_codec {
    ($t:ty) => {
        impl lam_core::ByteCodec for $t {
            /// `BACKEND:szp-MODE-BOUND`, e.g. `cuda:szp-fixed-rel1e-3`; the stream itself says `szp`.
            fn name(&self) -> &str {
                &self.params().name
            }

            fn encode(&self, values: &[f32], shape: lam_core::Shape, out: &mut Vec<u8>) -> Result<(), lam_core::Error> {
                let p = self.params();
                <$t>::encode(self, values, shape.rows, shape.dim, p.mode, p.bound, out)?;
                Ok(())
            }

            /// Decodes any Szp stream (any mode and bound); another codec's stream is [`Error::WrongCodec`].
            fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<lam_core::Shape, lam_core::Error> {
                let h = <$t>::decode(self, bytes, out)?;
                Ok(lam_core::Shape { rows: h.rows as usize, dim: h.dim as usize })
            }
        }
    };
}

gpu_byte_codec!(CudaSzp);
gpu_byte_codec!(RocmSzp);

#[cfg(feature = "cuszp")]
mod cuszp;
#[cfg(feature = "cuszp")]
pub use cuszp::{CUSZP_MAGIC, Cuszp, cuszp_library_path};

#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cuda")]
pub use cuda::CudaSzp;

#[cfg(feature = "rocm")]
mod rocm;
#[cfg(feature = "rocm")]
pub use rocm::{RocmSzp, hiprtc_compile};

#[cfg(feature = "cuda")]
pub use cuda::nvrtc_compile_ptx;

/// CUDA Szp codec (feature `cuda` off: every call is `BackendNotCompiled`).
#[cfg(not(feature = "cuda"))]
#[derive(Debug)]
pub struct CudaSzp(std::convert::Infallible);

#[cfg(not(feature = "cuda"))]
impl CudaSzp {
    /// Open device `ordinal`.
    pub fn new(_ordinal: usize) -> Result<Self, Error> {
        Err(Error::BackendNotCompiled("cuda", "cuda"))
    }
    /// The mode and bound [`lam_core::ByteCodec::encode`] uses.
    pub fn with_codec(self, _mode: SzpMode, _bound: Bound) -> Self {
        self
    }
    fn params(&self) -> &Params {
        match self.0 {}
    }
    /// Encode like [`crate::szp::encode`].
    pub fn encode(&self, _values: &[f32], _rows: usize, _dim: usize, _mode: SzpMode, _bound: Bound, _out: &mut Vec<u8>) -> Result<crate::Resolved, Error> {
        Err(Error::BackendNotCompiled("cuda", "cuda"))
    }
    /// Decode like [`crate::szp::decode`].
    pub fn decode(&self, _bytes: &[u8], _out: &mut Vec<f32>) -> Result<Header, Error> {
        Err(Error::BackendNotCompiled("cuda", "cuda"))
    }
}

/// ROCm Szp codec (feature `rocm` off: every call is `BackendNotCompiled`).
#[cfg(not(feature = "rocm"))]
#[derive(Debug)]
pub struct RocmSzp(std::convert::Infallible);

#[cfg(not(feature = "rocm"))]
impl RocmSzp {
    /// Open device `ordinal`.
    pub fn new(_ordinal: usize) -> Result<Self, Error> {
        Err(Error::BackendNotCompiled("rocm", "rocm"))
    }
    /// The mode and bound [`lam_core::ByteCodec::encode`] uses.
    pub fn with_codec(self, _mode: SzpMode, _bound: Bound) -> Self {
        self
    }
    fn params(&self) -> &Params {
        match self.0 {}
    }
    /// Encode like [`crate::szp::encode`].
    pub fn encode(&self, _values: &[f32], _rows: usize, _dim: usize, _mode: SzpMode, _bound: Bound, _out: &mut Vec<u8>) -> Result<crate::Resolved, Error> {
        Err(Error::BackendNotCompiled("rocm", "rocm"))
    }
    /// Decode like [`crate::szp::decode`].
    pub fn decode(&self, _bytes: &[u8], _out: &mut Vec<f32>) -> Result<Header, Error> {
        Err(Error::BackendNotCompiled("rocm", "rocm"))
    }
}
