use crate::precomputed::{Entry, Header, chunk_line, parse_header, parse_line, trim_newline};
use lam_core::{EmbeddingStore, Encoder, EncoderInfo, Error};
use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_128;

/// What loading a persistent embedding cache found. Entries are checked one
/// by one: a bad entry is skipped and counted, the rest are used. When the
/// file holds dead entries (bad, torn or repeated), [`CachedEncoder::with_file`]
/// rewrites it without them (a temporary file renamed into place).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheReport {
    /// The cache file.
    pub path: Option<PathBuf>,
    /// Embeddings loaded and used (checked and unchecked).
    pub entries: u64,
    /// Of those, entries without a checksum (written before checksums
    /// existed): used as before, kept as they are by compaction.
    pub unchecked: u64,
    /// Entries skipped: a checksum that does not hold, or a malformed line.
    pub bad: u64,
    /// An incomplete last line (no newline, does not parse): ignored.
    pub torn: u64,
    /// Entries for a chunk already loaded (two runs saved the same chunk).
    pub duplicates: u64,
    /// Observation lines (chunk boundaries), which a cache does not use.
    pub ignored: u64,
    /// The first skipped line: (1-based line number, why).
    pub first_bad: Option<(u64, String)>,
    /// The file was rewritten without its dead entries.
    pub compacted: bool,
    /// Why the whole file was not used (unreadable, a damaged header, made
    /// by another model), if it was not.
    pub unusable: Option<String>,
    /// Where a file with a damaged header was moved aside (a fresh cache
    /// starts in its place).
    pub moved_aside: Option<PathBuf>,
    /// Why rewriting the file without its dead entries failed (the entries
    /// loaded are used all the same; the next run tries again).
    pub compact_error: Option<String>,
}

impl CacheReport {
    /// Entries in the file that are not used: bad, torn and repeated ones.
    pub fn dead(&self) -> u64 {
        self.bad + self.torn + self.duplicates
    }
}

impl fmt::Display for CacheReport {
    /// One line; empty when there is nothing to say (no file, or a clean one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(path) = &self.path else { return Ok(()) };
        if let Some(why) = &self.unusable {
            write!(f, "embedding cache {}: not used: {why}", path.display())?;
            if let Some(p) = &self.moved_aside {
                write!(f, " (moved aside to {}; a fresh cache starts)", p.display())?;
            }
            return Ok(());
        }
        if self.dead() == 0 && self.unchecked == 0 {
            return Ok(());
        }
        write!(f, "embedding cache {}: {} embeddings used", path.display(), self.entries)?;
        if self.unchecked > 0 {
            write!(f, " ({} without checksum, from an older lam)", self.unchecked)?;
        }
        for (n, what) in [(self.bad, "bad entries skipped"), (self.torn, "torn last line ignored"), (self.duplicates, "repeated entries")] {
            if n > 0 {
                write!(f, "; {n} {what}")?;
            }
        }
        if let Some((line, why)) = &self.first_bad {
            write!(f, " (first at line {line}: {why})")?;
        }
        if self.compacted {
            write!(f, "; file rewritten without them")?;
        }
        if let Some(e) = &self.compact_error {
            write!(f, "; could not rewrite the file without them: {e}")?;
        }
        Ok(())
    }
}

/// The usable content of a cache file, in file order.
struct Loaded {
    header: Option<Header>,
    /// (key, vector, carried a checksum)
    entries: Vec<(u128, Vec<f32>, bool)>,
    report: CacheReport,
    /// The header could not be parsed (the file is moved aside, not appended to).
    bad_header: bool,
}

