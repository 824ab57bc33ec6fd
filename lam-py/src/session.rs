//! `lam.Session`: one agent session's LAM operator, its encoder and, when a
//! store is given, its archive. The GIL is released while an observation is
//! encoded, admitted and archived.

use crate::admission::Admission;
use crate::args::{self, Enc};
use crate::errors;
use arc_store::{Access, AnyStore};
use lam_core::{Encoder, Record, SessionId};
use lam_operator::{IndexChoice, Order};
use lam_trajectory::Cl100k;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// The state one lock guards: threads that share a session take turns.
pub struct Inner {
    op: lam_operator::Session,
    enc: Enc,
    cache_file: Option<PathBuf>,
    store: Option<AnyStore>,
    /// The store session: as given until the first observation claims it.
    sid: SessionId,
    claimed: bool,
}

impl Inner {
    fn admit(&mut self, rec: &Record) -> Result<lam_operator::Admission, lam_operator::Error> {
        let Some(st) = self.store.as_mut() else {
            return self.op.admit(&mut self.enc, rec);
        };
        if !self.claimed {
            // The one claim rule (`lam compact`, `lam serve`): the same
            // session archived again keeps its name; another run's is never
            // appended to (`NAME@2`, ...).
            let tokens = u32::try_from(lam_trajectory::tokens::count(&rec.observation)).unwrap_or(u32::MAX);
            self.sid = arc_store::claim_session(st.as_mut(), &self.sid, rec, tokens).map_err(|e| lam_operator::Error::Core(e.into()))?;
            self.claimed = true;
        }
        self.op.admit_archived(st, &self.sid, &mut self.enc, rec)
    }

    /// Flush the archive and save the embedding cache.
    fn flush(&mut self) -> PyResult<()> {
        if let Some(st) = self.store.as_mut() {
            st.flush().map_err(errors::core)?;
        }
        if let Some(p) = &self.cache_file {
            self.enc.save(p).map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cache {}: {e}", p.display())))?;
        }
        Ok(())
    }
}

/// One agent session: `admit` each tool observation before the model sees it.
#[pyclass(frozen, module = "lam._lam", name = "Session")]
pub struct Session {
    inner: Mutex<Inner>,
    encoder: String,
    model_id: String,
    store_spec: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("encoder", &self.encoder).field("store", &self.store_spec).finish_non_exhaustive()
    }
}

impl Session {
    fn lock(&self) -> PyResult<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| PyRuntimeError::new_err("the session stopped after a panic in another thread; start a new session"))
    }
}

fn default_session_name() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("py-{}-{nanos}", std::process::id())
}

