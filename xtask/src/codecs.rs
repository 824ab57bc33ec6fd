//! Codec stream digests for `verify-digests`. Filled in when `lam-codec`
//! lands; until then no codec stream is checked and the table says so.

use anyhow::Result;

/// `(codec name, SHA-256 prefix of its stream)` for the retained embeddings.
pub fn stream_digests(_retained: &[f32], _dim: usize) -> Result<Vec<(String, String)>> {
    Ok(Vec::new())
}

/// Lines for the backends that were not checked, with the reason.
pub fn skipped_backends() -> Vec<String> {
    vec!["codec    skipped: lam-codec is not built yet".into()]
}
