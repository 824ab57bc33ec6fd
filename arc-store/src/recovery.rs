//! What opening (or checking) a store found: the [`Recovery`] report and its
//! [`Damage`] entries. The rules that produce them are in `FORMAT.md`
//! ("Reading and recovery") and `docs/store-recovery.md`.

use lam_core::ObsId;
use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of damage a [`Damage`] entry describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DamageKind {
    /// An incomplete final record (or a zero-filled or never-written tail) of
    /// the last segment: what a crash during a write leaves. The only damage a
    /// writer cuts, after copying it to the quarantine.
    TornTail,
    /// One whole record whose frame is intact (its length leads to the next
    /// record or the end of the file) but whose content fails a check
    /// (checksum, field layout, a damaged length field). Kept in place.
    Record,
    /// Bytes between two record boundaries that do not form a record: the
    /// scan resumed at the next offset where a valid record starts. Kept in
    /// place; any record inside is known only by this location.
    Region,
    /// A damaged segment header (the records after it are still read). A
    /// writer never appends to such a segment; it starts the next one.
    Header,
    /// A segment number with no file between two that exist.
    MissingSegment,
    /// A record whose checksum holds but whose content does not hash to its
    /// id (SHA-1 over action, 0x1F, observation): an edit, not a media fault.
    /// Found by [`crate::check`], [`crate::salvage`] and by recall.
    IdMismatch,
}

impl DamageKind {
    /// Short human-readable name.
    pub fn describe(self) -> &'static str {
        match self {
            DamageKind::TornTail => "torn tail",
            DamageKind::Record => "damaged record",
            DamageKind::Region => "damaged region",
            DamageKind::Header => "damaged segment header",
            DamageKind::MissingSegment => "missing segment",
            DamageKind::IdMismatch => "content does not match its id",
        }
    }
}

/// The identity a damaged record still shows, read without trusting its
/// checksum (unless `verified`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRecord {
    /// The session name as stored, when it is UTF-8.
    pub session: Option<String>,
    /// The id field as stored.
    pub id: ObsId,
    /// The visible id this record holds in its session's id book, when it was
    /// registered there ([`crate::FileStore`] recall of it answers
    /// [`crate::StoreError::Damaged`]).
    pub shown: Option<String>,
    /// True when the stored action and observation still hash to the stored
    /// id (SHA-1): the observation bytes are intact and the damage is in the
    /// other fields or the checksum.
    pub content_matches_id: bool,
    /// True when the identity is proven: the record verifies once a damaged
    /// length field is corrected, so every field but the length is intact.
    pub verified: bool,
}

/// One damaged place in a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// What was found.
    pub kind: DamageKind,
    /// The segment file.
    pub path: PathBuf,
    /// Byte offset of the damaged bytes in that file.
    pub offset: u64,
    /// Number of damaged bytes (0 for a missing segment).
    pub len: u64,
    /// What check failed.
    pub reason: String,
    /// The record the bytes claim to be, when its header still parses.
    pub record: Option<DamagedRecord>,
    /// The copy of the bytes in the store's `quarantine/` folder (a writer or
    /// `salvage` makes it; read-only opens and `check` write nothing).
    pub quarantine: Option<PathBuf>,
}

impl Damage {
    /// True for a torn tail (crash debris, not damage to an acknowledged record).
    pub fn is_torn_tail(&self) -> bool {
        self.kind == DamageKind::TornTail
    }

    /// Whether `[offset, offset + len)` of `path` overlaps these bytes.
    pub fn covers(&self, path: &Path, offset: u64, len: u64) -> bool {
        self.path == path && (self.kind == DamageKind::MissingSegment || (offset < self.offset + self.len && self.offset < offset + len))
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| p.display().to_string())
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", file_name(&self.path), self.kind.describe())?;
        if self.kind != DamageKind::MissingSegment {
            write!(f, " at byte offset {} ({} bytes)", self.offset, self.len)?;
        }
        write!(f, ": {}", self.reason)?;
        if let Some(r) = &self.record {
            let shown = r.shown.clone().unwrap_or_else(|| r.id.hex()[..8].to_string());
            let session = r.session.as_deref().unwrap_or("(session name not UTF-8)");
            let trust = if r.verified {
                "identity verified"
            } else if r.content_matches_id {
                "observation bytes still match the id"
            } else {
                "identity unverified"
            };
            write!(f, "; record §{shown} of session {session} ({trust})")?;
        }
        if let Some(q) = &self.quarantine {
            write!(f, "; copy in {}", q.display())?;
        }
        Ok(())
    }
}

/// What opening the store found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segment files read.
    pub segments: u32,
    /// Valid records indexed.
    pub records: u64,
    /// Bytes of torn tail found at the end of the last segment (a writer
    /// copied them to the quarantine and cut them; a reader ignored them).
    pub torn_bytes: u64,
    /// Where the torn tail began (segment file, byte offset), if there was one.
    pub torn_at: Option<(PathBuf, u64)>,
    /// Everything found, in file order: the torn tail, damaged records and
    /// regions (kept in place and skipped), damaged headers, missing segments.
    pub damage: Vec<Damage>,
    /// `DIR/REPAIR.log` when this open added lines to it (new quarantine copies).
    pub repair_log: Option<PathBuf>,
}

impl Recovery {
    /// True when nothing at all was found, torn tail included.
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty()
    }

    /// Damage other than a torn tail.
    pub fn damaged(&self) -> impl Iterator<Item = &Damage> {
        self.damage.iter().filter(|d| !d.is_torn_tail())
    }
}

impl fmt::Display for Recovery {
    /// One line per finding, then a summary line; empty when the store is clean.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            return Ok(());
        }
        for d in &self.damage {
            writeln!(f, "arc-store: {d}")?;
        }
        let kept = self.damaged().count();
        write!(f, "arc-store: {} segments, {} records readable", self.segments, self.records)?;
        if kept > 0 {
            write!(f, "; {kept} damaged places skipped (recall of a damaged record says so)")?;
        }
        if let Some(l) = &self.repair_log {
            write!(f, "; logged in {}", l.display())?;
        }
        Ok(())
    }
}
