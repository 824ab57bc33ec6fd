//! Content-addressed observation ids (`§id`), shared by stubs and the archive.
//!
//! id = SHA-1 over (action signature, byte 0x1F, observation). The visible
//! id is the shortest prefix of the id's hex, at least [`MIN_SHOWN`]
//! characters, with which no other observation's id in its *id space*
//! begins; it is fixed at first use and never changes.
//!
//! An id space ([`IdScope`], applied by [`StoreIds`]):
//!
//! - [`IdScope::Store`] (every store made since issue 68): all the sessions
//!   of a store that hold observations ([`crate::SessionId::holds_observations`])
//!   share one space. An observation already shown in another session is
//!   shown by the same id (content-addressed), so an exact visible id names
//!   one observation in the whole store, whatever else the store holds. A
//!   session holding a run's settings is a space of its own: its records
//!   neither take nor block observations' ids.
//! - [`IdScope::Session`] (stores made before): each session is its own
//!   space, as every id was given out then; such stores keep this rule.
//!
//! Within one session an id resolves to the observation shown exactly as
//! it; otherwise (a longer prefix, the full hex, the 8-hex ids of older
//! builds) to the earliest observation of the session whose id begins with
//! it. Within one session a visible id is therefore never ambiguous, and ids
//! already given out stay valid as the store grows.

use crate::SessionId;
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

/// Gives each observation of one id space its visible id (the module's
/// rule) and resolves visible ids back.
#[derive(Debug, Default, Clone)]
pub struct IdBook {
    shown: HashMap<ObsId, String>,
    /// Every visible id given, and whose it is.
    by_shown: HashMap<String, ObsId>,
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
            self.insert(id, full[..n].to_string());
        }
        &self.shown[&id]
    }

    /// The visible id `id` has in this book, if any.
    pub fn get(&self, id: &ObsId) -> Option<&str> {
        self.shown.get(id).map(String::as_str)
    }

    /// Take `shown` as `id`'s visible id, as the archive that gave it shows
    /// it (a store's id space holds ids this book never saw, so its visible
    /// id may be longer than this book's rule would give, or, for an
    /// observation archived elsewhere first, shorter). True when `id` had no
    /// visible id yet, `shown` is one of its forms and no other id of the
    /// book shows it, or when `id` already had this one; false (nothing
    /// changed) otherwise.
    pub fn adopt(&mut self, id: ObsId, shown: &str) -> bool {
        if let Some(s) = self.shown.get(&id) {
            return s == shown;
        }
        if !is_shown_form(shown) || !id.hex().starts_with(shown) || self.by_shown.contains_key(shown) {
            return false;
        }
        self.insert(id, shown.to_string());
        true
    }

    fn insert(&mut self, id: ObsId, shown: String) {
        let order = self.by_hex.len() as u32;
        self.by_shown.insert(shown.clone(), id);
        self.shown.insert(id, shown);
        self.by_hex.insert(id.hex(), (order, id));
    }

    /// The id shown exactly as `visible`, else the earliest id that begins
    /// with `visible` (a longer prefix of a visible id), if any.
    pub fn resolve(&self, visible: &str) -> Option<ObsId> {
        if !is_shown_form(visible) {
            return None;
        }
        self.by_shown.get(visible).copied().or_else(|| self.earliest(visible))
    }

    fn earliest(&self, prefix: &str) -> Option<ObsId> {
        let hits = self.by_hex.range(prefix.to_string()..).take_while(|(hex, _)| hex.starts_with(prefix));
        hits.map(|(_, v)| *v).min().map(|(_, id)| id)
    }
}

/// Which observations share one id space (the module's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdScope {
    /// Every session of the store that holds observations shares one space
    /// (stores made since issue 68).
    Store,
    /// Each session is a space of its own (stores made before).
    Session,
}

/// The visible ids of one store: the module's rule, applied by every store
/// that derives ids itself (`MemStore`, `FileStore`). Each session keeps its
/// own [`IdBook`] to resolve ids; this gives them out.
#[derive(Debug, Clone)]
pub struct StoreIds {
    /// The observations' shared space ([`IdScope::Store`]).
    shared: Option<IdBook>,
}

