//! The five traits of the design card. Every method works on batches and
//! caller-owned buffers; `dyn` dispatch is meant per batch or per session,
//! never per element.

use crate::{Error, ObsId, Record, SessionId};
use std::ops::{ControlFlow, Range};

/// What an encoder is, as the pipeline needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncoderInfo {
    /// Stable model id; part of every embedding-cache key.
    pub model_id: String,
    /// Embedding dimension `D`.
    pub dim: usize,
    /// Most content tokens one chunk may hold so that the encoder never
    /// truncates it (`max_seq_length - 2` for BERT-family models).
    pub max_tokens: usize,
}

/// Turns chunks of observation text into unit embeddings.
///
/// Implementations (`lam-encode`): `BertEncoder` (all-MiniLM-L6-v2 on the
/// CPU), `OrtEncoder` (ONNX Runtime, feature `ort`), `CudaEncoder` (feature
/// `cuda`), the model-free `HashingEncoder`, `PrecomputedEncoder` (vectors
/// from a file) and `CachedEncoder` (any of them behind an embedding cache).
pub trait Encoder: Send {
    /// Model id, dimension and chunk limit.
    fn info(&self) -> EncoderInfo;

    /// Byte spans of the encoder's tokens in `text`, in order, clearing `out`
    /// first. Spans index the original bytes, which need not be valid UTF-8.
    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error>;

    /// Encode `texts` (each at most `max_tokens` tokens) into `out`, which has
    /// exactly `texts.len() * dim` values: row `i` is the unit embedding of
    /// `texts[i]`. Must refuse to produce NaN, infinite or zero vectors.
    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error>;

    /// Cut `text` into chunks of at most `max_tokens` tokens at token
    /// boundaries (see [`crate::chunk_spans`]), clearing `out` first. Encoders
    /// whose chunking is given (precomputed files) override this.
    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        let mut toks = Vec::new();
        self.token_spans(text, &mut toks)?;
        crate::chunk_spans(&toks, self.info().max_tokens, text.len(), out);
        Ok(())
    }
}

impl<E: Encoder + ?Sized> Encoder for Box<E> {
    fn info(&self) -> EncoderInfo {
        (**self).info()
    }
    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        (**self).token_spans(text, out)
    }
    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        (**self).encode_batch(texts, out)
    }
    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        (**self).chunks(text, out)
    }
}

/// Proposes retained chunks that may lie within `delta` of a query.
///
/// The index holds ids only; the caller keeps the full-precision vectors and
/// verifies every candidate with exact L2. Missing a candidate costs removal,
/// never the substitution bound.
pub trait CandidateIndex: Send {
    /// Short name for reports ("banded r=4 rel=0.2", "exhaustive").
    fn describe(&self) -> String;

    /// Add retained vectors with their ids; `vectors.len() == ids.len() * dim`.
    fn insert_batch(&mut self, ids: &[u32], vectors: &[f32]);

    /// Candidate ids for `query`, ascending and without duplicates, into `out`
    /// (cleared first).
    fn candidates(&self, query: &[f32], out: &mut Vec<u32>);

    /// Offers the candidates for `query` to `visit` one at a time, in the
    /// order [`candidates`](Self::candidates) gives them, until `visit`
    /// returns `ControlFlow::Break`. `scratch` is working memory. The default
    /// collects all of them first; an index that can produce them lazily
    /// overrides it, so a search that stops at its first hit does not pay for
    /// the rest (admission in long sessions).
    fn visit_candidates(&self, query: &[f32], scratch: &mut Vec<u32>, visit: &mut dyn FnMut(u32) -> ControlFlow<()>) {
        self.candidates(query, scratch);
        for &c in scratch.iter() {
            if visit(c).is_break() {
                return;
            }
        }
    }

    /// Number of ids held.
    fn len(&self) -> usize;

    /// Bytes the index holds on the heap, from its capacities (what a
    /// memory budget such as `lam serve --max-memory` counts).
    fn heap_bytes(&self) -> usize;

    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Shape of a batch of embeddings held by a codec stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Number of vectors.
    pub rows: usize,
    /// Dimension of each vector.
    pub dim: usize,
}

