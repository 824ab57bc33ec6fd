//! Content-addressed observation ids (`§id`), shared by stubs and the archive.
//!
//! id = SHA-1 over (action signature, byte 0x1F, observation). The visible id
//! is session-scoped: the shortest prefix of the id's hex, at least
//! [`MIN_SHOWN`] characters, with which no earlier observation's id in the
//! session begins. It is fixed at first use and never changes; it resolves to
//! the earliest observation of the session whose id begins with it, so ids
//! already given out stay valid and unambiguous as the session grows (and
//! any longer prefix, the full hex included, resolves to the same record).

use sha1::{Digest, Sha1};
use std::collections::{BTreeMap, HashMap};

/// Fewest hex characters a visible id has.
pub const MIN_SHOWN: usize = 4;

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

/// Whether `s` could be a visible id: [`MIN_SHOWN`] to 40 lowercase hex characters.
pub fn is_shown_form(s: &str) -> bool {
    (MIN_SHOWN..=40).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Gives each observation of one session its visible id (the module's rule)
/// and resolves visible ids back.
#[derive(Debug, Default, Clone)]
pub struct IdBook {
    shown: HashMap<ObsId, String>,
    /// Every id given a visible id, by full hex, with its arrival order.
    by_hex: BTreeMap<String, (u32, ObsId)>,
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
            let n = (MIN_SHOWN..40).find(|&n| self.earliest(&full[..n]).is_none()).unwrap_or(40);
            let order = self.by_hex.len() as u32;
            self.shown.insert(id, full[..n].to_string());
            self.by_hex.insert(full, (order, id));
        }
        &self.shown[&id]
    }

    /// Take `shown` as `id`'s visible id, as the archive that gave it shows
    /// it (an archive session that other conversations share holds ids this
    /// book never saw, so its visible id may be longer than this book's rule
    /// would give, or, for an observation another conversation archived
    /// first, shorter). True when `id` had no visible id yet and `shown` is
    /// one of its forms, or already had this one; false (nothing changed)
    /// otherwise.
    pub fn adopt(&mut self, id: ObsId, shown: &str) -> bool {
        if let Some(s) = self.shown.get(&id) {
            return s == shown;
        }
        let full = id.hex();
        if !is_shown_form(shown) || !full.starts_with(shown) {
            return false;
        }
        let order = self.by_hex.len() as u32;
        self.shown.insert(id, shown.to_string());
        self.by_hex.insert(full, (order, id));
        true
    }

    /// The earliest id that begins with `visible` (a visible id, or any
    /// longer prefix of one), if any.
    pub fn resolve(&self, visible: &str) -> Option<ObsId> {
        if !is_shown_form(visible) {
            return None;
        }
        self.earliest(visible)
    }

    fn earliest(&self, prefix: &str) -> Option<ObsId> {
        let hits = self.by_hex.range(prefix.to_string()..).take_while(|(hex, _)| hex.starts_with(prefix));
        hits.map(|(_, v)| *v).min().map(|(_, id)| id)
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
    fn shortest_prefix_no_earlier_id_begins_with() {
        let mut book = IdBook::new();
        let id = |hex: &str| {
            let mut b = [0u8; 20];
            hex::decode_to_slice(format!("{hex:0<40}"), &mut b).unwrap();
            ObsId(b)
        };
        let (a, b, c, d) = (id("abcdef12"), id("abcd0000"), id("abcdef99"), id("12"));
        assert_eq!(book.visible(a), "abcd");
        assert_eq!(book.visible(a), "abcd", "fixed at first use");
        assert_eq!(book.visible(b), "abcd0", "a's id begins with abcd");
        assert_eq!(book.visible(c), "abcdef9");
        assert_eq!(book.visible(d), "1200");
        assert_eq!(book.resolve("abcd"), Some(a), "the earliest whose id begins with it");
        assert_eq!(book.resolve("abcd0"), Some(b));
        assert_eq!(book.resolve("abcdef9"), Some(c));
        assert_eq!(book.resolve("abcdef"), Some(a));
        assert_eq!(book.resolve(&c.hex()), Some(c), "the full id");
        assert_eq!(book.resolve("abc"), None, "shorter than 4");
        assert_eq!(book.resolve("ABCD"), None);
        assert_eq!(book.resolve("ffff"), None);
    }

    #[test]
    fn an_archive_s_visible_id_is_adopted() {
        let mut book = IdBook::new();
        let (a, b) = (ObsId::of(b"cat a", b"1\n"), ObsId::of(b"cat b", b"2\n"));
        let long = &a.hex()[..7];
        assert!(book.adopt(a, long), "a longer form, as a shared archive gives it");
        assert_eq!(book.visible(a), long);
        assert!(book.adopt(a, long) && !book.adopt(a, &a.hex()[..4]), "fixed once given");
        assert!(!book.adopt(b, "abc") && !book.adopt(b, &a.hex()[..4]) && !book.adopt(b, "ABCD"), "not a form of b's id");
        assert_eq!(book.visible(b), &b.hex()[..4], "a refused form changes nothing");
    }
}
