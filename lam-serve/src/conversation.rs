//! Stage three: one conversation's items, frozen. A session remembers the
//! exact bytes it forwarded for every item (by the item's key), so an item
//! is looked at once, when first seen, and forwarded byte for byte the same
//! in every later request (prefix stability). Only the new items of a
//! request go on to admission.

use crate::admission::{Admitter, Delta};
use crate::api::Observations as _;
use crate::canon;
use crate::engine::Engine;
use crate::request::{Item, Parsed};
use crate::rewrite::{self, Frozen};
use lam_core::SessionId;
use std::collections::HashMap;
use std::sync::Arc;

/// One conversation's admission state and the bytes it forwarded for every
/// item. A copy goes on from the same state (a forked subagent's).
#[derive(Debug, Clone)]
pub(crate) struct Conversation {
    admitter: Admitter,
    forwarded: HashMap<u128, Frozen>,
    /// Bytes the frozen items hold ([`Frozen::heap_bytes`]).
    frozen_bytes: usize,
}

impl Conversation {
    pub(crate) fn new(store_session: SessionId, op: lam_operator::Session) -> Self {
        Self { admitter: Admitter::new(store_session, op), forwarded: HashMap::new(), frozen_bytes: 0 }
    }

    /// An estimate of the memory this conversation holds: its frozen
    /// forwarded bytes and its operator state (retained vectors, chunk
    /// bookkeeping, ids, line hashes).
    pub(crate) fn bytes(&self) -> usize {
        let map = self.forwarded.capacity() * (std::mem::size_of::<(u128, Frozen)>() + 1);
        self.frozen_bytes + map + self.admitter.op.heap_bytes() + 512
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
            let raw = item.raw.get().as_bytes();
            let value = item.faithful.then(|| item.value());
            let slots = value.as_ref().map(|v| req.api.slots(v, i, &cx, &engine.policy)).unwrap_or_default();
            let tree = if slots.is_empty() { None } else { canon::parse(raw).ok() };
            let bytes: Arc<[u8]> = match (value, tree) {
                (Some(v), Some(tree)) => {
                    let loan = loan.get_or_insert_with(|| engine.pool.take());
                    let edits = self.admitter.admit(&v, &tree, &slots, engine, loan, &mut delta);
                    rewrite::spliced(raw, edits).into()
                }
                _ => raw.into(),
            };
            let frozen = Frozen::new(bytes.clone(), item.annotations.clone());
            self.frozen_bytes += frozen.heap_bytes();
            self.forwarded.insert(key, frozen);
            out.push(bytes);
        }
        (rewrite::body(req, &out), delta)
    }
}
