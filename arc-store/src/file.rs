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
//! metadata) is rebuilt in record order, so visible ids, including collision
//! extensions, come out as they were first given. The first bad record of
//! the *last* segment starts a torn tail when no valid record can be found
//! anywhere after it: a writer truncates it (reported in [`Recovery`]); a
//! reader ignores it. Any other damage (a bad record with a valid one after
//! it, a bad record in an earlier segment, a missing segment, a bad header)
//! is a [`StoreError::Corrupt`] naming the file and offset; nothing is
//! skipped silently.

use crate::error::{Result, StoreError, io};
use crate::format::{self, Bad, FRAME_LEN, HEADER_LEN, KIND_OBS, MIN_PAYLOAD, RecordRef};
use crate::index::SessionIndex;
use lam_core::{Error, ObsId, ObsMeta, ObsStore, Record, SessionId};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions, TryLockError};
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

/// What opening the store found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segment files read.
    pub segments: u32,
    /// Valid records indexed.
    pub records: u64,
    /// Bytes of torn tail found at the end of the last segment (a writer
    /// truncated them; a reader ignored them).
    pub torn_bytes: u64,
    /// Where the torn tail began (segment file, byte offset), if there was one.
    pub torn_at: Option<(PathBuf, u64)>,
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
    path: PathBuf,
    file: File,
    /// Bytes of valid data (header and whole records).
    len: u64,
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
/// checksum check; metadata and ids are answered from memory.
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    opts: Options,
    segs: Vec<Segment>,
    sessions: HashMap<String, SessionIndex<Loc>>,
    writer: Option<Writer>,
    recovery: Recovery,
}

fn seg_name(n: u32) -> String {
    format!("seg-{n:06}.log")
}

fn parse_seg_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("seg-")?.strip_suffix(".log")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io("fsync directory", dir, None))
}

/// First offset at or after `from` where a complete, valid record starts.
fn find_valid_after(data: &[u8], from: usize) -> Option<usize> {
    let last = data.len().checked_sub(FRAME_LEN + MIN_PAYLOAD)?;
    (from..=last).find(|&p| {
        let plen = u32::from_le_bytes(data[p..p + 4].try_into().unwrap()) as usize;
        plen >= MIN_PAYLOAD && plen <= data.len() - p - FRAME_LEN && data[p + FRAME_LEN] == KIND_OBS && format::decode(&data[p..]).is_ok()
    })
}

/// Outcome of scanning one segment's bytes.
struct Scan {
    /// End of the valid data (file offset).
    valid: u64,
    /// Bytes after `valid` that form a torn tail.
    torn: u64,
}

