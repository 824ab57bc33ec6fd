//! With `--budget`: cuts. When the input a conversation forwards would
//! exceed the budget, the oldest tool results the model has answered, and
//! large tool-call inputs, are replaced by ARC citations (`lam_core::cite`:
//! `§id`, the call, size, head and tail, the recall handle) until it is at
//! or under the target; the newest `keep` results, kept tools' results
//! (recall results among them) and results not answered yet are never
//! cited. Citations of an earlier cut shrink to their line at the next.
//!
//! The rule is a fold over the conversation's items: after each item the
//! input so far (the preamble, every item as forwarded, each counted in its
//! identity form, without the client's `cache_control` marks) is checked
//! against the budget tightened by the calibration factor, and a cut made
//! there is frozen for good. The items and their counts are the
//! conversation's; the preamble's tokens, the budget and the factor are
//! terms that another request or the upstream's answers may change, so each
//! stretch of items is folded under the terms recorded for it in the store
//! ([`crate::ledger`]), the first process to forward it having recorded
//! its own. So a restarted proxy or another replica makes the same cuts and
//! forwards the same bytes (tested: `tests/replicas.rs`). Between cuts the
//! prefix is byte-stable.
//!
//! **What is cited first.** An output whose lines appear again in a newer
//! output is *superseded*: a file read again after an edit, a test run
//! again, a listing repeated. The operator already says so: a newer
//! output's stubs name the older one's lines (its `refs`,
//! [`lam_operator::Session::refers`]: L0's line stubs and whole-output
//! repeats name the call, L1's dropped chunks their representative's
//! record), read by [`Cuts::superseded`]. [`CiteOrder::Superseded`] cites
//! superseded results first, then the others, oldest first each;
//! [`CiteOrder::Oldest`] (the default) cites oldest first. Either is a
//! function of the citable list, so of the conversation's items. Measured
//! with `lam replay`'s `cited_then_used` (cited results whose distinctive
//! lines the agent later quoted, visible nowhere else; `docs/serve.md`) on
//! the shared real transcripts, the two orders take away the same to
//! within one result in 400 (`--budget 100000`: 67 of 404 cited oldest
//! first, 68 of 408 superseded first; 50,000 and 25,000: equal), because a
//! superseded result's group holds the newer output that names it (cited
//! with it, or forwarded whole): so oldest first stays the default.
//!
//! After a cut the operator forgets the cited records, so no later stub
//! names lines only a citation stands for; a result whose stubs name a
//! cited record is cited with it, or, when protected, forwarded whole.
//!
//! Cuts are timed by the provider's prompt cache. A cut changes the prompt
//! from its first changed item on, so the provider re-writes it there at
//! the write price where it would have read it at the read price.
//!
//! - **Cold.** A request that arrives more than the cache's TTL after the
//!   conversation's previous request finds the cache cold: the provider
//!   re-writes its whole prompt anyway, so a cut there costs nothing. At
//!   such a request the input is cut down to the target whenever it is
//!   above the target, not only above the budget (one cut, at the last item
//!   of the request; none at its earlier items).
//! - **Warm.** Otherwise a cut is made only when the input is over the
//!   budget, and only when it pays back its re-write: with `P` the input
//!   before the cut, `R` the tokens it removes, `s` the tokens before its
//!   first changed item, and `w`, `r` the write and read prices, it costs at
//!   most `(P - s - R) (w - r)` once (what stays after the cut point,
//!   written instead of read) and saves `R r` on this request and each
//!   later one, so it pays back after `k = (P - s - R)(w - r) / (R r)`
//!   requests. A warm cut is made when `k <= 40` ([`PAYBACK_REQUESTS`]:
//!   about the requests a cut is read before the cache next goes cold or
//!   the session ends). With the default target (half the budget) a cut
//!   removes about as much as it keeps, so `k <= 11.5` at Anthropic's
//!   5-minute prices (`w` 1.25, `r` 0.1) and it is made; a cut that removes
//!   little next to what it re-writes (a narrow `--budget-target`, a prompt
//!   mostly uncitable, a cut that would only just reach the budget) waits:
//!   the input grows until a cut pays back, or the cache goes cold.
//!
//! The TTL ([`cache_ttl`]): `--cache-ttl` when given (`none`: the cache
//! never goes cold); else the longest `cache_control.ttl` the request sets
//! (Anthropic: `"5m"` or `"1h"`); else the provider's documented default,
//! 5 minutes for both (Anthropic's default; OpenAI keeps cached prefixes
//! 5 to 10 minutes of inactivity, the lower bound: [`CacheTtl::OPENAI`]).
//! The prices are [`crate::replay::Bills::pricing`]'s, with Anthropic's
//! 1-hour writes at 2x. The time is the request's arrival, given by the
//! caller ([`crate::Arrival`]: the HTTP layer's clock, `lam replay`'s
//! transcript timestamps); a request without one is never cold. Whether a
//! request was cold is recorded with its stretch ([`crate::ledger`]), so a
//! replica or a restart makes the same cut.

