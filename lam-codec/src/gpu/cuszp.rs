//! cuSZp itself (szcompressor/cuSZp 3.x, BSD-3-style licence), loaded at run
//! time from a library the user builds (`CUSZP_DIR`), so lam's Szp codec is
//! measured against its model in one process. Nothing of cuSZp is compiled
//! into lam: its C entry points `cuSZp_compress` / `cuSZp_decompress`
//! (`include/cuSZp.h`) are looked up with libloading, and device memory comes
//! from cudarc's context (the device's primary context, which the CUDA
//! runtime inside cuSZp shares).
//!
//! cuSZp's bytes are not self-describing, so they travel in a small container
//! of their own (not the `LAMC` format): magic `LCSZ`, version, mode, shape,
//! the absolute bound handed to cuSZp, the byte count, the bytes, and an
//! XXH3-64 of everything before it. Decoding checks all of it before any byte
//! reaches cuSZp.
//!
//! NOT YET RUN ON A GPU: compiled here against the header's signatures; the
//! GPU bundle (`cargo xtask gpu-bundle`) builds cuSZp with CMake and runs it.

use crate::{Bound, Error, SzpMode};
use cudarc::driver::{CudaContext, CudaStream, DevicePtrMut};
use libloading::Library;
use std::ffi::{c_int, c_void};
use std::path::PathBuf;
use std::sync::Arc;

/// First bytes of a cuSZp container.
pub const CUSZP_MAGIC: [u8; 4] = *b"LCSZ";
const VERSION: u16 = 1;
const HEADER: usize = 4 + 2 + 1 + 1 + 8 + 8 + 4 + 8;
const TRAILER: usize = 8;

/// `uint3` of `cuda_runtime.h`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
struct Uint3 {
    x: u32,
    y: u32,
    z: u32,
}

// cuszp_dim_t, cuszp_type_t and cuszp_mode_t are C enums (int-sized).
const DIM_1D: c_int = 1;
const TYPE_FLOAT: c_int = 0;
type CompressFn = unsafe extern "C" fn(*mut c_void, *mut u8, usize, *mut usize, f32, c_int, Uint3, c_int, c_int, *mut c_void);
type DecompressFn = unsafe extern "C" fn(*mut c_void, *mut u8, usize, usize, f32, c_int, Uint3, c_int, c_int, *mut c_void);

fn unavailable(msg: impl Into<String>) -> Error {
    Error::CuszpUnavailable(msg.into())
}

fn gpu(e: impl std::fmt::Debug) -> Error {
    Error::Gpu { backend: "cuszp", msg: format!("{e:?}") }
}

/// Where [`Cuszp::new`] looks for `libcuSZp.so`, in order: `$CUSZP_LIB`
/// (the file), then `lib/`, `lib64/`, `build/` and the top of `$CUSZP_DIR`,
/// then the bare name (the loader's path, e.g. `LD_LIBRARY_PATH`).
pub fn cuszp_library_path() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(f) = std::env::var_os("CUSZP_LIB") {
        v.push(PathBuf::from(f));
    }
    if let Some(d) = std::env::var_os("CUSZP_DIR") {
        let d = PathBuf::from(d);
        for sub in ["lib", "lib64", "build", "."] {
            v.push(d.join(sub).join("libcuSZp.so"));
        }
    }
    v.push(PathBuf::from("libcuSZp.so"));
    v
}

/// cuSZp as a [`lam_core::ByteCodec`] named `cuszp-fixed` / `cuszp-plain`
/// (1-D, f32), with the mode and bound of [`Cuszp::with_codec`].
#[derive(Debug)]
pub struct Cuszp {
    _lib: Library,
    compress: CompressFn,
    decompress: DecompressFn,
    stream: Arc<CudaStream>,
    mode: SzpMode,
    bound: Bound,
    name: String,
}

fn mode_code(m: SzpMode) -> c_int {
    match m {
        SzpMode::Fixed => 0,
        SzpMode::Plain => 1,
    }
}

fn name_of(mode: SzpMode, bound: Bound) -> String {
    let (kind, v) = match bound {
        Bound::Rel(v) => ("rel", v),
        Bound::Abs(v) => ("abs", v),
    };
    format!("cuszp-{}-{kind}{v:e}", mode.name())
}

