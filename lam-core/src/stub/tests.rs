use super::*;
use proptest::prelude::*;

fn r(id: &str, chunk: u32) -> ChunkRef {
    ChunkRef { id: id.into(), chunk }
}

#[test]
fn formats_as_documented() {
    let one = ChunkStub { id: "e5f6a7b8".into(), first: 3, last: 3, reps: vec![r("a1b2c3d4", 1)], recall: true };
    assert_eq!(one.to_string(), "[lam: chunk 3 ~ §a1b2c3d4#1; _recall §e5f6a7b8]");
    let run = ChunkStub {
        id: "e5f6a7b8".into(),
        first: 3,
        last: 6,
        reps: vec![r("a1b2c3d4", 1), r("a1b2c3d4", 2), r("a1b2c3d4", 2), r("c0ffee00", 4)],
        recall: false,
    };
    assert_eq!(run.to_string(), "[lam: chunks 3-6 ~ §a1b2c3d4#1-2,2 §c0ffee00#4]");
    let own = ChunkStub { id: "e5f6a7b8".into(), first: 9, last: 10, reps: vec![r("e5f6a7b8", 2), r("a1b2c3d4", 5)], recall: true };
    assert_eq!(own.to_string(), "[lam: chunks 9-10 ~ #2 §a1b2c3d4#5; _recall §e5f6a7b8]");
    let l = LineStub { id: "e5f6a7b8".into(), lines: 12, first_id: "a1b2c3d4".into(), first_line: 40, recall: false };
    assert_eq!(l.to_string(), "[lam: 12 lines from §a1b2c3d4:40]");
    assert_eq!(l.rendered_len(Recall::ARC), l.to_string().len());
    let l1 = LineStub { lines: 1, first_id: "e5f6a7b8".into(), recall: true, ..l };
    assert_eq!(l1.to_string(), "[lam: 1 line from :40; _recall §e5f6a7b8]");
    assert_eq!(l1.rendered_len(Recall::ARC), l1.to_string().len());
    let rp = Stub::Repeat(RepeatStub { id: "91d9".into(), of: "cat src/app.py".into(), recall: true });
    assert_eq!(rp.to_string(), "[lam: same output as `cat src/app.py` above; _recall §91d9]");
}

