//! `check` and `salvage`: the library side of `lam store check DIR` and
//! `lam store salvage DIR`.
//!
//! - [`check`] reads every record of a store (framing, CRC-32, and the
//!   content address: SHA-1 over action, 0x1F, observation against the
//!   stored id) and lists every damaged place. It opens files read-only and
//!   writes nothing, so it is safe on a store a writer is using.
//! - [`salvage`] writes every intact record into a fresh store, in file
//!   order (so visible ids are given out again in their first order), and
//!   copies every damaged place into the new store's quarantine with a note.
//!   The source is only read.

use crate::file::{FileStore, Options};
use crate::quarantine::{Keeper, QUARANTINE_DIR, sync_dir};
use crate::recovery::{Damage, DamageKind, DamagedRecord};
use crate::{Result, StoreError};
use lam_core::{Record, SessionId};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// What [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The store directory.
    pub dir: PathBuf,
    /// Segment files read.
    pub segments: u32,
    /// Bytes in those files.
    pub bytes: u64,
    /// Intact records (framing, checksum and content address verified).
    pub records: u64,
    /// Sessions with at least one intact record.
    pub sessions: usize,
    /// Every damaged place, in file order (a torn tail included).
    pub damage: Vec<Damage>,
    /// Files already in the store's quarantine (copies made by earlier
    /// writers or repairs).
    pub quarantined: usize,
    /// The store's directory and files that group or others may access, with
    /// their modes (a store's bytes are private: 0700 directories, 0600 files).
    pub loose: Vec<(PathBuf, u32)>,
}

impl CheckReport {
    /// True when nothing is damaged. A torn tail alone (crash debris: an
    /// incomplete record that was never acknowledged) does not count; the
    /// next writer cuts it, after copying it to the quarantine.
    pub fn is_clean(&self) -> bool {
        self.damaged().next().is_none()
    }

    /// Damage other than a torn tail.
    pub fn damaged(&self) -> impl Iterator<Item = &Damage> {
        self.damage.iter().filter(|d| !d.is_torn_tail())
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (p, mode) in &self.loose {
            writeln!(f, "warning: {} has mode {mode:04o}: group/other may access the archive (chmod go= it)", p.display())?;
        }
        for d in &self.damage {
            writeln!(f, "{d}")?;
        }
        let n = self.damaged().count();
        write!(
            f,
            "{}: {} segments, {} bytes, {} intact records in {} sessions; {}",
            self.dir.display(),
            self.segments,
            self.bytes,
            self.records,
            self.sessions,
            if n == 0 { "no damage".to_string() } else { format!("{n} damaged places") }
        )?;
        if self.damage.iter().any(Damage::is_torn_tail) {
            write!(f, " (and a torn tail, which the next writer cuts)")?;
        }
        if self.quarantined > 0 {
            write!(f, "; {} files in {}", self.quarantined, self.dir.join(QUARANTINE_DIR).display())?;
        }
        Ok(())
    }
}

/// Verify every record of the store in `dir`: framing, CRC-32 and content
/// address. Read-only: nothing in the directory is created or changed.
pub fn check(dir: impl AsRef<Path>) -> Result<CheckReport> {
    let dir = dir.as_ref();
    let s = FileStore::open_reader(dir, true)?;
    let r = s.recovery();
    if r.segments == 0 && r.damage.is_empty() {
        return Err(StoreError::NotAStore { path: dir.to_path_buf() });
    }
    let bytes = s.segment_paths().iter().map(|p| fs::metadata(p).map_or(0, |m| m.len())).sum();
    let quarantined =
        fs::read_dir(dir.join(QUARANTINE_DIR)).map_or(0, |d| d.filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "bin"))).count());
    Ok(CheckReport {
        dir: dir.to_path_buf(),
        segments: r.segments,
        bytes,
        records: r.records,
        sessions: s.sessions().len(),
        damage: r.damage.clone(),
        quarantined,
        loose: loose_modes(dir),
    })
}

/// The store directory, its files and its quarantine's files whose modes
/// have group/other bits, with their full permission bits.
fn loose_modes(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut paths = vec![dir.to_path_buf()];
    for d in [dir.to_path_buf(), dir.join(QUARANTINE_DIR)] {
        if let Ok(rd) = fs::read_dir(&d) {
            paths.extend(rd.filter_map(|e| e.ok().map(|e| e.path())));
        }
    }
    paths.sort();
    paths.into_iter().filter_map(|p| crate::secure::mode(&p).filter(|m| m & 0o077 != 0).map(|m| (p, m))).collect()
}

