//! Stage three: one conversation's items, frozen. A session remembers every
//! item it forwarded (by the item's key), so an item is looked at once, when
//! first seen: one the proxy changed nothing in goes as the client sends it,
//! one with residuals goes with the exact bytes first forwarded (prefix
//! stability). Only the new items of a request go on to admission.

use crate::admission::Admitter;
use crate::api::{Api, Context, Observations as _};
use crate::budget::{Asked, Books};
use crate::budget::{Reach, Stage};
use crate::canon::{self, Node};
use crate::engine::{Engine, Loan};
use crate::report::{Report, Unarchived};

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
    /// With `--budget`: the budget stage (every item's tokens, what the
    /// cuts did, their ledger: [`crate::budget`]).
    budget: Stage,
    /// The last preamble counted: its hash and tokens.
    pre: Option<(u64, u64)>,
    /// Items (by key) that went upstream whole with observations the store
    /// was out of reach for: their position and what to archive when a
    /// request carries them again ([`Conversation::archive_late`]).
    pending: HashMap<u128, (usize, Vec<Unarchived>)>,
    /// What its requests cost direct and through lam ([`Conversation::bill`]).
    bills: crate::bill::Bills,
}

impl Conversation {
    /// A conversation archived in the store session the client named, or
    /// (`None`) in the run's ([`Admitter::of_run`]).
    pub(crate) fn new(name: Option<&str>, run: &str, op: lam_operator::Session) -> Self {
        let admitter = match name {
            Some(n) => Admitter::named(SessionId::new(n), op),
            None => Admitter::of_run(run, op),
        };
        Self {
            admitter,
            forwarded: HashMap::new(),
            frozen_bytes: 0,
            cx: Context::default(),
            cx_keys: Vec::new(),
            budget: Stage::new(run),
            pre: None,
            pending: HashMap::new(),
            bills: crate::bill::Bills::default(),
        }
    }

    /// An estimate of the memory this conversation holds: its frozen
    /// forwarded bytes and its operator state (retained vectors, chunk
    /// bookkeeping, ids, line hashes).
    pub(crate) fn bytes(&self) -> usize {
        let map = self.forwarded.capacity() * (std::mem::size_of::<(u128, Frozen)>() + 1);
        let pending = self.pending.len() * 256 + self.bills.heap_bytes();
        self.frozen_bytes + map + self.admitter.op.heap_bytes() + self.cx.heap_bytes() + self.cx_keys.capacity() * 16 + self.budget.heap_bytes() + pending + 512
    }

    /// The body to forward for `req`: every item forwarded before in this
    /// session with the residuals it had then (carrying the client's
    /// annotations of now), or as sent when it had none,
    /// every new observation archived and replaced by its residual, everything
    /// else as received. Each item is read once per request, into its tree
    /// ([`Parsed::parse`]; a small one whose tree was not kept is read again
    /// if new); only items new to the conversation become values.
    /// `asked`: what the request brings to the budget ([`Asked`]).
    pub(crate) fn rewrite(&mut self, req: &Parsed, engine: &Engine, asked: Asked) -> (Vec<u8>, Report) {
        let keys = &req.keys[1..];
        if !keys.starts_with(&self.cx_keys) {
            // Not an extension (a named session whose client rewrote its history): read it all.
            (self.cx, self.cx_keys) = (Context::default(), Vec::new());
            self.budget.reset();
        }
        let read = self.cx_keys.len();
        let mut pass = Pass { engine, loan: None, report: Report::default(), budget: asked.budget.is_some() };
        let books = Books { store: &engine.store, ledger: &engine.ledger, order: engine.cite_order };
        let pre = if asked.budget.is_some() { self.preamble_tokens(req) } else { 0 };
        let fold = self.budget.begin(req, books, asked, pre, &mut pass.report.budget);
        let mut out: Vec<Piece<'_>> = Vec::with_capacity(req.items.len());
        for (i, item) in req.items.iter().enumerate() {
            let raw = item.raw.get().as_bytes();
            let frozen = self.forwarded.get(&keys[i]).map(|f| f.forward(raw, &item.annotations));
            if frozen.is_some() && i < read {
                pass.report.admission.reused += 1;
                out.extend(frozen);
                self.archive_late(req, i, &mut pass);
                continue;
            }
            let assistant = item.with_tree(|tree| {
                let value = tree.map_or(Value::Null, |t| canon::value(raw, t));
                out.push(match frozen {
                    Some(piece) => {
                        pass.report.admission.reused += 1;
                        piece
                    }
                    None => self.forward_new((req.api, i, keys[i]), item, (tree, &value), &mut pass),
                });
                self.cx.note(req.api, &value);
                is_assistant(req.api, &value)
            });
            self.archive_late(req, i, &mut pass);
            self.cx_keys.push(keys[i]);
            if let Some(fold) = &fold {
                let (store, session) = (&engine.store, &self.admitter.store_session);
                let reach = Reach { out: &mut out, store, session, op: &mut self.admitter.op, report: &mut pass.report.budget };
                let changed = self.budget.after_item(fold, (i, assistant), reach);
                self.freeze(req, &out, &changed);
            }
        }
        if let Some(fold) = &fold {
            self.budget.finish(fold, &mut pass.report.budget);
        }
        pass.report.receipt = Some(self.bill(req, &out, engine, asked.ttl));
        (rewrite::body(req, &out), pass.report)
    }

