//! ROCm backend: `libamdhip64` and hiprtc loaded at run time with
//! libloading (hip-rs needs a full ROCm install to build). hiprtc lives in
//! `libhiprtc` from ROCm 5.3 on and inside `libamdhip64` before (Debian
//! bookworm ships ROCm 5.2); both are tried.
//!
//! NOT YET RUN ON A GPU: the kernel compiles with hiprtc for gfx90a in CI;
//! the device path (allocation, launch, copies) has not run on AMD hardware.

use super::SZP_KERNEL_SRC;
use crate::szp::{self, Bound, Layout, Resolved, SzpReader, block_offsets};
use crate::{Error, Header, SzpMode};
use libloading::Library;
use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::ptr;

type HipErr = c_int;
type Prog = *mut c_void;

fn err(msg: impl Into<String>) -> Error {
    Error::Gpu { backend: "rocm", msg: msg.into() }
}

fn open_any(names: &[&str]) -> Option<Library> {
    // SAFETY: loading the HIP runtime runs its initialisers, which is what loading it is for.
    names.iter().find_map(|n| unsafe { Library::new(*n) }.ok())
}

fn hip_lib() -> Result<Library, Error> {
    open_any(&["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"])
        .ok_or_else(|| Error::DeviceUnavailable { backend: "rocm", why: "libamdhip64 not found".into() })
}

fn rtc_lib() -> Result<Library, Error> {
    open_any(&["libhiprtc.so", "libhiprtc.so.6", "libhiprtc.so.5"]).map_or_else(hip_lib, Ok)
}

macro_rules! sym {
    ($lib:expr, $name:literal, $ty:ty) => {{
        // SAFETY: the type is the documented C signature of this HIP/hiprtc symbol.
        let s: libloading::Symbol<'_, $ty> = unsafe { $lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| err(format!("{}: {e}", $name)))?;
        *s
    }};
}

/// Compile the Szp kernels with hiprtc for `arch` (e.g. `"gfx90a"`; `None`:
/// hiprtc's default, the current device), FMA contraction off. Returns the
/// code object. Needs only the runtime library and device libraries, no GPU.
pub fn hiprtc_compile(arch: Option<&str>) -> Result<Vec<u8>, Error> {
    let lib = rtc_lib()?;
    let create = sym!(
        lib,
        "hiprtcCreateProgram",
        unsafe extern "C" fn(*mut Prog, *const c_char, *const c_char, c_int, *const *const c_char, *const *const c_char) -> c_int
    );
    let compile = sym!(lib, "hiprtcCompileProgram", unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> c_int);
    let log_size = sym!(lib, "hiprtcGetProgramLogSize", unsafe extern "C" fn(Prog, *mut usize) -> c_int);
    let get_log = sym!(lib, "hiprtcGetProgramLog", unsafe extern "C" fn(Prog, *mut c_char) -> c_int);
    let code_size = sym!(lib, "hiprtcGetCodeSize", unsafe extern "C" fn(Prog, *mut usize) -> c_int);
    let get_code = sym!(lib, "hiprtcGetCode", unsafe extern "C" fn(Prog, *mut c_char) -> c_int);
    let destroy = sym!(lib, "hiprtcDestroyProgram", unsafe extern "C" fn(*mut Prog) -> c_int);
    let src = CString::new(SZP_KERNEL_SRC).map_err(|e| err(e.to_string()))?;
    let name = CString::new("szp.cu").unwrap_or_default();
    let mut opts = vec![CString::new("-ffp-contract=off").unwrap_or_default(), CString::new("-O3").unwrap_or_default()];
    if let Some(a) = arch {
        opts.push(CString::new(format!("--offload-arch={a}")).map_err(|e| err(e.to_string()))?);
    }
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: Prog = ptr::null_mut();
    // SAFETY: hiprtc C API; every pointer is valid for the call and `prog` is destroyed below.
    unsafe {
        let rc = create(&mut prog, src.as_ptr(), name.as_ptr(), 0, ptr::null(), ptr::null());
        if rc != 0 {
            return Err(err(format!("hiprtcCreateProgram: {rc}")));
        }
        let rc = compile(prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr());
        let mut n = 0usize;
        let mut log = String::new();
        if log_size(prog, &mut n) == 0 && n > 1 {
            let mut buf = vec![0u8; n];
            if get_log(prog, buf.as_mut_ptr() as *mut c_char) == 0 {
                log = String::from_utf8_lossy(&buf[..n - 1]).into_owned();
            }
        }
        let result = if rc != 0 {
            Err(err(format!("hiprtcCompileProgram: {rc}\n{log}")))
        } else {
            let mut n = 0usize;
            if code_size(prog, &mut n) != 0 || n == 0 {
                Err(err("hiprtcGetCodeSize failed"))
            } else {
                let mut code = vec![0u8; n];
                if get_code(prog, code.as_mut_ptr() as *mut c_char) != 0 { Err(err("hiprtcGetCode failed")) } else { Ok(code) }
            }
        };
        destroy(&mut prog);
        result
    }
}

type Malloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> HipErr;
type Free = unsafe extern "C" fn(*mut c_void) -> HipErr;
type Memcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> HipErr;
type Launch =
    unsafe extern "C" fn(*mut c_void, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, *mut c_void, *mut *mut c_void, *mut *mut c_void) -> HipErr;
type DevSync = unsafe extern "C" fn() -> HipErr;

const H2D: c_int = 1;
const D2H: c_int = 2;
const THREADS: u32 = 256;

/// The Szp codec on one AMD GPU; streams are byte-identical to the CPU's.
/// As a [`lam_core::ByteCodec`] it encodes with the mode and bound of
/// [`RocmSzp::with_codec`] (default: fixed, [`crate::DEFAULT_SZP_BOUND`]).
#[derive(Debug)]
pub struct RocmSzp {
    _lib: Library,
    malloc: Malloc,
    free: Free,
    memcpy: Memcpy,
    launch: Launch,
    sync: DevSync,
    functions: [usize; 3],
    params: super::Params,
}

// SAFETY: the HIP runtime is thread-safe; the function handles are plain ids.
unsafe impl Send for RocmSzp {}
// SAFETY: as above; every call is synchronous.
unsafe impl Sync for RocmSzp {}

/// Device buffer freed on drop.
struct DevBuf<'a> {
    ptr: *mut c_void,
    len: usize,
    owner: &'a RocmSzp,
}

impl Drop for DevBuf<'_> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from hipMalloc and is freed once.
        unsafe { (self.owner.free)(self.ptr) };
    }
}

fn a<T>(p: &mut T) -> *mut c_void {
    p as *mut T as *mut c_void
}

fn check(rc: HipErr, what: &str) -> Result<(), Error> {
    if rc == 0 { Ok(()) } else { Err(err(format!("{what}: hipError {rc}"))) }
}

impl RocmSzp {
    /// Open device `ordinal` and compile the kernels (hiprtc, current device's
    /// arch). Errors (never panics) when the runtime or a device is missing.
    pub fn new(ordinal: usize) -> Result<Self, Error> {
        let lib = hip_lib()?;
        let init = sym!(lib, "hipInit", unsafe extern "C" fn(c_uint) -> HipErr);
        let count = sym!(lib, "hipGetDeviceCount", unsafe extern "C" fn(*mut c_int) -> HipErr);
        let set = sym!(lib, "hipSetDevice", unsafe extern "C" fn(c_int) -> HipErr);
        let load = sym!(lib, "hipModuleLoadData", unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> HipErr);
        let getf = sym!(lib, "hipModuleGetFunction", unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> HipErr);
        let mut n: c_int = 0;
        // SAFETY: plain HIP runtime calls with valid out-pointers.
        unsafe {
            if init(0) != 0 || count(&mut n) != 0 || n <= 0 || ordinal >= n as usize {
                return Err(Error::DeviceUnavailable { backend: "rocm", why: format!("no AMD GPU {ordinal} ({n} found)") });
            }
            check(set(ordinal as c_int), "hipSetDevice")?;
        }
        let arch = std::env::var("LAM_HIP_ARCH").ok();
        let code = hiprtc_compile(arch.as_deref())?;
        let mut module = ptr::null_mut();
        let mut functions = [0usize; 3];
        // SAFETY: `code` is a code object from hiprtc; names are NUL-terminated.
        unsafe {
            check(load(&mut module, code.as_ptr() as *const c_void), "hipModuleLoadData")?;
            for (f, name) in functions.iter_mut().zip(super::SZP_KERNELS) {
                let c = CString::new(name).unwrap_or_default();
                let mut h = ptr::null_mut();
                check(getf(&mut h, module, c.as_ptr()), name)?;
                *f = h as usize;
            }
        }
        Ok(RocmSzp {
            malloc: sym!(lib, "hipMalloc", Malloc),
            free: sym!(lib, "hipFree", Free),
            memcpy: sym!(lib, "hipMemcpy", Memcpy),
            launch: sym!(lib, "hipModuleLaunchKernel", Launch),
            sync: sym!(lib, "hipDeviceSynchronize", DevSync),
            _lib: lib,
            functions,
            params: super::Params::new("rocm", SzpMode::Fixed, crate::DEFAULT_SZP_BOUND),
        })
    }

