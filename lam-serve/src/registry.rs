//! Stage two: which conversation a request continues.
//!
//! A request names its session with `x-lam-session`; otherwise it continues
//! the session whose last request's items are a prefix of its own (the
//! longest such, the most recently used among equals), and starts a new one
//! when none is. Sessions are held least-recently-used within
//! `--max-sessions` and `--max-memory`; a dropped session's archive stays.
//! The store session a new proxy session archives in is named here too.

use crate::budget::Calibration;
use crate::conversation::Conversation;
use crate::engine::Engine;
use crate::error::Error;
use crate::request::Parsed;
use crate::stats::SessionStats;
use crate::sync::lock;
use lam_core::wire;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A session: its conversation (locked while a request of it is
/// rewritten), its counters (locked only to read or add) and its budget's
/// calibration (raised by the upstream's answers, read when a request
/// comes: [`crate::budget::Calibration`]).
#[derive(Debug)]
pub(crate) struct Handle {
    pub conv: Mutex<Conversation>,
    pub stats: Mutex<SessionStats>,
    pub calibration: Calibration,
}

impl Handle {
    /// Its counters as reported, the calibration with them.
    pub(crate) fn report(&self) -> SessionStats {
        SessionStats { calibration: self.calibration.get(), ..lock(&self.stats).clone() }
    }
}

#[derive(Debug)]
struct Entry {
    handle: Arc<Handle>,
    keys: Vec<u128>,
    used: u64,
    /// What its conversation held when last accounted ([`Conversation::bytes`]),
    /// its stash included.
    bytes: usize,
    /// The conversation as it was before a fork call, for the branch that
    /// has not come yet ([`Registry::stash`]).
    stash: Option<Stash>,
    /// The fork calls already branched from this session (by call id).
    forked: Vec<String>,
}

/// A conversation kept at a fork: the keys it had then and its state.
#[derive(Debug)]
struct Stash {
    keys: Vec<u128>,
    conv: Conversation,
    session: String,
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
        let e = Entry { handle, keys: keys.to_vec(), used: self.clock, bytes: 0, stash: None, forked: Vec::new() };
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
        self.retired.absorb(&e.handle.report());
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
        let bytes = bytes + e.stash.as_ref().map_or(0, |s| s.conv.bytes());
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
        self.retired.absorb(&e.handle.report());
    }

    /// The unnamed session whose keys `keys` extend the furthest: its
    /// handle and how many of `keys` it holds.
    fn longest(&self, keys: &[u128]) -> Option<(Arc<Handle>, usize)> {
        let e = self.open.iter().filter(|e| keys.starts_with(&e.keys)).max_by_key(|e| (e.keys.len(), e.used))?;
        Some((e.handle.clone(), e.keys.len()))
    }

    /// Note that `h` branched at fork call `call`; false when it had already.
    fn branch(&mut self, h: &Arc<Handle>, call: &str) -> bool {
        let Some(e) = self.open.iter_mut().find(|e| Arc::ptr_eq(&e.handle, h)) else {
            return false;
        };
        if e.forked.iter().any(|c| c == call) {
            return false;
        }
        e.forked.push(call.to_string());
        true
    }

    /// Keep `conv`, `h`'s conversation as it was at `keys` (before a fork
    /// call), for the other branch of the fork.
    fn stash(&mut self, h: &Arc<Handle>, keys: Vec<u128>, conv: Conversation, session: String) {
        if let Some(e) = self.open.iter_mut().find(|e| Arc::ptr_eq(&e.handle, h)) {
            e.stash = Some(Stash { keys, conv, session });
        }
    }

    /// The stashed conversation that `keys` extend the furthest, taken.
    fn unstash(&mut self, keys: &[u128]) -> Option<Stash> {
        let e = self
            .open
            .iter_mut()
            .filter(|e| e.stash.as_ref().is_some_and(|s| keys.starts_with(&s.keys)))
            .max_by_key(|e| e.stash.as_ref().map(|s| s.keys.len()))?;
        e.stash.take()
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
        self.open.iter().chain(named.into_iter().map(|(_, e)| e)).map(|e| e.handle.report()).collect()
    }
}

/// The session `req` continues (named `name`, else by prefix), claimed, or a
/// new one. A new session archives in the store session `NAME` the client
/// named, which its first observation claims ([`arc_store::claim_session`]:
/// `NAME@2`, ... when another conversation's archive holds the name), or in
/// the run's, `RUN` ([`crate::admission::Admitter::of_run`]). A fork ([`fork`]) gets a session of its own
/// that starts from its parent's conversation.
pub(crate) fn find_or_start(reg: &Mutex<Registry>, engine: &Engine, run: &str, name: Option<&str>, req: &Parsed, max: usize) -> Result<Arc<Handle>, Error> {
    let mut reg = lock(reg);
    if name.is_none()
        && let Some(h) = fork(&mut reg, req, max)
    {
        return Ok(h);
    }
    if let Some(h) = reg.claim(name, &req.keys) {
        return Ok(h);
    }
    if name.is_none()
        && let Some(s) = reg.unstash(&req.keys)
    {
        return Ok(start(&mut reg, None, &req.keys, s.conv, s.session, max));
    }
    let label = name.unwrap_or(run).to_string();
    let conv = Conversation::new(name, run, engine.operator_session()?);
    Ok(start(&mut reg, name, &req.keys, conv, label, max))
}

/// A new session of `conv`, archiving in the store session `session`.
fn start(reg: &mut Registry, name: Option<&str>, keys: &[u128], conv: Conversation, session: String, max: usize) -> Arc<Handle> {
    let stats = SessionStats { conversation: reg.made() + 1, session, name: name.map(str::to_string), ..SessionStats::default() };
    let h = Arc::new(Handle { conv: Mutex::new(conv), stats: Mutex::new(stats), calibration: Calibration::default() });
    reg.insert(name, keys, h.clone(), max);
    h
}

/// Forks. An agent that forks a subagent (`lam_trajectory::agents::is_fork`) makes
/// two conversations that both extend the parent's: the fork's (the
/// parent's history, then its own items) and the parent's (the fork call
/// answered). Whichever request comes first through the fork call: the
/// parent's continuation (it carries the call's result) claims the session
/// as usual, and the conversation as it was before the call is stashed for
/// the fork; the fork's gets a new session starting from a copy of the
/// parent's conversation, which keeps its own. Both stay prefix-stable and
/// archive in the parent's store session (a stub in the fork may cite what
/// the parent saw). Returns the fork's new session.
fn fork(reg: &mut Registry, req: &Parsed, max: usize) -> Option<Arc<Handle>> {
    let (h, held) = reg.longest(&req.keys)?;
    let new = &req.items[held.saturating_sub(1)..];
    let call = new.iter().find_map(|it| {
        let v = it.value();
        let obj = v.as_object()?;
        wire::calls(req.api, obj).into_iter().find(lam_trajectory::agents::is_fork).map(|c| c.id.to_string())
    })?;
    if !reg.branch(&h, &call) {
        return None;
    }
    let answered = new.iter().any(|it| it.value().as_object().is_some_and(|o| wire::result_ids(req.api, o).contains(&call.as_str())));
    let conv = lock(&h.conv).clone();
    let session = lock(&h.stats).session.clone();
    if answered {
        reg.stash(&h, req.keys[..held].to_vec(), conv, session);
        return None;
    }
    Some(start(reg, None, &req.keys, conv, session, max))
}
