//! Setting up an encoder and its embedding cache, one way for every command
//! and binding.

use crate::{CachedEncoder, Error, HashingEncoder, Precision};
use lam_core::Encoder;
use std::path::{Path, PathBuf};

/// Which encoder runs. Every backend is named in every build; one this
/// build lacks loads as [`Error::BackendNotCompiled`] naming its feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// BERT-family sentence encoder on the CPU (feature `bert`).
    Bert,
    /// The model-free hashing encoder (not the papers' encoder).
    Hashing,
    /// The BERT encoder's tokenisation and pooling, the transformer in ONNX Runtime (feature `ort`).
    Ort,
    /// The BERT forward pass on CUDA device 0 in this arithmetic (feature `cuda`).
    Cuda(Precision),
}

/// The names [`Backend`] parses.
pub const BACKEND_NAMES: &str = "bert, hashing, ort, cuda (fp32), cuda-bf16 or cuda-f16";

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let unknown = || Error::Model { path: s.into(), message: format!("unknown encoder (expected {BACKEND_NAMES})") };
        match s {
            "bert" => Ok(Backend::Bert),
            "hashing" => Ok(Backend::Hashing),
            "ort" => Ok(Backend::Ort),
            "cuda" => Ok(Backend::Cuda(Precision::F32)),
            _ => s.strip_prefix("cuda-").and_then(|p| p.parse().ok()).map(Backend::Cuda).ok_or_else(unknown),
        }
    }
}

impl std::fmt::Display for Backend {
    /// The name [`Backend::from_str`](std::str::FromStr) reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Bert => f.write_str("bert"),
            Backend::Hashing => f.write_str("hashing"),
            Backend::Ort => f.write_str("ort"),
            Backend::Cuda(Precision::F32) => f.write_str("cuda"),
            Backend::Cuda(p) => write!(f, "cuda-{p}"),
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
    /// Memory, behind the embedding cache shared at this URL
    /// (`postgres://...`; the caller attaches it with
    /// [`CachedEncoder::share`]: `arc_store::open_embeddings` opens it).
    Shared(String),
    /// Memory only.
    Off,
}

impl Cache {
    /// The cache a `--cache` argument names: a file, or the shared cache
    /// of a PostgreSQL database (`postgres://...`, `postgresql://...`). A
    /// URL is never taken for a file path ([`lam_core::redact::url_scheme`]):
    /// any other scheme is refused, not turned into a directory.
    pub fn parse(arg: &str) -> Result<Self, Error> {
        match lam_core::redact::url_scheme(arg) {
            Some(s) if s.eq_ignore_ascii_case("postgres") || s.eq_ignore_ascii_case("postgresql") => Ok(Cache::Shared(arg.to_string())),
            Some(scheme) => Err(Error::CacheSpec {
                spec: lam_core::redact::url(arg),
                reason: format!(
                    "a `{scheme}://` URL is not a file, and the only shared embedding cache is postgres://; name a file, a postgres:// URL, or leave --cache out"
                ),
            }),
            None if arg.is_empty() => Err(Error::CacheSpec { spec: "\"\"".into(), reason: "empty; name a file".into() }),
            None => Ok(Cache::File(PathBuf::from(arg))),
        }
    }
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
            Backend::Cuda(p) => self.load_cuda(p),
        }
    }

    /// CUDA: `batch` texts of 256 tokens per pass ([`crate::CudaEncoder::set_max_batch_tokens`]).
    #[cfg(feature = "cuda")]
    fn load_cuda(&self, precision: Precision) -> Result<Box<dyn Encoder>, Error> {
        let dir = self.model_dir();
        let mut e = crate::CudaEncoder::load(&dir, precision).map_err(|e| Error::Model { path: dir.display().to_string(), message: e.to_string() })?;
        e.set_max_batch_tokens(self.batch * 256);
        Ok(Box::new(e))
    }

    #[cfg(not(feature = "cuda"))]
    fn load_cuda(&self, _precision: Precision) -> Result<Box<dyn Encoder>, Error> {
        Err(Error::BackendNotCompiled { backend: "cuda", feature: "cuda" })
    }

    #[cfg(feature = "bert")]
    fn load_bert(&self) -> Result<Box<dyn Encoder>, Error> {
        let dir = self.model_dir();
        if !dir.join("model.safetensors").is_file() {
            return Err(Error::Model {
                path: dir.display().to_string(),
                message: format!(
                    "no encoder model here\ninstall the default model with:\n    {}\n(from a checkout; `pipx install lam-ctx` and `uv tool install lam-ctx` bring it in lam's own environment)\nor pass --model DIR (a sentence-transformers directory), or --encoder hashing",
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
        Err(Error::BackendNotCompiled { backend: "bert", feature: "bert" })
    }

    #[cfg(feature = "ort")]
    fn load_ort(&self) -> Result<Box<dyn Encoder>, Error> {
        let mut e = crate::OrtEncoder::load(&self.model_dir())?;
        e.set_batch_size(self.batch);
        Ok(Box::new(e))
    }

    #[cfg(not(feature = "ort"))]
    fn load_ort(&self) -> Result<Box<dyn Encoder>, Error> {
        Err(Error::BackendNotCompiled { backend: "ort", feature: "ort" })
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
            Cache::Shared(_) => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_url_is_never_a_file() {
        assert_eq!(Cache::parse("embeddings.lamemb").unwrap(), Cache::File("embeddings.lamemb".into()));
        assert_eq!(Cache::parse("postgres://lam:pw@db/lam").unwrap(), Cache::Shared("postgres://lam:pw@db/lam".into()));
        assert!(matches!(Cache::parse("PostgreSQL://h/db").unwrap(), Cache::Shared(_)));
        for url in ["redis://lam:secret@h", "https://h/x.lamemb"] {
            let e = Cache::parse(url).unwrap_err().to_string();
            assert!(e.contains("not a file") && !e.contains("secret"), "{e}");
        }
        assert!(Cache::parse("").is_err());
    }

    #[test]
    fn backends_parse_back_and_say_which_feature_they_need() {
        for name in ["bert", "hashing", "ort", "cuda", "cuda-bf16", "cuda-f16"] {
            assert_eq!(name.parse::<Backend>().unwrap().to_string(), name);
        }
        assert_eq!("cuda-f32".parse::<Backend>().unwrap(), Backend::Cuda(Precision::F32));
        for bad in ["cuda-", "cuda-int8", "gpu", ""] {
            assert!(bad.parse::<Backend>().is_err(), "{bad}");
        }
        #[cfg(not(feature = "cuda"))]
        {
            let Err(e) = EncoderSpec::new(Backend::Cuda(Precision::Bf16)).load() else { panic!("a CUDA encoder without the feature") };
            assert!(matches!(e, Error::BackendNotCompiled { backend: "cuda", feature: "cuda" }), "{e}");
            assert!(e.to_string().contains("`cuda` feature"), "{e}");
        }
        #[cfg(not(feature = "ort"))]
        assert!(matches!(EncoderSpec::new(Backend::Ort).load(), Err(Error::BackendNotCompiled { backend: "ort", .. })));
    }
}
