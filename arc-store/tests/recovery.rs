//! Opening after a crash: torn tails are copied to the quarantine and cut;
//! a bad segment of a newer version is an error naming the file; the writer
//! lock; read-only handles. (Damage other than a torn tail: `damage.rs`.)

mod common;

use arc_store::{Durability, FileStore, Options, StoreError, format};
use common::*;
use lam_core::ObsStore;
use std::fs::{self, OpenOptions};

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

#[test]
fn a_segment_of_a_newer_version_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 2, OPTS);
    let seg = last_segment(d.path());
    // A record after a version 3 header proves the version field is damaged.
    let mut b = fs::read(&seg).unwrap();
    b[8] = 3;
    fs::write(&seg, &b).unwrap();
    let r = FileStore::open_read_only(d.path()).unwrap();
    assert_eq!(r.recovery().damage[0].kind, arc_store::DamageKind::Header, "{}", r.recovery());
    assert_eq!(r.ids(&sid("t")).unwrap().len(), 2);
    drop(r);
    // A newer writer's segment: its records are not this build's.
    let mut b = format::header(2).to_vec();
    b[8] = 3;
    b.extend_from_slice(b"records of a later format");
    let seg = d.path().join("seg-000002.log");
    fs::write(&seg, &b).unwrap();
    for r in [FileStore::open(d.path()), FileStore::open_read_only(d.path())] {
        match r {
            Err(e @ StoreError::Corrupt { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(seg.to_str().unwrap()) && msg.contains("version 3"), "{msg}");
            }
            Err(e) => panic!("expected Corrupt, got {e}"),
            Ok(_) => panic!("a newer segment was read as this build's"),
        }
    }
    assert_eq!(fs::read(&seg).unwrap(), b, "nothing was changed");
}

#[test]
fn the_torn_tail_is_copied_to_the_quarantine_before_it_is_cut() {
    let d = tempfile::tempdir().unwrap();
    let recs = fill(d.path(), 3, OPTS);
    let seg = last_segment(d.path());
    let len = fs::metadata(&seg).unwrap().len();
    let torn = b"\x40\x00\x00\x00\x01\x02\x03\x04\xa1partial";
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, torn).unwrap();
    drop(f);
    let s = FileStore::open_with(d.path(), OPTS).unwrap();
    let r = s.recovery().clone();
    assert_eq!(r.damage.len(), 1, "{r}");
    let q = r.damage[0].quarantine.clone().expect("a quarantine copy");
    assert_eq!(fs::read(&q).unwrap(), torn);
    assert!(q.starts_with(d.path().join("quarantine")));
    let note = fs::read_to_string(q.with_extension("txt")).unwrap();
    assert!(note.contains(&format!("offset: {len}")) && note.contains("torn tail") && note.contains("found: "), "{note}");
    let log = fs::read_to_string(d.path().join("REPAIR.log")).unwrap();
    assert!(log.contains("torn tail") && log.contains(&format!("offset {len}")), "{log}");
    assert_eq!(r.repair_log, Some(d.path().join("REPAIR.log")));
    assert_eq!(fs::metadata(&seg).unwrap().len(), len);
    assert!(r.to_string().contains("torn tail"), "{r}");
    for (shown, obs) in &recs {
        assert_eq!(s.get(&sid("t"), shown).unwrap().as_ref(), Some(obs));
    }
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
