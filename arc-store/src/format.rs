//! The on-disk format of a segment file (versions 1 and 2, one record
//! layout). See `FORMAT.md` at the crate root for the prose description;
//! this module is its only encoder and decoder.
//!
//! ```text
//! segment  := header record*
//! header   := magic "ARCSEG\r\n" (8) | version u32 (1 or 2) | segment number u32      (16 bytes)
//! record   := len u32 | crc u32 | payload[len]
//!             crc = CRC-32 (IEEE, crc32fast) over len (4 LE bytes) followed by payload
//! payload  := kind u8 = 0xA1 | id [20] (SHA-1 over action, 0x1F, observation)
//!             | session_len u32 | session | action_len u32 | action
//!             | step u32 | tokens u32 | rc_present u8 (0|1) | rc i32
//!             | obs_len u64 | observation
//! ```
//! All integers are little-endian. The version says how visible ids are
//! derived (`lam_core::id`): 1, per session (stores made before issue 68);
//! 2, one id space for the observations of every session ([`id_scope`]).

use lam_core::{IdScope, ObsId};

/// Segment magic.
pub const MAGIC: [u8; 8] = *b"ARCSEG\r\n";
/// Format version a new store is written in (and the newest read).
pub const VERSION: u32 = 2;
/// The format version of stores made before issue 68, still read and
/// appended to as they are: visible ids per session.
pub const VERSION_SESSION_IDS: u32 = 1;
/// Segment header length.
pub const HEADER_LEN: usize = 16;
/// Record frame (len + crc) length.
pub const FRAME_LEN: usize = 8;
/// Payload kind of an archived observation.
pub const KIND_OBS: u8 = 0xA1;
/// Smallest payload: every fixed field, empty strings and observation.
pub const MIN_PAYLOAD: usize = 1 + 20 + 4 + 4 + 4 + 4 + 1 + 4 + 8;
/// Largest payload the u32 length prefix can describe.
pub const MAX_PAYLOAD: u64 = u32::MAX as u64;

/// The file name of segment number `n` (`seg-000001.log`; six digits or more).
pub fn segment_file_name(n: u32) -> String {
    format!("seg-{n:06}.log")
}

/// The segment number a file name stands for, if it is a segment's
/// (`seg-` six or more digits `.log`).
pub fn parse_segment_file_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("seg-")?.strip_suffix(".log")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segment header for segment number `n` of a new store ([`VERSION`]).
pub fn header(n: u32) -> [u8; HEADER_LEN] {
    header_of(VERSION, n)
}

/// The segment header for segment number `n` of a store in format `version`.
pub fn header_of(version: u32, n: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&version.to_le_bytes());
    h[12..16].copy_from_slice(&n.to_le_bytes());
    h
}

/// How a store in format `version` derives visible ids.
pub fn id_scope(version: u32) -> IdScope {
    if version >= 2 { IdScope::Store } else { IdScope::Session }
}

/// Check a segment header; its format version, or why it is refused.
pub fn check_header(h: &[u8], n: u32) -> Result<u32, String> {
    if h.len() < HEADER_LEN {
        return Err(format!("segment header is {} bytes, expected {HEADER_LEN}", h.len()));
    }
    if h[..8] != MAGIC {
        return Err("bad segment magic (not an arc-store segment)".into());
    }
    let v = u32::from_le_bytes(h[8..12].try_into().unwrap());
    if !(VERSION_SESSION_IDS..=VERSION).contains(&v) {
        return Err(format!("unsupported segment format version {v} (this build reads {VERSION_SESSION_IDS} to {VERSION})"));
    }
    let m = u32::from_le_bytes(h[12..16].try_into().unwrap());
    if m != n {
        return Err(format!("segment header says number {m}, file name says {n}"));
    }
    Ok(v)
}

/// The fields of one archived observation, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Content id.
    pub id: ObsId,
    /// Session namespace.
    pub session: &'a [u8],
    /// Action signature.
    pub action: &'a [u8],
    /// Creation step.
    pub step: u32,
    /// Length in the model's tokens.
    pub tokens: u32,
    /// Return code.
    pub returncode: Option<i32>,
    /// The observation bytes.
    pub observation: &'a [u8],
}

