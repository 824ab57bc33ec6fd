#![allow(dead_code)]
use std::path::PathBuf;

/// `../shared/corpus` beside the checkout (CI lays it there). Tests that need
/// it fail with instructions instead of skipping silently.
pub fn corpus() -> PathBuf {
    let p = std::env::var_os("LAM_CORPUS").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus")
    });
    assert!(
        p.is_dir(),
        "corpus not found at {}: check out the repository beside `shared/` (as CI does) or set LAM_CORPUS",
        p.display()
    );
    p
}

pub fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edit-session.jsonl")
}
