use super::*;
use crate::naive::NaiveLineDedup;
use lam_core::SimpleCounter;
use lam_core::stub::{ChunkStub, Place};
use proptest::prelude::*;
use std::collections::HashSet;

static SIMPLE: SimpleCounter = SimpleCounter;

fn id(i: usize) -> String {
    format!("{i:08x}")
}

/// How the tests name record `i`'s call.
fn call(i: usize) -> String {
    format!("cat file{i}.py")
}

/// A name several records share (record `i` of a session that runs three
/// commands over and over).
fn shared_call(i: usize) -> String {
    format!("cat file{}.py", i % 3)
}

fn run(records: &[&[u8]]) -> (LineDedup, Vec<Vec<u8>>) {
    let mut d = LineDedup::new();
    let mut outs = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut out = Vec::new();
        d.process(i as u32, &id(i), &call(i), &[Segment::Text(r)], &mut out);
        outs.push(out);
    }
    (d, outs)
}

fn lines(b: &[u8]) -> Vec<&[u8]> {
    b.split(|&c| c == b'\n').collect()
}

/// The lines a stub names as `first-last` of an output whose lines are
/// `ls` (for this output: those above the stub), by the reader's rule
/// (`lam_core::expand::place_in`); `None` when they do not read.
fn named<'a>(ls: &[&'a [u8]], first: usize, last: usize) -> Option<Vec<&'a [u8]>> {
    let at = lam_core::expand::place_in(&ls.join(&b'\n'), first as u32, last as u32)?;
    Some(ls[at].to_vec())
}

/// (cited record, first and last cited line) of an L0 stub line of record
/// `own`, through the one parser.
/// A stub line's source record and lines; `above`: the stub line above it
/// in the same residual (a `ditto` names its call), then this one.
fn parse_stub(line: &[u8], own: usize, above: &mut Option<Stub>) -> Option<(usize, usize, usize)> {
    let mut stub = Stub::parse_bytes(line)?;
    assert!(stub.follow(above.as_ref()), "a ditto with no call above: {stub}");
    *above = Some(stub.clone());
    match stub {
        Stub::Lines(l) => {
            let src = match &l.from.of {
                None => own,
                Some(c) => (0..own).find(|&i| call(i) == *c).expect("the named call is an earlier record's"),
            };
            Some((src, l.from.first as usize, l.from.last as usize))
        }
        Stub::Chunks(_) | Stub::Repeat(_) | Stub::Delta(_) => None,
    }
}

#[test]
fn repeated_file_read_becomes_one_stub() {
    let file = b"def mean(xs):\n    return sum(xs) / len(xs)\n\ndef median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n\ndef spread(xs):\n    return max(xs) - min(xs)\n";
    let (_, outs) = run(&[file, file]);
    assert_eq!(outs[0], file);
    assert_eq!(outs[1], "[lam: lines 1-9 of `cat file0.py`; _recall §00000001]\n".as_bytes());
}

