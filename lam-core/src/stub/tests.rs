use super::*;
use proptest::prelude::*;

fn at(of: &str, first: u32, last: u32) -> Place {
    Place::new(Some(of.into()), first, last)
}

fn here(first: u32, last: u32) -> Place {
    Place::new(None, first, last)
}

fn similar(like: Vec<Place>, recall: bool) -> ChunkStub {
    ChunkStub { id: "e5f6".into(), like, recall, chunks: None }
}

#[test]
fn formats_as_documented() {
    let one = similar(vec![at("cat src/app.py", 12, 51)], true);
    assert_eq!(one.to_string(), "[lam: similar to lines 12-51 of `cat src/app.py`; _recall §e5f6]");
    let run = similar(vec![here(3, 11), at("pytest -q", 4, 4)], false);
    assert_eq!(run.to_string(), "[lam: similar to lines 3-11 of this output, line 4 of `pytest -q`]");
    let grouped = similar(vec![at("ls", 3, 9), at("ls", 12, 12), Place::new(Some(String::new()), 2, 2)], false);
    assert_eq!(grouped.to_string(), "[lam: similar to lines 3-9,12 of `ls`, line 2 of an earlier output]");
    let l = LineStub { id: "e5f6".into(), from: at("cat src/app.py", 40, 52), recall: false, shift: 0, ditto: false, last: false, more: Vec::new() };
    assert_eq!(l.to_string(), "[lam: lines 40-52 of `cat src/app.py`]");
    assert_eq!(l.rendered_len(Recall::ARC), l.to_string().len());
    let l1 = LineStub { from: here(7, 7), recall: true, ..l.clone() };
    assert_eq!(l1.to_string(), "[lam: line 7 of this output; _recall §e5f6]");
    assert_eq!(l1.rendered_len(Recall::ARC), l1.to_string().len());
    let moved = LineStub { shift: -12, ..l };
    assert_eq!(moved.to_string(), "[lam: lines 40-52 of `cat src/app.py` with line numbers -12]");
    assert_eq!(moved.rendered_len(Recall::ARC), moved.to_string().len());
    assert_eq!(Stub::parse(&moved.to_string()).unwrap(), Stub::Lines(LineStub { id: String::new(), ..moved.clone() }));
    let rp = Stub::Repeat(RepeatStub { id: "91d9".into(), of: "cat src/app.py".into(), recall: true, last: false });
    assert_eq!(rp.to_string(), "[lam: same output as `cat src/app.py` above; _recall §91d9]");
    assert_eq!(Stub::Chunks(run).calls(), vec!["pytest -q"], "this output is not a call");
    let again = LineStub { from: at("cat src/app.py", 60, 72), ditto: true, ..moved.clone() };
    assert_eq!(again.to_string(), "[lam: lines 60-72 ditto with line numbers -12]");
    assert_eq!(again.rendered_len(Recall::ARC), again.to_string().len());
    let one = LineStub { from: at("ls", 9, 9), shift: 0, ..again };
    assert_eq!(one.to_string(), "[lam: line 9 ditto]");
    assert_eq!(Stub::Lines(one.clone()).calls(), vec!["ls"], "a ditto names the call it stands for");
    // Two runs one right after the other, of one output: one line.
    let two = LineStub { more: vec![(11, 14)], ..one };
    assert_eq!(two.to_string(), "[lam: lines 9,11-14 ditto]");
    assert_eq!(two.rendered_len(Recall::ARC), two.to_string().len());
    let three = LineStub { from: at("ls", 3, 4), ditto: false, recall: true, more: vec![(9, 9), (20, 22)], ..two };
    assert_eq!(three.to_string(), "[lam: lines 3-4,9,20-22 of `ls`; _recall §e5f6]");
    assert_eq!(three.rendered_len(Recall::ARC), three.to_string().len());
    assert_eq!(Stub::parse(&three.to_string()).unwrap(), Stub::Lines(LineStub { id: "e5f6".into(), ..three.clone() }));
    assert!(Stub::parse("[lam: lines 3-4 of `ls`, line 9 of `cat a`]").is_err(), "one output per line stub");
}

