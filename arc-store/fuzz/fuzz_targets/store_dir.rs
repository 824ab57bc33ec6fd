//! Any directory contents: the input is split into files with segment (and
//! other) names, then the store is checked, opened read-only, opened as the
//! writer, appended to, reopened and salvaged. Nothing panics; the only open
//! error is a newer-version segment; check writes nothing; every record a
//! reader can read comes back with bytes that hash to its id and is still
//! readable, unchanged, after the writer's repairs and an append; a salvaged
//! store checks clean.
#![no_main]

use arc_store::{FileStore, StoreError, check, salvage};
use lam_core::{ObsId, ObsStore, Record, SessionId};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const NAMES: [&str; 8] = [
    "seg-000001.log",
    "seg-000002.log",
    "seg-000003.log",
    "seg-000005.log",
    "seg-0000001.log",
    "LOCK",
    "REPAIR.log",
    "seg-000002.log.tmp",
];

fn files(mut data: &[u8]) -> BTreeMap<&'static str, Vec<u8>> {
    let mut out = BTreeMap::new();
    while data.len() >= 3 {
        let name = NAMES[data[0] as usize % NAMES.len()];
        let len = (u16::from_le_bytes([data[1], data[2]]) as usize).min(data.len() - 3);
        out.insert(name, data[3..3 + len].to_vec());
        data = &data[3 + len..];
    }
    out
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            p.is_file().then(|| (p.file_name().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()))
        })
        .collect()
}

fn readable(s: &FileStore) -> BTreeMap<(String, String), Vec<u8>> {
    let mut out = BTreeMap::new();
    for sid in s.sessions() {
        for shown in s.ids(&sid).unwrap() {
            let m = s.meta(&sid, &shown).unwrap().unwrap();
            match s.get_bytes(&sid, &shown) {
                Ok(Some(b)) => {
                    assert_eq!(ObsId::of(m.action.as_bytes(), &b), m.id, "§{shown}: bytes do not match the id");
                    out.insert((sid.0.clone(), shown), b);
                }
                Ok(None) => panic!("§{shown} listed but not found"),
                Err(StoreError::Damaged { .. }) => {}
                Err(e) => panic!("§{shown}: {e}"),
            }
        }
    }
    out
}

fn root() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { tempfile::tempdir_in(shm).unwrap() } else { tempfile::tempdir().unwrap() }
}

fuzz_target!(|data: &[u8]| {
    let t = root();
    let dir = t.path().join("store");
    fs::create_dir(&dir).unwrap();
    for (name, bytes) in files(data) {
        fs::write(dir.join(name), bytes).unwrap();
    }
    let before = snapshot(&dir);
    let checked = check(&dir);
    assert_eq!(snapshot(&dir), before, "check wrote something");
    let reader = match FileStore::open_read_only(&dir) {
        Ok(r) => r,
        Err(StoreError::Corrupt { reason, .. }) if reason.contains("version") => return,
        Err(e) => panic!("read-only open: {e}"),
    };
    assert_eq!(snapshot(&dir), before, "a reader wrote something");
    let seen = readable(&reader);
    drop(reader);
    if let Ok(c) = &checked {
        assert!(c.records as usize >= seen.len().min(c.records as usize));
    }
    let mut w = FileStore::open(&dir).unwrap_or_else(|e| panic!("writer open: {e}"));
    assert_eq!(readable(&w), seen, "the writer's repairs changed what reads back");
    let session = SessionId("fuzz".into());
    let rec = Record { index: 0, action: "fuzz".into(), observation: b"appended".to_vec(), returncode: None };
    let m = w.append(&session, &rec, 1).unwrap_or_else(|e| panic!("append: {e}"));
    drop(w);
    let s = FileStore::open(&dir).unwrap_or_else(|e| panic!("reopen: {e}"));
    assert_eq!(s.get(&session, &m.shown).unwrap().unwrap(), b"appended");
    let again = readable(&s);
    for (k, v) in &seen {
        assert_eq!(again.get(k), Some(v), "{k:?} lost after append");
    }
    drop(s);
    let dst = t.path().join("salvaged");
    let r = salvage(&dir, &dst).unwrap_or_else(|e| panic!("salvage: {e}"));
    let c = check(&dst).unwrap_or_else(|e| panic!("check of the salvaged store: {e}"));
    assert!(c.is_clean(), "salvaged store is not clean: {c}");
    assert_eq!(c.records, r.records);
});
