//! Reports of the operator on the example session and a real trajectory,
//! snapshotted (stubs and fingerprints only: no corpus text is stored).

use lam_core::Threshold;
use lam_encode::HashingEncoder;
use lam_eval::report;
use lam_operator::Config;

#[test]
fn example_session_snapshot() {
    let t = lam_trajectory::read::read_path(&lam_core::testsuite::example()).unwrap().remove(0);
    let mut enc = HashingEncoder::default();
    let run = report::run(Config::new(Threshold::from_cosine(0.95).unwrap()), &mut enc, &t, true).unwrap();
    assert!(run.report.online_equals_batch);
    let mut residual = String::new();
    for (r, a) in t.records.iter().zip(&run.online) {
        residual.push_str(&format!("=== {} §{} $ {}\n", a.record, a.id, r.action));
        residual.push_str(&String::from_utf8_lossy(&a.residual));
        if !a.residual.ends_with(b"\n") {
            residual.push('\n');
        }
    }
    insta::assert_snapshot!("edit_session_residual", residual);
    let r = &run.report;
    insta::assert_snapshot!(
        "edit_session_summary",
        format!(
            "records {} chunks {} dropped {} lines_replaced {} stubs {}\ntokens {} -> {}\ndelta_hat {:.6} digest {} residual {}",
            r.records, r.chunks, r.chunks_dropped, r.lines_replaced, r.stubs, r.tokens_in, r.tokens_out, r.delta_hat, r.digest, r.residual_digest
        )
    );
}

#[test]
fn real_trajectory_stub_snapshot() {
    // Stubs and residual fingerprints only: no corpus text enters the repository.
    let f = lam_core::testsuite::corpus().join("mini-swe-agent-gemini3pro-swebench-verified/trajs/astropy__astropy-12907.traj.json.gz");
    let t = lam_trajectory::read::read_path(&f).unwrap().remove(0);
    let mut enc = HashingEncoder::default();
    let run = report::run(Config::new(Threshold::from_cosine(0.95).unwrap()), &mut enc, &t, false).unwrap();
    assert!(run.report.online_equals_batch);
    let mut s = String::new();
    for a in &run.online {
        s.push_str(&format!(
            "{} §{} {}B -> {}B residual {}\n",
            a.record,
            a.id,
            t.records[a.record as usize].observation.len(),
            a.residual.len(),
            report::residual_digest(std::iter::once(a.residual.as_slice()))
        ));
        for st in &a.stubs {
            s.push_str(&format!("    {st}\n"));
        }
    }
    s.push_str(&format!("digest {} delta_hat {:.6}\n", run.report.digest, run.report.delta_hat));
    insta::assert_snapshot!("astropy_12907_stubs", s);
}
