//! Helpers shared by the integration tests: the `ObsStore` conformance suite
//! lives in `lam_core::testsuite` (feature `testsuite`); these names keep the
//! tests short.
#![allow(dead_code, unused_imports)]

pub use lam_core::testsuite::{colliding_pair, obs_store as behaviour, obs_store_collision as collision, rec, samples, sid};
