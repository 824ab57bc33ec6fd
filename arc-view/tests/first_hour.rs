//! What a new user sees first (issue #29): no empty sections, every summary
//! entry names its action, the elision line matches the catalog page shown,
//! and a too-small budget names the smallest one that works.

use arc_store::MemStore;
use arc_view::{ArcConfig, ArcView, FullContext, SimpleCounter, SlidingWindow};
use lam_core::{Record, SessionId, TokenCounter, Turn, ViewPolicy};

fn rec(i: u32, action: &str, obs: &[u8]) -> Record {
    Record { index: i, action: action.into(), observation: obs.to_vec(), returncode: Some(0) }
}

fn body(lines: usize, tag: &str) -> String {
    (0..lines).map(|i| format!("{tag} line {i}: some observation text here\n")).collect()
}

/// A view of `limit` tokens after `turns` turns of 30-line observations.
fn filled(task: &str, limit: usize, turns: u32) -> (ArcView<MemStore, SimpleCounter>, String) {
    let mut v = ArcView::new(ArcConfig::with_limit(limit), SessionId("s".into()), task, MemStore::new(), SimpleCounter).unwrap();
    let mut out = String::new();
    for i in 0..turns {
        let action = format!("cat src/some/rather/long/directory/name/module_number_{i}.py | grep -n needle");
        v.push_turn("", &rec(i, &action, body(30, &format!("f{i}")).as_bytes())).unwrap();
        let s = v.render_view(&mut out).unwrap();
        assert!(s.tokens <= s.limit);
        assert_eq!(s.tokens, SimpleCounter.count(out.as_bytes()), "entry counts add up to the whole view");
    }
    (v, out)
}

#[test]
fn no_task_means_no_task_section() {
    let (_, out) = filled("", 2000, 3);
    assert!(!out.contains("[task]"), "{out}");
    assert!(out.starts_with("[turn 1 "), "{out}");
    let (_, out) = filled("Fix it.", 2000, 3);
    assert!(out.starts_with("[task]\nFix it.\n"));
    for mut p in [Box::new(FullContext::new("", SimpleCounter)) as Box<dyn ViewPolicy>, Box::new(SlidingWindow::new(" \n", SimpleCounter, 3, 2000))] {
        p.push(&Turn { thought: String::new(), record: rec(0, "ls", b"a\n") }).unwrap();
        let text = p.render().unwrap().text;
        assert!(!text.contains("[task]"), "{}: {text}", p.name());
    }
}

#[test]
fn bare_summary_entries_show_their_action() {
    let (_, out) = filled("task", 2000, 40);
    let bare: Vec<&str> = out.lines().filter(|l| l.starts_with('#') && l.contains(" §") && !l.contains(" → ")).collect();
    assert!(!bare.is_empty(), "the summary has bare entries:\n{out}");
    for l in bare {
        assert!(l.contains(" $ cat src/some/rather/long/"), "{l}");
        // At most 60 characters of the action, then an ellipsis.
        let action = &l[l.find(" $ ").unwrap() + 3..];
        assert!(action.chars().count() <= 61 && action.ends_with('…'), "{l}");
    }
}

#[test]
fn elision_line_names_the_turns_on_the_page_shown_and_the_next_page() {
    let (mut v, out) = filled("task", 2000, 60);
    let line = out.lines().find(|l| l.starts_with("[turns 1-")).expect("an elision line");
    let header = out.lines().find(|l| l.starts_with("[catalog page ")).unwrap();
    let pages = header.split(['/', ':']).nth(1).unwrap().to_string();
    assert!(pages.parse::<usize>().unwrap() > 1, "{header}");
    assert!(line.contains(&format!("page 1/{pages} below lists turns 1-")), "{line}");
    assert!(line.ends_with("`catalog next` shows page 2]"), "{line}");
    // The turns it names are the ones the page lists.
    let listed = line.split("lists turns 1-").nth(1).unwrap().split(';').next().unwrap();
    let cat = &out[out.rfind("[catalog page").unwrap()..];
    assert!(cat.contains(&format!(" #{listed} ")), "page ends at turn {listed}:\n{cat}");
    assert!(!cat.contains(&format!(" #{} ", listed.parse::<u32>().unwrap() + 1)));
    // After `catalog next`, the line follows the page.
    v.act("", "catalog next").unwrap().unwrap();
    let mut out = String::new();
    v.render_view(&mut out).unwrap();
    let line = out.lines().find(|l| l.starts_with("[turns 1-")).unwrap();
    assert!(line.contains(&format!("page 2/{pages} below lists turns {}-", listed.parse::<u32>().unwrap() + 1)), "{line}");
}

#[test]
fn too_small_a_budget_names_the_smallest_that_works() {
    let task = "Fix the failing test in tests/test_counter.py.";
    let min = ArcView::<MemStore, SimpleCounter>::min_context(&ArcConfig::default(), task, &SimpleCounter);
    let at = |l: usize| ArcView::new(ArcConfig::with_limit(l), SessionId("s".into()), task, MemStore::new(), SimpleCounter);
    assert!(at(min).is_ok());
    let e = at(min - 1).unwrap_err().to_string();
    assert!(e.contains(&format!("the smallest context that works for this task is {min}")), "{e}");
    // A completion reserve adds to it.
    let cfg = ArcConfig { completion: 100, ..ArcConfig::default() };
    assert_eq!(ArcView::<MemStore, SimpleCounter>::min_context(&cfg, task, &SimpleCounter), min + 100);
}
