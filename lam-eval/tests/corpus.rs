//! Online and batch residuals are byte-identical on every trajectory of
//! `../shared/corpus` that the readers support, L0 and L1 (hashing encoder),
//! and every residual reads back to its original byte for byte the way a
//! model reads it (`lam_core::expand`, the default stubs and difference form).

use lam_core::Threshold;
use lam_encode::{EmbeddingsWriter, HashingEncoder, PrecomputedEncoder};
use lam_operator::Config;
use lam_trajectory::read;
use rayon::prelude::*;

const SOURCES: [&str; 5] =
    ["mini-swe-agent-gemini3pro-swebench-verified", "coder-swebench-lite", "sweagent-java-multi-swe-bench", "swe-agent-demos", "agent-transcripts"];

#[test]
fn online_equals_batch_on_every_supported_trajectory() {
    let root = lam_core::testsuite::corpus();
    for src in SOURCES {
        let inputs = read::expand_inputs(&[root.join(src)]).unwrap();
        // Folders also hold run metadata (results.json); those are skipped, trajectories are not.
        let files: Vec<_> = inputs.iter().filter(|i| read::read_input(i).unwrap_or_else(|e| panic!("{e}")).is_some()).map(|i| i.path.clone()).collect();
        assert!(inputs.iter().all(|i| i.optional || files.contains(&i.path)));
        assert!(!files.is_empty(), "{src}: no trajectories");
        let results: Vec<(usize, usize, usize, bool)> = files
            .par_iter()
            .map(|f| {
                let mut n = (0, 0, 0, true);
                for t in read::read_path(f).unwrap_or_else(|e| panic!("{e}")) {
                    // Stubs judged by bytes at two thresholds, and by cl100k tokens as `lam eval` does.
                    for (tc, counted) in [(0.95, false), (0.99, false), (0.95, true)] {
                        let cfg = Config::new(Threshold::from_cosine(tc).unwrap());
                        let cfg = if counted { cfg.with_counter(&lam_trajectory::Cl100k) } else { cfg };
                        let mut enc = HashingEncoder::default();
                        let run = lam_eval::report::run(cfg, &mut enc, &t, false).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                        let r = &run.report;
                        assert!(r.online_equals_batch, "{}: online and batch differ at t={tc}", f.display());
                        assert!(r.delta_hat <= r.delta, "{}: delta_hat {} > delta {}", f.display(), r.delta_hat, r.delta);
                        let residuals: Vec<&[u8]> = run.online.iter().map(|a| a.residual.as_slice()).collect();
                        if let Err(e) = reads_back(&t, &residuals) {
                            panic!("{} at t={tc} (counted: {counted}): {e}", f.display());
                        }
                        n.0 += 1;
                        n.1 += r.records;
                        n.2 += r.chunks_dropped;
                    }
                }
                n
            })
            .collect();
        let sessions: usize = results.iter().map(|r| r.0).sum();
        let records: usize = results.iter().map(|r| r.1).sum();
        let dropped: usize = results.iter().map(|r| r.2).sum();
        eprintln!("{src}: {} files, {sessions} runs, {records} records, {dropped} chunks dropped", files.len());
        assert!(records > 0 && dropped > 0, "{src}: L1 never fired");
    }
}

#[test]
fn precomputed_embeddings_reproduce_the_run() {
    let root = lam_core::testsuite::corpus();
    let files = read::expand(&[root.join("swe-agent-demos")]).unwrap();
    let cfg = Config::new(Threshold::from_cosine(0.95).unwrap());
    for f in files.iter().take(8) {
        for t in read::read_path(f).unwrap() {
            let mut h = HashingEncoder::default();
            let a = lam_eval::report::run(cfg, &mut h, &t, false).unwrap();
            let mut w = EmbeddingsWriter::new(Vec::new(), &lam_core::Encoder::info(&h)).unwrap();
            for (rec, adm) in t.records.iter().zip(&a.online) {
                let ranges: Vec<_> = adm.chunks.iter().map(|c| c.range.clone()).collect();
                let texts: Vec<&[u8]> = ranges.iter().map(|c| &rec.observation[c.clone()]).collect();
                let mut v = vec![0.0; texts.len() * 384];
                lam_core::Encoder::encode_batch(&mut h, &texts, &mut v).unwrap();
                w.observation(&rec.observation, &ranges, &v).unwrap();
            }
            let file = w.finish().unwrap();
            let mut p = PrecomputedEncoder::read(&file[..], "mem").unwrap();
            let b = lam_eval::report::run(cfg, &mut p, &t, false).unwrap();
            assert_eq!(a.report.digest, b.report.digest, "{}", f.display());
            assert_eq!(a.report.residual_digest, b.report.residual_digest, "{}", f.display());
        }
    }
}

/// Every residual of `t` read back against the outputs before it (their
/// calls named as stubs name them) gives the original output exactly.
fn reads_back(t: &lam_trajectory::Trajectory, residuals: &[&[u8]]) -> Result<(), String> {
    let names: Vec<String> = t.records.iter().map(|r| lam_core::action::referent(&r.action)).collect();
    for (i, (rec, res)) in t.records.iter().zip(residuals).enumerate() {
        let earlier: Vec<lam_core::expand::Seen<'_>> =
            (0..i).map(|k| lam_core::expand::Seen { call: &names[k], residual: residuals[k], output: &t.records[k].observation }).collect();
        let back = lam_core::expand::expand(res, &names[i], &earlier).map_err(|e| format!("record {i}: {e}"))?;
        if back.text != rec.observation {
            let (a, b) = (String::from_utf8_lossy(&back.text), String::from_utf8_lossy(&rec.observation));
            let at = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(a.lines().count().min(b.lines().count()));
            let show = |s: &str| s.lines().skip(at.saturating_sub(2)).take(5).collect::<Vec<_>>().join("\n");
            return Err(format!(
                "record {i} ({}) reads back otherwise from line {}:\n{}\n--- instead of:\n{}\n--- residual:\n{}",
                names[i],
                at + 1,
                show(&a),
                show(&b),
                String::from_utf8_lossy(res)
            ));
        }
    }
    Ok(())
}