/// Scan `data` (the segment's bytes from file offset `base`; `base == 0`
/// means the header is included), calling `each(offset, record)` for every
/// valid record. `last`: whether this is the last segment (the only place a
/// torn tail may be).
fn scan(path: &Path, n: u32, data: &[u8], base: u64, last: bool, mut each: impl FnMut(u64, &RecordRef<'_>) -> Result<()>) -> Result<Scan> {
    let corrupt = |offset: u64, reason: String| StoreError::Corrupt { path: path.to_path_buf(), offset, reason };
    let mut off = 0usize;
    if base == 0 {
        if data.len() < HEADER_LEN {
            let expected = format::header(n);
            if last && (expected.starts_with(data) || data.iter().all(|&b| b == 0)) {
                return Ok(Scan { valid: 0, torn: data.len() as u64 });
            }
        }
        format::check_header(data, n).map_err(|r| corrupt(0, r))?;
        off = HEADER_LEN;
    }
    while off < data.len() {
        match format::decode(&data[off..]) {
            Ok((rec, len)) => {
                each(base + off as u64, &rec)?;
                off += len;
            }
            Err(bad) => {
                let reason = match bad {
                    Bad::Short => format!("record runs past the end of the file ({} bytes left)", data.len() - off),
                    Bad::Invalid(r) => r,
                };
                if !last {
                    return Err(corrupt(base + off as u64, format!("{reason} (not the last segment, so not a torn tail)")));
                }
                if let Some(p) = find_valid_after(data, off + 1) {
                    return Err(corrupt(
                        base + off as u64,
                        format!("{reason}; a valid record follows at offset {}, so this is not a torn tail", base + p as u64),
                    ));
                }
                return Ok(Scan { valid: base + off as u64, torn: (data.len() - off) as u64 });
            }
        }
    }
    Ok(Scan { valid: base + off as u64, torn: 0 })
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
    /// [`StoreError::Locked`]), rebuilds the index and truncates a torn tail
    /// of the last segment (see [`FileStore::recovery`]).
    pub fn open_with(dir: impl AsRef<Path>, opts: Options) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(io("create directory", &dir, None))?;
        let lock_path = dir.join("LOCK");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io("open", &lock_path, None))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::Locked { path: dir, lock: lock_path }),
            Err(TryLockError::Error(e)) => return Err(io("lock", &lock_path, None)(e)),
        }
        let writer = Writer { _lock: lock, pending: 0, oldest: None, buf: Vec::new(), poisoned: false, inflight: None };
        let mut s = Self::load(dir, opts, true)?;
        s.writer = Some(writer);
        if s.segs.is_empty() {
            s.create_segment(1)?;
        } else {
            let last = s.segs.last().unwrap();
            if last.len < HEADER_LEN as u64 {
                // A segment whose header never fully reached the file: rewrite it.
                let n = s.segs.len() as u32;
                let (path, file) = (last.path.clone(), &last.file);
                file.set_len(0).map_err(io("truncate", &path, Some(0)))?;
                file.write_all_at(&format::header(n), 0).map_err(io("write header", &path, Some(0)))?;
                file.sync_all().map_err(io("fsync", &path, None))?;
                s.segs.last_mut().unwrap().len = HEADER_LEN as u64;
            } else if s.recovery.torn_bytes > 0 {
                let (path, file, len) = (&last.path, &last.file, last.len);
                file.set_len(len).map_err(io("truncate torn tail of", path, Some(len)))?;
                file.sync_all().map_err(io("fsync", path, None))?;
            }
        }
        Ok(s)
    }

    /// Open the store in `dir` for reading only: no lock is taken, so any
    /// number of readers may open it, also while a writer appends. Nothing is
    /// modified; a torn tail is ignored. The index is a snapshot as of open;
    /// [`FileStore::refresh`] picks up later appends.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::metadata(&dir).map_err(io("open", &dir, None))?;
        Self::load(dir, Options::default(), false)
    }

    fn load(dir: PathBuf, opts: Options, writable: bool) -> Result<Self> {
        let mut numbers = Vec::new();
        for e in fs::read_dir(&dir).map_err(io("read directory", &dir, None))? {
            let e = e.map_err(io("read directory", &dir, None))?;
            if let Some(n) = e.file_name().to_str().and_then(parse_seg_name) {
                numbers.push(n);
            }
        }
        numbers.sort_unstable();
        for (i, &n) in numbers.iter().enumerate() {
            let want = i as u32 + 1;
            if n != want {
                return Err(StoreError::Corrupt {
                    path: dir.join(seg_name(want)),
                    offset: 0,
                    reason: format!("segment {want} is missing (segments present: {numbers:?})"),
                });
            }
        }
        let mut s = FileStore { dir, opts, segs: Vec::new(), sessions: HashMap::new(), writer: None, recovery: Recovery::default() };
        let count = numbers.len();
        for n in numbers {
            let path = s.dir.join(seg_name(n));
            let file = OpenOptions::new().read(true).write(writable).open(&path).map_err(io("open", &path, None))?;
            s.segs.push(Segment { path, file, len: 0 });
            s.scan_from(n as usize == count, 0)?;
        }
        s.recovery.segments = count as u32;
        Ok(s)
    }

    /// Scan the last-loaded segment from file offset `from` (its current
    /// valid length) to its end, indexing every record.
    fn scan_from(&mut self, last: bool, from: u64) -> Result<u64> {
        let si = self.segs.len() - 1;
        let seg = &self.segs[si];
        let flen = seg.file.metadata().map_err(io("stat", &seg.path, None))?.len();
        let mut data = vec![0u8; flen.saturating_sub(from) as usize];
        seg.file.read_exact_at(&mut data, from).map_err(io("read", &seg.path, Some(from)))?;
        let (path, n) = (seg.path.clone(), si as u32 + 1);
        let sessions = &mut self.sessions;
        let mut added = 0u64;
        let r = scan(&path, n, &data, from, last, |off, rec| {
            let session = std::str::from_utf8(rec.session).map_err(|_| StoreError::Corrupt {
                path: path.clone(),
                offset: off,
                reason: "session name is not UTF-8".into(),
            })?;
            let loc = Loc { seg: si as u32, off, len: rec.framed_len() as u64, obs_off: rec.obs_offset() as u32 };
            if !sessions.contains_key(session) {
                sessions.insert(session.to_string(), SessionIndex::default());
            }
            let s = sessions.get_mut(session).unwrap();
            // A repeated id cannot come from this writer; keep the first anyway.
            s.add(rec.id, rec.action, rec.observation, rec.returncode, rec.step, rec.tokens, loc);
            added += 1;
            Ok(())
        })?;
        self.segs[si].len = r.valid;
        self.recovery.records += added;
        if r.torn > 0 {
            self.recovery.torn_bytes = r.torn;
            self.recovery.torn_at = Some((path, r.valid));
        } else {
            self.recovery.torn_bytes = 0;
            self.recovery.torn_at = None;
        }
        Ok(added)
    }

    /// For a read-only handle: index records appended (and segments created)
    /// by the writer since open or the last refresh. Returns how many records
    /// were added. A torn tail (a write in progress) is left for later.
    pub fn refresh(&mut self) -> Result<u64> {
        if self.writer.is_some() {
            return Ok(0);
        }
        let mut added = 0;
        if self.segs.is_empty() {
            // Not even segment 1 existed at open.
            match File::open(self.dir.join(seg_name(1))) {
                Ok(file) => self.segs.push(Segment { path: self.dir.join(seg_name(1)), file, len: 0 }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(io("open", self.dir.join(seg_name(1)), None)(e)),
            }
            self.recovery.segments = 1;
        }
        loop {
            // Look for the next segment *before* reading this one: the writer
            // finishes a segment before it creates the next, so if the next
            // exists, this one is complete; if not, whatever is half-written
            // is left as a torn tail for the next refresh.
            let n = self.segs.len() as u32 + 1;
            let path = self.dir.join(seg_name(n));
            let next = match File::open(&path) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io("open", &path, None)(e)),
            };
            let from = self.segs.last().unwrap().len;
            added += self.scan_from(next.is_none(), from)?;
            let Some(file) = next else { break };
            self.segs.push(Segment { path, file, len: 0 });
            self.recovery.segments += 1;
        }
        Ok(added)
    }

    fn create_segment(&mut self, n: u32) -> Result<()> {
        let path = self.dir.join(seg_name(n));
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(io("create", &path, None))?;
        file.write_all_at(&format::header(n), 0).map_err(io("write header", &path, Some(0)))?;
        if self.opts.durability != Durability::None {
            file.sync_all().map_err(io("fsync", &path, None))?;
            sync_dir(&self.dir)?;
        }
        self.segs.push(Segment { path, file, len: HEADER_LEN as u64 });
        self.recovery.segments = self.segs.len() as u32;
        Ok(())
    }

    /// What opening found: segments, records, and any torn tail.
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

    /// Sessions that hold at least one observation, sorted.
    pub fn sessions(&self) -> Vec<SessionId> {
        let mut v: Vec<SessionId> = self.sessions.keys().map(|s| SessionId(s.clone())).collect();
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
        let h = std::thread::Builder::new()
            .name("arc-store-sync".into())
            .spawn(move || f.sync_data())
            .map_err(io("start sync thread for", &seg.path, None))?;
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
        if !self.sessions.contains_key(&session.0) {
            self.sessions.insert(session.0.clone(), SessionIndex::default());
        }
        let meta = self.sessions.get_mut(&session.0).unwrap().add(
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
        if cur.len > HEADER_LEN as u64 && cur.len + len > self.opts.segment_bytes {
            if self.opts.durability != Durability::None {
                // Earlier segments are complete and synced, so damage can only ever be in the last one.
                self.flush()?;
            }
            let n = self.segs.len() as u32 + 1;
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
    /// inherent form of [`ObsStore::get`]. The record's checksum is verified.
    pub fn get_bytes(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>> {
        let Some((meta, loc)) = self.sessions.get(&session.0).and_then(|s| s.lookup(shown)) else {
            return Ok(None);
        };
        let seg = &self.segs[loc.seg as usize];
        let mut buf = vec![0u8; loc.len as usize];
        seg.file.read_exact_at(&mut buf, loc.off).map_err(io("read", &seg.path, Some(loc.off)))?;
        let corrupt = |reason: String| StoreError::Corrupt { path: seg.path.clone(), offset: loc.off, reason };
        match format::decode(&buf) {
            Ok((r, n)) if n == buf.len() && r.id == meta.id => {}
            Ok(_) => return Err(corrupt("record changed since it was indexed".into())),
            Err(Bad::Short) => return Err(corrupt("record changed since it was indexed".into())),
            Err(Bad::Invalid(r)) => return Err(corrupt(r)),
        }
        let start = loc.obs_off as usize;
        buf.copy_within(start.., 0);
        buf.truncate(meta.bytes as usize);
        Ok(Some(buf))
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
        Ok(self.sessions.get(&session.0).and_then(|s| s.lookup(shown)).map(|(m, _)| m.clone()))
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
