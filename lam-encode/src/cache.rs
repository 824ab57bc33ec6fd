use lam_core::{Encoder, EncoderInfo, Error};
use std::collections::HashMap;
use std::ops::Range;
use xxhash_rust::xxh3::xxh3_128;

/// Memoises an encoder by the exact bytes of each chunk, so running the
/// online and batch forms, or a threshold sweep, encodes every chunk once.
/// Keys are content hashes within one model (the wrapped encoder's).
#[derive(Debug)]
pub struct CachedEncoder<E> {
    inner: E,
    dim: usize,
    memo: HashMap<u128, Box<[f32]>>,
    fresh: Vec<u128>,
    hits: u64,
    misses: u64,
    autosave: Option<(std::path::PathBuf, usize)>,
    timing: Timing,
}

/// Chunkings memoised by content (opt-in: [`CachedEncoder::memo_chunks`]),
/// and where the wrapped encoder spent its time.
#[derive(Debug, Default)]
struct Timing {
    chunks: Option<std::cell::RefCell<HashMap<u128, Vec<Range<usize>>>>>,
    chunk_time: std::cell::Cell<std::time::Duration>,
    encode_time: std::time::Duration,
}

impl<E: Encoder> CachedEncoder<E> {
    /// Wrap `inner`.
    pub fn new(inner: E) -> Self {
        let dim = inner.info().dim;
        Self { inner, dim, memo: HashMap::new(), fresh: Vec::new(), hits: 0, misses: 0, autosave: None, timing: Timing::default() }
    }

    /// Wrap `inner` and preload the persistent cache `path` (a
    /// `lam-embeddings/1` file of chunk lines) when it exists and was made by
    /// the same model. A cache that cannot be read is reported and ignored:
    /// it only ever saves work.
    pub fn with_file(inner: E, path: &std::path::Path) -> Self {
        let mut c = Self::new(inner);
        if path.is_file() {
            match crate::PrecomputedEncoder::open(path) {
                Ok(p) => {
                    let (info, vectors) = p.into_parts();
                    let mine = c.inner.info();
                    if info.model_id == mine.model_id && info.dim == mine.dim {
                        c.memo.extend(vectors.into_iter().map(|(k, v)| (k, v.into_boxed_slice())));
                    }
                }
                Err(e) => eprintln!("note: ignoring embedding cache {}: {e}", path.display()),
            }
        }
        c
    }

    /// Append new embeddings to `path` whenever `every` of them are waiting,
    /// so an interrupted long run keeps what it encoded. A failed save is
    /// reported once and autosaving stops (the cache only ever saves work).
    pub fn autosave(mut self, path: &std::path::Path, every: usize) -> Self {
        self.autosave = Some((path.to_path_buf(), every.max(1)));
        self
    }

    /// Number of embeddings held.
    pub fn len(&self) -> usize {
        self.memo.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.memo.is_empty()
    }

