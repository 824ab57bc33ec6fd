//! Content-addressed observation ids (`§id`), shared by stubs and the archive.
//!
//! id = SHA-1 over (action signature, byte 0x1F, observation). The visible id
//! is the first 8 hex characters, extended by 4 only when two different
//! observations of the same session share the shown prefix. A shown id never
//! changes once given out.

use sha1::{Digest, Sha1};
use std::collections::HashMap;

/// The full SHA-1 of one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObsId(pub [u8; 20]);

impl ObsId {
    /// Compute the id of an observation produced by `action`.
    pub fn of(action: &[u8], observation: &[u8]) -> Self {
        let mut h = Sha1::new();
        h.update(action);
        h.update([0x1F]);
        h.update(observation);
        Self(h.finalize().into())
    }

    /// Full lowercase hex.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// Gives each observation of one session its shortest unambiguous visible id.
#[derive(Debug, Default, Clone)]
pub struct IdBook {
    shown: HashMap<ObsId, String>,
    taken: HashMap<String, ObsId>,
}

impl IdBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    /// The visible id of `id` (without the `§`), assigning one if new.
    pub fn visible(&mut self, id: ObsId) -> &str {
        if !self.shown.contains_key(&id) {
            let full = id.hex();
            let mut n = 8;
            loop {
                let p = &full[..n];
                match self.taken.get(p) {
                    Some(other) if *other != id => n = (n + 4).min(40),
                    _ => break,
                }
                if n == 40 {
                    break;
                }
            }
            let p = full[..n].to_string();
            self.taken.insert(p.clone(), id);
            self.shown.insert(id, p);
        }
        &self.shown[&id]
    }

    /// The id previously shown as `visible`, if any.
    pub fn resolve(&self, visible: &str) -> Option<ObsId> {
        self.taken.get(visible).copied()
    }
}

/// The ids of `ids` nearest to `shown`: longest common prefix first, then most
/// equal positions, then creation order.
pub fn nearest(ids: &[String], shown: &str, n: usize) -> Vec<String> {
    let mut scored: Vec<(usize, usize, usize)> = ids
        .iter()
        .enumerate()
        .map(|(k, id)| {
            let prefix = id.bytes().zip(shown.bytes()).take_while(|(a, b)| a == b).count();
            let same = id.bytes().zip(shown.bytes()).filter(|(a, b)| a == b).count();
            (prefix, same, k)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    scored.into_iter().take(n).map(|(_, _, k)| ids[k].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_sha1_with_separator() {
        // sha1("ls\x1fa\n")
        let id = ObsId::of(b"ls", b"a\n");
        let mut h = Sha1::new();
        h.update(b"ls\x1fa\n");
        assert_eq!(id.0, <[u8; 20]>::from(h.finalize()));
        assert_eq!(id.hex().len(), 40);
    }

    #[test]
    fn extends_on_collision_only() {
        let mut book = IdBook::new();
        let a = ObsId([0xab; 20]);
        let mut b_bytes = [0xab; 20];
        b_bytes[19] = 0;
        let b = ObsId(b_bytes);
        assert_eq!(book.visible(a), "abababab");
        assert_eq!(book.visible(a), "abababab");
        assert_eq!(book.visible(b), "abababababab");
        assert_eq!(book.resolve("abababab"), Some(a));
        assert_eq!(book.resolve("abababababab"), Some(b));
    }
}
