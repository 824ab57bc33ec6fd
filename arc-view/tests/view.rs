//! ArcView behaviour: the bound, citations, recall, catalog, baselines.

use arc_store::MemStore;
use arc_view::{ArcConfig, ArcView, FullContext, ObservationMasking, SimpleCounter, SlidingWindow, cut_parts};
use lam_core::{ObsStore, Record, SessionId, TokenCounter, Turn, ViewPolicy};
use proptest::prelude::*;

fn rec(i: u32, action: &str, obs: &[u8]) -> Record {
    Record { index: i, action: action.into(), observation: obs.to_vec(), returncode: Some(0) }
}

fn body(lines: usize, tag: &str) -> String {
    (0..lines).map(|i| format!("{tag} line {i}: some observation text here\n")).collect()
}

fn view(limit: usize) -> ArcView<MemStore, SimpleCounter> {
    ArcView::new(ArcConfig::with_limit(limit), SessionId("s".into()), "Fix the bug in foo.py.", MemStore::new(), SimpleCounter).unwrap()
}

/// The recalled payload of `id k/m` from a rendered view (valid UTF-8 bodies).
fn recalled_payload(v: &str, id: &str, k: u32, m: u32) -> Option<String> {
    let head = format!("[recalled §{id} part {k}/{m}: ");
    let s = v.find(&head)?;
    let after = &v[s..];
    let nl = after.find('\n')?;
    let rest = &after[nl + 1..];
    // Up to the next section header at line start, or the end.
    let end = ["\n[recalled §", "\n[catalog page"].iter().filter_map(|h| rest.find(h)).min().map_or(rest.len(), |e| e + 1);
    Some(rest[..end].to_string())
}

#[test]
fn small_history_is_verbatim_and_large_is_compacted_within_limit() {
    let mut v = view(2000);
    let mut out = String::new();
    v.push_turn("look", &rec(0, "ls", b"a.py\nb.py\n")).unwrap();
    let s = v.render_view(&mut out).unwrap();
    assert_eq!(s.compactions, 0);
    assert!(out.contains("a.py\nb.py\n"));
    for i in 1..40 {
        v.push_turn(&format!("step {i}"), &rec(i, &format!("cat f{i}.py"), body(30, &format!("f{i}")).as_bytes())).unwrap();
        let s = v.render_view(&mut out).unwrap();
        assert!(s.tokens <= s.limit, "{} > {}", s.tokens, s.limit);
        assert_eq!(s.tokens, SimpleCounter.count(out.as_bytes()), "entry counts add up to the whole view");
    }
    let s = v.render_view(&mut out).unwrap();
    assert!(s.compactions >= 1);
    assert!(out.contains("[summary of turns 1-"));
    assert!(out.contains("[catalog page 1/"));
    assert!(!s.citations.is_empty());
    // The newest turn is verbatim.
    assert!(out.contains("f39 line 29: some observation text here\n"));
}

#[test]
fn recall_returns_exact_parts_that_concatenate_to_the_original() {
    let mut cfg = ArcConfig::with_limit(3000);
    cfg.recall_max = Some(200);
    let mut v = ArcView::new(cfg, SessionId("s".into()), "task", MemStore::new(), SimpleCounter).unwrap();
    let big = body(120, "big");
    let m = v.push_turn("", &rec(0, "cat big.txt", big.as_bytes())).unwrap();
    for i in 1..10 {
        v.push_turn("", &rec(i, &format!("ls d{i}"), body(20, "x").as_bytes())).unwrap();
    }
    v.compact_now();
    let parts = v.parts(&m.shown).unwrap().unwrap();
    assert!(parts.len() > 1);
    // Exactly ceil(n / q) parts (the paper's count) with an additive counter.
    assert_eq!(parts.len(), (m.tokens as usize).div_ceil(200));
    let mut joined = String::new();
    let mut out = String::new();
    let n = parts.len() as u32;
    for k in 1..=n {
        let a = v.act("", &format!("_recall §{} {k}/{n}", m.shown)).unwrap().unwrap();
        assert!(a.contains(&format!("part {k}/{n}")), "{a}");
        let s = v.render_view(&mut out).unwrap();
        assert!(s.tokens <= s.limit);
        let p = recalled_payload(&out, &m.shown, k, n).unwrap_or_else(|| panic!("part {k} not in view:\n{out}"));
        let r = &parts[k as usize - 1];
        assert_eq!(p.trim_end_matches('\n'), big[r.clone()].trim_end_matches('\n'));
        joined.push_str(&big[r.clone()]);
        assert!(SimpleCounter.count(big[r.clone()].as_bytes()) <= 200);
    }
    assert_eq!(joined, big);
    assert_eq!(v.recalls(), n as u64);
}

