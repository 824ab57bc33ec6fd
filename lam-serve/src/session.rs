//! Sessions: which conversation a request continues, and what each
//! conversation has forwarded so far.
//!
//! A request names its session with `x-lam-session`; otherwise it continues
//! the session whose last request's items are a prefix of its own (the
//! longest such, the most recently used among equals), and starts a new one
//! when none is. A session's conversation remembers the exact bytes it
//! forwarded for every item (by content key), so an item is admitted once, when
//! first seen, and forwarded byte-identically in every later request.

use crate::api::Slot;
use crate::canon::{self, Annotation};
use crate::engine::{Engine, Loan, lock};
use crate::request::{Item, Parsed};
use lam_core::{Record, SessionId};
use lam_operator::{Admission, SessionTotals};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One session's counters, as `GET /lam/stats` reports them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionStats {
    /// The store session its originals are archived in (`lam recall --session`).
    pub session: String,
    /// The `x-lam-session` name, when the client gave one.
    pub name: Option<String>,
    /// Requests that continued this session.
    pub requests: u64,
    /// Items of this session's requests seen for the first time (the only
    /// ones the proxy examines; observations among them are admitted).
    pub new_items: u64,
    /// Items sent again by the client and forwarded as they were first time.
    pub reused_items: u64,
    /// Observations admitted (each once).
    pub observations: u64,
    /// cl100k_base tokens of the admitted originals.
    pub tokens_in: u64,
    /// cl100k_base tokens of what was forwarded in their place (stubs included).
    pub tokens_out: u64,
    /// `(tokens_in - tokens_out) / tokens_in` (0 before any observation; `lam_operator::removal`).
    pub removal: f64,
    /// Stub lines written.
    pub stubs: u64,
    /// Observations forwarded verbatim because admission failed.
    pub admission_errors: u64,
    /// The last admission error.
    pub last_error: Option<String>,
    /// Seconds spent admitting (encoding included).
    pub admit_seconds: f64,
}

/// What admitting one request's new observations changed.
#[derive(Debug, Default)]
pub(crate) struct Delta {
    /// Items not forwarded before in this session (each is looked at once).
    pub new_items: u64,
    /// Items forwarded before, sent again as they were.
    pub reused: u64,
    /// The admissions (a kept tool's result counted as forwarded whole).
    pub totals: SessionTotals,
    pub errors: u64,
    pub last_error: Option<String>,
}

impl Delta {
    /// Count one admission; a kept one was forwarded whole.
    fn add(&mut self, a: &Admission, kept: bool) {
        if kept { self.totals.add_whole(a) } else { self.totals.add(a) }
    }
}

impl SessionStats {
    /// Add another session's counters (totals of evicted sessions).
    pub(crate) fn absorb(&mut self, o: &SessionStats) {
        self.requests += o.requests;
        self.new_items += o.new_items;
        self.reused_items += o.reused_items;
        self.observations += o.observations;
        self.tokens_in += o.tokens_in;
        self.tokens_out += o.tokens_out;
        self.stubs += o.stubs;
        self.admission_errors += o.admission_errors;
        self.admit_seconds += o.admit_seconds;
        self.removal = lam_operator::removal(self.tokens_in, self.tokens_out);
    }

    pub(crate) fn apply(&mut self, d: &Delta) {
        self.requests += 1;
        self.new_items += d.new_items;
        self.reused_items += d.reused;
        self.observations += d.totals.observations;
        self.tokens_in += d.totals.tokens_in;
        self.tokens_out += d.totals.tokens_out;
        self.stubs += d.totals.stubs;
        self.admission_errors += d.errors;
        self.admit_seconds += d.totals.seconds();
        if d.last_error.is_some() {
            self.last_error.clone_from(&d.last_error);
        }
        self.removal = lam_operator::removal(self.tokens_in, self.tokens_out);
    }
}

/// What a session forwarded for one item: the bytes (residuals in place) and
/// the annotations they carried, so a later request that moves the client's
/// `cache_control` marks gets the same bytes with the marks where it put them.
#[derive(Debug, Clone)]
struct Frozen {
    bytes: Arc<[u8]>,
    annotations: Arc<[Annotation]>,
}

impl Frozen {
    /// The bytes to forward when the client now annotates the item with `now`.
    fn with(&self, now: &[Annotation]) -> Arc<[u8]> {
        if *now == *self.annotations {
            return self.bytes.clone();
        }
        match canon::parse(&self.bytes) {
            Ok(tree) => canon::reannotate(&self.bytes, &tree, now).into(),
            Err(_) => self.bytes.clone(),
        }
    }
}

