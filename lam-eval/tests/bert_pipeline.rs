//! The pipeline with the real encoder (all-MiniLM-L6-v2 on the CPU): online
//! equals batch on real trajectories, and the deletion-set digest does not
//! depend on the encoder batch size.

use lam_core::Threshold;
use lam_encode::{BertEncoder, CachedEncoder};
use lam_operator::Config;

fn sample() -> Vec<lam_trajectory::read::Trajectory> {
    let root = lam_core::testsuite::corpus().join("swe-agent-demos/trajectories/demonstrations");
    let files = [
        root.join("function_calling_simple.traj"),
        root.join("replay__marshmallow-code__marshmallow-1867__function_calling_replace__install-1/marshmallow-code__marshmallow-1867.traj"),
    ];
    files.iter().flat_map(|f| lam_trajectory::read::read_path(f).unwrap()).collect()
}

#[test]
fn online_equals_batch_and_digest_is_batch_size_independent() {
    let dir = lam_encode::default_model_dir();
    assert!(dir.join("model.safetensors").is_file(), "model not found at {}: run `{}`", dir.display(), lam_encode::INSTALL_HINT);
    let trajs = sample();
    let cfg = Config::new(Threshold::from_cosine(0.95).unwrap());
    let mut digests: Vec<Vec<String>> = Vec::new();
    for batch in [4usize, 32] {
        let mut e = BertEncoder::load(&dir).unwrap();
        e.set_batch_size(batch);
        let mut enc = CachedEncoder::new(e);
        let mut ds = Vec::new();
        for t in &trajs {
            let run = lam_eval::report::run(cfg, &mut enc, t, false).unwrap();
            let r = &run.report;
            assert!(r.online_equals_batch, "{}: online and batch differ", r.session);
            assert!(r.delta_hat <= r.delta);
            eprintln!(
                "batch {batch}: {} records {} chunks {} dropped {} delta_hat {:.4} digest {}",
                r.session, r.records, r.chunks, r.chunks_dropped, r.delta_hat, r.digest
            );
            ds.push(r.digest.clone());
        }
        let (hits, misses) = enc.stats();
        assert!(hits >= misses, "the batch form re-used the online form's embeddings ({hits} hits, {misses} misses)");
        digests.push(ds);
    }
    assert_eq!(digests[0], digests[1], "deletion set depends on the encoder batch size");
}

/// The first three trajectories (sorted by path) of each supported source,
/// with L1 on all-MiniLM-L6-v2 at t = 0.95 and 0.99: online equals batch.
#[test]
fn online_equals_batch_with_minilm_on_a_corpus_sample() {
    let dir = lam_encode::default_model_dir();
    assert!(dir.join("model.safetensors").is_file(), "model not found at {}: run `{}`", dir.display(), lam_encode::INSTALL_HINT);
    let mut enc = CachedEncoder::new(BertEncoder::load(&dir).unwrap());
    let root = lam_core::testsuite::corpus();
    let mut dropped = 0;
    for src in ["mini-swe-agent-gemini3pro-swebench-verified", "coder-swebench-lite", "sweagent-java-multi-swe-bench", "swe-agent-demos"] {
        let inputs = lam_trajectory::read::expand_inputs(&[root.join(src)]).unwrap();
        let mut n = 0;
        for input in &inputs {
            let Some(trajs) = lam_trajectory::read::read_input(input).unwrap() else { continue };
            for t in trajs {
                for tc in [0.95, 0.99] {
                    let run = lam_eval::report::run(Config::new(Threshold::from_cosine(tc).unwrap()), &mut enc, &t, false).unwrap();
                    let r = &run.report;
                    assert!(r.online_equals_batch, "{}: online and batch differ at t={tc}", input.path.display());
                    assert!(r.delta_hat <= r.delta);
                    dropped += r.chunks_dropped;
                    eprintln!(
                        "{src} {} t={tc}: {} chunks, {} dropped, delta_hat {:.4}, min margin {:?}, digest {}",
                        r.session, r.chunks, r.chunks_dropped, r.delta_hat, r.min_margin, r.digest
                    );
                }
            }
            n += 1;
            if n == 3 {
                break;
            }
        }
    }
    assert!(dropped > 0, "L1 never fired on the sample");
}