impl RecordRef<'_> {
    /// Length of the whole framed record.
    pub fn framed_len(&self) -> usize {
        FRAME_LEN + MIN_PAYLOAD + self.session.len() + self.action.len() + self.observation.len()
    }

    /// Offset of the observation bytes from the start of the framed record.
    pub fn obs_offset(&self) -> usize {
        FRAME_LEN + MIN_PAYLOAD + self.session.len() + self.action.len()
    }

    /// Append the framed record (len, crc, payload) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), crate::StoreError> {
        let too = |what, len: usize, limit: u64| crate::StoreError::TooLarge { what, len: len as u64, limit };
        if self.session.len() as u64 > u32::MAX as u64 {
            return Err(too("session", self.session.len(), u32::MAX as u64));
        }
        if self.action.len() as u64 > u32::MAX as u64 {
            return Err(too("action", self.action.len(), u32::MAX as u64));
        }
        let plen = (self.framed_len() - FRAME_LEN) as u64;
        if plen > MAX_PAYLOAD {
            return Err(too("record payload", plen as usize, MAX_PAYLOAD));
        }
        let start = out.len();
        out.reserve(self.framed_len());
        out.extend_from_slice(&(plen as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.push(KIND_OBS);
        out.extend_from_slice(&self.id.0);
        out.extend_from_slice(&(self.session.len() as u32).to_le_bytes());
        out.extend_from_slice(self.session);
        out.extend_from_slice(&(self.action.len() as u32).to_le_bytes());
        out.extend_from_slice(self.action);
        out.extend_from_slice(&self.step.to_le_bytes());
        out.extend_from_slice(&self.tokens.to_le_bytes());
        out.push(self.returncode.is_some() as u8);
        out.extend_from_slice(&self.returncode.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&(self.observation.len() as u64).to_le_bytes());
        out.extend_from_slice(self.observation);
        let crc = crc(&out[start..start + 4], &out[start + FRAME_LEN..]);
        out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        Ok(())
    }
}

/// CRC-32 over the length prefix and the payload.
pub fn crc(len: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(len);
    h.update(payload);
    h.finalize()
}

/// Why bytes at some offset are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// Fewer bytes remain than the frame or the payload needs: what a torn
    /// write leaves.
    Short,
    /// The bytes are all there but a check failed.
    Invalid(String),
}

/// Decode the framed record at the start of `buf`; returns it and its framed length.
pub fn decode(buf: &[u8]) -> Result<(RecordRef<'_>, usize), Bad> {
    if buf.len() < FRAME_LEN {
        return Err(Bad::Short);
    }
    let plen = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
    if plen < MIN_PAYLOAD {
        return Err(Bad::Invalid(format!("record length {plen} is below the minimum {MIN_PAYLOAD}")));
    }
    if buf.len() - FRAME_LEN < plen {
        return Err(Bad::Short);
    }
    let stored = u32::from_le_bytes(buf[4..8].try_into().unwrap());
    let payload = &buf[FRAME_LEN..FRAME_LEN + plen];
    let got = crc(&buf[..4], payload);
    if got != stored {
        return Err(Bad::Invalid(format!("checksum mismatch (stored {stored:08x}, computed {got:08x}, length {plen})")));
    }
    parse_payload(payload).map(|r| (r, FRAME_LEN + plen)).map_err(Bad::Invalid)
}

/// The identity a payload claims, read without trusting its checksum: what
/// recovery can still say about a damaged record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim<'a> {
    /// The id field as stored.
    pub id: ObsId,
    /// The session field as stored.
    pub session: &'a [u8],
    /// Action and observation, when the rest of the payload parses too.
    pub content: Option<(&'a [u8], &'a [u8])>,
}

/// Read the kind, id and session of a (possibly damaged or cut) payload;
/// `None` when even those do not parse.
pub(crate) fn peek(p: &[u8]) -> Option<Claim<'_>> {
    // The kind byte is not required: version 1 has one kind, so a damaged
    // kind byte still leaves the layout readable.
    if p.len() < 25 {
        return None;
    }
    let id = ObsId(p[1..21].try_into().unwrap());
    let n = u32::from_le_bytes(p[21..25].try_into().unwrap()) as usize;
    let session = p.get(25..25usize.checked_add(n)?)?;
    let content = parse_payload(p).ok().map(|r| (r.action, r.observation));
    Some(Claim { id, session, content })
}

