//! BERT-family sentence encoders on the CPU, loaded from a
//! sentence-transformers model directory: `config.json`, `model.safetensors`,
//! `tokenizer.json`, `sentence_bert_config.json`, `1_Pooling/config.json`.

use crate::Error as EncError;
use crate::forward::{self, Bert};
use lam_core::{Encoder, EncoderInfo, Error, normalize_in_place};
use rayon::prelude::*;
use std::ops::Range;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// How token embeddings become one vector (sentence-transformers `1_Pooling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over real (non-padding) tokens.
    Mean,
    /// The `[CLS]` token.
    Cls,
}

/// The transformer half of a BERT-family sentence encoder: token sequences
/// in, unit embeddings out. [`CpuForward`] (this crate's own pass on gemm),
/// `OrtForward` (ONNX Runtime, feature `ort`) and `CudaForward` (an NVIDIA
/// GPU, feature `cuda`) share everything else through [`BertFamily`] and its
/// [`Front`], so every backend cuts, tokenises and pools alike.
pub trait Forward: Send {
    /// Write the pooled, unit-normalised embeddings of `ids` (token ids with
    /// `[CLS]`/`[SEP]`, as [`BertFamily::token_ids`] gives them) into the rows
    /// of `out`, which holds exactly `ids.len()` rows of the model's width.
    fn embed(&mut self, front: &Front, ids: &[Vec<u32>], out: &mut [f32]) -> Result<(), Error>;
}

/// A BERT-family sentence encoder (all-MiniLM-L6-v2, bge-base-en-v1.5, ...):
/// the shared front end (configuration, tokenisation, chunking, pooling) and
/// a forward pass `F`. One `Encoder` implementation for every backend.
pub struct BertFamily<F> {
    pub(crate) front: Front,
    pub(crate) forward: F,
}

/// The BERT encoder on the CPU (the default encoder).
pub type BertEncoder = BertFamily<CpuForward>;

/// The CPU forward pass: sequences run independently (no padding), spread
/// over the thread pool `batch` sequences at a time, longest first.
pub struct CpuForward {
    model: Bert,
    batch: usize,
}

impl std::fmt::Debug for CpuForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuForward").field("batch", &self.batch).finish_non_exhaustive()
    }
}

impl Forward for CpuForward {
    fn embed(&mut self, front: &Front, ids: &[Vec<u32>], out: &mut [f32]) -> Result<(), Error> {
        let d = front.hidden;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        for group in order.chunks(self.batch) {
            let rows: Vec<(usize, Result<Vec<f32>, lam_core::VectorFault>)> = group
                .par_iter()
                .map(|&i| {
                    let mut row = vec![0.0f32; d];
                    let r = front.pool(&self.model.forward(&ids[i]), &mut row).map(|()| row);
                    (i, r)
                })
                .collect();
            for (i, r) in rows {
                let row = r.map_err(|reason| Error::InvalidVector { what: format!("sequence {i}"), reason })?;
                out[i * d..(i + 1) * d].copy_from_slice(&row);
            }
        }
        Ok(())
    }
}

/// Everything of a sentence-transformers encoder but the transformer:
/// configuration, tokenisation, chunking and pooling, shared by every
/// [`Forward`] through [`BertFamily`].
pub struct Front {
    tokenizer: Tokenizer,
    pub(crate) info: EncoderInfo,
    pub(crate) pooling: Pooling,
    pub(crate) max_seq_length: usize,
    pub(crate) max_pos: usize,
    pub(crate) hidden: usize,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front").field("info", &self.info).field("pooling", &self.pooling).field("max_seq_length", &self.max_seq_length).finish_non_exhaustive()
    }
}

impl<F: std::fmt::Debug> std::fmt::Debug for BertFamily<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertFamily").field("info", &self.front.info).field("pooling", &self.front.pooling).field("forward", &self.forward).finish()
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, EncError> {
    let s = std::fs::read(path).map_err(|source| EncError::Io { path: path.display().to_string(), source })?;
    serde_json::from_slice(&s).map_err(|e| EncError::Format { path: path.display().to_string(), line: e.line(), message: e.to_string() })
}

fn model_err(path: &Path, e: impl std::fmt::Display) -> EncError {
    EncError::Model { path: path.display().to_string(), message: e.to_string() }
}

impl BertFamily<CpuForward> {
    /// Load a model directory. Every missing or corrupt file is an error naming it.
    pub fn load(dir: &Path) -> Result<Self, EncError> {
        let (mut front, config) = Front::load(dir, Path::new("model.safetensors"))?;
        let weights = dir.join("model.safetensors");
        let model = forward::load(&weights, &config).map_err(|e| model_err(&weights, e))?;
        front.max_pos = front.max_pos.min(model.max_pos);
        // The model id carries a fingerprint of the weights.
        front.info.model_id = format!("{}@{:08x}", front.info.model_id, model.fingerprint >> 32);
        Ok(Self::new(front, CpuForward { model, batch: 32 }))
    }

