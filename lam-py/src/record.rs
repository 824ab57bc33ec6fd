//! `lam.Record`, `lam.read_trajectory` (the Rust readers), token counting,
//! and ARC command recognition.

use crate::args;
use crate::errors;
use arc_view::Command;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;

/// One tool observation with the action that produced it.
#[pyclass(frozen, module = "lam._lam", name = "Record")]
#[derive(Debug, Clone)]
pub struct Record {
    /// Position in its session (0-based).
    #[pyo3(get)]
    pub index: u32,
    /// The action (command or tool call).
    #[pyo3(get)]
    pub action: String,
    pub observation: Vec<u8>,
    /// Return code, when recorded.
    #[pyo3(get)]
    pub returncode: Option<i32>,
    /// The model's text before the action (empty when not recorded).
    #[pyo3(get)]
    pub thought: String,
}

#[pymethods]
impl Record {
    #[new]
    #[pyo3(signature = (action, observation, index=0, returncode=None, thought=String::new()))]
    fn new(action: &Bound<'_, PyAny>, observation: &Bound<'_, PyAny>, index: u32, returncode: Option<i32>, thought: String) -> PyResult<Self> {
        Ok(Self { index, action: args::text_of("action", action)?, observation: args::bytes_of("observation", observation)?, returncode, thought })
    }

    /// The observation, byte for byte.
    #[getter]
    fn observation<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.observation)
    }

    /// The observation as text (invalid UTF-8 replaced).
    #[getter]
    fn observation_text(&self) -> String {
        String::from_utf8_lossy(&self.observation).into_owned()
    }

    fn __repr__(&self) -> String {
        format!("Record(index={}, action={:?}, observation=<{} bytes>, returncode={:?})", self.index, self.action, self.observation.len(), self.returncode)
    }
}

/// One session of a trajectory file.
#[pyclass(frozen, module = "lam._lam", name = "Trajectory", get_all)]
#[derive(Debug)]
pub struct Trajectory {
    /// Session name (instance id, or the file stem).
    pub session: String,
    /// Reader used: `mini-swe-agent`, `swe-agent`, `openai-chat`, `lam-jsonl`.
    pub format: String,
    /// The file.
    pub source: PathBuf,
    /// The task prefix (system and task messages before the first action).
    pub task: String,
    /// The observations, in order.
    pub records: Vec<Record>,
}

#[pymethods]
impl Trajectory {
    fn __repr__(&self) -> String {
        format!("Trajectory(session={:?}, format={:?}, records={})", self.session, self.format, self.records.len())
    }
}

fn format_name(f: lam_trajectory::Format) -> &'static str {
    f.name()
}

fn convert(t: lam_trajectory::Trajectory) -> Trajectory {
    let records = t
        .records
        .into_iter()
        .enumerate()
        .map(|(i, r)| Record {
            index: r.index,
            action: r.action,
            observation: r.observation,
            returncode: r.returncode,
            thought: t.thoughts.get(i).cloned().unwrap_or_default(),
        })
        .collect();
    Trajectory { session: t.session.0, format: format_name(t.format).into(), source: t.source, task: t.task, records }
}

/// Every session in a trajectory file (mini-swe-agent `.traj.json`, SWE-agent
/// `.traj`, OpenAI chat messages, lam JSON Lines; `.gz` ok).
#[pyfunction]
pub fn read_trajectories(py: Python<'_>, path: PathBuf) -> PyResult<Vec<Trajectory>> {
    let ts = py.allow_threads(|| lam_trajectory::read::read_path(&path)).map_err(errors::read)?;
    Ok(ts.into_iter().map(convert).collect())
}

/// The records of the one session in a trajectory file; a file holding
/// several sessions (lam JSON Lines) is a `ValueError` naming them (use
/// `read_trajectories`).
#[pyfunction]
pub fn read_trajectory(py: Python<'_>, path: PathBuf) -> PyResult<Vec<Record>> {
    let mut ts = read_trajectories(py, path.clone())?;
    if ts.len() != 1 {
        let names: Vec<&str> = ts.iter().map(|t| t.session.as_str()).collect();
        return Err(errors::arg("path", format!("{} holds {} sessions ({}); use read_trajectories", path.display(), ts.len(), names.join(", "))));
    }
    Ok(ts.pop().expect("one").records)
}

/// cl100k_base tokens of `text` (`str` or `bytes`; invalid UTF-8 counted lossily).
#[pyfunction]
pub fn count_tokens(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<usize> {
    let b = args::bytes_of("text", text)?;
    Ok(py.allow_threads(|| lam_trajectory::tokens::count(&b)))
}

/// The action a tool result answers, by lam's one rule (the readers and
/// `lam serve` use it too, so the same call gets the same `§id` everywhere):
/// `assistant` is the JSON of the assistant message before the result,
/// `tool_call_id` the result's; the answered call as `name(arguments)`, or
/// the whole message's action (its calls joined by `"; "`, a recorded
/// `action`, its last fenced code block, else its text).
#[pyfunction]
#[pyo3(signature = (assistant, tool_call_id=None))]
pub fn _action_for(assistant: &str, tool_call_id: Option<&str>) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(assistant).map_err(|e| PyValueError::new_err(format!("assistant message: not JSON ({e})")))?;
    Ok(lam_core::action::answered(&v, tool_call_id))
}

/// The ARC commands of `action` when it is a control action (every
/// non-empty line `_recall §id [k/m]`, `_recall_meta §id` or `catalog
/// next|prev|page N`), as dicts (a recall's `part` is `k`, `part_spec` the
/// `k/m` as written); `None` for an ordinary action.
#[pyfunction]
pub fn parse_commands<'py>(py: Python<'py>, action: &str) -> PyResult<Option<Vec<Bound<'py, PyDict>>>> {
    let Some(cmds) = arc_view::parse_commands(action) else {
        return Ok(None);
    };
    // Every non-empty line is one command: keep a recall's part as written (`k/m`).
    let lines = action.lines().map(str::trim).filter(|l| !l.is_empty());
    let out = cmds
        .into_iter()
        .zip(lines)
        .map(|(c, line)| {
            let d = PyDict::new(py);
            match c {
                Command::Recall { shown, part } => {
                    d.set_item("command", "recall")?;
                    d.set_item("id", format!("§{shown}"))?;
                    d.set_item("part", part)?;
                    d.set_item("part_spec", line.split_whitespace().nth(2))?;
                }
                Command::RecallMeta { shown } => {
                    d.set_item("command", "recall_meta")?;
                    d.set_item("id", format!("§{shown}"))?;
                }
                Command::CatalogNext => d.set_item("command", "catalog_next")?,
                Command::CatalogPrev => d.set_item("command", "catalog_prev")?,
                Command::CatalogPage(n) => {
                    d.set_item("command", "catalog_page")?;
                    d.set_item("page", n)?;
                }
            }
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Some(out))
}