impl Cuszp {
    /// Load cuSZp (see [`cuszp_library_path`]) and open CUDA device `ordinal`.
    /// A missing library is [`Error::CuszpUnavailable`] naming every place
    /// tried; a missing driver or device is [`Error::DeviceUnavailable`].
    pub fn new(ordinal: usize) -> Result<Self, Error> {
        let tried = cuszp_library_path();
        let mut errs = Vec::new();
        // SAFETY: loading cuSZp runs its (CUDA runtime) initialisers, which is what loading it is for.
        let lib = tried.iter().find_map(|p| match unsafe { Library::new(p) } {
            Ok(l) => Some(l),
            Err(e) => {
                errs.push(format!("{}: {e}", p.display()));
                None
            }
        });
        let lib = lib.ok_or_else(|| {
            unavailable(format!(
                "libcuSZp.so not found (build cuSZp with CMake and set CUSZP_DIR to its install or build directory); tried {}",
                errs.join("; ")
            ))
        })?;
        // SAFETY: the types are the C signatures of include/cuSZp.h (enums are int-sized, uint3 by value).
        let (compress, decompress) = unsafe {
            let c: libloading::Symbol<'_, CompressFn> = lib.get(b"cuSZp_compress\0").map_err(|e| unavailable(format!("cuSZp_compress: {e}")))?;
            let d: libloading::Symbol<'_, DecompressFn> = lib.get(b"cuSZp_decompress\0").map_err(|e| unavailable(format!("cuSZp_decompress: {e}")))?;
            (*c, *d)
        };
        // SAFETY: probing for the library only dlopens it.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::DeviceUnavailable { backend: "cuszp", why: "libcuda not found (no NVIDIA driver)".into() });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::DeviceUnavailable { backend: "cuszp", why: format!("{e:?}") })?;
        let (mode, bound) = (SzpMode::Fixed, crate::DEFAULT_SZP_BOUND);
        Ok(Cuszp { _lib: lib, compress, decompress, stream: ctx.default_stream(), mode, bound, name: name_of(mode, bound) })
    }

    /// The mode and bound [`lam_core::ByteCodec::encode`] uses (cuSZp's
    /// relative bound: `rel * (max - min)` over the batch).
    pub fn with_codec(mut self, mode: SzpMode, bound: Bound) -> Self {
        (self.mode, self.bound, self.name) = (mode, bound, name_of(mode, bound));
        self
    }

