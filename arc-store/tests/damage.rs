//! Damage other than a torn tail: it never makes a store unreadable, never
//! costs an intact record, is never returned as bytes, and is reported (by
//! id when the record's header still parses, else by location). Issue 15
//! findings 1, 2 and 7, `check`, `salvage`, and a property test over random
//! media faults.

mod common;

use arc_store::{DamageKind, Durability, FileStore, Options, StoreError, check, format, inspect_segment, salvage};
use common::*;
use lam_core::{ObsStore, SessionId};
use proptest::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};

fn expect_damaged(s: &FileStore, session: &str, shown: &str) -> StoreError {
    match s.get_bytes(&sid(session), shown) {
        Err(e @ StoreError::Damaged { .. }) => {
            let StoreError::Damaged { shown: got, session: ses, .. } = &e else { unreachable!() };
            assert_eq!((got.as_str(), ses.as_str()), (shown, session));
            let msg = e.to_string();
            assert!(msg.contains(&format!("§{shown}")) && msg.contains("damaged"), "{msg}");
            e
        }
        Err(e) => panic!("§{shown}: expected Damaged, got {e}"),
        Ok(b) => panic!("§{shown}: expected Damaged, got {b:?}"),
    }
}

fn assert_intact(s: &FileStore, session: &str, recs: &[(String, Vec<u8>)]) {
    for (shown, obs) in recs {
        assert_eq!(s.get_bytes(&sid(session), shown).unwrap().as_ref(), Some(obs), "§{shown}");
    }
}

#[test]
fn finding_1_a_flipped_byte_in_the_last_record_is_damage_not_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    let recs = fill(d.path(), 4, OPTS);
    let seg = last_segment(d.path());
    let len = fs::metadata(&seg).unwrap().len();
    let last = *record_offsets(&seg).last().unwrap();
    flip(&seg, len - 3, 0x01);
    let bytes = fs::read(&seg).unwrap();

    let r = FileStore::open_read_only(d.path()).unwrap();
    let rc = r.recovery();
    assert_eq!(rc.torn_bytes, 0, "{rc}");
    assert_eq!(rc.damage.len(), 1, "{rc}");
    let dmg = &rc.damage[0];
    assert_eq!((dmg.kind, dmg.offset, dmg.len), (DamageKind::Record, last, len - last), "{dmg}");
    let who = dmg.record.as_ref().unwrap();
    assert_eq!((who.session.as_deref(), who.shown.as_deref()), (Some("t"), Some(recs[3].0.as_str())));
    assert!(!who.content_matches_id);
    expect_damaged(&r, "t", &recs[3].0);
    assert!(r.get(&sid("t"), &recs[3].0).unwrap_err().to_string().contains("damaged"));
    // Through the trait and the opener's `find` (what `lam recall` uses) it stays a typed error.
    assert!(matches!(arc_store::find(&r, None, &format!("§{}", recs[3].0)), Err(StoreError::Damaged { .. })));
    assert!(matches!(r.meta_of(&sid("t"), &recs[3].0), Err(StoreError::Damaged { .. })));
    assert_intact(&r, "t", &recs[..3]);
    assert_eq!(r.ids(&sid("t")).unwrap().len(), 3, "ids lists what can be recalled");
    drop(r);
    assert_eq!(fs::read(&seg).unwrap(), bytes, "a reader changes nothing");

    // The next writer, even for another session, keeps it, copies it, and appends after it.
    let mut w = FileStore::open_with(d.path(), OPTS).unwrap();
    let q = w.recovery().damage[0].quarantine.clone().unwrap();
    assert_eq!(fs::read(&q).unwrap(), &bytes[last as usize..]);
    let log = fs::read_to_string(d.path().join("REPAIR.log")).unwrap();
    assert!(log.contains("damaged record") && log.contains(&recs[3].0), "{log}");
    let after = w.append(&sid("other"), &rec(0, "x", b"after", None), 1).unwrap();
    expect_damaged(&w, "t", &recs[3].0);
    drop(w);
    assert_eq!(fs::read(&seg).unwrap()[..bytes.len()], bytes[..], "not truncated");

    // Reopening reports it again but copies and logs nothing new.
    let quarantine = snapshot(&d.path().join("quarantine"));
    let mut w = FileStore::open_with(d.path(), OPTS).unwrap();
    assert_eq!(w.recovery().damaged().count(), 1);
    assert_eq!(w.recovery().repair_log, None);
    assert_eq!(snapshot(&d.path().join("quarantine")), quarantine);
    assert_eq!(fs::read_to_string(d.path().join("REPAIR.log")).unwrap(), log);
    assert_eq!(w.get(&sid("other"), &after.shown).unwrap().unwrap(), b"after");
    assert_intact(&w, "t", &recs[..3]);
    // Archiving the same observation again restores recall under the same id.
    let again = w.append(&sid("t"), &rec(3, "run", &recs[3].1, Some(3)), 5).unwrap();
    assert_eq!(again.shown, recs[3].0);
    drop(w);
    let r = FileStore::open_read_only(d.path()).unwrap();
    assert_intact(&r, "t", &recs);
}

