//! The ONNX Runtime encoder: the tokenisation, chunking and pooling of
//! [`crate::BertEncoder`] with the transformer run by ONNX Runtime.
//!
//! The library is loaded at run time (`ort`'s `load-dynamic`), so this
//! compiles everywhere; it is found through `ORT_DYLIB_PATH`, else at
//! `$LAM_HOME/lib/libonnxruntime.so` where `scripts/install-onnx.sh` links the
//! `libonnxruntime.so` of the pinned PyPI `onnxruntime` wheel. The same script
//! builds `onnx/model.onnx` inside the model directory from its
//! `model.safetensors` (`scripts/build_onnx.py`, no torch).

use crate::Error as EncError;
use crate::bert::{BertFamily, Forward, Front};
use ::ort::session::Session;
use ::ort::session::builder::GraphOptimizationLevel;
use ::ort::value::Tensor;
use lam_core::Error;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The command that installs ONNX Runtime and builds `onnx/model.onnx`.
pub const ORT_INSTALL_HINT: &str = "bash scripts/install-onnx.sh";

/// Where [`OrtEncoder::load`] looks for the ONNX graph inside a model directory.
pub const ONNX_MODEL_PATH: &str = "onnx/model.onnx";

/// The ONNX Runtime library: `$ORT_DYLIB_PATH`, else `$LAM_HOME/lib/libonnxruntime.so`.
pub fn ort_dylib_path() -> PathBuf {
    match std::env::var_os("ORT_DYLIB_PATH") {
        Some(p) if !p.is_empty() => p.into(),
        _ => crate::lam_home().join("lib/libonnxruntime.so"),
    }
}

/// A BERT-family encoder whose transformer runs in ONNX Runtime (CPU).
///
/// Sequences are padded to the longest of each batch of `batch_size` (longest
/// first) and masked; pooling uses real tokens only, as [`crate::BertEncoder`]
/// does.
pub type OrtEncoder = BertFamily<OrtForward>;

/// The transformer in ONNX Runtime: padded calls of `batch` sequences,
/// longest first.
pub struct OrtForward {
    session: Session,
    batch: usize,
    token_types: bool,
    output: String,
}

impl std::fmt::Debug for OrtForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtForward").field("batch", &self.batch).field("output", &self.output).finish_non_exhaustive()
    }
}

fn model_err(path: &Path, e: impl std::fmt::Display) -> EncError {
    EncError::Model { path: path.display().to_string(), message: e.to_string() }
}

/// Load the library once per process (ONNX Runtime allows one environment).
fn environment() -> Result<&'static ::ort::environment::Environment, EncError> {
    static ENV: OnceLock<Result<::ort::environment::Environment, (PathBuf, String)>> = OnceLock::new();
    let env = ENV.get_or_init(|| {
        let lib = ort_dylib_path();
        if !lib.is_file() {
            return Err((lib, format!("ONNX Runtime library not found (set ORT_DYLIB_PATH to a libonnxruntime.so, or run `{ORT_INSTALL_HINT}`)")));
        }
        let builder = ::ort::init_from(&lib).map_err(|e| (lib.clone(), e.to_string()))?;
        builder.with_name("lam").build().map_err(|e| (lib, e.to_string()))
    });
    env.as_ref().map_err(|(p, m)| model_err(p, m))
}

impl BertFamily<OrtForward> {
    /// Load a sentence-transformers model directory with its ONNX graph at
    /// `dir/onnx/model.onnx`.
    pub fn load(dir: &Path) -> Result<Self, EncError> {
        Self::load_with(dir, &dir.join(ONNX_MODEL_PATH))
    }

