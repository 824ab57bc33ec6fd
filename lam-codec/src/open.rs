//! The one way to get a codec from its name, on every build:
//! [`open`]`(spec)` returns a `Box<dyn ByteCodec>` whatever backend runs it.
//!
//! ```text
//! [cpu:]NAME             the CPU reference (NAME: f16, int8, binary, szp[-fixed|-plain][-rel<B>|-abs<B>])
//! cuda:SZP | rocm:SZP    the Szp kernel on GPU 0 (features `cuda`, `rocm`); byte-identical streams
//! cuszp[-fixed|-plain][-rel<B>|-abs<B>]    cuSZp itself (feature `cuszp`), for side-by-side runs
//! ```
//!
//! A backend this build does not have is [`Error::BackendNotCompiled`]
//! naming the feature to enable; one compiled in without a usable device is
//! [`Error::DeviceUnavailable`].
//!
//! ```
//! use lam_core::ByteCodec;
//! let c = lam_codec::open("szp-rel1e-2")?;
//! assert_eq!(c.name(), "szp");
//! let Err(e) = lam_codec::open("cuda:f16") else { panic!("f16 has no GPU kernel") };
//! assert!(e.to_string().contains("szp"), "{e}");
//! # Ok::<(), lam_codec::Error>(())
//! ```

use crate::{Codec, Error, parse_codec};
use lam_core::ByteCodec;

/// A codec as [`open`] returns it.
pub type BoxCodec = Box<dyn ByteCodec>;

/// Where a codec spec runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CodecSpec {
    /// The CPU reference.
    Cpu(Codec),
    /// The Szp kernel through NVRTC (feature `cuda`).
    Cuda(Codec),
    /// The Szp kernel through hiprtc (feature `rocm`).
    Rocm(Codec),
    /// cuSZp's library (feature `cuszp`), with its mode and bound.
    Cuszp(Codec),
}

impl CodecSpec {
    /// Parse a spec (module docs).
    pub fn parse(spec: &str) -> Result<Self, Error> {
        let gpu = |name: &str, backend: fn(Codec) -> CodecSpec| match parse_codec(name)? {
            c @ Codec::Szp { .. } => Ok(backend(c)),
            other => Err(Error::UnknownCodec { name: format!("{spec} ({other} has no GPU kernel)"), expected: GPU_EXPECTED }),
        };
        if let Some(name) = spec.strip_prefix("cuda:") {
            return gpu(name, CodecSpec::Cuda);
        }
        if let Some(name) = spec.strip_prefix("rocm:") {
            return gpu(name, CodecSpec::Rocm);
        }
        if let Some(rest) = spec.strip_prefix("cuszp") {
            let c = parse_codec(&format!("szp{rest}")).map_err(|_| Error::UnknownCodec { name: spec.to_string(), expected: GPU_EXPECTED })?;
            return Ok(CodecSpec::Cuszp(c));
        }
        Ok(CodecSpec::Cpu(parse_codec(spec.strip_prefix("cpu:").unwrap_or(spec))?))
    }

    /// The codec and its parameters.
    pub fn codec(self) -> Codec {
        match self {
            CodecSpec::Cpu(c) | CodecSpec::Cuda(c) | CodecSpec::Rocm(c) | CodecSpec::Cuszp(c) => c,
        }
    }

    /// Open it on this build (device 0 for the GPU backends).
    pub fn open(self) -> Result<BoxCodec, Error> {
        let Codec::Szp { mode, bound } = self.codec() else {
            return Ok(Box::new(self.codec()));
        };
        match self {
            CodecSpec::Cpu(c) => Ok(Box::new(c)),
            CodecSpec::Cuda(_) => Ok(Box::new(crate::gpu::CudaSzp::new(0)?.with_codec(mode, bound))),
            CodecSpec::Rocm(_) => Ok(Box::new(crate::gpu::RocmSzp::new(0)?.with_codec(mode, bound))),
            CodecSpec::Cuszp(_) => cuszp(mode, bound),
        }
    }
}

