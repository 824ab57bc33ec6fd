//! `FileStore`: the durable archive, a directory of checksummed segment files.
//!
//! # Layout
//!
//! ```text
//! DIR/LOCK              writer lock (advisory file lock held while a writer is open)
//! DIR/seg-000001.log    segment 1: header, then framed records (see `FORMAT.md`)
//! DIR/seg-000002.log    ... rolled when the next record would pass `Options::segment_bytes`
//! ```
//!
//! # What "acknowledged" means
//!
//! [`ObsStore::append`] returning `Ok` acknowledges the record. For every
//! policy, an acknowledged record has been handed to the operating system
//! with one `pwrite` of the whole framed record, so it survives the crash or
//! SIGKILL of the writing process. Survival of a power loss or kernel crash
//! depends on [`Durability`]:
//!
//! - [`Durability::EveryAppend`]: `fdatasync` before `append` returns; an
//!   acknowledged record survives power loss.
//! - [`Durability::Group`] (the default): a sync is due when `max_records`
//!   records are pending or, checked at each append, when the oldest pending
//!   record is older than `max_delay`. A due sync is started on a helper
//!   thread (`fdatasync` of a duplicate handle, at most one in flight), so
//!   appends go on while the disk works; if one is still in flight, the next
//!   append tries again. A record is durable against power loss once a sync
//!   started after its append has completed; [`FileStore::flush`] returning
//!   `Ok` is such a point, and drop flushes too. Nothing syncs on a timer: a
//!   lone pending record waits for the next append, `flush` or drop. A failed
//!   background `fdatasync` poisons the writer and is reported by the next
//!   `append` or `flush`.
//! - [`Durability::None`]: the store never syncs on its own (not on roll, not
//!   on drop); only an explicit [`FileStore::flush`] does. Crash-of-process
//!   safe, not power-loss safe.
//!
//! An `append` that returns `Err` acknowledges nothing: the record may or may
//! not be found after reopening, and a writer whose failed write could not be
//! rolled back refuses further appends ([`StoreError::Poisoned`]).
//!
//! # Recovery on open
//!
//! Every segment is read and every record's checksum verified; the index
//! (session -> [`lam_core::IdBook`], visible id -> segment, offset, length,
//! metadata) is rebuilt in record order through the store's
//! [`lam_core::StoreIds`], so visible ids, including collision extensions,
//! come out as they were first given. The segment headers' format version
//! says which rule gave them (`FORMAT.md`): 2, one id space for the
//! observations of every session (a store this build creates); 1, one per
//! session (a store made before, which keeps that rule). Damage never stops a store
//! from opening (the rules: `FORMAT.md`, "Reading and recovery"):
//!
//! - an incomplete final record of the last segment (or a zero-filled tail,
//!   or a never-written segment header) is a *torn tail*: a writer copies it
//!   to `DIR/quarantine/` and then cuts it; a reader ignores it;
//! - any other damaged record or region is skipped and kept in place; a
//!   writer copies it to the quarantine too, and appends after it; every
//!   intact record before and after it stays readable;
//! - a damaged record whose header still parses keeps its visible id in its
//!   session, and recall of it is [`StoreError::Damaged`], never "not found";
//! - everything found is in [`FileStore::recovery`] ([`Recovery`], which
//!   prints one line per finding), and new quarantine copies get a line in
//!   `DIR/REPAIR.log`.
//!
//! Recall (`get`) verifies the record's checksum and its content address
//! (SHA-1 over action, 0x1F, observation) before returning bytes.

use crate::error::{Result, StoreError, io};
use crate::format::{self, Bad, HEADER_LEN, RecordRef};
use crate::index::SessionIndex;
use crate::quarantine::{Keeper, sync_dir};
use crate::recovery::{Damage, DamageKind, DamagedRecord, Recovery};
use crate::scan::{Event, Header, scan};
use crate::secure;
use lam_core::{Error, IdScope, ObsId, ObsMeta, ObsStore, Record, SessionId, StoreIds};
use std::collections::HashMap;
use std::fs::{self, File, TryLockError};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// When appended records are forced to stable storage. See the module docs
/// for what an acknowledged append guarantees under each policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fdatasync` after every append, before it returns.
    EveryAppend,
    /// Group commit: a background `fdatasync` starts once `max_records`
    /// records are pending, or at an append that finds the oldest pending
    /// record older than `max_delay`; `flush()` and drop wait for it.
    Group {
        /// Most records written but not yet synced.
        max_records: u32,
        /// Oldest age a pending record may reach before the next append syncs.
        max_delay: Duration,
    },
    /// Never sync, except on an explicit `flush()`.
    None,
}

