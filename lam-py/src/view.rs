//! `lam.ArcView`: ARC's bounded prompt view with exact recall, over ARC
//! alone (`policy="arc"`) or over LAM residuals (`policy="lam"`).

use crate::admission::Admission;
use crate::args::{self, Enc};
use crate::errors;
use arc_store::{Access, AnyStore};
use arc_view::{ArcConfig, ArcView as Arc_};
use lam_core::{Encoder, ObsStore, Record, Rendered, SessionId, ViewPolicy};
use lam_operator::LamArcView;
use lam_trajectory::Cl100k;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

enum View {
    Arc(Box<Arc_<AnyStore, Cl100k>>),
    Lam(Box<LamArcView<AnyStore, Cl100k, Enc>>, Option<PathBuf>),
}

impl View {
    fn arc(&self) -> &Arc_<AnyStore, Cl100k> {
        match self {
            View::Arc(v) => v,
            View::Lam(v, _) => v.view(),
        }
    }

    fn arc_mut(&mut self) -> &mut Arc_<AnyStore, Cl100k> {
        match self {
            View::Arc(v) => v,
            View::Lam(v, _) => v.view_mut(),
        }
    }

    fn render(&mut self) -> Result<Rendered, lam_core::Error> {
        match self {
            View::Arc(v) => ViewPolicy::render(v.as_mut()),
            View::Lam(v, _) => ViewPolicy::render(v.as_mut()),
        }
    }
}

struct State {
    view: View,
    next: u32,
}

/// The prompt an agent's model sees before each call, never more than
/// `budget - completion` cl100k tokens: the task, a summary in which older
/// observations became citations (`§id`), recent turns verbatim, a catalog
/// page and recalled bodies. `_recall §id [k/m]` actions are answered with
/// the exact archived bytes.
#[pyclass(frozen, module = "lam._lam", name = "ArcView")]
pub struct ArcView {
    state: Mutex<State>,
    policy: &'static str,
}

impl std::fmt::Debug for ArcView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArcView").field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl ArcView {
    fn lock(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| PyRuntimeError::new_err("the view stopped after a panic in another thread"))
    }
}

fn rendered_dict<'py>(py: Python<'py>, r: Rendered) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("text", r.text)?;
    d.set_item("tokens", r.tokens)?;
    d.set_item("limit", r.limit)?;
    d.set_item("citations", r.citations.iter().map(|c| format!("§{c}")).collect::<Vec<_>>())?;
    d.set_item("recalled", r.recalled.iter().map(|c| format!("§{c}")).collect::<Vec<_>>())?;
    Ok(d)
}

