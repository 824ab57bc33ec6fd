//! `lam codec compress|decompress`: lam-codec over raw little-endian float32 files.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use lam_codec::{Bound, Codec, SzpMode};
use std::path::PathBuf;

/// `lam codec` arguments.
#[derive(Args)]
pub struct CodecArgs {
    #[command(subcommand)]
    cmd: CodecCmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum CodecArg {
    Szp,
    F16,
    Int8,
    Binary,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Fixed,
    Plain,
}

/// An error bound: a finite number >= 0.
fn bound(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        Ok(_) => Err(format!("`{s}` must be a finite number >= 0")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

#[derive(Subcommand)]
enum CodecCmd {
    /// Compress a raw little-endian float32 file (rows of --dim values) into a LAMC stream.
    Compress {
        /// Codec.
        #[arg(long, value_enum)]
        codec: CodecArg,
        /// Szp mode: fixed (quantised values) or plain (1-D Lorenzo differences).
        #[arg(long, value_enum, default_value = "fixed")]
        mode: ModeArg,
        /// Relative error bound: a fraction of the batch's value range (max - min); szp only.
        #[arg(long, conflicts_with = "abs", value_parser = bound)]
        rel: Option<f64>,
        /// Absolute error bound; szp only.
        #[arg(long, value_parser = bound)]
        abs: Option<f64>,
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
        CodecCmd::Compress { codec, mode, rel, abs, dim, json, input, output } => {
            let dim = dim as usize;
            let values = read_f32(&input)?;
            if values.len() % dim != 0 {
                bail!("{}: {} values are not rows of --dim {dim}", input.display(), values.len());
            }
            let rows = values.len() / dim;
            let mode = match mode {
                ModeArg::Fixed => SzpMode::Fixed,
                ModeArg::Plain => SzpMode::Plain,
            };
            let c = match codec {
                CodecArg::Szp => {
                    let bound = match (rel, abs) {
                        (Some(r), None) => Bound::Rel(r),
                        (None, Some(a)) => Bound::Abs(a),
                        _ => bail!("--codec szp needs one of --rel B or --abs B"),
                    };
                    Codec::Szp { mode, bound }
                }
                _ if rel.is_some() || abs.is_some() => bail!("--rel/--abs apply to --codec szp only"),
                CodecArg::F16 => Codec::F16,
                CodecArg::Int8 => Codec::Int8PerVector,
                CodecArg::Binary => Codec::SignBinary,
            };
            let mut s = Vec::new();
            let resolved = c.encode_to(&values, rows, dim, &mut s).with_context(|| format!("compressing {}", input.display()))?;
            std::fs::write(&output, &s).with_context(|| format!("writing {}", output.display()))?;
            if json {
                let written = std::fs::read(&output).with_context(|| format!("reading back {}", output.display()))?;
                let mut back = Vec::new();
                lam_codec::decode(&written, &mut back).context("decoding what was written")?;
                let err = values.iter().zip(&back).map(|(&x, &y)| (x as f64 - y as f64).abs()).fold(0.0, f64::max);
                let bytes_in = values.len() * 4;
                let row = serde_json::json!({
                    "codec": c.id().name(),
                    "mode": matches!(c, Codec::Szp { .. }).then(|| mode.name()),
                    "bound_abs": resolved.map(|r| r.bound_abs),
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
        run_args(&["compress", "--codec", "szp", "--mode", "plain", "--abs", "0.001", "--dim", "384", "--json", &p(&raw), &p(&s)]).unwrap();
        run_args(&["decompress", &p(&s), &p(&back)]).unwrap();
        let out = read_f32(&back).unwrap();
        assert_eq!(out.len(), v.len());
        assert!(v.iter().zip(&out).all(|(a, b)| (a - b).abs() as f64 <= 0.001));
        assert!(run_args(&["compress", "--codec", "szp", "--dim", "384", &p(&raw), &p(&s)]).is_err(), "szp needs a bound");
        assert!(run_args(&["compress", "--codec", "f16", "--dim", "5", &p(&raw), &p(&s)]).is_err(), "rows of 5 do not fit");
        std::fs::write(&s, b"LAMC garbage").unwrap();
        assert!(run_args(&["decompress", &p(&s), &p(&back)]).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
