//! Error-bounded byte codecs for retained embeddings (L2): F16, Int8PerVector, SignBinary, Szp (cuSZp-style).
//!
//! **Not built yet.** This crate reserves its place in the workspace layout of
//! the design card; its implementation is tracked by issue 4 and it exports
//! nothing until then. The trait it implements already has its shape in
//! `lam-core`.
#![warn(missing_docs)]
