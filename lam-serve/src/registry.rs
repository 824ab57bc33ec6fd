//! Stage two: which conversation a request continues.
//!
//! A request names its session with `x-lam-session`; otherwise it continues
//! the session whose last request's items are a prefix of its own (the
//! longest such, the most recently used among equals), and starts a new one
//! when none is. Sessions are held least-recently-used within
//! `--max-sessions` and `--max-memory`; a dropped session's archive stays.
//! The store session a new proxy session archives in is named here too.

use crate::Error;
use crate::conversation::Conversation;
use crate::engine::{Engine, lock};
use crate::stats::SessionStats;
use lam_core::SessionId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A session: its conversation (locked while a request of it is rewritten)
/// and its counters (locked only to read or add).
#[derive(Debug)]
pub(crate) struct Handle {
    pub conv: Mutex<Conversation>,
    pub stats: Mutex<SessionStats>,
}

#[derive(Debug)]
struct Entry {
    handle: Arc<Handle>,
    keys: Vec<u128>,
    used: u64,
    /// What its conversation held when last accounted ([`Conversation::bytes`]).
    bytes: usize,
}

/// Every session of the proxy. Held only to match and claim, never while
/// anything is encoded.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    open: Vec<Entry>,
    named: HashMap<String, Entry>,
    clock: u64,
    made: u64,
    /// Sessions dropped to stay within the limit, and their summed counters.
    evicted: u64,
    retired: SessionStats,
    /// Bytes all held sessions hold, as last accounted.
    held: usize,
}

impl Registry {
    /// The session `keys` continue, claimed: its keys become `keys`, so a
    /// request of a diverging conversation arriving meanwhile does not match it.
    pub(crate) fn claim(&mut self, name: Option<&str>, keys: &[u128]) -> Option<Arc<Handle>> {
        self.clock += 1;
        let e = match name {
            Some(n) => self.named.get_mut(n)?,
            None => self.open.iter_mut().filter(|e| keys.starts_with(&e.keys)).max_by_key(|e| (e.keys.len(), e.used))?,
        };
        e.keys = keys.to_vec();
        e.used = self.clock;
        Some(e.handle.clone())
    }

    /// Add a new session continued by `keys`, first dropping the least
    /// recently used sessions so that at most `max` are held.
    pub(crate) fn insert(&mut self, name: Option<&str>, keys: &[u128], handle: Arc<Handle>, max: usize) {
        while self.open.len() + self.named.len() >= max.max(1) {
            self.evict_oldest();
        }
        self.clock += 1;
        self.made += 1;
        let e = Entry { handle, keys: keys.to_vec(), used: self.clock, bytes: 0 };
        match name {
            Some(n) => {
                self.named.insert(n.to_string(), e);
            }
            None => self.open.push(e),
        }
    }

    fn evict_oldest(&mut self) {
        let open = self.open.iter().enumerate().min_by_key(|(_, e)| e.used).map(|(i, e)| (e.used, i));
        let named = self.named.iter().min_by_key(|(_, e)| e.used).map(|(k, e)| (e.used, k.clone()));
        let e = match (open, named) {
            (Some((uo, i)), Some((un, _))) if uo <= un => self.open.remove(i),
            (Some((_, i)), None) => self.open.remove(i),
            (_, Some((_, k))) => self.named.remove(&k).expect("present"),
            (None, None) => return,
        };
        self.evicted += 1;
        self.held -= e.bytes;
        self.retired.absorb(&lock(&e.handle.stats));
    }

    /// Record that `h`'s conversation now holds `bytes`, then drop the least
    /// recently used sessions (`h` last: it was just used) until all held
    /// sessions hold at most `budget` bytes. A session dropped meanwhile is
    /// not counted.
    pub(crate) fn account(&mut self, h: &Arc<Handle>, bytes: usize, budget: usize) {
        let found = self.open.iter_mut().chain(self.named.values_mut()).find(|e| Arc::ptr_eq(&e.handle, h));
        let Some(e) = found else {
            return;
        };
        self.held = self.held - e.bytes + bytes;
        e.bytes = bytes;
        while self.held > budget && !(self.open.is_empty() && self.named.is_empty()) {
            self.evict_oldest();
        }
    }

    /// Drop `h` (rewriting its request failed): its counters join the
    /// retired ones and the next request of its conversation starts anew.
    pub(crate) fn retire(&mut self, h: &Arc<Handle>) {
        let e = match self.open.iter().position(|e| Arc::ptr_eq(&e.handle, h)) {
            Some(i) => self.open.remove(i),
            None => match self.named.iter().find(|(_, e)| Arc::ptr_eq(&e.handle, h)).map(|(k, _)| k.clone()) {
                Some(k) => self.named.remove(&k).expect("present"),
                None => return,
            },
        };
        self.held -= e.bytes;
        self.retired.absorb(&lock(&e.handle.stats));
    }

    /// Bytes all held sessions hold, as last accounted.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Sessions dropped so far and their summed counters.
    pub(crate) fn evicted(&self) -> (u64, SessionStats) {
        (self.evicted, self.retired.clone())
    }

    /// Sessions made so far (numbers new sessions).
    pub(crate) fn made(&self) -> u64 {
        self.made
    }

    /// Every session's counters, in creation order for unnamed sessions, then named ones by name.
    pub(crate) fn stats(&self) -> Vec<SessionStats> {
        let mut named: Vec<_> = self.named.iter().collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        self.open.iter().chain(named.into_iter().map(|(_, e)| e)).map(|e| lock(&e.handle.stats).clone()).collect()
    }
}

/// The session `keys` continue (named `name`, else by prefix), claimed, or a
/// new one. A new session proposes to archive in the store session `NAME`
/// (the client's name) or `RUN-N`; its first observation claims it
/// ([`arc_store::claim_session`]: `NAME@2`, ... when another conversation's
/// archive holds the name).
pub(crate) fn find_or_start(reg: &Mutex<Registry>, engine: &Engine, run: &str, name: Option<&str>, keys: &[u128], max: usize) -> Result<Arc<Handle>, Error> {
    let mut reg = lock(reg);
    if let Some(h) = reg.claim(name, keys) {
        return Ok(h);
    }
    let label = name.map_or_else(|| format!("{run}-{}", reg.made() + 1), str::to_string);
    let op = engine.operator_session()?;
    let stats = SessionStats { session: label.clone(), name: name.map(str::to_string), ..SessionStats::default() };
    let h = Arc::new(Handle { conv: Mutex::new(Conversation::new(SessionId::new(label), op)), stats: Mutex::new(stats) });
    reg.insert(name, keys, h.clone(), max);
    Ok(h)
}
