//! `MemStore`: the in-memory archive (tests, short-lived sessions).

use crate::index::SessionIndex;
use lam_core::{Error, IdScope, ObsId, ObsMeta, ObsStore, Record, SessionId, StoreIds};
use std::collections::HashMap;

/// An in-memory [`ObsStore`]: the observations of all its sessions share one
/// id space ([`lam_core::id`], [`IdScope::Store`]); bodies are kept as exact
/// bytes. Nothing survives the process.
#[derive(Debug)]
pub struct MemStore {
    sessions: HashMap<String, SessionIndex<Vec<u8>>>,
    ids: StoreIds,
}

impl Default for MemStore {
    fn default() -> Self {
        Self { sessions: HashMap::new(), ids: StoreIds::new(IdScope::Store) }
    }
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of distinct observations archived across all sessions.
    pub fn len(&self) -> usize {
        self.sessions.values().map(SessionIndex::len).sum()
    }

    /// True when nothing is archived.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sessions that hold at least one observation, sorted.
    pub fn sessions(&self) -> Vec<SessionId> {
        let mut v: Vec<SessionId> = self.sessions.keys().map(|s| SessionId(s.clone())).collect();
        v.sort();
        v
    }
}

impl ObsStore for MemStore {
    fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, Error> {
        let id = ObsId::of(record.action.as_bytes(), &record.observation);
        let s = self.sessions.entry(session.0.clone()).or_insert_with(|| SessionIndex::new(&session.0));
        if let Some(m) = s.meta_of(&id) {
            return Ok(m.clone());
        }
        let meta = s.add(&mut self.ids, id, record.action.as_bytes(), &record.observation, record.returncode, record.index, tokens, record.observation.clone());
        Ok(meta.clone())
    }

    fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.sessions.get(&session.0).and_then(|s| s.lookup(shown)).map(|(_, b)| b.clone()))
    }

    fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, Error> {
        Ok(self.sessions.get(&session.0).and_then(|s| s.lookup(shown)).map(|(m, _)| m.clone()))
    }

    fn ids(&self, session: &SessionId) -> Result<Vec<String>, Error> {
        Ok(self.sessions.get(&session.0).map(SessionIndex::ids).unwrap_or_default())
    }

    fn sessions(&self) -> Result<Vec<SessionId>, Error> {
        Ok(self.sessions())
    }
}
