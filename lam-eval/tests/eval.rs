//! `lam eval` checks itself as the paper's harness does (LAM F.3, F.6): the
//! no-compaction and L0-only rows retain all evidence, L1 composed with L0
//! scores what L1 scores alone, RSC is non-increasing along the sweep,
//! masking with k = infinity removes nothing, online equals batch at every
//! threshold; plus a snapshot of the headline rows on a small fixed sample.

use lam_encode::{CachedEncoder, HashingEncoder};
use lam_eval::{self as eval, NoProgress, Options};
use std::path::PathBuf;

fn sample() -> Vec<PathBuf> {
    let c = lam_core::testsuite::corpus();
    let m = c.join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let s = c.join("coder-swebench-lite/trajs");
    vec![
        m.join("astropy__astropy-12907.traj.json.gz"),
        m.join("astropy__astropy-13236.traj.json.gz"),
        m.join("django__django-10973.traj.json.gz"),
        s.join("django__django-10914.traj.gz"),
    ]
}

fn opts() -> Options {
    Options { thresholds: vec![0.99, 0.95, 0.90, 0.80], masking: vec![3, 10, 50, usize::MAX], controls: false, semdedup_seeds: 3, ..Options::default() }
}

fn run(o: &Options) -> eval::EvalReport {
    let mut enc = CachedEncoder::new(HashingEncoder::default());
    eval::evaluate(&sample(), &mut enc, o, &mut NoProgress).unwrap()
}

