//! Any bytes as an embedding cache (raw, and as the body under a valid
//! header): loading never panics, skips what is bad and counts it, and
//! compaction is lossless: after `with_file` rewrote the file, loading it
//! again finds no dead entry and as many embeddings, and the strict reader
//! accepts every line of it. The strict reader
//! (`--embeddings`) returns Ok or an error naming a line.
#![no_main]

use lam_encode::{CachedEncoder, HashingEncoder, PrecomputedEncoder};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

const HEADER: &[u8] = b"{\"format\":\"lam-embeddings/1\",\"model_id\":\"lam-hashing-v1-d4\",\"dim\":4,\"max_tokens\":8}\n";

fn encoder() -> HashingEncoder {
    HashingEncoder::new(4, 8)
}

fuzz_target!(|data: &[u8]| {
    let with_header = [HEADER, data].concat();
    for bytes in [data, &with_header[..]] {
        let c = CachedEncoder::with_reader(encoder(), bytes, Path::new("fuzz"));
        let r = c.load_report().clone();
        assert_eq!(r.entries as usize, c.len());
        let lines = bytes.split(|&b| b == b'\n').count() as u64;
        assert!(r.entries + r.bad + r.torn + r.duplicates + r.ignored < lines.max(1), "{r:?}");
        let _ = r.to_string();
        if let Err(e) = PrecomputedEncoder::read(bytes, "fuzz") {
            assert!(e.to_string().starts_with("fuzz:"), "{e}");
        }
    }
    // tmpfs when there is one: compaction syncs, and a disk sync per input is slow.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm).unwrap() } else { tempfile::tempdir().unwrap() };
    let path = dir.path().join("c.lamemb");
    std::fs::write(&path, &with_header).unwrap();
    let first = CachedEncoder::with_file(encoder(), &path);
    let r1 = first.load_report().clone();
    let second = CachedEncoder::with_file(encoder(), &path);
    let r2 = second.load_report().clone();
    assert_eq!(r2.dead(), 0, "after {r1:?}, a second load found {r2:?}");
    assert_eq!(r2.entries, r1.entries);
    assert_eq!(r2.unchecked, r1.unchecked);
    if r1.compacted {
        // A rewritten cache is valid for the strict reader too, entry for entry.
        let p = PrecomputedEncoder::open(&path).unwrap_or_else(|e| panic!("compacted cache is invalid: {e}"));
        assert_eq!(p.len() as u64, r1.entries);
    }
    drop((first, second));
});
