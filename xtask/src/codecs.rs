//! Codec stream digests for `verify-digests`: every codec's stream of the
//! retained embeddings, on the CPU and on each GPU backend that is compiled
//! in (xtask features `cuda`, `rocm`) and has a device, must be
//! byte-identical.

use anyhow::{Result, bail};
use lam_codec::{BoxCodec, Codec};
use lam_core::{ByteCodec, Shape};
use sha2::{Digest, Sha256};

/// The codecs whose streams are digested, by their canonical names (one
/// grammar: `lam_codec::open`; `cuda:`/`rocm:` before a Szp name runs it on a GPU).
const CODECS: [&str; 7] = ["f16", "int8", "binary", "szp-fixed-rel1e-2", "szp-fixed-rel1e-3", "szp-plain-rel1e-2", "szp-plain-rel1e-3"];

/// The GPU backends a Szp stream is compared on.
const GPUS: [(&str, &str); 2] = [("cuda", "CUDA"), ("rocm", "ROCm")];

fn hex16(b: &[u8]) -> String {
    Sha256::digest(b).iter().take(8).map(|x| format!("{x:02x}")).collect()
}

/// First 16 hex of the SHA-256 of `v`'s little-endian bytes: identifies the
/// exact bits the codecs were given.
pub fn f32_digest(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    hex16(&bytes)
}

/// The fixed codec input: `minilm-embeddings-2371x384.f32` from
/// `LAM_FIXTURES` (default `../shared/fixtures` beside the checkout). Its
/// bits are stored, so its streams are comparable on every machine.
pub const FIXTURE: &str = "minilm-embeddings-2371x384.f32";
pub const FIXTURE_DIM: usize = 384;

pub fn read_fixture(root: &std::path::Path) -> Result<Vec<f32>> {
    let dir = std::env::var_os("LAM_FIXTURES").map(std::path::PathBuf::from).unwrap_or_else(|| root.join("../shared/fixtures"));
    let p = dir.join(FIXTURE);
    let b = std::fs::read(&p).map_err(|e| anyhow::anyhow!("{}: {e} (set LAM_FIXTURES to the shared fixtures folder)", p.display()))?;
    if b.len() % (4 * FIXTURE_DIM) != 0 {
        bail!("{}: {} bytes is not a whole number of {FIXTURE_DIM}-float rows", p.display(), b.len());
    }
    Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// `(codec name, first 16 hex of the SHA-256 of its stream)` for the CPU, and
/// a check that every available GPU backend writes the same bytes.
pub fn stream_digests(retained: &[f32], dim: usize) -> Result<Vec<(String, String)>> {
    let shape = Shape { rows: retained.len() / dim.max(1), dim };
    let encode = |c: &dyn ByteCodec| -> Result<Vec<u8>> {
        let mut s = Vec::new();
        c.encode(retained, shape, &mut s)?;
        Ok(s)
    };
    let mut out = Vec::new();
    for name in CODECS {
        let s = encode(lam_codec::open(name)?.as_ref())?;
        let d = hex16(&s);
        if matches!(lam_codec::parse_codec(name)?, Codec::Szp { .. }) {
            for (backend, shown) in GPUS {
                if let Some(g) = gpu(backend, name) {
                    let gs = encode(g.as_ref())?;
                    if gs != s {
                        bail!("{name}: the {shown} stream ({}) differs from the CPU stream ({d})", hex16(&gs));
                    }
                }
            }
        }
        out.push((name.to_string(), d));
    }
    Ok(out)
}

/// Codec `name` on GPU `backend`, when this build has the backend and the machine a device.
fn gpu(backend: &str, name: &str) -> Option<BoxCodec> {
    lam_codec::open(&format!("{backend}:{name}")).ok()
}

/// One line per backend: checked, or skipped with the reason.
pub fn backend_lines() -> Vec<String> {
    let mut v = vec!["codec    cpu: every codec, reference".to_string()];
    for (backend, _) in GPUS {
        match lam_codec::open(&format!("{backend}:szp")) {
            Ok(_) => v.push(format!("codec    {backend}: device 0, Szp streams compared with the CPU")),
            Err(e) => v.push(format!("codec    {backend}: skipped ({e})")),
        }
    }
    v
}

#[cfg(test)]
mod tests {
    /// Golden files key streams by these names: they must stay the canonical ones.
    #[test]
    fn codec_names_are_canonical() {
        for name in super::CODECS {
            assert_eq!(name, lam_codec::parse_codec(name).unwrap().to_string());
        }
    }
}