const GPU_EXPECTED: &str = "cuda:szp[...], rocm:szp[...] or cuszp[-fixed|-plain][-rel<B>|-abs<B>]: the GPU backends run the Szp codec only";

#[cfg(feature = "cuszp")]
fn cuszp(mode: crate::SzpMode, bound: crate::Bound) -> Result<BoxCodec, Error> {
    Ok(Box::new(crate::gpu::Cuszp::new(0)?.with_codec(mode, bound)))
}

#[cfg(not(feature = "cuszp"))]
fn cuszp(_mode: crate::SzpMode, _bound: crate::Bound) -> Result<BoxCodec, Error> {
    Err(Error::BackendNotCompiled("cuszp", "cuszp"))
}

/// Open the codec `spec` names (module docs): `"szp-rel1e-2"`, `"cuda:szp"`,
/// `"rocm:szp-plain"`, `"cuszp"`.
pub fn open(spec: &str) -> Result<BoxCodec, Error> {
    CodecSpec::parse(spec)?.open()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bound, SzpMode};

    #[test]
    fn specs_parse_and_open_on_every_build() {
        let szp = Codec::Szp { mode: SzpMode::Plain, bound: Bound::Rel(1e-2) };
        assert_eq!(CodecSpec::parse("szp-plain-rel1e-2").unwrap(), CodecSpec::Cpu(szp));
        assert_eq!(CodecSpec::parse("cpu:f16").unwrap(), CodecSpec::Cpu(Codec::F16));
        assert_eq!(CodecSpec::parse("cuda:szp-plain-rel1e-2").unwrap(), CodecSpec::Cuda(szp));
        assert_eq!(CodecSpec::parse("rocm:szp-plain-rel1e-2").unwrap(), CodecSpec::Rocm(szp));
        assert_eq!(CodecSpec::parse("cuszp-plain-rel1e-2").unwrap(), CodecSpec::Cuszp(szp));
        for bad in ["cuda:f16", "rocm:int8", "cuszp-x", "gpu:szp", "szp-rel", ""] {
            assert!(CodecSpec::parse(bad).is_err(), "{bad}");
        }
        for name in ["f16", "int8", "binary", "szp", "cpu:szp-abs1e-3"] {
            let c = open(name).unwrap();
            let mut s = Vec::new();
            c.encode(&[0.5, -0.25, 0.125, 0.0], lam_core::Shape { rows: 2, dim: 2 }, &mut s).unwrap();
            let mut back = Vec::new();
            assert_eq!(c.decode(&s, &mut back).unwrap(), lam_core::Shape { rows: 2, dim: 2 });
        }
        #[cfg(not(feature = "cuda"))]
        assert!(matches!(open("cuda:szp"), Err(Error::BackendNotCompiled("cuda", "cuda"))));
        #[cfg(not(feature = "rocm"))]
        assert!(matches!(open("rocm:szp"), Err(Error::BackendNotCompiled("rocm", "rocm"))));
        #[cfg(not(feature = "cuszp"))]
        assert!(matches!(open("cuszp"), Err(Error::BackendNotCompiled("cuszp", "cuszp"))));
    }

    #[test]
    fn opened_codecs_pass_the_conformance_suite() {
        let within = |bound: f32| {
            move |a: &[f32], b: &[f32]| match a.iter().zip(b).find(|(x, y)| (*x - *y).abs() > bound) {
                Some((x, y)) => Err(format!("{x} came back as {y}, beyond {bound}")),
                None => Ok(()),
            }
        };
        lam_core::testsuite::byte_codec(&open("szp-plain-abs1e-4").unwrap(), within(1e-4));
        lam_core::testsuite::byte_codec(&open("cpu:szp-abs1e-3").unwrap(), within(1e-3));
    }
}
