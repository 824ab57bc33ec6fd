//! Opening after damage: torn tails are cut, other corruption is an error
//! that names the file and offset; the writer lock; read-only handles.

mod common;

use arc_store::{Durability, FileStore, Options, StoreError};
use common::*;
use lam_core::ObsStore;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

const OPTS: Options = Options { durability: Durability::None, segment_bytes: 64 << 20 };

/// Write `n` records to a fresh store in `dir`; returns (shown, observation) and the file offsets
/// (start, end) of each record in the last segment.
fn fill(dir: &Path, n: u32, opts: Options) -> Vec<(String, Vec<u8>)> {
    let mut s = FileStore::open_with(dir, opts).unwrap();
    (0..n)
        .map(|i| {
            let mut obs = format!("observation {i}\n").repeat(3 + i as usize).into_bytes();
            obs.push(0xff);
            let m = s.append(&sid("t"), &rec(i, "run", &obs, Some(i as i32)), 5).unwrap();
            (m.shown, obs)
        })
        .collect()
}

fn last_segment(dir: &Path) -> PathBuf {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("seg-"))
        .collect();
    v.sort();
    v.pop().unwrap()
}

/// File offsets of the records of a (well-formed) segment.
fn record_offsets(seg: &Path) -> Vec<u64> {
    let b = fs::read(seg).unwrap();
    let mut v = Vec::new();
    let mut o = 16usize;
    while o < b.len() {
        v.push(o as u64);
        o += 8 + u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    }
    v
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn torn_tail_at_every_byte_of_the_last_record_is_cut() {
    let src = tempfile::tempdir().unwrap();
    let recs = fill(src.path(), 4, OPTS);
    let seg = last_segment(src.path());
    let full = fs::metadata(&seg).unwrap().len();
    let last_len = {
        // Length of the last record: size difference with the store holding 3 records.
        let d = tempfile::tempdir().unwrap();
        fill(d.path(), 3, OPTS);
        full - fs::metadata(last_segment(d.path())).unwrap().len()
    };
    let start = full - last_len;
    let work = tempfile::tempdir().unwrap();
    for cut in start..full {
        let dir = work.path().join(format!("cut{cut}"));
        copy_dir(src.path(), &dir);
        let seg = last_segment(&dir);
        OpenOptions::new().write(true).open(&seg).unwrap().set_len(cut).unwrap();
        // A reader ignores the tail and changes nothing.
        let r = FileStore::open_read_only(&dir).unwrap();
        assert_eq!(r.recovery().torn_bytes, cut - start, "cut at {cut}");
        assert_eq!(r.ids(&sid("t")).unwrap().len(), 3);
        drop(r);
        assert_eq!(fs::metadata(&seg).unwrap().len(), cut);
        // A writer cuts it, keeps the three earlier records, and appends.
        let mut s = FileStore::open_with(&dir, OPTS).unwrap();
        let rc = s.recovery().clone();
        assert_eq!(rc.torn_bytes, cut - start, "cut at {cut}");
        if cut > start {
            assert_eq!(rc.torn_at, Some((seg.clone(), start)));
        }
        assert_eq!(fs::metadata(&seg).unwrap().len(), start);
        for (shown, obs) in &recs[..3] {
            assert_eq!(s.get(&sid("t"), shown).unwrap().as_ref(), Some(obs));
        }
        assert_eq!(s.get(&sid("t"), &recs[3].0).unwrap(), None);
        let m = s.append(&sid("t"), &rec(3, "run", &recs[3].1, Some(3)), 5).unwrap();
        assert_eq!(m.shown, recs[3].0, "the re-appended record gets its id back");
        drop(s);
        let s = FileStore::open(&dir).unwrap();
        assert_eq!(s.recovery().torn_bytes, 0);
        assert_eq!(fs::metadata(&seg).unwrap().len(), full);
        for (shown, obs) in &recs {
            assert_eq!(s.get(&sid("t"), shown).unwrap().as_ref(), Some(obs));
        }
        drop(s);
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn garbage_or_zeros_after_the_last_record_are_a_torn_tail() {
    for tail in [vec![0u8; 4096], vec![0xA1; 100], b"\x10\x00\x00\x00garbage".to_vec()] {
        let d = tempfile::tempdir().unwrap();
        let recs = fill(d.path(), 3, OPTS);
        let seg = last_segment(d.path());
        let len = fs::metadata(&seg).unwrap().len();
        let mut bytes = fs::read(&seg).unwrap();
        bytes.extend_from_slice(&tail);
        fs::write(&seg, &bytes).unwrap();
        let s = FileStore::open(d.path()).unwrap();
        assert_eq!(s.recovery().torn_bytes, tail.len() as u64);
        assert_eq!(fs::metadata(&seg).unwrap().len(), len);
        for (shown, obs) in &recs {
            assert_eq!(s.get(&sid("t"), shown).unwrap().as_ref(), Some(obs));
        }
    }
}

fn expect_corrupt(r: Result<FileStore, StoreError>, file: &Path, offset: u64) -> String {
    match r {
        Err(e @ StoreError::Corrupt { .. }) => {
            let msg = e.to_string();
            let StoreError::Corrupt { path, offset: o, .. } = &e else { unreachable!() };
            assert_eq!(path, file, "{msg}");
            assert_eq!(*o, offset, "{msg}");
            assert!(msg.contains(file.to_str().unwrap()) && msg.contains(&offset.to_string()), "{msg}");
            // The shared error names them too.
            let core: lam_core::Error = e.into();
            assert!(core.to_string().contains(file.to_str().unwrap()));
            msg
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("a corrupt store opened"),
    }
}

#[test]
fn corrupt_middle_record_is_an_error_naming_file_and_offset() {
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 5, OPTS);
    let seg = last_segment(d.path());
    let mut bytes = fs::read(&seg).unwrap();
    let second = record_offsets(&seg)[1];
    let flip = second as usize + 40;
    bytes[flip] ^= 0x20;
    fs::write(&seg, &bytes).unwrap();
    let msg = expect_corrupt(FileStore::open(d.path()), &seg, second);
    assert!(msg.contains("checksum") && msg.contains("not a torn tail"), "{msg}");
    expect_corrupt(FileStore::open_read_only(d.path()), &seg, second);
    assert_eq!(fs::read(&seg).unwrap(), bytes, "nothing was truncated");
    // A corrupt length field in the middle is caught the same way.
    bytes[flip] ^= 0x20;
    bytes[second as usize + 2] = 0x7f;
    fs::write(&seg, &bytes).unwrap();
    expect_corrupt(FileStore::open(d.path()), &seg, second);
}

#[test]
fn damage_in_an_earlier_segment_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 12, Options { durability: Durability::None, segment_bytes: 400 });
    let s = FileStore::open_read_only(d.path()).unwrap();
    let segs = s.segment_paths();
    drop(s);
    assert!(segs.len() >= 3);
    // A torn end of a non-last segment is corruption, not a torn tail.
    let len = fs::metadata(&segs[0]).unwrap().len();
    let last = *record_offsets(&segs[0]).last().unwrap();
    OpenOptions::new().write(true).open(&segs[0]).unwrap().set_len(len - 3).unwrap();
    let msg = expect_corrupt(FileStore::open(d.path()), &segs[0], last);
    assert!(msg.contains("not the last segment"), "{msg}");
    // A missing segment is named.
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 12, Options { durability: Durability::None, segment_bytes: 400 });
    fs::remove_file(d.path().join("seg-000002.log")).unwrap();
    expect_corrupt(FileStore::open(d.path()), &d.path().join("seg-000002.log"), 0);
    // A bad header is named.
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 2, OPTS);
    let seg = last_segment(d.path());
    let mut b = fs::read(&seg).unwrap();
    b[0] = b'X';
    fs::write(&seg, &b).unwrap();
    let msg = expect_corrupt(FileStore::open(d.path()), &seg, 0);
    assert!(msg.contains("magic"), "{msg}");
}

