//! The faithful residual: every line the model has not seen reaches it, and
//! every residual reads back to its original byte for byte from the model's
//! own context (`lam_core::expand`), over generated agent sessions (files
//! read, edited and read again, with and without line numbers; checks re-run
//! with a changed line; tables of alike rows; numbers and timestamps), both
//! encoders, both orders, several thresholds. The paper's residual is the
//! control: on the same sessions it hides new lines.

use lam_core::expand::{Seen, expand};
use lam_core::newlines::NewLines;
use lam_core::{Encoder, Record, Threshold};
use lam_encode::{BertEncoder, HashingEncoder};
use lam_operator::{Config, Order, Residual, Session, compact_batch};
use proptest::prelude::*;

/// One step of a generated session.
#[derive(Debug, Clone)]
enum Step {
    /// Read the file, plain (`cat`) or numbered (Claude Code's `Read`).
    Read { numbered: bool },
    /// Change line `at` to a new value.
    Edit { at: usize, value: u32 },
    /// Insert a line before line `at`.
    Insert { at: usize, value: u32 },
    /// Run the checks: `failed` of them fail, in `ms` milliseconds.
    Check { failed: usize, ms: u32 },
    /// Print a table of alike rows, one value different.
    Table { rows: usize, odd: usize, value: u32 },
    /// A line with the time.
    Date { seconds: u32 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => any::<bool>().prop_map(|numbered| Step::Read { numbered }),
        2 => (0usize..40, 0u32..9).prop_map(|(at, value)| Step::Edit { at, value }),
        1 => (0usize..40, 0u32..9).prop_map(|(at, value)| Step::Insert { at, value }),
        2 => (0usize..3, 0u32..400).prop_map(|(failed, ms)| Step::Check { failed, ms }),
        1 => (5usize..45, 0usize..45, 0u32..3).prop_map(|(rows, odd, value)| Step::Table { rows, odd, value }),
        1 => (0u32..100).prop_map(|seconds| Step::Date { seconds }),
    ]
}

/// The session's tool calls (action, output), played from `steps` over a
/// 30-line file.
fn play(steps: &[Step]) -> Vec<(String, Vec<u8>)> {
    let mut file: Vec<String> = (0..30).map(|i| format!("    result_{i} = transform(values[{i}], scale=SCALE, offset={})", i * 3)).collect();
    file[0] = "SCALE = 3".into();
    let mut out = Vec::new();
    for s in steps {
        let (action, text) = match *s {
            Step::Read { numbered: false } => ("cat big.py".to_string(), file.iter().map(|l| format!("{l}\n")).collect()),
            Step::Read { numbered: true } => ("Read big.py".to_string(), file.iter().enumerate().map(|(i, l)| format!("{:>6}→{l}\n", i + 1)).collect()),
            Step::Edit { at, value } => {
                let at = at % file.len();
                file[at] = format!("    result_{at} = transform(values[{at}], scale=SCALE, offset={value})");
                ("Edit big.py".to_string(), "The file big.py has been updated.\n".to_string())
            }
            Step::Insert { at, value } => {
                file.insert(at % file.len(), format!("    inserted = {value}  # a new line"));
                ("Edit big.py".to_string(), "The file big.py has been updated.\n".to_string())
            }
            Step::Check { failed, ms } => ("pytest -q tests".to_string(), check(failed, ms)),
            Step::Table { rows, odd, value } => {
                let t = (0..rows).map(|r| format!("row {r}: value {} status ok\n", if r == odd { 1000 + value } else { r as u32 * r as u32 + 7 })).collect();
                ("python table.py".to_string(), t)
            }
            Step::Date { seconds } => ("date".to_string(), format!("Wed Dec  3 19:29:{seconds:02} UTC 2026\n")),
        };
        out.push((action, text.into_bytes()));
    }
    out
}

/// A check run's output: 25 cases, the first `failed` failing.
fn check(failed: usize, ms: u32) -> String {
    let mut s = String::from("============================= test session starts ==============================\ncollected 25 items\n\n");
    for i in 0..25 {
        s += &format!("tests/test_sampled.py::test_case_{i} {}\n", if i < failed { "FAILED" } else { "PASSED" });
    }
    let summary = if failed == 0 { format!("25 passed in 0.{ms:03}s") } else { format!("{failed} failed, {} passed in 0.{ms:03}s", 25 - failed) };
    s + &format!("============================== {summary} ==============================\n")
}

