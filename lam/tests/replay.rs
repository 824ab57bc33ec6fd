//! `lam replay` on Claude Code transcripts, Codex rollouts and Gemini CLI
//! session files (both forms), and on a real corpus trajectory in both wire
//! shapes: one proxy session per conversation, every tool result admitted
//! once, no earlier byte changed, no line the model had not seen withheld;
//! an unreadable input is named and costs no other.

use serde_json::Value;
use std::process::{Command, Stdio};

fn replay(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lam")).arg("replay").args(["--encoder", "hashing", "--json"]).args(args).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "lam replay failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fixtures(sub: &str) -> String {
    format!("{}/../lam-trajectory/tests/fixtures/{sub}", env!("CARGO_MANIFEST_DIR"))
}

fn check_sessions(v: &Value) {
    for s in v["sessions"].as_array().unwrap() {
        let name = &s["session"];
        assert_eq!(s["proxy_sessions"], 1, "{name}: one conversation, one proxy session");
        // A cut re-writes what follows it (the default budget is on: `lam run`'s).
        if s["cuts"] == 0 {
            assert_eq!(s["earlier_changed"], 0, "{name}: earlier bytes changed");
        }
        assert_eq!(s["new_lines_hidden"], 0, "{name}: lines the model had not seen were withheld");
        assert_eq!(s["cited_recall_wrong"], 0, "{name}: a cited id did not recall its tool result exactly");
        assert!(s["tool_results"] == 0 || s["new_lines"].as_u64().unwrap() > 0, "{name}: new lines counted");
        assert_eq!(s["admitted"], s["tool_results"], "{name}: each tool result admitted once");
        assert!(s["billed_lam"].as_f64().unwrap() <= s["billed_direct"].as_f64().unwrap() + 1e-9, "{name}: lam billed more");
    }
}

#[test]
fn agent_transcripts_replay_in_their_own_shapes() {
    let v = replay(&[&fixtures("claude-code"), &fixtures("codex")]);
    let shapes: Vec<&str> = v["sessions"].as_array().unwrap().iter().map(|s| s["shape"].as_str().unwrap()).collect();
    assert!(shapes.contains(&"claude-code") && shapes.contains(&"codex"), "{shapes:?}");
    check_sessions(&v);
    assert_eq!(v["total"]["proxy_sessions"].as_u64().unwrap() as usize, shapes.len());
}

/// A session file the real Gemini CLI 0.61.0 wrote, sent as it sends its
/// requests (the Gemini API): one proxy session, its 8 results admitted
/// once, nothing earlier changed or withheld, the bill lower.
#[test]
fn a_gemini_cli_session_replays_on_the_gemini_wire() {
    let v = replay(&[&fixtures("gemini-cli")]);
    check_sessions(&v);
    let s = &v["sessions"][0];
    assert_eq!((s["shape"].as_str(), s["requests"].as_u64(), s["admitted"].as_u64()), (Some("gemini-cli"), Some(9), Some(8)));
    assert!(s["tool_tokens_out"].as_u64() < s["tool_tokens_in"].as_u64(), "{s}");
}

/// The real `.json` chats of Gemini CLI before 0.39 (fixtures `gemini-cli/tmp`,
/// laid out as `~/.gemini/tmp`; public, MIT), found by the folder walk and
/// sent as Gemini CLI sends its requests: 21 results in 3 sessions (the
/// fourth has none), each admitted once, nothing earlier changed or
/// withheld, the bill no higher; under a budget small enough to cut them
/// (4,000 tokens) every cited id recalls exactly.
#[test]
fn real_gemini_cli_json_chats_replay_on_the_gemini_wire() {
    let v = replay(&[&fixtures("gemini-cli/tmp")]);
    check_sessions(&v);
    let sessions = v["sessions"].as_array().unwrap();
    assert!(sessions.iter().all(|s| s["shape"] == "gemini-cli"), "{v}");
    let t = &v["total"];
    assert_eq!((sessions.len(), t["tool_results"].as_u64(), t["proxy_sessions"].as_u64()), (3, Some(21), Some(3)), "{t}");
    assert_eq!(v["unreadable"], serde_json::json!([]));
    let t = &replay(&[&fixtures("gemini-cli/tmp"), "--budget", "4000"])["total"];
    assert!(t["cuts"].as_u64().unwrap() > 0, "{t}");
    assert!(t["cited_recalled"].as_u64().unwrap() > 0 && t["cited_recall_wrong"] == 0, "every cited id recalls exactly: {t}");
}

/// A real Codex rollout (shared corpus, OpenPrintKit, MIT) with NUL bytes
/// spliced in at line 182, beside a good session: the good one is replayed
/// and printed, the bad one named with its line (standard error, and
/// `unreadable` in `--json`), and the run exits 1 at the end.
#[test]
fn one_unreadable_input_costs_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let real = lam_core::corpus_dir().join("agent-transcripts/openprintkit/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl");
    let bad = dir.path().join("rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl");
    std::fs::write(&bad, with_nuls_at_line(&std::fs::read(&real).unwrap(), 182)).unwrap();
    std::fs::copy(format!("{}/session-2026-12-06T09-27-0f700217.jsonl", fixtures("gemini-cli")), dir.path().join("session-good.jsonl")).unwrap();
    let run = |json: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lam"));
        c.args(["replay", "--encoder", "hashing", dir.path().to_str().unwrap()]).args(json.then_some("--json")).stdin(Stdio::null()).output().unwrap()
    };
    let out = run(true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}: line 182: malformed JSON at column 1", bad.display())), "{err}");
    assert!(err.contains("1 of 2 input(s) unreadable") && err.contains(&format!("{} line 182", bad.display())), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_sessions(&v);
    assert_eq!(v["sessions"].as_array().unwrap().len(), 1, "the good session is replayed: {v}");
    let u = &v["unreadable"];
    assert_eq!(
        (u.as_array().unwrap().len(), &u[0]["path"], &u[0]["line"], &u[0]["record"]),
        (1, &Value::from(bad.to_str().unwrap()), &Value::from(182), &Value::from("line 182")),
        "{u}"
    );
    assert!(u[0]["error"].as_str().unwrap().contains("malformed JSON at column 1"), "{u}");
    let out = run(false);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cited ids recalled exactly:"), "the table of the good session is printed");
}

