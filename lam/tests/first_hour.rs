//! The first hour of a new user (issue #29): `lam --help` lists commands by
//! use in plain words, `lam eval` runs its controls only when asked (and
//! says so), `lam view` shows no empty sections, names every summary
//! entry's action, and a too-small budget names the smallest that works.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lam")).args(args).env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE").output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn example() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/edit-session.jsonl").to_string()
}

/// The subcommand names of `lam --help`, in order.
fn commands(help: &str) -> Vec<String> {
    let start = help.find("Commands:\n").expect("a command list");
    help[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Text outside parentheses (nested ones included).
fn outside_parens(s: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn help_lists_commands_by_use() {
    let o = lam(&["--help"]);
    assert!(o.status.success());
    let help = text(&o.stdout);
    let expected = ["compact", "serve", "run", "top", "replay", "recall", "eval", "view", "mcp", "store", "embed", "codec", "costmodel", "help"];
    assert_eq!(commands(&help), expected, "{help}");
}

#[test]
fn help_uses_paper_symbols_only_in_parentheses() {
    for args in [&["--help"][..], &["view", "--help"], &["eval", "--help"]] {
        let help = text(&lam(args).stdout);
        let plain = outside_parens(&help);
        for symbol in ["L_ctx", "G_max", "ARC's q", "phi", "δ", "delta", "RSC", "BFR", "ECR"] {
            assert!(!plain.contains(symbol), "`lam {}`: bare `{symbol}`:\n{help}", args.join(" "));
        }
    }
}

fn eval_args<'a>(extra: &[&'a str], inputs: &'a [String]) -> Vec<&'a str> {
    let mut a = vec!["eval", "--encoder", "hashing", "--no-cache", "--quiet", "--no-semdedup", "--thresholds", "0.95", "--masking", "5"];
    a.extend_from_slice(extra);
    a.extend(inputs.iter().map(String::as_str));
    a
}

fn two_trajectories() -> Vec<String> {
    let m = lam_core::testsuite::corpus().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    ["astropy__astropy-12907.traj.json.gz", "django__django-10973.traj.json.gz"].iter().map(|f| m.join(f).display().to_string()).collect()
}

#[test]
fn eval_says_once_that_controls_were_not_run() {
    let inputs = two_trajectories();
    let o = lam(&eval_args(&[], &inputs));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let all = text(&o.stdout) + &text(&o.stderr);
    assert_eq!(all.matches("Controls not run").count(), 1, "{all}");
    assert!(all.contains("--controls"));
    assert!(!all.contains("LoCoMo control:"), "no control ran");
    // With --json the line goes to stderr.
    let o = lam(&eval_args(&["--json"], &inputs));
    assert!(text(&o.stderr).contains("Controls not run"));
    assert!(!text(&o.stdout).contains("Controls not run"));
}

/// A tiny LoCoMo file: two conversations of a few turns.
fn tiny_locomo(dir: &Path) -> PathBuf {
    let turn = |i: usize| serde_json::json!({ "speaker": "A", "dia_id": format!("D1:{i}"), "text": format!("I went hiking on day {i} and it was lovely.") });
    let conv = serde_json::json!([{ "sample_id": "c1", "conversation": { "session_1": (0..6).map(turn).collect::<Vec<_>>() } }]);
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("locomo10.json");
    std::fs::write(&p, conv.to_string()).unwrap();
    p
}

#[test]
fn eval_controls_print_an_estimate_first() {
    let dir = std::env::temp_dir().join(format!("lam-first-hour-{}", std::process::id()));
    let loc = tiny_locomo(&dir).display().to_string();
    let inputs = two_trajectories();
    let report = dir.join("report").display().to_string();
    let o = lam(&eval_args(&["--controls", "--locomo", &loc, "--report", &report], &inputs));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let line = err.lines().find(|l| l.starts_with("lam eval: LoCoMo control: 6 dialogue turns")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains(" more (estimated from the first batch"), "{line}");
    assert!(!(text(&o.stdout) + &err).contains("Controls not run"));
    let md = std::fs::read_to_string(dir.join("report/report.md")).unwrap();
    assert!(md.contains("## LoCoMo control\n\n6 dialogue turns"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn view_has_no_empty_sections_and_names_every_action() {
    let o = lam(&["view", &example(), "--budget", "2000"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(!out.contains("[task]"), "the example has no task: no empty section\n{out}");
    // Every summary entry (full or bare) and every catalog line names its action.
    let entries: Vec<&str> = out.lines().filter(|l| l.starts_with('#') && !l.contains(" · ")).collect();
    assert!(!entries.is_empty(), "{out}");
    assert!(entries.iter().all(|l| l.contains(" $ ")), "{entries:?}");
    let cat = &out[out.find("[catalog page ").expect("a catalog page")..];
    assert!(cat.lines().skip(1).all(|l| l.contains(" $ ")), "{cat}");
    // Every section header is followed by content.
    let lines: Vec<&str> = out.lines().collect();
    for w in lines.windows(2) {
        let header = |l: &str| l.starts_with('[') && l.ends_with(']') && !l.starts_with("[turns ");
        if header(w[0]) {
            assert!(!w[1].is_empty() && !header(w[1]), "empty section {:?}\n{out}", w[0]);
        }
    }
}

#[test]
fn view_catalog_hint_matches_the_page_shown() {
    let out = text(&lam(&["view", &example(), "--budget", "2000"]).stdout);
    let hint = out.lines().find(|l| l.starts_with("[turns 1-")).expect("an elision line");
    let header = out.lines().find(|l| l.starts_with("[catalog page ")).expect("a catalog page");
    let page = header.split(':').next().unwrap().trim_start_matches("[catalog page ");
    assert!(hint.contains(&format!("; page {page} below lists turns ")), "{hint} / {header}");
    let (p, n) = page.split_once('/').unwrap();
    if p != n {
        assert!(hint.ends_with(&format!("`catalog next` shows page {}]", p.parse::<u32>().unwrap() + 1)), "{hint}");
    }
    // The last turn it names is the last listed on the page.
    let last = hint.split("below lists turns ").nth(1).unwrap().split(['-', ';', ']']).nth(1).unwrap();
    let cat = &out[out.find("[catalog page ").unwrap()..];
    let listed: Vec<&str> = cat.lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(listed.last().copied(), Some(format!("#{last}").as_str()), "{cat}");
}

#[test]
fn view_too_small_budget_names_the_smallest_once() {
    let o = lam(&["view", &example(), "--budget", "300"]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert_eq!(err.matches("--budget must be at least").count(), 1, "{err}");
    assert!(!err.contains("Caused by"), "{err}");
    let min: usize = err.split("--budget must be at least ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(err.contains(&format!("--budget must be at least {min} for this trajectory")));
    assert!(lam(&["view", &example(), "--budget", &min.to_string()]).status.success(), "the named budget works");
    assert!(!lam(&["view", &example(), "--budget", &(min - 1).to_string()]).status.success());
}

/// `--out` decision files speak the stubs' language: `§id`, chunks counted
/// from 1 within their observation, representatives as `§id#k`.
#[test]
fn out_decisions_use_the_stubs_numbering() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = lam(&["compact", &example(), "--encoder", "hashing", "--no-cache", "--out", out]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir.path().join("edit-session.decisions.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.iter().all(|v| v["id"].as_str().unwrap().starts_with('§') && v["chunk"].as_u64().unwrap() >= 1));
    let dropped: Vec<_> = lines.iter().filter(|v| v["decision"] == "dropped").collect();
    assert!(!dropped.is_empty());
    for v in dropped {
        let rep = v["representative"].as_str().unwrap();
        let (id, k) = rep.split_once('#').unwrap();
        let target = lines.iter().find(|w| w["id"] == id && w["chunk"].as_u64() == k.parse().ok()).expect("the representative is a chunk of the run");
        assert_eq!(target["decision"], "retained", "{rep}");
    }
}