use lam_core::cite;
use lam_core::cite::PART_TOKENS;
use lam_core::stub::Recall;
use lam_core::{ObsId, ObsMeta};
use lam_operator::Budget;

use crate::replay::{CacheTtl, Pricing};

/// A warm cut is made only when it pays back its re-write within this many
/// requests (its own included): about the requests a cut is read before the
/// cache next goes cold or the session ends, where waiting would have made
/// it free. In the 48 real Claude Code sessions of issue 54 (4,736
/// requests, about 99 a session) 1 request in 77 comes after a 5-minute
/// gap: a cut made at a random warm request is read about 40 more times
/// before either, on average.
pub(crate) const PAYBACK_REQUESTS: f64 = 40.0;

/// Whether a warm cut pays back its re-write within [`PAYBACK_REQUESTS`]
/// requests: `input` tokens before it, `removed` by it, `before` ahead of
/// its first changed item, at `p`'s prices (the module's rule).
pub(crate) fn pays_back(input: u64, removed: u64, before: u64, p: Pricing) -> bool {
    if removed == 0 {
        return false;
    }
    let rewrite = input.saturating_sub(before).saturating_sub(removed) as f64 * (p.write - p.read).max(0.0);
    rewrite <= PAYBACK_REQUESTS * removed as f64 * p.read
}

/// The prices a cut is weighed at: the provider's for `api`
/// ([`crate::replay::Bills::pricing`]), Anthropic's writes to the 1-hour
/// cache at 2x.
pub(crate) fn pricing(api: crate::Api, ttl: CacheTtl) -> Pricing {
    let p = crate::replay::Bills::pricing(api);
    match (api, ttl.0) {
        (crate::Api::Messages, Some(t)) if t > 300 => Pricing { write: 2.0, ..p },
        _ => p,
    }
}

/// The cache TTL a request is judged by: `given` (`--cache-ttl`), else the
/// longest `cache_control.ttl` the request sets (`"5m"`, `"1h"`; in the
/// preamble or on an item), else the provider's default for `api`.
pub(crate) fn cache_ttl(req: &crate::request::Parsed, given: Option<CacheTtl>) -> CacheTtl {
    if let Some(t) = given {
        return t;
    }
    let items = req.items.iter().flat_map(|it| it.annotations.iter()).map(|(_, _, v)| ttl_in(v));
    let set = items.chain(req.preamble_raws().map(ttl_in)).flatten().max();
    match (set, req.api) {
        (Some(s), _) => CacheTtl(Some(s)),
        (None, crate::Api::Messages) => CacheTtl::ANTHROPIC,
        (None, _) => CacheTtl::OPENAI,
    }
}