#[test]
fn the_recall_handle_fits_the_surface() {
    let st = Stub::Lines(LineStub { id: "e5f6".into(), lines: 1, first_id: "a1b2".into(), first_line: 40, recall: true });
    let tool = Recall::parse("mcp__lam__recall").unwrap();
    assert_eq!(st.with(tool).to_string(), "[lam: 1 line from §a1b2:40; mcp__lam__recall §e5f6]");
    assert_eq!(st.with(Recall::parse("lam recall").unwrap()).to_string(), "[lam: 1 line from §a1b2:40; lam recall §e5f6]");
    assert_eq!(st.with(Recall::None).to_string(), "[lam: 1 line from §a1b2:40]", "no handle, no own id");
    let Stub::Lines(l) = &st else { unreachable!() };
    for how in [Recall::ARC, tool, Recall::None] {
        assert_eq!(l.rendered_len(how), st.with(how).to_string().len());
        let parsed = Stub::parse(&st.with(how).to_string()).unwrap();
        assert_eq!(parsed.recall(), !how.is_none());
    }
    assert_eq!(Stub::parse("[lam: 1 line from §a1b2:40; mcp__lam__recall §e5f6]").unwrap(), st);
    // A repeated call's name may hold `; ` itself.
    let rp = Stub::Repeat(RepeatStub { id: "91d9".into(), of: "cd a; ls".into(), recall: true });
    for how in [Recall::ARC, Recall::None] {
        let line = rp.with(how).to_string();
        let mut back = Stub::parse(&line).unwrap();
        back.set_own_id("91d9");
        back.set_recall(true);
        assert_eq!(back, rp, "{line}");
    }
    assert_eq!(Recall::parse("none").unwrap(), Recall::None);
    assert_eq!(Recall::parse("_recall").unwrap(), Recall::ARC);
    for bad in ["", "two  spaces", "semi;colon", "§", &"x".repeat(65)] {
        assert!(Recall::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(parse_residual(b"[lam: 4 lines from :1]\n").unwrap().len(), 1, "written with no handle");
}

#[test]
fn parses_back() {
    for line in [
        "[lam: chunk 3 ~ §a1b2c3d4#1; _recall §e5f6a7b8]",
        "[lam: chunks 3-6 ~ §a1b2c3d4#1-2,2 §c0ffee00#4; _recall §e5f6a7b8]",
        "[lam: chunks 1-2 ~ §a1b2c3d4#7,2; _recall §e5f6a7b8aaaa]",
        "[lam: chunks 1-3 ~ §a1b2c3d4#7 #2 §c0ffee00#8]",
        "[lam: 12 lines from §a1b2c3d4:40; _recall §e5f6a7b8]",
        "[lam: 1 line from :1; _recall §e5f6a7b8]",
        "[lam: 7 lines from §a1b2c3d4:3]",
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
        "[lam: chunk 3 ~ §a1b2c3d4#1",
        "[lam: chunks 3-6 ~ §a1b2c3d4#1; _recall §e5f6a7b8]",
        "[lam: chunks 3-3 ~ §a1b2c3d4#1; _recall §e5f6a7b8]",
        "[lam: chunk 3 ~ §e5f6a7b8#1; _recall §e5f6a7b8]",
        "[lam: chunks 1-3 ~ §a1b2c3d4#7 §c0ffee00#2 §a1b2c3d4#8]",
        "[lam: chunks 1-2 ~ §a1b2c3d4#1,2]",
        "[lam: 0 lines from §a1b2c3d4:40; _recall §e5f6a7b8]",
        "[lam: 2 lines from §A1B2C3D4:40; _recall §e5f6a7b8]",
        "[lam: 2 lines from §e5f6a7b8:40; _recall §e5f6a7b8]",
        "[lam: 1 lines from §a1b2c3d4:40]",
        "[lam: chunk 1 ~ §a1b2c3d4#1-4294967295; _recall §e5f6a7b8]",
        "[lam: chunk 1 ~ §a1b2c3d4#01]",
        "[lam: chunk 3 of §e5f6a7b8 ~ §a1b2c3d4#1, d=0.210; _recall §e5f6a7b8]",
        "plain text",
    ] {
        assert!(Stub::parse(line).is_err(), "{line}");
    }
    assert_eq!(Stub::parse_bytes(b"plain"), None);
}

#[test]
fn a_residual_gives_every_stub_its_own_id() {
    let res = b"text\n[lam: chunk 2 ~ #1; _recall \xc2\xa7e5f6a7b8]\nmore\n[lam: 4 lines from :1]\n[lam: chunk 5 ~ \xc2\xa7a1b2c3d4#3]\n";
    let stubs = parse_residual(res).unwrap();
    assert_eq!(stubs.len(), 3);
    assert!(stubs.iter().all(|s| s.id() == "e5f6a7b8"));
    assert_eq!(stubs[1], Stub::Lines(LineStub { id: "e5f6a7b8".into(), lines: 4, first_id: "e5f6a7b8".into(), first_line: 1, recall: false }));
    assert!(parse_residual(b"[lam: 4 lines from :1; _recall \xc2\xa7e5f6a7b8]\n[lam: 4 lines from :1; _recall \xc2\xa7a1b2c3d4]\n").is_err());
    assert_eq!(parse_residual(b"no stubs\n").unwrap(), vec![]);
}

fn arb_id() -> impl Strategy<Value = String> {
    prop_oneof![Just("a1b2c3d4".to_string()), Just("c0ff".to_string()), Just("e5f6a".to_string()), Just("e5f6a7b80123".to_string()), "[0-9a-f]{4,9}"]
}

fn arb_stub() -> impl Strategy<Value = Stub> {
    let chunks = (arb_id(), 1u32..50, proptest::collection::vec((arb_id(), 1u32..60), 1..8), any::<bool>()).prop_map(|(id, first, raw, recall)| {
        // Build reps the way the operator does: no id written twice.
        let mut reps: Vec<ChunkRef> = Vec::new();
        for (rid, chunk) in raw {
            let next = ChunkRef { id: rid, chunk };
            if !would_repeat_id(&reps, &id, &next) {
                reps.push(next);
            }
        }
        Stub::Chunks(ChunkStub { id, first, last: first + reps.len() as u32 - 1, reps, recall })
    });
    let lines = (arb_id(), 1u64..5000, prop_oneof![Just(None), arb_id().prop_map(Some)], 1u32..10_000, any::<bool>())
        .prop_map(|(id, lines, fid, first_line, recall)| Stub::Lines(LineStub { first_id: fid.unwrap_or_else(|| id.clone()), id, lines, first_line, recall }));
    let repeat = (arb_id(), prop_oneof![Just(String::new()), "[ -_a-~]{0,30}".prop_map(|s| crate::action::referent(&s))], any::<bool>())
        .prop_map(|(id, of, recall)| Stub::Repeat(RepeatStub { id, of, recall }));
    prop_oneof![chunks, lines, repeat]
}

proptest! {
    #[test]
    fn every_stub_parses_back(stub in arb_stub()) {
        let line = stub.to_string();
        let mut parsed = Stub::parse(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if !stub.recall() {
            prop_assert_eq!(parsed.id(), "");
            parsed.set_own_id(stub.id());
        }
        prop_assert_eq!(&parsed, &stub);
        if let Stub::Lines(l) = &stub {
            prop_assert_eq!(l.rendered_len(Recall::ARC), line.len());
        }
        // No id is written twice within one line.
        let ids: Vec<&str> = line.split('§').skip(1).map(|s| s.split(|c: char| !c.is_ascii_hexdigit()).next().unwrap()).collect();
        let mut uniq = ids.clone();
        uniq.sort_unstable();
        uniq.dedup();
        prop_assert_eq!(uniq.len(), ids.len(), "{}", line);
    }

    #[test]
    fn junk_never_panics(s in "\\[lam: [ -~§]{0,60}\\]") {
        if let Ok(st) = Stub::parse(&s) {
            prop_assert_eq!(st.to_string(), s);
        }
    }
}
