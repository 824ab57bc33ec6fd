//! The quarantine: before a writer cuts bytes (a torn tail, a torn header)
//! it copies them here, and it copies every damaged place it skips too, so
//! a person can look at them later. Everything lives beside the segments:
//!
//! ```text
//! DIR/quarantine/seg-000003.log-at-1234-len-56.bin   the bytes, exactly
//! DIR/quarantine/seg-000003.log-at-1234-len-56.txt   a note: segment, offset, length, kind, reason, record, time
//! DIR/REPAIR.log                                     one line per new quarantine entry
//! ```
//!
//! A place already copied (same name, same bytes) is not copied or logged
//! again, so reopening a store with damage kept in place adds nothing.

use crate::error::{Result, io};
use crate::recovery::{Damage, DamageKind};
use crate::secure;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Folder of quarantined bytes inside a store.
pub const QUARANTINE_DIR: &str = "quarantine";
/// Human-readable log of repairs inside a store.
pub const REPAIR_LOG: &str = "REPAIR.log";

/// Writes quarantine copies and log lines for one store directory.
#[derive(Debug)]
pub(crate) struct Keeper {
    store: PathBuf,
    /// Who is writing ("open", "salvage"), for the notes.
    by: &'static str,
    /// Whether this keeper added a line to the repair log.
    pub logged: bool,
}

impl Keeper {
    pub fn new(store: &Path, by: &'static str) -> Self {
        Self { store: store.to_path_buf(), by, logged: false }
    }

    /// Copy `bytes`, the damaged bytes of `d`, into the quarantine with a
    /// note, unless an identical copy is there already; `what` says what
    /// happens to the original ("cut from the segment", ...). Returns the
    /// copy's path (for a missing segment: the note's).
    pub fn keep(&mut self, d: &Damage, bytes: &[u8], what: &str) -> Result<PathBuf> {
        let qdir = self.store.join(QUARANTINE_DIR);
        // A real directory (never a symlink planted in its place), created 0700.
        if fs::symlink_metadata(&qdir).is_err() {
            secure::create_dir(&qdir, false)?;
            sync_dir(&self.store)?;
        }
        secure::create_dir(&qdir, false)?;
        let seg = d.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if d.kind == DamageKind::MissingSegment {
            let note = qdir.join(format!("{seg}-missing.txt"));
            if fs::symlink_metadata(&note).is_err() {
                write_synced(&note, self.note(d, what).as_bytes())?;
                sync_dir(&qdir)?;
                self.log(d, what, &note)?;
            }
            return Ok(note);
        }
        let stem = format!("{seg}-at-{}-len-{}", d.offset, d.len);
        for k in 1u32.. {
            let name = if k == 1 { stem.clone() } else { format!("{stem}-{k}") };
            let bin = qdir.join(format!("{name}.bin"));
            match secure::open_read(&bin).and_then(|mut f| {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut v).map(|_| v)
            }) {
                Ok(old) if old == bytes => return Ok(bin),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("read", &bin, None)(e)),
            }
            write_synced(&bin, bytes)?;
            write_synced(&qdir.join(format!("{name}.txt")), self.note(d, what).as_bytes())?;
            sync_dir(&qdir)?;
            self.log(d, what, &bin)?;
            return Ok(bin);
        }
        unreachable!("u32 names run out only after 4 billion copies of one place")
    }

    fn note(&self, d: &Damage, what: &str) -> String {
        let mut s = format!(
            "arc-store quarantine note\nsegment: {}\noffset: {}\nlength: {}\nkind: {}\nwhat happened: {what}\nreason: {}\n",
            d.path.display(),
            d.offset,
            d.len,
            d.kind.describe(),
            d.reason
        );
        if let Some(r) = &d.record {
            s.push_str(&format!(
                "record: session {}, id {}{}, {}\n",
                r.session.as_deref().map_or("(not UTF-8)".to_string(), |x| format!("{x:?}")),
                r.id.hex(),
                r.shown.as_deref().map_or(String::new(), |x| format!(", shown §{x}")),
                if r.verified {
                    "identity verified"
                } else if r.content_matches_id {
                    "observation bytes still match the id"
                } else {
                    "identity unverified"
                }
            ));
        }
        s.push_str(&format!("found: {} by arc-store {} (process {})\n", utc_now(), self.by, std::process::id()));
        s
    }

    fn log(&mut self, d: &Damage, what: &str, copy: &Path) -> Result<()> {
        let path = self.store.join(REPAIR_LOG);
        let rel = copy.strip_prefix(&self.store).unwrap_or(copy);
        let line = format!("{} {}; {what}; copy: {}\n", utc_now(), Damage { quarantine: None, ..d.clone() }, rel.display());
        let mut f = secure::open(secure::options().create(true).append(true), "open", &path)?;
        f.write_all(line.as_bytes()).map_err(io("write", &path, None))?;
        f.sync_data().map_err(io("fsync", &path, None))?;
        self.logged = true;
        Ok(())
    }

    /// The repair log's path.
    pub fn log_path(&self) -> PathBuf {
        self.store.join(REPAIR_LOG)
    }
}

/// Write `bytes` to `path` through a temporary name, synced, so a copy is
/// either whole or absent.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp); // a leftover (or a planted link) from an earlier attempt
    let mut f = secure::open(secure::options().write(true).create_new(true), "create", &tmp)?;
    f.write_all(bytes).map_err(io("write", &tmp, None))?;
    f.sync_all().map_err(io("fsync", &tmp, None))?;
    fs::rename(&tmp, path).map_err(io("rename into place", path, None))
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io("fsync directory", dir, None))
}

/// The current time as RFC 3339 UTC, to the second.
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Seconds since the Unix epoch as `YYYY-MM-DDThh:mm:ssZ` (proleptic
/// Gregorian; the days-to-civil conversion of H. Hinnant's `chrono` notes).
fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(super::utc(4_107_542_399), "2100-02-28T23:59:59Z");
    }
}