#[test]
fn two_runs_one_after_the_other_are_one_stub_line() {
    let line = |i: usize| format!("    total_{i} = compute_value(items[{i}], scale=SCALE)\n");
    let file: String = (1..=12).map(line).collect();
    // Lines 5-6 removed: two runs of one output, written as one stub line.
    let cut: String = (1..=12).filter(|i| !(5..=6).contains(i)).map(line).collect();
    let (_, outs) = run(&[file.as_bytes(), cut.as_bytes()]);
    assert_eq!(outs[1], "[lam: lines 1-4,7-12 of `cat file0.py`; _recall §00000001]\n".as_bytes());
    // The same with a line in between: two stub lines, the second `ditto`.
    let edited: String = (1..=12)
        .map(|i| {
            if i == 5 {
                "    total_5 = 0\n".to_string()
            } else if i == 6 {
                String::new()
            } else {
                line(i)
            }
        })
        .collect();
    let (_, outs) = run(&[file.as_bytes(), edited.as_bytes()]);
    let want = "[lam: lines 1-4 of `cat file0.py`; _recall §00000001]\n    total_5 = 0\n[lam: lines 7-12 ditto]\n";
    assert_eq!(String::from_utf8_lossy(&outs[1]), want);
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
    assert!(text.starts_with("[lam: lines 1-2 of `cat file0.py`; _recall §00000001]\n"), "{text}");
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
    let stub = Stub::Chunks(ChunkStub { id: "0000000a".into(), like: vec![Place::new(None, 1, 1)], recall: false, chunks: None });
    d.process(0, "0000000a", "ls", &[Segment::Text(b"partial"), Segment::Stub(&stub), Segment::Text(b"rest\n")], &mut out);
    assert_eq!(out, "partial\n[lam: similar to line 1 of this output; _recall §0000000a]\nrest\n".as_bytes(), "the first stub carries the recall");
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
    let plain = (proptest::collection::vec(line, 0..20), any::<bool>()).prop_map(|(ls, nl)| {
        let mut r = ls.join(&b'\n');
        if nl {
            r.push(b'\n');
        }
        r
    });
    // A file read with line numbers (`     3→...` or `     3\t...`), from some
    // line on, sometimes with a line inserted (the numbers below it move).
    let numbered = (1u32..6, 0usize..12, prop::option::of(0usize..12), any::<bool>()).prop_map(|(from, n, insert, arrow)| {
        let mut body: Vec<String> = (0..12).map(|k| format!("    value_{k} = compute({k}) + offset")).collect();
        if let Some(at) = insert {
            body.insert(at, "    inserted = 1".into());
        }
        let sep = if arrow { "→" } else { "\t" };
        body.iter().enumerate().skip(from as usize - 1).take(n + 1).map(|(i, l)| format!("{:>6}{sep}{l}\n", i + 1)).collect::<String>().into_bytes()
    });
    let record = prop_oneof![3 => plain, 2 => numbered];
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
            let mut above = None;
            for (k, l) in out_lines.iter().enumerate() {
                if let Some((src, first, last)) = parse_stub(l, i, &mut above) {
                    prop_assert!(src <= i && first <= last);
                    let there = if src == i { out_lines[..k].to_vec() } else { lines(&outs[src]) };
                    let cited = named(&there, first, last);
                    prop_assert!(cited.is_some(), "record {}: `{}` names no text", i, String::from_utf8_lossy(l));
                    let cited = cited.unwrap_or_default();
                    for c in [cited[0], cited[cited.len() - 1]] {
                        prop_assert!(!c.iter().all(|b| b.is_ascii_whitespace()));
                    }
                } else {
                    residual_lines.insert(l.to_vec());
                }
            }
            // Every non-blank original line is readable somewhere in the residual so far
            // (a renumbered one with another number).
            let key = lam_core::newlines::key;
            let keys: HashSet<&[u8]> = residual_lines.iter().map(|l| key(l)).collect();
            for l in lines(orig) {
                if !l.iter().all(|b| b.is_ascii_whitespace()) {
                    prop_assert!(keys.contains(key(l)), "line {:?} of record {} lost", String::from_utf8_lossy(l), i);
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
            d.process(0, "a", "ls", &[Segment::Text(&uniq)], &mut out);
            prop_assert_eq!(out, uniq);
        }
    }
}

/// Fast and naive L0 over the same records: identical residuals and stubs.
fn same_as_naive(records: &[Vec<u8>], counter: Option<&'static dyn lam_core::TokenCounter>) -> Result<(), String> {
    same_as_naive_split(records, counter, usize::MAX)
}

/// [`same_as_naive`] with each record given as two text pieces, cut at byte
/// `split` (so a line may be written in two pieces).
fn same_as_naive_split(records: &[Vec<u8>], counter: Option<&'static dyn lam_core::TokenCounter>, split: usize) -> Result<(), String> {
    let mut fast = LineDedup::new().with_counter(counter);
    let mut naive = NaiveLineDedup::new(counter);
    for (i, r) in records.iter().enumerate() {
        let (x, y) = r.split_at(split.min(r.len()));
        let segs = [Segment::Text(x), Segment::Text(y)];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        fast.process(i as u32, &id(i), &shared_call(i), &segs, &mut a);
        let stubs = naive.process(i as u32, &id(i), &shared_call(i), &segs, &mut b);
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
        same_as_naive_split(s, Some(&CL), 1000).unwrap();
    }
}