/// `bytes` with 512 NUL bytes spliced in at the start of line `n` (1-based).
fn with_nuls_at_line(bytes: &[u8], n: usize) -> Vec<u8> {
    let at = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(n - 2).map(|(i, _)| i + 1).unwrap();
    [&bytes[..at], &[0u8; 512][..], &bytes[at..]].concat()
}

/// Every real transcript of `shared/corpus/agent-transcripts` (Claude Code
/// 2.0.76 and 2.1.38-39 with subagents and a compaction, Codex CLI 0.34),
/// each as its agent sends it: one proxy session per conversation (the
/// compacted transcript is two), every non-empty tool result admitted once,
/// no earlier byte changed, the bill no higher.
#[test]
fn every_real_agent_transcript_replays_as_its_agent_sends_it() {
    let dir = lam_core::corpus_dir().join("agent-transcripts");
    let v = replay(&[dir.to_str().unwrap()]);
    check_sessions(&v);
    let sessions = v["sessions"].as_array().unwrap();
    let shapes = |s: &str| sessions.iter().filter(|x| x["shape"] == s).count();
    // 12 conversations in 11 files; the aborted Codex session and the compaction subagent hold no tool result.
    assert_eq!((sessions.len(), shapes("claude-code"), shapes("codex")), (10, 8, 2), "{v}");
    assert!(sessions.iter().any(|s| s["session"].as_str().unwrap().ends_with(".compact-1")), "the compaction splits its transcript");
    let t = &v["total"];
    assert_eq!(t["tool_results"], 1168, "non-empty tool results (a result in several text blocks is one each): {t}");
    assert!(t["removal"].as_f64().unwrap() > 0.1 && t["billed_ratio"].as_f64().unwrap() < 0.95, "{t}");
    // `lam run`'s default budget (issue 54's target: at most 0.70x direct,
    // TTL-priced): 100,000 for both agents' models here (claude-opus-4-6:
    // level 133,000; gpt-5-codex: 195,000), cutting the long sessions.
    assert_eq!(v["budget"]["mode"], "default", "{}", v["budget"]);
    assert!(sessions.iter().all(|s| s["budget"] == 100_000), "{v}");
    assert!(t["cuts"].as_u64().unwrap() > 0 && t["billed_ratio"].as_f64().unwrap() <= 0.70, "{t}");
    assert!(t["cited_recalled"].as_u64().unwrap() > 0 && t["cited_recall_wrong"] == 0, "every cited id recalls exactly: {t}");
    assert!(t["billed_lam"].as_f64().unwrap() < t["billed_no_budget"].as_f64().unwrap(), "{t}");
}

