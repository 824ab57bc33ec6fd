//! The `lam` program end to end: `lam view` archives, `lam recall` returns
//! exact bytes (whole and in parts), bad arguments get errors, not panics.

use lam_trajectory::read;

#[test]
fn lam_view_archives_and_lam_recall_returns_exact_bytes() {
    let bin = env!("CARGO_BIN_EXE_lam");
    let dir = std::env::temp_dir().join(format!("lam-arc-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ex = lam_core::testsuite::example();
    let o =
        std::process::Command::new(bin).args(["view", ex.to_str().unwrap(), "--budget", "4000", "--json", "--store", dir.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["policy"], "arc");
    assert!(v["tokens"].as_u64().unwrap() <= v["limit"].as_u64().unwrap());
    assert_eq!(v["limit"], 4000);
    let text = v["text"].as_str().unwrap();
    assert_eq!(lam_trajectory::tokens::count(text.as_bytes()) as u64, v["tokens"].as_u64().unwrap());
    let cited: Vec<&str> = v["citations"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert!(!cited.is_empty());

    let traj = read::read_path(&ex).unwrap().remove(0);
    assert!(traj.records.iter().any(|r| std::str::from_utf8(&r.observation).is_err()), "the example keeps one non-UTF-8 observation");
    let mut book = lam_core::IdBook::new();
    for r in &traj.records {
        let id = book.visible(lam_core::ObsId::of(r.action.as_bytes(), &r.observation)).to_string();
        let o = std::process::Command::new(bin).args(["recall", "--store", dir.to_str().unwrap(), &format!("§{id}")]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.stdout, r.observation, "record {}", r.index);
        // Parts of at most 50 tokens concatenate to the same bytes (a few records: each part is a process).
        if r.index % 8 != 0 && std::str::from_utf8(&r.observation).is_ok() {
            continue;
        }
        let mut joined = Vec::new();
        for k in 1.. {
            let o = std::process::Command::new(bin)
                .args(["recall", "--store", dir.to_str().unwrap(), &id, &k.to_string(), "--part-tokens", "50"])
                .output()
                .unwrap();
            if !o.status.success() {
                assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));
                break;
            }
            joined.extend_from_slice(&o.stdout);
        }
        assert_eq!(joined, r.observation, "record {} in parts", r.index);
    }
    let o = std::process::Command::new(bin).args(["recall", "--store", dir.to_str().unwrap(), "§0000000f"]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("nearest: §"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lam_mcp_refuses_bad_settings_with_errors() {
    let bin = env!("CARGO_BIN_EXE_lam");
    let missing = std::env::temp_dir().join(format!("lam-mcp-missing-{}", std::process::id()));
    let o = std::process::Command::new(bin).args(["mcp", "--store", missing.to_str().unwrap()]).stdin(std::process::Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(missing.to_str().unwrap()) && err.contains("No such file"), "{err}");
    let dir = std::env::temp_dir().join(format!("lam-mcp-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = std::process::Command::new(bin)
        .args(["mcp", "--store", dir.to_str().unwrap(), "--page-tokens", "10"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("page tokens must be at least"));
    assert!(o.stdout.is_empty(), "stdout carries only the protocol");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A client of a newer MCP revision probes before `initialize` (Claude Code
/// sends `server/discover`): `lam mcp` answers "method not found" and goes
/// on, instead of ending the session; a batch gets "Invalid Request".
#[test]
fn lam_mcp_answers_a_probe_before_initialize() {
    use std::io::{BufRead, Write};
    let dir = std::env::temp_dir().join(format!("lam-mcp-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["mcp", "--store", dir.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init =
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    for line in [
        r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{}}"#,
        init,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    for _ in 0..4 {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        answers.push(serde_json::from_str::<serde_json::Value>(&l).unwrap_or_else(|e| panic!("{e}: {l:?}")));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    // Answers to different requests may come in any order: each is found by its id.
    let answer = |id: serde_json::Value| answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"));
    assert_eq!(answer(0.into())["error"]["code"].as_i64(), Some(-32601), "{answers:?}");
    assert!(answer(1.into())["result"]["serverInfo"].is_object(), "{answers:?}");
    let tools: Vec<&str> = answer(2.into())["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(tools.contains(&"recall"), "{tools:?}");
    // A batch is valid JSON but no Request object (issue 57): -32600, id null.
    assert_eq!(answer(serde_json::Value::Null)["error"]["code"].as_i64(), Some(-32600), "{answers:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