fn records(calls: &[(String, Vec<u8>)]) -> Vec<Record> {
    calls.iter().enumerate().map(|(i, (a, o))| Record { index: i as u32, action: a.clone(), observation: o.clone(), returncode: Some(0) }).collect()
}

/// Admit every record online and in batch (which must agree); check that
/// no new line is hidden and that every residual reads back exactly.
fn check_faithful(cfg: Config, enc: &mut dyn Encoder, recs: &[Record]) -> Result<(), String> {
    let mut s = Session::new(cfg, enc.info().dim).map_err(|e| e.to_string())?;
    let mut res = Vec::new();
    for r in recs {
        res.push(s.admit(&mut *enc, r).map_err(|e| e.to_string())?.residual);
    }
    let batch = compact_batch(cfg, &mut *enc, recs).map_err(|e| e.to_string())?;
    if batch.admissions.iter().map(|a| &a.residual).ne(res.iter()) {
        return Err("online and batch residuals differ".into());
    }
    let names: Vec<String> = recs.iter().map(|r| lam_core::action::referent(&r.action)).collect();
    let mut seen = NewLines::new();
    for (i, r) in recs.iter().enumerate() {
        let hidden = seen.observe(&r.observation, &res[i]).hidden;
        if let Some(line) = hidden.first() {
            return Err(format!("record {i} hides the new line {:?}:\n{}", String::from_utf8_lossy(line), String::from_utf8_lossy(&res[i])));
        }
        let earlier: Vec<Seen<'_>> = (0..i).map(|k| Seen { call: &names[k], residual: &res[k], output: &recs[k].observation }).collect();
        let back = expand(&res[i], &names[i], &earlier).map_err(|e| format!("record {i}: {e}"))?;
        if back.text != r.observation {
            return Err(format!("record {i} reads back otherwise:\n{}", String::from_utf8_lossy(&back.text)));
        }
    }
    Ok(())
}

fn config(t: f64, l0_first: bool, counted: bool) -> Config {
    static SIMPLE: lam_core::SimpleCounter = lam_core::SimpleCounter;
    let mut cfg = Config::new(Threshold::from_cosine(t).unwrap());
    if l0_first {
        cfg.order = Order::L0L1;
    }
    if counted {
        cfg = cfg.with_counter(&SIMPLE);
    }
    cfg
}

fn bert() -> BertEncoder {
    BertEncoder::load(&lam_encode::default_model_dir()).expect("the default model (bash scripts/install-model.sh)")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn no_new_line_is_hidden_and_every_residual_reads_back(
        steps in proptest::collection::vec(step(), 1..14),
        t in prop_oneof![Just(0.8), Just(0.9), Just(0.95), Just(0.99)],
        l0_first in any::<bool>(),
        counted in any::<bool>(),
    ) {
        let recs = records(&play(&steps));
        let mut enc = HashingEncoder::new(64, 12);
        check_faithful(config(t, l0_first, counted), &mut enc, &recs).map_err(TestCaseError::fail)?;
    }
}

proptest! {
    // The default encoder: fewer cases (each admission runs BERT).
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn the_same_with_the_default_encoder(
        steps in proptest::collection::vec(step(), 1..10),
        t in prop_oneof![Just(0.9), Just(0.95), Just(0.99)],
        l0_first in any::<bool>(),
    ) {
        let recs = records(&play(&steps));
        check_faithful(config(t, l0_first, true), &mut bert(), &recs).map_err(TestCaseError::fail)?;
    }
}

/// New lines the paper's residual hides in these records (the control).
fn paper_hides(enc: &mut dyn Encoder, recs: &[Record]) -> usize {
    let cfg = config(0.95, false, true).with_residual(Residual::Paper);
    let mut s = Session::new(cfg, enc.info().dim).unwrap();
    let mut seen = NewLines::new();
    recs.iter().map(|r| seen.observe(&r.observation, &s.admit(&mut *enc, r).unwrap().residual).hidden.len()).sum()
}