/// `lam replay` holds each session to `lam run`'s default budget, says so
/// in `--json` (`budget.mode`, each session's `budget`), and `--budget
/// off` or `--budget N` replace it.
#[test]
fn replay_uses_lam_run_s_default_budget() {
    let p = gapped_transcript();
    let path = p.to_str().unwrap();
    let v = replay(&[path]);
    assert_eq!(v["budget"], serde_json::json!({"mode": "default", "ceiling": 100_000, "keep": 3}), "{v}");
    assert_eq!(v["sessions"][0]["budget"], 100_000, "claude-opus-4-6: min(100,000, 133,000)");
    assert!(v["total"]["billed_no_budget"].as_f64().unwrap() > 0.0, "the bill without the budget too: {v}");
    let off = replay(&["--budget", "off", path]);
    assert_eq!(off["budget"]["mode"], "off");
    assert!(off["sessions"][0]["budget"].is_null(), "{off}");
    let given = replay(&["--budget", "5000", path]);
    assert_eq!((given["budget"]["mode"].as_str(), given["sessions"][0]["budget"].as_u64()), (Some("given"), Some(5000)), "{given}");
    let out = Command::new(env!("CARGO_BIN_EXE_lam")).args(["replay", "--budget-target", "10", path]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--budget-target needs --budget TOKENS"), "{out:?}");
}

#[test]
fn a_corpus_trajectory_saves_on_the_bill_in_both_shapes() {
    let dir = lam_core::corpus_dir().join("mini-swe-agent-gemini3pro-swebench-verified/trajs/astropy__astropy-13236.traj.json.gz");
    let path = dir.to_str().unwrap();
    for (shape, pricing) in [("claude-code", "anthropic"), ("codex", "openai")] {
        let v = replay(&["--shape", shape, "--pricing", pricing, path]);
        check_sessions(&v);
        let t = &v["total"];
        assert!(t["removal"].as_f64().unwrap() > 0.2, "{shape}: {t}");
        assert!(t["billed_ratio"].as_f64().unwrap() < 0.95, "{shape}: {t}");
    }
}

#[test]
fn bad_pricing_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_lam")).args(["replay", "--pricing", "cheap", "x.jsonl"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected anthropic, openai, gemini or read=R,write=W"));
}

/// A Claude Code transcript whose second tool result comes 10 minutes after
/// the first (and the third a minute later).
fn gapped_transcript() -> std::path::PathBuf {
    let mut lines = vec![
        r#"{"type":"user","sessionId":"gap","uuid":"u0","timestamp":"2026-01-06T09:00:00Z","message":{"role":"user","content":"Fix the test."}}"#.to_string(),
    ];
    for (k, at) in ["09:00:10", "09:10:10", "09:11:10"].iter().enumerate() {
        let out = format!("result {k}\\n{}", "some output line that repeats\\n".repeat(20 + k));
        lines.push(format!(
            r#"{{"type":"assistant","sessionId":"gap","uuid":"a{k}","timestamp":"2026-01-06T{at}Z","message":{{"role":"assistant","content":[{{"type":"tool_use","id":"t{k}","name":"Bash","input":{{"command":"make test {k}"}}}}]}}}}"#
        ));
        lines.push(format!(
            r#"{{"type":"user","sessionId":"gap","uuid":"r{k}","timestamp":"2026-01-06T{at}Z","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{k}","content":"{out}"}}]}}}}"#
        ));
    }
    let dir = std::env::temp_dir().join(format!("lam-replay-ttl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("gap.jsonl");
    std::fs::write(&p, lines.join("\n")).unwrap();
    p
}

/// The bill prices time: by default (Claude Code: 300 s) the request after
/// the 10-minute gap is a cache miss, counted in `requests_after_expiry`
/// and `expired_share`; `--cache-ttl none` and `--cache-ttl 3600` see none
/// and bill less; a bad `--cache-ttl` is a usage error.
#[test]
fn cache_ttl_prices_the_gap_as_a_miss() {
    let p = gapped_transcript();
    let path = p.to_str().unwrap();
    let total = |args: &[&str]| replay(&[args, &[path]].concat())["total"].clone();
    let (default, none, hour) = (total(&[]), total(&["--cache-ttl", "none"]), total(&["--cache-ttl", "3600"]));
    assert_eq!(default["requests"], 4, "{default}");
    assert_eq!(default["requests_after_expiry"], 1, "{default}");
    let share = default["expired_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{default}");
    let s = replay(&[path]);
    assert_eq!(s["sessions"][0]["cache_ttl"], 300, "Claude Code's default");
    for t in [&none, &hour] {
        assert_eq!((t["requests_after_expiry"].as_u64(), t["expired_share"].as_f64()), (Some(0), Some(0.0)), "{t}");
        for bill in ["billed_direct", "billed_lam"] {
            assert!(t[bill].as_f64().unwrap() < default[bill].as_f64().unwrap(), "{bill}: {t} vs {default}");
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lam")).args(["replay", "--cache-ttl", "5m", path]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected SECONDS (a whole number) or none"));
}

/// The wire's default encoder is hashing (no model needed), the papers'
/// commands' is BERT: with an empty `$LAM_HOME`, `lam replay` without
/// `--encoder` runs and forwards what `--encoder hashing` forwards, while
/// `lam compact` without it looks for the BERT model.
#[test]
fn the_wire_default_encoder_is_hashing_and_the_papers_is_bert() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lam"));
        c.args(args).env("LAM_HOME", home.path()).env_remove("LAM_MODEL").stdin(Stdio::null()).output().unwrap()
    };
    let cc = fixtures("claude-code");
    let default = run(&["replay", "--json", &cc]);
    assert!(default.status.success(), "{}", String::from_utf8_lossy(&default.stderr));
    let hashing = run(&["replay", "--json", "--encoder", "hashing", &cc]);
    let total = |o: &std::process::Output| serde_json::from_slice::<Value>(&o.stdout).unwrap()["total"]["tool_tokens_out"].clone();
    assert_eq!(total(&default), total(&hashing));
    assert!(!home.path().join("cache").exists(), "no embedding cache written for hashing");
    let compact = run(&["compact", &cc]);
    let err = String::from_utf8_lossy(&compact.stderr);
    assert!(!compact.status.success() && err.contains("all-MiniLM-L6-v2"), "{err}");
}

