//! A directory store's files are private and never followed through
//! symlinks (issue #28): 0700 directories and 0600 files whatever the umask;
//! a symlink planted as a segment, `LOCK`, `REPAIR.log` or `quarantine/`
//! makes opening fail with an error that says so, and its target is untouched.
#![cfg(unix)]

mod common;

use arc_store::{FileStore, QUARANTINE_DIR, REPAIR_LOG};
use common::*;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

fn umask_022() {
    // SAFETY: umask only sets the process's file mode creation mask.
    unsafe { libc::umask(0o022) };
}

/// Garbage after the last record: a torn tail a writer copies to the quarantine.
fn tear(dir: &Path) {
    let seg = last_segment(dir);
    let mut b = fs::read(&seg).unwrap();
    b.extend_from_slice(&[0xAB; 40]);
    fs::write(&seg, b).unwrap();
}

fn refused(dir: &Path, what: &str) {
    let e = FileStore::open_with(dir, OPTS).err().unwrap_or_else(|| panic!("{what}: opened through a symlink"));
    let msg = e.to_string();
    assert!(msg.contains("symbolic link") && msg.contains(what), "{what}: {msg}");
}

#[test]
fn a_store_is_private_whatever_the_umask() {
    umask_022();
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    fill(&dir, 3, OPTS);
    tear(&dir);
    let s = FileStore::open_with(&dir, OPTS).unwrap();
    assert!(s.recovery().repair_log.is_some());
    drop(s);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(QUARANTINE_DIR)), 0o700);
    for f in [last_segment(&dir), dir.join("LOCK"), dir.join(REPAIR_LOG)] {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    for e in fs::read_dir(dir.join(QUARANTINE_DIR)).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
    assert!(arc_store::check(&dir).unwrap().loose.is_empty());
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let r = arc_store::check(&dir).unwrap();
    assert_eq!(r.loose, vec![(dir.clone(), 0o755)]);
    assert!(r.to_string().contains("has mode 0755"), "{r}");
}

#[test]
fn a_symlinked_segment_is_refused_and_its_target_untouched() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    fill(&dir, 2, OPTS);
    let seg = last_segment(&dir);
    let outside = t.path().join("outside.log");
    fs::rename(&seg, &outside).unwrap();
    symlink(&outside, &seg).unwrap();
    let before = fs::read(&outside).unwrap();
    refused(&dir, "seg-");
    assert!(FileStore::open_read_only(&dir).is_err());
    assert_eq!(fs::read(&outside).unwrap(), before);
    // A dangling link where the first segment will be created.
    let fresh = t.path().join("fresh");
    fs::create_dir(&fresh).unwrap();
    symlink(t.path().join("victim"), fresh.join("seg-000001.log")).unwrap();
    assert!(FileStore::open_with(&fresh, OPTS).is_err() || !t.path().join("victim").exists());
    assert!(!t.path().join("victim").exists());
}

#[test]
fn a_symlinked_lock_is_refused_and_its_target_untouched() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    fs::create_dir(&dir).unwrap();
    let target = t.path().join("precious");
    fs::write(&target, b"keep me").unwrap();
    symlink(&target, dir.join("LOCK")).unwrap();
    refused(&dir, "LOCK");
    assert_eq!(fs::read(&target).unwrap(), b"keep me");
}

#[test]
fn a_symlinked_repair_log_is_refused_and_its_target_untouched() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    fill(&dir, 2, OPTS);
    tear(&dir);
    let target = t.path().join("precious");
    fs::write(&target, b"keep me").unwrap();
    symlink(&target, dir.join(REPAIR_LOG)).unwrap();
    refused(&dir, REPAIR_LOG);
    assert_eq!(fs::read(&target).unwrap(), b"keep me");
}

#[test]
fn a_symlinked_quarantine_is_refused_and_its_target_untouched() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    fill(&dir, 2, OPTS);
    tear(&dir);
    let target = t.path().join("elsewhere");
    fs::create_dir(&target).unwrap();
    symlink(&target, dir.join(QUARANTINE_DIR)).unwrap();
    refused(&dir, QUARANTINE_DIR);
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
}
