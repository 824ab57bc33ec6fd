//! `lam codec compress|decompress`: lam-codec over raw little-endian float32 files.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use lam_codec::CodecId;
use lam_core::Shape;
use std::path::PathBuf;

/// `lam codec` arguments.
#[derive(Args)]
pub struct CodecArgs {
    #[command(subcommand)]
    cmd: CodecCmd,
}

/// A codec spec (`lam_codec::open`'s grammar).
fn spec(s: &str) -> Result<lam_codec::CodecSpec, String> {
    lam_codec::CodecSpec::parse(s).map_err(|e| e.to_string())
}

#[derive(Subcommand)]
enum CodecCmd {
    /// Compress a raw little-endian float32 file (rows of --dim values) into a LAMC stream.
    Compress {
        /// Codec, by lam_codec's one grammar: f16, int8, binary, or
        /// szp[-fixed|-plain][-rel<B>|-abs<B>] (fixed: quantised values, plain: 1-D Lorenzo
        /// differences; rel: a fraction of the batch's value range; default fixed, rel 1e-3);
        /// `cuda:SZP` or `rocm:SZP` runs the Szp kernel on GPU 0 (builds with those features).
        #[arg(long, value_parser = spec)]
        codec: lam_codec::CodecSpec,
        /// Vector dimension (values per row).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        dim: u32,
        /// Print {"codec","mode","bound_abs","bytes_in","bytes_out","ratio","max_abs_error"} as JSON
        /// (the error measured by decoding what was written).
        #[arg(long)]
        json: bool,
        /// Input: raw little-endian float32.
        input: PathBuf,
        /// Output stream.
        output: PathBuf,
    },
    /// Decompress a LAMC stream into raw little-endian float32.
    Decompress {
        /// Input stream.
        input: PathBuf,
        /// Output: raw little-endian float32.
        output: PathBuf,
    },
}

fn read_f32(p: &PathBuf) -> Result<Vec<f32>> {
    let b = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    if b.len() % 4 != 0 {
        bail!("{}: {} bytes is not a whole number of float32 values", p.display(), b.len());
    }
    Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

fn write_f32(p: &PathBuf, v: &[f32]) -> Result<()> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(p, bytes).with_context(|| format!("writing {}", p.display()))
}

/// Run `lam codec ...`.
pub fn run(a: CodecArgs) -> Result<()> {
    match a.cmd {
        CodecCmd::Compress { codec, dim, json, input, output } => {
            let dim = dim as usize;
            let values = read_f32(&input)?;
            if values.len() % dim != 0 {
                bail!("{}: {} values are not rows of --dim {dim}", input.display(), values.len());
            }
            let rows = values.len() / dim;
            let c = codec.open().context("--codec")?;
            let mut s = Vec::new();
            c.encode(&values, Shape { rows, dim }, &mut s).with_context(|| format!("compressing {}", input.display()))?;
            std::fs::write(&output, &s).with_context(|| format!("writing {}", output.display()))?;
            if json {
                let written = std::fs::read(&output).with_context(|| format!("reading back {}", output.display()))?;
                let mut back = Vec::new();
                let h = lam_codec::decode(&written, &mut back).context("decoding what was written")?;
                let err = values.iter().zip(&back).map(|(&x, &y)| (x as f64 - y as f64).abs()).fold(0.0, f64::max);
                let bytes_in = values.len() * 4;
                let row = serde_json::json!({
                    "codec": h.codec.name(),
                    "mode": (h.codec == CodecId::Szp).then(|| h.mode.name()),
                    "bound_abs": (h.codec == CodecId::Szp).then_some(h.bound_abs),
                    "bytes_in": bytes_in,
                    "bytes_out": written.len(),
                    "ratio": bytes_in as f64 / written.len() as f64,
                    "max_abs_error": err,
                });
                println!("{row}");
            }
        }
        CodecCmd::Decompress { input, output } => {
            let s = std::fs::read(&input).with_context(|| format!("reading {}", input.display()))?;
            let mut v = Vec::new();
            lam_codec::decode(&s, &mut v).with_context(|| format!("decoding {}", input.display()))?;
            write_f32(&output, &v)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        cmd: CodecCmd,
    }

    fn run_args(args: &[&str]) -> Result<()> {
        let t = T::try_parse_from(std::iter::once("codec").chain(args.iter().copied()))?;
        run(CodecArgs { cmd: t.cmd })
    }

    #[test]
    fn compress_then_decompress_keeps_the_bound() {
        let dir = std::env::temp_dir().join(format!("lam-codec-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let v: Vec<f32> = (0..384 * 7).map(|i| ((i as f32) * 0.37).sin() * 0.2).collect();
        let raw = dir.join("in.f32");
        write_f32(&raw, &v).unwrap();
        let (s, back) = (dir.join("s.lamc"), dir.join("out.f32"));
        let p = |x: &PathBuf| x.to_str().unwrap().to_string();
        run_args(&["compress", "--codec", "szp-plain-abs1e-3", "--dim", "384", "--json", &p(&raw), &p(&s)]).unwrap();
        run_args(&["decompress", &p(&s), &p(&back)]).unwrap();
        let out = read_f32(&back).unwrap();
        assert_eq!(out.len(), v.len());
        assert!(v.iter().zip(&out).all(|(a, b)| (a - b).abs() as f64 <= 0.001));
        assert!(run_args(&["compress", "--codec", "szp-rel", "--dim", "384", &p(&raw), &p(&s)]).is_err(), "a bound needs a number");
        assert!(run_args(&["compress", "--codec", "cuda:f16", "--dim", "384", &p(&raw), &p(&s)]).is_err(), "no f16 kernel");
        assert!(run_args(&["compress", "--codec", "f16", "--dim", "5", &p(&raw), &p(&s)]).is_err(), "rows of 5 do not fit");
        std::fs::write(&s, b"LAMC garbage").unwrap();
        assert!(run_args(&["decompress", &p(&s), &p(&back)]).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
