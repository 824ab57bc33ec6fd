//! The BERT encoder on an NVIDIA GPU (feature `cuda`): the tokenisation,
//! chunking, pooling rule and normalisation of [`crate::BertEncoder`]
//! (`bert::Front`, `normalize_in_place`), with the transformer run by cuBLAS
//! GEMMs and the NVRTC kernels of `kernels/bert.cu`.
//!
//! Everything is loaded at run time through cudarc (`dynamic-loading`), so
//! this builds with no CUDA toolkit; at run time it needs the NVIDIA driver
//! (`libcuda.so.1`), NVRTC and cuBLAS of CUDA 12 or 13 on the loader path.
//! cudarc (bindings for CUDA 12.8) looks for `libX.so`, `libX.so.12`, ...;
//! CUDA 13's libraries are found through their unversioned `libX.so` links (a
//! toolkit install has them; the GPU bundle's script makes them otherwise).
//! A missing library, driver or device is an [`Error`], never a panic.
//!
//! Batching by length: the texts of one call are sorted by token count
//! (longest first) and cut into batches of at most `max_batch_tokens` padded
//! tokens; a batch is padded to its longest sequence and attention masks the
//! padding (masked keys get probability exactly 0, padding rows stay finite),
//! so mathematically a text's embedding depends only on its own tokens. In
//! floating point cuBLAS may pick a different GEMM algorithm (blocking, split
//! K) for a different batch shape, so embeddings can move in the last bits
//! with the batch: the GPU tests bound that at max abs 1e-5 in fp32 (the CPU
//! encoder, which runs each sequence alone, is bit-stable instead).
//!
//! Precision: [`Precision::F32`] is fp32 end to end with TF32 off (cuBLAS
//! default math mode, compute type 32F). [`Precision::Bf16`] and
//! [`Precision::F16`] store the GEMM inputs (weights and activations) in 16
//! bits and accumulate in fp32; the residual stream, layer norms, softmax and
//! pooling stay fp32.
//!
//! NOT YET RUN ON A GPU: the kernels compile with NVRTC here and their index
//! and reduction logic is checked on the CPU (`tests/cuda_kernels_emulated.rs`);
//! the device path runs in the GPU bundle (`cargo xtask gpu-bundle`).

use crate::bert::{BertFamily, Forward, Front, Pooling};
use crate::cuda_forward::{Arg, Dev, Gemm, Kernel, Kind, Model};
use crate::forward::{self, Bert};
use cudarc::cublas::{CudaBlas, result as blas, sys as bsys};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, Ptx};
use lam_core::{Error, normalize_in_place};
use std::ffi::c_void;
use std::path::Path;
use std::sync::Arc;

/// The kernel source (`kernels/bert.cu`).
pub const BERT_KERNEL_SRC: &str = include_str!("../kernels/bert.cu");

/// Kernel entry points in [`BERT_KERNEL_SRC`].
pub const BERT_KERNELS: [&str; 8] = ["embed_ln", "residual_ln", "bias_gelu", "split_heads", "masked_softmax", "merge_heads", "pool", "convert"];

pub use crate::precision::Precision;

/// Storage kind of `p` in the kernels: 0 fp32, 1 bf16, 2 fp16.
fn kind(p: Precision) -> i32 {
    match p {
        Precision::F32 => 0,
        Precision::Bf16 => 1,
        Precision::F16 => 2,
    }
}

fn err(model: &str, e: impl std::fmt::Display) -> Error {
    Error::Encoder { model: model.to_string(), cause: format!("cuda: {e}").into() }
}

/// Which CUDA libraries cudarc can load here; `Err` names the missing ones.
/// Probing only dlopens; nothing is called.
pub fn cuda_libraries() -> Result<(), String> {
    // SAFETY: each probe only tries to dlopen candidate names.
    let found = unsafe {
        [
            ("libcuda (NVIDIA driver)", cudarc::driver::sys::is_culib_present()),
            ("libnvrtc (CUDA 12/13 NVRTC)", cudarc::nvrtc::sys::is_culib_present()),
            ("libcublas (CUDA 12/13 cuBLAS)", cudarc::cublas::sys::is_culib_present()),
        ]
    };
    let missing: Vec<&str> = found.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "not found: {} (looked for libX.so, libX.so.12, ... on the loader path; for CUDA 13 put a directory with unversioned libX.so links on LD_LIBRARY_PATH)",
            missing.join(", ")
        ))
    }
}

/// Run `f`, turning a panic inside cudarc (e.g. a symbol missing from a
/// library of another CUDA version) into an error.
fn guarded<T>(model: &str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Err(err(model, format!("the CUDA libraries failed: {msg}")))
        }
    }
}

