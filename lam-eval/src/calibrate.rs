//! Calibration: this machine's compaction rates, measured with the
//! pipeline's own code, as a `lam-costmodel` device profile
//! (`lam costmodel calibrate`, `cargo xtask calibrate`).

use crate::Result;
use lam_core::{Encoder, Threshold};
use lam_costmodel::{DeviceProfile, PROFILE_FORMAT};
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

/// Deterministic code-like text: lines drawn from a vocabulary so that about a
/// fifth repeat earlier lines of the session, as re-read files do.
pub(crate) fn synthetic_sessions(sessions: usize, records: usize, lines: usize) -> Vec<Vec<Vec<u8>>> {
    let mut s = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let words = ["let", "self", "config", "value", "return", "match", "items", "index", "buffer", "result", "error", "path", "session", "token"];
    (0..sessions)
        .map(|_| {
            let mut seen: Vec<String> = Vec::new();
            (0..records)
                .map(|_| {
                    let mut rec = String::new();
                    let mut written = 0;
                    while written < lines {
                        let r = next();
                        if !seen.is_empty() && r % 27 == 0 {
                            // A block of earlier lines, as a re-read file shows them.
                            let at = (r as usize / 27) % seen.len();
                            let n = (1 + (r >> 20) as usize % 12).min(seen.len() - at).min(lines - written);
                            for l in &seen[at..at + n] {
                                rec.push_str(l);
                                rec.push('\n');
                            }
                            written += n;
                            continue;
                        }
                        let n = 3 + (r >> 8) as usize % 8;
                        let mut l = "    ".repeat((r >> 16) as usize % 3);
                        for k in 0..n {
                            l.push_str(words[(next() as usize) % words.len()]);
                            l.push(if k % 3 == 2 { '(' } else { ' ' });
                        }
                        l.push_str(&format!("{});", next() % 10_000));
                        rec.push_str(&l);
                        rec.push('\n');
                        seen.push(l);
                        written += 1;
                    }
                    rec.into_bytes()
                })
                .collect()
        })
        .collect()
}

/// Run `f` (which processes `units` units) repeatedly for about `seconds`, at least
/// `min_passes` times; return the best units/s over passes.
fn best_rate(seconds: f64, min_passes: usize, units: f64, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut passes = 0;
    while passes < min_passes || start.elapsed().as_secs_f64() < seconds {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        passes += 1;
    }
    units / best
}

/// Measure this machine's compaction rates with the pipeline's own code
/// (L0 line dedup, exact verification, the encoder at `model` or the
/// hashing encoder when none is installed, the Szp codec), about `seconds`
/// per measurement, as a `lam-costmodel` device profile. Progress goes to `log`.
pub fn measure(model: Option<&Path>, seconds: f64, log: &mut dyn FnMut(&str)) -> Result<DeviceProfile> {
    let seconds = seconds.max(0.0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut notes = Vec::new();
    notes.push(format!(
        "best pass of repeated passes over ~{seconds} s per measurement, {threads} threads available; a machine shared with other work reads low"
    ));
    let sessions = synthetic_sessions(16, 40, 200);
    let hash_rate = line_hash_rate(&sessions, seconds, &mut notes, log);
    let (verify_rate, dim) = verify_rate(seconds, &mut notes, log)?;
    let (enc_rate, info) = encoder_rate(model, &sessions, seconds, &mut notes, log)?;
    let codec_rate = codec_rate(info.dim.max(1), seconds, &mut notes, log)?;
    let profile = DeviceProfile {
        format: PROFILE_FORMAT.into(),
        host: std::fs::read_to_string("/etc/hostname").map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into()),
        created_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        threads,
        line_hash_gb_s: hash_rate / 1e9,
        verify_pairs_per_s: verify_rate,
        verify_dim: dim as u32,
        encoder_tokens_per_s: enc_rate,
        encoder: info.model_id,
        codec_gb_s: Some(codec_rate / 1e9),
        notes,
    };
    profile.validate().map_err(|e| crate::Error::Input(format!("calibration gave an invalid profile: {e}")))?;
    Ok(profile)
}