impl StoreIds {
    /// No ids given yet, under `scope`.
    pub fn new(scope: IdScope) -> Self {
        Self { shared: (scope == IdScope::Store).then(IdBook::new) }
    }

    /// The rule these ids follow.
    pub fn scope(&self) -> IdScope {
        if self.shared.is_some() { IdScope::Store } else { IdScope::Session }
    }

    /// The visible id of `id`, archived in `session` whose own book is
    /// `book`, given now unless `book` holds it already. In the shared space
    /// an observation keeps the id it has in another session.
    pub fn visible(&mut self, session: &SessionId, book: &mut IdBook, id: ObsId) -> String {
        if let Some(s) = book.get(&id) {
            return s.to_string();
        }
        if let Some(space) = self.shared.as_mut().filter(|_| session.holds_observations()) {
            let s = space.visible(id).to_string();
            // A session's book holds only ids of the space, so none shows `s`.
            if book.adopt(id, &s) {
                return s;
            }
        }
        book.visible(id).to_string()
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

    fn id_of(hex: &str) -> ObsId {
        let mut b = [0u8; 20];
        hex::decode_to_slice(format!("{hex:0<40}"), &mut b).unwrap();
        ObsId(b)
    }

    #[test]
    fn an_exact_visible_id_resolves_first() {
        // Adopted out of order, as a session of a shared space gets them:
        // `y` was shown first elsewhere, `x` here comes before it.
        let (x, y) = (id_of("abcd5e"), id_of("abcd5f"));
        let mut book = IdBook::new();
        assert!(book.adopt(y, "abcd5f") && book.adopt(x, "abcd"));
        assert_eq!(book.resolve("abcd"), Some(x), "shown exactly");
        assert_eq!(book.resolve("abcd5f"), Some(y));
        assert_eq!(book.resolve("abcd5"), Some(y), "not shown: the earliest whose id begins with it");
        assert_eq!(book.resolve(&x.hex()), Some(x), "the full id");
        assert!(!book.adopt(id_of("abcd77"), "abcd"), "x shows it");
    }

    #[test]
    fn a_store_s_observations_share_one_space() {
        let mut ids = StoreIds::new(IdScope::Store);
        let (a, b, run) = (SessionId::new("a"), SessionId::new("b"), SessionId::settings_of("a"));
        let (mut ba, mut bb, mut br) = (IdBook::new(), IdBook::new(), IdBook::new());
        let (x, y, z) = (id_of("abcd5e"), id_of("abcd5f"), id_of("abcd77"));
        assert_eq!(ids.visible(&run, &mut br, z), "abcd", "a settings record: its own space");
        assert_eq!(ids.visible(&a, &mut ba, x), "abcd", "the settings record blocks nothing");
        assert_eq!(ids.visible(&b, &mut bb, y), "abcd5f", "x holds abcd and abcd5 in the store");
        assert_eq!(ids.visible(&b, &mut bb, x), "abcd", "x keeps its id in another session");
        assert_eq!(ids.visible(&b, &mut bb, x), "abcd", "fixed at first use");
        assert_eq!((bb.resolve("abcd"), bb.resolve("abcd5f")), (Some(x), Some(y)));
        assert_eq!(ids.visible(&run, &mut br, y), "abcd5", "the settings session keeps its own rule");
        assert_eq!(ids.visible(&a, &mut ba, z), "abcd7", "not blocked by the settings record, only by x");
        let mut own = StoreIds::new(IdScope::Session);
        let (mut ca, mut cb) = (IdBook::new(), IdBook::new());
        assert_eq!((own.visible(&a, &mut ca, x), own.visible(&b, &mut cb, y)), ("abcd".into(), "abcd".into()), "older stores: per session");
        assert_eq!((ids.scope(), own.scope()), (IdScope::Store, IdScope::Session));
    }
}