#[test]
fn damage_after_open_is_reported_by_get() {
    let d = tempfile::tempdir().unwrap();
    let recs = fill(d.path(), 3, OPTS);
    let r = FileStore::open_read_only(d.path()).unwrap();
    let seg = last_segment(d.path());
    let mut b = fs::read(&seg).unwrap();
    let n = b.len();
    b[n - 5] ^= 1;
    fs::write(&seg, &b).unwrap();
    let e = r.get(&sid("t"), &recs[2].0).unwrap_err().to_string();
    assert!(e.contains("arc-store") && e.contains(seg.to_str().unwrap()) && e.contains("checksum"), "{e}");
    assert_eq!(r.get(&sid("t"), &recs[0].0).unwrap().as_ref(), Some(&recs[0].1));
}

#[test]
fn a_segment_with_a_torn_header_is_rewritten() {
    for keep in [0usize, 5, 15] {
        let d = tempfile::tempdir().unwrap();
        let recs = fill(d.path(), 2, OPTS);
        let header = fs::read(last_segment(d.path())).unwrap()[..16].to_vec();
        let mut h2 = header.clone();
        h2[12] = 2;
        fs::write(d.path().join("seg-000002.log"), &h2[..keep]).unwrap();
        let mut s = FileStore::open_with(d.path(), OPTS).unwrap();
        assert_eq!(s.recovery().torn_bytes, keep as u64);
        let m = s.append(&sid("t"), &rec(9, "x", b"after", None), 1).unwrap();
        drop(s);
        assert_eq!(fs::read(d.path().join("seg-000002.log")).unwrap()[..16], h2[..]);
        let s = FileStore::open(d.path()).unwrap();
        assert_eq!(s.get(&sid("t"), &m.shown).unwrap().unwrap(), b"after");
        assert_eq!(s.get(&sid("t"), &recs[1].0).unwrap().as_ref(), Some(&recs[1].1));
    }
}

