//! `lam.Store`: read an archive (exact recall by `§id`, metadata).

use crate::args;
use crate::errors;
use arc_store::{Access, AnyStore, StoreError};
use arc_view::cut_parts;
use lam_core::{ObsMeta, SessionId};
use lam_trajectory::Cl100k;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Mutex;

/// `body`, or its part `part` among parts of at most `part_tokens` cl100k tokens.
pub fn select<'py>(py: Python<'py>, body: &[u8], part: Option<&Bound<'py, PyAny>>, part_tokens: usize) -> PyResult<Bound<'py, PyBytes>> {
    let Some(part) = part.filter(|p| !p.is_none()) else {
        return Ok(PyBytes::new(py, body));
    };
    if part_tokens == 0 {
        return Err(errors::arg("part_tokens", "must be at least 1"));
    }
    let parts = py.allow_threads(|| cut_parts(&Cl100k, body, part_tokens));
    let k = args::part(part, parts.len())?;
    Ok(PyBytes::new(py, &body[parts[k - 1].clone()]))
}

/// An archived observation's metadata as a dict.
pub fn meta_dict<'py>(py: Python<'py>, m: &ObsMeta, session: &SessionId) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", format!("§{}", m.shown))?;
    d.set_item("sha1", m.id.hex())?;
    d.set_item("session", &session.0)?;
    d.set_item("action", &m.action)?;
    d.set_item("returncode", m.returncode)?;
    d.set_item("step", m.step)?;
    d.set_item("bytes", m.bytes)?;
    d.set_item("tokens", m.tokens)?;
    d.set_item("head", PyBytes::new(py, &m.head))?;
    d.set_item("tail", PyBytes::new(py, &m.tail))?;
    Ok(d)
}

/// A read-only handle on an archive (a `FileStore` directory; any number of
/// readers beside its one writer).
#[pyclass(frozen, module = "lam._lam", name = "Store")]
pub struct Store {
    spec: String,
    session: Option<SessionId>,
    store: Mutex<AnyStore>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("spec", &self.spec).field("session", &self.session).finish_non_exhaustive()
    }
}

impl Store {
    /// Run `f` on the store; when the id is not found, reopen it once (a
    /// writer may have appended since this handle read the directory).
    fn with_retry<T>(&self, py: Python<'_>, f: impl Fn(&AnyStore) -> Result<T, StoreError> + Send + Sync) -> PyResult<T>
    where
        T: Send,
    {
        py.allow_threads(|| {
            let mut g = self.store.lock().map_err(|_| PyRuntimeError::new_err("store handle poisoned by a panic"))?;
            match f(&g) {
                Err(StoreError::NotFound { .. }) => {
                    *g = args::store(&self.spec, Access::ReadOnly)?;
                    f(&g).map_err(errors::store)
                }
                r => r.map_err(errors::store),
            }
        })
    }
}

#[pymethods]
impl Store {
    /// Open the archive `path` (a directory written by a `Session` or
    /// `lam compact --store`) for reading. `session`: look ids up in this
    /// session only (needed only when sessions show one id for different bytes).
    #[new]
    #[pyo3(signature = (path, session=None))]
    fn new(py: Python<'_>, path: std::path::PathBuf, session: Option<String>) -> PyResult<Self> {
        let spec = path.to_str().ok_or_else(|| errors::arg("path", "not valid UTF-8"))?.to_string();
        if spec.is_empty() {
            return Err(errors::arg("path", "empty"));
        }
        let store = py.allow_threads(|| args::store(&spec, Access::ReadOnly))?;
        Ok(Self { spec, session: session.map(SessionId), store: Mutex::new(store) })
    }

    /// The exact archived bytes of `id` (`§id` or bare), or of one part
    /// (`part`: `k` or `"k/m"`, as `_recall §id k/m`; parts of at most
    /// `part_tokens` cl100k tokens, default 2048 as `lam recall`).
    #[pyo3(signature = (id, part=None, *, part_tokens=2048))]
    fn recall<'py>(&self, py: Python<'py>, id: &str, part: Option<&Bound<'py, PyAny>>, part_tokens: usize) -> PyResult<Bound<'py, PyBytes>> {
        let session = self.session.clone();
        let body = self.with_retry(py, |st| arc_store::find(st.as_ref(), session.as_ref(), id).map(|f| f.bytes))?;
        select(py, &body, part, part_tokens)
    }

    /// Metadata of `id`: `id, sha1, session, action, returncode, step, bytes, tokens, head, tail`.
    fn recall_meta<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyDict>> {
        let session = self.session.clone();
        let shown = id.trim_start_matches('§').to_ascii_lowercase();
        let (m, s) = self.with_retry(py, |st| {
            let found = arc_store::find(st.as_ref(), session.as_ref(), &shown)?;
            let s = found.sessions.into_iter().next().expect("find returns at least one session");
            let m = st.meta(&s, &shown).map_err(StoreError::Store)?;
            Ok((m, s))
        })?;
        let m = m.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("no metadata for §{shown}")))?;
        meta_dict(py, &m, &s)
    }

    /// Sessions that hold at least one observation, sorted.
    fn sessions(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let v = self.with_retry(py, |st| st.sessions().map_err(StoreError::Store))?;
        Ok(v.into_iter().map(|s| s.0).collect())
    }

    /// `§id` of every observation of `session`, in creation order.
    fn ids(&self, py: Python<'_>, session: &str) -> PyResult<Vec<String>> {
        let s = SessionId(session.to_string());
        let v = self.with_retry(py, |st| st.ids(&s).map_err(StoreError::Store))?;
        Ok(v.into_iter().map(|i| format!("§{i}")).collect())
    }

    fn __repr__(&self) -> String {
        format!("Store('{}')", self.spec)
    }
}