#[test]
fn its_last_output_names_the_own_call_run_again() {
    let res = "[lam: lines 1-5 of its last output; _recall §c1d5]\ntest_case_3 PASSED\n[lam: lines 7-19 ditto]\n";
    let mut stubs = parse_residual(res.as_bytes()).unwrap();
    assert!(stubs.iter().all(|s| s.calls().is_empty()), "the own call is not known from the text");
    stubs.iter_mut().for_each(|s| s.set_own_call("python3 check2.py"));
    for s in &stubs {
        assert_eq!(s.calls(), vec!["python3 check2.py"]);
        let Stub::Lines(l) = s else { unreachable!() };
        assert!(l.last);
    }
    let written: String = stubs.iter().map(|s| format!("{s}\n")).collect();
    assert_eq!(written, "[lam: lines 1-5 of its last output; _recall §c1d5]\n[lam: lines 7-19 ditto]\n", "written back as read");
    let Stub::Lines(l) = &stubs[0] else { unreachable!() };
    assert_eq!(l.rendered_len(Recall::ARC), stubs[0].to_string().len());
    let rp = Stub::parse("[lam: same output as last time; _recall §91d9]").unwrap();
    assert!(matches!(&rp, Stub::Repeat(r) if r.last && r.of.is_empty()));
    let d = Stub::parse("[lam: as last time except these lines; _recall §91d9]").unwrap();
    assert!(matches!(&d, Stub::Delta(x) if x.last && x.of.is_empty()));
    // A name in backticks is a name, not the own call.
    let named = Stub::parse("[lam: same output as `last time` above]").unwrap();
    assert!(matches!(&named, Stub::Repeat(r) if !r.last && r.of == "last time"));
}

#[test]
fn ditto_names_the_call_of_the_stub_line_above() {
    let res = "[lam: lines 1-5 of `python3 check2.py`; _recall §c1d5]\ntest_case_3 PASSED\n[lam: lines 7-19 ditto]\nx\n[lam: line 21 ditto]\n";
    let stubs = parse_residual(res.as_bytes()).unwrap();
    assert_eq!(stubs.len(), 3);
    for s in &stubs {
        assert_eq!(s.calls(), vec!["python3 check2.py"]);
        assert_eq!(s.id(), "c1d5");
    }
    let Stub::Lines(l) = &stubs[2] else { unreachable!() };
    assert!(l.ditto && l.from.first == 21 && l.from.last == 21);
    assert_eq!(format!("{}", stubs[2]), "[lam: line 21 ditto]", "written back as it was read");
    // Nothing, this output or a paper stub above: no call to repeat.
    for bad in
        ["[lam: lines 7-19 ditto]\n", "[lam: line 1 of this output]\n[lam: lines 7-19 ditto]\n", "[lam: similar to line 1 of `ls`]\n[lam: line 2 ditto]\n"]
    {
        assert!(parse_residual(bad.as_bytes()).is_err(), "{bad}");
    }
    let mut alone = Stub::parse("[lam: lines 7-19 ditto]").unwrap();
    assert_eq!(alone.calls(), Vec::<&str>::new(), "parsed alone it names no call yet");
    assert!(!alone.follow(None));
    assert!(alone.follow(Some(&stubs[0])));
    assert_eq!(alone.calls(), vec!["python3 check2.py"]);
}