/// Stores batches of retained embeddings as bytes (L2). Implementations
/// (`lam-codec`): `Codec` (the error-bounded Szp codec and the plain ones on
/// the CPU, `lam_codec::name`), the GPU Szp codecs (features `cuda`, `rocm`)
/// and `Cuszp` (the cuSZp library through FFI, feature `cuszp`).
pub trait ByteCodec: Send + Sync {
    /// Codec name as written in streams and reports.
    fn name(&self) -> &str;
    /// Encode `values` (`shape.rows * shape.dim` floats), appending to `out`.
    fn encode(&self, values: &[f32], shape: Shape, out: &mut Vec<u8>) -> Result<(), Error>;
    /// Decode a stream, appending values to `out`; returns the shape.
    fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<Shape, Error>;
}

impl<C: ByteCodec + ?Sized> ByteCodec for Box<C> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn encode(&self, values: &[f32], shape: Shape, out: &mut Vec<u8>) -> Result<(), Error> {
        (**self).encode(values, shape, out)
    }
    fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<Shape, Error> {
        (**self).decode(bytes, out)
    }
}

/// Immutable metadata of one archived observation (ARC "ObsStore record"
/// without its body). Recall bookkeeping is not part of it: it lives with the
/// view, apart from the immutable payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObsMeta {
    /// Full content id: SHA-1 over (action, 0x1F, observation).
    pub id: ObsId,
    /// The visible id (without `§`): the shortest prefix (4 hex or more) with
    /// which no other id of its id space begins (`lam_core::id`: one space
    /// for the observations of every session of a store).
    pub shown: String,
    /// The action signature that produced the observation.
    pub action: String,
    /// Return code, when recorded.
    pub returncode: Option<i32>,
    /// Creation step: the record index of the first occurrence in its session.
    pub step: u32,
    /// Observation length in bytes.
    pub bytes: u64,
    /// Observation length in the model's tokens (as counted by the caller at append).
    pub tokens: u32,
    /// Fixed head preview: see [`previews`].
    pub head: Vec<u8>,
    /// Fixed tail preview: see [`previews`].
    pub tail: Vec<u8>,
}

/// Largest head (and tail) preview, in bytes.
pub const PREVIEW_BYTES: usize = 160;

/// Byte ranges of the fixed head and tail previews of `obs`: the head is the
/// first [`PREVIEW_BYTES`] bytes and the tail the last [`PREVIEW_BYTES`] bytes
/// not already in the head, both shrunk to UTF-8 character boundaries where
/// the text is valid there (invalid bytes are cut as bytes). Every store uses
/// this one rule, so previews are a pure function of the observation.
pub fn previews(obs: &[u8]) -> (Range<usize>, Range<usize>) {
    let is_cont = |b: u8| b & 0xC0 == 0x80;
    let mut h = obs.len().min(PREVIEW_BYTES);
    // Back off over at most 3 continuation bytes so a character is not split.
    let mut k = 0;
    while h < obs.len() && h > 0 && is_cont(obs[h]) && k < 3 {
        h -= 1;
        k += 1;
    }
    let mut t = obs.len().saturating_sub(PREVIEW_BYTES).max(h);
    let mut k = 0;
    while t < obs.len() && t > h && is_cont(obs[t]) && k < 3 {
        t += 1;
        k += 1;
    }
    (0..h, t..obs.len())
}