#[pymethods]
impl ArcView {
    /// A view of at most `budget - completion` tokens over `store` (a
    /// directory, `mem:`; `None`: in memory). `policy="lam"` shows LAM
    /// residuals (threshold, encoder, model, cache as for `Session`) in the
    /// verbatim turns; `"arc"` shows observations as they are.
    #[new]
    #[pyo3(signature = (budget, completion=0, store=None, policy="arc", *, task="", session="python", threshold=lam_core::Threshold::DEFAULT.cosine(), encoder="bert", model=None, cache=None, recent_turns=None, rho=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        budget: usize,
        completion: usize,
        store: Option<&str>,
        policy: &str,
        task: &str,
        session: &str,
        threshold: f64,
        encoder: &str,
        model: Option<PathBuf>,
        cache: Option<Bound<'_, PyAny>>,
        recent_turns: Option<usize>,
        rho: Option<usize>,
    ) -> PyResult<Self> {
        let mut cfg = ArcConfig { context: budget, completion, ..ArcConfig::default() };
        cfg.recent_turns = recent_turns.unwrap_or(cfg.recent_turns);
        cfg.rho = rho.unwrap_or(cfg.rho);
        if session.is_empty() {
            return Err(errors::arg("session", "must not be empty"));
        }
        let policy: &'static str = match policy {
            "arc" => "arc",
            "lam" => "lam",
            other => {
                return Err(errors::arg("policy", format!("expected \"arc\" or \"lam\", got {other:?}")));
            }
        };
        let st = py.allow_threads(|| args::store(store.unwrap_or("mem:"), Access::ReadWrite))?;
        let view = Arc_::new(cfg, SessionId(session.into()), task, st, Cl100k).map_err(|e| errors::arg("budget", e))?;
        let view = if policy == "lam" {
            let settings = args::settings(threshold, encoder, model, args::cache(cache.as_ref())?, 32, lam_core::stub::Recall::default())?;
            let (enc, cache_file) = args::encoder(&settings)?;
            let op = lam_operator::Session::new(settings.operator(&Cl100k), enc.info().dim).map_err(errors::operator)?;
            View::Lam(Box::new(LamArcView::from_parts(view, op, enc)), cache_file)
        } else {
            View::Arc(Box::new(view))
        };
        Ok(Self { state: Mutex::new(State { view, next: 0 }), policy })
    }

    /// Record a completed turn: archive its observation (`str` or `bytes`)
    /// once and show it (under `policy="lam"` as its LAM residual). Returns
    /// `{"id": "§id", "admission": Admission or None}`.
    #[pyo3(signature = (action, observation, thought="", returncode=None))]
    fn push_turn<'py>(
        &self,
        py: Python<'py>,
        action: &Bound<'py, PyAny>,
        observation: &Bound<'py, PyAny>,
        thought: &str,
        returncode: Option<i32>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let action = args::text_of("action", action)?;
        let observation = args::bytes_of("observation", observation)?;
        let bytes_in = observation.len();
        let (id, adm) = py.allow_threads(|| -> PyResult<_> {
            let mut g = self.lock()?;
            let rec = Record { index: g.next, action, observation, returncode };
            let out = match &mut g.view {
                View::Arc(v) => (v.push_turn(thought, &rec).map_err(errors::core)?.shown, None),
                View::Lam(v, _) => {
                    let a = v.push_turn(thought, &rec).map_err(errors::operator)?;
                    (a.id.clone(), Some(Admission::new(a, bytes_in, lam_core::stub::Recall::ARC)))
                }
            };
            g.next += 1;
            Ok(out)
        })?;
        let d = PyDict::new(py);
        d.set_item("id", format!("§{id}"))?;
        d.set_item("admission", adm.map(|a| Py::new(py, a)).transpose()?)?;
        Ok(d)
    }

    /// Intercept `action` before it runs: an ARC command (`_recall §id
    /// [k/m]`, `_recall_meta §id`, `catalog next|prev|page N`) is answered
    /// and recorded as a turn; `None` leaves the action to the environment.
    #[pyo3(signature = (action, thought=""))]
    fn act(&self, py: Python<'_>, action: &str, thought: &str) -> PyResult<Option<String>> {
        py.allow_threads(|| self.lock()?.view.arc_mut().act(thought, action).map_err(errors::core))
    }

    /// The prompt for the next model call: `text, tokens, limit, citations, recalled`.
    fn render<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = py.allow_threads(|| self.lock()?.view.render().map_err(errors::core))?;
        rendered_dict(py, r)
    }

    /// The exact archived bytes of `id` in this view's session.
    fn recall<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyBytes>> {
        let shown = id.trim_start_matches('§').to_ascii_lowercase();
        let body = {
            let g = self.lock()?;
            let v = g.view.arc();
            v.store().get(v.session(), &shown).map_err(errors::core)?
        };
        let body = body.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("no §{shown} in this view's session")))?;
        Ok(PyBytes::new(py, &body))
    }

    /// Compact now (a caller's own trigger, e.g. a fixed schedule).
    fn compact_now(&self) -> PyResult<()> {
        self.lock()?.view.arc_mut().compact_now();
        Ok(())
    }

    /// The model reported a context overflow: keep a larger margin and compact.
    fn on_overflow(&self) -> PyResult<()> {
        self.lock()?.view.arc_mut().on_overflow();
        Ok(())
    }

    /// The component budgets: `limit, prefix, summary, recent, page, recall, part, eta`.
    fn budgets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let b = self.lock()?.view.arc().budgets();
        let d = PyDict::new(py);
        for (k, v) in [
            ("limit", b.limit),
            ("prefix", b.prefix),
            ("summary", b.summary),
            ("recent", b.recent),
            ("page", b.page),
            ("recall", b.recall),
            ("part", b.part),
            ("eta", b.eta),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// `"arc"` or `"lam"`.
    #[getter]
    fn policy(&self) -> &'static str {
        self.policy
    }

    /// Turns seen (ARC commands included).
    #[getter]
    fn turns(&self) -> PyResult<usize> {
        Ok(self.lock()?.view.arc().turns())
    }

    /// The LAM digest of the deletion set (`policy="lam"`; `None` under `"arc"`).
    #[getter]
    fn digest(&self) -> PyResult<Option<String>> {
        Ok(match &self.lock()?.view {
            View::Lam(v, _) => Some(v.operator().digest().hex16()),
            View::Arc(_) => None,
        })
    }

    /// Make the archive durable and save the embedding cache.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let mut g = self.lock()?;
            g.view.arc_mut().store_mut().flush().map_err(errors::core)?;
            if let View::Lam(v, Some(p)) = &mut g.view {
                v.encoder_mut().save(p).map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cache {}: {e}", p.display())))?;
            }
            Ok(())
        })
    }
}
