use crate::Error as EncError;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use lam_core::{Encoder, EncoderInfo, Error, check_unit};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::ops::Range;
use xxhash_rust::xxh3::xxh3_128;

/// Format tag of the first line of an embeddings file.
pub const FORMAT: &str = "lam-embeddings/1";

pub(crate) fn key(bytes: &[u8]) -> u128 {
    xxh3_128(bytes)
}

#[derive(Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) format: String,
    pub(crate) model_id: String,
    pub(crate) dim: usize,
    pub(crate) max_tokens: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Obs {
        obs: String,
        len: usize,
        cuts: Vec<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        x: Option<String>,
    },
    Chunk {
        chunk: String,
        e: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        x: Option<String>,
    },
}

/// The checksum field `x` of a line: XXH3-64 (16 lowercase hex digits) of
/// its fields' text joined by byte 0x1F: `chunk`, `e` for a chunk line;
/// `obs`, `len` and the `cuts` in decimal joined by `,` for an
/// observation line (`docs/embeddings-format.md`).
fn checksum(fields: &[&str]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            h.update(&[0x1F]);
        }
        h.update(f.as_bytes());
    }
    format!("{:016x}", h.digest())
}

fn cuts_text(cuts: &[usize]) -> String {
    cuts.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// One parsed line of a `lam-embeddings/1` file.
#[derive(Debug)]
pub(crate) enum Entry {
    /// An observation's chunk ends (its cuts, then its length).
    Obs(u128, Vec<usize>),
    /// A chunk's unit vector.
    Chunk(u128, Vec<f32>),
}

/// Parse one line (without its newline) for a file of dimension `dim`.
/// Returns the entry and whether it carried a checksum (which then held).
pub(crate) fn parse_line(line: &[u8], dim: usize) -> Result<(Entry, bool), String> {
    let parsed: Line = serde_json::from_slice(line).map_err(|e| format!("not an obs or chunk record: {e}"))?;
    let check = |x: &Option<String>, fields: &[&str]| match x {
        Some(x) if *x != checksum(fields) => Err(format!("checksum mismatch (line says {x}, content gives {})", checksum(fields))),
        Some(_) => Ok(true),
        None => Ok(false),
    };
    match parsed {
        Line::Obs { obs, len, cuts, x } => {
            let checked = check(&x, &[&obs, &len.to_string(), &cuts_text(&cuts)])?;
            let k = parse_key(&obs).ok_or_else(|| format!("bad key `{obs}`"))?;
            if cuts.first().is_some_and(|&s| s != 0) || !cuts.windows(2).all(|w| w[0] < w[1]) || cuts.last().is_some_and(|&s| s >= len) {
                return Err("cuts must start at 0, increase and stay below len".into());
            }
            Ok((Entry::Obs(k, [cuts, vec![len]].concat()), checked))
        }
        Line::Chunk { chunk, e, x } => {
            let checked = check(&x, &[&chunk, &e])?;
            let k = parse_key(&chunk).ok_or_else(|| format!("bad key `{chunk}`"))?;
            let bytes = B64.decode(e.as_bytes()).map_err(|e| format!("bad base64: {e}"))?;
            if bytes.len() != dim * 4 {
                return Err(format!("vector has {} bytes, expected {}", bytes.len(), dim * 4));
            }
            let v: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            check_unit(&v).map_err(|f| format!("invalid embedding: {f}"))?;
            Ok((Entry::Chunk(k, v), checked))
        }
    }
}

/// A chunk line with its checksum, newline included.
pub(crate) fn chunk_line(k: u128, v: &[f32], checked: bool, out: &mut Vec<u8>) {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let (chunk, e) = (format!("{k:032x}"), B64.encode(bytes));
    let x = checked.then(|| checksum(&[&chunk, &e]));
    serde_json::to_writer(&mut *out, &Line::Chunk { chunk, e, x }).expect("writing JSON to a Vec cannot fail");
    out.push(b'\n');
}

/// Parse a header line; `Err` says why it is refused.
pub(crate) fn parse_header(line: &[u8]) -> Result<Header, String> {
    let h: Header = serde_json::from_slice(line).map_err(|e| format!("bad header: {e}"))?;
    if h.format != FORMAT {
        return Err(format!("format `{}` is not `{FORMAT}`", h.format));
    }
    if h.dim == 0 || h.max_tokens == 0 {
        return Err("dim and max_tokens must be positive".into());
    }
    Ok(h)
}

/// Embeddings computed elsewhere, looked up by the content of each chunk.
///
/// Chunk boundaries are part of the file (they depend on the tokenizer that
/// made them), keyed by the content of each observation.
#[derive(Debug)]
pub struct PrecomputedEncoder {
    info: EncoderInfo,
    cuts: HashMap<u128, Vec<usize>>,
    vectors: HashMap<u128, Vec<f32>>,
}

impl PrecomputedEncoder {
    /// Read a `lam-embeddings/1` file. Errors name the file and line.
    pub fn open(path: &std::path::Path) -> Result<Self, EncError> {
        let p = path.display().to_string();
        let f = std::fs::File::open(path).map_err(|source| EncError::Io { path: p.clone(), source })?;
        Self::read(std::io::BufReader::new(f), &p)
    }

    /// Read from any reader; `name` is used in error messages. Strict: a
    /// malformed line, or one whose checksum (`x`) does not hold, is an
    /// error naming the line.
    pub fn read(mut r: impl BufRead, name: &str) -> Result<Self, EncError> {
        let fmt = |line: usize, message: String| EncError::Format { path: name.to_string(), line, message };
        let io = |source| EncError::Io { path: name.to_string(), source };
        let mut buf = Vec::new();
        if r.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            return Err(fmt(1, "empty file".into()));
        }
        let h = parse_header(trim_newline(&buf)).map_err(|m| fmt(1, m))?;
        let mut cuts = HashMap::new();
        let mut vectors = HashMap::new();
        for n in 2.. {
            buf.clear();
            if r.read_until(b'\n', &mut buf).map_err(io)? == 0 {
                break;
            }
            let l = trim_newline(&buf);
            if l.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_line(l, h.dim).map_err(|m| fmt(n, m))?.0 {
                Entry::Obs(k, ends) => {
                    cuts.insert(k, ends);
                }
                Entry::Chunk(k, v) => {
                    vectors.insert(k, v);
                }
            }
        }
        Ok(Self { info: EncoderInfo { model_id: h.model_id, dim: h.dim, max_tokens: h.max_tokens }, cuts, vectors })
    }

    /// The header's encoder description and every chunk vector, by content key.
    pub fn into_parts(self) -> (EncoderInfo, HashMap<u128, Vec<f32>>) {
        (self.info, self.vectors)
    }

    /// Number of distinct chunks held.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// True when the file held no chunk.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    fn missing(&self, what: &'static str, k: u128) -> Error {
        Error::Encoder {
            model: self.info.model_id.clone(),
            cause: Box::new(EncError::Missing { what, key: format!("{k:032x}"), model: self.info.model_id.clone() }),
        }
    }
}