/// An append-only, content-addressed archive of observations (ARC).
///
/// Records live in sessions: `get` and `meta` answer for the session's own
/// records, and an id resolves to the record of the session shown exactly as
/// it, else the earliest whose id begins with it. Visible ids follow
/// `lam_core::id`: the observations of every session of a store share one id
/// space, so an exact visible id names one observation in the whole store.
/// Appending the same (action, observation) twice in a session returns the
/// first record's metadata; nothing is ever overwritten.
pub trait ObsStore {
    /// Archive `record` verbatim in `session` (`tokens`: its length in the
    /// model's tokens); returns its metadata, with the visible id.
    fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, Error>;
    /// Exact bytes of the observation shown as `shown` (no `§`) in `session`.
    fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, Error>;
    /// Metadata of the observation shown as `shown` in `session`.
    fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, Error>;
    /// Visible ids of `session`, in creation order.
    fn ids(&self, session: &SessionId) -> Result<Vec<String>, Error>;
    /// Visible ids of `session` created after the one shown as `after`, in
    /// creation order (all of them when `after` is `None` or not in the
    /// session): what a reader that has read up to `after` has not read
    /// yet. Stores that keep ids elsewhere (PostgreSQL) read only those.
    fn ids_after(&self, session: &SessionId, after: Option<&str>) -> Result<Vec<String>, Error> {
        let mut ids = self.ids(session)?;
        let from = after.and_then(|a| ids.iter().position(|x| x == a)).map_or(0, |k| k + 1);
        Ok(ids.split_off(from))
    }
    /// Sessions that hold at least one observation, sorted.
    fn sessions(&self) -> Result<Vec<SessionId>, Error>;
    /// Make every acknowledged append durable under the store's policy now
    /// (stores that acknowledge only durable appends do nothing).
    fn flush(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// Append `record` as the first observation of `session` unless the
    /// session already begins with a different observation: then `Ok(None)`
    /// and nothing is written. A session that begins with the same
    /// observation is claimed again (the same run archived twice). Stores
    /// with more than one writer (PostgreSQL across hosts) check and append
    /// atomically; this default is atomic for a store with one writer.
    fn claim(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<Option<ObsMeta>, Error> {
        if let Some(first) = self.ids(session)?.first() {
            let id = ObsId::of(record.action.as_bytes(), &record.observation);
            if self.meta(session, first)?.is_none_or(|m| m.id != id) {
                return Ok(None);
            }
        }
        self.append(session, record, tokens).map(Some)
    }
}

impl<S: ObsStore + ?Sized> ObsStore for Box<S> {
    fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, Error> {
        (**self).append(session, record, tokens)
    }
    fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, Error> {
        (**self).get(session, shown)
    }
    fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, Error> {
        (**self).meta(session, shown)
    }
    fn ids(&self, session: &SessionId) -> Result<Vec<String>, Error> {
        (**self).ids(session)
    }
    fn ids_after(&self, session: &SessionId, after: Option<&str>) -> Result<Vec<String>, Error> {
        (**self).ids_after(session, after)
    }
    fn sessions(&self) -> Result<Vec<SessionId>, Error> {
        (**self).sessions()
    }
    fn flush(&mut self) -> Result<(), Error> {
        (**self).flush()
    }
    fn claim(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<Option<ObsMeta>, Error> {
        (**self).claim(session, record, tokens)
    }
}

impl<S: ObsStore + ?Sized> ObsStore for &mut S {
    fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, Error> {
        (**self).append(session, record, tokens)
    }
    fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, Error> {
        (**self).get(session, shown)
    }
    fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, Error> {
        (**self).meta(session, shown)
    }
    fn ids(&self, session: &SessionId) -> Result<Vec<String>, Error> {
        (**self).ids(session)
    }
    fn ids_after(&self, session: &SessionId, after: Option<&str>) -> Result<Vec<String>, Error> {
        (**self).ids_after(session, after)
    }
    fn sessions(&self) -> Result<Vec<SessionId>, Error> {
        (**self).sessions()
    }
    fn flush(&mut self) -> Result<(), Error> {
        (**self).flush()
    }
    fn claim(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<Option<ObsMeta>, Error> {
        (**self).claim(session, record, tokens)
    }
}

/// Counts a model's tokens. The view policies bound prompts with it; the
/// facade supplies cl100k_base, tests may supply simpler counters.
///
/// Views add up the counts of their entries, so an implementation must be
/// additive where a text ending in a newline meets one that starts with a
/// non-whitespace byte: `count(a + b) == count(a) + count(b)` there (true of
/// cl100k_base, whose pre-tokenizer never joins such a pair). A line holding
/// a printable ASCII byte (`0x21..=0x7e`) counts at least one token no other
/// line shares, so a text counts at least as many tokens as it has such lines
/// (true of cl100k_base, whose pre-tokens never hold visible characters of
/// two lines); stubs rely on it (`stub::worth_replacing`).
pub trait TokenCounter: Send + Sync {
    /// Tokens of `text` (invalid UTF-8 counted as the implementation documents).
    fn count(&self, text: &[u8]) -> usize;
    /// Byte spans of the tokens of `text`, in order and covering it exactly,
    /// into `out` (cleared first). Used to cut exact recall chunks.
    fn spans(&self, text: &[u8], out: &mut Vec<Range<usize>>);
}

/// Embeddings shared beyond one process (replicas of a proxy, runs on other
/// hosts), by model and chunk content: the store behind an encoder's memo,
/// so a chunk another process encoded costs a lookup, not a forward pass.
///
/// Keys are content hashes of a chunk's exact bytes (`xxh3_128`, as the
/// encoder's memo keys them) within one `model` (the encoder's
/// `EncoderInfo::model_id`, whose digest names the weights). The first
/// writer of a key wins: a later `put` of a key that holds a sound entry
/// leaves it. An entry that does not verify (damaged where it is kept) is
/// never returned: `get` answers `None` for it, and the next `put` of the
/// key replaces it. Conformance: `testsuite::embedding_store`.
pub trait EmbeddingStore: Send {
    /// The vectors of `keys` (each `dim` values) under `model`, in the order
    /// asked; `None` where absent, of another dimension, or not verified.
    fn get(&mut self, model: &str, dim: usize, keys: &[u128]) -> Result<Vec<Option<Vec<f32>>>, Error>;
    /// Keep `vectors` (`keys.len() * dim` values, row `i` for `keys[i]`)
    /// under `model`.
    fn put(&mut self, model: &str, dim: usize, keys: &[u128], vectors: &[f32]) -> Result<(), Error>;
}

impl std::fmt::Debug for dyn EmbeddingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EmbeddingStore")
    }
}

impl std::fmt::Debug for dyn TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCounter")
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for &T {
    fn count(&self, text: &[u8]) -> usize {
        (**self).count(text)
    }
    fn spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) {
        (**self).spans(text, out)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for std::sync::Arc<T> {
    fn count(&self, text: &[u8]) -> usize {
        (**self).count(text)
    }
    fn spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) {
        (**self).spans(text, out)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Box<T> {
    fn count(&self, text: &[u8]) -> usize {
        (**self).count(text)
    }
    fn spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) {
        (**self).spans(text, out)
    }
}

/// One completed agent turn: the model's thought, then its action and observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Free text the model wrote before its action (may be empty).
    pub thought: String,
    /// The action and its observation.
    pub record: Record,
}

/// One rendered prompt: what a model call would be sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The prompt text.
    pub text: String,
    /// Its tokens, as the policy's counter counts them (the sum of its entries').
    pub tokens: usize,
    /// The policy's bound `L`, when it has one.
    pub limit: Option<usize>,
    /// Ids (`§id` without the `§`) the view cites in place of observations,
    /// oldest first; each resolves with [`ViewPolicy::recall`].
    pub citations: Vec<String>,
    /// Recalled parts materialised in the view, as `id k/m`.
    pub recalled: Vec<String>,
}

/// Builds the prompt the model sees from a session's history (ARC and the
/// baselines compared with it). Turns arrive in order; `render` is called
/// before every model call.
///
/// An agent loop calls [`ViewPolicy::act`] with each action before running
/// it: a view command (`_recall §id`, for views that have them) is answered
/// and recorded by the view, and the loop sends the answer to the model
/// instead of running the action. Otherwise the loop runs the action and
/// records the completed turn with [`ViewPolicy::push`].
pub trait ViewPolicy {
    /// Short name for reports ("arc", "window(5)", "masking(10)", "full").
    fn name(&self) -> String;
    /// Answer (and record) `action` when it is a command of this view;
    /// `None` leaves it to the environment. Views without commands return `None`.
    fn act(&mut self, thought: &str, action: &str) -> Result<Option<String>, Error> {
        let _ = (thought, action);
        Ok(None)
    }
    /// Record one completed turn; a turn whose action is a command of this
    /// view is answered by the view (as [`ViewPolicy::act`]) instead.
    fn push(&mut self, turn: &Turn) -> Result<(), Error>;
    /// Render the prompt for the next model call. Bounded policies never
    /// return more than their limit; failing to fit the fixed prefix is an error.
    fn render(&mut self) -> Result<Rendered, Error>;
    /// Exact bytes of the observation a citation (`id`, no `§`) stands for;
    /// `None` for an id the view does not know. Views that cite nothing keep the default.
    fn recall(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        let _ = id;
        Ok(None)
    }
}
