//! One file store handle shared by every proxy of a test, as replicas
//! share one store (a file store has one writer per directory): the
//! replica and restart tests (`replicas.rs`, `cold_cuts.rs`).

use arc_store::FileStore;
use lam_core::{ObsMeta, ObsStore, Record, SessionId};
use std::path::Path;
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct Shared(Arc<Mutex<FileStore>>);

impl Shared {
    pub fn new(dir: &Path) -> Self {
        Self(Arc::new(Mutex::new(FileStore::open(dir).unwrap())))
    }
    fn with<T>(&self, f: impl FnOnce(&mut FileStore) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }
}

impl ObsStore for Shared {
    fn append(&mut self, s: &SessionId, r: &Record, t: u32) -> Result<ObsMeta, lam_core::Error> {
        self.with(|st| ObsStore::append(st, s, r, t))
    }
    fn get(&self, s: &SessionId, id: &str) -> Result<Option<Vec<u8>>, lam_core::Error> {
        self.with(|st| ObsStore::get(st, s, id))
    }
    fn meta(&self, s: &SessionId, id: &str) -> Result<Option<ObsMeta>, lam_core::Error> {
        self.with(|st| ObsStore::meta(st, s, id))
    }
    fn ids(&self, s: &SessionId) -> Result<Vec<String>, lam_core::Error> {
        self.with(|st| ObsStore::ids(st, s))
    }
    fn sessions(&self) -> Result<Vec<SessionId>, lam_core::Error> {
        self.with(|st| ObsStore::sessions(st))
    }
    fn claim(&mut self, s: &SessionId, r: &Record, t: u32) -> Result<Option<ObsMeta>, lam_core::Error> {
        self.with(|st| ObsStore::claim(st, s, r, t))
    }
}