#[test]
fn one_writer_many_readers() {
    let d = tempfile::tempdir().unwrap();
    let mut w = FileStore::open_with(d.path(), OPTS).unwrap();
    let m1 = w.append(&sid("s"), &rec(0, "a", b"one", None), 1).unwrap();
    match FileStore::open(d.path()) {
        Err(e @ StoreError::Locked { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("LOCK") && msg.contains("read-only"), "{msg}");
        }
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("second writer admitted"),
    }
    let mut readers: Vec<_> = (0..3).map(|_| FileStore::open_read_only(d.path()).unwrap()).collect();
    for r in &readers {
        assert_eq!(r.get(&sid("s"), &m1.shown).unwrap().unwrap(), b"one");
    }
    let mut r = readers.pop().unwrap();
    let e = r.append(&sid("s"), &rec(1, "a", b"two", None), 1).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    // Readers see later appends after refresh, across segment rolls.
    let mut shown = vec![m1.shown.clone()];
    drop(w);
    let mut w = FileStore::open_with(d.path(), Options { durability: Durability::None, segment_bytes: 100 }).unwrap();
    for i in 0..5u32 {
        shown.push(w.append(&sid("s"), &rec(i + 1, "a", format!("obs {i}").as_bytes(), None), 1).unwrap().shown);
    }
    assert_eq!(r.ids(&sid("s")).unwrap().len(), 1);
    assert_eq!(r.refresh().unwrap(), 5);
    assert_eq!(r.ids(&sid("s")).unwrap(), shown);
    assert_eq!(r.get(&sid("s"), &shown[5]).unwrap().unwrap(), b"obs 4");
    drop(w);
    // Once the writer is gone the lock is free again.
    FileStore::open(d.path()).unwrap();
}

#[test]
fn read_only_open_of_a_missing_directory_names_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("absent");
    let e = FileStore::open_read_only(&p).unwrap_err().to_string();
    assert!(e.contains(p.to_str().unwrap()), "{e}");
    assert!(!p.exists());
}

#[test]
fn a_reader_refreshing_while_the_writer_appends_never_sees_damage() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let opts = Options { durability: Durability::None, segment_bytes: 8 << 10 };
    let mut w = FileStore::open_with(&dir, opts).unwrap();
    let body = |i: u32| format!("{i}:").repeat(1 + (i as usize * 37) % 900).into_bytes();
    let writer = std::thread::spawn(move || {
        for i in 0..400u32 {
            w.append(&sid("live"), &rec(i, "gen", &body(i), None), 1).unwrap();
        }
        w
    });
    let mut r = FileStore::open_read_only(&dir).unwrap();
    loop {
        let done = writer.is_finished();
        r.refresh().unwrap();
        for shown in r.ids(&sid("live")).unwrap() {
            let m = r.meta(&sid("live"), &shown).unwrap().unwrap();
            assert_eq!(r.get(&sid("live"), &shown).unwrap().unwrap(), body(m.step));
        }
        if done {
            break;
        }
    }
    let w = writer.join().unwrap();
    r.refresh().unwrap();
    assert_eq!(r.ids(&sid("live")).unwrap(), w.ids(&sid("live")).unwrap());
    assert_eq!(r.ids(&sid("live")).unwrap().len(), 400);
}
