//! The papers' measurements over agent trajectories.
//!
//! - [`report`]: both operator forms (online and batch) over one trajectory,
//!   with the fields of `lam compact --json` ([`report::Report`]).
//! - [`evaluate`]: LAM's evaluation harness over corpora: every threshold in
//!   both layer orders, the substitution bound and metric-entropy bracket,
//!   gold-patch evidence (lossy and recoverable through the archive),
//!   retrieval, and the observation-masking, SemDeDup and L0 baselines on the
//!   same texts ([`EvalReport`], written by [`write_report`]; definitions in
//!   `docs/eval.md`).
//! - [`policy`] and [`replay`]: the prompts a model would see under each view
//!   policy, turn by turn, for the ARC paper's cost model.
//! - [`calibrate`]: this machine's compaction rates, measured with the
//!   pipeline's own code, as a `lam-costmodel` device profile.
//!
//! ```
//! use lam_core::Threshold;
//! use lam_eval::report;
//! use lam_trajectory::read;
//!
//! let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/edit-session.jsonl");
//! let traj = read::read_path(example.as_ref())?.remove(0);
//! let mut enc = lam_encode::HashingEncoder::default();
//! let cfg = lam_operator::Config::new(Threshold::from_cosine(0.95)?);
//! let run = report::run(cfg, &mut enc, &traj, true)?;
//! assert!(run.report.online_equals_batch);
//! assert!(run.report.tokens_out < run.report.tokens_in);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod baselines;
pub mod calibrate;
mod error;
mod eval;
pub mod evidence;
mod markdown;
pub mod policy;
pub mod replay;
pub mod report;
pub mod svg;

pub use error::{Error, Result};
pub use eval::*;
pub use markdown::markdown;
