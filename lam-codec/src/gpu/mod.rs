//! GPU backends of the Szp codec. The types exist in every build; without
//! their feature they return [`Error::BackendNotCompiled`].
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
pub struct CudaSzp(());

#[cfg(not(feature = "cuda"))]
impl CudaSzp {
    /// Open device `ordinal`.
    pub fn new(_ordinal: usize) -> Result<Self, Error> {
        Err(Error::BackendNotCompiled("cuda", "cuda"))
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
pub struct RocmSzp(());

#[cfg(not(feature = "rocm"))]
impl RocmSzp {
    /// Open device `ordinal`.
    pub fn new(_ordinal: usize) -> Result<Self, Error> {
        Err(Error::BackendNotCompiled("rocm", "rocm"))
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
