//! Turning Python arguments into the Rust values the layers take, one way:
//! text or bytes, thresholds, encoders (with their cache), stores.

use crate::errors;
use arc_store::{Access, AnyStore, StoreSpec};
use lam_core::stub::Recall;
use lam_core::{Encoder, Threshold};
use lam_encode::{Backend, Cache, CachedEncoder, EncoderSpec};
use lam_operator::EngineSettings;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::path::PathBuf;

/// The encoder every binding object uses: any backend behind its embedding cache.
pub type Enc = CachedEncoder<Box<dyn Encoder>>;

/// `str` (as UTF-8) or `bytes` (as given); anything else is a `TypeError` naming `name`.
pub fn bytes_of(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = v.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = v.downcast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!("{name}: expected str or bytes, got {}", v.get_type().name()?)))
}

/// `str`, or `bytes` that are valid UTF-8 (actions and thoughts are text).
pub fn text_of(name: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    String::from_utf8(bytes_of(name, v)?).map_err(|e| errors::arg(name, format!("not valid UTF-8 ({e})")))
}

/// A merge threshold `t` in (-1, 1].
pub fn threshold(t: f64) -> PyResult<Threshold> {
    Threshold::from_cosine(t).map_err(|e| errors::arg("threshold", e))
}

/// The engine settings (`lam_operator::EngineSettings`, the proxy's and the
/// CLI's one value) the arguments name: merge threshold `t`, encoder `name`
/// (`"bert"`, `"hashing"`, `"ort"`, `"cuda"`, `"cuda-bf16"`, `"cuda-f16"`; the
/// last four need the package built with that feature) with `model` (a
/// sentence-transformers directory, default the installed model) and
/// `batch`, its embedding `cache` ([`cache`]) and the `recall` handle; every
/// other setting at its one default.
pub fn settings(t: f64, name: &str, model: Option<PathBuf>, cache: Cache, batch: usize, recall: Recall<'static>) -> PyResult<EngineSettings> {
    let backend: Backend = name.parse().map_err(|_| errors::arg("encoder", format!("expected one of {}, got {name:?}", lam_encode::BACKEND_NAMES)))?;
    if batch == 0 {
        return Err(errors::arg("batch", "must be at least 1"));
    }
    Ok(EngineSettings { threshold: threshold(t)?, encoder: EncoderSpec { backend, model, batch }, cache, recall, ..EngineSettings::default() })
}

/// The encoder `s` names, behind its embedding cache, and the file that cache is saved to.
pub fn encoder(s: &EngineSettings) -> PyResult<(Enc, Option<PathBuf>)> {
    s.load_encoder().map_err(errors::encoder)
}

/// A `cache` argument: `None`/`True` for `$LAM_HOME/cache/MODEL.lamemb`,
/// `False` for none, a file, or a shared `postgres://` cache (no other URL
/// is taken for a file).
pub fn cache(cache: Option<&Bound<'_, PyAny>>) -> PyResult<Cache> {
    let Some(cache) = cache.filter(|c| !c.is_none()) else {
        return Ok(Cache::Default);
    };
    if let Ok(b) = cache.extract::<bool>() {
        return Ok(if b { Cache::Default } else { Cache::Off });
    }
    if let Ok(s) = cache.extract::<String>() {
        return Cache::parse(&s).map_err(|e| errors::arg("cache", e));
    }
    match cache.extract::<PathBuf>() {
        Ok(p) => Ok(Cache::File(p)),
        Err(_) => Err(PyTypeError::new_err(format!("cache: expected a bool or a path, got {}", cache.get_type().name()?))),
    }
}

/// Open the store a `store` argument names: a `FileStore` directory, `mem:`,
/// or `postgres://...` where this build has it.
pub fn store(spec: &str, access: Access) -> PyResult<AnyStore> {
    let parsed = StoreSpec::parse(spec).map_err(errors::store)?;
    arc_store::open(&parsed, access).map_err(errors::store)
}

/// The 1-based part a `part` argument selects among `parts`: an int `k`,
/// or `"k"` / `"k/m"` as in `_recall §id k/m`.
pub fn part(v: &Bound<'_, PyAny>, parts: usize) -> PyResult<usize> {
    let spec = match v.extract::<i64>() {
        Ok(k) => k.to_string(),
        Err(_) => v.extract::<String>().map_err(|_| PyTypeError::new_err("part: expected an int k or a str \"k/m\""))?,
    };
    arc_view::parse_part(&spec, parts).map_err(|e| errors::arg("part", e))
}
