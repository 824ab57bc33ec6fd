//! The deletion-set digest (spec: `docs/digest.md`; do not change silently).
//!
//! The digest names the L1 deletion set of a run: the first 16 lowercase hex
//! characters of SHA-256 over the dropped chunk ids, sorted ascending by
//! `(session_index, chunk_index)` as numbers, each written in decimal as
//! `session_index:chunk_index\n`. `session_index` is the 0-based position of
//! the session in the run (0 for a single trajectory), `chunk_index` the
//! 0-based arrival index of the chunk within its session. The empty deletion
//! set hashes the empty string (`e3b0c44298fc1c14`).

use sha2::{Digest, Sha256};

/// A dropped chunk's identity in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkKey {
    /// Position of the session in the run.
    pub session: u32,
    /// Arrival index of the chunk within the session.
    pub chunk: u32,
}

/// Accumulates dropped chunk ids in any order and yields the digest.
#[derive(Debug, Clone, Default)]
pub struct DeletionDigest {
    keys: Vec<ChunkKey>,
}

impl DeletionDigest {
    /// An empty deletion set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add one dropped chunk.
    pub fn push(&mut self, session: u32, chunk: u32) {
        self.keys.push(ChunkKey { session, chunk });
    }

    /// Number of dropped chunks added.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no chunk was dropped.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The canonical byte string the digest hashes.
    pub fn canonical(&self) -> String {
        let mut keys = self.keys.clone();
        keys.sort_unstable();
        keys.dedup();
        let mut s = String::with_capacity(keys.len() * 8);
        for k in keys {
            use std::fmt::Write;
            let _ = writeln!(s, "{}:{}", k.session, k.chunk);
        }
        s
    }

    /// First 16 hex characters of SHA-256 over [`Self::canonical`].
    pub fn hex16(&self) -> String {
        let h = Sha256::digest(self.canonical().as_bytes());
        hex::encode(&h[..8])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_vectors() {
        // Vectors pinned in docs/digest.md.
        assert_eq!(DeletionDigest::new().hex16(), "e3b0c44298fc1c14");
        let mut d = DeletionDigest::new();
        d.push(0, 10);
        d.push(0, 2);
        d.push(1, 0);
        assert_eq!(d.canonical(), "0:2\n0:10\n1:0\n");
        // sha256("0:2\n0:10\n1:0\n"), computed independently (Python hashlib).
        assert_eq!(d.hex16(), "173f6adf7da3023f");
    }

    #[test]
    fn order_independent() {
        let mut a = DeletionDigest::new();
        let mut b = DeletionDigest::new();
        for i in 0..50 {
            a.push(i % 3, i);
            b.push((49 - i) % 3, 49 - i);
        }
        assert_eq!(a.hex16(), b.hex16());
    }
}
