//! Issue 15 finding 5: no argument value reaches a panic. The values the
//! issue found, then a proptest over argument values of several commands;
//! each case runs the built program and checks that it exits with a clear
//! error or succeeds, never with exit code 101 or "panicked".

use proptest::prelude::*;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

fn lam(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lam")).args(args).stdin(Stdio::null()).output().unwrap()
}

fn no_panic(args: &[String]) -> Output {
    let o = lam(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() != Some(101) && !err.contains("panicked"), "lam {args:?} panicked: {err}");
    assert!(o.status.code().is_some(), "lam {args:?} was killed by a signal");
    o
}

/// A store holding the example session, and one of its ids.
fn store() -> &'static (PathBuf, String) {
    static S: OnceLock<(PathBuf, String)> = OnceLock::new();
    S.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("lam-args-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ex = lam_core::testsuite::example();
        let args: Vec<String> =
            ["compact", "--encoder", "hashing", "--no-cache", "--no-tokens", ex.to_str().unwrap(), "--store", dir.to_str().unwrap()].map(String::from).to_vec();
        assert!(lam(&args).status.success());
        let traj = lam_trajectory::read::read_path(&ex).unwrap().remove(0);
        let r = traj.records.iter().max_by_key(|r| r.observation.len()).unwrap();
        let mut book = lam_core::IdBook::new();
        let mut id = String::new();
        for x in &traj.records {
            let v = book.visible(lam_core::ObsId::of(x.action.as_bytes(), &x.observation)).to_string();
            if std::ptr::eq(x, r) {
                id = v;
            }
        }
        (dir, id)
    })
}

/// 1,536 float32 values (rows of 8, 384, ...).
fn floats() -> &'static PathBuf {
    static F: OnceLock<PathBuf> = OnceLock::new();
    F.get_or_init(|| {
        let p = std::env::temp_dir().join(format!("lam-args-{}.f32", std::process::id()));
        let v: Vec<u8> = (0..1536).flat_map(|i| (i as f32 / 1536.0).to_le_bytes()).collect();
        std::fs::write(&p, v).unwrap();
        p
    })
}

fn compact(extra: &[&str]) -> Vec<String> {
    let ex = lam_core::testsuite::example();
    let mut v: Vec<String> = ["compact", "--encoder", "hashing", "--no-cache", "--no-tokens", "--json"].map(String::from).to_vec();
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push(ex.to_str().unwrap().into());
    v
}