/// L0: the real line-dedup pass over code-like sessions (hash, table lookup, stubs), bytes/s.
fn line_hash_rate(sessions: &[Vec<Vec<u8>>], seconds: f64, notes: &mut Vec<String>, log: &mut dyn FnMut(&str)) -> f64 {
    let bytes: usize = sessions.iter().flatten().map(|r| r.len()).sum();
    let mut buf = Vec::new();
    let hash_rate = best_rate(seconds, 3, bytes as f64, || {
        for s in sessions {
            let mut d = lam_hash::LineDedup::new();
            for (i, r) in s.iter().enumerate() {
                buf.clear();
                d.process(i as u32, "0123", "cat a.py", &[lam_hash::Segment::Text(r)], &mut buf);
            }
            black_box(&buf);
        }
    });
    notes.push(format!(
        "line_hash_gb_s: lam_hash::LineDedup::process (xxh3 per line, table lookup, stub runs) over {:.1} MB of synthetic code-like text with ~20% repeated lines (in blocks of 1-12), single thread; LAM's R_h (38.2 GB/s) is raw xxHash3 over a buffer",
        bytes as f64 / 1e6
    ));
    log(&format!("line hashing: {:.3} GB/s", hash_rate / 1e9));
    hash_rate
}

/// Verification: exact sq_l2, 65,536 candidate pairs at D = 768 (LAM Table
/// 22's benchmark), pairs/s; and the dimension measured at.
fn verify_rate(seconds: f64, notes: &mut Vec<String>, log: &mut dyn FnMut(&str)) -> Result<(f64, usize)> {
    let dim = 768;
    let retained = lam_core::random_unit_vectors(128, dim, 1);
    let queries = lam_core::random_unit_vectors(512, dim, 2);
    let pairs = 128.0 * 512.0;
    let verify_rate = best_rate(seconds, 3, pairs, || {
        let mut hits = 0usize;
        for q in queries.chunks_exact(dim) {
            for r in retained.chunks_exact(dim) {
                hits += (lam_lsh::sq_l2(black_box(q), black_box(r)) <= 0.1) as usize;
            }
        }
        black_box(hits);
    });
    log(&format!("verification: {:.1} M pairs/s", verify_rate / 1e6));
    // The rule itself (exhaustive index): pairs verified per second including its bookkeeping.
    let stream = lam_core::random_unit_vectors(1024, dim, 3);
    let t0 = Instant::now();
    let mut g = lam_lsh::Greedy::new(dim, Threshold::from_cosine(0.95)?, lam_lsh::ExhaustiveIndex::new());
    for (i, v) in stream.chunks_exact(dim).enumerate() {
        g.decide(i as u32, v)?;
    }
    let greedy_rate = g.stats().verified_pairs as f64 / t0.elapsed().as_secs_f64();
    notes.push(format!(
        "verify_pairs_per_s: lam_lsh::sq_l2 over 65,536 candidate pairs at D = 768 (128 retained x 512 queries, single thread); lam_lsh::Greedy with the exhaustive index verifies {:.1} M pairs/s including its bookkeeping ({} pairs)",
        greedy_rate / 1e6,
        g.stats().verified_pairs
    ));
    Ok((verify_rate, dim))
}