/// Records of the store in `dir`: (session, shown, observation, segment, offset, framed length).
type Placed = Vec<(String, String, Vec<u8>, PathBuf, u64, u64)>;

fn placed(dir: &Path) -> Placed {
    let s = FileStore::open_read_only(dir).unwrap();
    assert!(s.recovery().is_clean());
    let mut shown_of = std::collections::HashMap::new();
    for ses in s.sessions() {
        for shown in s.ids(&ses).unwrap() {
            let m = s.meta(&ses, &shown).unwrap().unwrap();
            shown_of.insert((ses.0.clone(), m.id), shown);
        }
    }
    let mut out = Vec::new();
    for seg in s.segment_paths() {
        let data = fs::read(&seg).unwrap();
        for (off, len) in inspect_segment(&data, seg_number(&seg), true).unwrap().records {
            let (r, _) = format::decode(&data[off as usize..]).unwrap();
            let session = String::from_utf8(r.session.to_vec()).unwrap();
            let shown = shown_of[&(session.clone(), r.id)].clone();
            out.push((session, shown, r.observation.to_vec(), seg.clone(), off, len));
        }
    }
    out
}

fn seg_number(p: &Path) -> u32 {
    format::parse_segment_file_name(p.file_name().unwrap().to_str().unwrap()).unwrap()
}

/// After a fault over `[at, at + n)` of `file`: every record outside it reads back exactly;
/// one inside it is `Damaged` or covered by a reported damaged place; nothing else.
/// `cut`: the fault cut the file at `at`, so records that started after it left no trace.
/// Returns how many were reported by id.
fn verify_after_fault(s: &FileStore, recs: &Placed, file: &Path, at: u64, n: u64, cut: bool) -> usize {
    let mut by_id = 0;
    for (session, shown, obs, seg, off, len) in recs {
        let hit = seg == file && *off < at + n && at < off + len;
        match s.get_bytes(&SessionId(session.clone()), shown) {
            Ok(Some(b)) => assert_eq!(&b, obs, "§{shown}: wrong bytes"),
            Ok(None) if cut && seg == file && (*off >= at || at < 16) => {}
            Ok(None) => {
                assert!(hit, "§{shown} at {off} (fault at {at}+{n}) vanished\n{}", s.recovery());
                assert!(s.recovery().damage.iter().any(|d| d.covers(seg, *off, *len)), "§{shown} at {off} missing and not reported\n{}", s.recovery());
            }
            Err(StoreError::Damaged { .. }) => {
                assert!(hit, "§{shown} at {off} reported damaged, but the fault was at {at}+{n}\n{}", s.recovery());
                by_id += 1;
            }
            Err(e) => panic!("§{shown}: {e}"),
        }
    }
    by_id
}

