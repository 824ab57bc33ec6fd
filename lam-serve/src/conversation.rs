//! Stage three: one conversation's items, frozen. A session remembers every
//! item it forwarded (by the item's key), so an item is looked at once, when
//! first seen: one the proxy changed nothing in goes as the client sends it,
//! one with residuals goes with the exact bytes first forwarded (prefix
//! stability). Only the new items of a request go on to admission.

use crate::admission::{Admitter, Delta};
use crate::api::{Api, Context, Observations as _};
use crate::canon::{self, Node};
use crate::engine::{Engine, Loan};
use crate::request::{Item, Parsed};
use crate::rewrite::{self, Frozen, Piece};
use lam_core::SessionId;
use serde_json::Value;
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
    /// What the items read so far say about the next one, and their keys:
    /// a request that extends them is read from its first new item on.
    cx: Context,
    cx_keys: Vec<u128>,
}

impl Conversation {
    /// A conversation archived in the store session the client named, or
    /// (`None`) in the run's ([`Admitter::of_run`]).
    pub(crate) fn new(name: Option<&str>, run: &str, op: lam_operator::Session) -> Self {
        let admitter = match name {
            Some(n) => Admitter::named(SessionId::new(n), op),
            None => Admitter::of_run(run, op),
        };
        Self { admitter, forwarded: HashMap::new(), frozen_bytes: 0, cx: Context::default(), cx_keys: Vec::new() }
    }

    /// An estimate of the memory this conversation holds: its frozen
    /// forwarded bytes and its operator state (retained vectors, chunk
    /// bookkeeping, ids, line hashes).
    pub(crate) fn bytes(&self) -> usize {
        let map = self.forwarded.capacity() * (std::mem::size_of::<(u128, Frozen)>() + 1);
        self.frozen_bytes + map + self.admitter.op.heap_bytes() + self.cx.heap_bytes() + self.cx_keys.capacity() * 16 + 512
    }

    /// The body to forward for `req`: every item forwarded before in this
    /// session with the residuals it had then (carrying the client's
    /// annotations of now), or as sent when it had none,
    /// every new observation archived and replaced by its residual, everything
    /// else as received. Each item is read once per request, into its tree
    /// ([`Parsed::parse`]; a small one whose tree was not kept is read again
    /// if new); only items new to the conversation become values.
    pub(crate) fn rewrite(&mut self, req: &Parsed, engine: &Engine) -> (Vec<u8>, Delta) {
        let keys = &req.keys[1..];
        if !keys.starts_with(&self.cx_keys) {
            // Not an extension (a named session whose client rewrote its history): read it all.
            (self.cx, self.cx_keys) = (Context::default(), Vec::new());
        }
        let read = self.cx_keys.len();
        let mut pass = Pass { engine, loan: None, delta: Delta::default() };
        let mut out: Vec<Piece<'_>> = Vec::with_capacity(req.items.len());
        for (i, item) in req.items.iter().enumerate() {
            let raw = item.raw.get().as_bytes();
            let frozen = self.forwarded.get(&keys[i]).map(|f| f.forward(raw, &item.annotations));
            if frozen.is_some() && i < read {
                pass.delta.reused += 1;
                out.extend(frozen);
                continue;
            }
            item.with_tree(|tree| {
                let value = tree.map_or(Value::Null, |t| canon::value(raw, t));
                out.push(match frozen {
                    Some(piece) => {
                        pass.delta.reused += 1;
                        piece
                    }
                    None => self.forward_new(req.api, keys[i], item, (tree, &value), &mut pass),
                });
                self.cx.note(req.api, &value);
            });
            self.cx_keys.push(keys[i]);
        }
        (rewrite::body(req, &out), pass.delta)
    }

    /// The bytes of an item seen for the first time (`read`: its tree and
    /// value), frozen: its observations admitted and replaced by their residuals.
    fn forward_new<'a>(&mut self, api: Api, key: u128, item: &'a Item, read: (Option<&Node>, &Value), pass: &mut Pass<'_>) -> Piece<'a> {
        pass.delta.new_items += 1;
        let (engine, raw, (tree, value)) = (pass.engine, item.raw.get().as_bytes(), read);
        let edits = match tree {
            Some(tree) => {
                let slots = api.slots(value, &self.cx, &engine.policy);
                if slots.is_empty() {
                    Vec::new()
                } else {
                    let loan = pass.loan.get_or_insert_with(|| engine.pool.take());
                    self.admitter.admit(value, tree, &slots, engine, loan, &mut pass.delta)
                }
            }
            None => Vec::new(),
        };
        let (frozen, piece) = match edits.is_empty() {
            true => (Frozen::as_sent(), Piece::Sent(raw)),
            false => {
                let bytes: Arc<[u8]> = rewrite::spliced(raw, edits).into();
                (Frozen::edited(bytes.clone(), item.annotations.clone(), None), Piece::Frozen(bytes))
            }
        };
        self.frozen_bytes += frozen.heap_bytes();
        self.forwarded.insert(key, frozen);
        piece
    }
}

/// One request's pass over a conversation: the engine, the encoder it
/// borrowed (at its first new observation) and what it changed.
struct Pass<'e> {
    engine: &'e Engine,
    loan: Option<Loan<'e>>,
    delta: Delta,
}
