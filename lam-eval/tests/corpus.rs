//! Online and batch residuals are byte-identical on every trajectory of
//! `../shared/corpus` that the readers support, L0 and L1 (hashing encoder).

use lam_core::Threshold;
use lam_encode::{EmbeddingsWriter, HashingEncoder, PrecomputedEncoder};
use lam_operator::Config;
use lam_trajectory::read;
use rayon::prelude::*;

const SOURCES: [&str; 4] = ["mini-swe-agent-gemini3pro-swebench-verified", "coder-swebench-lite", "sweagent-java-multi-swe-bench", "swe-agent-demos"];

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
                    for tc in [0.95, 0.99] {
                        let cfg = Config::new(Threshold::from_cosine(tc).unwrap());
                        let mut enc = HashingEncoder::default();
                        let run = lam_eval::report::run(cfg, &mut enc, &t, false).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                        let r = &run.report;
                        assert!(r.online_equals_batch, "{}: online and batch differ at t={tc}", f.display());
                        assert!(r.delta_hat <= r.delta, "{}: delta_hat {} > delta {}", f.display(), r.delta_hat, r.delta);
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