#[test]
fn finding_2_any_flipped_byte_of_a_middle_record_costs_only_that_record() {
    let src = tempfile::tempdir().unwrap();
    fill(src.path(), 5, OPTS);
    let recs = placed(src.path());
    let (_, _, _, seg, off, len) = recs[2].clone();
    let work = tempfile::tempdir().unwrap();
    let mut by_id = 0;
    for i in 0..len {
        let dir = work.path().join(format!("flip{i}"));
        copy_dir(src.path(), &dir);
        let seg = dir.join(seg.file_name().unwrap());
        flip(&seg, off + i, 0x10);
        let r = FileStore::open_read_only(&dir).unwrap();
        let n = verify_after_fault(&r, &recs_in(&recs, &dir), &seg, off + i, 1, false);
        by_id += n;
        if (i as usize) >= len as usize - recs[2].2.len() {
            assert_eq!(n, 1, "a flip in the observation (byte {i}) keeps the record's id\n{}", r.recovery());
        }
        drop(r);
        let mut w = FileStore::open_with(&dir, OPTS).unwrap();
        let m = w.append(&sid("t"), &rec(9, "after", b"written after the damage", None), 1).unwrap();
        drop(w);
        let w = FileStore::open(&dir).unwrap();
        verify_after_fault(&w, &recs_in(&recs, &dir), &seg, off + i, 1, false);
        assert_eq!(w.get(&sid("t"), &m.shown).unwrap().unwrap(), b"written after the damage");
        drop(w);
        fs::remove_dir_all(&dir).unwrap();
    }
    // Only flips in the shown part of the id (2 bytes: a first record shows 4 hex), the
    // session's length (4) or its name (1 byte here) can hide which record it was; those
    // are reported by place.
    assert_eq!(by_id as u64, len - 7, "{by_id} of {len} flips reported by id");
}

/// `recs` with their segment paths moved into `dir`.
fn recs_in(recs: &Placed, dir: &Path) -> Placed {
    recs.iter().map(|(a, b, c, seg, o, l)| (a.clone(), b.clone(), c.clone(), dir.join(seg.file_name().unwrap()), *o, *l)).collect()
}

#[test]
fn finding_2_a_damaged_length_field_is_recovered_by_the_checksum() {
    let d = tempfile::tempdir().unwrap();
    let recs = fill(d.path(), 5, OPTS);
    let seg = last_segment(d.path());
    let second = record_offsets(&seg)[1];
    flip(&seg, second + 2, 0x7f);
    let s = FileStore::open_read_only(d.path()).unwrap();
    let dmg = s.recovery().damaged().next().unwrap().clone();
    assert_eq!((dmg.kind, dmg.offset), (DamageKind::Record, second), "{dmg}");
    assert!(dmg.record.as_ref().unwrap().verified, "{dmg}");
    assert!(dmg.reason.contains("length field"), "{dmg}");
    expect_damaged(&s, "t", &recs[1].0);
    assert_intact(&s, "t", &[recs[0].clone(), recs[2].clone(), recs[3].clone(), recs[4].clone()]);
}

