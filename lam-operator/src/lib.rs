//! The LAM operator: test every arriving tool observation before it is
//! prefilled, and replace what the session already holds by one-line stubs.
//!
//! For each arrival a [`Session`] (1) gives the observation its content id
//! (`§id`), (2) cuts it into windows of at most the encoder's `max_tokens`,
//! (3) embeds each window once, (4) drops windows whose embedding lies within
//! `delta = sqrt(2 - 2t)` of a retained window (L1: banded LSH candidates,
//! exact L2, greedy first occurrence), (5) replaces lines already present in
//! the session's residual text (L0, xxHash3), and (6) returns the residual
//! the model should see in an [`Admission`]. The batch form
//! ([`compact_batch`]) runs the same per-record function over a finished
//! trajectory with its chunks encoded in large batches, so online and batch
//! residuals are identical by construction.
//!
//! Prefix stability: admission only shapes the arriving observation; it never
//! edits a residual already emitted. With [`Session::admit_archived`] every
//! observation is archived verbatim first, so every stub's `_recall §id`
//! resolves to the exact original bytes. With feature `arc`, `LamArcView`
//! puts LAM residuals inside ARC's bounded, recoverable prompt view.
//!
//! Dependencies: `lam-core`, `lam-hash`, `lam-lsh` (and `arc-view` with
//! `arc`). Bring an encoder (`lam-encode`) and, for token counts, a
//! [`lam_core::TokenCounter`] (cl100k: `lam-trajectory`).
//!
//! ```
//! use lam_core::{Record, Threshold};
//! use lam_operator::{Config, Session};
//!
//! let mut enc = lam_encode::HashingEncoder::default(); // any lam_core::Encoder
//! let cfg = Config::new(Threshold::from_cosine(0.95)?);
//! let mut s = Session::new(cfg, lam_core::Encoder::info(&enc).dim)?;
//! let log: String = (0..30).map(|i| format!("tests/test_{i}.py::test_case PASSED\n")).collect();
//! let first = s.admit(&mut enc, &Record { index: 0, action: "pytest".into(), observation: log.clone().into_bytes(), returncode: Some(0) })?;
//! assert_eq!(first.residual, log.as_bytes()); // nothing seen before
//! let again = s.admit(&mut enc, &Record { index: 1, action: "pytest -x".into(), observation: log.clone().into_bytes(), returncode: Some(0) })?;
//! // The rerun became one line naming the first run's call as the model saw it.
//! assert_eq!(again.stubs.len(), 1);
//! assert_eq!(again.residual, format!("[lam: same output as `pytest` above; _recall §{}]\n", again.id).into_bytes());
//! // One line edited: it reaches the model verbatim, in place; the lines
//! // around it are named where the model can read them (the call once).
//! let edited = log.replace("tests/test_6.py::test_case PASSED", "tests/test_6.py::test_case FAILED");
//! let near = s.admit(&mut enc, &Record { index: 2, action: "pytest -k".into(), observation: edited.into_bytes(), returncode: Some(1) })?;
//! assert_eq!(
//!     String::from_utf8(near.residual)?,
//!     format!("[lam: lines 1-6 of `pytest`; _recall §{}]\ntests/test_6.py::test_case FAILED\n[lam: lines 8-30 ditto]\n", near.id)
//! );
//! assert!(s.delta_hat() <= cfg.threshold.delta());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod admission;
#[cfg(feature = "arc")]
mod arc;
mod batch;
mod config;
mod delta;
mod error;
mod segments;
mod session;
#[cfg(feature = "settings")]
mod settings;
mod totals;

pub use admission::{Admission, ChunkOutcome, Tokens};
#[cfg(feature = "arc")]
pub use arc::LamArcView;
#[cfg(feature = "arc")]
pub use arc_view::ArcConfig;
pub use batch::{BatchOutcome, compact_batch};
pub use config::{Config, IndexChoice, Order, Residual};
pub use error::Error;
pub use lam_hash::L0Stats;
pub use lam_lsh::{BandParams, L1Index, L1Stats};
pub use session::Session;
#[cfg(feature = "settings")]
pub use settings::{Budget, EngineSettings, load_cached};
pub use totals::{SessionTotals, removal};

/// Remove the given stubs' lines, as written with the recall handle `how`,
/// from a residual (for gross accounting).
pub fn without_stubs(residual: &[u8], stubs: &[lam_core::Stub], how: lam_core::stub::Recall<'_>) -> Vec<u8> {
    if let [lam_core::Stub::Delta(d)] = stubs {
        return delta::strip(residual, d);
    }
    let lines: Vec<String> = stubs.iter().map(|s| s.with(how).to_string()).collect();
    segments::strip_lines(residual, &lines)
}
