//! The Python package `lam` (module `lam._lam`): thin PyO3 bindings over
//! `lam-operator` (`Session`), `arc-store` (`Store`), `arc-view` (`ArcView`),
//! `lam-encode` (encoders and their cache) and `lam-trajectory` (readers,
//! cl100k). The Python side (`python/lam/`) adds `compact_messages` and the
//! mini-swe-agent integration. API: `lam-py/README.md`.

mod admission;
mod args;
mod errors;
mod record;
mod session;
mod store;
mod view;

use pyo3::prelude::*;

/// Admit `records` in a fresh Rust session, timing each `Session::admit`
/// call in Rust: the reference the Python-side overhead is measured against
/// (`lam-py/bench/bench_admit.py`). Returns nanoseconds per admission.
#[pyfunction]
#[pyo3(signature = (records, threshold=lam_core::Threshold::DEFAULT.cosine(), encoder="hashing", count_tokens=false))]
fn _bench_rust_admit(py: Python<'_>, records: Vec<PyRef<'_, record::Record>>, threshold: f64, encoder: &str, count_tokens: bool) -> PyResult<Vec<u64>> {
    use lam_core::Encoder;
    let recs: Vec<lam_core::Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| lam_core::Record { index: i as u32, action: r.action.clone(), observation: r.observation.clone(), returncode: r.returncode })
        .collect();
    let settings = args::settings(threshold, encoder, None, lam_encode::Cache::Off, 32, lam_core::stub::Recall::default())?;
    let (mut enc, _) = args::encoder(&settings)?;
    let cfg = settings.operator(&lam_trajectory::Cl100k).with_token_counts(count_tokens);
    let mut s = lam_operator::Session::new(cfg, enc.info().dim).map_err(errors::operator)?;
    py.allow_threads(|| {
        recs.iter()
            .map(|r| {
                let t = std::time::Instant::now();
                s.admit(&mut enc, r).map_err(errors::operator)?;
                Ok(t.elapsed().as_nanos() as u64)
            })
            .collect()
    })
}

#[pymodule]
fn _lam(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<session::Session>()?;
    m.add_class::<admission::Admission>()?;
    m.add_class::<record::Record>()?;
    m.add_class::<record::Trajectory>()?;
    m.add_class::<store::Store>()?;
    m.add_class::<view::ArcView>()?;
    m.add_function(wrap_pyfunction!(record::read_trajectory, m)?)?;
    m.add_function(wrap_pyfunction!(record::read_trajectories, m)?)?;
    m.add_function(wrap_pyfunction!(record::count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(record::parse_commands, m)?)?;
    m.add_function(wrap_pyfunction!(record::_action_for, m)?)?;
    m.add_function(wrap_pyfunction!(_bench_rust_admit, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