/// The device: cudarc's stream, cuBLAS handle and kernels, implementing
/// the forward pass's [`Dev`]. Buffers are owned here; the forward pass sees
/// raw addresses.
struct CudaDev {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    kernels: Vec<CudaFunction>,
    uploads: Vec<CudaSlice<u8>>,
    scratch: Vec<CudaSlice<u8>>,
}

/// Everything that lives on the GPU.
struct Gpu {
    dev: CudaDev,
    model: Model,
    precision: Precision,
    device_name: String,
}

/// A BERT-family encoder whose transformer runs on an NVIDIA GPU.
pub type CudaEncoder = BertFamily<CudaForward>;

/// The forward pass on an NVIDIA GPU: padded batches within a token budget,
/// longest first.
pub struct CudaForward {
    gpu: Gpu,
    max_batch_tokens: usize,
}

impl std::fmt::Debug for CudaForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaForward")
            .field("precision", &self.gpu.precision)
            .field("device", &self.gpu.device_name)
            .field("max_batch_tokens", &self.max_batch_tokens)
            .finish_non_exhaustive()
    }
}

/// Padded tokens per forward pass unless [`CudaEncoder::set_max_batch_tokens`] says otherwise.
pub const DEFAULT_BATCH_TOKENS: usize = 32_768;

impl BertFamily<CudaForward> {
    /// Load a sentence-transformers directory onto CUDA device 0.
    pub fn load(dir: &Path, precision: Precision) -> Result<Self, Error> {
        Self::load_on(dir, precision, 0)
    }

    /// Load onto device `ordinal`. A missing driver, library or device, or a
    /// kernel that does not compile, is an [`Error::Encoder`] saying which.
    pub fn load_on(dir: &Path, precision: Precision, ordinal: usize) -> Result<Self, Error> {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("bert").to_string();
        let (mut front, config) = Front::load(dir, Path::new("model.safetensors")).map_err(|e| err(&name, e))?;
        cuda_libraries().map_err(|e| err(&name, e))?;
        let weights = dir.join("model.safetensors");
        let model = forward::load(&weights, &config).map_err(|e| err(&name, format!("{}: {e}", weights.display())))?;
        front.max_pos = front.max_pos.min(model.max_pos);
        // Same weights, another arithmetic: its own model id, so caches never mix the two.
        front.info.model_id = format!("{}@{:08x}+cuda-{}", front.info.model_id, model.fingerprint >> 32, precision.name());
        let id = front.info.model_id.clone();
        let gpu = guarded(&id, || Gpu::new(&model, precision, ordinal).map_err(|e| err(&id, e)))?;
        Ok(Self::new(front, CudaForward { gpu, max_batch_tokens: DEFAULT_BATCH_TOKENS }))
    }

    /// The device's name (e.g. "NVIDIA H200").
    pub fn device_name(&self) -> &str {
        &self.forward.gpu.device_name
    }

    /// The arithmetic this encoder was loaded with.
    pub fn precision(&self) -> Precision {
        self.forward.gpu.precision
    }

    /// Padded tokens per forward pass (at least one sequence always fits).
    pub fn set_max_batch_tokens(&mut self, n: usize) {
        self.forward.max_batch_tokens = n.max(1);
    }
}

impl Forward for CudaForward {
    fn embed(&mut self, front: &Front, ids: &[Vec<u32>], out: &mut [f32]) -> Result<(), Error> {
        let d = front.hidden;
        let max = front.max_seq_length.min(front.max_pos);
        if let Some(i) = ids.iter().position(|s| s.is_empty() || s.len() > max) {
            return Err(err(&front.info.model_id, format!("sequence {i} has {} tokens (1..={max} allowed)", ids[i].len())));
        }
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(ids[i].len()), i));
        let id = front.info.model_id.clone();
        for batch in plan_batches(&order, |i| ids[i].len(), self.max_batch_tokens) {
            let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
            let cls = front.pooling == Pooling::Cls;
            let pooled = guarded(&id, || self.gpu.forward(&seqs, cls).map_err(|e| err(&id, e)))?;
            for (&i, row) in batch.iter().zip(pooled.chunks_exact(d)) {
                let o = &mut out[i * d..(i + 1) * d];
                o.copy_from_slice(row);
                normalize_in_place(o).map_err(|reason| Error::InvalidVector { what: format!("sequence {i}"), reason })?;
            }
        }
        Ok(())
    }
}