#[test]
fn finding_2_a_zero_filled_or_garbage_new_segment_does_not_make_the_store_unreadable() {
    for zeros in [15usize, 16, 17, 4096] {
        let d = tempfile::tempdir().unwrap();
        let recs = fill(d.path(), 3, OPTS);
        let seg2 = d.path().join("seg-000002.log");
        fs::write(&seg2, vec![0u8; zeros]).unwrap();
        let r = FileStore::open_read_only(d.path()).unwrap();
        assert_intact(&r, "t", &recs);
        assert_eq!(r.recovery().torn_bytes, zeros as u64);
        drop(r);
        let mut w = FileStore::open_with(d.path(), OPTS).unwrap();
        assert_eq!(fs::read(&seg2).unwrap(), format::header(2), "{zeros} zero bytes: header rewritten");
        assert_eq!(fs::read(w.recovery().damage[0].quarantine.as_ref().unwrap()).unwrap(), vec![0u8; zeros]);
        let m = w.append(&sid("t"), &rec(7, "x", b"next", None), 1).unwrap();
        drop(w);
        let s = FileStore::open(d.path()).unwrap();
        assert!(s.recovery().is_clean(), "{}", s.recovery());
        assert_intact(&s, "t", &recs);
        assert_eq!(s.get(&sid("t"), &m.shown).unwrap().unwrap(), b"next");
    }
    // Garbage where a header should be: reported; the writer starts segment 3.
    let d = tempfile::tempdir().unwrap();
    let recs = fill(d.path(), 3, OPTS);
    let seg2 = d.path().join("seg-000002.log");
    fs::write(&seg2, b"0123456789abcdef").unwrap();
    let r = FileStore::open_read_only(d.path()).unwrap();
    assert_intact(&r, "t", &recs);
    assert_eq!(r.recovery().damage[0].kind, DamageKind::Header, "{}", r.recovery());
    drop(r);
    let mut w = FileStore::open_with(d.path(), OPTS).unwrap();
    let m = w.append(&sid("t"), &rec(7, "x", b"next", None), 1).unwrap();
    drop(w);
    assert_eq!(fs::read(&seg2).unwrap(), b"0123456789abcdef", "left as it was");
    assert!(d.path().join("seg-000003.log").is_file());
    let s = FileStore::open(d.path()).unwrap();
    assert_intact(&s, "t", &recs);
    assert_eq!(s.get(&sid("t"), &m.shown).unwrap().unwrap(), b"next");
    assert_eq!(s.recovery().damaged().count(), 1);
}

#[test]
fn damage_in_an_earlier_segment_and_a_missing_segment_are_reported_not_fatal() {
    let opts = Options { durability: Durability::None, segment_bytes: 400 };
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 12, opts);
    let placed = placed(d.path());
    let s = FileStore::open_read_only(d.path()).unwrap();
    let segs = s.segment_paths();
    drop(s);
    assert!(segs.len() >= 4);
    // A cut end of a segment that is not the last: reported, kept.
    let len = fs::metadata(&segs[0]).unwrap().len();
    fs::OpenOptions::new().write(true).open(&segs[0]).unwrap().set_len(len - 3).unwrap();
    // A missing segment.
    fs::remove_file(&segs[2]).unwrap();
    let mut w = FileStore::open_with(d.path(), opts).unwrap();
    let rc = w.recovery().clone();
    assert!(rc.damage.iter().any(|d| d.kind == DamageKind::MissingSegment && d.path == segs[2]), "{rc}");
    assert!(rc.damage.iter().any(|d| d.path == segs[0] && d.offset + d.len == len - 3), "{rc}");
    assert_eq!(fs::metadata(&segs[0]).unwrap().len(), len - 3, "not cut");
    for (session, shown, obs, seg, ..) in &placed {
        let got = w.get_bytes(&sid(session), shown);
        if *seg == segs[2] {
            assert_eq!(got.unwrap(), None);
        } else if *seg != segs[0] {
            assert_eq!(got.unwrap().as_ref(), Some(obs));
        }
    }
    let m = w.append(&sid("t"), &rec(99, "x", b"later", None), 1).unwrap();
    drop(w);
    let s = FileStore::open(d.path()).unwrap();
    assert_eq!(s.get(&sid("t"), &m.shown).unwrap().unwrap(), b"later");
    for (session, shown, obs, seg, ..) in &placed {
        if *seg != segs[0] && *seg != segs[2] {
            assert_eq!(s.get(&sid(session), shown).unwrap().as_ref(), Some(obs));
        }
    }
}

