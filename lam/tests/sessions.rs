//! Issue #28 defect 10: separate runs archived into one store under the same
//! session name stay separate sessions; the same run again is a no-op;
//! `--append` adds to the existing session on purpose.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lam")).args(args).env("RUST_BACKTRACE", "0").output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lam-sessions-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A two-record trajectory of session `run` whose observations say `tag`.
fn traj(dir: &Path, file: &str, tag: &str) -> String {
    let p = dir.join(file);
    let line =
        |i: u32, obs: &str| format!("{{\"session\": \"run\", \"index\": {i}, \"action\": \"cat f{i}\", \"observation\": \"{obs}\\n\", \"returncode\": 0}}\n");
    std::fs::write(&p, line(0, &format!("{tag} zero")) + &line(1, &format!("{tag} one"))).unwrap();
    p.to_str().unwrap().to_string()
}

fn compact(file: &str, store: &str, extra: &[&str]) -> Output {
    let o = lam(&[&["compact", "--encoder", "hashing", "--no-cache", "--no-tokens", file, "--store", store][..], extra].concat());
    assert!(o.status.success(), "{}", text(&o.stderr));
    o
}

/// `lam recall --list` rows: (session, observations).
fn sessions(store: &str) -> Vec<(String, String)> {
    let o = lam(&["recall", "--store", store, "--list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout).lines().map(|l| l.split_once('\t').map(|(a, b)| (a.to_string(), b.to_string())).unwrap()).collect()
}

#[test]
fn separate_runs_do_not_merge_in_a_shared_store() {
    let dir = scratch("merge");
    let (a, b) = (traj(&dir, "a.jsonl", "alpha"), traj(&dir, "b.jsonl", "beta"));
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    compact(&a, store, &[]);
    let o = compact(&b, store, &[]);
    assert!(text(&o.stderr).contains("run@2"), "{}", text(&o.stderr));
    let two = vec![("run".to_string(), "2 observations".to_string()), ("run@2".to_string(), "2 observations".to_string())];
    assert_eq!(sessions(store), two);
    // The same runs again: idempotent, nothing appended, no third session.
    let seg = |s: &str| std::fs::metadata(Path::new(s).join("seg-000001.log")).unwrap().len();
    let before = seg(store);
    compact(&a, store, &[]);
    compact(&b, store, &[]);
    assert_eq!(sessions(store), two);
    assert_eq!(seg(store), before);
    // --append: on purpose, into the session of that name.
    let c = traj(&dir, "c.jsonl", "gamma");
    compact(&c, store, &["--append"]);
    assert_eq!(sessions(store)[0], ("run".to_string(), "4 observations".to_string()));
    std::fs::remove_dir_all(&dir).unwrap();
}