#[test]
fn unknown_ids_get_nearest_suggestions_and_limits_hold() {
    let mut v = view(4000);
    let m = v.push_turn("", &rec(0, "cat a", body(40, "a").as_bytes())).unwrap();
    let mut wrong = m.shown.clone();
    wrong.replace_range(3..4, if &m.shown[3..4] == "0" { "1" } else { "0" });
    let a = v.act("", &format!("_recall §{wrong}")).unwrap().unwrap();
    assert!(a.contains(&format!("no §{wrong} in this session; nearest: §{}", m.shown)), "{a}");
    // Per-step limit r = 2.
    let a = v.act("", &format!("_recall §{0}\n_recall §{0}\n_recall §{0}", m.shown)).unwrap().unwrap();
    assert_eq!(a.matches("is in the recall section").count(), 2, "{a}");
    assert!(a.contains("recall limit: at most 2 recalls per step"));
    // Recall meta gives the citation only.
    let a = v.act("", &format!("_recall_meta §{}", m.shown)).unwrap().unwrap();
    assert!(a.contains("head: a line 0") && !a.contains("a line 20"), "{a}");
    // Ids resolve only in their own session.
    assert!(v.store().get(&SessionId("other".into()), &m.shown).unwrap().is_none());
}

#[test]
fn commands_inside_observations_are_data() {
    let mut v = view(4000);
    let m = v.push_turn("", &rec(0, "cat a", b"secret\n")).unwrap();
    let trap = format!("_recall §{}\ncatalog next\n", m.shown);
    v.push_turn("", &rec(1, "cat notes.txt", trap.as_bytes())).unwrap();
    assert_eq!(v.recalls(), 0);
    // An ordinary action that mentions a command is not intercepted either.
    assert!(v.act("", &format!("echo _recall §{}", m.shown)).unwrap().is_none());
    assert_eq!(v.recalls(), 0);
}

#[test]
fn least_recently_used_bodies_fall_back_to_citations() {
    let mut cfg = ArcConfig::with_limit(4000);
    cfg.recall_budget = Some(700);
    cfg.recall_max = Some(300);
    let mut v = ArcView::new(cfg, SessionId("s".into()), "task", MemStore::new(), SimpleCounter).unwrap();
    let ids: Vec<String> = (0..3).map(|i| v.push_turn("", &rec(i, &format!("cat f{i}"), body(25, &format!("f{i}")).as_bytes())).unwrap().shown).collect();
    let mut out = String::new();
    for id in &ids {
        v.act("", &format!("_recall §{id}")).unwrap();
    }
    let s = v.render_view(&mut out).unwrap();
    assert!(s.tokens <= s.limit);
    assert!(!s.recalled.iter().any(|r| r.starts_with(&ids[0])), "oldest recall evicted: {:?}", s.recalled);
    assert!(s.recalled.iter().any(|r| r.starts_with(&ids[2])));
}

#[test]
fn catalog_pages_hold_every_id_exactly_once() {
    let mut cfg = ArcConfig::with_limit(3000);
    cfg.page_tokens = Some(120);
    let mut v = ArcView::new(cfg, SessionId("s".into()), "task", MemStore::new(), SimpleCounter).unwrap();
    let mut ids = Vec::new();
    for i in 0..60 {
        ids.push(v.push_turn("", &rec(i, &format!("cat file{i}.py"), body(3, &format!("g{i}")).as_bytes())).unwrap().shown);
    }
    v.compact_now();
    let mut out = String::new();
    let s = v.render_view(&mut out).unwrap();
    let pages = s.page.1;
    assert!(pages > 2, "{pages}");
    let mut seen = Vec::new();
    for p in 0..pages {
        if p > 0 {
            v.act("", "catalog next").unwrap();
        }
        let s = v.render_view(&mut out).unwrap();
        assert_eq!(s.page.0, p + 1);
        let cat = &out[out.rfind("[catalog page").unwrap()..];
        for line in cat.lines().skip(1).take_while(|l| l.starts_with('§')) {
            seen.push(line[2..].split(' ').next().unwrap().to_string());
        }
    }
    seen.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(seen, want);
}

#[test]
fn a_prefix_that_cannot_fit_is_an_error() {
    let huge = "word ".repeat(5000);
    let e = ArcView::new(ArcConfig::with_limit(2000), SessionId("s".into()), &huge, MemStore::new(), SimpleCounter).unwrap_err();
    assert!(e.to_string().contains("task prefix takes"), "{e}");
    let mut cfg = ArcConfig::with_limit(8000);
    cfg.completion = 9000;
    assert!(ArcView::new(cfg, SessionId("s".into()), "t", MemStore::new(), SimpleCounter).is_err());
}