#[test]
fn finding_7_recall_verifies_the_content_address() {
    let d = tempfile::tempdir().unwrap();
    let recs = fill(d.path(), 3, OPTS);
    let seg = last_segment(d.path());
    let at = record_offsets(&seg)[1] as usize;
    // Edit one observation byte and recompute the checksum: only the SHA-1 id can tell.
    let mut b = fs::read(&seg).unwrap();
    let plen = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    b[at + 8 + plen - 2] ^= 0x04;
    let crc = format::crc(&b[at..at + 4], &b[at + 8..at + 8 + plen]);
    b[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
    fs::write(&seg, &b).unwrap();
    let s = FileStore::open_read_only(d.path()).unwrap();
    let e = expect_damaged(&s, "t", &recs[1].0).to_string();
    assert!(e.contains("does not match its id"), "{e}");
    assert_intact(&s, "t", &[recs[0].clone(), recs[2].clone()]);
    let report = check(d.path()).unwrap();
    assert!(!report.is_clean());
    let dmg: Vec<_> = report.damaged().collect();
    assert_eq!(dmg.len(), 1, "{report}");
    assert_eq!((dmg[0].kind, dmg[0].offset), (DamageKind::IdMismatch, at as u64));
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("fixed");
    let sr = salvage(d.path(), &dst).unwrap();
    assert_eq!(sr.records, 2, "{sr}");
    let fixed = FileStore::open_read_only(&dst).unwrap();
    assert_eq!(fixed.get(&sid("t"), &recs[1].0).unwrap(), None);
    assert_intact(&fixed, "t", &[recs[0].clone(), recs[2].clone()]);
}

#[test]
fn check_reads_everything_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 6, Options { durability: Durability::None, segment_bytes: 300 });
    let clean = check(d.path()).unwrap();
    assert!(clean.is_clean() && clean.damage.is_empty(), "{clean}");
    assert_eq!((clean.records, clean.sessions), (6, 1));
    assert!(clean.segments >= 2 && clean.bytes > 0);
    // A torn tail alone is reported but is not damage.
    let seg = last_segment(d.path());
    let mut f = fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, b"\x50\x00\x00\x00abc").unwrap();
    drop(f);
    let before = snapshot(d.path());
    let torn = check(d.path()).unwrap();
    assert!(torn.is_clean() && torn.damage.len() == 1 && torn.damage[0].is_torn_tail(), "{torn}");
    let first = record_offsets(&last_segment(d.path()))[0];
    flip(&seg, first + 30, 0x01);
    let before_flip = snapshot(d.path());
    let bad = check(d.path()).unwrap();
    assert!(!bad.is_clean());
    assert!(bad.to_string().contains("damaged record"), "{bad}");
    assert_eq!(snapshot(d.path()), before_flip, "check wrote something");
    assert_ne!(before, before_flip);
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(check(empty.path()), Err(StoreError::NotAStore { .. })));
    assert!(!empty.path().join("LOCK").exists());
}

#[test]
fn salvage_keeps_every_intact_record_and_quarantines_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let opts = Options { durability: Durability::None, segment_bytes: 500 };
    {
        let mut s = FileStore::open_with(d.path(), opts).unwrap();
        for i in 0..10u32 {
            let session = if i % 2 == 0 { "a" } else { "b" };
            s.append(&sid(session), &rec(i, "cmd", format!("output {i}\n").repeat(i as usize + 1).as_bytes(), Some(0)), 3).unwrap();
        }
    }
    let recs = placed(d.path());
    let (_, _, _, seg, off, _) = &recs[3];
    flip(seg, off + 40, 0x80);
    let last = last_segment(d.path());
    let mut f = fs::OpenOptions::new().append(true).open(&last).unwrap();
    std::io::Write::write_all(&mut f, b"\x90\x00\x00\x00torn").unwrap();
    drop(f);
    let before = snapshot(d.path());
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("new");
    let r = salvage(d.path(), &dst).unwrap();
    assert_eq!(snapshot(d.path()), before, "salvage changed the source");
    assert_eq!(r.records, 9, "{r}");
    assert_eq!(r.sessions, 2);
    assert_eq!(r.damage.len(), 2, "{r}");
    for dmg in &r.damage {
        let q = dmg.quarantine.as_ref().unwrap();
        assert!(q.starts_with(dst.join("quarantine")) && q.is_file(), "{dmg}");
        assert_eq!(fs::metadata(q).unwrap().len(), dmg.len);
    }
    assert!(fs::read_to_string(dst.join("REPAIR.log")).unwrap().lines().count() == 2);
    let s = FileStore::open_read_only(&dst).unwrap();
    for (k, (session, shown, obs, ..)) in recs.iter().enumerate() {
        let got = s.get(&sid(session), shown).unwrap();
        if k == 3 {
            assert_eq!(got, None);
        } else {
            assert_eq!(got.as_ref(), Some(obs), "§{shown}");
        }
    }
    assert!(check(&dst).unwrap().is_clean());
    assert!(matches!(salvage(d.path(), &dst), Err(StoreError::Exists { .. })));
    let names: Vec<_> = fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("new")], "no temporary left behind");
}

