//! Stage three: one conversation's items, frozen. A session remembers every
//! item it forwarded (by the item's key), so an item is looked at once, when
//! first seen: one the proxy changed nothing in goes as the client sends it,
//! one with residuals goes with the exact bytes first forwarded (prefix
//! stability). Only the new items of a request go on to admission.

use crate::admission::{Admitter, Delta, Unarchived};
use crate::api::{Api, Context, Observations as _};
use crate::budget::{Cuts, Form};
use crate::canon::{self, Node};
use crate::engine::{Engine, Loan};
use crate::ledger::{self, Stretches, Terms};
use crate::replay::{CacheTtl, Pricing};
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
    /// With `--budget`: every item's tokens and what the cuts did.
    cuts: Cuts,
    /// The store session that records the terms of its cuts ([`crate::ledger`]).
    ledger: SessionId,
    /// The last preamble counted: its hash and tokens.
    pre: Option<(u64, u64)>,
    /// Items (by key) that went upstream whole with observations the store
    /// was out of reach for: their position and what to archive when a
    /// request carries them again ([`Conversation::archive_late`]).
    pending: HashMap<u128, (usize, Vec<Unarchived>)>,
    /// What its requests cost direct and through lam ([`Conversation::bill`]).
    bills: crate::replay::Bills,
    /// When its last request with a time arrived (Unix ms): with the
    /// ledger's times, what a request's coldness is judged from.
    last_at: Option<i64>,
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
            cuts: Cuts::default(),
            ledger: SessionId::settings_of(run),
            pre: None,
            pending: HashMap::new(),
            bills: crate::replay::Bills::default(),
            last_at: None,
        }
    }

    /// An estimate of the memory this conversation holds: its frozen
    /// forwarded bytes and its operator state (retained vectors, chunk
    /// bookkeeping, ids, line hashes).
    pub(crate) fn bytes(&self) -> usize {
        let map = self.forwarded.capacity() * (std::mem::size_of::<(u128, Frozen)>() + 1);
        let pending = self.pending.len() * 256 + self.bills.heap_bytes();
        self.frozen_bytes + map + self.admitter.op.heap_bytes() + self.cx.heap_bytes() + self.cx_keys.capacity() * 16 + self.cuts.heap_bytes() + pending + 512
    }

    /// The body to forward for `req`: every item forwarded before in this
    /// session with the residuals it had then (carrying the client's
    /// annotations of now), or as sent when it had none,
    /// every new observation archived and replaced by its residual, everything
    /// else as received. Each item is read once per request, into its tree
    /// ([`Parsed::parse`]; a small one whose tree was not kept is read again
    /// if new); only items new to the conversation become values.
    /// `budget`: the request's own (`x-lam-budget`), else the engine's;
    /// `factor`: upstream tokens per token of lam's ([`crate::usage`]), which tightens it;
    /// `clock`: when the request arrived (Unix ms) and the prompt cache's
    /// TTL, which say whether it finds the cache cold ([`crate::budget`]).
    pub(crate) fn rewrite(
        &mut self,
        req: &Parsed,
        engine: &Engine,
        (budget, factor): (Option<lam_operator::Budget>, f64),
        clock: (Option<i64>, CacheTtl),
    ) -> (Vec<u8>, Delta) {
        let budget = budget.or(engine.budget);
        self.cuts.order = engine.cite_order;
        let keys = &req.keys[1..];
        if !keys.starts_with(&self.cx_keys) {
            // Not an extension (a named session whose client rewrote its history): read it all.
            (self.cx, self.cx_keys) = (Context::default(), Vec::new());
            self.cuts.reset();
        }
        let read = self.cx_keys.len();
        let mut pass = Pass { engine, loan: None, delta: Delta::default(), budget: budget.is_some() };
        let terms = budget.map(|b| self.terms(req, b, factor, clock, &mut pass));
        self.last_at = self.last_at.max(clock.0);
        let prices = crate::budget::pricing(req.api, clock.1);
        let mut out: Vec<Piece<'_>> = Vec::with_capacity(req.items.len());
        for (i, item) in req.items.iter().enumerate() {
            let raw = item.raw.get().as_bytes();
            let frozen = self.forwarded.get(&keys[i]).map(|f| f.forward(raw, &item.annotations));
            if frozen.is_some() && i < read {
                pass.delta.reused += 1;
                out.extend(frozen);
                self.archive_late(req, i, &mut pass);
                continue;
            }
            let assistant = item.with_tree(|tree| {
                let value = tree.map_or(Value::Null, |t| canon::value(raw, t));
                out.push(match frozen {
                    Some(piece) => {
                        pass.delta.reused += 1;
                        piece
                    }
                    None => self.forward_new((req.api, i, keys[i]), item, (tree, &value), &mut pass),
                });
                self.cx.note(req.api, &value);
                is_assistant(req.api, &value)
            });
            self.archive_late(req, i, &mut pass);
            self.cx_keys.push(keys[i]);
            if let Some((ours, stretches)) = &terms {
                let (t, end) = ledger::at(stretches, i, *ours, req.items.len());
                let (b, pre) = (t.scaled(), t.pre);
                self.count_item(i, &out, assistant);
                let input = self.cuts.input(pre);
                // A cold stretch is cut once, at its last item, down to the
                // target; a warm one at the budget, when the cut pays back.
                let when = match t.cold {
                    true => (i + 1 == end && input > b.target).then_some(None),
                    false => (input > b.tokens).then_some(Some(prices)),
                };
                if let Some(warm) = when {
                    self.cut(req, &mut out, (pre, &b, warm), &mut pass);
                }
            }
        }
        if let Some((ours, stretches)) = &terms {
            let t = stretches.last().map_or(*ours, |s| s.1);
            let (b, pre) = (t.scaled(), t.pre);
            let input = self.cuts.input(pre);
            (pass.delta.input_tokens, pass.delta.over_budget) = (Some(input), input > b.tokens);
        }
        pass.delta.receipt = Some(self.bill(req, &out));
        (rewrite::body(req, &out), pass.delta)
    }

    /// What this request costs direct and as forwarded (`out`), by the
    /// pricing rule `lam replay` bills with ([`crate::replay::Bills`]).
    fn bill(&mut self, req: &Parsed, out: &[Piece<'_>]) -> crate::replay::Receipt {
        let keys = &req.keys[1..];
        let direct: Vec<u128> = req.items.iter().map(|it| it.identity).collect();
        let lam: Vec<u128> = direct.iter().zip(keys).map(|(id, k)| self.forwarded.get(k).map_or(*id, |f| f.identity(*id))).collect();
        let sent: Vec<&[u8]> = req.items.iter().map(|it| it.raw.get().as_bytes()).collect();
        let forwarded: Vec<&[u8]> = out.iter().map(AsRef::as_ref).collect();
        let pre = self.preamble_tokens(req);
        self.bills.add((&direct, &sent), (&lam, &forwarded), pre, crate::replay::Bills::pricing(req.api))
    }

    /// The terms this request's items are folded under: this process's
    /// (`budget` tightened by `factor`, the preamble's tokens), and the
    /// stretches recorded for the conversation ([`crate::ledger`]; ours
    /// alone, an error counted, when the store cannot say).
    fn terms(
        &mut self,
        req: &Parsed,
        budget: lam_operator::Budget,
        factor: f64,
        (at, ttl): (Option<i64>, CacheTtl),
        pass: &mut Pass<'_>,
    ) -> (Terms, Stretches) {
        let ours = Terms { pre: self.preamble_tokens(req), factor, budget, at, cold: false };
        let engine = pass.engine;
        match engine.ledger.stretches(&engine.store, &self.ledger, &req.keys, ours, (ttl, self.last_at)) {
            Ok(s) => (ours, s),
            Err(e) => {
                pass.delta.errors += 1;
                pass.delta.last_error = Some(format!("the budget's ledger in store session `{}` could not be read or written: {e}", self.ledger));
                (ours, Vec::new())
            }
        }
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

    /// Count item `i` (forwarded as `out[i]`) unless an earlier request did.
    fn count_item(&mut self, i: usize, out: &[Piece<'_>], assistant: bool) {
        if i == self.cuts.len() {
            self.cuts.push(bare_tokens(out[i].as_ref()), assistant);
        }
    }

    /// A cut ([`crate::budget`]): cite citable results in the plan's
    /// order (the oldest first: [`Cuts::plan`]) until the
    /// input is at or under the target (or nothing more can be cited),
    /// freeze the items that hold them, and make the operator forget them.
    /// `warm`: the cache is warm, and these are its prices: the cut is made
    /// only when it is worth one and pays back its re-write; `None`: cold,
    /// any cut is free.
    fn cut(&mut self, req: &Parsed, out: &mut [Piece<'_>], (pre, b, warm): (u64, &lam_operator::Budget, Option<Pricing>), pass: &mut Pass<'_>) {
        if let Some(prices) = warm
            && !(self.cuts.worth_a_cut(b, pre) && self.cuts.pays_back(b, pre, prices))
        {
            return;
        }
        let kept_out = self.cuts.totals.kept_out;
        let cut = self.cuts.totals.cuts;
        // The citations of earlier cuts shrink to their line; then the
        // results still shown are cited, in the plan's order, until the
        // target is met.
        let (shrunk, _) = self.cuts.shrinkable();
        for &k in &shrunk {
            self.cuts.citable[k].form = Form::Line;
        }
        self.cite(req, out, &shrunk, pass);
        let mut cited = Vec::new();
        while self.cuts.input(pre) > b.target {
            let plan = {
                let (cuts, over) = (&self.cuts, (self.cuts.input(pre) - b.target) as i64);
                cuts.plan(b, |p| cuts.saving(p) >= over)
            };
            if plan.is_empty() {
                break;
            }
            for &k in &plan.cite {
                self.cuts.citable[k].form = Form::Full(cut);
            }
            for &k in &plan.expand {
                let c = &mut self.cuts.citable[k];
                (c.form, c.shown_tokens) = (Form::Whole, c.whole_tokens);
                c.refs.clear();
            }
            let changed: Vec<usize> = plan.cite.iter().chain(&plan.expand).copied().collect();
            self.cite(req, out, &changed, pass);
            cited.extend(plan.cite);
        }
        if cited.is_empty() && shrunk.is_empty() {
            return;
        }
        let records: Vec<u32> = cited.iter().filter_map(|&k| self.cuts.citable[k].record).collect();
        self.admitter.op.forget(&records);
        self.cuts.totals.cuts += 1;
        self.cuts.totals.cold += u64::from(warm.is_none());
        self.cuts.totals.citations += cited.len() as u64;
        pass.delta.cut.cuts += 1;
        pass.delta.cut.cold += u64::from(warm.is_none());
        pass.delta.cut.citations += cited.len() as u64;
        pass.delta.cut.kept_out += self.cuts.totals.kept_out - kept_out;
    }

    /// Put the forms `which` are now in (a citation, or the archived
    /// original) in the items that hold them, and freeze those items so
    /// (an item that cannot be read, which admission never yields, keeps
    /// its bytes; an original the store cannot give is counted an error).
    fn cite(&mut self, req: &Parsed, out: &mut [Piece<'_>], which: &[usize], pass: &mut Pass<'_>) {
        let keys = &req.keys[1..];
        let mut texts: Vec<(usize, String)> = Vec::with_capacity(which.len());
        for &k in which {
            let c = &self.cuts.citable[k];
            match c.citation() {
                Some(t) => texts.push((k, t.to_string())),
                None => match lam_core::ObsStore::get(&&pass.engine.store, &self.admitter.store_session, &c.id) {
                    Ok(Some(b)) => texts.push((k, String::from_utf8_lossy(&b).into_owned())),
                    other => {
                        pass.delta.errors += 1;
                        pass.delta.last_error = Some(format!("§{}: the original for a cut could not be read: {other:?}", c.id));
                    }
                },
            }
        }
        let mut items: Vec<usize> = texts.iter().map(|(k, _)| self.cuts.citable[*k].item).collect();
        items.sort_unstable();
        items.dedup();
        for it in items {
            let now = out[it].as_ref();
            let Ok(tree) = canon::parse(now) else { continue };
            // Each string changed, by its pointer: the new text, or (JSON-string
            // arguments) the texts at pointers within it.
            let mut at: std::collections::BTreeMap<&str, Vec<(Option<&str>, &str)>> = Default::default();
            for (k, t) in &texts {
                let c = &self.cuts.citable[*k];
                if c.item == it {
                    at.entry(c.pointer.as_str()).or_default().push((c.inner.as_deref(), t));
                }
            }
            let edits: Vec<_> = at
                .into_iter()
                .filter_map(|(pointer, cites)| {
                    let node = canon::find(&tree, pointer)?;
                    let text = cited_string(&now[node.span.clone()], &cites)?;
                    Some((node.span.clone(), crate::admission::json_string(text.into_bytes())))
                })
                .collect();
            let bytes: Arc<[u8]> = rewrite::spliced(now, edits).into();
            let frozen = Frozen::edited(bytes.clone(), req.items[it].annotations.clone(), None);
            self.frozen_bytes += frozen.heap_bytes();
            if let Some(old) = self.forwarded.insert(keys[it], frozen) {
                self.frozen_bytes = self.frozen_bytes.saturating_sub(old.heap_bytes());
            }
            self.cuts.recount(it, bare_tokens(&bytes));
            out[it] = Piece::Frozen(bytes);
        }
    }

    /// The bytes of an item seen for the first time (`read`: its tree and
    /// value), frozen: its observations admitted and replaced by their residuals.
    fn forward_new<'a>(&mut self, (api, at, key): (Api, usize, u128), item: &'a Item, read: (Option<&Node>, &Value), pass: &mut Pass<'_>) -> Piece<'a> {
        pass.delta.new_items += 1;
        let (engine, raw, (tree, value)) = (pass.engine, item.raw.get().as_bytes(), read);
        if let (true, Some(_)) = (pass.budget, tree) {
            let inputs = crate::api::citable_inputs(api, value);
            self.admitter.archive_inputs(value, &inputs, engine, &mut pass.delta, at, &mut self.cuts.citable);
        }
        let edits = match tree {
            Some(tree) => {
                let slots = api.slots(value, &self.cx, &engine.policy);
                if slots.is_empty() {
                    Vec::new()
                } else {
                    let loan = pass.loan.get_or_insert_with(|| engine.pool.take());
                    let citable = pass.budget.then_some(&mut self.cuts.citable);
                    self.admitter.admit((value, tree), &slots, engine, loan, &mut pass.delta, ((at, citable), false))
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
        let held = std::mem::take(&mut pass.delta.unarchived);
        if !held.is_empty() {
            pass.delta.unavailable += held.len() as u64;
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
            self.admitter.archive_inputs(&value, &inputs, engine, &mut pass.delta, at, &mut late);
            if !outputs.is_empty() {
                let loan = pass.loan.get_or_insert_with(|| engine.pool.take());
                let cite = pass.budget.then_some(&mut late);
                self.admitter.admit((&value, tree), &outputs, engine, loan, &mut pass.delta, ((at, cite), true));
            }
        });
        if pass.budget {
            for c in late {
                let pos = self.cuts.citable.partition_point(|x| x.item <= c.item);
                self.cuts.citable.insert(pos, c);
            }
        }
        let still = pass.delta.unarchived.len() as u64;
        pass.delta.archived_late += count - still;
        self.hold_unarchived(key, at, pass);
    }
}

/// One request's pass over a conversation: the engine, the encoder it
/// borrowed (at its first new observation) and what it changed.
struct Pass<'e> {
    engine: &'e Engine,
    loan: Option<Loan<'e>>,
    delta: Delta,
    /// Whether a budget is in force (observations are then kept citable).
    budget: bool,
}

/// Whether the assistant wrote item `v` (a message of its, or a tool call):
/// the items before it have been answered.
fn is_assistant(api: Api, v: &Value) -> bool {
    lam_core::wire::role(v) == Some("assistant") || v.as_object().is_some_and(|o| !lam_core::wire::calls(api, o).is_empty())
}

/// Tokens of an item's bytes as forwarded, read in their identity form
/// ([`canon::identity`]: minified, without the client's annotations, a
/// one-text-block `content` as its string). Claude Code marks the last
/// item only and writes one item in either form; a cut decides by the same
/// count whichever request carried the item first, as its last or not.
fn bare_tokens(bytes: &[u8]) -> u64 {
    let Ok(tree) = canon::parse(bytes) else { return lam_tokens::count(bytes) as u64 };
    let mut out = Vec::with_capacity(bytes.len());
    canon::identity(bytes, &tree, &mut out);
    lam_tokens::count(&out) as u64
}

/// The string literal `lit` with its citations in place: the whole string
/// (`None` pointer), or strings at pointers within the JSON it holds,
/// written back compactly (JSON-string arguments).
fn cited_string(lit: &[u8], cites: &[(Option<&str>, &str)]) -> Option<String> {
    if let [(None, text)] = cites {
        return Some(text.to_string());
    }
    let s: String = serde_json::from_slice(lit).ok()?;
    let mut v: Value = serde_json::from_str(&s).ok()?;
    for (inner, text) in cites {
        *v.pointer_mut(inner.unwrap_or(""))? = Value::String(text.to_string());
    }
    serde_json::to_string(&v).ok()
}