    /// Append the embeddings computed since the last save to `path`
    /// (creating it with its header), so a later run never re-encodes them.
    pub fn save(&mut self, path: &std::path::Path) -> std::io::Result<usize> {
        use base64::Engine as _;
        use std::io::Write as _;
        if self.fresh.is_empty() {
            return Ok(0);
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let exists = path.is_file() && std::fs::metadata(path)?.len() > 0;
        let n = self.fresh.len();
        let mut buf = Vec::with_capacity(n * (self.dim * 16 / 3 + 64));
        if !exists {
            let info = self.inner.info();
            let h = crate::precomputed::Header { format: crate::FORMAT.into(), model_id: info.model_id, dim: info.dim, max_tokens: info.max_tokens };
            serde_json::to_writer(&mut buf, &h)?;
            buf.push(b'\n');
        }
        for k in &self.fresh {
            let v = &self.memo[k];
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let line = serde_json::json!({"chunk": format!("{k:032x}"), "e": base64::engine::general_purpose::STANDARD.encode(bytes)});
            serde_json::to_writer(&mut buf, &line)?;
            buf.push(b'\n');
        }
        // One write of whole lines: with O_APPEND, runs sharing the cache
        // append whole saves, never interleaved halves of lines.
        std::fs::OpenOptions::new().create(true).append(true).open(path)?.write_all(&buf)?;
        self.fresh.clear();
        Ok(n)
    }

    /// Also memoise chunkings by content, so a text chunked again (a
    /// threshold sweep, both forms of the operator) is tokenised once.
    pub fn memo_chunks(&mut self) {
        if self.timing.chunks.is_none() {
            self.timing.chunks = Some(Default::default());
        }
    }

    /// Time the wrapped encoder spent (chunking, encoding), cache misses only.
    pub fn timings(&self) -> (std::time::Duration, std::time::Duration) {
        (self.timing.chunk_time.get(), self.timing.encode_time)
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// The wrapped encoder.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: Encoder> Encoder for CachedEncoder<E> {
    fn info(&self) -> EncoderInfo {
        self.inner.info()
    }

    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        self.inner.token_spans(text, out)
    }

    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        let key = self.timing.chunks.as_ref().map(|_| xxh3_128(text));
        if let (Some(memo), Some(k)) = (&self.timing.chunks, key)
            && let Some(v) = memo.borrow().get(&k)
        {
            out.clear();
            out.extend_from_slice(v);
            return Ok(());
        }
        let t = std::time::Instant::now();
        self.inner.chunks(text, out)?;
        self.timing.chunk_time.set(self.timing.chunk_time.get() + t.elapsed());
        if let (Some(memo), Some(k)) = (&self.timing.chunks, key) {
            memo.borrow_mut().insert(k, out.clone());
        }
        Ok(())
    }

    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        let d = self.dim;
        if out.len() != texts.len() * d {
            return Err(Error::Dimension { expected: texts.len() * d, got: out.len() });
        }
        let keys: Vec<u128> = texts.iter().map(|t| xxh3_128(t)).collect();
        let mut todo: Vec<usize> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, k) in keys.iter().enumerate() {
            if !self.memo.contains_key(k) && seen.insert(*k) {
                todo.push(i);
            }
        }
        self.hits += (texts.len() - todo.len()) as u64;
        self.misses += todo.len() as u64;
        if !todo.is_empty() {
            let miss: Vec<&[u8]> = todo.iter().map(|&i| texts[i]).collect();
            let mut v = vec![0.0f32; miss.len() * d];
            let t = std::time::Instant::now();
            let r = self.inner.encode_batch(&miss, &mut v);
            self.timing.encode_time += t.elapsed();
            r?;
            for (&i, row) in todo.iter().zip(v.chunks_exact(d)) {
                self.memo.insert(keys[i], row.into());
                self.fresh.push(keys[i]);
            }
        }
        for (k, row) in keys.iter().zip(out.chunks_exact_mut(d)) {
            row.copy_from_slice(&self.memo[k]);
        }
        if let Some((path, every)) = &self.autosave
            && self.fresh.len() >= *every
        {
            let path = path.clone();
            if let Err(e) = self.save(&path) {
                eprintln!("note: stopped saving the embedding cache {}: {e}", path.display());
                self.autosave = None;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashingEncoder;

    #[test]
    fn encodes_each_chunk_once_and_returns_the_same_bits() {
        let mut plain = HashingEncoder::default();
        let mut c = CachedEncoder::new(HashingEncoder::default());
        let texts: Vec<&[u8]> = vec![b"a b c", b"d e f", b"a b c"];
        let mut a = vec![0.0; 3 * 384];
        let mut b = vec![0.0; 3 * 384];
        plain.encode_batch(&texts, &mut a).unwrap();
        c.encode_batch(&texts, &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(c.stats(), (1, 2));
        c.encode_batch(&texts, &mut b).unwrap();
        assert_eq!(c.stats(), (4, 2));
        assert_eq!(a, b);
        lam_core::testsuite::encoder(&mut c);
    }

    #[test]
    fn persists_across_runs() {
        let path = std::env::temp_dir().join(format!("lam-cache-{}.lamemb", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let texts: Vec<&[u8]> = vec![b"alpha beta", b"gamma delta"];
        let mut a = vec![0.0; 2 * 384];
        let mut c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        c.encode_batch(&texts, &mut a).unwrap();
        assert_eq!(c.save(&path).unwrap(), 2);
        assert_eq!(c.save(&path).unwrap(), 0);
        let mut c2 = CachedEncoder::with_file(HashingEncoder::default(), &path);
        assert_eq!(c2.len(), 2);
        let mut b = vec![0.0; 2 * 384];
        c2.encode_batch(&texts, &mut b).unwrap();
        assert_eq!(c2.stats(), (2, 0), "second run re-encoded");
        assert_eq!(a, b);
        // A different model ignores the file.
        let c3 = CachedEncoder::with_file(HashingEncoder::new(32, 8), &path);
        assert!(c3.is_empty());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn autosave_keeps_what_an_interrupted_run_encoded() {
        let path = std::env::temp_dir().join(format!("lam-cache-auto-{}.lamemb", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let texts: Vec<Vec<u8>> = (0..5).map(|i| format!("text number {i}").into_bytes()).collect();
        let mut v = vec![0.0; 384];
        {
            let mut c = CachedEncoder::with_file(HashingEncoder::default(), &path).autosave(&path, 2);
            for t in &texts {
                c.encode_batch(&[t.as_slice()], &mut v).unwrap();
            }
            // Dropped without `save`: the fifth embedding is lost, the first four are on disk.
        }
        let c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        assert_eq!(c.len(), 4);
        let _ = std::fs::remove_file(&path);
    }
}