    /// The mode and bound [`lam_core::ByteCodec::encode`] uses.
    pub fn with_codec(mut self, mode: SzpMode, bound: Bound) -> Self {
        self.params = super::Params::new("rocm", mode, bound);
        self
    }

    pub(super) fn params(&self) -> &super::Params {
        &self.params
    }

    fn alloc(&self, len: usize) -> Result<DevBuf<'_>, Error> {
        let mut p = ptr::null_mut();
        // SAFETY: hipMalloc writes a device pointer.
        check(unsafe { (self.malloc)(&mut p, len.max(4)) }, "hipMalloc")?;
        Ok(DevBuf { ptr: p, len: len.max(4), owner: self })
    }

    fn upload<T: Copy>(&self, data: &[T]) -> Result<DevBuf<'_>, Error> {
        let bytes = std::mem::size_of_val(data);
        let b = self.alloc(bytes)?;
        // SAFETY: `b` holds at least `bytes` bytes.
        check(unsafe { (self.memcpy)(b.ptr, data.as_ptr() as *const c_void, bytes, H2D) }, "hipMemcpy H2D")?;
        Ok(b)
    }

    fn download<T: Copy + Default>(&self, b: &DevBuf<'_>, n: usize) -> Result<Vec<T>, Error> {
        let mut v = vec![T::default(); n];
        let bytes = std::mem::size_of_val(v.as_slice());
        if bytes > b.len {
            return Err(err("download larger than buffer"));
        }
        // SAFETY: `v` holds `bytes` bytes; the device buffer at least as many.
        check(unsafe { (self.memcpy)(v.as_mut_ptr() as *mut c_void, b.ptr, bytes, D2H) }, "hipMemcpy D2H")?;
        Ok(v)
    }

    /// Launch kernel `k` over `nblocks` threads with `args` (pointers to each argument).
    fn run(&self, k: usize, nblocks: usize, args: &mut [*mut c_void]) -> Result<(), Error> {
        let g = u32::try_from(nblocks.div_ceil(THREADS as usize)).map_err(|_| err("batch too large for one launch"))?;
        // SAFETY: `args` point at live locals whose types match the kernel's parameters.
        unsafe {
            check(
                (self.launch)(self.functions[k] as *mut c_void, g.max(1), 1, 1, THREADS, 1, 1, 0, ptr::null_mut(), args.as_mut_ptr(), ptr::null_mut()),
                "hipModuleLaunchKernel",
            )?;
            check((self.sync)(), "hipDeviceSynchronize")
        }
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
        let (mut n64, mut nb64, mut inv, mut plain) = (n as u64, layout.nblocks as u64, r.inv_step, (mode == SzpMode::Plain) as i32);
        let x = self.upload(values)?;
        let w = self.alloc(layout.nblocks)?;
        let (mut xp, mut wp) = (x.ptr, w.ptr);
        self.run(0, layout.nblocks, &mut [a(&mut xp), a(&mut n64), a(&mut inv), a(&mut plain), a(&mut wp), a(&mut nb64)])?;
        let widths: Vec<u8> = self.download(&w, layout.nblocks)?;
        let (offsets, total) = block_offsets(&widths);
        let off = self.upload(&offsets)?;
        let p = self.alloc(total as usize)?;
        let (mut offp, mut pp) = (off.ptr, p.ptr);
        self.run(1, layout.nblocks, &mut [a(&mut xp), a(&mut n64), a(&mut inv), a(&mut plain), a(&mut wp), a(&mut offp), a(&mut pp), a(&mut nb64)])?;
        let payload: Vec<u8> = self.download(&p, total as usize)?;
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
        let (mut n64, mut nb64, mut step, mut plain) = (n as u64, widths.len() as u64, h.step, (h.mode == SzpMode::Plain) as i32);
        let p = self.upload(payload)?;
        let w = self.upload(&widths)?;
        let off = self.upload(&offsets)?;
        let o = self.alloc(n * 4)?;
        let (mut pp, mut wp, mut offp, mut op) = (p.ptr, w.ptr, off.ptr, o.ptr);
        self.run(2, widths.len(), &mut [a(&mut pp), a(&mut wp), a(&mut offp), a(&mut n64), a(&mut step), a(&mut plain), a(&mut op), a(&mut nb64)])?;
        out.extend(self.download::<f32>(&o, n)?);
        Ok(h)
    }
}