    /// Load the tokenizer and pooling of `dir` and the ONNX graph at `onnx`
    /// (inputs `input_ids`, `attention_mask`, optionally `token_type_ids`, all
    /// int64 `[batch, sequence]`; output `last_hidden_state`, or the first
    /// output, fp32 `[batch, sequence, hidden]`). Intra-op threads: rayon's
    /// thread count (`RAYON_NUM_THREADS`), like [`crate::BertEncoder`].
    pub fn load_with(dir: &Path, onnx: &Path) -> Result<Self, EncError> {
        if !onnx.is_file() {
            return Err(model_err(onnx, format!("missing ONNX model (run `{ORT_INSTALL_HINT}`, which builds it from model.safetensors)")));
        }
        let (mut front, _config) = Front::load(dir, onnx)?;
        let env = environment()?;
        let threads = rayon::current_num_threads();
        let session = Session::builder(env)
            .and_then(|b| Ok(b.with_optimization_level(GraphOptimizationLevel::All)?))
            .and_then(|b| Ok(b.with_intra_threads(threads)?))
            .and_then(|mut b| b.commit_from_file(onnx))
            .map_err(|e| model_err(onnx, e))?;
        let has = |n: &str| session.inputs().iter().any(|o| o.name() == n);
        for n in ["input_ids", "attention_mask"] {
            if !has(n) {
                return Err(model_err(onnx, format!("the graph has no input `{n}`")));
            }
        }
        let token_types = has("token_type_ids");
        let output = match session.outputs().iter().find(|o| o.name() == "last_hidden_state").or(session.outputs().first()) {
            Some(o) => o.name().to_string(),
            None => return Err(model_err(onnx, "the graph has no outputs")),
        };
        // The model id carries a fingerprint of the graph file (xxh3 of its bytes).
        let fp = file_fingerprint(onnx).map_err(|e| model_err(onnx, e))?;
        front.info.model_id = format!("{}@onnx-{:08x}", front.info.model_id, fp >> 32);
        Ok(Self::new(front, OrtForward { session, batch: 32, token_types, output }))
    }

    /// Sequences per ONNX Runtime call (padded to the longest in the call).
    pub fn set_batch_size(&mut self, n: usize) {
        self.forward.batch = n.max(1);
    }
}

impl Forward for OrtForward {
    fn embed(&mut self, front: &Front, ids: &[Vec<u32>], out: &mut [f32]) -> Result<(), Error> {
        // Longest first, so each call pads little.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        for group in order.chunks(self.batch) {
            self.run_group(front, ids, group, out)?;
        }
        Ok(())
    }
}

impl OrtForward {
    fn run_group(&mut self, front: &Front, ids: &[Vec<u32>], group: &[usize], out: &mut [f32]) -> Result<(), Error> {
        let d = front.hidden;
        let b = group.len();
        let l = group.iter().map(|&i| ids[i].len()).max().unwrap_or(0).max(1);
        let mut input_ids = vec![0i64; b * l];
        let mut mask = vec![0i64; b * l];
        for (r, &i) in group.iter().enumerate() {
            for (k, &t) in ids[i].iter().enumerate() {
                input_ids[r * l + k] = i64::from(t);
                mask[r * l + k] = 1;
            }
        }
        let shape = [b as i64, l as i64];
        let err = |e: ::ort::Error| Error::Encoder { model: front.info.model_id.clone(), cause: Box::new(e) };
        let mut inputs: Vec<(Cow<'_, str>, ::ort::session::SessionInputValue<'_>)> = vec![
            ("input_ids".into(), Tensor::from_array((shape, input_ids)).map_err(err)?.into()),
            ("attention_mask".into(), Tensor::from_array((shape, mask)).map_err(err)?.into()),
        ];
        if self.token_types {
            inputs.push(("token_type_ids".into(), Tensor::from_array((shape, vec![0i64; b * l])).map_err(err)?.into()));
        }
        let model = front.info.model_id.clone();
        let outputs = self.session.run(inputs).map_err(|e| Error::Encoder { model: model.clone(), cause: Box::new(e) })?;
        let (out_shape, hs) =
            outputs[self.output.as_str()].try_extract_tensor::<f32>().map_err(|e| Error::Encoder { model: model.clone(), cause: Box::new(e) })?;
        if **out_shape != [b as i64, l as i64, d as i64] {
            return Err(Error::Encoder { model, cause: format!("output shape {out_shape:?}, expected [{b}, {l}, {d}]").into() });
        }
        for (r, &i) in group.iter().enumerate() {
            let n = ids[i].len();
            let rows = &hs[r * l * d..(r * l + n) * d];
            front.pool(rows, &mut out[i * d..(i + 1) * d]).map_err(|reason| Error::InvalidVector { what: format!("text {i} of batch"), reason })?;
        }
        Ok(())
    }
}

fn file_fingerprint(path: &Path) -> std::io::Result<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(h.digest());
        }
        h.update(&buf[..n]);
    }
}