/// The bill in dollars: each request at the price of the model the
/// transcript says made its call (the Gemini CLI chats name
/// gemini-2.5-pro and gemini-3.1-pro-preview), the per-request rows sum to
/// the totals, `--prices FILE` reprices, and a model the table lacks is
/// priced by its provider's nearest tier and named.
#[test]
fn the_bill_is_in_dollars_by_each_request_s_model() {
    let v = replay(&[&fixtures("gemini-cli/tmp")]);
    let t = &v["total"];
    assert_eq!(v["prices"]["date"], "2026-12-07");
    let (direct, lam) = (t["usd_direct"].as_f64().unwrap(), t["usd_lam"].as_f64().unwrap());
    assert!(direct > 0.0 && lam > 0.0 && lam <= direct + 1e-12, "{t}");
    let mut models = std::collections::BTreeSet::new();
    let mut sum = 0.0;
    for s in v["sessions"].as_array().unwrap() {
        let rows = s["per_request"].as_array().unwrap();
        assert_eq!(rows.len() as u64, s["requests"].as_u64().unwrap());
        sum += rows.iter().map(|r| r["direct_usd"].as_f64().unwrap()).sum::<f64>();
        models.extend(rows.iter().map(|r| r["model"].as_str().unwrap().to_string()));
        assert!(s["recalls"].as_u64() <= s["cited_then_used"].as_u64());
    }
    assert!((sum - direct).abs() < 1e-9, "rows sum to {sum}, total {direct}");
    assert!(models.contains("gemini-2.5-pro") && models.contains("gemini-3.1-pro-preview"), "{models:?}");
    // Another table: every model at ten times the input price of the built-in's cheapest.
    let dir = std::env::temp_dir().join(format!("lam-prices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = dir.join("prices.json");
    let row = |m: &str| format!(r#"{{"model": "{m}", "provider": "google", "tier": "pro", "input": 20.0, "write_5m": 20.0, "write_1h": 20.0, "read": 2.0}}"#);
    std::fs::write(&table, format!(r#"{{"date": "2030-01-01", "about": "test", "models": [{}]}}"#, row("gemini-2.5-pro"))).unwrap();
    let w = replay(&[&fixtures("gemini-cli/tmp"), "--prices", table.to_str().unwrap()]);
    assert_eq!(w["prices"]["date"], "2030-01-01");
    assert!(w["total"]["usd_direct"].as_f64().unwrap() > direct, "higher prices, a higher bill");
    let notes = w["total"]["price_notes"].to_string();
    assert!(notes.contains("gemini-3.1-pro-preview") && notes.contains("nearest"), "{notes}");
    std::fs::write(&table, "{\"date\": 1}").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lam")).args(["replay", "--prices", table.to_str().unwrap()]).arg(fixtures("gemini-cli/tmp")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--prices") && err.contains("prices.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