#[pymethods]
impl Session {
    /// A session at merge threshold `threshold` (cosine), encoding with
    /// `encoder` (`"bert"`: `model`, default the installed all-MiniLM-L6-v2;
    /// `"hashing"`: model-free) and, when `store` is given (a directory,
    /// `mem:`), archiving every observation there first under the name
    /// `session`. `recall` is how stubs name the way to get an original
    /// back: `"_recall"` (default, the ARC view's action), `"recall"` or
    /// another tool name, `"lam recall"`, or `"none"` (no handle).
    #[new]
    #[pyo3(signature = (threshold=lam_core::Threshold::DEFAULT.cosine(), encoder="bert", model=None, store=None, session=None, *, order="l1-l0", index="default", cache=None, count_tokens=true, batch=32, recall="_recall"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        threshold: f64,
        encoder: &str,
        model: Option<PathBuf>,
        store: Option<&str>,
        session: Option<String>,
        order: &str,
        index: &str,
        cache: Option<Bound<'_, PyAny>>,
        count_tokens: bool,
        batch: usize,
        recall: &str,
    ) -> PyResult<Self> {
        let how = lam_core::stub::Recall::parse(recall).map_err(|e| errors::arg("recall", e))?;
        let settings = args::settings(threshold, encoder, model, args::cache(cache.as_ref())?, batch, how)?;
        let mut cfg = settings.operator(&Cl100k).with_token_counts(count_tokens);
        cfg.order = order.parse::<Order>().map_err(|e| errors::arg("order", e))?;
        cfg.index = index.parse::<IndexChoice>().map_err(|e| errors::arg("index", e))?;
        if session.as_deref() == Some("") {
            return Err(errors::arg("session", "must not be empty"));
        }
        let (enc, cache_file) = args::encoder(&settings)?;
        let info = enc.info();
        let op = lam_operator::Session::new(cfg, info.dim).map_err(errors::operator)?;
        let st = store.map(|s| py.allow_threads(|| args::store(s, Access::ReadWrite))).transpose()?;
        let sid = SessionId(session.unwrap_or_else(|| if st.is_some() { default_session_name() } else { "python".into() }));
        let inner = Inner { op, enc, cache_file, store: st, sid, claimed: false };
        Ok(Self { inner: Mutex::new(inner), encoder: encoder.to_string(), model_id: info.model_id, store_spec: store.map(str::to_string) })
    }

    /// Admit one tool observation (`str` or `bytes`) produced by `action`:
    /// archive it first (with a store), then return its residual and stubs.
    #[pyo3(signature = (action, observation, returncode=None))]
    fn admit(&self, py: Python<'_>, action: &Bound<'_, PyAny>, observation: &Bound<'_, PyAny>, returncode: Option<i32>) -> PyResult<Admission> {
        let action = args::text_of("action", action)?;
        let observation = args::bytes_of("observation", observation)?;
        let bytes_in = observation.len();
        let a = py.allow_threads(|| -> PyResult<_> {
            let mut g = self.lock()?;
            let rec = Record { index: g.op.records(), action, observation, returncode };
            let how = g.op.config().recall;
            g.admit(&rec).map_err(errors::operator).map(|a| (a, how))
        })?;
        Ok(Admission::new(a.0, bytes_in, a.1))
    }

    /// Digest of the deletion set so far (the `digest` of `lam compact --json`).
    #[getter]
    fn digest(&self) -> PyResult<String> {
        Ok(self.lock()?.op.digest().hex16())
    }

    /// Largest substitution distance used so far (`delta_hat <= delta`).
    #[getter]
    fn delta_hat(&self) -> PyResult<f64> {
        Ok(self.lock()?.op.delta_hat())
    }

    /// The configured bound `delta = sqrt(2 - 2t)`.
    #[getter]
    fn delta(&self) -> PyResult<f64> {
        Ok(self.lock()?.op.config().threshold.delta())
    }

    /// The merge threshold `t`.
    #[getter]
    fn threshold(&self) -> PyResult<f64> {
        Ok(self.lock()?.op.config().threshold.cosine())
    }

    /// Observations admitted so far.
    #[getter]
    fn records(&self) -> PyResult<u32> {
        Ok(self.lock()?.op.records())
    }

    /// `§id` of every observation admitted so far, in order.
    #[getter]
    fn ids(&self) -> PyResult<Vec<String>> {
        Ok(self.lock()?.op.ids().iter().map(|i| format!("§{i}")).collect())
    }

    /// The session's name in the store: the name given, until the first
    /// observation claims it (`NAME@2`, ... when the store holds another
    /// run's session `NAME`; the rule of `lam compact` and `lam serve`).
    #[getter]
    fn session(&self) -> PyResult<String> {
        Ok(self.lock()?.sid.0.clone())
    }

    /// Counters of the session so far.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let g = self.lock()?;
        let l1 = g.op.l1_stats();
        let t = g.op.totals();
        let d = PyDict::new(py);
        d.set_item("session", &g.sid.0)?;
        d.set_item("encoder", &self.encoder)?;
        d.set_item("model", &self.model_id)?;
        d.set_item("store", self.store_spec.as_deref())?;
        d.set_item("order", g.op.config().order.as_str())?;
        d.set_item("index", g.op.index_description())?;
        d.set_item("threshold", g.op.config().threshold.cosine())?;
        d.set_item("delta", g.op.config().threshold.delta())?;
        d.set_item("delta_hat", l1.delta_hat)?;
        d.set_item("min_margin", l1.min_margin)?;
        d.set_item("records", g.op.records())?;
        d.set_item("chunks", l1.chunks)?;
        d.set_item("chunks_dropped", l1.dropped)?;
        d.set_item("stubs", t.stubs)?;
        d.set_item("tokens_in", t.tokens_in)?;
        d.set_item("tokens_out", t.tokens_out)?;
        d.set_item("removal_net", t.removal())?;
        d.set_item("digest", g.op.digest().hex16())?;
        d.set_item("encode_us", t.encode_ns as f64 / 1e3)?;
        d.set_item("admit_us", t.admit_ns as f64 / 1e3)?;
        let (hits, misses) = g.enc.stats();
        d.set_item("cache_hits", hits)?;
        d.set_item("cache_misses", misses)?;
        Ok(d)
    }

    /// The exact archived bytes of `id` (`§id` or bare), or of one part
    /// (`part`: `k` or `"k/m"`, parts of at most `part_tokens` cl100k tokens).
    /// Needs a store.
    #[pyo3(signature = (id, part=None, *, part_tokens=2048))]
    fn recall<'py>(&self, py: Python<'py>, id: &str, part: Option<&Bound<'py, PyAny>>, part_tokens: usize) -> PyResult<Bound<'py, PyBytes>> {
        let body = py.allow_threads(|| {
            let g = self.lock()?;
            let st = g.store.as_ref().ok_or_else(|| errors::arg("store", "this session has no store: pass store=DIR (or \"mem:\") to Session"))?;
            arc_store::find(st.as_ref(), Some(&g.sid), id).map(|f| f.bytes).map_err(errors::store)
        })?;
        crate::store::select(py, &body, part, part_tokens)
    }

    /// Make every archived observation durable and save the embedding cache.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| self.lock()?.flush())
    }

    /// `flush`, then release the store (its writer lock) and the encoder's cache.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let mut g = self.lock()?;
            g.flush()?;
            g.store = None;
            g.cache_file = None;
            Ok(())
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> PyResult<String> {
        let g = self.lock()?;
        Ok(format!(
            "Session(session='{}', encoder='{}', threshold={}, records={}, digest='{}')",
            g.sid.0,
            self.encoder,
            g.op.config().threshold.cosine(),
            g.op.records(),
            g.op.digest().hex16()
        ))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Best effort: a dropped session still leaves its archive durable and its cache saved.
        if let Ok(g) = self.inner.get_mut() {
            let _ = g.flush();
        }
    }
}