/// A line without its `\n` (and a `\r` before it).
pub(crate) fn trim_newline(l: &[u8]) -> &[u8] {
    let l = l.strip_suffix(b"\n").unwrap_or(l);
    l.strip_suffix(b"\r").unwrap_or(l)
}

fn parse_key(s: &str) -> Option<u128> {
    if s.len() != 32 {
        return None;
    }
    u128::from_str_radix(s, 16).ok()
}

impl Encoder for PrecomputedEncoder {
    fn info(&self) -> EncoderInfo {
        self.info.clone()
    }

    fn token_spans(&self, _text: &[u8], _out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        Err(Error::Encoder { model: self.info.model_id.clone(), cause: "precomputed embeddings carry chunk boundaries, not a tokenizer".into() })
    }

    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        out.clear();
        let k = key(text);
        let ends = self.cuts.get(&k).ok_or_else(|| self.missing("chunking", k))?;
        if *ends.last().expect("len pushed") != text.len() {
            return Err(self.missing("chunking", k));
        }
        out.extend(ends.windows(2).map(|w| w[0]..w[1]));
        Ok(())
    }

    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        let dim = self.info.dim;
        if out.len() != texts.len() * dim {
            return Err(Error::Dimension { expected: texts.len() * dim, got: out.len() });
        }
        for (t, row) in texts.iter().zip(out.chunks_exact_mut(dim)) {
            let k = key(t);
            let v = self.vectors.get(&k).ok_or_else(|| self.missing("embedding", k))?;
            row.copy_from_slice(v);
        }
        Ok(())
    }
}

/// Writes a `lam-embeddings/1` file from any encoder's chunks and vectors.
#[derive(Debug)]
pub struct EmbeddingsWriter<W: Write> {
    w: W,
    dim: usize,
    seen_obs: HashSet<u128>,
    seen_chunks: HashSet<u128>,
}

