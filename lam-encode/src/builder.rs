//! Setting up an encoder and its embedding cache, one way for every command
//! and binding.

use crate::{CachedEncoder, Error, HashingEncoder};
use lam_core::Encoder;
use std::path::{Path, PathBuf};

/// Which encoder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// BERT-family sentence encoder on the CPU (feature `bert`).
    Bert,
    /// The model-free hashing encoder (not the papers' encoder).
    Hashing,
    /// The BERT encoder's tokenisation and pooling, the transformer in ONNX Runtime (feature `ort`).
    Ort,
}

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "bert" => Ok(Backend::Bert),
            "hashing" => Ok(Backend::Hashing),
            "ort" => Ok(Backend::Ort),
            _ => Err(Error::Model { path: s.into(), message: "unknown encoder (expected bert, hashing or ort)".into() }),
        }
    }
}

/// Where embeddings are cached between runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cache {
    /// `$LAM_HOME/cache/MODEL.lamemb` (none for the hashing encoder, which is cheaper than a cache).
    Default,
    /// This file.
    File(PathBuf),
    /// Memory only.
    Off,
}

/// An encoder to build: backend, model directory (default
/// [`crate::default_model_dir`]) and texts per forward pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncoderSpec {
    /// Backend.
    pub backend: Backend,
    /// Model directory (sentence-transformers layout).
    pub model: Option<PathBuf>,
    /// Texts per forward pass.
    pub batch: usize,
}

/// An encoder behind its embedding cache, and the file the cache should be
/// saved to ([`EncoderSpec::load_cached`]).
pub type Cached = (CachedEncoder<Box<dyn Encoder>>, Option<PathBuf>);

impl EncoderSpec {
    /// The spec of `backend` with the default model and batch.
    pub fn new(backend: Backend) -> Self {
        Self { backend, model: None, batch: 32 }
    }

    /// The model directory in use.
    pub fn model_dir(&self) -> PathBuf {
        self.model.clone().unwrap_or_else(crate::default_model_dir)
    }

    /// Load the encoder. A missing model is an error that says how to install it.
    pub fn load(&self) -> Result<Box<dyn Encoder>, Error> {
        match self.backend {
            Backend::Hashing => Ok(Box::new(HashingEncoder::default())),
            Backend::Bert => self.load_bert(),
            Backend::Ort => self.load_ort(),
        }
    }

    #[cfg(feature = "bert")]
    fn load_bert(&self) -> Result<Box<dyn Encoder>, Error> {
        let dir = self.model_dir();
        if !dir.join("model.safetensors").is_file() {
            return Err(Error::Model {
                path: dir.display().to_string(),
                message: format!(
                    "no encoder model here\ninstall the default model with:\n    {}\nor pass --model DIR (a sentence-transformers directory), or --encoder hashing",
                    crate::INSTALL_HINT
                ),
            });
        }
        let mut e = crate::BertEncoder::load(&dir)?;
        e.set_batch_size(self.batch);
        Ok(Box::new(e))
    }

    #[cfg(not(feature = "bert"))]
    fn load_bert(&self) -> Result<Box<dyn Encoder>, Error> {
        Err(Error::Model { path: "bert".into(), message: "this build has no BERT encoder (lam-encode feature `bert`)".into() })
    }

    #[cfg(feature = "ort")]
    fn load_ort(&self) -> Result<Box<dyn Encoder>, Error> {
        let mut e = crate::OrtEncoder::load(&self.model_dir())?;
        e.set_batch_size(self.batch);
        Ok(Box::new(e))
    }

    #[cfg(not(feature = "ort"))]
    fn load_ort(&self) -> Result<Box<dyn Encoder>, Error> {
        Err(Error::Model { path: "ort".into(), message: "this build has no ONNX Runtime encoder (lam-encode feature `ort`)".into() })
    }

    /// Load the encoder behind a [`CachedEncoder`], preloaded from its cache
    /// file; returns the file it should be saved to (none when `cache` is
    /// off or the backend is the hashing encoder under [`Cache::Default`]).
    pub fn load_cached(&self, cache: &Cache) -> Result<Cached, Error> {
        let inner = self.load()?;
        let path = match cache {
            Cache::Off => None,
            Cache::Default if self.backend == Backend::Hashing => None,
            Cache::Default => Some(default_cache_path(&inner.info().model_id)),
            Cache::File(p) => Some(p.clone()),
        };
        Ok(match path {
            Some(p) => (CachedEncoder::with_file(inner, &p), Some(p)),
            None => (CachedEncoder::new(inner), None),
        })
    }
}

/// `$LAM_HOME/cache/MODEL.lamemb`, the model id made file-safe.
pub fn default_cache_path(model_id: &str) -> PathBuf {
    crate::lam_home().join("cache").join(format!("{}.lamemb", lam_core::file_stem(model_id)))
}

/// Whether a model directory holds weights the BERT encoder can load.
pub fn has_model(dir: &Path) -> bool {
    dir.join("model.safetensors").is_file()
}
