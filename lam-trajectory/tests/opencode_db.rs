//! opencode's SQLite database read as trajectories: a database written
//! here with the columns opencode 1.18.33 keeps (`session`, `message`,
//! `part`; the rows as the real binary wrote them through `lam run`,
//! docs/agents.md), read by `read::read_path` and `lam run`'s transcript check.

use lam_trajectory::agents::{Agent, RunTranscript};
use lam_trajectory::read::{self, Format};
use std::path::{Path, PathBuf};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lam-opencode-db-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("opencode")).unwrap();
    d
}

/// A message: id, session, time, data, parts.
type Message = (&'static str, &'static str, i64, &'static str, Vec<String>);

/// A database at `DIR/opencode/opencode.db`: sessions (id, parent, directory,
/// created), and per message its session, time, data and parts.
fn write(db: &Path, sessions: &[(&str, Option<&str>, &str, i64)], messages: &[Message]) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(
        "CREATE TABLE session (id text PRIMARY KEY, parent_id text, directory text NOT NULL, title text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);
         CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
         CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);",
    )
    .unwrap();
    for (id, parent, directory, t) in sessions {
        c.execute("INSERT INTO session VALUES (?1, ?2, ?3, 'DONE.', ?4, ?4)", rusqlite::params![id, parent, directory, t]).unwrap();
    }
    for (k, (id, session, t, data, parts)) in messages.iter().enumerate() {
        c.execute("INSERT INTO message VALUES (?1, ?2, ?3, ?3, ?4)", rusqlite::params![id, session, t, data]).unwrap();
        for (j, p) in parts.iter().enumerate() {
            let pid = format!("prt_{k:03}_{j:02}");
            c.execute("INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?4, ?5)", rusqlite::params![pid, id, session, t, p]).unwrap();
        }
    }
}

const USER: &str = r#"{"role":"user","time":{"created":1},"agent":"build","model":{"providerID":"anthropic","modelID":"claude-sonnet-4-5"}}"#;
const ASSISTANT: &str = r#"{"parentID":"m0","role":"assistant","mode":"build","tokens":{"total":15,"input":10,"output":5,"reasoning":0,"cache":{"write":0,"read":0}},"modelID":"claude-sonnet-4-5","providerID":"anthropic"}"#;
const CAT: &str = r#"{"type":"tool","tool":"bash","callID":"toolu_2","state":{"status":"completed","input":{"command":"cat app.py","description":"show it"},"output":"def f(x):\n    return x + 1\n","metadata":{"exit":0},"title":"cat app.py","time":{"start":1796549298118,"end":1796549298225}}}"#;
const BAD: &str =
    r#"{"type":"tool","tool":"read","callID":"toolu_3","state":{"status":"error","input":{},"error":"The read tool was called with invalid arguments"}}"#;
const RUNNING: &str = r#"{"type":"tool","tool":"bash","callID":"toolu_4","state":{"status":"running","input":{"command":"sleep 9"}}}"#;

fn session_a() -> Vec<Message> {
    let parts = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        ("m0", "ses_a", 10, USER, parts(&[r#"{"type":"text","text":"Fix the tests"}"#])),
        ("m1", "ses_a", 11, ASSISTANT, parts(&[r#"{"type":"step-start"}"#, r#"{"type":"reasoning","text":"Look first."}"#, CAT, BAD, RUNNING])),
        ("m2", "ses_a", 12, USER, parts(&[r#"{"type":"compaction","auto":true}"#])),
        ("m3", "ses_a", 13, r#"{"role":"assistant","summary":true}"#, parts(&[r#"{"type":"text","text":"Summary: app.py read."}"#])),
        ("m4", "ses_a", 14, ASSISTANT, vec![CAT.replace("toolu_2", "toolu_9")]),
        ("m5", "ses_c", 15, ASSISTANT, vec![CAT.replace("toolu_2", "toolu_c")]),
        ("m6", "ses_b", 16, ASSISTANT, parts(&[r#"{"type":"text","text":"DONE."}"#])),
    ]
}

#[test]
fn sessions_calls_results_and_compactions() {
    let d = dir("read");
    let db = d.join("opencode").join("opencode.db");
    write(&db, &[("ses_a", None, "/w", 10), ("ses_b", None, "/w", 20), ("ses_c", Some("ses_a"), "/w", 30)], &session_a());
    let ts = read::read_path(&db).unwrap();
    let names: Vec<&str> = ts.iter().map(|t| t.session.0.as_str()).collect();
    assert_eq!(names, ["ses_b", "ses_a", "ses_a.compact-1", "ses_a.ses_c"], "newest first, compactions, subagents last");
    let a = &ts[1];
    assert_eq!(a.format, Format::Agent(Agent::OpenCode));
    assert_eq!(a.task, "Fix the tests");
    let got: Vec<(&str, &[u8])> = a.records.iter().map(|r| (r.action.as_str(), &r.observation[..])).collect();
    assert_eq!(
        got,
        [
            (r#"bash({"command":"cat app.py","description":"show it"})"#, &b"def f(x):\n    return x + 1\n"[..]),
            ("read({})", &b"The read tool was called with invalid arguments"[..]),
        ],
        "a call still running has no result"
    );
    assert_eq!(a.thoughts[0], "Look first.");
    assert_eq!(a.times[0], Some(1_796_549_298_225));
    let after = &ts[2];
    assert_eq!((after.task.as_str(), after.records.len()), ("Summary: app.py read.", 1));
    assert!(ts[0].records.is_empty());
}

#[test]
fn a_run_s_transcript_is_its_newest_session_in_its_folder() {
    let d = dir("since");
    let db = d.join("opencode").join("opencode.db");
    write(&db, &[("ses_a", None, "/w", 10), ("ses_b", None, "/w", 20), ("ses_x", None, "/elsewhere", 40)], &session_a());
    let data = d.to_string_lossy().into_owned();
    let env = move |k: &str| (k == "XDG_DATA_HOME").then(|| data.clone());
    let since = std::time::UNIX_EPOCH;
    let got = Agent::OpenCode.transcript_since(Path::new("/w"), since, &env);
    assert_eq!(got, Some(RunTranscript { answered: true, session: Some("ses_b".into()) }));
    let later = std::time::UNIX_EPOCH + std::time::Duration::from_millis(25);
    assert_eq!(Agent::OpenCode.transcript_since(Path::new("/w"), later, &env), None, "none updated since");
    assert_eq!(Agent::OpenCode.transcript_since(Path::new("/nowhere"), since, &env), None);
}

#[test]
fn a_file_that_is_no_database_is_an_error_naming_it() {
    let d = dir("bad");
    let db = d.join("opencode").join("opencode.db");
    std::fs::write(&db, b"not sqlite").unwrap();
    let err = read::read_path(&db).unwrap_err().to_string();
    assert!(err.contains("opencode.db"), "{err}");
}
