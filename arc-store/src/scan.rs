//! Reading one segment's bytes: every valid record, and every damaged place
//! classified by the recovery rules of `FORMAT.md` ("Reading and recovery").
//! Pure over bytes: no file is touched here.
//!
//! Finding the next record boundary after damage: version 1 has no record
//! magic, so a boundary is trusted in this order:
//!
//! 1. the damaged record's own length field, when it ends exactly at the end
//!    of the file or where a structurally sound frame starts (length in
//!    range, kind byte, field lengths that add up), or when no valid record
//!    starts inside it: a damaged payload leaves the length intact, and a
//!    record nested inside an observation (an agent that printed a segment
//!    file) is then never mistaken for a boundary;
//! 2. otherwise the first offset after the damage where a complete, valid
//!    record starts (structure and CRC-32), found by trying every byte.
//!
//! When the bytes up to the boundary found by (2) verify as one record whose
//! length field alone is wrong, the record's identity is proven and reported.

use crate::error::StoreError;
use crate::format::{self, Bad, FRAME_LEN, HEADER_LEN, MIN_PAYLOAD, RecordRef};
use crate::recovery::{Damage, DamageKind, DamagedRecord};
use lam_core::ObsId;
use std::path::{Path, PathBuf};

/// What the scan reports, in file order.
#[derive(Debug)]
pub(crate) enum Event<'a> {
    /// A valid record at this file offset.
    Record(u64, RecordRef<'a>),
    /// A damaged place.
    Damage(Damage),
}

/// The state of the segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Header {
    /// Not part of the scanned bytes (an incremental scan).
    NotRead,
    /// Valid.
    Good,
    /// Never completely written (a prefix of the expected header, or all
    /// zeros) in the last segment: a writer rewrites it.
    Torn,
    /// Damaged: reported, records after it still read; a writer starts the
    /// next segment rather than append here.
    Damaged,
}

/// Outcome of scanning one segment's bytes.
#[derive(Debug)]
pub(crate) struct ScanOut {
    /// File offset where the scanned bytes end, less any torn tail: where a
    /// writer appends next, and where a reader's next scan starts.
    pub end: u64,
    /// File offset of a torn tail, if there is one (it runs to the end of the data).
    pub torn: Option<u64>,
    /// The header's state.
    pub header: Header,
}

struct Ctx<'p> {
    path: &'p Path,
    base: u64,
}

impl Ctx<'_> {
    fn damage(&self, kind: DamageKind, from: usize, to: usize, reason: String, record: Option<DamagedRecord>) -> Damage {
        Damage { kind, path: self.path.to_path_buf(), offset: self.base + from as u64, len: (to - from) as u64, reason, record, quarantine: None }
    }
}

/// What the payload bytes of a damaged record still say about it.
fn claim(payload: &[u8], verified: bool) -> Option<DamagedRecord> {
    let c = format::peek(payload)?;
    Some(DamagedRecord {
        session: std::str::from_utf8(c.session).ok().map(str::to_string),
        id: c.id,
        shown: None,
        content_matches_id: c.content.is_some_and(|(a, o)| ObsId::of(a, o) == c.id),
        verified,
    })
}

