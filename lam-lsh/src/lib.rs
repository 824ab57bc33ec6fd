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
#![warn(missing_docs)]

mod band;
mod distance;
mod greedy;

pub use band::{BandParams, BandedIndex, ExhaustiveIndex, L1Index, Quantizer};
pub use distance::{sq_l2, sq_l2_scalar};
pub use greedy::{Greedy, L1Stats};

#[cfg(test)]
mod tests;