/// The longest `"ttl": "<n><s|m|h>"` in raw JSON `b`, in seconds.
fn ttl_in(b: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"ttl\"";
    let mut best = None;
    let mut from = 0;
    while let Some(k) = b[from..].windows(KEY.len()).position(|w| w == KEY) {
        from += k + KEY.len();
        let rest = b[from..].trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b":") else { continue };
        let Some(rest) = rest.trim_ascii_start().strip_prefix(b"\"") else { continue };
        let Some(end) = rest.iter().position(|&c| c == b'"') else { continue };
        let v = std::str::from_utf8(&rest[..end]).unwrap_or("");
        let (n, unit) = v.split_at(v.len().saturating_sub(1));
        let mult = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            _ => continue,
        };
        if let Ok(n) = n.parse::<u64>() {
            best = best.max(Some(n.saturating_mul(mult)));
        }
    }
    best
}

/// What every citation a cut writes begins with (its full form and its
/// line): how `lam replay` tells a cited result in a forwarded body.
pub const CITED_LEAD: &str = "[lam: cited to keep the context within its budget]";

/// Which answered results a cut cites first ([`Cuts::plan`]). Measured
/// on the shared real transcripts by what the agent later quoted of the
/// results cited (`lam replay`'s `cited_then_used`, docs/serve.md): the
/// two take away the same to within one result in 400, oldest first the
/// less, so it is the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CiteOrder {
    /// Oldest first, whatever the result. The default.
    #[default]
    Oldest,
    /// Superseded results first (a newer result's stubs name their lines:
    /// [`Cuts::superseded`]), oldest first among them; then the others,
    /// oldest first (`lam replay --cite-order superseded`).
    Superseded,
}

impl std::str::FromStr for CiteOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "superseded" => Ok(Self::Superseded),
            "oldest" => Ok(Self::Oldest),
            _ => Err(format!("`{s}`: expected superseded or oldest")),
        }
    }
}

/// Longest head (and tail) preview of a citation, in characters: enough to
/// recognise the output, small next to what it stands for.
pub(crate) const PREVIEW_CHARS: usize = 100;

/// One observation a cut may cite.
#[derive(Debug, Clone)]
pub(crate) struct Citable {
    /// The item's position in the conversation and the string's JSON pointer there.
    pub item: usize,
    pub pointer: String,
    /// Inside JSON-string arguments: the pointer within them.
    pub inner: Option<String>,
    /// The operator's record (none: a tool-call input, which it never
    /// admits) and the earlier records its residual names.
    pub record: Option<u32>,
    pub refs: Vec<u32>,
    /// The citation that stands for it once cited, and the one line it
    /// shrinks to at the next cut.
    pub text: Cited,
    /// A kept tool's result (recall results among them): never cited.
    pub kept: bool,
    /// Which form is forwarded now.
    pub form: Form,
    /// Tokens it was forwarded as before it was cited, and its original's.
    pub shown_tokens: u64,
    pub whole_tokens: u64,
    /// Its archive id (`§id`).
    pub id: Box<str>,
    /// A large tool-call input ([`crate::api::citable_inputs`]), not a result.
    pub input: bool,
}

/// The two forms of a citation and their tokens.
#[derive(Debug, Clone)]
pub(crate) struct Cited {
    pub full: Box<str>,
    pub line: Box<str>,
    pub full_tokens: u64,
    pub line_tokens: u64,
}

/// What a cut changes: observations to cite, and observations to forward
/// whole in place of a residual that names one of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub cite: Vec<usize>,
    pub expand: Vec<usize>,
}

impl Plan {
    pub(crate) fn is_empty(&self) -> bool {
        self.cite.is_empty() && self.expand.is_empty()
    }
}

/// What a citable observation is forwarded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// As admitted (its residual, or the input as the agent wrote it).
    Shown,
    /// Whole (the archived original): a cut cited a record its residual named.
    Whole,
    /// Its citation, from cut `n`.
    Full(u64),
    /// The citation's one line (a later cut shrank it).
    Line,
}