/// The three cases that were reported, with both encoders: the faithful
/// residual forwards every changed line; the paper's residual hid them.
#[test]
fn reported_cases_reach_the_model() {
    let edit = play(&[Step::Read { numbered: true }, Step::Edit { at: 0, value: 4 }, Step::Read { numbered: true }]);
    let mut edited = edit.clone();
    edited[1].1 = b"The file big.py has been updated.\n".to_vec();
    edited[2].1 = String::from_utf8(edit[0].1.clone()).unwrap().replacen("SCALE = 3", "SCALE = 4", 1).into_bytes();
    let rows = vec![("cat rows.py".to_string(), (0..40).map(|i| format!("print('row {i}: value', {i} * {i} + 7, 'ok')\n")).collect::<String>().into_bytes())];
    let checks = play(&[Step::Check { failed: 1, ms: 410 }, Step::Check { failed: 3, ms: 380 }, Step::Check { failed: 0, ms: 350 }]);
    for (name, calls, must) in [
        ("edit", &edited, vec!["     1→SCALE = 4"]),
        ("rows", &rows, vec!["print('row 17: value', 17 * 17 + 7, 'ok')", "print('row 35: value', 35 * 35 + 7, 'ok')"]),
        (
            "checks",
            &checks,
            vec!["tests/test_sampled.py::test_case_0 PASSED", "============================== 25 passed in 0.350s =============================="],
        ),
    ] {
        let recs = records(calls);
        let last = recs.last().unwrap();
        for enc in [&mut HashingEncoder::default() as &mut dyn Encoder, &mut bert()] {
            check_faithful(config(0.95, false, true), &mut *enc, &recs).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut s = Session::new(config(0.95, false, true), enc.info().dim).unwrap();
            let res: Vec<Vec<u8>> = recs.iter().map(|r| s.admit(&mut *enc, r).unwrap().residual).collect();
            let shown = String::from_utf8_lossy(res.last().unwrap()).into_owned();
            for line in &must {
                assert!(shown.lines().any(|l| l == *line), "{name} ({}): `{line}` not forwarded:\n{shown}", enc.info().model_id);
            }
            assert!(res.last().unwrap().len() < last.observation.len() || recs.len() == 1, "{name}: nothing removed");
        }
    }
    // The control: the paper's residual hides some of these lines with the default encoder.
    let hidden: usize = [&edited, &rows, &checks].iter().map(|c| paper_hides(&mut bert(), &records(c))).sum();
    assert!(hidden > 0, "the paper's residual was expected to hide lines here");
}

/// The difference form is on by default (issue 55): a file read again
/// after three edits is one stub naming the earlier read (`last time`: the
/// same call run again) plus a hunk per edited line, reads back exactly,
/// and costs fewer tokens than the line stubs `with_delta(false)` writes
/// for it.
#[test]
fn a_file_read_again_is_one_stub_and_its_difference_by_default() {
    let edits = [5, 15, 25].map(|at| Step::Edit { at, value: 1 });
    let steps: Vec<Step> = [Step::Read { numbered: false }].into_iter().chain(edits).chain([Step::Read { numbered: false }]).collect();
    let recs = records(&play(&steps));
    let mut enc = HashingEncoder::default();
    let on = config(0.95, false, true);
    assert!(on.delta, "the difference form is the default");
    let off = on.with_delta(false);
    for cfg in [on, off] {
        check_faithful(cfg, &mut enc, &recs).unwrap_or_else(|e| panic!("delta {}: {e}", cfg.delta));
    }
    let run = |cfg: Config| -> Vec<Vec<u8>> {
        let mut s = Session::new(cfg, enc.info().dim).unwrap();
        let mut enc = HashingEncoder::default();
        recs.iter().map(|r| s.admit(&mut enc, r).unwrap().residual).collect()
    };
    let (with, without) = (run(on), run(off));
    let deltas = |res: &[Vec<u8>]| res.iter().filter(|r| lam_core::stub::parse_delta(r).unwrap().is_some()).count();
    assert!(deltas(&with) >= 1, "no difference form:\n{}", String::from_utf8_lossy(with.last().unwrap()));
    assert_eq!(deltas(&without), 0);
    let tokens = |res: &[Vec<u8>]| res.iter().map(|r| lam_core::TokenCounter::count(&lam_core::SimpleCounter, r)).sum::<usize>();
    assert!(tokens(&with) < tokens(&without), "{} vs {} tokens", tokens(&with), tokens(&without));
    let last = String::from_utf8_lossy(with.last().unwrap()).into_owned();
    assert!(last.starts_with("[lam: as last time except these lines; _recall §"), "{last}");
    assert_eq!(last.lines().filter(|l| l.starts_with("@@ -")).count(), 3, "{last}");
}