#[test]
fn a_damaged_record_keeps_its_id_so_later_ids_keep_their_extensions() {
    let (x, y) = colliding_pair();
    let d = tempfile::tempdir().unwrap();
    let (mx, my) = {
        let mut s = FileStore::open_with(d.path(), OPTS).unwrap();
        let mx = s.append(&sid("c"), &rec(0, "cat", &x, None), 1).unwrap();
        let my = s.append(&sid("c"), &rec(1, "cat", &y, None), 1).unwrap();
        (mx.shown, my.shown)
    };
    let shared = lam_core::ObsId::of(b"cat", &x).hex().bytes().zip(lam_core::ObsId::of(b"cat", &y).hex().bytes()).take_while(|(p, q)| p == q).count();
    assert_eq!((mx.len(), my.len()), (4, shared + 1));
    let seg = last_segment(d.path());
    let first = record_offsets(&seg)[0];
    let second = record_offsets(&seg)[1];
    flip(&seg, second - 2, 0x01);
    let s = FileStore::open_read_only(d.path()).unwrap();
    expect_damaged(&s, "c", &mx);
    assert_eq!(s.get(&sid("c"), &my).unwrap().unwrap(), y, "§{my} keeps its length");
    assert_eq!(s.recovery().damage[0].offset, first);
    // A salvaged store gives ids again without the damaged record: the change is reported.
    let out = tempfile::tempdir().unwrap();
    let r = salvage(d.path(), out.path().join("s")).unwrap();
    assert_eq!(r.renamed.len(), 1, "{r}");
    assert_eq!((r.renamed[0].was.as_str(), r.renamed[0].now.as_str()), (my.as_str(), &my[..4]));
}

/// A damaged record keeps its id in the store's id space, and a lookup by
/// that id never answers with the bytes of another session's observation
/// whose id begins with it.
#[test]
fn a_damaged_record_s_id_is_never_answered_by_another_observation() {
    let (x, y) = colliding_pair();
    let d = tempfile::tempdir().unwrap();
    let (mx, my) = {
        let mut s = FileStore::open_with(d.path(), OPTS).unwrap();
        let mx = s.append(&sid("d"), &rec(0, "cat", &x, None), 1).unwrap();
        let my = s.append(&sid("e"), &rec(0, "cat", &y, None), 1).unwrap();
        (mx.shown, my.shown)
    };
    assert!(my.starts_with(&mx) && my.len() > mx.len(), "§{mx} §{my}: one id space");
    let seg = last_segment(d.path());
    flip(&seg, record_offsets(&seg)[1] - 2, 0x01);
    let s = FileStore::open_read_only(d.path()).unwrap();
    expect_damaged(&s, "d", &mx);
    assert_eq!(s.ids(&sid("e")).unwrap(), vec![my.clone()], "§{my} keeps its length");
    // `d` holds no intact record, so it is not listed: e's y, whose id begins
    // with §{mx} but is shown longer, does not answer for it.
    let r = arc_store::find(&s, None, &mx);
    assert!(matches!(r, Err(StoreError::NotFound { .. })), "§{mx} is d's damaged record, not e's: {r:?}");
    assert!(matches!(arc_store::find(&s, Some(&sid("d")), &mx), Err(StoreError::Damaged { .. })));
    assert_eq!(arc_store::find(&s, None, &my).unwrap().bytes, y);
}

