//! `lam embed`: JSON strings in, unit vectors out.

use crate::opts::EncoderOpts;
use anyhow::{Context, Result};
use lam_core::Encoder;
use lam_encode::Backend;
use std::io::Write;

#[derive(clap::Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    enc: EncoderOpts,
    /// Print the model id, dimension, pooling and max_seq_length as JSON and exit.
    #[arg(long)]
    info: bool,
    /// Embed an input longer than the encoder's window as the pipeline does: cut it into the pipeline's
    /// chunks (at most max_tokens tokens each, at word starts), embed each, and output the mean of the
    /// chunk vectors, normalised to unit length. Without it a long input is cut after its first chunk,
    /// with a warning on stderr.
    #[arg(long)]
    chunk: bool,
}

pub fn run(a: EmbedArgs) -> Result<()> {
    let mut enc = a.enc.load()?;
    if a.info {
        return info(&a.enc, &*enc);
    }
    let stdin = std::io::stdin();
    // One output line per input line: a blank line embeds the empty string.
    let mut texts: Vec<String> = Vec::new();
    for (n, line) in std::io::BufRead::lines(stdin.lock()).enumerate() {
        let line = line.context("reading stdin")?;
        texts.push(if line.trim().is_empty() {
            String::new()
        } else {
            serde_json::from_str(&line).with_context(|| format!("stdin line {}: expected a JSON string", n + 1))?
        });
    }
    let mut pieces: Vec<&[u8]> = Vec::new();
    let mut counts = Vec::with_capacity(texts.len());
    for (n, t) in texts.iter().enumerate() {
        let p = pieces_of(&*enc, t.as_bytes(), a.chunk, n + 1).with_context(|| format!("stdin line {}", n + 1))?;
        counts.push(p.len());
        pieces.extend(p);
    }
    let dim = enc.info().dim;
    let mut out = vec![0.0f32; pieces.len() * dim];
    if let Err(e) = enc.encode_batch(&pieces, &mut out) {
        return Err(which_line(&mut *enc, &pieces, &counts).unwrap_or_else(|| e.into()));
    }
    let so = std::io::stdout();
    let mut so = std::io::BufWriter::new(so.lock());
    let mut rows = out.chunks_exact(dim);
    for (n, k) in counts.into_iter().enumerate() {
        let v = mean_unit(rows.by_ref().take(k), dim).with_context(|| format!("stdin line {}", n + 1))?;
        serde_json::to_writer(&mut so, &v)?;
        writeln!(so)?;
    }
    so.flush()?;
    Ok(())
}

/// What is embedded of one text: all of it when it fits the encoder's window;
/// else its first chunk (with a warning), or with `chunk` every chunk.
fn pieces_of<'t>(enc: &dyn Encoder, text: &'t [u8], chunk: bool, line: usize) -> Result<Vec<&'t [u8]>> {
    let mut spans = Vec::new();
    enc.chunks(text, &mut spans)?;
    Ok(match spans.len() {
        0 | 1 => vec![text],
        _ if chunk => spans.iter().map(|r| &text[r.clone()]).collect(),
        k => {
            let mut toks = Vec::new();
            enc.token_spans(text, &mut toks)?;
            eprintln!(
                "warning: stdin line {line}: {} tokens is longer than the encoder's window of {} ({k} chunks): embedded its first chunk ({} of {} bytes) only; --chunk embeds all of it",
                toks.len(),
                enc.info().max_tokens,
                spans[0].end,
                text.len()
            );
            vec![&text[..spans[0].end]]
        }
    })
}

/// The first input line whose pieces the encoder refuses, as an error naming it.
fn which_line(enc: &mut dyn Encoder, pieces: &[&[u8]], counts: &[usize]) -> Option<anyhow::Error> {
    let dim = enc.info().dim;
    let mut at = 0;
    for (n, &k) in counts.iter().enumerate() {
        let mut out = vec![0.0f32; k * dim];
        if let Err(e) = enc.encode_batch(&pieces[at..at + k], &mut out) {
            return Some(anyhow::Error::new(e).context(format!("stdin line {}", n + 1)));
        }
        at += k;
    }
    None
}

/// The mean of unit rows, normalised (a single row as it is).
fn mean_unit<'a>(rows: impl Iterator<Item = &'a [f32]>, dim: usize) -> Result<Vec<f32>> {
    let rows: Vec<&[f32]> = rows.collect();
    if let [one] = rows[..] {
        return Ok(one.to_vec());
    }
    let mut v: Vec<f32> = (0..dim).map(|i| (rows.iter().map(|r| f64::from(r[i])).sum::<f64>() / rows.len() as f64) as f32).collect();
    lam_core::normalize_in_place(&mut v).map_err(|e| anyhow::anyhow!("the mean of the chunk vectors: {e}"))?;
    Ok(v)
}

fn info(o: &EncoderOpts, enc: &dyn lam_core::Encoder) -> Result<()> {
    let i = enc.info();
    let (pooling, max_seq) = match o.backend() {
        Backend::Bert => {
            let p = match lam_encode::BertEncoder::load(&o.spec().model_dir())?.pooling() {
                lam_encode::Pooling::Mean => "mean",
                lam_encode::Pooling::Cls => "cls",
            };
            (p, i.max_tokens + 2)
        }
        Backend::Hashing => ("signed feature hashing", i.max_tokens),
        // The BERT front end's pooling (1_Pooling/config.json) with another forward pass.
        _ => ("mean-or-cls (from 1_Pooling/config.json)", i.max_tokens + 2),
    };
    println!("{}", serde_json::json!({"model_id": i.model_id, "dim": i.dim, "pooling": pooling, "max_seq_length": max_seq}));
    Ok(())
}