    /// Texts per forward pass.
    pub fn set_batch_size(&mut self, n: usize) {
        self.forward.batch = n.max(1);
    }
}

impl Front {
    /// Read the configuration and tokenizer of `dir`; `weights` (relative to
    /// `dir`, or absolute) must exist too.
    /// Returns `config.json` for the caller's transformer; `info.model_id` is
    /// the directory's name, without a fingerprint.
    pub(crate) fn load(dir: &Path, weights: &Path) -> Result<(Self, serde_json::Value), EncError> {
        let f = |n: &str| -> PathBuf { dir.join(n) };
        for p in [f("config.json"), dir.join(weights), f("tokenizer.json")] {
            if !p.is_file() {
                return Err(model_err(&p, "missing (is this a sentence-transformers model directory?)"));
            }
        }
        let cfg_path = f("config.json");
        let config = read_json(&cfg_path)?;
        let hidden = config.get("hidden_size").and_then(serde_json::Value::as_u64).ok_or_else(|| model_err(&cfg_path, "no hidden_size"))? as usize;
        let max_pos = config.get("max_position_embeddings").and_then(serde_json::Value::as_u64).unwrap_or(512) as usize;
        let sbert = f("sentence_bert_config.json");
        let max_seq_length = if sbert.is_file() {
            read_json(&sbert)?.get("max_seq_length").and_then(serde_json::Value::as_u64).map_or(max_pos, |v| v as usize)
        } else {
            max_pos
        }
        .min(max_pos);
        let pool_path = f("1_Pooling/config.json");
        let pooling = if pool_path.is_file() {
            let p = read_json(&pool_path)?;
            let on = |k: &str| p.get(k).and_then(serde_json::Value::as_bool).unwrap_or(false);
            match (on("pooling_mode_cls_token"), on("pooling_mode_mean_tokens")) {
                (true, false) => Pooling::Cls,
                (false, true) => Pooling::Mean,
                _ => return Err(model_err(&pool_path, "only one of CLS or mean pooling is supported")),
            }
        } else {
            Pooling::Mean
        };
        let tok_path = f("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| model_err(&tok_path, e))?;
        // The shipped tokenizer.json truncates and pads to 128: chunking decides lengths here.
        tokenizer.with_truncation(None).map_err(|e| model_err(&tok_path, e))?;
        tokenizer.with_padding(None);
        // The directory's name (its parent's for the pip layout `.../model`;
        // the default model's packages, wherever pip put them, by the model's
        // name, as `$LAM_HOME/models/all-MiniLM-L6-v2` names it).
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("bert");
        let name = if name == "model" { dir.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("bert") } else { name };
        let name = if crate::MODEL_MODULES.contains(&name) { "all-MiniLM-L6-v2" } else { name };
        let front = Self {
            tokenizer,
            info: EncoderInfo { model_id: name.to_string(), dim: hidden, max_tokens: max_seq_length.saturating_sub(2).max(1) },
            pooling,
            max_seq_length,
            max_pos,
            hidden,
        };
        Ok((front, config))
    }

    pub(crate) fn set_max_seq_length(&mut self, n: usize) {
        self.max_seq_length = n.max(3);
        self.info.max_tokens = self.max_seq_length - 2;
    }

    pub(crate) fn encode_ids(&self, text: &[u8]) -> Result<Vec<u32>, Error> {
        let max = self.max_seq_length.min(self.max_pos);
        let s = String::from_utf8_lossy(text);
        let enc = self.tokenizer.encode(s.as_ref(), true).map_err(|e| self.err(e))?;
        let mut ids = enc.get_ids().to_vec();
        if ids.len() > max {
            // Same as sentence-transformers: keep the first max-1 tokens and the final [SEP].
            let sep = *ids.last().expect("non-empty");
            ids.truncate(max - 1);
            ids.push(sep);
        }
        Ok(ids)
    }

    /// WordPiece tokens of `text` (no special tokens) as byte spans of the
    /// original bytes, each with whether it continues the previous word.
    fn tokens(&self, text: &[u8]) -> Result<Vec<(Range<usize>, bool)>, Error> {
        // Decode lossily for the tokenizer, mapping every byte of the decoded
        // string back to the original bytes (an invalid byte becomes U+FFFD).
        let mut s = String::with_capacity(text.len());
        let mut orig = Vec::with_capacity(text.len() + 1);
        let mut pos = 0;
        for chunk in text.utf8_chunks() {
            let v = chunk.valid();
            s.push_str(v);
            orig.extend(pos..pos + v.len());
            pos += v.len();
            for _ in chunk.invalid() {
                s.push('\u{FFFD}');
                orig.extend([pos, pos, pos]);
                pos += 1;
            }
        }
        orig.push(pos);
        let enc = self.tokenizer.encode(s.as_str(), false).map_err(|e| self.err(e))?;
        let mut out: Vec<(Range<usize>, bool)> = Vec::with_capacity(enc.get_ids().len());
        for (tok, &(a, b)) in enc.get_tokens().iter().zip(enc.get_offsets()) {
            let (a, b) = (orig[a.min(s.len())], orig[b.min(s.len())]);
            let cont = tok.starts_with("##");
            // Keep spans ordered and disjoint even where normalisation maps
            // several tokens onto one character.
            let a = out.last().map_or(a, |l| a.max(l.0.end));
            // Several pieces of one character share its span: the later ones
            // are zero-width here (they still count as tokens when chunking).
            out.push((a..b.max(a), cont));
        }
        Ok(out)
    }

    pub(crate) fn err(&self, e: impl std::fmt::Display) -> Error {
        Error::Encoder { model: self.info.model_id.clone(), cause: e.to_string().into() }
    }

    /// Pool the hidden states `hs` of one sequence's real tokens (row-major,
    /// `hidden` wide) into `row` and unit-normalise it.
    pub(crate) fn pool(&self, hs: &[f32], row: &mut [f32]) -> Result<(), lam_core::VectorFault> {
        let d = self.hidden;
        match self.pooling {
            Pooling::Cls => row.copy_from_slice(&hs[..d]),
            Pooling::Mean => {
                row.fill(0.0);
                for tok in hs.chunks_exact(d) {
                    for (r, v) in row.iter_mut().zip(tok) {
                        *r += v;
                    }
                }
                let n = (hs.len() / d) as f32;
                for r in row.iter_mut() {
                    *r /= n;
                }
            }
        }
        normalize_in_place(row)
    }

    pub(crate) fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        out.clear();
        // Zero-width pieces (later pieces of one character) are omitted.
        out.extend(self.tokens(text)?.into_iter().map(|(r, _)| r).filter(|r| r.start < r.end));
        Ok(())
    }