#[test]
fn the_recall_handle_fits_the_surface() {
    let st = Stub::Lines(LineStub { id: "e5f6".into(), from: at("ls", 40, 40), recall: true, shift: 0, ditto: false, last: false, more: Vec::new() });
    let tool = Recall::parse("mcp__lam__recall").unwrap();
    assert_eq!(st.with(tool).to_string(), "[lam: line 40 of `ls`; mcp__lam__recall §e5f6]");
    assert_eq!(st.with(Recall::parse("lam recall").unwrap()).to_string(), "[lam: line 40 of `ls`; lam recall §e5f6]");
    assert_eq!(st.with(Recall::None).to_string(), "[lam: line 40 of `ls`]", "no handle, no own id");
    let Stub::Lines(l) = &st else { unreachable!() };
    for how in [Recall::ARC, tool, Recall::None] {
        assert_eq!(l.rendered_len(how), st.with(how).to_string().len());
        let parsed = Stub::parse(&st.with(how).to_string()).unwrap();
        assert_eq!(parsed.recall(), !how.is_none());
    }
    assert_eq!(Stub::parse("[lam: line 40 of `ls`; mcp__lam__recall §e5f6]").unwrap(), st);
    // A call's name may hold `; ` itself.
    for st in [
        Stub::Repeat(RepeatStub { id: "91d9".into(), of: "cd a; ls".into(), recall: true, last: false }),
        Stub::Chunks(ChunkStub { id: "91d9".into(), like: vec![at("cd a; ls", 1, 2)], recall: true, chunks: None }),
    ] {
        for how in [Recall::ARC, Recall::None] {
            let line = st.with(how).to_string();
            let mut back = Stub::parse(&line).unwrap();
            back.set_own_id("91d9");
            back.set_recall(true);
            assert_eq!(back, st, "{line}");
        }
    }
    assert_eq!(Recall::parse("none").unwrap(), Recall::None);
    assert_eq!(Recall::parse("_recall").unwrap(), Recall::ARC);
    for bad in ["", "two  spaces", "semi;colon", "§", &"x".repeat(65)] {
        assert!(Recall::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(parse_residual(b"[lam: lines 1-4 of this output]\n").unwrap().len(), 1, "written with no handle");
}

#[test]
fn parses_back() {
    for line in [
        "[lam: similar to lines 12-51 of `cat src/app.py`; _recall §e5f6a7b8]",
        "[lam: similar to lines 3-11 of this output, line 4 of `pytest -q`]",
        "[lam: similar to lines 3-9,12 of `ls`, line 2 of an earlier output; _recall §e5f6]",
        "[lam: lines 40-55 of `cat src/app.py`; _recall §e5f6a7b8]",
        "[lam: line 1 of this output; _recall §e5f6a7b8]",
        "[lam: lines 3-9 of an earlier output]",
        "[lam: same output as `pytest -q` above; _recall §91d9]",
    ] {
        let s = Stub::parse(line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.to_string(), line);
        assert_eq!(Stub::parse_bytes(format!("{line}\n").as_bytes()), Some(s));
    }
}

#[test]
fn refuses_what_is_not_a_stub() {
    for line in [
        "",
        "[lam: similar to line 1 of `ls`",
        "[lam: similar to lines 1 of `ls`]",
        "[lam: similar to line 1-2 of `ls`]",
        "[lam: similar to lines 5-2 of `ls`]",
        "[lam: similar to lines 1-2,3 of `ls`, lines 4-5 of `ls`]",
        "[lam: similar to line 1 of ``]",
        "[lam: similar to line 1 of `ls`,line 2 of `x`]",
        "[lam: line 0 of `ls`]",
        "[lam: line 04 of `ls`]",
        "[lam: line 4 of `ls` above]",
        "[lam: line 4 of ls]",
        "[lam: line 4 of `ls`; _recall §E5F6]",
        "[lam: line 4294967296 of `ls`]",
        "[lam: lines 4-5 of `ls`, line 7 of this output]",
        "[lam: 12 lines repeated from lines 40-52 of `ls`]",
        "[lam: same as lines 40-52 of `ls`]",
        "[lam: lines 40-52 of `ls` ditto]",
        "[lam: lines 40-52 of this output ditto]",
        "[lam: line 4-5 ditto]",
        "[lam: ditto]",
        "[lam: chunks 3-6 ~ §a1b2c3d4#1-2,2 §c0ffee00#4; _recall §e5f6a7b8]",
        "[lam: 12 lines from §a1b2c3d4:40; _recall §e5f6a7b8]",
        "plain text",
    ] {
        assert!(Stub::parse(line).is_err(), "{line}");
    }
    assert_eq!(Stub::parse_bytes(b"plain"), None);
}

#[test]
fn a_residual_gives_every_stub_its_own_id() {
    let res = "text\n[lam: similar to line 1 of this output; _recall §e5f6a7b8]\nmore\n[lam: lines 1-4 of this output]\n[lam: similar to line 3 of `ls`]\n";
    let stubs = parse_residual(res.as_bytes()).unwrap();
    assert_eq!(stubs.len(), 3);
    assert!(stubs.iter().all(|s| s.id() == "e5f6a7b8"));
    assert_eq!(
        stubs[1],
        Stub::Lines(LineStub { id: "e5f6a7b8".into(), from: here(1, 4), recall: false, shift: 0, ditto: false, last: false, more: Vec::new() })
    );
    let two = "[lam: line 1 of this output; _recall §e5f6a7b8]\n[lam: line 1 of this output; _recall §a1b2c3d4]\n";
    assert!(parse_residual(two.as_bytes()).is_err());
    assert_eq!(parse_residual(b"no stubs\n").unwrap(), vec![]);
}

fn arb_id() -> impl Strategy<Value = String> {
    prop_oneof![Just("a1b2c3d4".to_string()), Just("c0ff".to_string()), Just("e5f6a".to_string()), Just("e5f6a7b80123".to_string()), "[0-9a-f]{4,9}"]
}

fn arb_of() -> impl Strategy<Value = Option<String>> {
    prop_oneof![Just(None), Just(Some(String::new())), "[ -_a-~]{1,30}".prop_map(|s| Some(crate::action::referent(&s))), Just(Some("cd a; ls, x of y".into()))]
}

fn arb_stub() -> impl Strategy<Value = Stub> {
    let place = || (arb_of(), 1u32..5000, 0u32..50).prop_map(|(of, first, n)| Place::new(of, first, first + n));
    let chunks = (arb_id(), proptest::collection::vec(place(), 1..6), any::<bool>())
        .prop_map(|(id, like, recall)| Stub::Chunks(ChunkStub { id, like, recall, chunks: None }));
    let shift = prop_oneof![Just(0), -2000i32..2000];
    let lines = (arb_id(), place(), any::<bool>(), shift, any::<bool>(), any::<bool>()).prop_map(|(id, from, recall, shift, ditto, last)| {
        // Only a named call can be named again by `ditto`, or be the own call.
        let named = from.of.as_deref().is_some_and(|c| !c.is_empty());
        Stub::Lines(LineStub { id, from, recall, shift, ditto: ditto && named, last: last && named, more: Vec::new() })
    });
    let repeat = (arb_id(), prop_oneof![Just(String::new()), "[ -_a-~]{0,30}".prop_map(|s| crate::action::referent(&s))], any::<bool>(), any::<bool>())
        .prop_map(|(id, of, recall, last)| {
            let last = last && !of.is_empty();
            Stub::Repeat(RepeatStub { id, of, recall, last })
        });
    prop_oneof![chunks, lines, repeat].prop_filter("a name of an empty referent", |s| s.calls().iter().all(|c| !c.is_empty()))
}

proptest! {
    #[test]
    fn every_stub_parses_back(stub in arb_stub()) {
        let line = stub.to_string();
        let mut parsed = Stub::parse(&line).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        if !stub.recall() {
            prop_assert_eq!(parsed.id(), "");
            parsed.set_own_id(stub.id());
        }
        if let Stub::Lines(LineStub { ditto: true, from, last, .. }) = &stub {
            let above = Stub::Lines(LineStub { id: String::new(), from: from.clone(), recall: false, shift: 0, ditto: false, last: *last, more: Vec::new() });
            prop_assert!(parsed.follow(Some(&above)));
        }
        if let Some(call) = stub.calls().first() {
            parsed.set_own_call(call);
        }
        prop_assert_eq!(&parsed, &stub);
        prop_assert_eq!(parsed.to_string(), line.clone());
        if let Stub::Lines(l) = &stub {
            prop_assert_eq!(l.rendered_len(Recall::ARC), line.len());
            for how in [Recall::ARC, Recall::None, Recall::Via("lam recall")] {
                let mut bytes = b"above".to_vec();
                l.write_bytes(&mut bytes, how);
                let written = stub.with(how).to_string();
                prop_assert_eq!(&bytes[5..], written.as_bytes());
            }
        }
        // At most one id, the observation's own, in its recall.
        prop_assert!(line.matches('§').count() <= 1, "{}", line);
    }

    #[test]
    fn junk_never_panics(s in "\\[lam: [ -~§]{0,60}\\]") {
        if let Ok(st) = Stub::parse(&s) {
            prop_assert_eq!(st.to_string(), s);
        }
    }
}
