//! The batch form (LAM Algorithm 2): a finished trajectory, its chunks
//! encoded in large batches, every record then admitted by the same
//! per-record function as the online form.

use crate::session::Session;
use crate::{Admission, Config, Error};
use lam_core::{DeletionDigest, Encoder, Record};
use std::ops::Range;

/// The result of the batch form over a whole trajectory.
#[derive(Debug)]
pub struct BatchOutcome {
    /// One admission per record, in order.
    pub admissions: Vec<Admission>,
    /// Deletion-set digest (session index 0).
    pub digest: DeletionDigest,
    /// Largest substitution distance used.
    pub delta_hat: f64,
}

/// Algorithm 2: begin every record (ids; L0 first in `l0-l1`), chunk
/// everything, encode all chunks in batches of `cfg.encode_batch`, then
/// finish every record in order. Records must be numbered 0, 1, 2, ...
pub fn compact_batch<E: Encoder + ?Sized>(cfg: Config, enc: &mut E, records: &[Record]) -> Result<BatchOutcome, Error> {
    let dim = enc.info().dim;
    let mut s = Session::new(cfg, dim)?;
    if let Some((i, r)) = records.iter().enumerate().find(|(i, r)| r.index as usize != *i) {
        return Err(Error::OutOfOrder { expected: i as u32, got: r.index });
    }
    let begun: Vec<_> = records.iter().map(|r| s.begin(r)).collect();
    let mut chunks: Vec<Vec<Range<usize>>> = Vec::with_capacity(records.len());
    for (b, r) in begun.iter().zip(records) {
        let mut c = Vec::new();
        enc.chunks(b.text(r), &mut c)?;
        chunks.push(c);
    }
    let flat: Vec<&[u8]> = begun.iter().zip(records).zip(&chunks).flat_map(|((b, r), cs)| cs.iter().map(move |c| &b.text(r)[c.clone()])).collect();
    let step = cfg.encode_batch.max(1);
    let mut vectors = vec![0.0f32; flat.len() * dim];
    for (texts, out) in flat.chunks(step).zip(vectors.chunks_mut(step * dim)) {
        enc.encode_batch(texts, out)?;
    }
    let mut admissions = Vec::with_capacity(records.len());
    let mut at = 0;
    for ((b, r), cs) in begun.into_iter().zip(records).zip(&chunks) {
        let v = &vectors[at * dim..(at + cs.len()) * dim];
        at += cs.len();
        admissions.push(s.finish(r, b, cs, v)?);
    }
    Ok(BatchOutcome { admissions, digest: s.digest().clone(), delta_hat: s.delta_hat() })
}