/// Scan `data`, the bytes of segment `n` from file offset `base` (`base ==
/// 0`: the header is included), reporting records and damage to `each` in
/// file order. `last`: whether this is the last segment, the only place a torn
/// tail can be. The only error is a segment of a newer format version.
pub(crate) fn scan(path: &Path, n: u32, data: &[u8], base: u64, last: bool, mut each: impl FnMut(Event<'_>)) -> Result<ScanOut, StoreError> {
    let cx = Ctx { path, base };
    let mut off = 0usize;
    let mut header = Header::NotRead;
    if base == 0 {
        match check_header(data, n, last) {
            HeaderCheck::Good => header = Header::Good,
            HeaderCheck::Torn(reason) => {
                if !data.is_empty() {
                    each(Event::Damage(cx.damage(DamageKind::TornTail, 0, data.len(), reason, None)));
                }
                return Ok(ScanOut { end: 0, torn: Some(0), header: Header::Torn });
            }
            HeaderCheck::Newer(reason) => return Err(StoreError::Corrupt { path: path.to_path_buf(), offset: 0, reason }),
            HeaderCheck::Damaged(reason) => {
                let to = data.len().min(HEADER_LEN);
                each(Event::Damage(cx.damage(DamageKind::Header, 0, to, reason, None)));
                header = Header::Damaged;
            }
        }
        off = data.len().min(HEADER_LEN);
    }
    while off < data.len() {
        match format::decode(&data[off..]) {
            Ok((rec, len)) => {
                each(Event::Record(base + off as u64, rec));
                off += len;
            }
            Err(bad) => {
                let (end, damage) = classify(&cx, data, off, last, bad);
                let torn = damage.kind == DamageKind::TornTail;
                each(Event::Damage(damage));
                if torn {
                    return Ok(ScanOut { end: base + off as u64, torn: Some(base + off as u64), header });
                }
                off = end;
            }
        }
    }
    Ok(ScanOut { end: base + data.len() as u64, torn: None, header })
}

enum HeaderCheck {
    Good,
    Torn(String),
    Newer(String),
    Damaged(String),
}

fn check_header(data: &[u8], n: u32, last: bool) -> HeaderCheck {
    let zeros = data.iter().all(|&b| b == 0);
    if data.len() < HEADER_LEN {
        let expected = (format::VERSION_SESSION_IDS..=format::VERSION).any(|v| format::header_of(v, n).starts_with(data));
        if last && (expected || zeros) {
            return HeaderCheck::Torn(format!("segment header incomplete ({} of {HEADER_LEN} bytes)", data.len()));
        }
        return HeaderCheck::Damaged(format!("segment is {} bytes, shorter than its {HEADER_LEN}-byte header", data.len()));
    }
    if last && zeros {
        return HeaderCheck::Torn(format!("segment is {} zero bytes (created, never written)", data.len()));
    }
    match format::check_header(data, n) {
        Ok(_) => HeaderCheck::Good,
        Err(reason) => {
            let version = u32::from_le_bytes(data[8..12].try_into().unwrap());
            if data[..8] == format::MAGIC && version > format::VERSION {
                // A newer writer's segment must never be read as this
                // build's, unless a record of this build's layout right
                // after the header proves that the version field is what is
                // damaged.
                if !format::valid_at(data, HEADER_LEN) {
                    return HeaderCheck::Newer(reason);
                }
                return HeaderCheck::Damaged(format!("{reason}; a version {} record follows, so the field is damaged", format::VERSION));
            }
            HeaderCheck::Damaged(reason)
        }
    }
}

/// First offset at or after `from` where a complete, valid record starts.
fn find_valid_after(data: &[u8], from: usize) -> Option<usize> {
    let last = data.len().checked_sub(FRAME_LEN + MIN_PAYLOAD)?;
    (from..=last).find(|&p| format::valid_at(data, p))
}

/// Whether following valid records from `p` lands exactly on `target`
/// (`Some(true)`), steps over it (`Some(false)`), or stops before it (`None`).
fn chain_lands_on(data: &[u8], mut p: usize, target: usize) -> Option<bool> {
    while p < target {
        if !format::valid_at(data, p) {
            return None;
        }
        p += FRAME_LEN + format::frame_at(data, p)?;
    }
    Some(p == target)
}

/// The damaged place starting at `off`: where it ends (the next offset to
/// scan from) and what it is.
fn classify(cx: &Ctx<'_>, data: &[u8], off: usize, last: bool, bad: Bad) -> (usize, Damage) {
    let len = data.len();
    let rem = len - off;
    let why = match bad {
        Bad::Short => format!("record runs past the end of the file ({rem} bytes left)"),
        Bad::Invalid(r) => r,
    };
    if last && data[off..].iter().all(|&b| b == 0) {
        return (len, cx.damage(DamageKind::TornTail, off, len, format!("zero-filled tail ({rem} bytes)"), None));
    }
    if rem < FRAME_LEN {
        if last {
            return (len, cx.damage(DamageKind::TornTail, off, len, format!("incomplete record frame ({rem} bytes at the end of the file)"), None));
        }
        return (len, cx.damage(DamageKind::Region, off, len, format!("{why}; not the last segment"), None));
    }
    let plen = u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) as usize;
    let declared = off + FRAME_LEN + plen;
    // A valid record can start inside this one's frame, so `to` may come before the payload.
    let payload = |to: usize| data.get(off + FRAME_LEN..to).unwrap_or_default();
    let next = find_valid_after(data, off + 1);
    let end = next.unwrap_or(len);
    // Proof first: the bytes up to the next valid record verify as one
    // record with a corrected length field.
    if let Some(d) = fixed_length(cx, data, off, end) {
        return (end, d);
    }
    if plen >= MIN_PAYLOAD && declared <= len {
        // The length field fits: trust it unless a chain of valid records
        // inside the record steps over its end (then the length is what broke).
        let trusted = declared == len
            || format::frame_at(data, declared).is_some()
            || match next {
                None => true,
                Some(p) if p >= declared => true,
                Some(p) => chain_lands_on(data, p, declared) != Some(false),
            };
        if trusted {
            return (declared, cx.damage(DamageKind::Record, off, declared, why, claim(payload(declared), false)));
        }
    }
    let record = claim(payload(end), false);
    if last && next.is_none() && declared > len {
        let reason = format!("incomplete final record: its frame gives {plen} bytes of payload, {} are present", rem - FRAME_LEN);
        return (len, cx.damage(DamageKind::TornTail, off, len, reason, record));
    }
    let reason = match next {
        Some(p) => format!("{why}; the next valid record starts at byte offset {}", cx.base + p as u64),
        None => format!("{why}; no valid record follows"),
    };
    (end, cx.damage(DamageKind::Region, off, end, reason, record))
}

