//! The stream container shared by every codec (`docs/codec-format.md`).
//!
//! ```text
//! off  size  field
//!   0     4  magic  b"LAMC"
//!   4     2  version (u16, = 1)
//!   6     1  codec id (1 f16, 2 int8, 3 binary, 4 szp)
//!   7     1  mode (szp: 0 fixed, 1 plain; others 0)
//!   8     8  rows (u64)
//!  16     8  dim (u64)
//!  24     8  bound_abs (f64; szp only, else 0)
//!  32     8  step (f64; szp quantisation step, else 0)
//!  40     8  body length in bytes (u64)
//!  48     8  reserved, must be 0
//!  56     8  XXH3-64 of bytes 0..56
//!  64     .  body (codec specific)
//! end-8   8  XXH3-64 of every byte before it
//! ```
//! All integers and floats little-endian.

use crate::Error;
use xxhash_rust::xxh3::xxh3_64;

/// Stream magic.
pub const MAGIC: [u8; 4] = *b"LAMC";
/// Format version written by this build; newer versions are refused.
pub const VERSION: u16 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 64;
/// Trailer (stream checksum) length in bytes.
pub const TRAILER_LEN: usize = 8;

/// Which codec a stream holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodecId {
    /// IEEE half precision, 2 bytes a value.
    F16,
    /// One f32 scale per vector and one i8 per coordinate.
    Int8PerVector,
    /// One f32 norm per vector and one sign bit per coordinate.
    SignBinary,
    /// Error-bounded cuSZp-style block codec.
    Szp,
}

impl CodecId {
    /// Id byte in the stream.
    pub fn byte(self) -> u8 {
        match self {
            CodecId::F16 => 1,
            CodecId::Int8PerVector => 2,
            CodecId::SignBinary => 3,
            CodecId::Szp => 4,
        }
    }
    /// Codec from its id byte.
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => CodecId::F16,
            2 => CodecId::Int8PerVector,
            3 => CodecId::SignBinary,
            4 => CodecId::Szp,
            _ => return None,
        })
    }
    /// Name as reported (`f16`, `int8`, `binary`, `szp`).
    pub fn name(self) -> &'static str {
        match self {
            CodecId::F16 => "f16",
            CodecId::Int8PerVector => "int8",
            CodecId::SignBinary => "binary",
            CodecId::Szp => "szp",
        }
    }
}

/// Szp mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SzpMode {
    /// Quantised values coded directly (cuSZp "fixed").
    #[default]
    Fixed,
    /// 1-D Lorenzo: differences of consecutive quantised values within a block (cuSZp "plain").
    Plain,
}

impl SzpMode {
    /// Name (`fixed`, `plain`).
    pub fn name(self) -> &'static str {
        match self {
            SzpMode::Fixed => "fixed",
            SzpMode::Plain => "plain",
        }
    }
}

/// The parsed, checked header of a stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    /// Format version.
    pub version: u16,
    /// Codec.
    pub codec: CodecId,
    /// Mode byte (szp: fixed/plain; others 0).
    pub mode: SzpMode,
    /// Number of vectors.
    pub rows: u64,
    /// Dimension.
    pub dim: u64,
    /// Absolute error bound (szp); 0 for the other codecs.
    pub bound_abs: f64,
    /// Quantisation step (szp); 0 for the other codecs.
    pub step: f64,
    /// Body length in bytes.
    pub body_len: u64,
}

impl Header {
    /// Number of values `rows * dim`, checked.
    pub fn values(&self) -> Result<usize, Error> {
        self.rows.checked_mul(self.dim).and_then(|n| usize::try_from(n).ok()).ok_or_else(|| Error::corrupt("rows * dim overflows"))
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.push(self.codec.byte());
        out.push(match self.mode {
            SzpMode::Fixed => 0,
            SzpMode::Plain => 1,
        });
        out.extend_from_slice(&self.rows.to_le_bytes());
        out.extend_from_slice(&self.dim.to_le_bytes());
        out.extend_from_slice(&self.bound_abs.to_le_bytes());
        out.extend_from_slice(&self.step.to_le_bytes());
        out.extend_from_slice(&self.body_len.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        let h = xxh3_64(&out[start..start + 56]);
        out.extend_from_slice(&h.to_le_bytes());
    }

    /// Parse and check the header alone (magic, version, header checksum,
    /// field ranges). Does not verify the body checksum: see [`check_stream`].
    pub fn parse(bytes: &[u8]) -> Result<Header, Error> {
        if bytes.len() < 4 || bytes[..4] != MAGIC {
            return Err(Error::BadMagic);
        }
        if bytes.len() < HEADER_LEN {
            return Err(Error::corrupt(format!("{} bytes is shorter than the {HEADER_LEN}-byte header", bytes.len())));
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version > VERSION {
            return Err(Error::UnsupportedVersion { found: version, supported: VERSION });
        }
        if xxh3_64(&bytes[..56]) != u64_at(bytes, 56) {
            return Err(Error::Checksum { what: "header" });
        }
        if version == 0 {
            return Err(Error::corrupt("version 0"));
        }
        let codec = CodecId::from_byte(bytes[6]).ok_or_else(|| Error::corrupt(format!("unknown codec id {}", bytes[6])))?;
        let mode = match (codec, bytes[7]) {
            (_, 0) => SzpMode::Fixed,
            (CodecId::Szp, 1) => SzpMode::Plain,
            (_, m) => return Err(Error::corrupt(format!("unknown mode {m} for codec {}", codec.name()))),
        };
        if u64_at(bytes, 48) != 0 {
            return Err(Error::corrupt("reserved header field is not 0"));
        }
        let h = Header {
            version,
            codec,
            mode,
            rows: u64_at(bytes, 8),
            dim: u64_at(bytes, 16),
            bound_abs: f64::from_bits(u64_at(bytes, 24)),
            step: f64::from_bits(u64_at(bytes, 32)),
            body_len: u64_at(bytes, 40),
        };
        h.values()?;
        Ok(h)
    }
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// Parse the header and verify the whole stream: its length matches the
/// header and its checksum matches. Returns the header and the body.
pub fn check_stream(bytes: &[u8]) -> Result<(Header, &[u8]), Error> {
    let h = Header::parse(bytes)?;
    let want = (HEADER_LEN as u64 + TRAILER_LEN as u64).checked_add(h.body_len);
    if want != Some(bytes.len() as u64) {
        return Err(Error::corrupt(format!("stream is {} bytes, header says {}", bytes.len(), h.body_len.saturating_add(72))));
    }
    let end = bytes.len() - TRAILER_LEN;
    if xxh3_64(&bytes[..end]) != u64_at(bytes, end) {
        return Err(Error::Checksum { what: "stream" });
    }
    Ok((h, &bytes[HEADER_LEN..end]))
}

/// Finish a stream whose header was written at `start` and whose body follows:
/// patch the body length (and header checksum), then append the trailer.
pub(crate) fn finish(out: &mut Vec<u8>, start: usize) {
    let body_len = (out.len() - start - HEADER_LEN) as u64;
    out[start + 40..start + 48].copy_from_slice(&body_len.to_le_bytes());
    let h = xxh3_64(&out[start..start + 56]);
    out[start + 56..start + 64].copy_from_slice(&h.to_le_bytes());
    let s = xxh3_64(&out[start..]);
    out.extend_from_slice(&s.to_le_bytes());
}