#[test]
fn harness_checks_hold_on_real_trajectories() {
    let r = run(&opts());
    assert_eq!(r.trajectories, 4);
    assert_eq!(r.with_gold, 4, "every sample id has a gold patch");
    assert!(r.with_outcome >= 3, "mini-swe-agent and CodeR record outcomes");
    let none = r.baselines.iter().find(|b| b.baseline == "none").unwrap();
    let l0 = r.baselines.iter().find(|b| b.baseline == "l0").unwrap();
    assert!(none.row.lines_witnessed > 0);
    for b in [none, l0] {
        assert_eq!(b.row.evidence_micro, Some(1.0), "{} must keep every evidence line", b.baseline);
        assert_eq!(b.row.trajectories_intact, Some(1.0));
    }
    assert_eq!(none.row.removal_net, 0.0);
    assert!(l0.row.removal_gross > 0.0);
    // RSC(0) is the recorded resolve rate.
    assert_eq!(none.row.rsc, Some(r.resolved as f64 / r.with_outcome as f64));
    let inf = r.baselines.iter().find(|b| b.baseline == "masking" && b.param == Some(usize::MAX as f64)).unwrap();
    assert_eq!(inf.row.removal_net, 0.0, "masking with k = infinity removes nothing");
    assert_eq!(inf.row.evidence_micro, Some(1.0));
    for b in r.baselines.iter().filter(|b| b.baseline == "masking") {
        assert!(b.row.removal_gross >= b.row.removal_net, "masking k={:?}: the placeholders cost tokens", b.param);
    }
    // Per input: the inputs partition the run; the pooled removal is their token-weighted mean.
    assert_eq!(r.by_input.len(), 4);
    assert_eq!(r.by_input.iter().map(|i| i.tokens).sum::<u64>(), r.tokens);
    assert_eq!(r.by_input.iter().map(|i| i.trajectories).sum::<u64>(), r.trajectories);
    for (ti, t) in r.thresholds.iter().enumerate() {
        let w: f64 = r.by_input.iter().map(|i| i.rows[ti].removal_l1_l0_net * i.tokens as f64).sum::<f64>() / r.tokens as f64;
        assert!((w - t.l1_l0.removal_net).abs() < 1e-9, "t={}: {w} vs {}", t.threshold, t.l1_l0.removal_net);
        let dh = r.by_input.iter().map(|i| i.rows[ti].delta_hat).fold(0.0, f64::max);
        assert_eq!(dh, t.delta_hat);
    }
    // The evidence metric is specific: another task's trajectory witnesses
    // few of this task's lines (paper F.3: 0.7 %).
    let c = r.evidence_control.as_ref().unwrap();
    assert_eq!(c.trajectories, r.with_witnessed);
    assert!(c.lines > 0 && c.share < 0.25, "{c:?}");
    assert_eq!(r.rsc_non_increasing, Some(true));
    for t in &r.thresholds {
        assert!(t.online_equals_batch, "t={}: online and batch differ", t.threshold);
        assert!(t.delta_hat <= t.delta, "t={}: delta_hat {} > delta {}", t.threshold, t.delta_hat, t.delta);
        assert_eq!(t.l1_alone_evidence_micro, t.l1_l0.evidence_micro, "L1 then L0 must score what L1 scores alone");
        assert!(t.l1_l0.evidence_recoverable >= t.l1_l0.evidence_micro);
        assert_eq!(t.l1_l0.evidence_recoverable, Some(1.0), "every LAM deletion is recoverable through its stub");
        assert!(t.l1_l0.removal_gross >= t.l1_l0.removal_net);
        let b = &t.bracket;
        if let Some(r2) = b.log2_r_2delta {
            assert!(r2 <= b.log2_r_delta + 1e-12, "greedy at 2 delta keeps no more than at delta");
            assert!(b.ceiling.unwrap() + 1e-12 >= b.chunks_removed, "removal ceiling");
        }
        assert!(b.h_pi <= b.log2_r_delta + 1e-9, "H(pi(X)) <= log2 |R|");
        assert!(t.retrieval.queries > 0);
    }
    // Removal grows as the threshold loosens (greedy at a larger radius keeps fewer chunks).
    let keep: Vec<f64> = r.thresholds.iter().map(|t| t.retrieval.keep).collect();
    assert!(keep.windows(2).all(|w| w[1] <= w[0]), "{keep:?}");
    // SemDeDup: both scopes, every seed reported, Jaccard in [0, 1].
    for scope in ["semdedup-global", "semdedup-trajectory"] {
        let rows: Vec<_> = r.baselines.iter().filter(|b| b.baseline == scope).collect();
        assert!(!rows.is_empty());
        for b in rows {
            assert_eq!(b.seed_removal.as_ref().unwrap().len(), 3);
            let j = b.jaccard_mean.unwrap_or(1.0);
            assert!((0.0..=1.0).contains(&j));
        }
    }
    // The report renders and the plots are SVG.
    let dir = std::env::temp_dir().join(format!("lam-eval-test-{}", std::process::id()));
    let files = eval::write_report(&r, &dir).unwrap();
    assert_eq!(files.len(), 5);
    let svg = std::fs::read_to_string(dir.join("removal-vs-evidence.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Headline") && md.contains("ECR"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn headline_rows_snapshot() {
    let mut o = opts();
    o.semdedup = false;
    let a = run(&o);
    let b = run(&o);
    let rows: Vec<serde_json::Value> =
        a.headline().iter().map(|h| serde_json::to_value(h).unwrap()).chain(a.baseline_headline().iter().map(|h| serde_json::to_value(h).unwrap())).collect();
    let again: Vec<serde_json::Value> =
        b.headline().iter().map(|h| serde_json::to_value(h).unwrap()).chain(b.baseline_headline().iter().map(|h| serde_json::to_value(h).unwrap())).collect();
    assert_eq!(rows, again, "two runs give identical rows and digests");
    for h in a.headline() {
        let p = h.stub_parts_l1_l0;
        let sum = p.handles + p.calls + p.line_numbers + p.rest;
        assert!(p.handles > 0.0 && p.calls > 0.0 && p.line_numbers > 0.0, "{p:?}");
        assert!((sum - h.stub_cost_l1_l0).abs() <= 0.05 * h.stub_cost_l1_l0, "the parts ({sum}) make up the stub cost ({})", h.stub_cost_l1_l0);
    }
    let rounded: Vec<serde_json::Value> = rows.into_iter().map(round).collect();
    insta::assert_snapshot!("eval_headline_hashing_4_trajectories", serde_json::to_string_pretty(&rounded).unwrap());
}

/// Round floats to 6 digits so the snapshot does not depend on the last ulp of a sum.
fn round(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => serde_json::json!((n.as_f64().unwrap() * 1e6).round() / 1e6),
        serde_json::Value::Object(m) => serde_json::Value::Object(m.into_iter().map(|(k, v)| (k, round(v))).collect()),
        other => other,
    }
}

#[test]
fn locomo_reader_reads_every_dialogue_turn() {
    let turns = eval::evidence::read_locomo(&lam_core::testsuite::corpus().join("locomo/locomo10.json")).unwrap();
    // LAM B.2: 17,296,021 pairs = 5,882 choose 2.
    assert_eq!(turns.len(), 5882);
    assert!(turns.iter().all(|t| !t.text.is_empty()));
}

#[test]
fn evidence_lines_of_a_real_gold_patch_are_witnessed() {
    let g = lam_eval::evidence::GoldPatches::load(&lam_core::testsuite::corpus().join("swebench-gold-patches")).unwrap();
    assert!(g.len() >= 500);
    let lines = lam_eval::evidence::evidence_lines(g.get("django__django-10973").unwrap());
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|l| l.chars().count() >= 12 && l.trim() == l));
}