impl Citable {
    /// Whether a cut has replaced it by a citation.
    pub(crate) fn cited(&self) -> bool {
        matches!(self.form, Form::Full(_) | Form::Line)
    }

    /// The tokens citing it would save (an estimate: the string's JSON escaping aside).
    pub(crate) fn saving(&self) -> u64 {
        self.shown_tokens.saturating_sub(self.text.full_tokens)
    }

    /// The citation forwarded in its place (`None`: it goes whole, or as admitted).
    pub(crate) fn citation(&self) -> Option<&str> {
        match self.form {
            Form::Line => Some(&self.text.line),
            Form::Full(_) => Some(&self.text.full),
            Form::Shown | Form::Whole => None,
        }
    }
}

/// The citation of an archived observation: its call as the model saw
/// it, its id, size, previews and the recall handle.
pub(crate) fn citation(action: &str, observation: &[u8], shown: &str, tokens: usize, how: Recall<'_>) -> Cited {
    let (head, tail) = lam_core::previews(observation);
    let m = ObsMeta {
        id: ObsId::of(action.as_bytes(), observation),
        shown: shown.to_string(),
        action: action.to_string(),
        returncode: None,
        step: 0,
        bytes: observation.len() as u64,
        tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
        head: observation[head].to_vec(),
        tail: observation[tail].to_vec(),
    };
    let lead = format!("{CITED_LEAD} `{}`", cite::one_line(&lam_core::action::referent(action), 120));
    let (full, line) = (cite::citation(&m, &lead, how, PART_TOKENS, PREVIEW_CHARS), cite::line(&m, &lead, how));
    let count = |s: &str| lam_tokens::count(s.as_bytes()) as u64;
    Cited { full_tokens: count(&full), line_tokens: count(&line), full: full.into(), line: line.into() }
}

/// A conversation's budget state: every item's tokens as forwarded, the
/// observations a cut may cite, and what the cuts did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cuts {
    tokens: Vec<u64>,
    sum: u64,
    pub citable: Vec<Citable>,
    /// Items before this one have been answered (an assistant item follows).
    answered: usize,
    pub totals: CutTotals,
    /// Which results a cut cites first (the engine's setting).
    pub order: CiteOrder,
}

/// What a conversation's cuts did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CutTotals {
    pub cuts: u64,
    /// Of `cuts`, those made where the prompt cache was cold.
    pub cold: u64,
    pub citations: u64,
    /// Tokens the citations kept out (forwarded before the cut minus after).
    pub kept_out: u64,
}

