use super::*;
use crate::naive::NaiveLineDedup;
use lam_core::SimpleCounter;
use lam_core::stub::{ChunkRef, ChunkStub};
use proptest::prelude::*;
use std::collections::HashSet;

static SIMPLE: SimpleCounter = SimpleCounter;

fn id(i: usize) -> String {
    format!("{i:08x}")
}

fn run(records: &[&[u8]]) -> (LineDedup, Vec<Vec<u8>>) {
    let mut d = LineDedup::new();
    let mut outs = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut out = Vec::new();
        d.process(i as u32, &id(i), &[Segment::Text(r)], &mut out);
        outs.push(out);
    }
    (d, outs)
}

fn lines(b: &[u8]) -> Vec<&[u8]> {
    b.split(|&c| c == b'\n').collect()
}

/// (lines, cited id, cited line) of an L0 stub line, through the one parser
/// (`own` fills in a citation of the record itself).
fn parse_stub(line: &[u8], own: &str) -> Option<(usize, String, usize)> {
    let mut s = Stub::parse_bytes(line)?;
    s.set_own_id(own);
    match s {
        Stub::Lines(l) => Some((l.lines as usize, l.first_id, l.first_line as usize)),
        Stub::Chunks(_) | Stub::Repeat(_) => None,
    }
}

#[test]
fn repeated_file_read_becomes_one_stub() {
    let file = b"def mean(xs):\n    return sum(xs) / len(xs)\n\ndef median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n\ndef spread(xs):\n    return max(xs) - min(xs)\n";
    let (_, outs) = run(&[file, file]);
    assert_eq!(outs[0], file);
    assert_eq!(outs[1], b"[lam: 7 lines from \xc2\xa700000000:1; _recall \xc2\xa700000001]\n");
}

#[test]
fn short_runs_are_kept_verbatim() {
    let (_, outs) = run(&[b"ok\n", b"ok\n"]);
    assert_eq!(outs[1], b"ok\n", "a stub longer than the run is never emitted");
    // A run longer than the stub but under twice its bytes stays verbatim too:
    // the stub's ids would cost more tokens than the run.
    let line: &[u8] = b"x = compute_the_value_of_the_series(1, 2, 3)  # a line of about eighty bytes\n";
    let (_, outs) = run(&[line, line]);
    assert_eq!(outs[1], line);
}

#[test]
fn edited_file_keeps_changed_lines() {
    let a: &[u8] = b"alpha = compute_first_value(1)  # the first value of the series, computed once\nbeta = compute_second_value(2)  # the second value of the series, computed once\ngamma = compute_third_value(3)\ndelta = compute_fourth_value(4)\n";
    let b: &[u8] = b"alpha = compute_first_value(1)  # the first value of the series, computed once\nbeta = compute_second_value(2)  # the second value of the series, computed once\ngamma = compute_third_value(99)\ndelta = compute_fourth_value(4)\n";
    let (_, outs) = run(&[a, b]);
    let text = String::from_utf8(outs[1].clone()).unwrap();
    assert!(text.contains("gamma = compute_third_value(99)\n"));
    assert!(text.starts_with("[lam: 2 lines from §00000000:1; _recall §00000001]\n"));
    assert!(text.contains("delta = compute_fourth_value(4)\n"), "single short repeat kept: {text}");
}

#[test]
fn invalid_utf8_is_kept_byte_for_byte() {
    let a: &[u8] = b"caf\xe9 \xff\xfe first line of bytes\nsecond \x80 line\n";
    let (_, outs) = run(&[a]);
    assert_eq!(outs[0], a);
}

#[test]
fn stub_segments_are_not_hashed_and_sit_on_their_own_line() {
    let mut d = LineDedup::new();
    let mut out = Vec::new();
    let stub = Stub::Chunks(ChunkStub { id: "0000000a".into(), first: 2, last: 2, reps: vec![ChunkRef { id: "0000000a".into(), chunk: 1 }], recall: false });
    d.process(0, "0000000a", &[Segment::Text(b"partial"), Segment::Stub(&stub), Segment::Text(b"rest\n")], &mut out);
    assert_eq!(out, b"partial\n[lam: chunk 2 ~ #1; _recall \xc2\xa70000000a]\nrest\n", "the first stub carries the recall");
    assert_eq!(d.distinct_lines(), 2);
    assert!(d.last_stubs()[0].recall());
}

fn arb_records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // Lines from a small vocabulary (so repeats are common), some long, some blank,
    // some not valid UTF-8; records may end without a newline.
    let line = prop_oneof![
        Just(b"".to_vec()),
        Just(b"   ".to_vec()),
        (0u8..12).prop_map(|k| format!("line number {k} with some padding text to be long enough").into_bytes()),
        (0u8..4).prop_map(|k| format!("x{k}").into_bytes()),
        Just(b"bytes \xff\xfe not utf-8 but long enough to replace".to_vec()),
    ];
    let record = (proptest::collection::vec(line, 0..20), any::<bool>()).prop_map(|(ls, nl)| {
        let mut r = ls.join(&b'\n');
        if nl {
            r.push(b'\n');
        }
        r
    });
    proptest::collection::vec(record, 1..8)
}