/// Cut `order` (sorted longest first) into batches whose padded size
/// (count x longest) stays within `max_tokens`; a lone sequence always fits.
fn plan_batches(order: &[usize], len: impl Fn(usize) -> usize, max_tokens: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    for &i in order {
        let longest = cur.first().map_or(len(i), |&f| len(f));
        if !cur.is_empty() && (cur.len() + 1) * longest > max_tokens {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(i);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn ptr(s: &CudaSlice<u8>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

impl Dev for CudaDev {
    fn upload(&mut self, bytes: &[u8]) -> Result<u64, String> {
        let b = self.stream.clone_htod(bytes).map_err(|e| format!("upload of {} bytes: {e:?}", bytes.len()))?;
        let p = ptr(&b, &self.stream);
        self.uploads.push(b);
        Ok(p)
    }

    fn alloc(&mut self, n: usize) -> Result<u64, String> {
        let b = self.stream.alloc_zeros::<u8>(n).map_err(|e| format!("allocating {n} bytes: {e:?}"))?;
        let p = ptr(&b, &self.stream);
        self.scratch.push(b);
        Ok(p)
    }

    fn write(&mut self, dst: u64, bytes: &[u8]) -> Result<(), String> {
        // SAFETY: `dst` is the start of a scratch buffer at least this long (the forward pass sizes them).
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, bytes, self.stream.cu_stream()) }.map_err(|e| format!("{e:?}"))?;
        // The host bytes are a temporary: wait until they are copied.
        self.stream.synchronize().map_err(|e| format!("{e:?}"))
    }

    fn read(&mut self, src: u64, n: usize) -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; n];
        self.stream.synchronize().map_err(|e| format!("{e:?}"))?;
        // SAFETY: `src` addresses at least `n` bytes of a live buffer; the stream is idle.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut out, src, self.stream.cu_stream()) }.map_err(|e| format!("{e:?}"))?;
        self.stream.synchronize().map_err(|e| format!("{e:?}"))?;
        Ok(out)
    }

    fn free_scratch(&mut self) {
        self.scratch.clear();
    }

    fn gemm(&mut self, g: &Gemm, kind: Kind) -> Result<(), String> {
        let op = |t: bool| if t { bsys::cublasOperation_t::CUBLAS_OP_T } else { bsys::cublasOperation_t::CUBLAS_OP_N };
        let dt = match kind {
            0 => bsys::cudaDataType::CUDA_R_32F,
            1 => bsys::cudaDataType::CUDA_R_16BF,
            _ => bsys::cudaDataType::CUDA_R_16F,
        };
        let fp32 = bsys::cudaDataType::CUDA_R_32F;
        let ct = bsys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let algo = bsys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        let (alpha, beta) = (g.alpha, 0.0f32);
        let (al, be) = (&alpha as *const f32 as *const c_void, &beta as *const f32 as *const c_void);
        let h = *self.blas.handle();
        let i = |v: usize| v as i32;
        let (a, b, c) = (g.a.0 as *const c_void, g.b.0 as *const c_void, g.c.0 as *mut c_void);
        // SAFETY: the addresses are live device buffers sized by the forward pass for these shapes.
        let r = unsafe {
            if g.batch <= 1 {
                blas::gemm_ex(h, op(g.trans_a), op(false), i(g.m), i(g.n), i(g.k), al, a, dt, i(g.a.1), b, dt, i(g.b.1), be, c, fp32, i(g.c.1), ct, algo)
            } else {
                let st = |v: usize| v as i64;
                blas::gemm_strided_batched_ex(
                    h,
                    op(g.trans_a),
                    op(false),
                    i(g.m),
                    i(g.n),
                    i(g.k),
                    al,
                    a,
                    dt,
                    i(g.a.1),
                    st(g.a.2),
                    b,
                    dt,
                    i(g.b.1),
                    st(g.b.2),
                    be,
                    c,
                    fp32,
                    i(g.c.1),
                    st(g.c.2),
                    i(g.batch),
                    ct,
                    algo,
                )
            }
        };
        r.map_err(|e| format!("cuBLAS GEMM {}x{}x{} (batch {}): {e:?}", g.m, g.n, g.k, g.batch))
    }

    fn launch(&mut self, k: Kernel, grid: usize, block: u32, args: &[Arg]) -> Result<(), String> {
        let f = &self.kernels[Kernel::ALL.iter().position(|x| *x == k).expect("every kernel is loaded")];
        let grid = u32::try_from(grid.max(1)).map_err(|_| format!("{}: grid of {grid} blocks", k.name()))?;
        let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
        let mut lb = self.stream.launch_builder(f);
        for a in args {
            match a {
                Arg::Ptr(p) => lb.arg(p),
                Arg::I32(v) => lb.arg(v),
                Arg::F32(v) => lb.arg(v),
                Arg::Usize(v) => lb.arg(v),
            };
        }
        // SAFETY: the argument lists of the forward pass match kernels/bert.cu (the emulator test checks their order and types).
        unsafe { lb.launch(cfg) }.map(|_| ()).map_err(|e| format!("kernel {}: {e:?}", k.name()))
    }
}