/// Read a cache leniently: a bad entry is skipped and counted, an
/// incomplete last line ignored, a repeated key counted (the first one wins).
fn load(mut r: impl BufRead, want: &EncoderInfo) -> Loaded {
    let mut out = Loaded { header: None, entries: Vec::new(), report: CacheReport::default(), bad_header: false };
    let mut buf = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut first = true;
    for n in 1u64.. {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                // Never rewrite (or append to) a file that could not be read to its end.
                out.report.unusable = Some(format!("read failed at line {n}: {e}"));
                out.report.entries = 0;
                out.entries.clear();
                out.header = None;
                return out;
            }
        }
        let complete = buf.ends_with(b"\n");
        let line = trim_newline(&buf);
        if first {
            first = false;
            match parse_header(line) {
                Ok(h) if h.model_id != want.model_id || h.dim != want.dim => {
                    out.report.unusable = Some(format!("made by model {} (dim {}), this run uses {} (dim {})", h.model_id, h.dim, want.model_id, want.dim));
                    return out;
                }
                Ok(h) => out.header = Some(h),
                Err(why) => {
                    out.report.unusable = Some(format!("line 1: {why}"));
                    out.bad_header = true;
                    return out;
                }
            }
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(line, want.dim) {
            Ok((Entry::Chunk(k, v), checked)) => {
                if !seen.insert(k) {
                    out.report.duplicates += 1;
                    continue;
                }
                out.report.entries += 1;
                out.report.unchecked += u64::from(!checked);
                out.entries.push((k, v, checked));
            }
            Ok((Entry::Obs(..), _)) => out.report.ignored += 1,
            Err(why) if !complete => {
                out.report.torn += 1;
                out.report.first_bad.get_or_insert((n, format!("incomplete last line: {why}")));
            }
            Err(why) => {
                out.report.bad += 1;
                out.report.first_bad.get_or_insert((n, why));
            }
        }
    }
    out
}

