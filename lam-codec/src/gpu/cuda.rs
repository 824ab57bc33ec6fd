//! CUDA backend: NVRTC compiles [`super::SZP_KERNEL_SRC`] at run time; the
//! driver and NVRTC libraries are loaded dynamically by cudarc.
//!
//! NOT YET RUN ON A GPU: written against cudarc 0.19's API and compiled
//! here (kernel to PTX with NVRTC in CI), but no device was available.

use super::SZP_KERNEL_SRC;
use crate::szp::{self, Bound, Layout, Resolved, SzpReader, block_offsets};
use crate::{Error, Header, SzpMode};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, Ptx};
use std::sync::Arc;

const THREADS: u32 = 256;

fn gpu(e: impl std::fmt::Debug) -> Error {
    Error::Gpu { backend: "cuda", msg: format!("{e:?}") }
}

/// Compile the Szp kernels to PTX with NVRTC (FMA contraction off), for
/// `arch` (e.g. `"compute_90"`) or NVRTC's default. Needs only `libnvrtc`
/// (found through the loader path, e.g. `LD_LIBRARY_PATH`), no GPU.
pub fn nvrtc_compile_ptx(arch: Option<&'static str>) -> Result<String, Error> {
    // SAFETY: probing for the library only dlopens it.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::DeviceUnavailable {
            backend: "cuda",
            why: "libnvrtc not found (install nvidia-cuda-nvrtc-cu12 and put its lib/ on LD_LIBRARY_PATH)".into(),
        });
    }
    let opts = CompileOptions {
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        arch,
        name: Some("szp.cu".into()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(SZP_KERNEL_SRC, opts).map_err(|e| Error::Gpu { backend: "cuda", msg: format!("NVRTC: {e:?}") })?;
    Ok(ptx.to_src())
}

/// The Szp codec on one CUDA device; streams are byte-identical to the CPU's.
/// As a [`lam_core::ByteCodec`] it encodes with the mode and bound of
/// [`CudaSzp::with_codec`] (default: fixed, [`crate::DEFAULT_SZP_BOUND`]).
#[derive(Debug)]
pub struct CudaSzp {
    stream: Arc<CudaStream>,
    widths: CudaFunction,
    pack: CudaFunction,
    unpack: CudaFunction,
    params: super::Params,
}

fn grid(nblocks: usize) -> Result<LaunchConfig, Error> {
    let g = u32::try_from(nblocks.div_ceil(THREADS as usize)).map_err(|_| Error::Gpu { backend: "cuda", msg: "batch too large for one launch".into() })?;
    Ok(LaunchConfig { grid_dim: (g.max(1), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 })
}

impl CudaSzp {
    /// Open device `ordinal` and compile the kernels. Errors (never panics)
    /// when the driver library or the device is missing.
    pub fn new(ordinal: usize) -> Result<Self, Error> {
        // SAFETY: probing for the library only dlopens it.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::DeviceUnavailable { backend: "cuda", why: "libcuda not found (no NVIDIA driver)".into() });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::DeviceUnavailable { backend: "cuda", why: format!("{e:?}") })?;
        let ptx = nvrtc_compile_ptx(None)?;
        let module = ctx.load_module(Ptx::from_src(ptx)).map_err(gpu)?;
        Ok(CudaSzp {
            stream: ctx.default_stream(),
            widths: module.load_function("szp_widths").map_err(gpu)?,
            pack: module.load_function("szp_pack").map_err(gpu)?,
            unpack: module.load_function("szp_unpack").map_err(gpu)?,
            params: super::Params::new("cuda", SzpMode::Fixed, crate::DEFAULT_SZP_BOUND),
        })
    }

    /// The mode and bound [`lam_core::ByteCodec::encode`] uses.
    pub fn with_codec(mut self, mode: SzpMode, bound: Bound) -> Self {
        self.params = super::Params::new("cuda", mode, bound);
        self
    }

    pub(super) fn params(&self) -> &super::Params {
        &self.params
    }

    /// Encode like [`crate::szp::encode`], quantising and packing on the device.
    pub fn encode(&self, values: &[f32], rows: usize, dim: usize, mode: SzpMode, bound: Bound, out: &mut Vec<u8>) -> Result<Resolved, Error> {
        crate::check_shape(values, rows, dim)?;
        let r = szp::resolve_bound(values, bound)?;
        let n = values.len();
        let layout = Layout::new(n).ok_or_else(|| Error::corrupt("value count overflows"))?;
        if n == 0 {
            szp::assemble(out, rows, dim, mode, &r, &[], &[]);
            return Ok(r);
        }
        let s = &self.stream;
        let (n64, nb64, inv, plain) = (n as u64, layout.nblocks as u64, r.inv_step, (mode == SzpMode::Plain) as i32);
        let cfg = grid(layout.nblocks)?;
        let d_x = s.clone_htod(values).map_err(gpu)?;
        let mut d_w = s.alloc_zeros::<u8>(layout.nblocks).map_err(gpu)?;
        let mut b = s.launch_builder(&self.widths);
        b.arg(&d_x).arg(&n64).arg(&inv).arg(&plain).arg(&mut d_w).arg(&nb64);
        // SAFETY: argument types and order match `szp_widths` in kernels/szp.cu; buffers hold n floats and nblocks bytes.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        let widths = s.clone_dtoh(&d_w).map_err(gpu)?;
        // A device-to-pageable copy need not block the host: wait for it.
        s.synchronize().map_err(gpu)?;
        let (offsets, total) = block_offsets(&widths);
        let d_off = s.clone_htod(&offsets).map_err(gpu)?;
        let mut d_p = s.alloc_zeros::<u8>((total as usize).max(4)).map_err(gpu)?;
        let mut b = s.launch_builder(&self.pack);
        b.arg(&d_x).arg(&n64).arg(&inv).arg(&plain).arg(&d_w).arg(&d_off).arg(&mut d_p).arg(&nb64);
        // SAFETY: as above; offsets + block bytes stay within `total`.
        unsafe { b.launch(cfg) }.map_err(gpu)?;
        let mut payload = s.clone_dtoh(&d_p).map_err(gpu)?;
        s.synchronize().map_err(gpu)?;
        payload.truncate(total as usize);
        szp::assemble(out, rows, dim, mode, &r, &widths, &[&payload]);
        Ok(r)
    }

    /// Decode like [`crate::szp::decode`] (the stream is checked on the host first).
    pub fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<Header, Error> {
        let rd = SzpReader::new(bytes)?;
        let h = *rd.header();
        let (widths, offsets, payload, n) = rd.table();
        if n == 0 {
            return Ok(h);
        }
        let s = &self.stream;
        let (n64, nb64, step, plain) = (n as u64, widths.len() as u64, h.step, (h.mode == SzpMode::Plain) as i32);
        let mut padded = payload.to_vec();
        padded.resize(payload.len().max(4), 0);
        let d_p = s.clone_htod(&padded).map_err(gpu)?;
        let d_w = s.clone_htod(&widths).map_err(gpu)?;
        let d_off = s.clone_htod(&offsets).map_err(gpu)?;
        let mut d_out = s.alloc_zeros::<f32>(n).map_err(gpu)?;
        let mut b = s.launch_builder(&self.unpack);
        b.arg(&d_p).arg(&d_w).arg(&d_off).arg(&n64).arg(&step).arg(&plain).arg(&mut d_out).arg(&nb64);
        // SAFETY: argument types and order match `szp_unpack`; the host checked every offset and width.
        unsafe { b.launch(grid(widths.len())?) }.map_err(gpu)?;
        let values = s.clone_dtoh(&d_out).map_err(gpu)?;
        s.synchronize().map_err(gpu)?;
        out.extend(values);
        Ok(h)
    }
}
