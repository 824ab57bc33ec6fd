//! Performance models of the LAM and ARC papers, calibrated on the machine it runs on.
//!
//! **Not built yet.** This crate reserves its place in the workspace layout of
//! the design card; its implementation is tracked by issue 6 and it exports
//! nothing until then. The trait it implements already has its shape in
//! `lam-core`.
#![warn(missing_docs)]
