//! `lam.Admission`: what admitting one observation produced, as plain data.

use lam_core::Stub;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// What admitting one observation produced.
#[pyclass(frozen, module = "lam._lam", name = "Admission")]
#[derive(Debug)]
pub struct Admission {
    /// Record index in the session.
    #[pyo3(get)]
    pub record: u32,
    /// `§id` of the archived original.
    #[pyo3(get)]
    pub id: String,
    pub residual: Vec<u8>,
    /// cl100k_base tokens of the observation (0 when the session counts no tokens).
    #[pyo3(get)]
    pub tokens_in: usize,
    /// cl100k_base tokens of the residual, stubs included.
    #[pyo3(get)]
    pub tokens_out: usize,
    /// Chunks the observation was cut into, and how many L1 dropped.
    #[pyo3(get)]
    pub chunks: usize,
    #[pyo3(get)]
    pub dropped: usize,
    /// Microseconds spent encoding, and deciding + rendering.
    #[pyo3(get)]
    pub encode_us: f64,
    #[pyo3(get)]
    pub admit_us: f64,
    /// Bytes of the observation.
    #[pyo3(get)]
    pub bytes_in: usize,
    pub stubs: Vec<Stub>,
    /// How the stub lines write their recall handle.
    pub recall: lam_core::stub::Recall<'static>,
    /// Per stub: the largest L1 distance among the chunks it stands for (`None` for L0).
    pub distances: Vec<Option<f32>>,
}

/// The largest distance to its representative among the chunks a stub stands for.
fn stub_distance(s: &Stub, chunks: &[lam_operator::ChunkOutcome]) -> Option<f32> {
    let Stub::Chunks(c) = s else { return None };
    let (first, last) = c.chunks?;
    chunks
        .iter()
        .filter(|o| (first..=last).contains(&(o.ordinal + 1)))
        .filter_map(|o| match o.decision {
            lam_core::Decision::Dropped { distance, .. } => Some(distance),
            lam_core::Decision::Retained => None,
        })
        .reduce(f32::max)
}

impl Admission {
    /// From the operator's admission.
    pub fn new(a: lam_operator::Admission, bytes_in: usize, recall: lam_core::stub::Recall<'static>) -> Self {
        let tokens = a.tokens.unwrap_or_default();
        Self {
            record: a.record,
            id: format!("§{}", a.id),
            tokens_in: tokens.input,
            tokens_out: tokens.output,
            chunks: a.chunks.len(),
            dropped: a.dropped(),
            encode_us: a.encode_ns as f64 / 1e3,
            admit_us: a.admit_ns as f64 / 1e3,
            residual: a.residual,
            distances: a.stubs.iter().map(|s| stub_distance(s, &a.chunks)).collect(),
            stubs: a.stubs,
            bytes_in,
            recall,
        }
    }
}

/// One stub as a dict: `kind` (`"chunks"` L1 / `"lines"` L0), `id` (the
/// `§id` whose `_recall` restores the removed bytes), `representative`
/// (where an equivalent copy is readable, as the stub names it: ``lines
/// 3-9 of `cat a.py` `` or `line 4 of this output`; for "repeat" the earlier
/// call), `representatives` (L1: every place), `distance` (L1: the largest
/// embedding distance in the run; L0: `None`, the lines are exact repeats),
/// `text` (the stub line) and the extent (L0: the `lines` it repeats; L1:
/// the `first`/`last` chunk dropped).
pub fn stub_dict<'py>(py: Python<'py>, s: &Stub, distance: Option<f32>, how: lam_core::stub::Recall<'_>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", format!("§{}", s.id()))?;
    d.set_item("text", s.with(how).to_string())?;
    match s {
        Stub::Chunks(c) => {
            d.set_item("kind", "chunks")?;
            let reps: Vec<String> = c.like.iter().map(ToString::to_string).collect();
            d.set_item("representative", reps.first().cloned())?;
            d.set_item("representatives", reps)?;
            d.set_item("distance", distance)?;
            d.set_item("first", c.chunks.map(|c| c.0))?;
            d.set_item("last", c.chunks.map(|c| c.1))?;
        }
        Stub::Lines(l) => {
            d.set_item("kind", "lines")?;
            d.set_item("representative", l.places_text())?;
            d.set_item("distance", py.None())?;
            d.set_item("lines", l.spans().map(|(a, b)| b - a + 1).sum::<u32>())?;
        }
        Stub::Repeat(r) => {
            d.set_item("kind", "repeat")?;
            d.set_item("representative", &r.of)?;
            d.set_item("distance", 0.0)?;
        }
        Stub::Delta(x) => {
            d.set_item("kind", "delta")?;
            d.set_item("representative", &x.of)?;
            d.set_item("distance", py.None())?;
            d.set_item("hunks", x.hunks.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        }
    }
    Ok(d)
}

#[pymethods]
impl Admission {
    /// The residual as text (invalid UTF-8 replaced; exact bytes in `residual_bytes`).
    #[getter]
    fn residual(&self) -> String {
        String::from_utf8_lossy(&self.residual).into_owned()
    }

    /// The residual, byte for byte: what the model should see.
    #[getter]
    fn residual_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.residual)
    }

    /// Every stub of this admission, in the order the layers wrote them.
    #[getter]
    fn stubs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.stubs.iter().zip(&self.distances).map(|(s, d)| stub_dict(py, s, *d, self.recall)).collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "Admission(record={}, id='{}', tokens_in={}, tokens_out={}, stubs={}, bytes {} -> {})",
            self.record,
            self.id,
            self.tokens_in,
            self.tokens_out,
            self.stubs.len(),
            self.bytes_in,
            self.residual.len()
        )
    }
}
