//! `lam serve`: bad arguments get clear errors, never a panic.

fn serve(args: &[&str]) -> (i32, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lam")).arg("serve").args(args).output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let base = ["--encoder", "hashing", "--no-cache", "--store", store];
    let (code, err) = serve(&[&base[..], &["--upstream", "ftp://example.invalid"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--upstream `ftp://example.invalid`"), "{err}");
    let (code, err) = serve(&["--encoder", "hashing", "--store", "redis://h", "--upstream", "http://127.0.0.1:9"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown store scheme"), "{err}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = serve(&[&base[..], &["--upstream", "http://127.0.0.1:9", "--listen", &addr]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("listening on {addr}")), "{err}");
    let (code, err) = serve(&[&base[..], &["--upstream", "http://127.0.0.1:9", "--threshold", "2"]].concat());
    assert_eq!(code, 2, "{err}");
}