impl Default for Durability {
    fn default() -> Self {
        Durability::Group { max_records: 256, max_delay: Duration::from_millis(10) }
    }
}

/// How a [`FileStore`] writer behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Sync policy (default: group commit, 256 records or 10 ms).
    pub durability: Durability,
    /// A segment is rolled when the next record would make it larger than
    /// this (default 64 MiB). A single larger record gets a segment of its own.
    pub segment_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { durability: Durability::default(), segment_bytes: 64 << 20 }
    }
}

#[derive(Debug, Clone, Copy)]
struct Loc {
    seg: u32,
    off: u64,
    len: u64,
    obs_off: u32,
}

#[derive(Debug)]
struct Segment {
    number: u32,
    path: PathBuf,
    file: File,
    /// Where the scanned bytes end, less any torn tail: the append position
    /// of the last segment, and where a reader's next scan starts.
    len: u64,
    /// The header's state, as the last scan saw it.
    header: Header,
    /// A writer never appends here (its header is damaged): it rolls first.
    sealed: bool,
    /// Offset of a torn tail found by the last scan.
    torn: Option<u64>,
}

#[derive(Debug)]
struct Writer {
    _lock: File,
    pending: u32,
    oldest: Option<Instant>,
    buf: Vec<u8>,
    poisoned: bool,
    /// The group-commit sync in flight, and the file it syncs.
    inflight: Option<(std::thread::JoinHandle<std::io::Result<()>>, PathBuf)>,
}

/// The durable [`ObsStore`]: append-only, checksummed segment files in one
/// directory, one writer (file lock) and any number of read-only handles.
/// Recall (`get`) is one positioned read from an open file handle plus a
/// checksum and content-address check; metadata and ids are answered from
/// memory.
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    opts: Options,
    segs: Vec<Segment>,
    sessions: HashMap<String, SessionIndex<Loc>>,
    writer: Option<Writer>,
    recovery: Recovery,
    /// Recompute every record's content address while scanning (`check`).
    verify_ids: bool,
    /// The store's format version: the header of every segment it writes,
    /// and the rule of its visible ids, given out by `ids`.
    version: u32,
    ids: StoreIds,
}

/// Where a scan's events go: the index, and the damage list.
struct Sink<'a> {
    sessions: &'a mut HashMap<String, SessionIndex<Loc>>,
    ids: &'a mut StoreIds,
    damage: &'a mut Vec<Damage>,
    path: &'a Path,
    seg: u32,
    verify_ids: bool,
    records: u64,
}

