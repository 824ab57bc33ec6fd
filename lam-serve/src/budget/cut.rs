//! The cut, and the fold that makes it: a conversation's budget stage
//! ([`Stage`]: its [`Cuts`], the store session its ledger is recorded in,
//! when its last request came). Per request, [`Stage::begin`] reads the
//! terms each stretch of its items is folded under ([`crate::budget::ledger`]);
//! the conversation calls [`Stage::after_item`] after each item, which
//! counts it and cuts when the terms say (cold: at the stretch's last item,
//! down to the target; warm: at the budget, when the cut is worth one and
//! pays back its re-write); [`Stage::finish`] reports the input forwarded.
//! A cut shrinks earlier citations to their line, cites results in the
//! plan's order until the input is at or under the target, writes the
//! citations (or, for a result whose residual names a cited record, the
//! archived original) into the items that hold them, and makes the
//! operator forget the cited records. The conversation freezes the items
//! it changed.

use super::citable::{Citable, Form};
use super::plan::Cuts;
use super::timing::pricing;
use super::{Asked, Books, Report};
use crate::bill::{CacheTtl, Pricing};
use crate::budget::ledger::{self, Stretches, Terms};
use crate::canon;
use crate::request::Parsed;
use crate::rewrite::{self, Piece};
use crate::store::SharedStore;
use lam_core::SessionId;
use lam_core::wire::Path;
use lam_operator::Budget;
use serde_json::Value;
use std::sync::Arc;

/// A conversation's budget stage: every item's tokens and what the cuts
/// did, the store session that records the terms of its cuts
/// ([`crate::budget::ledger`]), and when its last request with a time arrived
/// (Unix ms): with the ledger's times, what a request's coldness is judged from.
#[derive(Debug, Clone)]
pub(crate) struct Stage {
    cuts: Cuts,
    ledger: SessionId,
    last_at: Option<i64>,
}

/// One request's terms: this process's, the stretches recorded for the
/// conversation, the prices a warm cut is weighed at, and the request's
/// item count.
pub(crate) struct Fold {
    ours: Terms,
    stretches: Stretches,
    prices: Pricing,
    items: usize,
}

/// What a cut reaches beyond the stage: the pieces forwarded for the
/// request so far, the store and session holding the originals,
/// the conversation's operator (which forgets what is cited), and what the
/// request changed.
pub(crate) struct Reach<'r, 'p> {
    pub out: &'r mut [Piece<'p>],
    pub store: &'r SharedStore,
    pub session: &'r SessionId,
    pub op: &'r mut lam_operator::Session,
    pub report: &'r mut Report,
}

impl Stage {
    /// The stage of a conversation of run `run` (its ledger in the run's
    /// settings session, [`SessionId::settings_of`]).
    pub(crate) fn new(run: &str) -> Self {
        Self { cuts: Cuts::default(), ledger: SessionId::settings_of(run), last_at: None }
    }

