//! `lam store check/salvage`, `lam recall --list`, and what commands say about
//! a damaged store (issue 15: recall of a damaged record says so; opening a
//! store reports its recovery on stderr).

use lam_core::{IdBook, ObsId};
use lam_trajectory::read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lam")).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lam-store-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The example session archived by `lam compact`, and its records with their visible ids.
fn archived(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let ex = lam_core::testsuite::example();
    let o = lam(&["compact", "--encoder", "hashing", "--no-cache", "--no-tokens", ex.to_str().unwrap(), "--store", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let traj = read::read_path(&ex).unwrap().remove(0);
    let mut book = IdBook::new();
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for r in &traj.records {
        let id = book.visible(ObsId::of(r.action.as_bytes(), &r.observation)).to_string();
        if !out.iter().any(|(i, _)| *i == id) {
            out.push((id, r.observation.clone()));
        }
    }
    out
}

fn session_of(dir: &Path) -> String {
    let o = lam(&["recall", "--store", dir.to_str().unwrap(), "--list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 1, "{s}");
    lines[0].split('\t').next().unwrap().to_string()
}

#[test]
fn recall_list_prints_one_line_per_observation() {
    let dir = scratch("list");
    let recs = archived(&dir);
    let session = session_of(&dir);
    let o = lam(&["recall", "--store", dir.to_str().unwrap(), "--session", &session, "--list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), recs.len(), "{out}");
    for ((id, obs), line) in recs.iter().zip(&lines) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f[0], format!("§{id}"));
        assert_eq!(f[1], format!("{} bytes", obs.len()));
        if let Ok(s) = std::str::from_utf8(obs) {
            let first = s.lines().next().unwrap_or("");
            if first.len() < 150 && !first.contains(|c: char| c.is_control()) {
                assert_eq!(f[2], first, "{line}");
            }
        }
    }
    let o = lam(&["recall", "--store", dir.to_str().unwrap(), "--session", "no-such-session", "--list"]);
    assert!(!o.status.success() && text(&o.stderr).contains("no session `no-such-session`"), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_record_is_reported_by_check_recall_and_every_open_and_salvage_keeps_the_rest() {
    let dir = scratch("damage");
    let recs = archived(&dir);
    let d = dir.to_str().unwrap();
    let o = lam(&["store", "check", d]);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    assert!(text(&o.stdout).contains("no damage"), "{}", text(&o.stdout));

    // Flip one byte inside an observation that occurs once in the segment.
    let seg = dir.join("seg-000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    let (victim, at) = recs
        .iter()
        .filter(|(_, obs)| obs.len() > 64)
        .find_map(|(id, obs)| {
            let hits: Vec<usize> = bytes.windows(obs.len()).enumerate().filter(|(_, w)| *w == obs.as_slice()).map(|(i, _)| i).collect();
            (hits.len() == 1).then(|| (id.clone(), hits[0] + obs.len() / 2))
        })
        .expect("an observation stored once");
    bytes[at] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();

    let o = lam(&["recall", "--store", d, &format!("§{victim}")]);
    let err = text(&o.stderr);
    assert!(!o.status.success() && o.stdout.is_empty(), "{err}");
    assert!(err.contains(&format!("§{victim}")) && err.contains("damaged"), "{err}");
    assert!(!err.contains("nearest"), "a damaged record is not 'no such id': {err}");

    let o = lam(&["store", "check", d]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}{}", text(&o.stderr));
    assert!(out.contains("damaged record") && out.contains(&format!("§{victim}")), "{out}");
    assert!(text(&o.stderr).contains("lam store salvage"), "{}", text(&o.stderr));

    // Every other record recalls exactly; opening the store says what it found.
    for (id, obs) in recs.iter().filter(|(i, _)| *i != victim) {
        let o = lam(&["recall", "--store", d, id]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(&o.stdout, obs);
        assert!(text(&o.stderr).contains("arc-store: seg-000001.log: damaged record"), "{}", text(&o.stderr));
    }

    let new = scratch("salvaged");
    let n = new.to_str().unwrap();
    let o = lam(&["store", "salvage", d, "--to", n]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("salvaged {} intact records", recs.len() - 1)), "{}", text(&o.stdout));
    let o = lam(&["store", "check", n]);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    for (id, obs) in recs.iter().filter(|(i, _)| *i != victim) {
        let o = lam(&["recall", "--store", n, id]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(&o.stdout, obs);
    }
    let o = lam(&["store", "salvage", d, "--to", n]);
    assert!(!o.status.success() && text(&o.stderr).contains("already exists"), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&new).unwrap();
}

#[test]
fn check_refuses_what_is_not_a_store_directory() {
    let o = lam(&["store", "check", "postgres://u:secret@127.0.0.1:1/db"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("FileStore directory") && !err.contains("secret"), "{err}");
    let empty = scratch("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = lam(&["store", "check", empty.to_str().unwrap()]);
    assert!(!o.status.success() && text(&o.stderr).contains("not a store directory"), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&empty).unwrap();
}

#[test]
fn a_damaged_copy_in_one_session_does_not_hide_an_intact_copy_in_another() {
    let dir = scratch("two-copies");
    let ex = lam_core::testsuite::example();
    let e = ex.to_str().unwrap();
    // The same file given twice is two sessions (the second named `NAME~HASH`).
    let o = lam(&["compact", "--encoder", "hashing", "--no-cache", "--no-tokens", e, e, "--store", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = lam(&["recall", "--store", dir.to_str().unwrap(), "--list"]);
    let sessions: Vec<String> = text(&o.stdout).lines().map(|l| l.split('\t').next().unwrap().to_string()).collect();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let recs = {
        let d2 = scratch("two-copies-ref");
        let r = archived(&d2);
        std::fs::remove_dir_all(&d2).unwrap();
        r
    };
    let seg = dir.join("seg-000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    let (id, obs) = recs.iter().find(|(_, o)| o.len() > 64).unwrap();
    let first = bytes.windows(obs.len()).position(|w| w == obs.as_slice()).unwrap();
    bytes[first + obs.len() / 2] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();
    let o = lam(&["recall", "--store", dir.to_str().unwrap(), id]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(&o.stdout, obs);
    let damaged = sessions.iter().filter(|s| !lam(&["recall", "--store", dir.to_str().unwrap(), "--session", s, id]).status.success()).count();
    assert_eq!(damaged, 1, "exactly one session's copy is damaged");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 57: `lam serve --run NAME` records its settings in the store
/// session `NAME.settings`; `lam recall --list` lists the conversations'
/// sessions only (the settings session is still listed when asked by name).
#[test]
fn recall_list_leaves_out_a_runs_settings() {
    use lam_core::{ObsStore, Record, SessionId};
    let dir = scratch("settings");
    {
        let mut st = arc_store::FileStore::open(&dir).unwrap();
        let settings = Record { index: 0, action: "lam serve --run".into(), observation: b"threshold: 0.95\n".to_vec(), returncode: None };
        st.claim(&SessionId::settings_of("team"), &settings, 0).unwrap();
        let obs = Record { index: 0, action: "cat a.txt".into(), observation: b"hello\n".to_vec(), returncode: Some(0) };
        st.append(&SessionId::new("team"), &obs, 2).unwrap();
        st.flush().unwrap();
        assert_eq!(ObsStore::sessions(&st).unwrap().len(), 2);
    }
    let d = dir.to_str().unwrap();
    let o = lam(&["recall", "--store", d, "--list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "team\t1 observations\n");
    let o = lam(&["recall", "--store", d, "--session", "team.settings", "--list"]);
    assert!(o.status.success() && text(&o.stdout).contains("threshold: 0.95"), "{}{}", text(&o.stdout), text(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