impl Sink<'_> {
    fn event(&mut self, e: Event<'_>) {
        match e {
            Event::Record(off, rec) => match self.check(&rec) {
                Ok(session) => {
                    let loc = Loc { seg: self.seg, off, len: rec.framed_len() as u64, obs_off: rec.obs_offset() as u32 };
                    let s = index_of(self.sessions, session);
                    // A repeated id cannot come from this writer; the first answers for it.
                    s.add(self.ids, rec.id, rec.action, rec.observation, rec.returncode, rec.step, rec.tokens, loc);
                    self.records += 1;
                }
                Err((kind, reason)) => {
                    let record = DamagedRecord {
                        session: std::str::from_utf8(rec.session).ok().map(str::to_string),
                        id: rec.id,
                        shown: None,
                        content_matches_id: kind != DamageKind::IdMismatch && ObsId::of(rec.action, rec.observation) == rec.id,
                        verified: false,
                    };
                    let d = Damage {
                        kind,
                        path: self.path.to_path_buf(),
                        offset: off,
                        len: rec.framed_len() as u64,
                        reason,
                        record: Some(record),
                        quarantine: None,
                    };
                    self.damage_event(d);
                }
            },
            Event::Damage(d) => self.damage_event(d),
        }
    }

    /// A record that passed its checksum: its session name, or why it is damaged anyway.
    fn check<'r>(&self, rec: &RecordRef<'r>) -> std::result::Result<&'r str, (DamageKind, String)> {
        let session = std::str::from_utf8(rec.session).map_err(|_| (DamageKind::Record, "session name is not UTF-8".to_string()))?;
        if std::str::from_utf8(rec.action).is_err() {
            return Err((DamageKind::Record, "action is not UTF-8".into()));
        }
        if self.verify_ids {
            let got = ObsId::of(rec.action, rec.observation);
            if got != rec.id {
                return Err((DamageKind::IdMismatch, format!("content hashes to {}, the record says {}", got.hex(), rec.id.hex())));
            }
        }
        Ok(session)
    }

    fn damage_event(&mut self, mut d: Damage) {
        // A torn tail is cut (or, for a reader, not yet complete): its id is not registered.
        if !d.is_torn_tail()
            && let Some(r) = d.record.as_mut()
            && let Some(session) = r.session.as_deref()
        {
            let handle = self.damage.len();
            r.shown = Some(index_of(self.sessions, session).add_damaged(self.ids, r.id, handle));
        }
        self.damage.push(d);
    }
}

/// The first bytes of `seg`, when it is long enough to hold a header.
fn read_header(seg: &Segment) -> Result<Option<[u8; HEADER_LEN]>> {
    let flen = seg.file.metadata().map_err(io("stat", &seg.path, None))?.len();
    if flen < HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut h = [0u8; HEADER_LEN];
    seg.file.read_exact_at(&mut h, 0).map_err(io("read", &seg.path, Some(0)))?;
    Ok(Some(h))
}

/// The index of `session`, made empty if new.
fn index_of<'m>(sessions: &'m mut HashMap<String, SessionIndex<Loc>>, session: &str) -> &'m mut SessionIndex<Loc> {
    if !sessions.contains_key(session) {
        sessions.insert(session.to_string(), SessionIndex::new(session));
    }
    sessions.get_mut(session).unwrap()
}