#[test]
fn a_record_nested_in_an_observation_is_not_taken_for_a_boundary() {
    let inner = tempfile::tempdir().unwrap();
    {
        let mut s = FileStore::open_with(inner.path(), OPTS).unwrap();
        for i in 0..3u32 {
            s.append(&sid("inner"), &rec(i, "x", format!("inner {i}").as_bytes(), None), 1).unwrap();
        }
    }
    let segment = fs::read(last_segment(inner.path())).unwrap();
    let d = tempfile::tempdir().unwrap();
    let (m0, m1) = {
        let mut s = FileStore::open_with(d.path(), OPTS).unwrap();
        let m0 = s.append(&sid("outer"), &rec(0, "cat seg-000001.log", &segment, None), 1).unwrap();
        let m1 = s.append(&sid("outer"), &rec(1, "ls", b"after", None), 1).unwrap();
        (m0.shown, m1.shown)
    };
    let seg = last_segment(d.path());
    // Damage the outer record's observation ahead of the nested records, then its successor's frame.
    let second = record_offsets(&seg)[1];
    flip(&seg, second - segment.len() as u64 + 3, 0x01);
    let s = FileStore::open_read_only(d.path()).unwrap();
    expect_damaged(&s, "outer", &m0);
    assert_eq!(s.get(&sid("outer"), &m1).unwrap().unwrap(), b"after");
    assert_eq!(s.sessions(), vec![sid("outer")], "{}", s.recovery());
    drop(s);
    flip(&seg, second, 0x01);
    let s = FileStore::open_read_only(d.path()).unwrap();
    expect_damaged(&s, "outer", &m0);
    assert_eq!(s.sessions(), Vec::<SessionId>::new(), "{}", s.recovery());
}

#[test]
fn a_reader_refresh_reports_damage_written_since() {
    let d = tempfile::tempdir().unwrap();
    let recs = fill(d.path(), 2, OPTS);
    let mut r = FileStore::open_read_only(d.path()).unwrap();
    let seg = last_segment(d.path());
    let mut w = FileStore::open_with(d.path(), OPTS).unwrap();
    let m = w.append(&sid("t"), &rec(5, "y", b"appended later", None), 1).unwrap();
    drop(w);
    let len = fs::metadata(&seg).unwrap().len();
    flip(&seg, len - 2, 0x01);
    r.refresh().unwrap();
    assert_intact(&r, "t", &recs);
    expect_damaged(&r, "t", &m.shown);
    assert_eq!(r.recovery().damaged().count(), 1);
    r.refresh().unwrap();
    assert_eq!(r.recovery().damaged().count(), 1, "reported once");
}

/// One media fault on a store's files.
#[derive(Debug, Clone)]
enum Fault {
    /// Flip bit `bit` of byte `at` (a fraction of the file) of segment `seg` (a fraction of the segments).
    Flip { seg: f64, at: f64, bit: u8 },
    /// Zero `n` bytes at `at`.
    Zero { seg: f64, at: f64, n: u64 },
    /// Cut the segment at `at`.
    Cut { seg: f64, at: f64 },
    /// Append `bytes` to the last segment.
    Garbage { bytes: Vec<u8> },
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        4 => (0.0..1.0f64, 0.0..1.0f64, 0u8..8).prop_map(|(seg, at, bit)| Fault::Flip { seg, at, bit }),
        2 => (0.0..1.0f64, 0.0..1.0f64, 1u64..300).prop_map(|(seg, at, n)| Fault::Zero { seg, at, n }),
        1 => (0.0..1.0f64, 0.0..1.0f64).prop_map(|(seg, at)| Fault::Cut { seg, at }),
        1 => proptest::collection::vec(any::<u8>(), 1..64).prop_map(|bytes| Fault::Garbage { bytes }),
    ]
}