/// `[off, end)` as one record whose length field alone is damaged: the CRC
/// holds with the length the bytes actually have.
fn fixed_length(cx: &Ctx<'_>, data: &[u8], off: usize, end: usize) -> Option<Damage> {
    let plen = end.checked_sub(off + FRAME_LEN)?;
    if plen < MIN_PAYLOAD || plen as u64 > format::MAX_PAYLOAD {
        return None;
    }
    let fixed = (plen as u32).to_le_bytes();
    let stored = u32::from_le_bytes(data[off + 4..off + 8].try_into().unwrap());
    let payload = &data[off + FRAME_LEN..end];
    if format::crc(&fixed, payload) != stored || format::parse_payload(payload).is_err() {
        return None;
    }
    let said = u32::from_le_bytes(data[off..off + 4].try_into().unwrap());
    let reason = format!("length field damaged: it says {said}, the payload is {plen} bytes and verifies with that length");
    Some(cx.damage(DamageKind::Record, off, end, reason, claim(payload, true)))
}

/// What one segment file holds, as recovery reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentReport {
    /// (file offset, framed length) of every valid record, in order.
    pub records: Vec<(u64, u64)>,
    /// Every damaged place, in order (a torn tail last).
    pub damage: Vec<Damage>,
    /// Where a writer would append (the end of the file, less a torn tail).
    pub end: u64,
}

/// Read segment number `number` from its bytes as opening the store would:
/// every valid record, and every damaged place classified by the rules of
/// `FORMAT.md`. `last`: whether it is the store's last segment. Fails only on
/// a segment written by a newer format version. Damage entries name the
/// segment's canonical file name.
pub fn inspect_segment(data: &[u8], number: u32, last: bool) -> Result<SegmentReport, StoreError> {
    let path = PathBuf::from(format::segment_file_name(number));
    let mut records = Vec::new();
    let mut damage = Vec::new();
    let out = scan(&path, number, data, 0, last, |e| match e {
        Event::Record(off, r) => records.push((off, r.framed_len() as u64)),
        Event::Damage(d) => damage.push(d),
    })?;
    Ok(SegmentReport { records, damage, end: out.end })
}