/// The same harness checks with the real encoder (all-MiniLM-L6-v2, installed
/// by `scripts/test.sh`) on two small real trajectories, so the report the
/// command prints is checked with the embeddings it is run with.
#[test]
fn harness_checks_hold_with_minilm() {
    let dir = lam_encode::default_model_dir();
    assert!(dir.join("model.safetensors").is_file(), "model not found at {}: run `{}`", dir.display(), lam_encode::INSTALL_HINT);
    let m = lam_core::testsuite::corpus().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let inputs = vec![m.join("django__django-16255.traj.json.gz"), m.join("django__django-17029.traj.json.gz")];
    let o = Options { thresholds: vec![0.95, 0.85], masking: vec![5, usize::MAX], controls: false, semdedup: false, ..Options::default() };
    let mut enc = CachedEncoder::new(lam_encode::BertEncoder::load(&dir).unwrap());
    let r = eval::evaluate(&inputs, &mut enc, &o, &mut NoProgress).unwrap();
    assert_eq!(r.trajectories, 2);
    assert!(r.encoder.starts_with("all-MiniLM-L6-v2"), "{}", r.encoder);
    let none = r.baselines.iter().find(|b| b.baseline == "none").unwrap();
    assert!(none.row.lines_witnessed > 0, "the sample witnesses gold-patch lines");
    for b in r.baselines.iter().filter(|b| b.baseline == "none" || b.baseline == "l0") {
        assert_eq!(b.row.evidence_micro, Some(1.0), "{}", b.baseline);
    }
    let mask5 = r.baselines.iter().find(|b| b.baseline == "masking" && b.param == Some(5.0)).unwrap();
    assert!(mask5.row.removal_gross > mask5.row.removal_net && mask5.row.removal_net > 0.0, "masking charges its placeholders");
    for t in &r.thresholds {
        assert!(t.online_equals_batch, "t={}", t.threshold);
        assert!(t.delta_hat <= t.delta);
        assert_eq!(t.l1_alone_evidence_micro, t.l1_l0.evidence_micro);
        assert_eq!(t.l1_l0.evidence_recoverable, Some(1.0), "every LAM deletion is recoverable through its stub");
    }
    // Looser threshold: at least as many chunks dropped.
    assert!(r.thresholds[1].retrieval.keep <= r.thresholds[0].retrieval.keep);
    assert!(r.thresholds[1].distances.substitutions > 0, "MiniLM finds near duplicates at t = 0.85 in a real trajectory");
}

#[test]
fn masking_placeholder_counts_lines() {
    assert_eq!(arc_view::masking_placeholder(b""), "");
    assert_eq!(arc_view::masking_placeholder(b"a\nb\n"), "Old environment output: (2 lines omitted)");
    assert_eq!(arc_view::masking_placeholder(b"a\nb"), "Old environment output: (2 lines omitted)");
    assert_eq!(arc_view::masking_placeholder(b"\xff"), "Old environment output: (1 lines omitted)");
}

/// `--sample N` evaluates N trajectories: a metadata file in the corpus folder
/// (mini-swe-agent's run-level JSON sorts 15th by the SHA-256 of its name) is
/// skipped, not counted.
#[test]
fn sample_counts_trajectories_not_files() {
    let dir = lam_core::testsuite::corpus().join("mini-swe-agent-gemini3pro-swebench-verified");
    let o = Options { sample: Some(15), thresholds: vec![0.95], masking: vec![], semdedup: false, controls: false, ..Options::default() };
    let mut enc = CachedEncoder::new(HashingEncoder::default());
    let r = eval::evaluate(&[dir], &mut enc, &o, &mut NoProgress).unwrap();
    assert_eq!(r.trajectories, 15);
    assert_eq!(r.with_gold, 15);
}

/// The report opens with one plain sentence per threshold, before any paper
/// metric; the paper's terms are glossed under the headline table.
#[test]
fn report_opens_with_plain_sentences() {
    let corpus = lam_core::testsuite::corpus();
    let m = corpus.join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let inputs = vec![m.join("astropy__astropy-12907.traj.json.gz"), m.join("django__django-10973.traj.json.gz")];
    let o = Options { thresholds: vec![0.99, 0.95, 0.90], masking: vec![5], semdedup: false, ..Options::default() };
    let mut enc = CachedEncoder::new(HashingEncoder::default());
    let r = eval::evaluate(&inputs, &mut enc, &o, &mut NoProgress).unwrap();
    assert!(r.locomo.is_none(), "controls run only when asked");
    let md = eval::markdown(&r);
    let canon = std::fs::canonicalize(&corpus).unwrap().display().to_string();
    let head = md.lines().take(15).collect::<Vec<_>>().join("\n").replace(&canon, "<corpus>").replace(&corpus.display().to_string(), "<corpus>");
    insta::assert_snapshot!("eval_report_opening_hashing_2_trajectories", head);
    let first_sentence = md.find("- At t=0.99: ").unwrap();
    for paper in ["RSC", "BFR@", "ECR@", "δ̂", "metric-entropy", "Table 14", "## Headline"] {
        assert!(md.find(paper).unwrap() > first_sentence, "{paper} before the plain sentences");
    }
    assert!(md.contains("Controls not run") && md.contains("`lam eval --controls`"));
    let glossary = &md[md.find("\nTerms:\n").unwrap()..md.find("\n## Evidence").unwrap()];
    for term in ["**RSC**", "**BFR@16K**", "**ECR@τ**", "**δ̂ (delta-hat)**", "**metric-entropy bracket**", "**t' = 4t−3**", "**paper Table 14**"] {
        assert!(glossary.contains(term), "{term} has no gloss");
    }
}
