//! Issue #28 through the `lam` program: no command prints a store's password;
//! a FIFO in an input folder is skipped, not read forever; `recall --list`
//! escapes session names; an error's cause prints once.

use lam_core::{ObsStore, Record, SessionId};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PLANTED: &str = "s3cr3tPW";

/// Run `lam ARGS` with stdin closed, killed after `limit`; (exit success, stdout, stderr, timed out).
fn lam_within(args: &[&str], limit: Duration) -> (bool, String, String, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env_remove("PGPASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            timed_out = true;
            child.kill().unwrap();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.success(), out, err, timed_out)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lam-security-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn no_command_prints_a_store_password() {
    let ex = lam_core::testsuite::example();
    let ex = ex.to_str().unwrap();
    let work = scratch("pw");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("plain-file"), b"").unwrap();
    let salvage_to = work.join("salvaged");
    let specs = [
        format!("postgres://lam:{PLANTED}@127.0.0.1:1/lam"),
        format!("postgresql://lam@127.0.0.1:1/lam?sslmode=disable&Password={PLANTED}"),
        format!("postgres://lam@127.0.0.1:1/lam?token={PLANTED}&api_key={PLANTED}"),
        // A URL without its scheme (a directory that does not exist).
        format!("lam:{PLANTED}@127.0.0.1:1/lam"),
        // A directory that does not exist and cannot be made (under a regular file).
        format!("{}/plain-file/store", work.display()),
    ];
    for spec in &specs {
        let runs: Vec<Vec<&str>> = vec![
            vec!["recall", "--store", spec, "§missing"],
            vec!["recall", "--store", spec, "--list"],
            vec!["recall", "--store", spec, "--list", "--session", "s"],
            vec!["compact", "--encoder", "hashing", "--no-cache", "--no-tokens", ex, "--store", spec],
            vec!["view", "--encoder", "hashing", "--no-cache", ex, "--store", spec],
            vec!["mcp", "--store", spec],
            vec!["mcp", "--store", spec, "--http", "127.0.0.1:0"],
            vec!["store", "check", spec],
            vec!["store", "salvage", spec, "--to", salvage_to.to_str().unwrap()],
        ];
        for args in runs {
            let (ok, out, err, timed_out) = lam_within(&args, Duration::from_secs(60));
            assert!(!timed_out, "{args:?} did not finish");
            assert!(!out.contains(PLANTED) && !err.contains(PLANTED), "{args:?} printed the password:\n{out}\n{err}");
            assert!(!ok, "{args:?} succeeded?\n{err}");
            assert!(!err.is_empty(), "{args:?}: no error message");
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_fifo_in_an_input_folder_is_skipped() {
    let dir = scratch("fifo");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(lam_core::testsuite::example(), dir.join("edit-session.jsonl")).unwrap();
    let fifo = dir.join("blocked.json");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (ok, out, err, timed_out) =
        lam_within(&["compact", dir.to_str().unwrap(), "--encoder", "hashing", "--no-cache", "--no-tokens"], Duration::from_secs(120));
    assert!(!timed_out, "lam compact blocked on the FIFO:\n{err}");
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("skipping") && err.contains("blocked.json") && err.contains("FIFO"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn recall_list_escapes_session_names() {
    let dir = scratch("names");
    let mut st = arc_store::FileStore::open(&dir).unwrap();
    let rec = Record { index: 0, action: "cat a".into(), observation: b"x\n".to_vec(), returncode: Some(0) };
    st.append(&SessionId::new("evil\nname\x1b[2J\tend"), &rec, 1).unwrap();
    st.flush().unwrap();
    drop(st);
    let (ok, out, err, _) = lam_within(&["recall", "--store", dir.to_str().unwrap(), "--list"], Duration::from_secs(60));
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 1, "{out:?}");
    assert!(out.starts_with("evil\\nname\\u{1b}[2J\\tend\t1 observations"), "{out:?}");
    assert!(!out.contains('\x1b'));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_store_error_prints_its_cause_once() {
    let dir = scratch("cause").join("missing");
    let (ok, _, err, _) = lam_within(&["recall", "--store", dir.to_str().unwrap(), "--list"], Duration::from_secs(60));
    assert!(!ok);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}