impl FileStore {
    /// Open (creating if needed) the store in `dir` as its one writer, with
    /// default [`Options`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, Options::default())
    }

    /// Open (creating if needed) the store in `dir` as its one writer.
    ///
    /// Takes the writer lock (`DIR/LOCK`; a second writer gets
    /// [`StoreError::Locked`]) and rebuilds the index. Damage is copied to
    /// `DIR/quarantine/` (new copies logged in `DIR/REPAIR.log`); then a torn
    /// tail of the last segment is cut, and a never-written header
    /// rewritten. Damage elsewhere stays in place and is skipped. All of it is
    /// reported in [`FileStore::recovery`].
    pub fn open_with(dir: impl AsRef<Path>, opts: Options) -> Result<Self> {
        Self::open_with_ids(dir, opts, IdScope::Store)
    }

    /// [`FileStore::open_with`], creating a new store with visible ids of
    /// `scope` (`IdScope::Session`: format version 1, as stores made before
    /// issue 68; `salvage` keeps its source's). An existing store keeps the
    /// rule its segment headers say.
    pub fn open_with_ids(dir: impl AsRef<Path>, opts: Options, scope: IdScope) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        secure::create_dir(&dir, true)?;
        let lock_path = dir.join("LOCK");
        let lock = secure::open(secure::options().read(true).write(true).create(true).truncate(false), "open", &lock_path)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::Locked { path: dir, lock: lock_path }),
            Err(TryLockError::Error(e)) => return Err(io("lock", &lock_path, None)(e)),
        }
        let writer = Writer { _lock: lock, pending: 0, oldest: None, buf: Vec::new(), poisoned: false, inflight: None };
        let version = if scope == IdScope::Store { format::VERSION } else { format::VERSION_SESSION_IDS };
        let mut s = Self::load(dir, opts, true, false, version)?;
        s.writer = Some(writer);
        s.quarantine_damage()?;
        let Some(last) = s.segs.last_mut() else { return s.create_segment(1).map(|()| s) };
        let (path, file) = (&last.path, &last.file);
        match (last.header, last.torn) {
            (Header::Torn, _) => {
                // A segment whose header never fully reached the file: rewrite it.
                file.set_len(0).map_err(io("truncate", path, Some(0)))?;
                file.write_all_at(&format::header_of(s.version, last.number), 0).map_err(io("write header", path, Some(0)))?;
                file.sync_all().map_err(io("fsync", path, None))?;
                last.len = HEADER_LEN as u64;
            }
            (_, Some(at)) => {
                file.set_len(at).map_err(io("truncate torn tail of", path, Some(at)))?;
                file.sync_all().map_err(io("fsync", path, None))?;
            }
            _ => {}
        }
        last.torn = None;
        last.sealed = last.header == Header::Damaged;
        Ok(s)
    }

    /// Copy every damaged place found by `load` into the quarantine (once:
    /// an identical copy already there is reused) and note where.
    fn quarantine_damage(&mut self) -> Result<()> {
        let mut keeper = Keeper::new(&self.dir, "open (writer)");
        for k in 0..self.recovery.damage.len() {
            let d = &self.recovery.damage[k];
            let bytes = self.damaged_bytes(d)?;
            let what = match d.kind {
                DamageKind::TornTail => "cut from the segment after this copy was made; the copy is all that remains",
                DamageKind::MissingSegment => "nothing to copy: the file is missing",
                _ => "kept in place in the segment and skipped; this is a copy",
            };
            let q = keeper.keep(d, &bytes, what)?;
            self.recovery.damage[k].quarantine = Some(q);
        }
        if keeper.logged {
            self.recovery.repair_log = Some(keeper.log_path());
        }
        Ok(())
    }

    /// The bytes a damage entry of this store's recovery report covers.
    pub(crate) fn damaged_bytes(&self, d: &Damage) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; d.len as usize];
        if let Some(seg) = self.segs.iter().find(|s| s.path == d.path)
            && d.kind != DamageKind::MissingSegment
        {
            seg.file.read_exact_at(&mut bytes, d.offset).map_err(io("read", &seg.path, Some(d.offset)))?;
        }
        Ok(bytes)
    }

    /// Open the store in `dir` for reading only: no lock is taken, so any
    /// number of readers may open it, also while a writer appends. Nothing is
    /// modified: damage is reported in [`FileStore::recovery`] but not
    /// copied, and a torn tail is ignored. The index is a snapshot as of
    /// open; [`FileStore::refresh`] picks up later appends.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_reader(dir.as_ref(), false)
    }

    /// A read-only handle; `verify_ids`: recompute every record's content
    /// address while scanning (a mismatch is damage).
    pub(crate) fn open_reader(dir: &Path, verify_ids: bool) -> Result<Self> {
        fs::metadata(dir).map_err(io("open", dir, None))?;
        Self::load(dir.to_path_buf(), Options::default(), false, verify_ids, format::VERSION)
    }

    /// Read the store in `dir`; `version`: a new store's format version.
    fn load(dir: PathBuf, opts: Options, writable: bool, verify_ids: bool, version: u32) -> Result<Self> {
        let mut numbers = Vec::new();
        for e in fs::read_dir(&dir).map_err(io("read directory", &dir, None))? {
            let e = e.map_err(io("read directory", &dir, None))?;
            let name = e.file_name();
            // Only canonical names count, so one number never has two files.
            if let Some(n) = name.to_str().and_then(format::parse_segment_file_name).filter(|&n| name.to_str() == Some(&format::segment_file_name(n))) {
                numbers.push(n);
            }
        }
        numbers.sort_unstable();
        let ids = StoreIds::new(format::id_scope(version));
        let mut s = FileStore { dir, opts, segs: Vec::new(), sessions: HashMap::new(), writer: None, recovery: Recovery::default(), verify_ids, version, ids };
        for &n in &numbers {
            let path = s.dir.join(format::segment_file_name(n));
            let file = secure::open(secure::options().read(true).write(writable), "open", &path)?;
            s.segs.push(Segment { number: n, path, file, len: 0, header: Header::NotRead, sealed: false, torn: None });
        }
        s.settle_version()?;
        let mut expect = 1u32;
        for (i, &n) in numbers.iter().enumerate() {
            if n > expect {
                s.missing(expect, n - 1);
            }
            expect = n.saturating_add(1);
            s.scan_from(i, i + 1 == numbers.len(), 0)?;
        }
        s.recovery.segments = numbers.len() as u32;
        Ok(s)
    }

    /// Before anything is indexed, take the format version the segment
    /// headers give (a new store keeps the one it was made with): the
    /// first sound header's; else the version field of the first damaged
    /// one, when this build reads that version; else, when every header is
    /// damaged, version 1 (what every store was before version 2).
    fn settle_version(&mut self) -> Result<()> {
        if !self.sessions.is_empty() {
            return Ok(());
        }
        let (mut field, mut damaged) = (None, false);
        let n = self.segs.len();
        for (i, seg) in self.segs.iter().enumerate() {
            let h = read_header(seg)?;
            // The last segment's header may not be written yet.
            if i + 1 == n && h.is_none_or(|h| h == [0u8; HEADER_LEN]) {
                continue;
            }
            let Some(h) = h else {
                damaged = true;
                continue;
            };
            if let Ok(v) = format::check_header(&h, seg.number) {
                self.set_version(v);
                return Ok(());
            }
            let v = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
            field = field.or(Some(v).filter(|v| (format::VERSION_SESSION_IDS..=format::VERSION).contains(v)));
            damaged = true;
        }
        match (field, damaged) {
            (Some(v), _) => self.set_version(v),
            (None, true) => self.set_version(format::VERSION_SESSION_IDS),
            (None, false) => {}
        }
        Ok(())
    }

    fn set_version(&mut self, v: u32) {
        self.version = v;
        self.ids = StoreIds::new(format::id_scope(v));
    }

    /// How this store's visible ids are given (its format version's rule).
    pub fn id_scope(&self) -> IdScope {
        self.ids.scope()
    }

    /// Report segments `from..=to` as missing (one entry per gap).
    fn missing(&mut self, from: u32, to: u32) {
        let reason = if from == to { format!("segment {from} is missing") } else { format!("segments {from} to {to} are missing") };
        let path = self.dir.join(format::segment_file_name(from));
        self.recovery.damage.push(Damage { kind: DamageKind::MissingSegment, path, offset: 0, len: 0, reason, record: None, quarantine: None });
    }

    /// Scan segment `si` from file offset `from` (its current scanned
    /// length) to its end, indexing every record and reporting damage.
    fn scan_from(&mut self, si: usize, last: bool, from: u64) -> Result<u64> {
        let seg = &self.segs[si];
        let flen = seg.file.metadata().map_err(io("stat", &seg.path, None))?.len();
        let mut data = vec![0u8; flen.saturating_sub(from) as usize];
        seg.file.read_exact_at(&mut data, from).map_err(io("read", &seg.path, Some(from)))?;
        let path = seg.path.clone();
        let mut sink = Sink {
            sessions: &mut self.sessions,
            ids: &mut self.ids,
            damage: &mut self.recovery.damage,
            path: &path,
            seg: si as u32,
            verify_ids: self.verify_ids,
            records: 0,
        };
        let out = scan(&path, seg.number, &data, from, last, |e| sink.event(e))?;
        let added = sink.records;
        let seg = &mut self.segs[si];
        seg.len = out.end;
        seg.torn = out.torn;
        if out.header != Header::NotRead {
            seg.header = out.header;
        }
        self.recovery.records += added;
        match out.torn {
            Some(at) => {
                self.recovery.torn_bytes = flen - at;
                self.recovery.torn_at = Some((path, at));
            }
            None => {
                self.recovery.torn_bytes = 0;
                self.recovery.torn_at = None;
            }
        }
        Ok(added)
    }

    /// For a read-only handle: index records appended (and segments created)
    /// by the writer since open or the last refresh, and report damage found
    /// in them. Returns how many records were added. A torn tail (a write in
    /// progress) is left for later.
    pub fn refresh(&mut self) -> Result<u64> {
        if self.writer.is_some() {
            return Ok(0);
        }
        let mut added = 0;
        if self.segs.is_empty() {
            // Not even segment 1 existed at open.
            let path = self.dir.join(format::segment_file_name(1));
            match secure::open_read(&path) {
                Ok(file) => self.segs.push(Segment { number: 1, path, file, len: 0, header: Header::NotRead, sealed: false, torn: None }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(io("open", &path, None)(e)),
            }
            self.recovery.segments = 1;
        }
        // A store still empty at open: its first header may be there now.
        self.settle_version()?;
        loop {
            // Look for the next segment *before* reading this one: the writer
            // finishes a segment before it creates the next, so if the next
            // exists, this one is complete; if not, whatever is half-written
            // is left as a torn tail for the next refresh.
            let n = self.segs.last().unwrap().number.saturating_add(1);
            let path = self.dir.join(format::segment_file_name(n));
            let next = match secure::open_read(&path) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io("open", &path, None)(e)),
            };
            // The torn tail of the last scan is scanned again: it may be whole now.
            if self.recovery.damage.last().is_some_and(|d| d.is_torn_tail() && d.path == self.segs.last().unwrap().path) {
                self.recovery.damage.pop();
            }
            let from = self.segs.last().unwrap().len;
            added += self.scan_from(self.segs.len() - 1, next.is_none(), from)?;
            let Some(file) = next else { break };
            self.segs.push(Segment { number: n, path, file, len: 0, header: Header::NotRead, sealed: false, torn: None });
            self.recovery.segments += 1;
        }
        Ok(added)
    }

    fn create_segment(&mut self, n: u32) -> Result<()> {
        let path = self.dir.join(format::segment_file_name(n));
        let file = secure::open(secure::options().read(true).write(true).create_new(true), "create", &path)?;
        file.write_all_at(&format::header_of(self.version, n), 0).map_err(io("write header", &path, Some(0)))?;
        if self.opts.durability != Durability::None {
            file.sync_all().map_err(io("fsync", &path, None))?;
            sync_dir(&self.dir)?;
        }
        self.segs.push(Segment { number: n, path, file, len: HEADER_LEN as u64, header: Header::Good, sealed: false, torn: None });
        self.recovery.segments = self.segs.len() as u32;
        Ok(())
    }

    /// What opening (and any [`FileStore::refresh`] since) found: segments,
    /// records, the torn tail, damage, quarantine copies.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> Options {
        self.opts
    }

    /// True for a handle from [`FileStore::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.writer.is_none()
    }

    /// Number of distinct observations archived across all sessions.
    pub fn len(&self) -> usize {
        self.sessions.values().map(SessionIndex::len).sum()
    }

    /// True when nothing is archived.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sessions that hold at least one intact observation, sorted.
    pub fn sessions(&self) -> Vec<SessionId> {
        let mut v: Vec<SessionId> = self.sessions.iter().filter(|(_, s)| s.len() > 0).map(|(k, _)| SessionId(k.clone())).collect();
        v.sort();
        v
    }

    /// Segment files, in order.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segs.iter().map(|s| s.path.clone()).collect()
    }

    /// Sync every pending record to stable storage (under every
    /// [`Durability`], `None` included). Returning `Ok` is a durability point.
    pub fn flush(&mut self) -> Result<()> {
        let Some(w) = self.writer.as_ref() else { return Ok(()) };
        if w.poisoned {
            return Err(StoreError::Poisoned { path: self.dir.clone() });
        }
        self.join_inflight()?;
        if self.writer.as_ref().unwrap().pending > 0 { self.sync() } else { Ok(()) }
    }

    /// Wait for the background sync, if one is in flight.
    fn join_inflight(&mut self) -> Result<()> {
        let w = self.writer.as_mut().unwrap();
        let Some((h, path)) = w.inflight.take() else { return Ok(()) };
        let r = h.join().unwrap_or_else(|_| Err(std::io::Error::other("sync thread panicked")));
        r.map_err(|e| {
            w.poisoned = true;
            io("fsync", path, None)(e)
        })
    }

    /// Start syncing everything written so far on a helper thread, unless a
    /// sync is still in flight (the next append will try again).
    fn start_sync(&mut self) -> Result<()> {
        if let Some((h, _)) = &self.writer.as_ref().unwrap().inflight
            && !h.is_finished()
        {
            return Ok(());
        }
        self.join_inflight()?;
        let seg = self.segs.last().unwrap();
        let f = seg.file.try_clone().map_err(io("duplicate handle of", &seg.path, None))?;
        let h = std::thread::Builder::new().name("arc-store-sync".into()).spawn(move || f.sync_data()).map_err(io("start sync thread for", &seg.path, None))?;
        let w = self.writer.as_mut().unwrap();
        w.inflight = Some((h, seg.path.clone()));
        w.pending = 0;
        w.oldest = None;
        Ok(())
    }

    /// Sync the current segment now, on this thread.
    fn sync(&mut self) -> Result<()> {
        let seg = self.segs.last().unwrap();
        let w = self.writer.as_mut().unwrap();
        if let Err(e) = seg.file.sync_data() {
            // After a failed fsync the kernel may have dropped the dirty pages: trust nothing pending.
            w.poisoned = true;
            return Err(io("fsync", &seg.path, None)(e));
        }
        w.pending = 0;
        w.oldest = None;
        Ok(())
    }

    /// Archive `record` in `session`: the inherent form of
    /// [`ObsStore::append`] with this crate's error type.
    pub fn append_record(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta> {
        let Some(w) = self.writer.as_mut() else {
            return Err(StoreError::ReadOnly { path: self.dir.clone() });
        };
        if w.poisoned {
            return Err(StoreError::Poisoned { path: self.dir.clone() });
        }
        let id = ObsId::of(record.action.as_bytes(), &record.observation);
        if let Some(m) = self.sessions.get(&session.0).and_then(|s| s.meta_of(&id)) {
            return Ok(m.clone());
        }
        let rec = RecordRef {
            id,
            session: session.0.as_bytes(),
            action: record.action.as_bytes(),
            step: record.index,
            tokens,
            returncode: record.returncode,
            observation: &record.observation,
        };
        let mut buf = std::mem::take(&mut w.buf);
        buf.clear();
        rec.encode(&mut buf)?;
        let r = self.write_record(&buf);
        let w = self.writer.as_mut().unwrap();
        w.buf = buf;
        if w.buf.capacity() > 1 << 20 {
            w.buf = Vec::new();
        }
        let loc = r?;
        let meta = index_of(&mut self.sessions, &session.0).add(
            &mut self.ids,
            id,
            rec.action,
            rec.observation,
            rec.returncode,
            rec.step,
            rec.tokens,
            Loc { obs_off: rec.obs_offset() as u32, ..loc },
        );
        Ok(meta.clone())
    }

    fn write_record(&mut self, buf: &[u8]) -> Result<Loc> {
        let len = buf.len() as u64;
        let cur = self.segs.last().unwrap();
        let number = cur.number;
        if cur.sealed || (cur.len > HEADER_LEN as u64 && cur.len + len > self.opts.segment_bytes) {
            if self.opts.durability != Durability::None {
                // Earlier segments are complete and synced, so damage can only ever be in the last one.
                self.flush()?;
            }
            let Some(n) = number.checked_add(1) else {
                return Err(StoreError::TooLarge { what: "segment number", len: u64::from(number) + 1, limit: u64::from(u32::MAX) });
            };
            if let Err(e) = self.create_segment(n) {
                // A half-made segment file would block every later roll; reopening repairs it.
                self.writer.as_mut().unwrap().poisoned = true;
                return Err(e);
            }
        }
        let si = self.segs.len() - 1;
        let seg = &mut self.segs[si];
        let off = seg.len;
        if let Err(e) = seg.file.write_all_at(buf, off) {
            // Undo a partial write so the next record starts at `off`.
            if seg.file.set_len(off).is_err() {
                self.writer.as_mut().unwrap().poisoned = true;
            }
            return Err(io("write", &seg.path, Some(off))(e));
        }
        seg.len = off + len;
        let w = self.writer.as_mut().unwrap();
        w.pending += 1;
        let oldest = *w.oldest.get_or_insert_with(Instant::now);
        match self.opts.durability {
            Durability::EveryAppend => self.sync()?,
            Durability::Group { max_records, max_delay } if w.pending >= max_records || oldest.elapsed() >= max_delay => self.start_sync()?,
            _ => {}
        }
        Ok(Loc { seg: si as u32, off, len, obs_off: 0 })
    }

    /// Exact bytes of the observation shown as `shown` in `session`: the
    /// inherent form of [`ObsStore::get`]. The record's checksum and its
    /// content address (SHA-1 over action, 0x1F, observation, against the
    /// stored id) are verified first; a record that fails either, or that was
    /// found damaged on open, is [`StoreError::Damaged`].
    pub fn get_bytes(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>> {
        let Some(index) = self.sessions.get(&session.0) else { return Ok(None) };
        let Some((meta, loc)) = index.lookup(shown) else {
            return match index.damaged(shown) {
                Some(k) => Err(self.damaged(session, shown, k)),
                None => Ok(None),
            };
        };
        let seg = &self.segs[loc.seg as usize];
        let mut buf = vec![0u8; loc.len as usize];
        seg.file.read_exact_at(&mut buf, loc.off).map_err(io("read", &seg.path, Some(loc.off)))?;
        let damaged =
            |reason: String| StoreError::Damaged { session: session.0.clone(), shown: shown.to_string(), path: seg.path.clone(), offset: loc.off, reason };
        match format::decode(&buf) {
            Ok((r, n)) if n == buf.len() && r.id == meta.id => {
                let got = ObsId::of(r.action, r.observation);
                if got != r.id {
                    return Err(damaged(format!("content does not match its id: it hashes to {}, the record says {}", got.hex(), r.id.hex())));
                }
            }
            Ok(_) | Err(Bad::Short) => return Err(damaged("record changed since it was indexed".into())),
            Err(Bad::Invalid(r)) => return Err(damaged(r)),
        }
        let start = loc.obs_off as usize;
        buf.copy_within(start.., 0);
        buf.truncate(meta.bytes as usize);
        Ok(Some(buf))
    }

    /// The error for recall of damaged record `k` of the recovery report.
    fn damaged(&self, session: &SessionId, shown: &str, k: usize) -> StoreError {
        let d = &self.recovery.damage[k];
        StoreError::Damaged {
            session: session.0.clone(),
            shown: shown.to_string(),
            path: d.path.clone(),
            offset: d.offset,
            reason: match &d.quarantine {
                Some(q) => format!("{}: {}; a copy of the damaged bytes is in {}", d.kind.describe(), d.reason, q.display()),
                None => format!("{}: {}", d.kind.describe(), d.reason),
            },
        }
    }

    /// Metadata of the observation shown as `shown` in `session`: the
    /// inherent form of [`ObsStore::meta`]; a damaged record is
    /// [`StoreError::Damaged`].
    pub fn meta_of(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>> {
        let Some(index) = self.sessions.get(&session.0) else { return Ok(None) };
        match index.lookup(shown) {
            Some((m, _)) => Ok(Some(m.clone())),
            None => match index.damaged(shown) {
                Some(k) => Err(self.damaged(session, shown, k)),
                None => Ok(None),
            },
        }
    }

    /// Every intact record's session, metadata and place, in file order
    /// (for `salvage`).
    pub(crate) fn records_in_file_order(&self) -> Vec<(&str, &ObsMeta, (u32, u64))> {
        let mut v: Vec<_> =
            self.sessions.iter().flat_map(|(s, index)| index.entries().iter().map(move |(m, loc)| (s.as_str(), m, (loc.seg, loc.off)))).collect();
        v.sort_by_key(|&(_, _, at)| at);
        v
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        if self.opts.durability != Durability::None && self.writer.as_ref().is_some_and(|w| !w.poisoned) {
            let _ = self.flush();
        }
    }
}

impl ObsStore for FileStore {
    fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, Error> {
        Ok(self.append_record(session, record, tokens)?)
    }

    fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.get_bytes(session, shown)?)
    }

    fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, Error> {
        Ok(self.meta_of(session, shown)?)
    }

    fn ids(&self, session: &SessionId) -> Result<Vec<String>, Error> {
        Ok(self.sessions.get(&session.0).map(SessionIndex::ids).unwrap_or_default())
    }

    fn sessions(&self) -> Result<Vec<SessionId>, Error> {
        Ok(self.sessions())
    }

    fn flush(&mut self) -> Result<(), Error> {
        Ok(FileStore::flush(self)?)
    }
}