/// Rewrite the cache `path` with only the entries `loaded` used: a
/// temporary file beside it, synced, renamed into place. A run appending to
/// the old file at the same moment loses that save (the cache only ever
/// saves work).
fn rewrite(path: &Path, loaded: &Loaded) -> std::io::Result<()> {
    let h = loaded.header.as_ref().ok_or_else(|| std::io::Error::other("no header"))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.compact-{}", std::process::id()));
    let result = (|| {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        serde_json::to_writer(&mut w, h)?;
        w.write_all(b"\n")?;
        let mut line = Vec::new();
        for (k, v, checked) in &loaded.entries {
            line.clear();
            chunk_line(*k, v, *checked, &mut line);
            w.write_all(&line)?;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Memoises an encoder by the exact bytes of each chunk, so running the
/// online and batch forms, or a threshold sweep, encodes every chunk once.
/// Keys are content hashes within one model (the wrapped encoder's).
#[derive(Debug)]
pub struct CachedEncoder<E> {
    inner: E,
    dim: usize,
    memo: Memo,
    fresh: Vec<u128>,
    hits: u64,
    misses: u64,
    autosave: Option<(PathBuf, usize)>,
    report: CacheReport,
    /// A file this cache must not append to (another model's), and why.
    refuse: Option<(PathBuf, String)>,
    timing: Timing,
    /// Embeddings shared with other processes ([`CachedEncoder::share`]).
    shared: Option<Shared>,
}

/// Embeddings by chunk key. Unbounded by default; with a bound
/// ([`CachedEncoder::bounded`]) two generations: `new` takes every insert
/// and, once it holds half the bound, replaces `old`, which is dropped; a
/// hit in `old` moves to `new`. So at most about `bound` entries are held,
/// the most recently used kept.
#[derive(Debug, Default)]
struct Memo {
    new: HashMap<u128, Box<[f32]>>,
    old: HashMap<u128, Box<[f32]>>,
    /// Most entries held (both generations), if bounded.
    bound: Option<usize>,
}

impl Memo {
    fn get(&self, k: &u128) -> Option<&[f32]> {
        self.new.get(k).or_else(|| self.old.get(k)).map(|v| &**v)
    }

    fn contains(&self, k: &u128) -> bool {
        self.new.contains_key(k) || self.old.contains_key(k)
    }

    /// Move `k` to the newer generation (it was just used).
    fn touch(&mut self, k: &u128) {
        if let Some(v) = self.old.remove(k) {
            self.new.insert(*k, v);
        }
    }

    fn insert(&mut self, k: u128, v: Box<[f32]>) {
        self.old.remove(&k);
        self.new.insert(k, v);
    }

    fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }

    /// Whether the newer generation is full (then [`Memo::age`]).
    fn full(&self) -> bool {
        self.bound.is_some_and(|b| self.new.len() >= b.div_ceil(2))
    }

    /// Drop the older generation; the newer one becomes it.
    fn age(&mut self) {
        self.old = std::mem::take(&mut self.new);
    }

    /// Bytes one entry takes: its vector, key, box and table slot (a
    /// hashbrown table is at most 7/8 full and may be half empty after growing).
    fn entry_bytes(dim: usize) -> usize {
        dim * 4 + 2 * (16 + 16 + 1)
    }
}

/// The shared store behind the memo and what it answered.
#[derive(Debug)]
struct Shared {
    store: Box<dyn EmbeddingStore>,
    model: String,
    /// Chunks the store answered, and chunks it was asked for.
    found: u64,
    asked: u64,
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
        Self {
            inner,
            dim,
            memo: Memo::default(),
            fresh: Vec::new(),
            hits: 0,
            misses: 0,
            autosave: None,
            report: CacheReport::default(),
            refuse: None,
            timing: Timing::default(),
            shared: None,
        }
    }

    /// Look chunks the memo lacks up in `store` before encoding them, and
    /// keep every chunk encoded here there (the first writer wins), so
    /// processes sharing `store` encode each chunk once between them. A
    /// failing store costs only its work: the error is printed once and the
    /// encoder goes on without it.
    pub fn share(&mut self, store: Box<dyn EmbeddingStore>) {
        self.shared = Some(Shared { store, model: self.inner.info().model_id, found: 0, asked: 0 });
    }

    /// Chunks the shared store answered, and chunks it was asked for.
    pub fn shared_stats(&self) -> Option<(u64, u64)> {
        self.shared.as_ref().map(|s| (s.found, s.asked))
    }

    /// Fill the memo from the shared store for `keys`; the keys it lacks.
    fn fill_from_shared(&mut self, keys: Vec<u128>) -> Vec<u128> {
        let Some(sh) = self.shared.as_mut() else { return keys };
        sh.asked += keys.len() as u64;
        match sh.store.get(&sh.model, self.dim, &keys) {
            Ok(rows) => {
                let mut lacking = Vec::new();
                for (k, row) in keys.into_iter().zip(rows) {
                    match row {
                        Some(v) => {
                            sh.found += 1;
                            self.memo.insert(k, v.into());
                        }
                        None => lacking.push(k),
                    }
                }
                lacking
            }
            Err(e) => {
                self.stop_sharing(&e);
                keys
            }
        }
    }

    /// Keep freshly encoded rows in the shared store.
    fn keep_shared(&mut self, keys: &[u128], rows: &[f32]) {
        let Some(sh) = self.shared.as_mut() else { return };
        if let Err(e) = sh.store.put(&sh.model, self.dim, keys, rows) {
            self.stop_sharing(&e);
        }
    }

    fn stop_sharing(&mut self, e: &lam_core::Error) {
        eprintln!("note: stopped using the shared embedding cache: {e}");
        self.shared = None;
    }

    /// Wrap `inner` and preload the cache `r` (a `lam-embeddings/1` stream
    /// of chunk lines; `name` for the report) when it was made by the same
    /// model. Lenient: see [`CachedEncoder::load_report`].
    pub fn with_reader(inner: E, r: impl BufRead, name: &Path) -> Self {
        let mut c = Self::new(inner);
        let loaded = load(r, &c.inner.info());
        c.take(loaded, name);
        c
    }

    fn take(&mut self, loaded: Loaded, name: &Path) {
        self.report = loaded.report;
        self.report.path = Some(name.to_path_buf());
        for (k, v, _) in loaded.entries {
            self.memo.insert(k, v.into_boxed_slice());
            if self.memo.full() {
                self.memo.age();
            }
        }
    }

    /// Wrap `inner` and preload the persistent cache `path` (a
    /// `lam-embeddings/1` file of chunk lines) when it exists and was made by
    /// the same model. The cache only ever saves work, so nothing in it stops
    /// a run: each entry carries a checksum, and a bad entry is skipped and
    /// counted, an incomplete last line ignored, the rest used. A file with
    /// dead entries is rewritten without them (temporary file, then rename); a
    /// file whose header is damaged is moved aside to `PATH.bad` and a fresh
    /// cache starts; another model's file is left alone and never appended
    /// to. What happened: [`CachedEncoder::load_report`].
    pub fn with_file(inner: E, path: &Path) -> Self {
        let mut c = Self::new(inner);
        c.report.path = Some(path.to_path_buf());
        if !path.is_file() {
            return c;
        }
        let f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                c.report.unusable = Some(e.to_string());
                return c;
            }
        };
        let loaded = load(std::io::BufReader::new(f), &c.inner.info());
        if loaded.bad_header {
            let aside = PathBuf::from(format!("{}.bad", path.display()));
            if std::fs::rename(path, &aside).is_ok() {
                c.report = loaded.report;
                c.report.path = Some(path.to_path_buf());
                c.report.moved_aside = Some(aside);
                return c;
            }
        }
        if loaded.header.is_none() {
            let why = loaded.report.unusable.clone().unwrap_or_default();
            c.refuse = Some((path.to_path_buf(), why));
        }
        let compact = loaded.header.is_some() && loaded.report.dead() > 0;
        let rewritten = if compact { rewrite(path, &loaded) } else { Ok(()) };
        c.take(loaded, path);
        match rewritten {
            Ok(()) => c.report.compacted = compact,
            Err(e) => c.report.compact_error = Some(e.to_string()),
        }
        c
    }

    /// What loading the cache found (entries used, unchecked, bad, torn,
    /// repeated; whether the file was rewritten or not used). Printable.
    pub fn load_report(&self) -> &CacheReport {
        &self.report
    }

    /// Append new embeddings to `path` whenever `every` of them are waiting,
    /// so an interrupted long run keeps what it encoded. A failed save is
    /// reported once and autosaving stops (the cache only ever saves work).
    pub fn autosave(mut self, path: &Path, every: usize) -> Self {
        self.autosave = Some((path.to_path_buf(), every.max(1)));
        self
    }

    /// Hold about `bytes` of embeddings at most (the least recently used
    /// are dropped first; a lookup after that encodes again), so a
    /// long-running process such as `lam serve` does not grow with every
    /// chunk it ever saw. Embeddings dropped before a [`CachedEncoder::save`]
    /// are saved first when autosaving ([`CachedEncoder::autosave`]), else
    /// they are lost to the file (the cache only ever saves work). Applies
    /// to what is already held too.
    pub fn bounded(mut self, bytes: usize) -> Self {
        let bound = (bytes / Memo::entry_bytes(self.dim)).max(2);
        self.memo.bound = Some(bound);
        if self.memo.len() > bound {
            let keep: Vec<(u128, Box<[f32]>)> = self.memo.new.drain().chain(self.memo.old.drain()).take(bound / 2).collect();
            self.memo.old = keep.into_iter().collect();
            self.fresh.retain(|k| self.memo.contains(k));
        }
        self
    }

    /// Bytes the embeddings held take (estimate: vectors, keys and table slots).
    pub fn heap_bytes(&self) -> usize {
        self.memo.len() * Memo::entry_bytes(self.dim) + self.fresh.capacity() * 16
    }

    /// Drop the older generation of a bounded memo once the newer is full,
    /// saving first when autosaving.
    fn age(&mut self) {
        if !self.memo.full() {
            return;
        }
        if let Some((path, _)) = &self.autosave {
            let path = path.clone();
            if let Err(e) = self.save(&path) {
                eprintln!("note: stopped saving the embedding cache {}: {e}", path.display());
                self.autosave = None;
            }
        }
        self.memo.age();
        let Memo { new, old, .. } = &self.memo;
        self.fresh.retain(|k| new.contains_key(k) || old.contains_key(k));
    }

    /// Number of embeddings held.
    pub fn len(&self) -> usize {
        self.memo.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.memo.len() == 0
    }

    /// Append the embeddings computed since the last save to `path`
    /// (creating it with its header), each line with its checksum, so a
    /// later run never re-encodes them. One write of whole lines; a file
    /// whose last line lost its newline gets one first.
    pub fn save(&mut self, path: &Path) -> std::io::Result<usize> {
        if self.fresh.is_empty() {
            return Ok(0);
        }
        if let Some((p, why)) = &self.refuse
            && p == path
        {
            return Err(std::io::Error::other(format!("not appending to {}: {why}", p.display())));
        }
        if let Some(dir) = path.parent() {
            lam_core::fsdir::create_private(dir)?;
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).read(true).open(path)?;
        let len = f.metadata()?.len();
        let n = self.fresh.len();
        let mut buf = Vec::with_capacity(n * (self.dim * 16 / 3 + 96));
        if len == 0 {
            let info = self.inner.info();
            let h = Header { format: crate::FORMAT.into(), model_id: info.model_id, dim: info.dim, max_tokens: info.max_tokens };
            serde_json::to_writer(&mut buf, &h)?;
            buf.push(b'\n');
        } else {
            use std::os::unix::fs::FileExt as _;
            let mut last = [0u8];
            f.read_exact_at(&mut last, len - 1)?;
            if last[0] != b'\n' {
                // A torn last line stays one bad line instead of swallowing the first new one.
                buf.push(b'\n');
            }
        }
        for k in &self.fresh {
            if let Some(v) = self.memo.get(k) {
                chunk_line(*k, v, true, &mut buf);
            }
        }
        // One write of whole lines: with O_APPEND, runs sharing the cache
        // append whole saves, never interleaved halves of lines.
        f.write_all(&buf)?;
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
            if self.memo.contains(k) {
                self.memo.touch(k);
            } else if seen.insert(*k) {
                todo.push(i);
            }
        }
        if !todo.is_empty() && self.shared.is_some() {
            let lacking: std::collections::HashSet<u128> = self.fill_from_shared(todo.iter().map(|&i| keys[i]).collect()).into_iter().collect();
            todo.retain(|&i| lacking.contains(&keys[i]));
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
            let fresh: Vec<u128> = todo.iter().map(|&i| keys[i]).collect();
            self.keep_shared(&fresh, &v);
        }
        for (k, row) in keys.iter().zip(out.chunks_exact_mut(d)) {
            row.copy_from_slice(self.memo.get(k).expect("every key of the batch is held until it returns"));
        }
        self.age();
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

    /// A bounded memo holds at most its bound, keeps what is used again,
    /// returns the same bits as ever, and saves before it drops when autosaving.
    #[test]
    fn a_bounded_memo_keeps_the_recently_used_within_its_bound() {
        let path = tmp("bounded");
        let per = Memo::entry_bytes(384);
        let mut plain = HashingEncoder::default();
        let mut c = CachedEncoder::new(HashingEncoder::default()).bounded(10 * per).autosave(&path, usize::MAX);
        let texts: Vec<Vec<u8>> = (0..100).map(|i| format!("text {i}").into_bytes()).collect();
        let (mut a, mut b) = (vec![0.0; 384], vec![0.0; 384]);
        for t in &texts {
            c.encode_batch(&[t.as_slice()], &mut a).unwrap();
            // The first text is used again and again: it stays.
            c.encode_batch(&[texts[0].as_slice()], &mut b).unwrap();
            assert!(c.len() <= 10, "{}", c.len());
            assert!(c.heap_bytes() <= 10 * per + 16 * 64);
        }
        assert_eq!(c.stats(), (99 + 1, 100), "the first text encoded once");
        plain.encode_batch(&[texts[99].as_slice()], &mut b).unwrap();
        assert_eq!(a, b);
        c.save(&path).unwrap();
        assert_eq!(CachedEncoder::with_file(HashingEncoder::default(), &path).len(), 100, "every embedding saved once");
        // A file larger than the bound loads within it.
        let loaded = CachedEncoder::with_file(HashingEncoder::default(), &path).bounded(10 * per);
        assert!(loaded.len() <= 10 && !loaded.is_empty());
        lam_core::testsuite::encoder(&mut CachedEncoder::new(HashingEncoder::default()).bounded(3 * per));
    }

    /// Two processes' encoders behind one shared store.
    #[derive(Clone, Default)]
    struct Both(std::sync::Arc<std::sync::Mutex<crate::MemEmbeddings>>);

    impl EmbeddingStore for Both {
        fn get(&mut self, model: &str, dim: usize, keys: &[u128]) -> Result<Vec<Option<Vec<f32>>>, Error> {
            self.0.lock().unwrap().get(model, dim, keys)
        }
        fn put(&mut self, model: &str, dim: usize, keys: &[u128], vectors: &[f32]) -> Result<(), Error> {
            self.0.lock().unwrap().put(model, dim, keys, vectors)
        }
    }

    struct Broken;

    impl EmbeddingStore for Broken {
        fn get(&mut self, _: &str, _: usize, _: &[u128]) -> Result<Vec<Option<Vec<f32>>>, Error> {
            Err(Error::Backend { what: "test", cause: "connection refused".into() })
        }
        fn put(&mut self, _: &str, _: usize, _: &[u128], _: &[f32]) -> Result<(), Error> {
            Err(Error::Backend { what: "test", cause: "connection refused".into() })
        }
    }

    #[test]
    fn a_shared_store_spares_the_second_process_every_forward_pass() {
        let store = Both::default();
        let texts: Vec<&[u8]> = vec![b"a b c", b"d e f", b"a b c"];
        let (mut a, mut b) = (vec![0.0; 3 * 384], vec![0.0; 3 * 384]);
        let mut first = CachedEncoder::new(HashingEncoder::default());
        first.share(Box::new(store.clone()));
        first.encode_batch(&texts, &mut a).unwrap();
        assert_eq!(first.stats(), (1, 2), "the first encodes both chunks");
        assert_eq!(store.0.lock().unwrap().len(), 2);
        let mut second = CachedEncoder::new(HashingEncoder::default());
        second.share(Box::new(store.clone()));
        second.encode_batch(&texts, &mut b).unwrap();
        assert_eq!(second.stats(), (3, 0), "the second encodes none");
        assert_eq!(second.shared_stats(), Some((2, 2)));
        assert_eq!(a, b, "the same bits");
        lam_core::testsuite::encoder(&mut second);
        // A store that fails costs only its work.
        let mut third = CachedEncoder::new(HashingEncoder::default());
        third.share(Box::new(Broken));
        third.encode_batch(&texts, &mut b).unwrap();
        assert_eq!((third.stats(), third.shared_stats()), ((1, 2), None));
        assert_eq!(a, b);
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

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("lam-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.join("c.lamemb")
    }

    /// A cache file of `n` distinct texts; returns the texts.
    fn make(path: &Path, n: usize) -> Vec<Vec<u8>> {
        let texts: Vec<Vec<u8>> = (0..n).map(|i| format!("cached text {i}").into_bytes()).collect();
        let mut c = CachedEncoder::with_file(HashingEncoder::default(), path);
        let refs: Vec<&[u8]> = texts.iter().map(|t| t.as_slice()).collect();
        let mut v = vec![0.0; n * 384];
        c.encode_batch(&refs, &mut v).unwrap();
        assert_eq!(c.save(path).unwrap(), n);
        texts
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path).unwrap().lines().map(str::to_string).collect()
    }

    #[test]
    fn every_entry_carries_a_checksum() {
        let path = tmp("sum");
        make(&path, 3);
        let l = lines(&path);
        assert_eq!(l.len(), 4);
        assert!(l[1..].iter().all(|l| l.contains("\"x\":\"")), "{l:?}");
        let c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        let r = c.load_report();
        assert_eq!((r.entries, r.unchecked, r.dead(), r.compacted), (3, 0, 0, false));
        assert_eq!(r.to_string(), "", "nothing to say about a clean cache");
    }

    #[test]
    fn a_flipped_character_costs_one_entry_and_the_file_is_compacted() {
        let path = tmp("flip");
        let texts = make(&path, 4);
        let mut l = lines(&path);
        // Change one base64 character of entry 2 (still valid base64, still a plausible vector).
        let e = l[2].find("\"e\":\"").unwrap() + 10;
        let ch = if &l[2][e..e + 1] == "A" { "B" } else { "A" };
        l[2].replace_range(e..e + 1, ch);
        std::fs::write(&path, l.join("\n") + "\n").unwrap();
        let mut c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        let r = c.load_report().clone();
        assert_eq!((r.entries, r.bad, r.compacted), (3, 1, true), "{r}");
        assert_eq!(r.first_bad.as_ref().unwrap().0, 3);
        assert!(r.first_bad.as_ref().unwrap().1.contains("checksum"), "{r}");
        assert!(r.to_string().contains("1 bad entries skipped") && r.to_string().contains("rewritten"), "{r}");
        assert_eq!(lines(&path).len(), 4, "rewritten without the bad entry");
        let refs: Vec<&[u8]> = texts.iter().map(|t| t.as_slice()).collect();
        let mut v = vec![0.0; 4 * 384];
        c.encode_batch(&refs, &mut v).unwrap();
        assert_eq!(c.stats(), (3, 1), "only the bad entry is encoded again");
        let mut plain = vec![0.0; 4 * 384];
        HashingEncoder::default().encode_batch(&refs, &mut plain).unwrap();
        assert_eq!(v, plain, "no damaged vector is used");
        let again = CachedEncoder::with_file(HashingEncoder::default(), &path);
        assert_eq!(again.load_report().dead(), 0);
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_the_next_save_starts_a_new_line() {
        let path = tmp("torn");
        let texts = make(&path, 3);
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..full.len() - 20]).unwrap();
        let c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        let r = c.load_report().clone();
        assert_eq!((r.entries, r.torn, r.compacted), (2, 1, true), "{r}");
        assert!(std::fs::read(&path).unwrap().ends_with(b"\n"));
        // A torn line left by another process after we loaded: save adds the newline first.
        let mut c = CachedEncoder::new(HashingEncoder::default());
        let mut v = vec![0.0; 384];
        c.encode_batch(&[texts[2].as_slice()], &mut v).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut f, b"{\"chunk\":\"00").unwrap();
        drop(f);
        c.save(&path).unwrap();
        let c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        let r = c.load_report();
        assert_eq!((r.entries, r.bad), (3, 1), "{r}");
    }

    #[test]
    fn entries_without_checksum_are_used_and_kept_as_they_are() {
        let path = tmp("legacy");
        make(&path, 2);
        let mut l = lines(&path);
        // An older lam wrote no `x`; add a repeated entry so the file is compacted.
        l[1] = l[1].split(",\"x\"").next().unwrap().to_string() + "}";
        l.push(l[2].clone());
        std::fs::write(&path, l.join("\n") + "\n").unwrap();
        let c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        let r = c.load_report().clone();
        assert_eq!((r.entries, r.unchecked, r.duplicates, r.compacted), (2, 1, 1, true), "{r}");
        let after = lines(&path);
        assert_eq!(after.len(), 3);
        assert_eq!(after[1], l[1], "the unchecked entry is not given a checksum it never had");
        assert_eq!(after[2], l[2]);
    }

    #[test]
    fn a_damaged_header_moves_the_file_aside_and_another_models_file_is_left_alone() {
        let path = tmp("header");
        make(&path, 2);
        let mut b = std::fs::read(&path).unwrap();
        b[3] = b'#';
        std::fs::write(&path, &b).unwrap();
        let mut c = CachedEncoder::with_file(HashingEncoder::default(), &path);
        let r = c.load_report().clone();
        assert!(r.unusable.as_ref().unwrap().contains("line 1"), "{r}");
        let aside = r.moved_aside.clone().unwrap();
        assert_eq!(std::fs::read(&aside).unwrap(), b, "kept, not destroyed");
        assert!(!path.exists());
        let mut v = vec![0.0; 384];
        c.encode_batch(&[b"fresh".as_slice()], &mut v).unwrap();
        c.save(&path).unwrap();
        assert_eq!(CachedEncoder::with_file(HashingEncoder::default(), &path).len(), 1);
        // Another model's cache: not used, never appended to, unchanged.
        let before = std::fs::read(&path).unwrap();
        let mut other = CachedEncoder::with_file(HashingEncoder::new(32, 8), &path);
        assert!(other.is_empty());
        assert!(other.load_report().unusable.as_ref().unwrap().contains("made by model"));
        let mut w = vec![0.0; 32];
        other.encode_batch(&[b"x".as_slice()], &mut w).unwrap();
        assert!(other.save(&path).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn the_strict_reader_refuses_a_checksum_that_does_not_hold() {
        let path = tmp("strict");
        make(&path, 2);
        let mut l = lines(&path);
        let x = l[2].find("\"x\":\"").unwrap() + 5;
        let ch = if &l[2][x..x + 1] == "0" { "1" } else { "0" };
        l[2].replace_range(x..x + 1, ch);
        let text = l.join("\n") + "\n";
        let e = crate::PrecomputedEncoder::read(text.as_bytes(), "f.lamemb").unwrap_err().to_string();
        assert!(e.starts_with("f.lamemb:3: checksum mismatch"), "{e}");
    }
}