/// Encoder tokens/s: the BERT encoder when its model is installed, else the
/// hashing encoder (both through `EncoderSpec`), over real-sized windows.
fn encoder_rate(
    model: Option<&Path>,
    sessions: &[Vec<Vec<u8>>],
    seconds: f64,
    notes: &mut Vec<String>,
    log: &mut dyn FnMut(&str),
) -> Result<(f64, lam_core::EncoderInfo)> {
    let dir = model.map_or_else(lam_encode::default_model_dir, Path::to_path_buf);
    let backend = if lam_encode::has_model(&dir) {
        lam_encode::Backend::Bert
    } else {
        notes.push(format!(
            "encoder: no model at {} (install with `{}`); measured the model-free HashingEncoder instead, which is not the papers' encoder and reads far faster",
            dir.display(),
            lam_encode::INSTALL_HINT
        ));
        lam_encode::Backend::Hashing
    };
    let mut enc = lam_encode::EncoderSpec { backend, model: Some(dir), batch: 32 }.load()?;
    let info = enc.info();
    let text: Vec<u8> = sessions.iter().flatten().take(12).flat_map(|r| r.iter().copied()).collect();
    let mut spans = Vec::new();
    enc.chunks(&text, &mut spans)?;
    // Short passes, several of them: the best one is the least disturbed by other work.
    let windows: Vec<&[u8]> = spans.iter().map(|r| &text[r.clone()]).take(8).collect();
    let mut toks = Vec::new();
    let mut tokens = 0usize;
    for w in &windows {
        enc.token_spans(w, &mut toks)?;
        tokens += toks.len();
    }
    let mut emb = vec![0f32; windows.len() * info.dim];
    let mut failed = None;
    let enc_rate = best_rate(seconds, 3, tokens as f64, || {
        if let Err(e) = enc.encode_batch(&windows, &mut emb) {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    notes.push(format!(
        "encoder_tokens_per_s: {} encode_batch over {} windows of up to {} tokens ({} tokens), all threads",
        info.model_id,
        windows.len(),
        info.max_tokens,
        tokens
    ));
    log(&format!("encoder {}: {:.0} tokens/s", info.model_id, enc_rate));
    Ok((enc_rate, info))
}

/// Codec bytes/s: Szp fixed mode at rel 1e-2 (cuSZp's anchor setting) over
/// 4,096 unit vectors of dimension `cdim`.
fn codec_rate(cdim: usize, seconds: f64, notes: &mut Vec<String>, log: &mut dyn FnMut(&str)) -> Result<f64> {
    let cvals = lam_core::random_unit_vectors(4096, cdim, 4);
    let codec = lam_codec::open("szp-fixed-rel1e-2").map_err(|e| crate::Error::Input(format!("the calibration codec: {e}")))?;
    let shape = lam_core::Shape { rows: 4096, dim: cdim };
    let mut stream = Vec::new();
    let mut codec_failed = None;
    let codec_rate = best_rate(seconds, 3, (cvals.len() * 4) as f64, || {
        stream.clear();
        if let Err(e) = codec.encode(black_box(&cvals), shape, &mut stream) {
            codec_failed = Some(e);
        }
    });
    if let Some(e) = codec_failed {
        return Err(crate::Error::Input(format!("calibrating the codec: {e}")));
    }
    notes.push(format!(
        "codec_gb_s: lam_codec Szp fixed, rel 1e-2, compress of 4,096 random unit vectors of dimension {cdim} ({:.1} MB in, ratio {:.2}), all threads",
        (cvals.len() * 4) as f64 / 1e6,
        (cvals.len() * 4) as f64 / stream.len().max(1) as f64
    ));
    log(&format!("codec szp: {:.2} GB/s", codec_rate / 1e9));
    Ok(codec_rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_text_is_deterministic_and_repeats_lines() {
        let a = synthetic_sessions(1, 10, 50);
        assert_eq!(a, synthetic_sessions(1, 10, 50));
        let mut d = lam_hash::LineDedup::new();
        let mut out = Vec::new();
        let mut replaced = 0;
        for (i, r) in a[0].iter().enumerate() {
            out.clear();
            replaced += d.process(i as u32, "0123", "cat a.py", &[lam_hash::Segment::Text(r)], &mut out).lines_replaced;
        }
        assert!(replaced > 0, "the hashing benchmark exercises replacement");
    }
}
