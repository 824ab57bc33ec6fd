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
//! After a cut the operator forgets the cited records, so no later stub
//! names lines only a citation stands for; a result whose stubs name a
//! cited record is cited with it, or, when protected, forwarded whole.

use lam_core::cite;
use lam_core::cite::PART_TOKENS;
use lam_core::stub::Recall;
use lam_core::{ObsId, ObsMeta};
use lam_operator::Budget;

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
    let lead = format!("[lam: cited to keep the context within its budget] `{}`", cite::one_line(&lam_core::action::referent(action), 120));
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
}

/// What a conversation's cuts did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CutTotals {
    pub cuts: u64,
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
        let totals = self.totals;
        *self = Self { totals, ..Self::default() };
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

    /// What to change now, oldest first, in groups (one result and the
    /// results whose stubs name it), until `enough` says the input is low
    /// enough after a group. The first of a group is a candidate: answered,
    /// not among the newest `keep`, not kept, worth citing. Later members
    /// answered and not among the newest are cited with it; the others
    /// (the newest, the unanswered) are forwarded whole instead of their
    /// residual, so none names lines only a citation stands for.
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
        for first in 0..n {
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

    /// The citations of earlier cuts still in full (`before`: cuts before
    /// this one), and what shrinking them to their line would save.
    pub(crate) fn shrinkable(&self) -> (Vec<usize>, u64) {
        let cut = self.totals.cuts;
        let which: Vec<usize> = (0..self.citable.len()).filter(|&k| matches!(self.citable[k].form, Form::Full(n) if n < cut)).collect();
        let saves = which.iter().map(|&k| self.citable[k].text.full_tokens.saturating_sub(self.citable[k].text.line_tokens)).sum();
        (which, saves)
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