    /// The absolute bound cuSZp is given for `values` (f32, as its API takes it).
    fn error_bound(&self, values: &[f32]) -> Result<f32, Error> {
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for (index, &v) in values.iter().enumerate() {
            if !v.is_finite() {
                return Err(Error::NonFinite { index, value: v });
            }
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let eb = match self.bound {
            Bound::Abs(a) => a,
            Bound::Rel(r) => r * (hi as f64 - lo as f64),
        };
        let eb32 = eb as f32;
        if !(eb32.is_finite() && eb32 > 0.0) {
            return Err(Error::InvalidBound(format!("cuSZp needs a positive finite f32 bound, got {eb:e} (a relative bound over a constant batch is 0)")));
        }
        Ok(eb32)
    }

    /// Compress with cuSZp (host to host: upload, compress on the device,
    /// download), appending one container to `out`.
    pub fn encode(&self, values: &[f32], rows: usize, dim: usize, out: &mut Vec<u8>) -> Result<(), Error> {
        crate::check_shape(values, rows, dim)?;
        let n = values.len();
        let start = out.len();
        if n == 0 {
            write_header(out, self.mode, rows, dim, 0.0, 0);
            seal(out, start);
            return Ok(());
        }
        let eb = self.error_bound(values)?;
        let bytes = self.compress_bytes(values, eb)?;
        write_header(out, self.mode, rows, dim, eb, bytes.len());
        out.extend_from_slice(&bytes);
        seal(out, start);
        Ok(())
    }

    fn compress_bytes(&self, values: &[f32], eb: f32) -> Result<Vec<u8>, Error> {
        let s = &self.stream;
        s.context().bind_to_thread().map_err(gpu)?;
        let n = values.len();
        // Worst case a little over the input (sign word and 32 planes per 32 values, one rate byte per block).
        let cap = n * 5 + (1 << 20);
        let mut d_x = s.clone_htod(values).map_err(gpu)?;
        let mut d_c = s.alloc_zeros::<u8>(cap).map_err(gpu)?;
        let mut size = 0usize;
        {
            let (px, _gx) = d_x.device_ptr_mut(s);
            let (pc, _gc) = d_c.device_ptr_mut(s);
            // cuSZp works on the legacy default stream (null), as cudarc's default stream does.
            s.synchronize().map_err(gpu)?;
            // SAFETY: px holds n floats, pc holds cap bytes (more than cuSZp writes for n floats); the C signature matches.
            unsafe {
                (self.compress)(
                    px as *mut c_void,
                    pc as *mut u8,
                    n,
                    &mut size,
                    eb,
                    DIM_1D,
                    Uint3 { x: 0, y: 0, z: 0 },
                    TYPE_FLOAT,
                    mode_code(self.mode),
                    std::ptr::null_mut(),
                )
            };
        }
        if size == 0 || size > cap {
            return Err(gpu(format!("cuSZp reported {size} compressed bytes for {n} values (buffer {cap})")));
        }
        let mut bytes = vec![0u8; size];
        s.memcpy_dtoh(&d_c.slice(..size), &mut bytes).map_err(gpu)?;
        s.synchronize().map_err(gpu)?;
        Ok(bytes)
    }

    /// Decompress a container written by [`Cuszp::encode`], appending the
    /// values to `out`; returns `(rows, dim)`.
    pub fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<(usize, usize), Error> {
        let c = Container::parse(bytes)?;
        let n = c.rows * c.dim;
        if n == 0 {
            return Ok((c.rows, c.dim));
        }
        let s = &self.stream;
        s.context().bind_to_thread().map_err(gpu)?;
        let mut d_c = s.clone_htod(c.payload).map_err(gpu)?;
        let mut d_out = s.alloc_zeros::<f32>(n).map_err(gpu)?;
        {
            let (po, _go) = d_out.device_ptr_mut(s);
            let (pc, _gc) = d_c.device_ptr_mut(s);
            s.synchronize().map_err(gpu)?;
            // SAFETY: the container was checksummed and sized (payload backs n); po holds n floats.
            unsafe {
                (self.decompress)(
                    po as *mut c_void,
                    pc as *mut u8,
                    n,
                    c.payload.len(),
                    c.eb,
                    DIM_1D,
                    Uint3 { x: 0, y: 0, z: 0 },
                    TYPE_FLOAT,
                    c.mode,
                    std::ptr::null_mut(),
                )
            };
        }
        let values = s.clone_dtoh(&d_out).map_err(gpu)?;
        s.synchronize().map_err(gpu)?;
        out.extend(values);
        Ok((c.rows, c.dim))
    }

    /// cuSZp as its own benchmark times it: data already on the device,
    /// compress and decompress timed alone (best of `reps`, wall clock around
    /// each call with the device synchronised). Returns `(compress seconds,
    /// decompress seconds, compressed bytes)`; cuSZp's mode and bound are this codec's.
    pub fn time_device_resident(&self, values: &[f32], reps: usize) -> Result<(f64, f64, usize), Error> {
        let eb = self.error_bound(values)?;
        let n = values.len();
        let s = &self.stream;
        s.context().bind_to_thread().map_err(gpu)?;
        let mut d_x = s.clone_htod(values).map_err(gpu)?;
        let mut d_c = s.alloc_zeros::<u8>(n * 5 + (1 << 20)).map_err(gpu)?;
        let mut d_out = s.alloc_zeros::<f32>(n).map_err(gpu)?;
        let (px, _gx) = d_x.device_ptr_mut(s);
        let (pc, _gc) = d_c.device_ptr_mut(s);
        let (po, _go) = d_out.device_ptr_mut(s);
        let dims = Uint3 { x: 0, y: 0, z: 0 };
        let mut size = 0usize;
        let (mut best_c, mut best_d) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..reps.max(1) + 3 {
            s.synchronize().map_err(gpu)?;
            let t = std::time::Instant::now();
            // SAFETY: as in `encode`/`decode`; buffers are sized for n values.
            unsafe {
                (self.compress)(px as *mut c_void, pc as *mut u8, n, &mut size, eb, DIM_1D, dims, TYPE_FLOAT, mode_code(self.mode), std::ptr::null_mut())
            };
            s.synchronize().map_err(gpu)?;
            best_c = best_c.min(t.elapsed().as_secs_f64());
            let t = std::time::Instant::now();
            // SAFETY: as above.
            unsafe { (self.decompress)(po as *mut c_void, pc as *mut u8, n, size, eb, DIM_1D, dims, TYPE_FLOAT, mode_code(self.mode), std::ptr::null_mut()) };
            s.synchronize().map_err(gpu)?;
            best_d = best_d.min(t.elapsed().as_secs_f64());
        }
        Ok((best_c, best_d, size))
    }
}

fn write_header(out: &mut Vec<u8>, mode: SzpMode, rows: usize, dim: usize, eb: f32, len: usize) {
    out.extend_from_slice(&CUSZP_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(mode_code(mode) as u8);
    out.push(0);
    out.extend_from_slice(&(rows as u64).to_le_bytes());
    out.extend_from_slice(&(dim as u64).to_le_bytes());
    out.extend_from_slice(&eb.to_le_bytes());
    out.extend_from_slice(&(len as u64).to_le_bytes());
}

fn seal(out: &mut Vec<u8>, start: usize) {
    let h = xxhash_rust::xxh3::xxh3_64(&out[start..]);
    out.extend_from_slice(&h.to_le_bytes());
}

/// A checked cuSZp container.
#[derive(Debug)]
struct Container<'a> {
    mode: c_int,
    rows: usize,
    dim: usize,
    eb: f32,
    payload: &'a [u8],
}

impl<'a> Container<'a> {
    fn parse(b: &'a [u8]) -> Result<Self, Error> {
        if b.len() < 4 || b[..4] != CUSZP_MAGIC {
            return Err(Error::corrupt("not a cuSZp container (bad magic)"));
        }
        if b.len() < HEADER + TRAILER {
            return Err(Error::corrupt(format!("cuSZp container of {} bytes is shorter than its header", b.len())));
        }
        let (body, tail) = b.split_at(b.len() - TRAILER);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if xxhash_rust::xxh3::xxh3_64(body) != u64::from_le_bytes(tail.try_into().expect("8 bytes")) {
            return Err(Error::Checksum { what: "cuSZp container" });
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(Error::UnsupportedVersion { found: version, supported: VERSION });
        }
        let mode = match b[6] {
            m @ (0 | 1) => m as c_int,
            m => return Err(Error::corrupt(format!("unknown cuSZp mode {m}"))),
        };
        let (rows, dim) = (u64_at(8), u64_at(16));
        let eb = f32::from_le_bytes(b[24..28].try_into().expect("4 bytes"));
        let len = u64_at(28);
        let payload = &body[HEADER..];
        if len != payload.len() as u64 {
            return Err(Error::corrupt(format!("cuSZp container says {len} bytes, holds {}", payload.len())));
        }
        let n = rows.checked_mul(dim).and_then(|n| usize::try_from(n).ok()).ok_or_else(|| Error::corrupt("shape overflows"))?;
        // cuSZp writes at least one rate byte per 32 values: a stream this long cannot back more values.
        if n > 0 && (payload.len() < n.div_ceil(32) || !(eb.is_finite() && eb > 0.0)) {
            return Err(Error::corrupt(format!("{} bytes with bound {eb} cannot hold {rows}x{dim} values", payload.len())));
        }
        if n == 0 && !payload.is_empty() {
            return Err(Error::corrupt("bytes for an empty shape"));
        }
        Ok(Container { mode, rows: rows as usize, dim: dim as usize, eb, payload })
    }
}

impl lam_core::ByteCodec for Cuszp {
    /// `cuszp-MODE-BOUND`, e.g. `cuszp-fixed-rel1e-2`.
    fn name(&self) -> &str {
        &self.name
    }

