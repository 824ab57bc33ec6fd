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
//!
//! ```
//! use arc_view::{ArcConfig, ArcView};
//! use lam_core::{Record, SessionId, SimpleCounter, ViewPolicy};
//!
//! let mut v = ArcView::new(ArcConfig::with_limit(2_000), SessionId::new("s"), "Fix the failing test.", arc_store::MemStore::new(), SimpleCounter)?;
//! for i in 0..40u32 {
//!     let obs: String = (0..30).map(|k| format!("line {k} of output {i}\n")).collect();
//!     v.push_turn("look", &Record { index: i, action: format!("cat f{i}.txt"), observation: obs.into_bytes(), returncode: Some(0) })?;
//!     assert!(ViewPolicy::render(&mut v)?.tokens <= 2_000); // K <= L before every call
//! }
//! let cited = ViewPolicy::render(&mut v)?.citations[0].clone();
//! let answer = v.act("recall it", &format!("_recall §{cited}"))?.expect("a view command");
//! assert!(answer.contains("recall section"));
//! assert!(ViewPolicy::recall(&v, &cited)?.is_some()); // exact archived bytes
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod arc;
mod baselines;
mod catalog;
mod command;
mod part;
mod text;

pub use arc::{ArcConfig, ArcView, Budgets, ViewStats, cut_parts};
pub use baselines::{FullContext, ObservationMasking, SlidingWindow, masking_placeholder};
pub use catalog::Catalog;
pub use command::{Command, parse_commands};
pub use lam_core::SimpleCounter;
pub use lam_core::id::nearest;
pub use part::{PartError, parse_part};
