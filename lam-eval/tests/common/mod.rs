#![allow(dead_code)]
use std::path::PathBuf;

/// The shared corpus (`lam_trajectory::corpus_dir`). Tests that need it fail
/// with instructions instead of skipping silently.
pub fn corpus() -> PathBuf {
    let p = lam_trajectory::corpus_dir();
    assert!(p.is_dir(), "corpus not found at {}: check out the repository beside `shared/` (as CI does) or set LAM_CORPUS", p.display());
    p
}

pub fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edit-session.jsonl")
}
