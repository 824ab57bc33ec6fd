//! Codec stream digests for `verify-digests`: every codec's stream of the
//! retained embeddings, on the CPU and on each GPU backend that is compiled
//! in (xtask features `cuda`, `rocm`) and has a device, must be
//! byte-identical.

use anyhow::{Result, bail};
use lam_codec::Codec;
use lam_codec::gpu::{CudaSzp, RocmSzp};
use sha2::{Digest, Sha256};

/// The codecs whose streams are digested, by their canonical names (one parser: `lam_codec::parse_codec`).
const CODECS: [&str; 7] = ["f16", "int8", "binary", "szp-fixed-rel1e-2", "szp-fixed-rel1e-3", "szp-plain-rel1e-2", "szp-plain-rel1e-3"];

fn codecs() -> Vec<(String, Codec)> {
    CODECS.iter().map(|n| (n.to_string(), lam_codec::parse_codec(n).expect("a known codec name"))).collect()
}

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
    let rows = retained.len() / dim.max(1);
    let mut out = Vec::new();
    let cuda = CudaSzp::new(0).ok();
    let rocm = RocmSzp::new(0).ok();
    for (name, c) in codecs() {
        let mut s = Vec::new();
        c.encode_to(retained, rows, dim, &mut s)?;
        let d = hex16(&s);
        if let Codec::Szp { mode, bound } = c {
            if let Some(g) = &cuda {
                let mut gs = Vec::new();
                g.encode(retained, rows, dim, mode, bound, &mut gs)?;
                if gs != s {
                    bail!("{name}: the CUDA stream ({}) differs from the CPU stream ({d})", hex16(&gs));
                }
            }
            if let Some(g) = &rocm {
                let mut gs = Vec::new();
                g.encode(retained, rows, dim, mode, bound, &mut gs)?;
                if gs != s {
                    bail!("{name}: the ROCm stream ({}) differs from the CPU stream ({d})", hex16(&gs));
                }
            }
        }
        out.push((name, d));
    }
    Ok(out)
}

/// One line per backend: checked, or skipped with the reason.
pub fn backend_lines() -> Vec<String> {
    let mut v = vec!["codec    cpu: every codec, reference".to_string()];
    match CudaSzp::new(0) {
        Ok(_) => v.push("codec    cuda: device 0, Szp streams compared with the CPU".into()),
        Err(e) => v.push(format!("codec    cuda: skipped ({e})")),
    }
    match RocmSzp::new(0) {
        Ok(_) => v.push("codec    rocm: device 0, Szp streams compared with the CPU".into()),
        Err(e) => v.push(format!("codec    rocm: skipped ({e})")),
    }
    v
}

#[cfg(test)]
mod tests {
    /// Golden files key streams by these names: they must stay the canonical ones.
    #[test]
    fn codec_names_are_canonical() {
        for (name, c) in super::codecs() {
            assert_eq!(name, c.to_string());
        }
    }
}