/// The tool observations of the first `n` mini-swe-agent trajectories (file name order).
pub(crate) fn corpus_sessions(dir: &std::path::Path, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut files: Vec<_> = std::fs::read_dir(dir).expect("corpus beside the checkout").map(|e| e.unwrap().path()).collect();
    files.sort();
    files.iter().take(n).map(|f| lam_trajectory::read::read_path(f).unwrap().remove(0).records.into_iter().map(|r| r.observation).collect()).collect()
}

/// Every residual reads back to its record byte for byte (`lam_core::expand`:
/// each stub replaced by the lines it names, in the newest earlier output of
/// that name where they are text), with calls that share names, each record
/// written in two pieces.
fn reads_back_exactly(records: &[Vec<u8>], counter: Option<&'static dyn lam_core::TokenCounter>, split: usize) -> Result<(), String> {
    let mut d = LineDedup::new().with_counter(counter);
    let mut outs = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let (x, y) = r.split_at(split.min(r.len()));
        let mut out = Vec::new();
        // Here a call's name is its whole action: a name seen before runs again.
        d.rerun((0..i).any(|k| shared_call(k) == shared_call(i)));
        d.process(i as u32, &id(i), &shared_call(i), &[Segment::Text(x), Segment::Text(y)], &mut out);
        outs.push(out);
    }
    let names: Vec<String> = (0..records.len()).map(shared_call).collect();
    for i in 0..records.len() {
        let seen: Vec<lam_core::expand::Seen<'_>> =
            (0..i).map(|k| lam_core::expand::Seen { call: &names[k], residual: &outs[k], output: &records[k] }).collect();
        let back = lam_core::expand::expand(&outs[i], &names[i], &seen).map_err(|e| format!("record {i}: {e}"))?;
        if back.text != records[i] {
            return Err(format!("record {i} reads back as {:?}, not {:?}", String::from_utf8_lossy(&back.text), String::from_utf8_lossy(&records[i])));
        }
    }
    Ok(())
}

#[test]
fn corpus_residuals_read_back_exactly() {
    let dir = lam_core::corpus_dir().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    static CL: lam_trajectory::Cl100k = lam_trajectory::Cl100k;
    for s in &corpus_sessions(&dir, 12) {
        reads_back_exactly(s, Some(&CL), usize::MAX).unwrap();
    }
}

