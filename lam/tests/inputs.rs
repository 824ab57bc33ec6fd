//! Issue 15 findings 3, 4 and 8 through the `lam` program: two inputs never
//! share a session, one bad file does not stop a run, `lam embed` keeps line
//! alignment.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn lam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lam")).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lam-inputs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

const FAST: [&str; 6] = ["compact", "--encoder", "hashing", "--no-cache", "--no-tokens", "--json"];

/// `lam compact --json` lines.
fn rows(o: &Output) -> Vec<serde_json::Value> {
    text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Sessions of `lam compact --json` rows (the `unreadable` lines aside).
fn sessions(o: &Output) -> Vec<String> {
    rows(o).iter().filter_map(|v| v.get("session")).map(|s| s.as_str().unwrap().to_string()).collect()
}

#[test]
fn finding_3_two_runs_of_one_task_stay_two_sessions() {
    let corpus = lam_core::testsuite::corpus().join("sweagent-java-multi-swe-bench");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&corpus).unwrap().map(|e| e.unwrap().path().join("trajs/fasterxml__jackson-core-370.traj.gz")).filter(|p| p.is_file()).collect();
    files.sort();
    assert!(files.len() >= 2, "two runs of jackson-core-370 under {}", corpus.display());
    let (a, b) = (files[0].to_str().unwrap(), files[1].to_str().unwrap());
    let (store, out) = (scratch("f3-store"), scratch("f3-out"));
    let run = || {
        let o = lam(&[&FAST[..], &[a, b, "--store", store.to_str().unwrap(), "--out", out.to_str().unwrap()]].concat());
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("is named"), "the rename is noted: {}", text(&o.stderr));
        sessions(&o)
    };
    let names = run();
    assert_eq!(names.len(), 2);
    assert_ne!(names[0], names[1]);
    assert_eq!(names[0], "fasterxml__jackson-core-370");
    assert_eq!(run(), names, "the same inputs give the same names on every run");
    // Two residuals in --out, two sessions in the store, each with its own trajectory's bytes.
    let residuals: BTreeSet<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".residual.jsonl")).collect();
    assert_eq!(residuals.len(), 2, "{residuals:?}");
    let o = lam(&["recall", "--store", store.to_str().unwrap(), "--list"]);
    let listed: BTreeSet<String> = text(&o.stdout).lines().map(|l| l.split('\t').next().unwrap().to_string()).collect();
    assert_eq!(listed, names.iter().cloned().collect());
    for (name, file) in names.iter().zip([a, b]) {
        let traj = lam_trajectory::read::read_path(Path::new(file)).unwrap().remove(0);
        let last = traj.records.last().unwrap();
        let mut book = lam_core::IdBook::new();
        let mut id = String::new();
        for r in &traj.records {
            id = book.visible(lam_core::ObsId::of(r.action.as_bytes(), &r.observation)).to_string();
        }
        let o = lam(&["recall", "--store", store.to_str().unwrap(), "--session", name, &id]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(o.stdout, last.observation);
    }
    std::fs::remove_dir_all(&store).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn finding_3_names_that_sanitise_alike_get_separate_outputs() {
    let dir = scratch("f3-alike");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("two.jsonl");
    std::fs::write(&f, "{\"session\":\"x/y\",\"index\":0,\"action\":\"ls\",\"observation\":\"a\\n\"}\n{\"session\":\"x_y\",\"index\":0,\"action\":\"ls\",\"observation\":\"b\\n\"}\n").unwrap();
    let out = dir.join("out");
    let o = lam(&[&FAST[..], &[f.to_str().unwrap(), "--out", out.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let names = sessions(&o);
    assert_eq!(names[0], "x/y");
    assert!(names[1].starts_with("x_y~"), "{names:?}");
    assert_eq!(std::fs::read_dir(&out).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".residual.jsonl")).count(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A folder with a corrupt file between two good ones.
fn mixed_folder(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(lam_core::testsuite::example(), dir.join("a.jsonl")).unwrap();
    std::fs::write(dir.join("b.jsonl"), b"{\"session\":\"b\",\"index\":0,\"observation\":\"x\"}\n{not json\n").unwrap();
    let mut c = String::new();
    for i in 0..6 {
        c.push_str(&format!("{{\"session\":\"c\",\"index\":{i},\"action\":\"cat f{i}\",\"observation\":\"line one\\nline {i}\\nline one\\n\"}}\n"));
    }
    std::fs::write(dir.join("c.jsonl"), c).unwrap();
    dir
}

#[test]
fn finding_4_compact_reads_every_good_file_and_fails_at_the_end() {
    let dir = mixed_folder("f4-compact");
    let o = lam(&[&FAST[..], &[dir.to_str().unwrap()]].concat());
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("b.jsonl: line 2"), "the bad file is named with its error: {err}");
    assert!(err.contains("1 of 3 input(s) failed") && err.contains("b.jsonl line 2"), "{err}");
    let unreadable: Vec<_> = rows(&o).into_iter().filter_map(|v| v.get("unreadable").cloned()).collect();
    assert_eq!(unreadable.len(), 1, "--json names the bad input: {unreadable:?}");
    assert!(unreadable[0]["path"].as_str().unwrap().ends_with("b.jsonl") && unreadable[0]["line"] == 2, "{unreadable:?}");
    let names = sessions(&o);
    assert_eq!(names.len(), 2, "both good files were compacted: {names:?}");
    assert_eq!(names[1], "c");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn finding_4_eval_reads_every_good_file_and_fails_at_the_end() {
    let dir = mixed_folder("f4-eval");
    let o =
        lam(&["eval", "--encoder", "hashing", "--no-cache", "--quiet", "--no-locomo", "--no-semdedup", "--thresholds", "0.9", "--json", dir.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("b.jsonl: line 2") && err.contains("1 input(s) failed"), "{err}");
    assert!(text(&o.stdout).lines().count() >= 1, "the report of the good files is printed");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn embed(args: &[&str], stdin: &str) -> Output {
    let mut c =
        Command::new(env!("CARGO_BIN_EXE_lam")).arg("embed").args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

fn vectors(o: &Output) -> Vec<Vec<f32>> {
    text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn finding_8_embed_keeps_lines_aligned_and_says_what_it_truncates() {
    let long: String = (0..900).map(|i| format!("word{i} ")).collect();
    let input = format!("\"short text\"\n\n{}\n\"short text\"\n", serde_json::to_string(&long).unwrap());
    // The BERT encoder (the default) embeds the empty string.
    let o = embed(&[], &input);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v = vectors(&o);
    assert_eq!(v.len(), 4, "one output line per input line");
    assert_eq!(v[0], v[3]);
    assert_ne!(v[1], v[0]);
    let err = text(&o.stderr);
    assert!(err.contains("stdin line 3") && err.contains("--chunk"), "{err}");
    assert_eq!(err.matches("warning").count(), 1, "{err}");
    // --chunk: the normalised mean of the chunk vectors, no warning; short lines unchanged.
    let c = embed(&["--chunk"], &input);
    assert!(c.status.success() && !text(&c.stderr).contains("warning"), "{}", text(&c.stderr));
    let w = vectors(&c);
    assert_eq!(w.len(), 4);
    assert_eq!((&w[0], &w[1], &w[3]), (&v[0], &v[1], &v[3]));
    assert_ne!(w[2], v[2]);
    let norm: f64 = w[2].iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{norm}");
    // An encoder that cannot embed the empty string says which line.
    let h = embed(&["--encoder", "hashing"], "\"a b\"\n\n");
    assert!(!h.status.success() && text(&h.stderr).contains("stdin line 2"), "{}", text(&h.stderr));
}
