//! `lam`: the facade of the workspace.
//!
//! It composes the layers into the LAM operator ([`operator::Session`] online,
//! [`operator::compact_batch`] batch), reads trajectories ([`read`]), counts
//! tokens ([`tokens`]) and reports ([`report`]). The `lam` command lives in
//! `src/main.rs`. Users who want one layer alone depend on its crate directly:
//! `lam-core`, `lam-hash`, `lam-lsh`, `lam-encode`.
#![warn(missing_docs)]

pub mod eval;
pub mod report;
pub use lam_operator as operator;
pub use lam_trajectory::{read, tokens};

pub use arc_store as store;
pub use arc_view as view;
pub use lam_core as core;
pub use lam_encode as encode;
pub use lam_hash as hash;
pub use lam_lsh as lsh;