proptest! {
    #[test]
    fn residuals_read_back_exactly(records in arb_records(), counted in any::<bool>(), split in 0usize..200) {
        let counter = counted.then_some(&SIMPLE as &'static dyn lam_core::TokenCounter);
        reads_back_exactly(&records, counter, usize::MAX).map_err(TestCaseError::fail)?;
        reads_back_exactly(&records, counter, split).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn fast_equals_naive(records in arb_records(), counted in any::<bool>(), split in 0usize..200) {
        let counter = counted.then_some(&SIMPLE as &'static dyn lam_core::TokenCounter);
        same_as_naive(&records, counter).map_err(TestCaseError::fail)?;
        same_as_naive_split(&records, counter, split).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a_replaced_run_costs_more_than_its_stub(records in arb_records()) {
        let mut d = LineDedup::new().with_counter(Some(&SIMPLE));
        for (i, r) in records.iter().enumerate() {
            let mut out = Vec::new();
            d.process(i as u32, &id(i), &call(i), &[Segment::Text(r)], &mut out);
            prop_assert!(SIMPLE.count(&out) <= SIMPLE.count(r) + 1, "record {} grew in tokens", i);
        }
    }
}

proptest! {
    #[test]
    fn the_line_map_gives_each_lines_place_in_the_residual(records in arb_records(), split in 0usize..40) {
        // Each record written as two text pieces with a stub between them.
        let stub = Stub::Chunks(ChunkStub { id: String::new(), like: vec![Place::new(Some("ls".into()), 1, 1)], recall: false, chunks: None });
        let mut d = LineDedup::new();
        let mut outs: Vec<Vec<u8>> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let cut = split.min(r.len());
            let (a, b) = r.split_at(cut);
            let mut out = Vec::new();
            let mut w = d.writer(i as u32, "0000", "ls", &mut out);
            w.text(a);
            w.stub(stub.clone());
            w.text(b);
            let map = w.lines().to_vec();
            w.finish();
            let res: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
            let input: Vec<&[u8]> = [a, b].iter().flat_map(|t| t.split_inclusive(|&c| c == b'\n').map(|l| l.strip_suffix(b"\n").unwrap_or(l))).collect();
            prop_assert_eq!(map.len(), input.len());
            for (k, (line, at)) in input.iter().zip(&map).enumerate() {
                let there = res[*at as usize - 1];
                let ok = there == *line || Stub::parse_bytes(there).is_some_and(|s| !s.is_chunks());
                prop_assert!(ok, "record {} line {}: {:?} mapped to {:?}", i, k + 1, String::from_utf8_lossy(line), String::from_utf8_lossy(there));
            }
            // An L0 stub repeats its place line for line: the j-th line it stands in is line first + j there.
            outs.push(out.clone());
            for (k, (line, at)) in input.iter().zip(&map).enumerate() {
                let Some(Stub::Lines(l)) = Stub::parse_bytes(res[*at as usize - 1]) else { continue };
                let j = k - map.iter().position(|m| m == at).expect("mapped");
                let len: u32 = l.spans().map(|(a, b)| b - a + 1).sum();
                prop_assert!((j as u32) < len, "record {} line {}: past the place", i, k + 1);
                // Every record's call is `ls` here: some earlier output (or this one) has it
                // there (its spans one after the other), a blank line where the run has one.
                let same = |x: &[u8]| lam_core::newlines::renumber(x, i64::from(l.shift)).as_deref() == Some(*line);
                let has = |ls: Vec<&[u8]>| {
                    let all: Option<Vec<Vec<&[u8]>>> = l.spans().map(|(a, b)| named(&ls, a as usize, b as usize)).collect();
                    all.is_some_and(|v| v.concat().get(j).is_some_and(|x| same(x)))
                };
                let found = match &l.from.of {
                    None => has(res[..*at as usize - 1].to_vec()),
                    Some(_) => (0..i).any(|r| has(lines(&outs[r]))),
                };
                prop_assert!(found, "record {} line {}: not line {} of the place named", i, k + 1, j + 1);
            }
        }
    }
}

#[test]
fn a_file_read_again_after_an_insert_repeats_with_moved_numbers() {
    let file: Vec<String> = (0..30).map(|k| format!("    value_{k} = compute(values[{k}], scale=SCALE)")).collect();
    let read = |f: &[String]| f.iter().enumerate().map(|(i, l)| format!("{:>6}→{l}\n", i + 1)).collect::<String>();
    let mut edited = file.clone();
    edited.insert(3, "    inserted = 1".into());
    let (a, b) = (read(&file), read(&edited));
    let (_, outs) = run(&[a.as_bytes(), b.as_bytes()]);
    let want = "[lam: lines 1-3 of `cat file0.py`; _recall §00000001]\n     4→    inserted = 1\n\
                [lam: lines 4-30 ditto with line numbers +1]\n";
    assert_eq!(String::from_utf8_lossy(&outs[1]), want);
}

/// A forgotten record's lines are named by no later stub: lines seen only
/// there come through verbatim (and become visible again there), lines a
/// visible record also holds are named there.
#[test]
fn a_forgotten_record_is_named_by_no_later_stub() {
    let file: String = (0..30).map(|i| format!("    let value_{i} = compute(input, {i});\n")).collect();
    let other: String = (0..30).map(|i| format!("    other_{i}();\n")).collect();
    let mut d = LineDedup::new();
    let mut out = Vec::new();
    d.process(0, "a1", "cat a.rs", &[Segment::Text(file.as_bytes())], &mut out);
    out.clear();
    d.process(1, "b2", "cat b.rs", &[Segment::Text(other.as_bytes())], &mut out);
    d.forget(0);
    out.clear();
    let st = d.process(2, "c3", "git show a.rs", &[Segment::Text(file.as_bytes())], &mut out);
    assert_eq!((st.lines_replaced, &out[..]), (0, file.as_bytes()), "record 0 is gone: the lines are new again");
    out.clear();
    let st = d.process(3, "d4", "cat a.rs", &[Segment::Text(file.as_bytes())], &mut out);
    assert_eq!(st.lines_replaced, 30, "record 2 holds them now");
    assert!(String::from_utf8_lossy(&out).contains("of `git show a.rs`"), "{}", String::from_utf8_lossy(&out));
    out.clear();
    let st = d.process(4, "e5", "x", &[Segment::Text(other.as_bytes())], &mut out);
    assert_eq!(st.lines_replaced, 30, "record 1 is still visible");
}
