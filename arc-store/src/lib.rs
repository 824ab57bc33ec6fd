//! Append-only, content-addressed, crash-safe observation archive (ARC).
//!
//! **Not built yet.** This crate reserves its place in the workspace layout of
//! the design card; its implementation is tracked by issue 5 and it exports
//! nothing until then. The trait it implements already has its shape in
//! `lam-core`.
#![warn(missing_docs)]
