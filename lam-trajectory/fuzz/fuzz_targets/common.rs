#![allow(dead_code)] // each target uses part of it
//! What every reader target checks: reading never panics; an error names the
//! input; a trajectory read has consecutive record indices and at most one
//! thought per record.
use lam_trajectory::{ReadError, Trajectory};
use std::path::Path;

pub fn check(r: Result<Vec<Trajectory>, ReadError>, path: &Path) {
    match r {
        Err(e) => assert!(e.to_string().starts_with(&path.display().to_string()), "error does not name the input: {e}"),
        Ok(ts) => {
            for t in &ts {
                for (i, rec) in t.records.iter().enumerate() {
                    assert_eq!(rec.index as usize, i, "record indices are consecutive");
                }
                assert!(t.thoughts.is_empty() || t.thoughts.len() == t.records.len());
                let _ = t.turns();
            }
        }
    }
}

/// `data` as the reader sees the file, and, when it is JSON, `data` placed
/// where the format keeps its steps (so the fuzzer spends its time inside one
/// reader rather than on the format's envelope).
pub fn read_in(data: &[u8], name: &str, envelope: impl Fn(serde_json::Value) -> serde_json::Value) {
    let path = Path::new(name);
    check(lam_trajectory::read::read_bytes(data, path), path);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let wrapped = serde_json::to_vec(&envelope(v)).expect("a JSON value serialises");
        check(lam_trajectory::read::read_bytes(&wrapped, path), path);
    }
}

/// `data` as a transcript of an agent's JSON Lines `format`: as a `.jsonl`
/// file (detected by its first line), after the format's first line `head`
/// (so the fuzzer spends its time inside the reader; what is read must be
/// that format), and given to the format's `reader` directly.
pub fn read_lines(data: &[u8], head: &[u8], format: lam_trajectory::Format, reader: fn(&[u8], &Path) -> Result<Vec<Trajectory>, ReadError>) {
    let path = Path::new("fuzz.jsonl");
    check(lam_trajectory::read::read_bytes(data, path), path);
    let mut framed = head.to_vec();
    framed.push(b'\n');
    framed.extend_from_slice(data);
    let r = lam_trajectory::read::read_bytes(&framed, path);
    if let Ok(ts) = &r {
        assert!(ts.iter().all(|t| t.format == format));
    }
    check(r, path);
    check(reader(data, path), path);
}