impl Gpu {
    fn new(m: &Bert, precision: Precision, ordinal: usize) -> Result<Self, String> {
        let n = CudaContext::device_count().map_err(|e| format!("cuInit/cuDeviceGetCount: {e:?} (is the NVIDIA driver loaded?)"))?;
        if ordinal >= n.max(0) as usize {
            return Err(format!("no CUDA device {ordinal} ({n} found)"));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| format!("device {ordinal}: {e:?}"))?;
        let device_name = ctx.name().unwrap_or_else(|_| format!("CUDA device {ordinal}"));
        let (major, minor) = ctx.compute_capability().map_err(|e| format!("{e:?}"))?;
        let ptx = compile_kernels(Some(format!("compute_{major}{minor}")))?;
        let module = ctx.load_module(ptx).map_err(|e| format!("loading the kernels: {e:?}"))?;
        let kernels =
            Kernel::ALL.iter().map(|k| module.load_function(k.name()).map_err(|e| format!("kernel {}: {e:?}", k.name()))).collect::<Result<Vec<_>, _>>()?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("cuBLAS: {e:?}"))?;
        // Default math: no TF32 for fp32 GEMMs (tensor cores only for 16-bit inputs).
        // SAFETY: a valid handle from cublasCreate.
        unsafe { bsys::cublasSetMathMode(*blas.handle(), bsys::cublasMath_t::CUBLAS_DEFAULT_MATH) }
            .result()
            .map_err(|e| format!("cublasSetMathMode: {e:?}"))?;
        let mut dev = CudaDev { stream, blas, kernels, uploads: Vec::new(), scratch: Vec::new() };
        let model = Model::upload(&mut dev, m, kind(precision))?;
        Ok(Gpu { dev, model, precision, device_name })
    }

    fn forward(&mut self, seqs: &[&[u32]], cls: bool) -> Result<Vec<f32>, String> {
        self.model.forward(&mut self.dev, seqs, cls)
    }
}

/// Compile `kernels/bert.cu` with NVRTC for `arch` (e.g. `"compute_90"`), or
/// NVRTC's default where that arch is unknown to it. Needs only `libnvrtc`.
pub(crate) fn compile_kernels(arch: Option<String>) -> Result<Ptx, String> {
    let opts = |arch: Option<String>| CompileOptions {
        options: arch.map(|a| vec![format!("--gpu-architecture={a}")]).unwrap_or_default(),
        name: Some("bert.cu".into()),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(BERT_KERNEL_SRC, opts(arch.clone())) {
        Ok(p) => Ok(p),
        Err(_) if arch.is_some() => cudarc::nvrtc::compile_ptx_with_opts(BERT_KERNEL_SRC, opts(None)).map_err(|e| format!("NVRTC: {e:?}")),
        Err(e) => Err(format!("NVRTC: {e:?}")),
    }
}

/// PTX of the encoder kernels for `arch` (for `scripts/check-kernels.sh` and
/// `cargo xtask build-kernels`); needs only `libnvrtc`, no GPU. A missing
/// NVRTC is an error naming it.
pub fn nvrtc_compile_bert_ptx(arch: Option<&str>) -> Result<String, Error> {
    // SAFETY: probing for the library only dlopens it.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(err("bert.cu", "libnvrtc not found (install nvidia-cuda-nvrtc-cu12 and put its lib/ on LD_LIBRARY_PATH)"));
    }
    let opts = CompileOptions {
        options: arch.map(|a| vec![format!("--gpu-architecture={a}")]).unwrap_or_default(),
        name: Some("bert.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(BERT_KERNEL_SRC, opts).map(|p| p.to_src()).map_err(|e| err("bert.cu", format!("NVRTC: {e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stay_within_the_token_budget_and_keep_every_sequence() {
        let lens = [300usize, 256, 256, 100, 99, 3, 3, 1];
        let order: Vec<usize> = (0..lens.len()).collect();
        for max in [1, 256, 600, 1000, 100_000] {
            let b = plan_batches(&order, |i| lens[i], max);
            let flat: Vec<usize> = b.iter().flatten().copied().collect();
            assert_eq!(flat, order, "budget {max}");
            for g in &b {
                assert!(g.len() == 1 || g.len() * lens[g[0]] <= max, "budget {max}: {g:?}");
            }
        }
        assert_eq!(plan_batches(&order, |i| lens[i], 100_000).len(), 1);
    }

    #[test]
    fn precisions_parse_and_print() {
        for p in [Precision::F32, Precision::Bf16, Precision::F16] {
            assert_eq!(p.name().parse::<Precision>().unwrap(), p);
        }
        assert_eq!("fp16".parse::<Precision>().unwrap(), Precision::F16);
        assert!("tf32".parse::<Precision>().is_err());
    }
}
