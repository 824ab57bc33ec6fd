//! LAM over ARC: a conforming `ViewPolicy`, bounded at every turn, every stub
//! and citation recalled exactly.
#![cfg(feature = "arc")]

use lam_core::testsuite::{view_policy, view_turns};
use lam_core::{SessionId, SimpleCounter, Threshold, TokenCounter, ViewPolicy};
use lam_encode::HashingEncoder;
use lam_operator::{ArcConfig, Config, LamArcView};

fn view(limit: usize) -> LamArcView<arc_store::MemStore, SimpleCounter, HashingEncoder> {
    let cfg = Config::new(Threshold::from_cosine(0.95).unwrap());
    LamArcView::new(
        ArcConfig::with_limit(limit),
        cfg,
        SessionId::new("s"),
        "fix the failing test",
        arc_store::MemStore::new(),
        SimpleCounter,
        HashingEncoder::default(),
    )
    .unwrap()
}

#[test]
fn conforms_to_the_view_policy_suite() {
    let cited = view_policy(|| view(3000), |t| SimpleCounter.count(t));
    assert!(cited > 0, "LAM-over-ARC cited nothing over a session far larger than its limit");
}

#[test]
fn every_stub_recalls_its_exact_original_and_the_view_stays_bounded() {
    let mut v = view(2500);
    let mut stubs = 0;
    for t in view_turns() {
        assert!(v.act(&t.thought, &t.record.action).unwrap().is_none());
        let a = v.push_turn(&t.thought, &t.record).unwrap();
        for s in &a.stubs {
            assert_eq!(s.id(), a.id);
            assert_eq!(ViewPolicy::recall(&v, s.id()).unwrap().unwrap(), t.record.observation);
            stubs += 1;
        }
        let r = v.render().unwrap();
        assert!(r.tokens <= 2500 && r.tokens == SimpleCounter.count(r.text.as_bytes()));
    }
    assert!(stubs > 5, "only {stubs} stubs");
    // `_recall` is answered by the view and its body shows up in the next prompt.
    let id = v.render().unwrap().citations[0].clone();
    let answer = v.act("look", &format!("_recall §{id}")).unwrap().unwrap();
    assert!(answer.contains("is in the recall section"), "{answer}");
    let r = v.render().unwrap();
    assert!(r.recalled.iter().any(|p| p.starts_with(&id)), "{:?}", r.recalled);
    assert!(r.tokens <= 2500);
}