impl<W: Write> EmbeddingsWriter<W> {
    /// Start a file for `info`'s model.
    pub fn new(mut w: W, info: &EncoderInfo) -> std::io::Result<Self> {
        let h = Header { format: FORMAT.into(), model_id: info.model_id.clone(), dim: info.dim, max_tokens: info.max_tokens };
        serde_json::to_writer(&mut w, &h)?;
        w.write_all(b"\n")?;
        Ok(Self { w, dim: info.dim, seen_obs: HashSet::new(), seen_chunks: HashSet::new() })
    }

    /// Record an observation's chunk boundaries and each chunk's embedding.
    pub fn observation(&mut self, obs: &[u8], chunks: &[Range<usize>], vectors: &[f32]) -> std::io::Result<()> {
        assert_eq!(vectors.len(), chunks.len() * self.dim);
        if self.seen_obs.insert(key(obs)) {
            let (k, cuts): (String, Vec<usize>) = (format!("{:032x}", key(obs)), chunks.iter().map(|c| c.start).collect());
            let x = Some(checksum(&[&k, &obs.len().to_string(), &cuts_text(&cuts)]));
            serde_json::to_writer(&mut self.w, &Line::Obs { obs: k, len: obs.len(), cuts, x })?;
            self.w.write_all(b"\n")?;
        }
        let mut line = Vec::new();
        for (c, v) in chunks.iter().zip(vectors.chunks_exact(self.dim)) {
            let k = key(&obs[c.clone()]);
            if self.seen_chunks.insert(k) {
                line.clear();
                chunk_line(k, v, true, &mut line);
                self.w.write_all(&line)?;
            }
        }
        Ok(())
    }

    /// Flush and return the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashingEncoder;

    #[test]
    fn conformance() {
        // A file holding the suite's texts, each one chunk, as the hashing encoder embeds them.
        let mut h = HashingEncoder::new(32, 64);
        let mut w = EmbeddingsWriter::new(Vec::new(), &h.info()).unwrap();
        for t in lam_core::testsuite::encoder_texts() {
            let mut v = vec![0.0; 32];
            h.encode_batch(&[t], &mut v).unwrap();
            w.observation(t, std::slice::from_ref(&(0..t.len())), &v).unwrap();
        }
        let mut p = PrecomputedEncoder::read(&w.finish().unwrap()[..], "mem").unwrap();
        lam_core::testsuite::encoder_embeddings(&mut p);
        let mut c = Vec::new();
        for t in lam_core::testsuite::encoder_texts() {
            p.chunks(t, &mut c).unwrap();
            assert_eq!((c.len(), c[0].clone()), (1, 0..t.len()), "the chunking as recorded");
        }
    }

    #[test]
    fn round_trip_through_a_file() {
        let mut h = HashingEncoder::new(32, 4);
        let obs: &[u8] = b"one two three four five six seven eight nine \xff ten";
        let mut chunks = Vec::new();
        h.chunks(obs, &mut chunks).unwrap();
        assert_eq!(chunks.len(), 3);
        let texts: Vec<&[u8]> = chunks.iter().map(|c| &obs[c.clone()]).collect();
        let mut v = vec![0.0; texts.len() * 32];
        h.encode_batch(&texts, &mut v).unwrap();
        let mut w = EmbeddingsWriter::new(Vec::new(), &h.info()).unwrap();
        w.observation(obs, &chunks, &v).unwrap();
        let file = w.finish().unwrap();
        let mut p = PrecomputedEncoder::read(&file[..], "mem").unwrap();
        assert_eq!(p.info(), h.info());
        let mut c2 = Vec::new();
        p.chunks(obs, &mut c2).unwrap();
        assert_eq!(c2, chunks);
        let mut v2 = vec![0.0; v.len()];
        p.encode_batch(&texts, &mut v2).unwrap();
        assert_eq!(v, v2, "bit-exact round trip");
        let err = p.encode_batch(&[b"unknown"], &mut [0.0; 32]).unwrap_err();
        assert!(err.to_string().contains("no precomputed embedding"), "{err}");
    }

    #[test]
    fn errors_name_the_line() {
        let file = format!("{{\"format\":\"{FORMAT}\",\"model_id\":\"m\",\"dim\":2,\"max_tokens\":4}}\n{{\"chunk\":\"{:032x}\",\"e\":\"AAAAAAAAAAA=\"}}\n", 1);
        let err = PrecomputedEncoder::read(file.as_bytes(), "x.jsonl").unwrap_err().to_string();
        assert!(err.starts_with("x.jsonl:2: invalid embedding"), "{err}");
        let err = PrecomputedEncoder::read(&b"{\"format\":\"other\"}\n"[..], "y").unwrap_err().to_string();
        assert!(err.starts_with("y:1:"), "{err}");
    }
}
