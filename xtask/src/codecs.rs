//! Codec stream digests for `verify-digests`: every codec's stream of the
//! retained embeddings, on the CPU and on each GPU backend that is compiled
//! in (xtask features `cuda`, `rocm`) and has a device, must be
//! byte-identical.

use anyhow::{Result, bail};
use lam_codec::gpu::{CudaSzp, RocmSzp};
use lam_codec::{Bound, Codec, SzpMode};
use sha2::{Digest, Sha256};

fn codecs() -> Vec<(String, Codec)> {
    let mut v = vec![("f16".to_string(), Codec::F16), ("int8".into(), Codec::Int8PerVector), ("binary".into(), Codec::SignBinary)];
    for (m, mode) in [("fixed", SzpMode::Fixed), ("plain", SzpMode::Plain)] {
        for rel in [1e-2, 1e-3] {
            v.push((format!("szp-{m}-rel{rel:e}"), Codec::Szp { mode, bound: Bound::Rel(rel) }));
        }
    }
    v
}

fn hex16(b: &[u8]) -> String {
    Sha256::digest(b).iter().take(8).map(|x| format!("{x:02x}")).collect()
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
