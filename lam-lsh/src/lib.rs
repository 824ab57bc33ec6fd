//! L1 of LAM: epsilon-equivalence candidates and greedy first-occurrence dedup.
//!
//! - [`Quantizer`]: `Q_eps(x) = round(x / 2eps)` with `eps = rel * sigma`,
//!   `sigma = 1/sqrt(D)` the RMS coordinate of a unit vector in `D` dimensions.
//! - [`BandedIndex`]: band digests (xxHash3 over `r` quantised coordinates) of
//!   retained vectors; a query's candidates are the ids sharing any digest.
//! - [`ExhaustiveIndex`]: every retained id is a candidate (the reference).
//! - [`sq_l2`]: exact, deterministic squared L2 distance used to verify.
//! - [`Greedy`]: the rule of LAM Algorithms 1 and 2: a chunk is dropped iff a
//!   retained chunk lies within `delta`; its representative is the lowest such
//!   index; `delta_hat` tracks the largest distance used.
//!
//! ```
//! use lam_core::{Decision, Threshold};
//! use lam_lsh::{Greedy, L1Index};
//!
//! let dim = 4;
//! let t = Threshold::from_cosine(0.95)?;
//! let mut g = Greedy::new(dim, t, L1Index::default_for(dim, t));
//! let a = [1.0f32, 0.0, 0.0, 0.0];
//! let near = [0.999f32, 0.0447, 0.0, 0.0]; // cosine 0.999 to `a`
//! assert_eq!(g.decide(0, &a)?, Decision::Retained);
//! assert!(matches!(g.decide(1, &near)?, Decision::Dropped { representative: 0, .. }));
//! assert!(g.stats().delta_hat <= t.delta());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod band;
mod distance;
mod greedy;

pub use band::{BandParams, BandedIndex, ExhaustiveIndex, L1Index, Quantizer};
pub use distance::{sq_l2, sq_l2_scalar, sq_l2_scalar_within, sq_l2_within};
pub use greedy::{Greedy, L1Stats};

#[cfg(test)]
mod tests;
