//! Operator behaviour: stubs cite text present in the residual, online equals
//! batch, invalid UTF-8 survives, bad vectors are refused.
#![allow(clippy::single_range_in_vec_init)] // `&[0..n]`: one chunk covering the text

use lam_core::stub::parse_residual;
use lam_core::{Decision, Record, Stub, Threshold};
use lam_encode::HashingEncoder;
use lam_operator::{Config, Order, Residual, Session, compact_batch};
use proptest::prelude::*;

fn records(obs: &[Vec<u8>]) -> Vec<Record> {
    obs.iter().enumerate().map(|(i, o)| Record { index: i as u32, action: format!("cmd {}", i % 3), observation: o.clone(), returncode: Some(0) }).collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Line `n` (1-based) of a residual.
fn nth_line(residual: &[u8], n: u32) -> Option<&[u8]> {
    residual.split(|&b| b == b'\n').nth((n as usize).checked_sub(1)?)
}

/// The lines of `residual` above its line `at` (1-based), each with its newline.
fn above(residual: &[u8], at: u32) -> &[u8] {
    let end = residual.split_inclusive(|&b| b == b'\n').take(at as usize - 1).map(<[u8]>::len).sum();
    &residual[..end]
}

/// The records a place may name: the earlier ones whose call has that name,
/// or record `i` itself for "this output".
fn named(recs: &[Record], i: usize, of: &Option<String>) -> Vec<usize> {
    match of {
        None => vec![i],
        Some(call) => (0..i).filter(|&r| lam_core::action::referent(&recs[r].action) == *call).collect(),
    }
}

fn arb_obs() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let line = prop_oneof![
        (0u8..20).prop_map(|k| format!("src/module_{k}.py:{} def function_{k}(argument): return compute(argument) + {k}", k * 7).into_bytes()),
        (0u8..6).prop_map(|k| format!("ok {k}").into_bytes()),
        Just(b"".to_vec()),
        Just(b"bytes \xff\xfe\x80 not utf-8 inside a long enough line".to_vec()),
    ];
    let obs = proptest::collection::vec(line, 0..40).prop_map(|ls| ls.join(&b'\n'));
    proptest::collection::vec(obs, 1..10)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn stubs_cite_text_present_in_the_residual(obs in arb_obs(), tc in prop_oneof![Just(0.8), Just(0.95), Just(0.99)], l0_first in any::<bool>(), counted in any::<bool>(), paper in any::<bool>()) {
        static SIMPLE: lam_core::SimpleCounter = lam_core::SimpleCounter;
        let recs = records(&obs);
        let mut cfg = Config::new(Threshold::from_cosine(tc).unwrap());
        if l0_first { cfg.order = Order::L0L1; }
        if counted { cfg = cfg.with_counter(&SIMPLE); }
        // Both residuals: the faithful one writes no L1 stub (tests/faithful.rs checks it reads back).
        if paper { cfg = cfg.with_residual(Residual::Paper); }
        let mut enc = HashingEncoder::new(64, 12);
        let mut s = Session::new(cfg, 64).unwrap();
        let mut adms = Vec::new();
        for r in &recs {
            adms.push(s.admit(&mut enc, r).unwrap());
        }
        let batch = compact_batch(cfg, &mut enc, &recs).unwrap();
        prop_assert_eq!(s.digest().hex16(), batch.digest.hex16());
        for (a, b) in adms.iter().zip(&batch.admissions) {
            prop_assert_eq!(&a.residual, &b.residual);
        }
        for (i, a) in adms.iter().enumerate() {
            // Every stub line parses back, through the one parser, to the typed stubs.
            let mut parsed = parse_residual(&a.residual).map_err(|e| TestCaseError::fail(e.to_string()))?;
            // `its last output`, `last time`: the record's own call, as it is named.
            parsed.iter_mut().for_each(|s| s.set_own_call(&lam_core::action::referent(&recs[i].action)));
            if l0_first {
                // The ablation lists L0's stubs, then L1's (an L0 stub L1 then dropped stays listed).
                for p in &parsed {
                    prop_assert!(a.stubs.iter().any(|s| s.written() == *p), "{} not listed", p);
                }
            } else {
                let written: Vec<Stub> = a.stubs.iter().map(Stub::written).collect();
                prop_assert_eq!(&parsed, &written);
            }
            if !l0_first {
                // One recall per observation, on its first stub line.
                prop_assert_eq!(parsed.iter().filter(|s| s.recall()).count(), usize::from(!parsed.is_empty()));
                prop_assert!(parsed.first().is_none_or(|s| s.recall()));
            }
            prop_assert!(parsed.iter().all(|s| s.id() == a.id));
            if counted && !l0_first {
                // Stubs never cost more tokens than what they replace.
                use lam_core::TokenCounter;
                prop_assert!(SIMPLE.count(&a.residual) <= SIMPLE.count(&recs[i].observation) + 1, "record {} grew", i);
            }
            for st in &parsed {
                let line = st.to_string();
                if let Stub::Repeat(rp) = st {
                    // A whole repeat names an earlier call with the same output, never its own.
                    let earlier = recs[..i].iter().position(|r| r.observation == recs[i].observation);
                    let r = earlier.ok_or_else(|| TestCaseError::fail(format!("{line}: no earlier record has this output")))?;
                    prop_assert_eq!(&rp.of, &lam_core::action::referent(&recs[r].action));
                    prop_assert_eq!(parsed.len(), 1, "a whole repeat is one line");
                }
                let at = a.residual.split(|&b| b == b'\n').position(|l| l == line.as_bytes()).expect("the stub is a line") as u32 + 1;
                if let Stub::Chunks(c) = st {
                    prop_assert!(paper, "{line}: an L1 stub in the faithful residual");
                    prop_assert!(!c.like.is_empty());
                    for p in &c.like {
                        // Every named call is an earlier record's; "this output" lies above.
                        prop_assert!(!named(&recs, i, &p.of).is_empty(), "{line}: names no earlier call");
                        prop_assert!(p.of.is_some() || p.last < at, "{line}: lines of this output not above it");
                    }
                    // Each dropped chunk's representative is in a named place, at the lines given.
                    let (k, last) = a.stubs.iter().find_map(|s| match s { Stub::Chunks(o) if o.like == c.like => o.chunks, _ => None }).expect("the operator's stub");
                    for o in &a.chunks[k as usize - 1..last as usize] {
                        let Decision::Dropped { representative, .. } = o.decision else { return Err(TestCaseError::fail(format!("{line}: chunk {} retained", o.ordinal + 1))) };
                        let (r, rc) = adms[..=i].iter().enumerate().find_map(|(r, x)| x.chunks.iter().find(|c| c.index == representative).map(|c| (r, c))).expect("representative");
                        prop_assert_eq!(rc.decision, Decision::Retained);
                        if l0_first {
                            continue;
                        }
                        let text = &recs[r].observation[rc.range.clone()];
                        let found = c.like.iter().filter(|p| named(&recs, i, &p.of).contains(&r)).any(|p| {
                            text.split(|&b| b == b'\n').filter(|l| l.len() > 60).all(|l| {
                                (p.first..=p.last).any(|n| nth_line(&adms[r].residual, n).is_some_and(|x| contains(x, l) || x.starts_with(b"[lam: ")))
                            })
                        });
                        prop_assert!(found, "{}: the representative of chunk {} (record {} chunk {}) is not at the lines named", line, o.ordinal + 1, r, rc.ordinal + 1);
                    }
                }
                // In l0-l1 order (the ablation) L1 may later replace the lines an
                // L0 stub cites; the guarantee is stated for the default order.
                if let Stub::Lines(l) = st.clone() {
                    let p = &l.from;
                    let records = named(&recs, i, &p.of);
                    prop_assert!(!records.is_empty(), "{line}: names no earlier call");
                    if !l0_first {
                        // The lines named are readable text in one of the outputs with that name.
                        // (By the reader's rule: printed numbers in a numbered
                        // listing; for this output, among the lines above the stub.)
                        let ok = records.iter().any(|&r| {
                            let res = &adms[r].residual;
                            let res = if p.of.is_none() { above(res, at) } else { res.as_slice() };
                            let lines: Vec<&[u8]> = res.split(|&b| b == b'\n').collect();
                            lam_core::expand::place_in(res, p.first, p.last).is_some_and(|x| {
                                [x.start, x.end - 1].iter().all(|&k| !lines[k].iter().all(u8::is_ascii_whitespace))
                            })
                        });
                        prop_assert!(ok, "{line}: the lines named are not readable text (this output: above the stub)");
                    }
                }
            }
        }
        prop_assert!(s.delta_hat() <= cfg.threshold.delta());
    }
}

#[test]
fn invalid_utf8_is_preserved_byte_for_byte() {
    let obs = vec![b"caf\xe9 \xff\xfe binary \x00 output\nsecond line\n".to_vec(), b"other \x80\x81 text entirely different here\n".to_vec()];
    let recs = records(&obs);
    let mut enc = HashingEncoder::default();
    let mut s = Session::new(Config::new(Threshold::from_cosine(0.95).unwrap()), 384).unwrap();
    for r in &recs {
        let a = s.admit(&mut enc, r).unwrap();
        assert_eq!(a.residual, r.observation);
    }
}

#[test]
fn bad_vectors_are_refused_with_an_error() {
    let rec = Record { index: 0, action: "ls".into(), observation: b"a b c".to_vec(), returncode: None };
    for bad in [vec![f32::NAN, 0.0, 0.0], vec![f32::INFINITY, 0.0, 0.0], vec![0.0, 0.0, 0.0]] {
        let mut s = Session::new(Config::new(Threshold::from_cosine(0.95).unwrap()), 3).unwrap();
        let e = s.admit_embedded(&rec, &[0..5], &bad).unwrap_err().to_string();
        assert!(e.contains("invalid embedding for record 0 chunk 1"), "{e}");
    }
}
