//! The GPU kernel source compiles (NVRTC to PTX, hiprtc to a gfx90a code
//! object) without a GPU, and CPU and GPU streams are byte-identical where a
//! GPU exists. Set `LAM_REQUIRE_NVRTC=1` / `LAM_REQUIRE_HIPRTC=1` (CI does)
//! to turn a missing compiler library into a failure instead of a skip, and
//! `LAM_REQUIRE_GPU=1` (the GPU bundle does) to make a missing CUDA device
//! one. The GPU codecs also run lam-core's `ByteCodec` suite through the trait.

#[allow(unused_imports)]
use lam_codec::{Bound, Error, SzpMode, gpu, szp};

#[allow(dead_code)]
fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

#[allow(dead_code)]
fn fixture() -> Vec<f32> {
    // LAM_FIXTURES: where the GPU bundle puts them (the checkout's path does not exist there).
    let dir = std::env::var_os("LAM_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"));
    let p = dir.join("minilm-embeddings-2371x384.f32");
    match std::fs::read(&p) {
        Ok(b) => b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        Err(e) => {
            assert!(!gpu_required(), "{}: {e} (set LAM_FIXTURES)", p.display());
            (0..100_000).map(|i| ((i as f32) * 0.731).sin() * 0.1).collect()
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn nvrtc_compiles_szp_kernel_to_ptx() {
    for arch in [None, Some("compute_90")] {
        match gpu::nvrtc_compile_ptx(arch) {
            Ok(ptx) => {
                for k in gpu::SZP_KERNELS {
                    assert!(ptx.contains(&format!(".entry {k}")), "{k} missing from PTX");
                }
                assert!(!ptx.contains("fma.rn.f"), "floating FMA in PTX despite --fmad=false");
                println!("NVRTC ({arch:?}): {} bytes of PTX, entries {:?}", ptx.len(), gpu::SZP_KERNELS);
            }
            Err(Error::DeviceUnavailable { why, .. }) if !required("LAM_REQUIRE_NVRTC") => {
                println!("skipped: {why}");
                return;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[cfg(feature = "rocm")]
#[test]
fn hiprtc_compiles_szp_kernel_for_gfx90a() {
    match gpu::hiprtc_compile(Some("gfx90a")) {
        Ok(code) => {
            assert!(code.len() > 64);
            println!("hiprtc (gfx90a): {} bytes of code object", code.len());
        }
        Err(Error::DeviceUnavailable { why, .. }) if !required("LAM_REQUIRE_HIPRTC") => println!("skipped: {why}"),
        Err(e) => panic!("{e}"),
    }
}

/// CPU and device streams byte-identical on real embeddings (and decodes equal).
#[test]
fn gpu_streams_match_cpu() {
    let data = fixture();
    let rows = data.len() / 384;
    let data = &data[..rows * 384];
    let mut ran = 0;
    type Enc = Box<dyn Fn(&[f32], SzpMode, Bound, &mut Vec<u8>) -> Result<(), Error>>;
    type Dec = Box<dyn Fn(&[u8], &mut Vec<f32>) -> Result<(), Error>>;
    let backends: [(&str, Enc, Dec); 2] = [
        (
            "cuda",
            Box::new(|v, m, b, o| gpu::CudaSzp::new(0)?.encode(v, v.len() / 384, 384, m, b, o).map(|_| ())),
            Box::new(|s, o| gpu::CudaSzp::new(0)?.decode(s, o).map(|_| ())),
        ),
        (
            "rocm",
            Box::new(|v, m, b, o| gpu::RocmSzp::new(0)?.encode(v, v.len() / 384, 384, m, b, o).map(|_| ())),
            Box::new(|s, o| gpu::RocmSzp::new(0)?.decode(s, o).map(|_| ())),
        ),
    ];
    'backend: for (name, enc, dec) in &backends {
        for mode in [SzpMode::Fixed, SzpMode::Plain] {
            for r in [1e-2, 1e-3, 1e-4] {
                let mut g = Vec::new();
                match enc(data, mode, Bound::Rel(r), &mut g) {
                    Err(e @ (Error::BackendNotCompiled(..) | Error::DeviceUnavailable { .. })) => {
                        assert!(!(gpu_required() && *name == "cuda"), "LAM_REQUIRE_GPU=1 but {name} is unavailable: {e}");
                        println!("{name}: skipped: no GPU ({e})");
                        continue 'backend;
                    }
                    Err(e) => panic!("{name}: {e}"),
                    Ok(()) => {}
                }
                let mut c = Vec::new();
                szp::encode(data, rows, 384, mode, Bound::Rel(r), &mut c).unwrap();
                assert!(g == c, "{name} {mode:?} rel {r}: device stream differs from CPU ({} vs {} bytes)", g.len(), c.len());
                let (mut gd, mut cd) = (Vec::new(), Vec::new());
                dec(&c, &mut gd).unwrap();
                szp::decode(&c, &mut cd).unwrap();
                assert!(gd.iter().zip(&cd).all(|(a, b)| a.to_bits() == b.to_bits()) && gd.len() == cd.len(), "{name}: decoded values differ");
                ran += 1;
            }
        }
    }
    println!("{ran} CPU/GPU identity checks ran");
}

/// Whether a GPU is required here (the GPU bundle sets `LAM_REQUIRE_GPU=1`):
/// then a missing device is a failure, not a skip.
fn gpu_required() -> bool {
    required("LAM_REQUIRE_GPU")
}

/// A backend that cannot run must say why in an error, never panic; on the
/// GPU machine (`LAM_REQUIRE_GPU=1`) it must run.
fn check_unavailable(backend: &str, e: &Error) {
    let msg = e.to_string();
    match e {
        Error::BackendNotCompiled(..) => assert!(msg.contains("feature"), "{msg}"),
        Error::DeviceUnavailable { why, .. } => assert!(!why.is_empty() && msg.contains(backend), "{msg}"),
        other => panic!("{backend}: expected BackendNotCompiled or DeviceUnavailable, got {other}"),
    }
    assert!(!(gpu_required() && backend == "cuda"), "LAM_REQUIRE_GPU=1 but {backend} is unavailable: {msg}");
    println!("{backend}: skipped ({msg})");
}

/// The lam-core `ByteCodec` conformance suite on each GPU codec that has a
/// device, through the trait (so callers can loop over CPU and GPU codecs).
#[test]
fn gpu_codecs_pass_the_byte_codec_suite() {
    let within = |tol: f64| {
        move |a: &[f32], b: &[f32]| {
            let e = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).abs()).fold(0.0, f64::max);
            if e <= tol { Ok(()) } else { Err(format!("max abs error {e} > {tol}")) }
        }
    };
    for mode in [SzpMode::Fixed, SzpMode::Plain] {
        for bound in [Bound::Abs(1e-3), Bound::Rel(1e-2)] {
            // Unit vectors span at most [-1, 1]: a relative bound of 1e-2 is at most 2e-2 absolute.
            let tol = match bound {
                Bound::Abs(a) => a,
                Bound::Rel(r) => 2.0 * r,
            };
            match gpu::CudaSzp::new(0) {
                Ok(g) => lam_core::testsuite::byte_codec(&g.with_codec(mode, bound), within(tol)),
                Err(e) => return check_unavailable("cuda", &e),
            }
        }
    }
    println!("cuda: ByteCodec suite passed (fixed and plain, abs and rel)");
}

#[test]
fn rocm_codec_passes_the_byte_codec_suite_or_says_why_not() {
    match gpu::RocmSzp::new(0) {
        Ok(g) => lam_core::testsuite::byte_codec(&g.with_codec(SzpMode::Plain, Bound::Abs(1e-3)), |a, b| {
            let e = a.iter().zip(b).map(|(&x, &y)| (x - y).abs()).fold(0.0f32, f32::max);
            if e <= 1e-3 { Ok(()) } else { Err(format!("max abs error {e}")) }
        }),
        Err(e) => check_unavailable("rocm", &e),
    }
}

/// cuSZp itself through the same trait, where its library and a device exist.
#[cfg(feature = "cuszp")]
#[test]
fn cuszp_passes_the_byte_codec_suite_or_says_why_not() {
    match gpu::Cuszp::new(0) {
        // cuSZp quantises in f32 and its own check allows 10 % over the bound.
        Ok(c) => lam_core::testsuite::byte_codec(&c.with_codec(SzpMode::Fixed, Bound::Abs(1e-3)), |a, b| {
            let e = a.iter().zip(b).map(|(&x, &y)| (x - y).abs()).fold(0.0f32, f32::max);
            if e <= 1.1e-3 { Ok(()) } else { Err(format!("max abs error {e}")) }
        }),
        Err(e @ Error::CuszpUnavailable(_)) => {
            assert!(!required("LAM_REQUIRE_CUSZP"), "LAM_REQUIRE_CUSZP=1 but {e}");
            println!("cuszp: skipped ({e})");
        }
        Err(e) => check_unavailable("cuszp", &e),
    }
}
