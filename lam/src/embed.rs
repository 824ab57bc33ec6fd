//! `lam embed`: JSON strings in, unit vectors out.

use crate::opts::{EncoderArg, EncoderOpts};
use anyhow::{Context, Result};
use std::io::Write;

#[derive(clap::Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    enc: EncoderOpts,
    /// Print the model id, dimension, pooling and max_seq_length as JSON and exit.
    #[arg(long)]
    info: bool,
}

pub fn run(a: EmbedArgs) -> Result<()> {
    let mut enc = a.enc.load()?;
    if a.info {
        return info(&a.enc, &*enc);
    }
    let stdin = std::io::stdin();
    let mut texts: Vec<String> = Vec::new();
    for (n, line) in std::io::BufRead::lines(stdin.lock()).enumerate() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let t: String = serde_json::from_str(&line).with_context(|| format!("stdin line {}: expected a JSON string", n + 1))?;
        texts.push(t);
    }
    let dim = enc.info().dim;
    let bytes: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
    let mut out = vec![0.0f32; bytes.len() * dim];
    enc.encode_batch(&bytes, &mut out)?;
    let so = std::io::stdout();
    let mut so = std::io::BufWriter::new(so.lock());
    for row in out.chunks_exact(dim) {
        serde_json::to_writer(&mut so, row)?;
        writeln!(so)?;
    }
    Ok(())
}

fn info(o: &EncoderOpts, enc: &dyn lam_core::Encoder) -> Result<()> {
    let i = enc.info();
    let (pooling, max_seq) = match o.encoder {
        EncoderArg::Bert => {
            let p = match lam_encode::BertEncoder::load(&o.spec().model_dir())?.pooling() {
                lam_encode::Pooling::Mean => "mean",
                lam_encode::Pooling::Cls => "cls",
            };
            (p, i.max_tokens + 2)
        }
        EncoderArg::Hashing => ("signed feature hashing", i.max_tokens),
        #[cfg(feature = "ort")]
        EncoderArg::Ort => ("mean-or-cls (from 1_Pooling/config.json)", i.max_tokens + 2),
    };
    println!("{}", serde_json::json!({"model_id": i.model_id, "dim": i.dim, "pooling": pooling, "max_seq_length": max_seq}));
    Ok(())
}