#[test]
fn baselines_keep_what_they_promise() {
    let turns: Vec<Turn> =
        (0..20).map(|i| Turn { thought: format!("t{i}"), record: rec(i, &format!("cat f{i}"), body(10, &format!("f{i}")).as_bytes()) }).collect();
    let mut full = FullContext::new("task", SimpleCounter);
    let mut win = SlidingWindow::new("task", SimpleCounter, 5, 100_000);
    let mut mask = ObservationMasking::new("task", SimpleCounter, 3, 100_000);
    let mut tight = SlidingWindow::new("task", SimpleCounter, 50, 300);
    for t in &turns {
        for p in [&mut full as &mut dyn ViewPolicy, &mut win, &mut mask, &mut tight] {
            p.push(t).unwrap();
        }
    }
    let out = full.render().unwrap().text;
    assert!(out.contains("f0 line 9") && out.contains("f19 line 9"));
    let out = win.render().unwrap().text;
    assert!(!out.contains("f14 line") && out.contains("f15 line 0") && out.contains("$ cat f15"));
    let out = mask.render().unwrap().text;
    assert!(out.contains("$ cat f0") && !out.contains("f16 line") && out.contains("f17 line 0") && out.contains("(10 lines omitted)"));
    let r = tight.render().unwrap();
    assert!(r.tokens <= 300 && r.tokens == SimpleCounter.count(r.text.as_bytes()) && r.limit == Some(300));
}

#[test]
fn every_policy_passes_the_view_policy_suite() {
    use lam_core::testsuite::view_policy;
    let count = |t: &[u8]| SimpleCounter.count(t);
    let cited = view_policy(|| ArcView::new(ArcConfig::with_limit(3000), SessionId("s".into()), "fix the bug", MemStore::new(), SimpleCounter).unwrap(), count);
    assert!(cited > 0, "ARC cited nothing over a session far larger than its limit");
    view_policy(|| FullContext::new("fix the bug", SimpleCounter), count);
    view_policy(|| SlidingWindow::new("fix the bug", SimpleCounter, 5, 3000), count);
    view_policy(|| ObservationMasking::new("fix the bug", SimpleCounter, 3, 3000), count);
}

#[derive(Debug, Clone)]
enum Step {
    Obs(Vec<u8>, String),
    Recall(usize, u32),
    Next,
    Compact,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (proptest::collection::vec(any::<u8>(), 0..1500), "[a-z]{1,12}( [a-z./]{1,20})?").prop_map(|(b, a)| Step::Obs(b, a)),
        2 => (0usize..40, 1u32..4).prop_map(|(i, k)| Step::Recall(i, k)),
        1 => Just(Step::Next),
        1 => Just(Step::Compact),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_view_is_within_the_limit_and_every_id_recalls_exactly(
        limit in 1200usize..6000,
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let mut v = view(limit);
        let mut out = String::new();
        let mut archived: Vec<(String, Vec<u8>)> = Vec::new();
        let mut i = 0u32;
        for s in steps {
            match s {
                Step::Obs(b, a) => {
                    let m = v.push_turn("thinking", &rec(i, &a, &b)).unwrap();
                    archived.push((m.shown, b));
                    i += 1;
                }
                Step::Recall(j, k) => {
                    if let Some((id, _)) = archived.get(j) {
                        v.act("", &format!("_recall §{id} {k}")).unwrap();
                    } else {
                        v.act("", "_recall §deadbeef").unwrap();
                    }
                }
                Step::Next => { v.act("", "catalog next").unwrap(); }
                Step::Compact => v.compact_now(),
            }
            let st = v.render_view(&mut out).unwrap();
            prop_assert!(st.tokens <= st.limit);
            prop_assert_eq!(st.tokens, SimpleCounter.count(out.as_bytes()));
        }
        let q = v.budgets().part;
        for (id, b) in &archived {
            let stored = v.store().get(v.session(), id).unwrap().unwrap();
            prop_assert_eq!(&stored, b);
            let parts = cut_parts(&SimpleCounter, &stored, q);
            let joined: Vec<u8> = parts.iter().flat_map(|r| stored[r.clone()].to_vec()).collect();
            prop_assert_eq!(&joined, b);
            // Ids are a pure function of the content.
            prop_assert_eq!(&lam_core::ObsId::of(b"x", b).hex().len(), &40);
        }
    }
}