impl Cuts {
    /// Bytes it holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.tokens.capacity() * 8
            + self
                .citable
                .iter()
                .map(|c| std::mem::size_of::<Citable>() + c.pointer.len() + c.refs.len() * 4 + c.text.full.len() + c.text.line.len())
                .sum::<usize>()
    }

    /// Items counted so far.
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Start over (a conversation whose history was rewritten).
    pub(crate) fn reset(&mut self) {
        let (totals, order) = (self.totals, self.order);
        *self = Self { totals, order, ..Self::default() };
    }

    /// The next item: its tokens as forwarded, whether the assistant wrote it.
    pub(crate) fn push(&mut self, tokens: u64, assistant: bool) {
        self.tokens.push(tokens);
        self.sum += tokens;
        if assistant {
            self.answered = self.tokens.len();
        }
    }

    /// The input so far with a preamble of `pre` tokens.
    pub(crate) fn input(&self, pre: u64) -> u64 {
        pre + self.sum
    }

    /// Item `i` is now forwarded as `tokens`.
    pub(crate) fn recount(&mut self, i: usize, tokens: u64) {
        let was = std::mem::replace(&mut self.tokens[i], tokens);
        self.sum = self.sum - was + tokens;
        self.totals.kept_out += was.saturating_sub(tokens);
    }

    /// What to change now, in groups (one result and the results whose
    /// stubs name it), until `enough` says the input is low enough after a
    /// group, oldest first ([`CiteOrder::Superseded`]: superseded results
    /// first, [`Cuts::superseded`], oldest first among them, then the
    /// others, oldest first). The first of a group is a candidate:
    /// answered, not among the newest `keep`, not kept, worth citing. Later
    /// members answered and not among the newest are cited with it; the
    /// others (the newest, the unanswered) are forwarded whole instead of
    /// their residual, so none names lines only a citation stands for.
    /// The order is a function of the citable list alone, so of the
    /// conversation's items: replicas and restarts cite the same results.
    pub(crate) fn plan(&self, budget: &Budget, mut enough: impl FnMut(&Plan) -> bool) -> Plan {
        let n = self.citable.len();
        // The newest `keep` results (inputs aside) are never cited.
        let newest = self.citable.iter().enumerate().rev().filter(|(_, c)| !c.input).nth(budget.keep.max(1) as usize - 1).map_or(0, |(i, _)| i);
        let newest = if budget.keep == 0 { n } else { newest };
        let citable = |i: usize| {
            let c = &self.citable[i];
            !c.cited() && !c.kept && (c.input || i < newest) && c.item < self.answered
        };
        let mut chosen = vec![false; n];
        let mut out = Plan::default();
        let mut order: Vec<usize> = (0..n).collect();
        if self.order == CiteOrder::Superseded {
            let superseded = self.superseded();
            // Stable: oldest first within each class.
            order.sort_by_key(|&i| !superseded[i]);
        }
        for first in order {
            if chosen[first] || !citable(first) || self.citable[first].saving() == 0 {
                continue;
            }
            for i in self.group(first, &chosen) {
                chosen[i] = true;
                if citable(i) { out.cite.push(i) } else { out.expand.push(i) }
            }
            if enough(&out) {
                break;
            }
        }
        out
    }

    /// What `plan` would save (citing) less what it adds (whole results in
    /// place of their residuals), in tokens.
    pub(crate) fn saving(&self, plan: &Plan) -> i64 {
        let cite: u64 = plan.cite.iter().map(|&k| self.citable[k].saving()).sum();
        let expand: u64 = plan.expand.iter().map(|&k| self.citable[k].whole_tokens.saturating_sub(self.citable[k].shown_tokens)).sum();
        cite as i64 - expand as i64
    }

    /// Whether a cut is made now that the input is over the budget: when it
    /// can bring the input to the budget or below, or else remove at least
    /// the gap between budget and target. Where what cannot be cited alone
    /// exceeds the budget, a cut of the one result answered last would
    /// re-write the prompt cache every request for a few tokens; a cut
    /// waits until it removes the gap.
    pub(crate) fn worth_a_cut(&self, budget: &Budget, pre: u64) -> bool {
        let all = (self.saving(&self.plan(budget, |_| false)) + self.shrinkable().1 as i64).max(0) as u64;
        let input = self.input(pre);
        input.saturating_sub(all) <= budget.tokens || all >= budget.tokens - budget.target
    }

    /// Whether the cut made now (earlier citations shrunk to their line,
    /// then results cited to the target) pays back its re-write at `p`'s
    /// prices ([`pays_back`]; the module's rule).
    pub(crate) fn pays_back(&self, budget: &Budget, pre: u64, p: Pricing) -> bool {
        let input = self.input(pre);
        let (shrunk, shrinks) = self.shrinkable();
        let over = input.saturating_sub(shrinks).saturating_sub(budget.target) as i64;
        let plan = if over > 0 { self.plan(budget, |q| self.saving(q) >= over) } else { Plan::default() };
        let removed = shrinks + self.saving(&plan).max(0) as u64;
        let first = shrunk.iter().chain(&plan.cite).chain(&plan.expand).map(|&k| self.citable[k].item).min();
        let Some(first) = first else { return false };
        let before = pre + self.tokens.iter().take(first).sum::<u64>();
        pays_back(input, removed, before, p)
    }

    /// The citations of earlier cuts still in full (`before`: cuts before
    /// this one), and what shrinking them to their line would save.
    pub(crate) fn shrinkable(&self) -> (Vec<usize>, u64) {
        let cut = self.totals.cuts;
        let which: Vec<usize> = (0..self.citable.len()).filter(|&k| matches!(self.citable[k].form, Form::Full(n) if n < cut)).collect();
        let saves = which.iter().map(|&k| self.citable[k].text.full_tokens.saturating_sub(self.citable[k].text.line_tokens)).sum();
        (which, saves)
    }

    /// Which citable results are superseded: a newer result's stubs name
    /// their lines (its `refs`, [`lam_operator::Session::refers`]: L0's
    /// line stubs and whole-output repeats name the call, L1's dropped
    /// chunks their representative's record). A file read again after an
    /// edit, a test run again, a listing repeated: the newer output shows
    /// what the model still needs of the older one, the rest is stale.
    pub(crate) fn superseded(&self) -> Vec<bool> {
        let at: std::collections::HashMap<u32, usize> = self.citable.iter().enumerate().filter_map(|(k, c)| Some((c.record?, k))).collect();
        let mut out = vec![false; self.citable.len()];
        for r in self.citable.iter().flat_map(|c| &c.refs) {
            if let Some(&k) = at.get(r) {
                out[k] = true;
            }
        }
        out
    }

    /// Result `first` and every later uncited one whose stubs name it or
    /// another of the group (stubs name only earlier records).
    fn group(&self, first: usize, chosen: &[bool]) -> Vec<usize> {
        let Some(record) = self.citable[first].record else { return vec![first] };
        let mut records = vec![record];
        let mut out = vec![first];
        for (j, c) in self.citable.iter().enumerate().skip(first + 1) {
            if c.form == Form::Shown && !c.kept && !chosen[j] && c.refs.iter().any(|r| records.contains(r)) {
                records.extend(c.record);
                out.push(j);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuts(items: &[(u64, bool)], citable: &[(usize, u32, &[u32], bool)]) -> Cuts {
        let mut c = Cuts::default();
        for &(t, a) in items {
            c.push(t, a);
        }
        for &(item, record, refs, kept) in citable {
            c.citable.push(Citable {
                item,
                pointer: "/content".into(),
                inner: None,
                record: Some(record),
                refs: refs.to_vec(),
                text: Cited { full: "x".into(), line: "x".into(), full_tokens: 0, line_tokens: 0 },
                kept,
                form: Form::Shown,
                shown_tokens: 99,
                whole_tokens: 99,
                id: "x".into(),
                input: false,
            });
        }
        c
    }

    #[test]
    fn a_plan_cites_the_oldest_answered_results_and_keeps_the_newest() {
        // task, then (call, result) x 5; the last result is not answered yet.
        let items = [(10, false), (5, true), (100, false), (5, true), (100, false), (5, true), (100, false), (5, true), (100, false), (5, true), (100, false)];
        let c = cuts(&items, &[(2, 0, &[], false), (4, 1, &[], false), (6, 2, &[], false), (8, 3, &[], false), (10, 4, &[], false)]);
        let b = Budget::new(400, Some(200), Some(1)).unwrap();
        let cite = |p: Plan| p.cite;
        assert_eq!(cite(c.plan(&b, |_| false)), [0, 1, 2, 3], "every answered one but the newest kept");
        assert_eq!(cite(c.plan(&b, |p| 535 - 99 * p.cite.len() as u64 <= 300)), [0, 1, 2]);
        let b3 = Budget::new(400, Some(200), None).unwrap();
        assert_eq!(cite(c.plan(&b3, |_| false)), [0, 1], "the newest 3 are kept");
        // Result 3 names result 1 (record 1): they go together; result 4
        // (protected) names record 0: it goes whole when record 0 is cited.
        let c = cuts(&items, &[(2, 0, &[], false), (4, 1, &[], false), (6, 2, &[], true), (8, 3, &[1], false), (10, 4, &[0], false)]);
        let p = c.plan(&b, |_| false);
        assert_eq!((p.cite, p.expand), (vec![0, 1, 3], vec![4]), "4 (protected) names record 0: it goes whole; 2 is kept");
    }

    /// A file read (record 1), edited (2), read again (3: its stubs name
    /// the first read's lines): the first read is superseded, and cited
    /// before the older unrelated listing (0); oldest first cites the
    /// listing first. The re-read, the newest, goes whole in its place.
    #[test]
    fn a_superseded_read_is_cited_before_an_older_unrelated_output() {
        let items = [(10, false), (5, true), (100, false), (5, true), (100, false), (5, true), (100, false), (5, true), (100, false), (5, true), (10, false)];
        // ls (0), Read a.py (1), Edit a.py (2), Read a.py again (3, names 1), the answer's next call (4).
        let mut c = cuts(&items, &[(2, 0, &[], false), (4, 1, &[], false), (6, 2, &[], false), (8, 3, &[1], false), (10, 4, &[], false)]);
        c.order = CiteOrder::Superseded;
        assert_eq!(c.superseded(), [false, true, false, false, false], "only the first read is named by a newer output");
        let b = Budget::new(400, Some(200), Some(2)).unwrap();
        let one = |c: &Cuts| c.plan(&b, |p| !p.cite.is_empty());
        let p = one(&c);
        assert_eq!((p.cite, p.expand), (vec![1], vec![3]), "the first read first; the re-read (kept: newest 2) goes whole");
        assert_eq!(c.plan(&b, |_| false).cite, [1, 0, 2], "then the others, oldest first");
        c.order = CiteOrder::Oldest;
        assert_eq!(one(&c).cite, [0], "oldest first: the listing");
        assert_eq!(c.plan(&b, |_| false).cite, [0, 1, 2]);
        // A repeated listing (4 names 0 through a whole-output stub), an
        // unanswered one, a kept one: the protections stay.
        let mut c = cuts(&items, &[(2, 0, &[], false), (4, 1, &[], true), (6, 2, &[1], false), (8, 3, &[], false), (10, 4, &[0], false)]);
        c.order = CiteOrder::Superseded;
        assert_eq!(c.superseded(), [true, true, false, false, false]);
        let p = c.plan(&b, |_| false);
        assert_eq!((p.cite, p.expand), (vec![0, 2], vec![4]), "1 is kept, 3 among the newest 2; 4 is unanswered and names 0: it goes whole");
        c.order = CiteOrder::Oldest;
        assert_eq!(c.plan(&b, |_| false).cite, [0, 2], "the same set either way: only the order differs");
        assert_eq!("oldest".parse(), Ok(CiteOrder::Oldest));
        assert_eq!("superseded".parse(), Ok(CiteOrder::Superseded));
        assert!("newest".parse::<CiteOrder>().is_err());
    }

    /// The warm rule: a cut pays back when `(P - s - R)(w - r) <= 40 R r`.
    #[test]
    fn a_warm_cut_is_made_when_it_pays_back_within_40_requests() {
        let a = Pricing::ANTHROPIC;
        // Budget 100k, cut to 50k, 20k ahead of the cut point: 30k re-written
        // at 1.15 = 34.5k once; saves 50k x 0.1 = 5k a request: k = 6.9.
        assert!(pays_back(100_000, 50_000, 20_000, a));
        // The worst case of the default target: nothing ahead, k = 11.5.
        assert!(pays_back(100_000, 50_000, 0, a));
        // A narrow target (90k): 10k removed, 90k re-written: k = 103.5.
        assert!(!pays_back(100_000, 10_000, 0, a));
        // The bound itself: 40 R r = 40 x 10k x 0.1 = 40k = (P - s - R) x 1.15.
        let keep = (40_000.0_f64 / 1.15) as u64;
        assert!(pays_back(10_000 + keep, 10_000, 0, a));
        assert!(!pays_back(10_000 + keep + 2, 10_000, 0, a));
        assert!(!pays_back(100_000, 0, 0, a), "a cut that removes nothing never pays back");
        // OpenAI: no write premium, w - r = 0.9.
        assert!(pays_back(100_000, 10_000, 75_000, Pricing::OPENAI));
        assert!(!pays_back(100_000, 10_000, 0, Pricing::OPENAI));
        // Anthropic's 1-hour writes cost 2x: the same cut may pay back at 5 minutes only.
        let hour = pricing(crate::Api::Messages, CacheTtl(Some(3600)));
        assert_eq!(hour, Pricing { read: 0.1, write: 2.0 });
        assert_eq!(pricing(crate::Api::Messages, CacheTtl(Some(300))), a);
        assert_eq!(pricing(crate::Api::Responses, CacheTtl(Some(3600))), Pricing::OPENAI);
        assert!(pays_back(50_000, 10_000, 10_000, a) && !pays_back(50_000, 10_000, 10_000, hour));
    }

    /// `--cache-ttl` wins; else the longest `cache_control.ttl` of the
    /// request (items and preamble); else the provider's default.
    #[test]
    fn the_ttl_is_the_flag_s_else_the_request_s_else_the_provider_s() {
        let parse = |api, body: &str| crate::request::Parsed::parse(api, body.as_bytes()).unwrap_or_else(|| panic!("{body}"));
        let plain = parse(crate::Api::Messages, r#"{"messages":[{"role":"user","content":"hi"}]}"#);
        assert_eq!(cache_ttl(&plain, None), CacheTtl::ANTHROPIC);
        assert_eq!(cache_ttl(&plain, Some(CacheTtl::NONE)), CacheTtl::NONE);
        let hour = r#"{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl" : "1h"}}],
            "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]}"#;
        assert_eq!(cache_ttl(&parse(crate::Api::Messages, hour), None), CacheTtl(Some(3600)));
        assert_eq!(cache_ttl(&parse(crate::Api::Messages, hour), Some(CacheTtl(Some(60)))), CacheTtl(Some(60)));
        let five = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]}"#;
        assert_eq!(cache_ttl(&parse(crate::Api::Messages, five), None), CacheTtl(Some(300)));
        let text = r#"{"messages":[{"role":"user","content":"the \"ttl\": \"1h\" of a text is no setting"}]}"#;
        assert_eq!(cache_ttl(&parse(crate::Api::Messages, text), None), CacheTtl::ANTHROPIC);
        let codex = parse(crate::Api::Responses, r#"{"input":[{"role":"user","content":"hi"}]}"#);
        assert_eq!(cache_ttl(&codex, None), CacheTtl::OPENAI);
        assert_eq!((ttl_in(br#"{"ttl":"90s"}"#), ttl_in(br#"{"ttl":"2d"}"#), ttl_in(br#"{"ttl":5}"#)), (Some(90), None, None));
    }

    /// Every budget of at least 1 token is valid; the default target is
    /// half of it, at least 1; only a target given out of range is refused,
    /// and the refusal names only what was given.
    #[test]
    fn a_budget_of_one_token_is_valid_and_refusals_name_what_was_given() {
        assert_eq!(Budget::new(1, None, None), Ok(Budget { tokens: 1, target: 1, keep: Budget::KEEP }));
        assert_eq!(Budget::new(3, None, Some(1)).map(|b| b.target), Ok(1));
        assert_eq!(Budget::new(1, Some(1), None).map(|b| b.target), Ok(1));
        assert_eq!(Budget::new(0, None, None), Err("--budget 0: expected at least 1 token".into()));
        assert_eq!(Budget::new(10, Some(11), None), Err("--budget 10 --budget-target 11: expected 0 < target <= budget".into()));
        assert_eq!(Budget::new(10, Some(0), None), Err("--budget 10 --budget-target 0: expected 0 < target <= budget".into()));
    }
}
