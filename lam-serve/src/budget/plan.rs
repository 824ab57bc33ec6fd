//! The plan: a conversation's budget state ([`Cuts`]: every item's tokens
//! as forwarded, what a cut may cite, what the cuts did) and what a cut
//! changes ([`Cuts::plan`]: groups of results in the cite order, the
//! newest `keep`, kept tools' and unanswered results protected), whether
//! one is worth making, and the citations of earlier cuts that shrink.
//! A function of the citable list alone, so of the conversation's items.

use super::citable::{Citable, Form};
use crate::bill::Pricing;
use lam_operator::Budget;

/// Which answered results a cut cites first (`Cuts::plan`). Measured
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
    /// `Cuts::superseded`), oldest first among them; then the others,
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
        self.tokens.capacity() * 8 + self.citable.iter().map(Citable::heap_bytes).sum::<usize>()
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
    /// prices ([`super::timing::pays_back`]; the module's rule).
    pub(crate) fn pays_back(&self, budget: &Budget, pre: u64, p: Pricing) -> bool {
        let input = self.input(pre);
        let (shrunk, shrinks) = self.shrinkable();
        let over = input.saturating_sub(shrinks).saturating_sub(budget.target) as i64;
        let plan = if over > 0 { self.plan(budget, |q| self.saving(q) >= over) } else { Plan::default() };
        let removed = shrinks + self.saving(&plan).max(0) as u64;
        let first = shrunk.iter().chain(&plan.cite).chain(&plan.expand).map(|&k| self.citable[k].item).min();
        let Some(first) = first else { return false };
        let before = pre + self.tokens.iter().take(first).sum::<u64>();
        super::timing::pays_back(input, removed, before, p)
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
    use super::super::citable::Cited;
    use super::*;

    fn cuts(items: &[(u64, bool)], citable: &[(usize, u32, &[u32], bool)]) -> Cuts {
        let mut c = Cuts::default();
        for &(t, a) in items {
            c.push(t, a);
        }
        for &(item, record, refs, kept) in citable {
            c.citable.push(Citable {
                item,
                path: lam_core::wire::Path::new().key("content"),
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