fn recall(extra: &[&str]) -> Vec<String> {
    let (dir, id) = store();
    let mut v: Vec<String> = vec!["recall".into(), "--store".into(), dir.to_str().unwrap().into(), id.clone()];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

#[test]
fn the_values_the_issue_found_are_clear_errors() {
    for bad in ["banded:0,0", "banded:1000,1", "banded:1,0", "banded:8,-1", "banded:8,NaN"] {
        let o = no_panic(&compact(&["--index", bad]));
        assert_eq!(o.status.code(), Some(if bad == "banded:1000,1" { 1 } else { 2 }), "{bad}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("banded"), "{bad}");
    }
    let o = no_panic(&recall(&["1", "--part-tokens", "0"]));
    assert_eq!(o.status.code(), Some(2));
    for bad in ["1/banana", "1/0", "0", "3/2"] {
        let o = no_panic(&recall(&[bad]));
        assert_eq!(o.status.code(), Some(2), "{bad} is refused at parse time");
    }
    // N must be the part count of this record at this --part-tokens.
    let o = no_panic(&recall(&["2/3", "--part-tokens", "1000000"]));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has 1 part"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = no_panic(&recall(&["1/1", "--part-tokens", "1000000"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Numbers the cost models and the codec cannot use are refused at parse time.
    let raw = floats().to_str().unwrap();
    for args in [
        vec!["costmodel", "phi", "--delta", "NaN"],
        vec!["costmodel", "phi", "--decoded", "inf"],
        vec!["costmodel", "schedules", "--removal", "1.5"],
        vec!["costmodel", "schedules", "--bytes-per-token", "0"],
        vec!["eval", "--thresholds", "0.9,NaN", "/nonexistent"],
        vec!["codec", "compress", "--codec", "f16", "--dim", "0", raw, "/dev/null"],
        vec!["codec", "compress", "--codec", "szp-relNaN", "--dim", "8", raw, "/dev/null"],
        vec!["codec", "compress", "--codec", "cuda:int8", "--dim", "8", raw, "/dev/null"],
    ] {
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        assert_eq!(no_panic(&args).status.code(), Some(2), "{args:?}");
    }
    // A backend this build lacks is named with the feature that brings it.
    for (args, feature) in [
        (["compact", "--encoder", "cuda-bf16", "--no-cache", lam_core::testsuite::example().to_str().unwrap()].map(String::from).to_vec(), "`cuda` feature"),
        (["codec", "compress", "--codec", "cuda:szp", "--dim", "8", raw, "/dev/null"].map(String::from).to_vec(), "`cuda` feature"),
    ] {
        let o = no_panic(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(feature), "{args:?}: {err}");
    }
}

fn num() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("1".to_string()),
        Just("-1".to_string()),
        Just("8".to_string()),
        Just("1000".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("1e309".to_string()),
        Just("0.5".to_string()),
        Just("-0.99".to_string()),
        Just("banana".to_string()),
        Just(String::new()),
        Just("18446744073709551616".to_string()),
        (0u32..5000).prop_map(|n| n.to_string()),
        (-2.0f64..2.0).prop_map(|x| format!("{x:.3}")),
    ]
}

fn case() -> impl Strategy<Value = Vec<String>> {
    let (a, b, c) = (num(), num(), num());
    prop_oneof![
        (num(), num()).prop_map(|(r, rel)| compact(&["--index", &format!("banded:{r},{rel}")])),
        num().prop_map(|t| compact(&["--threshold", &t])),
        (num(), num(), num()).prop_map(|(k, n, q)| recall(&[&format!("{k}/{n}"), "--part-tokens", &q])),
        num().prop_map(|k| recall(&[&k])),
        (a, b, c).prop_map(|(t, m, s)| [
            "eval",
            "--encoder",
            "hashing",
            "--no-cache",
            "--quiet",
            "--thresholds",
            &t,
            "--masking",
            &m,
            "--sample",
            &s,
            "/nonexistent/lam-args"
        ]
        .map(String::from)
        .to_vec()),
        (num(), num(), num(), num()).prop_map(|(b, c, t, w)| {
            let ex = lam_core::testsuite::example();
            ["view", ex.to_str().unwrap(), "--policy", "window", "--budget", &b, "--completion", &c, "--at-turn", &t, "--window", &w].map(String::from).to_vec()
        }),
        num().prop_map(|b| ["embed", "--encoder", "hashing", "--batch", &b].map(String::from).to_vec()),
        (num(), num()).prop_map(|(d, b)| {
            let raw = floats();
            ["codec", "compress", "--codec", &format!("szp-rel{b}"), "--dim", &d, raw.to_str().unwrap(), raw.with_extension("lamc").to_str().unwrap()]
                .map(String::from)
                .to_vec()
        }),
        (num(), num(), num()).prop_map(|(d, g, b)| ["costmodel", "phi", "--delta", &d, "--decoded", &g, "--batch", &b].map(String::from).to_vec()),
        (num(), num(), num(), num()).prop_map(|(t, r, b, s)| {
            ["costmodel", "schedules", "--turns", &t, "--removal", &r, "--batch", &b, "--invalidated-share", &s].map(String::from).to_vec()
        }),
        (num(), num()).prop_map(|(t, r)| ["costmodel", "classes", "--tokens", &t, "--rho", &r].map(String::from).to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn no_argument_value_panics(args in case()) {
        no_panic(&args);
    }
}

/// A URL is never taken for a file path: `--cache redis://...` is a clear
/// error naming `--cache`, `--cache postgres://...` on a server that is not
/// there a clear error naming the shared embedding cache (passwords masked),
/// and neither leaves a directory where the command ran.
#[test]
fn a_cache_url_is_refused_not_made_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ex = lam_core::testsuite::example();
    let cases = [("redis://lam:secret@db.invalid/lam", "--cache"), ("postgres://lam:secret@db.invalid/lam", "opening the shared embedding cache")];
    for cmd in ["compact", "replay"] {
        for (url, says) in cases {
            let args: Vec<String> = [cmd, "--encoder", "bert", "--cache", url, ex.to_str().unwrap()].map(String::from).to_vec();
            let o = Command::new(env!("CARGO_BIN_EXE_lam")).args(&args).current_dir(dir.path()).stdin(Stdio::null()).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success() && err.contains(says) && !err.contains("secret"), "lam {cmd} --cache {url}: {err}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "lam {cmd} --cache {url} created something");
        }
    }
}
