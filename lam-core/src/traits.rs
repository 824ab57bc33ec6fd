//! The five traits of the design card. Every method works on batches and
//! caller-owned buffers; `dyn` dispatch is meant per batch or per session,
//! never per element.

use crate::{Error, ObsId, Record, SessionId};
use std::ops::Range;

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
/// Implementations: the model-free hashing encoder and precomputed files in
/// `lam-encode` today; neural encoders (candle, ONNX Runtime) in their own issue.
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

    /// Number of ids held.
    fn len(&self) -> usize;

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

/// Stores batches of retained embeddings as bytes (L2). Final shape and
/// implementations: the codec issue (`lam-codec`).
pub trait ByteCodec: Send + Sync {
    /// Codec name as written in streams and reports.
    fn name(&self) -> &str;
    /// Encode `values` (`shape.rows * shape.dim` floats), appending to `out`.
    fn encode(&self, values: &[f32], shape: Shape, out: &mut Vec<u8>) -> Result<(), Error>;
    /// Decode a stream, appending values to `out`; returns the shape.
    fn decode(&self, bytes: &[u8], out: &mut Vec<f32>) -> Result<Shape, Error>;
}

/// An append-only, content-addressed archive of observations (ARC). Final
/// shape and implementations: the ARC issue (`arc-store`).
pub trait ObsStore {
    /// Archive a record verbatim in `session`; returns its content id.
    /// Appending the same content twice returns the same id.
    fn append(&mut self, session: &SessionId, record: &Record) -> Result<ObsId, Error>;
    /// Exact bytes of an archived observation of `session`, if present there.
    fn get(&self, session: &SessionId, id: &ObsId) -> Result<Option<Vec<u8>>, Error>;
}

/// Builds the bounded prompt view from a session's history (ARC). Final shape
/// and implementations: the ARC issue (`arc-view`).
pub trait ViewPolicy {
    /// Render the view of `history` within `budget_tokens`, appending it to `out`;
    /// returns the view's token count. Failing to fit the fixed prefix is an error.
    fn render(&mut self, history: &[Record], budget_tokens: usize, out: &mut Vec<u8>) -> Result<usize, Error>;
}