    /// Bytes it holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.cuts.heap_bytes()
    }

    /// Start over (a conversation whose history was rewritten): what the
    /// cuts did stays counted.
    pub(crate) fn reset(&mut self) {
        self.cuts.reset();
    }

    /// The list admission adds what a cut may cite to.
    pub(crate) fn citable(&mut self) -> &mut Vec<Citable> {
        &mut self.cuts.citable
    }

    /// Entries archived late (after an outage), each in its item's place.
    pub(crate) fn add_late(&mut self, late: Vec<Citable>) {
        for c in late {
            let pos = self.cuts.citable.partition_point(|x| x.item <= c.item);
            self.cuts.citable.insert(pos, c);
        }
    }

    /// A request begins, as `asked` (its budget, tightened by the factor
    /// its conversation's answers gave, [`super::calibration`]; when it
    /// arrived and the prompt cache's TTL), its preamble `pre` tokens: the
    /// terms its items are folded under, this process's and the stretches
    /// the run's ledger (`books`) records for the conversation (ours alone,
    /// an error counted, when the store cannot say).
    pub(crate) fn begin(&mut self, req: &Parsed, books: Books<'_>, asked: Asked, pre: u64, report: &mut Report) -> Option<Fold> {
        self.cuts.order = books.order;
        let fold = asked.budget.map(|budget| {
            report.usage_at = ledger::point(&req.keys).map(|p| (self.ledger.clone(), p));
            let ours = Terms { pre, factor: asked.factor, budget, at: asked.at, cold: false };
            let stretches = self.stretches(req, books, ours, asked.ttl, report);
            Fold { ours, stretches, prices: pricing(req.api, asked.ttl), items: req.items.len() }
        });
        self.last_at = self.last_at.max(asked.at);
        fold
    }

    /// The stretches recorded for the request's items ([`crate::budget::ledger`]).
    fn stretches(&self, req: &Parsed, books: Books<'_>, ours: Terms, ttl: CacheTtl, report: &mut Report) -> Stretches {
        match books.ledger.stretches(books.store, &self.ledger, &req.keys, ours, (ttl, self.last_at)) {
            Ok(s) => s,
            Err(e) => {
                report.error(format!("the budget's ledger in store session `{}` could not be read or written: {e}", self.ledger));
                Vec::new()
            }
        }
    }

    /// The entry point: item `i` (the assistant's when `assistant`) is
    /// forwarded as `r.out[i]`. Count it unless an earlier request did, and
    /// cut when its stretch's terms say: a cold stretch once, at its last
    /// item, down to the target; a warm one at the budget, when the cut
    /// pays back. Returns the items whose bytes the cut changed, ascending.
    pub(crate) fn after_item(&mut self, fold: &Fold, (i, assistant): (usize, bool), mut r: Reach<'_, '_>) -> Vec<usize> {
        let (t, end) = ledger::at(&fold.stretches, i, fold.ours, fold.items);
        let (b, pre) = (t.scaled(), t.pre);
        if i == self.cuts.len() {
            self.cuts.push(bare_tokens(r.out[i].as_ref()), assistant);
        }
        let input = self.cuts.input(pre);
        let when = match t.cold {
            true => (i + 1 == end && input > b.target).then_some(None),
            false => (input > b.tokens).then_some(Some(fold.prices)),
        };
        when.map_or_else(Vec::new, |warm| self.cut(&mut r, (pre, &b, warm)))
    }

    /// The request's input as forwarded, and whether it is over the budget
    /// of its last stretch.
    pub(crate) fn finish(&self, fold: &Fold, report: &mut Report) {
        let t = fold.stretches.last().map_or(fold.ours, |s| s.1);
        let (b, pre) = (t.scaled(), t.pre);
        let input = self.cuts.input(pre);
        (report.input_tokens, report.over_budget) = (Some(input), input > b.tokens);
    }

    /// A cut: cite citable results in the plan's order (the oldest first:
    /// [`Cuts::plan`]) until the input is at or under the target (or
    /// nothing more can be cited), and make the operator forget them.
    /// `warm`: the cache is warm, and these are its prices: the cut is made
    /// only when it is worth one and pays back its re-write; `None`: cold,
    /// any cut is free. Returns the items changed.
    fn cut(&mut self, r: &mut Reach<'_, '_>, (pre, b, warm): (u64, &Budget, Option<Pricing>)) -> Vec<usize> {
        if let Some(prices) = warm
            && !(self.cuts.worth_a_cut(b, pre) && self.cuts.pays_back(b, pre, prices))
        {
            return Vec::new();
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
        let mut changed = self.cite(r, &shrunk);
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
            let which: Vec<usize> = plan.cite.iter().chain(&plan.expand).copied().collect();
            changed.extend(self.cite(r, &which));
            cited.extend(plan.cite);
        }
        changed.sort_unstable();
        changed.dedup();
        if cited.is_empty() && shrunk.is_empty() {
            return changed;
        }
        let records: Vec<u32> = cited.iter().filter_map(|&k| self.cuts.citable[k].record).collect();
        r.op.forget(&records);
        self.count(r.report, cited.len() as u64, warm.is_none(), kept_out);
        changed
    }

    /// Count a cut that cited `citations` results (`cold`: where the cache
    /// was cold), the cuts' totals at `kept_out` before it.
    fn count(&mut self, report: &mut Report, citations: u64, cold: bool, kept_out: u64) {
        let t = &mut self.cuts.totals;
        t.cuts += 1;
        t.cold += u64::from(cold);
        t.citations += citations;
        report.cut.cuts += 1;
        report.cut.cold += u64::from(cold);
        report.cut.citations += citations;
        report.cut.kept_out += t.kept_out - kept_out;
    }

    /// Put the forms `which` are now in (a citation, or the archived
    /// original) in the items that hold them (an item that cannot be read,
    /// which admission never yields, keeps its bytes; an original the store
    /// cannot give is counted an error). Returns the items changed.
    fn cite(&mut self, r: &mut Reach<'_, '_>, which: &[usize]) -> Vec<usize> {
        let texts = self.texts(r, which);
        let mut items: Vec<usize> = texts.iter().map(|(k, _)| self.cuts.citable[*k].item).collect();
        items.sort_unstable();
        items.dedup();
        items.retain(|&it| self.splice(r, it, &texts));
        items
    }

    /// What each of `which` is forwarded as now: its citation, or the
    /// archived original.
    fn texts(&self, r: &mut Reach<'_, '_>, which: &[usize]) -> Vec<(usize, String)> {
        let mut texts: Vec<(usize, String)> = Vec::with_capacity(which.len());
        for &k in which {
            let c = &self.cuts.citable[k];
            match c.citation() {
                Some(t) => texts.push((k, t.to_string())),
                None => match lam_core::ObsStore::get(&r.store, r.session, &c.id) {
                    Ok(Some(b)) => texts.push((k, String::from_utf8_lossy(&b).into_owned())),
                    other => {
                        r.report.error(format!("§{}: the original for a cut could not be read: {other:?}", c.id));
                    }
                },
            }
        }
        texts
    }

    /// Write `texts` into item `it` (those of its strings), recount it;
    /// false when its bytes cannot be read.
    fn splice(&mut self, r: &mut Reach<'_, '_>, it: usize, texts: &[(usize, String)]) -> bool {
        let now = r.out[it].as_ref();
        let Ok(tree) = canon::parse(now) else { return false };
        // Each string changed, by its path: the new text, or (JSON-string
        // arguments) the texts at paths within it.
        let mut at: std::collections::BTreeMap<&Path, Vec<(Option<&Path>, &str)>> = Default::default();
        for (k, t) in texts {
            let c = &self.cuts.citable[*k];
            if c.item == it {
                at.entry(&c.path).or_default().push((c.inner.as_ref(), t));
            }
        }
        let edits: Vec<_> = at
            .into_iter()
            .filter_map(|(path, cites)| {
                let node = canon::find(&tree, path)?;
                let text = cited_string(&now[node.span.clone()], &cites)?;
                Some((node.span.clone(), crate::rewrite::json_string(text.into_bytes())))
            })
            .collect();
        let bytes: Arc<[u8]> = rewrite::spliced(now, edits).into();
        self.cuts.recount(it, bare_tokens(&bytes));
        r.out[it] = Piece::Frozen(bytes);
        true
    }
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
/// (`None` path), or strings at paths within the JSON it holds,
/// written back compactly (JSON-string arguments).
fn cited_string(lit: &[u8], cites: &[(Option<&Path>, &str)]) -> Option<String> {
    if let [(None, text)] = cites {
        return Some(text.to_string());
    }
    let s: String = serde_json::from_slice(lit).ok()?;
    let mut v: Value = serde_json::from_str(&s).ok()?;
    let whole = Path::new();
    for (inner, text) in cites {
        *inner.unwrap_or(&whole).get_mut(&mut v)? = Value::String(text.to_string());
    }
    serde_json::to_string(&v).ok()
}