/// Apply `f`; returns the damaged range (file, start, length).
fn apply(dir: &Path, f: &Fault) -> (PathBuf, u64, u64) {
    let segs = FileStore::open_read_only(dir).unwrap().segment_paths();
    let pick = |x: f64| segs[((x * segs.len() as f64) as usize).min(segs.len() - 1)].clone();
    match f {
        Fault::Flip { seg, at, bit } => {
            let p = pick(*seg);
            let len = fs::metadata(&p).unwrap().len();
            let o = ((at * len as f64) as u64).min(len - 1);
            flip(&p, o, 1 << bit);
            (p, o, 1)
        }
        Fault::Zero { seg, at, n } => {
            let p = pick(*seg);
            let mut b = fs::read(&p).unwrap();
            let o = ((at * b.len() as f64) as usize).min(b.len() - 1);
            let e = (o + *n as usize).min(b.len());
            b[o..e].fill(0);
            fs::write(&p, &b).unwrap();
            (p, o as u64, (e - o) as u64)
        }
        Fault::Cut { seg, at } => {
            let p = pick(*seg);
            let len = fs::metadata(&p).unwrap().len();
            let o = (at * len as f64) as u64;
            fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(o).unwrap();
            (p, o, len - o)
        }
        Fault::Garbage { bytes } => {
            let p = segs.last().unwrap().clone();
            let len = fs::metadata(&p).unwrap().len();
            let mut f = fs::OpenOptions::new().append(true).open(&p).unwrap();
            std::io::Write::write_all(&mut f, bytes).unwrap();
            (p, len, bytes.len() as u64)
        }
    }
}

proptest! {
    // 64 cases by default (each builds and reopens a store); PROPTEST_CASES raises it.
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64), .. ProptestConfig::default() })]

    /// Any single media fault: both handles open (unless the fault made a
    /// header claim a newer version), every record outside the fault reads
    /// back exactly, every record inside it is reported damaged by id or by
    /// place, the store stays writable, and the writer's repairs never cost a
    /// record the reader could read.
    #[test]
    fn a_media_fault_costs_only_what_it_touched(
        sizes in proptest::collection::vec((0usize..3, 0usize..400), 1..16),
        seg_bytes in 200u64..2000,
        f in fault(),
    ) {
        let d = tempfile::tempdir().unwrap();
        let opts = Options { durability: Durability::None, segment_bytes: seg_bytes };
        {
            let mut s = FileStore::open_with(d.path(), opts).unwrap();
            for (i, (ses, n)) in sizes.iter().enumerate() {
                let obs: Vec<u8> = (0..*n).map(|k| (k * 7 + i * 13) as u8).collect();
                s.append(&sid(&format!("s{ses}")), &rec(i as u32, "tool", &obs, Some(i as i32)), 1).unwrap();
            }
        }
        let recs = placed(d.path());
        let (file, at, n) = apply(d.path(), &f);
        let r = match FileStore::open_read_only(d.path()) {
            Ok(r) => r,
            Err(StoreError::Corrupt { reason, .. }) if reason.contains("version") => return Ok(()),
            Err(e) => panic!("{f:?}: {e}"),
        };
        let cut = matches!(f, Fault::Cut { .. });
        verify_after_fault(&r, &recs, &file, at, n, cut);
        let readable: Vec<_> = recs.iter().filter(|(s, sh, ..)| matches!(r.get_bytes(&sid(s), sh), Ok(Some(_)))).cloned().collect();
        drop(r);
        let mut w = FileStore::open_with(d.path(), opts).unwrap();
        verify_after_fault(&w, &recs, &file, at, n, cut);
        let m = w.append(&sid("s0"), &rec(999, "new", b"after the fault", None), 1).unwrap();
        drop(w);
        let s = FileStore::open(d.path()).unwrap();
        prop_assert_eq!(s.get(&sid("s0"), &m.shown).unwrap().unwrap(), b"after the fault".to_vec());
        for (session, shown, obs, ..) in &readable {
            let got = s.get_bytes(&sid(session), shown).unwrap();
            prop_assert_eq!(got.as_ref(), Some(obs));
        }
    }
}
