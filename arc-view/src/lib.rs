//! The bounded ARC prompt view with citations and exact recall, and the
//! baseline policies it is compared with.
//!
//! [`ArcView`] implements the deterministic compaction routine of ARC (no
//! model call): the immutable task prefix `B`, a summary `M` in which older
//! thoughts are truncated, short observations stay inline and longer ones
//! become citations (`§id`, head/tail preview, metadata, `_recall §id`), the
//! most recent turns verbatim `R`, one page of the citation catalog `P` and
//! the recalled bodies `Q`. Every view satisfies
//! `K = B + M + R + P + Q + eta <= L = L_ctx - G_max`. Recall commands are
//! recognised only in the agent's actions ([`parse_commands`]).
//!
//! Baselines behind the same [`lam_core::ViewPolicy`] trait: [`FullContext`],
//! [`SlidingWindow`], [`ObservationMasking`].
#![warn(missing_docs)]

mod arc;
mod baselines;
mod command;
mod text;

pub use arc::{ArcConfig, ArcView, Budgets, ViewStats, cut_parts};
pub use lam_core::id::nearest;
pub use baselines::{FullContext, ObservationMasking, SlidingWindow, masking_placeholder};
pub use command::{Command, parse_commands};
pub use lam_core::SimpleCounter;