    /// What this request costs direct and as forwarded (`out`), by the
    /// pricing rule `lam replay` bills with ([`crate::bill::Bills`]).
    /// In dollars at the request's model's prices (`engine.prices`), cache
    /// writes at the hour's price when the cache lives longer than 5 minutes (`ttl`).
    fn bill(&mut self, req: &Parsed, out: &[Piece<'_>], engine: &Engine, ttl: crate::bill::CacheTtl) -> crate::bill::Receipt {
        let keys = &req.keys[1..];
        let direct: Vec<u128> = req.items.iter().map(|it| it.identity).collect();
        let lam: Vec<u128> = direct.iter().zip(keys).map(|(id, k)| self.forwarded.get(k).map_or(*id, |f| f.identity(*id))).collect();
        let sent: Vec<&[u8]> = req.items.iter().map(|it| it.raw.get().as_bytes()).collect();
        let forwarded: Vec<&[u8]> = out.iter().map(AsRef::as_ref).collect();
        let pre = self.preamble_tokens(req);
        let model = req.model();
        let priced = engine.prices.price(model.as_deref(), req.api);
        let hour = ttl.0.is_some_and(|s| s > 300);
        self.bills.add((&direct, &sent), (&lam, &forwarded), pre, (crate::bill::Bills::pricing(req.api), (&priced, hour)))
    }

    /// Tokens of `req`'s members but its conversation, counted once per distinct preamble.
    fn preamble_tokens(&mut self, req: &Parsed) -> u64 {
        let bytes = req.body_with(std::iter::empty());
        let hash = xxhash_rust::xxh3::xxh3_64(&bytes);
        match self.pre {
            Some((h, t)) if h == hash => t,
            _ => {
                let t = lam_tokens::count(&bytes) as u64;
                self.pre = Some((hash, t));
                t
            }
        }
    }

    /// Freeze the bytes a cut put in `items` (`out`'s), so every later
    /// request forwards them.
    fn freeze(&mut self, req: &Parsed, out: &[Piece<'_>], items: &[usize]) {
        for &it in items {
            let Piece::Frozen(bytes) = &out[it] else { continue };
            let frozen = Frozen::edited(bytes.clone(), req.items[it].annotations.clone(), None);
            self.frozen_bytes += frozen.heap_bytes();
            if let Some(old) = self.forwarded.insert(req.keys[1 + it], frozen) {
                self.frozen_bytes = self.frozen_bytes.saturating_sub(old.heap_bytes());
            }
        }
    }

    /// The bytes of an item seen for the first time (`read`: its tree and
    /// value), frozen: its observations admitted and replaced by their residuals.
    fn forward_new<'a>(&mut self, (api, at, key): (Api, usize, u128), item: &'a Item, read: (Option<&Node>, &Value), pass: &mut Pass<'_>) -> Piece<'a> {
        pass.report.admission.new_items += 1;
        let (engine, raw, (tree, value)) = (pass.engine, item.raw.get().as_bytes(), read);
        if let (true, Some(_)) = (pass.budget, tree) {
            let inputs = crate::api::citable_inputs(api, value);
            self.admitter.archive_inputs(value, &inputs, engine, &mut pass.report, at, self.budget.citable());
        }
        let edits = match tree {
            Some(tree) => {
                let slots = api.slots(value, &self.cx, &engine.policy);
                if slots.is_empty() {
                    Vec::new()
                } else {
                    let loan = pass.loan.get_or_insert_with(|| engine.pool.take());
                    let citable = pass.budget.then(|| self.budget.citable());
                    self.admitter.admit((value, tree), &slots, engine, loan, &mut pass.report, ((at, citable), false))
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
        self.hold_unarchived(key, at, pass);
        piece
    }

    /// Keep what admitting item `key` (at `at`) could not archive, for
    /// [`Conversation::archive_late`].
    fn hold_unarchived(&mut self, key: u128, at: usize, pass: &mut Pass<'_>) {
        let held = std::mem::take(&mut pass.report.outage.unarchived);
        if !held.is_empty() {
            pass.report.outage.unavailable += held.len() as u64;
            self.pending.insert(key, (at, held));
        }
    }

    /// Archive what the store was out of reach for when item `i` of `req`
    /// came first, now that it is back. The item went upstream whole then
    /// and goes so again (its bytes never change); its observations are
    /// archived and admitted (later ones may cite them) and, under a
    /// budget, a cut may cite them.
    fn archive_late(&mut self, req: &Parsed, i: usize, pass: &mut Pass<'_>) {
        let key = req.keys[1 + i];
        if self.pending.is_empty() || pass.engine.store.is_down() {
            return;
        }
        let Some((at, held)) = self.pending.remove(&key) else { return };
        let (engine, item, count) = (pass.engine, &req.items[i], held.len() as u64);
        let raw = item.raw.get().as_bytes();
        let mut late = Vec::new();
        item.with_tree(|tree| {
            let Some(tree) = tree else { return };
            let value = canon::value(raw, tree);
            let (mut outputs, mut inputs) = (Vec::new(), Vec::new());
            for u in held {
                match u {
                    Unarchived::Output(s) => outputs.push(s),
                    Unarchived::Input(s, inner) => inputs.push((s, inner)),
                }
            }
            self.admitter.archive_inputs(&value, &inputs, engine, &mut pass.report, at, &mut late);
            if !outputs.is_empty() {
                let loan = pass.loan.get_or_insert_with(|| engine.pool.take());
                let cite = pass.budget.then_some(&mut late);
                self.admitter.admit((&value, tree), &outputs, engine, loan, &mut pass.report, ((at, cite), true));
            }
        });
        if pass.budget {
            self.budget.add_late(late);
        }
        let still = pass.report.outage.unarchived.len() as u64;
        pass.report.outage.archived_late += count - still;
        self.hold_unarchived(key, at, pass);
    }
}

/// One request's pass over a conversation: the engine, the encoder it
/// borrowed (at its first new observation) and what it changed.
struct Pass<'e> {
    engine: &'e Engine,
    loan: Option<Loan<'e>>,
    report: Report,
    /// Whether a budget is in force (observations are then kept citable).
    budget: bool,
}

/// Whether the assistant wrote item `v` (a message of its, or a tool call):
/// the items before it have been answered.
fn is_assistant(api: Api, v: &Value) -> bool {
    lam_core::wire::is_model_turn(api, v) || v.as_object().is_some_and(|o| !lam_core::wire::calls(api, o).is_empty())
}
