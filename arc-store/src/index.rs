//! The per-session index both stores keep in memory: the session's
//! [`IdBook`] (its visible ids, given out by the store's [`StoreIds`]), and
//! for every archived observation its metadata and where its body lives
//! (`L`: the bytes themselves for `MemStore`, a file location for
//! `FileStore`).

use lam_core::{IdBook, ObsId, ObsMeta, SessionId, StoreIds, previews};
use std::collections::HashMap;

/// One session's records.
#[derive(Debug)]
pub(crate) struct SessionIndex<L> {
    name: SessionId,
    book: IdBook,
    by_id: HashMap<ObsId, usize>,
    entries: Vec<(ObsMeta, L)>,
    /// Ids of damaged records (`FileStore`), with the caller's handle on the
    /// damage: they hold their visible id in the book, so ids given out after
    /// them keep their extensions, and recall of them says they are damaged.
    damaged: HashMap<ObsId, usize>,
}

impl<L> SessionIndex<L> {
    /// The empty index of session `name`.
    pub fn new(name: &str) -> Self {
        Self { name: SessionId::new(name), book: IdBook::new(), by_id: HashMap::new(), entries: Vec::new(), damaged: HashMap::new() }
    }

    /// The metadata of `id`, if already archived in this session.
    pub fn meta_of(&self, id: &ObsId) -> Option<&ObsMeta> {
        self.by_id.get(id).map(|&i| &self.entries[i].0)
    }

    /// Record a newly archived observation (after its body is stored, so a
    /// failed write never consumes a visible id), its visible id given by
    /// `ids`. Returns its metadata. Re-adding a known id returns the first
    /// record's metadata unchanged.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        ids: &mut StoreIds,
        id: ObsId,
        action: &[u8],
        observation: &[u8],
        returncode: Option<i32>,
        step: u32,
        tokens: u32,
        loc: L,
    ) -> &ObsMeta {
        if let Some(&i) = self.by_id.get(&id) {
            return &self.entries[i].0;
        }
        let shown = ids.visible(&self.name, &mut self.book, id);
        let (h, t) = previews(observation);
        let meta = ObsMeta {
            id,
            shown,
            action: String::from_utf8_lossy(action).into_owned(),
            returncode,
            step,
            bytes: observation.len() as u64,
            tokens,
            head: observation[h].to_vec(),
            tail: observation[t].to_vec(),
        };
        self.by_id.insert(id, self.entries.len());
        self.entries.push((meta, loc));
        &self.entries.last().unwrap().0
    }

    /// The entry `shown` names in this session (`IdBook::resolve`).
    pub fn lookup(&self, shown: &str) -> Option<&(ObsMeta, L)> {
        let id = self.book.resolve(shown)?;
        self.by_id.get(&id).map(|&i| &self.entries[i])
    }

    /// Register a damaged record's id (in file order, like `add`); returns
    /// its visible id. An intact record of the same id, earlier or later,
    /// answers for it instead.
    pub fn add_damaged(&mut self, ids: &mut StoreIds, id: ObsId, handle: usize) -> String {
        self.damaged.entry(id).or_insert(handle);
        ids.visible(&self.name, &mut self.book, id)
    }

    /// The handle of the damaged record shown as `shown`, when no intact
    /// record answers for that id.
    pub fn damaged(&self, shown: &str) -> Option<usize> {
        let id = self.book.resolve(shown)?;
        if self.by_id.contains_key(&id) {
            return None;
        }
        self.damaged.get(&id).copied()
    }

    /// Every entry, in creation order.
    pub fn entries(&self) -> &[(ObsMeta, L)] {
        &self.entries
    }

    /// Visible ids in creation order.
    pub fn ids(&self) -> Vec<String> {
        self.entries.iter().map(|(m, _)| m.shown.clone()).collect()
    }

    /// Number of archived observations.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}