/// One conversation's operator and the bytes it forwarded for every item.
#[derive(Debug)]
pub(crate) struct Conversation {
    store_session: SessionId,
    op: lam_operator::Session,
    forwarded: HashMap<u128, Frozen>,
    /// Bytes the frozen items hold (bytes, annotations, map entry).
    frozen_bytes: usize,
}

impl Conversation {
    pub(crate) fn new(store_session: SessionId, op: lam_operator::Session) -> Self {
        Self { store_session, op, forwarded: HashMap::new(), frozen_bytes: 0 }
    }

    /// An estimate of the memory this conversation holds: its frozen
    /// forwarded bytes and its operator state (retained vectors, chunk
    /// bookkeeping, ids, line hashes).
    pub(crate) fn bytes(&self) -> usize {
        let map = self.forwarded.capacity() * (std::mem::size_of::<(u128, Frozen)>() + 1);
        self.frozen_bytes + map + self.op.heap_bytes() + 512
    }

    /// The body to forward for `req`: every item forwarded before in this
    /// session as it was then (carrying the client's annotations of now),
    /// every new observation archived and replaced by its residual, everything
    /// else as received.
    pub(crate) fn rewrite(&mut self, req: &Parsed, engine: &Engine) -> (Vec<u8>, Delta) {
        let cx = req.api.context(req.items.iter().map(Item::value));
        let mut loan = None;
        let mut delta = Delta::default();
        let mut out: Vec<Arc<[u8]>> = Vec::with_capacity(req.items.len());
        for (i, item) in req.items.iter().enumerate() {
            let key = req.keys[i + 1];
            if let Some(f) = self.forwarded.get(&key) {
                delta.reused += 1;
                out.push(f.with(&item.annotations));
                continue;
            }
            delta.new_items += 1;
            let value = item.faithful.then(|| item.value());
            let slots = match &value {
                Some(v) => req.api.slots(v, i, &cx, &engine.policy),
                None => Vec::new(),
            };
            let bytes: Arc<[u8]> = match value {
                Some(v) if !slots.is_empty() => {
                    let loan = loan.get_or_insert_with(|| engine.pool.take());
                    self.admit(item, &v, &slots, engine, loan, &mut delta).into()
                }
                _ => item.raw.get().as_bytes().into(),
            };
            let annotations: Arc<[Annotation]> = item.annotations.clone().into();
            self.frozen_bytes += bytes.len() + std::mem::size_of_val(&annotations[..]) + 96;
            self.forwarded.insert(key, Frozen { bytes: bytes.clone(), annotations });
            out.push(bytes);
        }
        (req.body_with(out.iter().map(|b| &b[..])), delta)
    }

    /// Archive and admit every observation of `item`; the item's bytes with
    /// each observation's string replaced by its residual, every other byte
    /// as received. An observation whose admission fails is forwarded verbatim.
    fn admit(&mut self, item: &Item, value: &Value, slots: &[Slot], engine: &Engine, loan: &mut Loan<'_>, d: &mut Delta) -> Vec<u8> {
        let raw = item.raw.get().as_bytes();
        let Some(tree) = item.tree() else {
            return raw.to_vec();
        };
        let mut edits = Vec::new();
        for s in slots {
            let (Some(text), Some(node)) = (value.pointer(&s.pointer).and_then(Value::as_str), canon::find(&tree, &s.pointer)) else {
                continue;
            };
            #[cfg(test)]
            fault::check(text);
            let rec = Record { index: self.op.records(), action: s.action.clone(), observation: text.as_bytes().to_vec(), returncode: None };
            match self.op.admit_archived(&mut &engine.store, &self.store_session, loan.encoder(), &rec) {
                Ok(a) => {
                    d.add(&a, s.keep);
                    if !s.keep && a.residual != rec.observation {
                        let residual = String::from_utf8(a.residual).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                        let lit = serde_json::to_vec(&residual).expect("a string serialises");
                        edits.push((node.span.clone(), lit));
                    }
                }
                Err(e) => {
                    d.errors += 1;
                    d.last_error = Some(format!("record {}: {e}", rec.index));
                }
            }
        }
        canon::splice(raw, edits)
    }
}

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

/// Tests make admission panic on an observation holding a marker, to check
/// that the proxy fails open.
#[cfg(test)]
pub(crate) mod fault {
    use std::cell::RefCell;

    thread_local! {
        static MARKER: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    /// Panic in admission on observations containing `marker` (this thread).
    pub(crate) fn arm(marker: &str) {
        MARKER.with(|m| *m.borrow_mut() = Some(marker.to_string()));
    }

    pub(super) fn check(text: &str) {
        MARKER.with(|m| {
            if let Some(k) = m.borrow().as_deref() {
                assert!(!text.contains(k), "injected fault: observation holds {k}");
            }
        });
    }
}