    pub(crate) fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        // Cut only where a token starts a word ("##" pieces never start a
        // chunk), so each chunk tokenises alone to exactly its own tokens;
        // pack words greedily into at most `max_tokens` tokens.
        out.clear();
        let toks = self.tokens(text)?;
        if toks.is_empty() {
            return Ok(());
        }
        let max = self.info.max_tokens;
        let mut start = 0usize;
        let mut used = 0usize;
        let mut k = 0;
        while k < toks.len() {
            let mut e = k + 1;
            while e < toks.len() && toks[e].1 {
                e += 1;
            }
            let word = e - k;
            if used > 0 && used + word > max {
                out.push(start..toks[k].0.start);
                start = toks[k].0.start;
                used = 0;
            }
            // A single word longer than a chunk is left whole (the encoder
            // truncates it, as the reference does); WordPiece maps words over
            // 100 characters to one [UNK], so this does not arise in practice.
            used += word;
            k = e;
        }
        out.push(start..text.len());
        Ok(())
    }
}

impl<F: Forward> BertFamily<F> {
    /// A front end and a forward pass loaded for the same model.
    pub(crate) fn new(front: Front, forward: F) -> Self {
        Self { front, forward }
    }

    /// Longest input in tokens including `[CLS]`/`[SEP]`; longer inputs are truncated.
    pub fn max_seq_length(&self) -> usize {
        self.front.max_seq_length
    }

    /// Set `max_seq_length` (at most the model's position table); chunks hold two fewer tokens.
    pub fn set_max_seq_length(&mut self, n: usize) {
        self.front.set_max_seq_length(n.min(self.front.max_pos));
    }

    /// Pooling mode.
    pub fn pooling(&self) -> Pooling {
        self.front.pooling
    }

    /// Token ids of `text` with `[CLS]`/`[SEP]`, truncated to `max_seq_length`
    /// the way sentence-transformers truncates.
    pub fn token_ids(&self, text: &[u8]) -> Result<Vec<u32>, Error> {
        self.front.encode_ids(text)
    }

    /// Embed already tokenised sequences (rows of `out`, in order); for
    /// benchmarks that exclude tokenisation.
    pub fn embed_token_ids(&mut self, ids: &[Vec<u32>], out: &mut [f32]) -> Result<(), Error> {
        let d = self.front.hidden;
        if out.len() != ids.len() * d {
            return Err(Error::Dimension { expected: ids.len() * d, got: out.len() });
        }
        self.forward.embed(&self.front, ids, out)
    }

    /// The forward pass (its own settings: batch size, device, precision).
    pub fn forward(&self) -> &F {
        &self.forward
    }
}

impl<F: Forward> Encoder for BertFamily<F> {
    fn info(&self) -> EncoderInfo {
        self.front.info.clone()
    }

    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        self.front.token_spans(text, out)
    }

    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        self.front.chunks(text, out)
    }

    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        let d = self.front.hidden;
        if out.len() != texts.len() * d {
            return Err(Error::Dimension { expected: texts.len() * d, got: out.len() });
        }
        // Tokenisation is independent per text: spread it over the thread pool.
        let front = &self.front;
        let ids: Vec<Vec<u32>> = texts.par_iter().map(|t| front.encode_ids(t)).collect::<Result<_, _>>()?;
        self.forward.embed(&self.front, &ids, out)
    }
}