    fn encode(&self, values: &[f32], shape: lam_core::Shape, out: &mut Vec<u8>) -> Result<(), lam_core::Error> {
        Cuszp::encode(self, values, shape.rows, shape.dim, out)?;
        Ok(())
    }

    fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<lam_core::Shape, lam_core::Error> {
        let (rows, dim) = Cuszp::decode(self, bytes, out)?;
        Ok(lam_core::Shape { rows, dim })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(n_rows: usize, dim: usize, payload: &[u8], eb: f32) -> Vec<u8> {
        let mut v = Vec::new();
        write_header(&mut v, SzpMode::Plain, n_rows, dim, eb, payload.len());
        v.extend_from_slice(payload);
        seal(&mut v, 0);
        v
    }

    #[test]
    fn containers_are_checked_before_cuszp_sees_them() {
        let good = container(2, 32, &[7u8; 40], 1e-3);
        let c = Container::parse(&good).unwrap();
        assert_eq!((c.rows, c.dim, c.mode, c.payload.len()), (2, 32, 1, 40));
        for cut in 0..good.len() {
            assert!(Container::parse(&good[..cut]).is_err(), "prefix {cut}");
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(Container::parse(&bad).is_err(), "byte {i}");
        }
        // A header that claims more values than its bytes can hold.
        assert!(Container::parse(&container(1 << 40, 384, &[0; 16], 1e-3)).is_err());
        assert!(Container::parse(&container(usize::MAX, 2, &[0; 16], 1e-3)).is_err());
        assert!(Container::parse(&container(4, 32, &[0; 16], 0.0)).is_err());
        assert!(Container::parse(&container(0, 384, &[], 0.0)).is_ok());
    }

    #[test]
    fn a_missing_library_is_a_clear_error() {
        // No cuSZp is installed on machines without a GPU; where one is, skip.
        match Cuszp::new(0) {
            Err(Error::CuszpUnavailable(msg)) => assert!(msg.contains("CUSZP_DIR") && msg.contains("libcuSZp.so"), "{msg}"),
            Err(Error::DeviceUnavailable { why, .. }) => println!("cuSZp loaded, no device: {why}"),
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => println!("cuSZp and a device are present; the GPU tests cover it"),
        }
    }
}