/// A record whose visible id changed in the salvaged store: a damaged record
/// left out held an id that made this one's longer (a shared 8-hex prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    /// Its session.
    pub session: String,
    /// Its visible id in the source.
    pub was: String,
    /// Its visible id in the salvaged store.
    pub now: String,
}

/// What [`salvage`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SalvageReport {
    /// The damaged store (unchanged).
    pub src: PathBuf,
    /// The fresh store.
    pub dst: PathBuf,
    /// Intact records written to `dst`.
    pub records: u64,
    /// Sessions in `dst`.
    pub sessions: usize,
    /// Every damaged place of `src` left out, each with its copy in
    /// `dst/quarantine/`.
    pub damage: Vec<Damage>,
    /// Records whose visible id differs between `src` and `dst`.
    pub renamed: Vec<Renamed>,
}

impl fmt::Display for SalvageReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.damage {
            writeln!(f, "left out: {d}")?;
        }
        for r in &self.renamed {
            writeln!(f, "renamed: §{} is now §{} in session {}", r.was, r.now, r.session)?;
        }
        write!(
            f,
            "salvaged {} intact records in {} sessions from {} into {}; {} damaged places left out",
            self.records,
            self.sessions,
            self.src.display(),
            self.dst.display(),
            self.damage.len()
        )
    }
}

/// Rewrite every intact record of the store in `src` into a fresh store in
/// `dst` (which must not exist), and copy every damaged place into
/// `dst/quarantine/` with a note (and a line in `dst/REPAIR.log`). `src` is
/// only read. `dst` appears complete or not at all: it is built under a
/// temporary name beside it, synced, then renamed into place.
pub fn salvage(src: impl AsRef<Path>, dst: impl AsRef<Path>) -> Result<SalvageReport> {
    let (src, dst) = (src.as_ref(), dst.as_ref());
    let old = FileStore::open_reader(src, true)?;
    if old.recovery().segments == 0 && old.recovery().damage.is_empty() {
        return Err(StoreError::NotAStore { path: src.to_path_buf() });
    }
    if dst.exists() {
        return Err(StoreError::Exists { path: dst.to_path_buf() });
    }
    let name = dst.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
    let tmp = dst.with_file_name(format!(".{name}.salvage-{}", std::process::id()));
    if tmp.exists() {
        return Err(StoreError::Exists { path: tmp });
    }
    // The same id rule as the source, so every intact record keeps its id.
    let mut new = FileStore::open_with_ids(&tmp, Options::default(), old.id_scope())?;
    let mut report = SalvageReport { src: src.to_path_buf(), dst: dst.to_path_buf(), records: 0, sessions: 0, damage: Vec::new(), renamed: Vec::new() };
    for (session, meta, _) in old.records_in_file_order() {
        let sid = SessionId(session.to_string());
        // Verified again on read: checksum and content address. The scan
        // verified both already; a record that fails now changed under us.
        let observation = match old.get_bytes(&sid, &meta.shown) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(StoreError::Damaged { path, offset, reason, .. }) => {
                let record = DamagedRecord {
                    session: Some(session.to_string()),
                    id: meta.id,
                    shown: Some(meta.shown.clone()),
                    content_matches_id: false,
                    verified: false,
                };
                report.damage.push(Damage { kind: DamageKind::Record, path, offset, len: 0, reason, record: Some(record), quarantine: None });
                continue;
            }
            Err(e) => return Err(e),
        };
        let rec = Record { index: meta.step, action: meta.action.clone(), observation, returncode: meta.returncode };
        let m = new.append_record(&sid, &rec, meta.tokens)?;
        debug_assert_eq!(m.id, meta.id, "the scan refuses actions that are not UTF-8, so the id is reproduced");
        if m.shown != meta.shown {
            report.renamed.push(Renamed { session: session.to_string(), was: meta.shown.clone(), now: m.shown.clone() });
        }
        report.records += 1;
    }
    let mut keeper = Keeper::new(&tmp, "salvage");
    for d in &old.recovery().damage {
        let bytes = old.damaged_bytes(d)?;
        let q = keeper.keep(d, &bytes, &format!("left out of the store salvaged from {}", src.display()))?;
        let rel = q.strip_prefix(&tmp).unwrap_or(&q);
        report.damage.push(Damage { quarantine: Some(dst.join(rel)), ..d.clone() });
    }
    new.flush()?;
    report.sessions = new.sessions().len();
    drop(new);
    sync_dir(&tmp)?;
    fs::rename(&tmp, dst).map_err(crate::error::io("rename salvaged store into place", dst, None))?;
    if let Some(parent) = dst.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(report)
}