proptest! {
    #[test]
    fn stubs_point_at_identical_residual_text(records in arb_records()) {
        let refs: Vec<&[u8]> = records.iter().map(|r| r.as_slice()).collect();
        let (_, outs) = run(&refs);
        let mut residual_lines: HashSet<Vec<u8>> = HashSet::new();
        for (i, (orig, out)) in records.iter().zip(&outs).enumerate() {
            prop_assert!(out.len() <= orig.len() + 1, "L0 lengthened record {}", i);
            let out_lines = lines(out);
            for l in &out_lines {
                if let Some((n, cid, ln)) = parse_stub(l, &id(i)) {
                    prop_assert!(n >= 1);
                    let src = usize::from_str_radix(&cid, 16).unwrap();
                    prop_assert!(src <= i);
                    let cited = lines(&outs[src])[ln - 1];
                    prop_assert!(Stub::parse_bytes(cited).is_none(), "stub cites a stub");
                    prop_assert!(!cited.iter().all(|b| b.is_ascii_whitespace()));
                } else {
                    residual_lines.insert(l.to_vec());
                }
            }
            // Every non-blank original line is readable somewhere in the residual so far.
            for l in lines(orig) {
                if !l.iter().all(|b| b.is_ascii_whitespace()) {
                    prop_assert!(residual_lines.contains(l), "line {:?} of record {} lost", String::from_utf8_lossy(l), i);
                }
            }
        }
    }

    #[test]
    fn without_repeats_output_is_input(records in arb_records()) {
        // A fresh table per record, and each record's lines made unique: nothing to replace.
        for (i, r) in records.iter().enumerate() {
            let uniq: Vec<u8> = lines(r).iter().enumerate()
                .map(|(k, l)| { let mut v = format!("{i}.{k}:").into_bytes(); v.extend_from_slice(l); v })
                .collect::<Vec<_>>().join(&b'\n');
            let mut d = LineDedup::new();
            let mut out = Vec::new();
            d.process(0, "a", &[Segment::Text(&uniq)], &mut out);
            prop_assert_eq!(out, uniq);
        }
    }
}

/// Fast and naive L0 over the same records: identical residuals and stubs.
fn same_as_naive(records: &[Vec<u8>], counter: Option<&'static dyn lam_core::TokenCounter>) -> Result<(), String> {
    let mut fast = LineDedup::new().with_counter(counter);
    let mut naive = NaiveLineDedup::new(counter);
    for (i, r) in records.iter().enumerate() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        fast.process(i as u32, &id(i), &[Segment::Text(r)], &mut a);
        let stubs = naive.process(i as u32, &id(i), &[Segment::Text(r)], &mut b);
        if a != b || fast.last_stubs() != stubs.as_slice() {
            return Err(format!("record {i}: fast {:?}\nnaive {:?}", String::from_utf8_lossy(&a), String::from_utf8_lossy(&b)));
        }
        // One recall per record, on its first stub line.
        let recalls = stubs.iter().filter(|s| s.recall()).count();
        if recalls != usize::from(!stubs.is_empty()) || stubs.first().is_some_and(|s| !s.recall()) {
            return Err(format!("record {i}: {recalls} recalls"));
        }
    }
    Ok(())
}

#[test]
fn fast_equals_naive_on_corpus_observations() {
    let dir = lam_core::corpus_dir().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let sessions = crate::tests::corpus_sessions(&dir, 12);
    assert!(sessions.iter().map(Vec::len).sum::<usize>() > 100, "corpus observations found");
    static CL: lam_trajectory::Cl100k = lam_trajectory::Cl100k;
    for s in &sessions {
        same_as_naive(s, None).unwrap();
        same_as_naive(s, Some(&SIMPLE)).unwrap();
        same_as_naive(s, Some(&CL)).unwrap();
    }
}

/// The tool observations of the first `n` mini-swe-agent trajectories (file name order).
pub(crate) fn corpus_sessions(dir: &std::path::Path, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut files: Vec<_> = std::fs::read_dir(dir).expect("corpus beside the checkout").map(|e| e.unwrap().path()).collect();
    files.sort();
    files.iter().take(n).map(|f| lam_trajectory::read::read_path(f).unwrap().remove(0).records.into_iter().map(|r| r.observation).collect()).collect()
}

proptest! {
    #[test]
    fn fast_equals_naive(records in arb_records(), counted in any::<bool>()) {
        same_as_naive(&records, counted.then_some(&SIMPLE as &'static dyn lam_core::TokenCounter)).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_replaced_run_costs_more_than_its_stub(records in arb_records()) {
        let mut d = LineDedup::new().with_counter(Some(&SIMPLE));
        for (i, r) in records.iter().enumerate() {
            let mut out = Vec::new();
            d.process(i as u32, &id(i), &[Segment::Text(r)], &mut out);
            prop_assert!(SIMPLE.count(&out) <= SIMPLE.count(r) + 1, "record {} grew in tokens", i);
        }
    }
}