/// Payload length of a structurally sound frame at `p` (length in range,
/// kind byte, field lengths that add up exactly), without checking its CRC.
pub(crate) fn frame_at(data: &[u8], p: usize) -> Option<usize> {
    let rem = data.len().checked_sub(p)?;
    if rem < FRAME_LEN + MIN_PAYLOAD {
        return None;
    }
    let plen = u32::from_le_bytes(data[p..p + 4].try_into().unwrap()) as usize;
    if plen < MIN_PAYLOAD || plen > rem - FRAME_LEN || data[p + FRAME_LEN] != KIND_OBS {
        return None;
    }
    parse_payload(&data[p + FRAME_LEN..p + FRAME_LEN + plen]).ok().map(|_| plen)
}

/// True when a complete, valid record (structure and CRC) starts at `p`.
pub(crate) fn valid_at(data: &[u8], p: usize) -> bool {
    // The structure test is O(1) and rejects almost every offset, so the CRC
    // (O(record)) runs only where a record plausibly starts.
    frame_at(data, p).is_some_and(|plen| {
        let stored = u32::from_le_bytes(data[p + 4..p + 8].try_into().unwrap());
        crc(&data[p..p + 4], &data[p + FRAME_LEN..p + FRAME_LEN + plen]) == stored
    })
}

pub(crate) fn parse_payload(p: &[u8]) -> Result<RecordRef<'_>, String> {
    struct Cur<'a>(&'a [u8]);
    impl<'a> Cur<'a> {
        fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
            if self.0.len() < n {
                return Err(format!("{what} runs past the end of the record"));
            }
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            Ok(a)
        }
        fn u32(&mut self, what: &str) -> Result<u32, String> {
            Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
        }
    }
    let mut c = Cur(p);
    let kind = c.take(1, "kind")?[0];
    if kind != KIND_OBS {
        return Err(format!("unknown record kind {kind:#04x}"));
    }
    let id = ObsId(c.take(20, "id")?.try_into().unwrap());
    let n = c.u32("session length")? as usize;
    let session = c.take(n, "session")?;
    let n = c.u32("action length")? as usize;
    let action = c.take(n, "action")?;
    let step = c.u32("step")?;
    let tokens = c.u32("tokens")?;
    let rc_present = c.take(1, "returncode flag")?[0];
    let rc = i32::from_le_bytes(c.take(4, "returncode")?.try_into().unwrap());
    let returncode = match rc_present {
        0 => None,
        1 => Some(rc),
        x => return Err(format!("bad returncode flag {x}")),
    };
    let n = u64::from_le_bytes(c.take(8, "observation length")?.try_into().unwrap());
    let observation = c.take(usize::try_from(n).map_err(|_| "observation length overflows".to_string())?, "observation")?;
    if !c.0.is_empty() {
        return Err(format!("{} trailing bytes after the observation", c.0.len()));
    }
    Ok(RecordRef { id, session, action, step, tokens, returncode, observation })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_bit_flip_is_caught() {
        let r =
            RecordRef { id: ObsId::of(b"ls", b"a\xff\n"), session: b"s1", action: b"ls", step: 7, tokens: 3, returncode: Some(-2), observation: b"a\xff\n" };
        let mut buf = Vec::new();
        r.encode(&mut buf).unwrap();
        assert_eq!(buf.len(), r.framed_len());
        let (d, n) = decode(&buf).unwrap();
        assert_eq!((d, n), (r, buf.len()));
        assert_eq!(&buf[r.obs_offset()..], r.observation);
        for i in 0..buf.len() * 8 {
            let mut b = buf.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(decode(&b).is_err(), "flip of bit {i} went unnoticed");
        }
        for k in 0..buf.len() {
            assert_eq!(decode(&buf[..k]).unwrap_err(), Bad::Short, "prefix {k}");
        }
    }
}
