//! The budget's ledger: the terms each stretch of a conversation's items
//! was folded under ([`crate::budget`]), recorded in the store once, when
//! first decided, and read by every process that forwards the
//! conversation later (a replica, a restart, a fork).
//!
//! A cut at an item depends on the items before it and on three terms:
//! the preamble's tokens (the request's members but its conversation), the
//! budget, and the calibration factor learnt from the upstream's answers
//! ([`crate::usage`]). The last two are no function of the items: the
//! factor is what this process's answers said, and a request may carry its
//! own budget. So the process that first forwards a request whose items
//! end at a point no record names appends a record for that point (the
//! hash of the request's keys, its preamble's among them): the terms for
//! the items after the previous recorded point up to it. Every process
//! folds each stretch under its recorded terms. Records go to the run's
//! settings session ([`lam_core::SessionId::settings_of`], the one that
//! records `--run`'s settings), appended like any record; when two
//! processes record the same point, the first in the session's order wins
//! and the other adopts it. A factor is never below the one recorded
//! before it in the conversation.
//!
//! The factor is what the upstream's answers said, and an answer is heard
//! by the process that forwarded its request alone; so that the factor is
//! the same whichever process records a point (one proxy, a replica, a
//! restart: the same bytes for every deployment), each answer's count is
//! recorded too, when it is read and before its last byte reaches the
//! client (a `usage` record at the point of the request it answers,
//! [`Ledger::note_usage`]), and a new point's factor is the largest of the
//! one recorded before it and those the conversation's earlier answers
//! recorded: never this process's memory of them.
//!
//! A record also says when its request arrived and whether it found the
//! provider's prompt cache cold: more than the cache's TTL after the
//! conversation's previous recorded request (the latest time among the
//! records of its earlier points, or this process's last request of it,
//! whichever is later). A clock is no part of the conversation, so the
//! process that records the point decides, and every other reads it: a
//! cold stretch is cut to the target at its last item ([`crate::budget`]).

use crate::bill::CacheTtl;
use crate::store::SharedStore;
use crate::sync::lock;
use lam_core::{ObsStore as _, Record, SessionId};
use lam_operator::Budget;
use std::collections::HashMap;
use std::sync::Mutex;

/// What the action of a ledger record begins with (the point's hash follows in hex).
const ACTION: &str = "lam serve budget ";

/// What the action of an answer's count begins with (the point of the request it answered follows).
const USAGE_ACTION: &str = "lam serve usage ";

/// The first line of an answer's count; the factor follows.
const USAGE_FORMAT: &str = "lam usage/1\nfactor: ";

/// The first line of a record's text.
const FORMAT: &str = "lam budget/1";

/// The terms a stretch of items is folded under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Terms {
    /// Tokens of the preamble.
    pub pre: u64,
    /// Upstream tokens per lam token (from 1).
    pub factor: f64,
    /// The budget as given, before the factor tightens it.
    pub budget: Budget,
    /// When the request that recorded the stretch arrived (Unix ms; `None`: not known).
    pub at: Option<i64>,
    /// Whether that request found the prompt cache cold (arrived more than
    /// the cache's TTL after the conversation's previous request).
    pub cold: bool,
}

impl Terms {
    /// The budget in lam's tokens.
    pub(crate) fn scaled(&self) -> Budget {
        self.budget.scaled(self.factor)
    }

    fn text(&self) -> String {
        let b = &self.budget;
        let at = self.at.map_or("-".to_string(), |t| t.to_string());
        format!(
            "{FORMAT}\npre: {}\nfactor: {}\nbudget: {} target {} keep {}\nat: {at}\ncold: {}\n",
            self.pre, self.factor, b.tokens, b.target, b.keep, self.cold
        )
    }

    /// A record's text read back; `None` when it is not one this version writes.
    fn parse(text: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let mut lines = text.lines();
        (lines.next()? == FORMAT).then_some(())?;
        let mut field = |name: &str| lines.next()?.strip_prefix(name)?.strip_prefix(": ").map(str::to_string);
        let pre = field("pre")?.parse().ok()?;
        let factor: f64 = field("factor")?.parse().ok()?;
        let budget = field("budget")?;
        let nums: Vec<&str> = budget.split(' ').collect();
        let [tokens, "target", target, "keep", keep] = nums[..] else { return None };
        let budget = Budget { tokens: tokens.parse().ok()?, target: target.parse().ok()?, keep: keep.parse().ok()? };
        // `at` and `cold` came later: a record without them arrived at an
        // unknown time and was warm.
        let at = match field("at").as_deref() {
            None | Some("-") => None,
            Some(t) => Some(t.parse().ok()?),
        };
        let cold = match field("cold").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => return None,
        };
        (factor.is_finite() && factor >= 1.0).then_some(Self { pre, factor, budget, at, cold })
    }
}

/// Every ledger this process has read: per store session, the last of its
/// records it has read and the terms recorded for each point (the first).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    books: Mutex<HashMap<SessionId, Book>>,
}

#[derive(Debug, Default)]
struct Book {
    /// The visible id of the last record read: a refresh reads only those
    /// after it, so a request costs the same at the run's 9,000th request
    /// as at its first (on PostgreSQL, [`lam_core::ObsStore::ids_after`]).
    last: Option<String>,
    terms: HashMap<u128, Terms>,
    /// The factor each answer's count gave, by the point of the request it answered (the largest).
    usage: HashMap<u128, f64>,
}

/// The stretches of a request's items: `(end, terms)`, ends ascending,
/// the last at the request's item count; item `i` is folded under the
/// terms of the first stretch that ends after it.
pub(crate) type Stretches = Vec<(usize, Terms)>;

/// The terms item `i` is folded under (`ours` past every stretch), and
/// the end of its stretch (`n`, the request's item count, past every one).
pub(crate) fn at(s: &[(usize, Terms)], i: usize, ours: Terms, n: usize) -> (Terms, usize) {
    s.iter().find(|(end, _)| *end > i).map_or((ours, n), |(end, t)| (*t, *end))
}

impl Ledger {
    /// The stretches of the conversation whose keys are `keys` (the
    /// preamble's first), recorded in `session`: a record for the whole of
    /// `keys` is appended when none is there yet, with `ours` (its factor
    /// at least the last recorded one's; cold when `ttl` expired between
    /// the previous request, the latest of the recorded times and `last`,
    /// and `ours.at`).
    pub(crate) fn stretches(
        &self,
        store: &SharedStore,
        session: &SessionId,
        keys: &[u128],
        ours: Terms,
        (ttl, last): (CacheTtl, Option<i64>),
    ) -> Result<Stretches, lam_core::Error> {
        let points = points(keys);
        let mut books = lock(&self.books);
        let book = books.entry(session.clone()).or_default();
        book.refresh(store, session)?;
        let found = book.found(&points);
        if found.last().map(|f| f.0) == Some(points.len()) || points.is_empty() {
            return Ok(found);
        }
        let heard = points.iter().filter_map(|p| book.usage.get(p)).fold(1.0, |a: f64, &f| a.max(f));
        let factor = found.last().map_or(heard, |(_, t)| t.factor.max(heard));
        let prev = found.iter().filter_map(|(_, t)| t.at).max().max(last);
        let ours = Terms { factor, cold: ttl.expired(prev, ours.at), ..ours };
        let last = points[points.len() - 1];
        let rec = Record { index: 0, action: format!("{ACTION}{last:032x}"), observation: ours.text().into_bytes(), returncode: None };
        let mut w = store;
        w.append(session, &rec, 0)?;
        book.refresh(store, session)?;
        Ok(book.found(&points))
    }
}

impl Ledger {
    /// The upstream's answer to the request whose keys end at `point`
    /// ([`point`]) gave `factor` ([`crate::budget::calibration`]): recorded
    /// in `session` for every process's next point of the conversation.
    pub(crate) fn note_usage(&self, store: &SharedStore, session: &SessionId, point: u128, factor: f64) -> Result<(), lam_core::Error> {
        let text = format!("{USAGE_FORMAT}{factor}\n");
        let rec = Record { index: 0, action: format!("{USAGE_ACTION}{point:032x}"), observation: text.into_bytes(), returncode: None };
        let mut w = store;
        w.append(session, &rec, 0).map(|_| ())
    }
}

/// The point a request's keys end at (the preamble's first), where its
/// answer's count is recorded; `None` for a request without items.
pub(crate) fn point(keys: &[u128]) -> Option<u128> {
    points(keys).last().copied()
}

/// An answer's count read back: its factor, when it is one this version
/// writes and from 1 up.
fn usage_factor(text: &[u8]) -> Option<f64> {
    let f: f64 = std::str::from_utf8(text).ok()?.strip_prefix(USAGE_FORMAT)?.trim_end().parse().ok()?;
    (f.is_finite() && f >= 1.0).then_some(f)
}

impl Book {
    /// Read the records appended to `session` since the last read.
    fn refresh(&mut self, store: &SharedStore, session: &SessionId) -> Result<(), lam_core::Error> {
        let ids = store.ids_after(session, self.last.as_deref())?;
        for id in &ids {
            let Some(meta) = store.meta(session, id)? else { continue };
            let hex = |prefix: &str| meta.action.strip_prefix(prefix).and_then(|h| u128::from_str_radix(h, 16).ok());
            if let Some(point) = hex(ACTION).filter(|p| !self.terms.contains_key(p)) {
                if let Some(t) = store.get(session, id)?.as_deref().and_then(Terms::parse) {
                    self.terms.insert(point, t);
                }
            } else if let Some(point) = hex(USAGE_ACTION) {
                // An answer read in pieces may be counted more than once: the largest.
                if let Some(f) = store.get(session, id)?.as_deref().and_then(usage_factor) {
                    self.usage.entry(point).and_modify(|x| *x = x.max(f)).or_insert(f);
                }
            }
        }
        if let Some(id) = ids.last() {
            self.last = Some(id.clone());
        }
        Ok(())
    }

    /// The recorded stretches among `points` (item counts from 1).
    fn found(&self, points: &[u128]) -> Stretches {
        points.iter().enumerate().filter_map(|(i, p)| self.terms.get(p).map(|t| (i + 1, *t))).collect()
    }
}

/// The point after each item: a hash of the keys up to it (the preamble's first).
fn points(keys: &[u128]) -> Vec<u128> {
    let mut h = keys.first().copied().unwrap_or(0);
    keys.iter()
        .skip(1)
        .map(|k| {
            let mut b = [0u8; 32];
            b[..16].copy_from_slice(&h.to_le_bytes());
            b[16..].copy_from_slice(&k.to_le_bytes());
            h = xxhash_rust::xxh3::xxh3_128(&b);
            h
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(pre: u64, factor: f64) -> Terms {
        Terms { pre, factor, budget: Budget::new(1000, None, None).unwrap(), at: None, cold: false }
    }

    const NO_CLOCK: (CacheTtl, Option<i64>) = (CacheTtl::NONE, None);

    #[test]
    fn a_record_reads_back_and_anything_else_is_ignored() {
        let t = terms(1234, 1.46875);
        assert_eq!(Terms::parse(t.text().as_bytes()), Some(t));
        for bad in [
            "",
            "lam budget/2\npre: 1\n",
            "lam budget/1\npre: x\nfactor: 1\nbudget: 1 target 1 keep 1\n",
            "lam budget/1\npre: 1\nfactor: 0.5\nbudget: 1 target 1 keep 1\n",
        ] {
            assert_eq!(Terms::parse(bad.as_bytes()), None, "{bad}");
        }
    }

    /// The first record of a point wins; a later process reads the
    /// stretches as recorded, whatever its own terms; a new point's factor
    /// is what the conversation's recorded answers said, whichever process
    /// heard them, never this process's own.
    #[test]
    fn the_first_record_of_a_point_wins_and_stretches_follow_the_records() {
        let store = SharedStore::new(Box::new(arc_store::MemStore::new()), "mem:".into());
        let s = SessionId::settings_of("run");
        let (a, b) = (Ledger::default(), Ledger::default());
        let keys = [7u128, 1, 2, 3, 4, 5];
        assert_eq!(a.stretches(&store, &s, &keys[..3], terms(10, 1.0), NO_CLOCK).unwrap(), [(2, terms(10, 1.0))]);
        assert_eq!(b.stretches(&store, &s, &keys[..3], terms(99, 2.0), NO_CLOCK).unwrap(), [(2, terms(10, 1.0))], "adopted");
        // The answer to the request of `keys[..3]` counted 1.5x, heard by `a`.
        a.note_usage(&store, &s, point(&keys[..3]).unwrap(), 1.5).unwrap();
        let got = b.stretches(&store, &s, &keys, terms(20, 1.0), NO_CLOCK).unwrap();
        assert_eq!(got, [(2, terms(10, 1.0)), (5, terms(20, 1.5))], "the recorded answer's factor, not b's own");
        let got = a.stretches(&store, &s, &keys, terms(30, 1.0), NO_CLOCK).unwrap();
        assert_eq!(got, [(2, terms(10, 1.0)), (5, terms(20, 1.5))], "read, not decided again");
        let other = [8u128, 1, 2];
        assert_eq!(a.stretches(&store, &s, &other, terms(5, 1.0), NO_CLOCK).unwrap(), [(2, terms(5, 1.0))], "another preamble, another point");
        let more = [7u128, 1, 2, 3, 4, 5, 6];
        assert_eq!(a.stretches(&store, &s, &more, terms(1, 1.0), NO_CLOCK).unwrap()[2], (6, terms(1, 1.5)), "a factor never falls");
        assert_eq!(at(&got, 1, terms(0, 1.0), 9), (terms(10, 1.0), 2));
        assert_eq!(at(&got, 2, terms(0, 1.0), 9), (terms(20, 1.5), 5));
        assert_eq!(at(&got, 5, terms(0, 1.0), 9), (terms(0, 1.0), 9), "past every stretch: ours, to the request's end");
    }

    /// A record keeps its arrival time and whether it was cold; a request
    /// is cold when it comes more than the TTL after the latest recorded
    /// request of its conversation (or this process's last), and the first
    /// record's decision is what every later process reads.
    #[test]
    fn coldness_is_decided_once_from_the_previous_request_s_time() {
        let t = Terms { at: Some(1_700_000_000_123), cold: true, ..terms(5, 1.0) };
        assert_eq!(Terms::parse(t.text().as_bytes()), Some(t));
        let old = "lam budget/1\npre: 5\nfactor: 1\nbudget: 1000 target 500 keep 3\n";
        assert_eq!(Terms::parse(old.as_bytes()), Some(terms(5, 1.0)), "a record from before: unknown time, warm");
        assert_eq!(Terms::parse(format!("{old}at: x\n").as_bytes()), None);
        let store = SharedStore::new(Box::new(arc_store::MemStore::new()), "mem:".into());
        let s = SessionId::settings_of("run");
        let (a, b) = (Ledger::default(), Ledger::default());
        let ttl = CacheTtl(Some(300));
        let at = |ms: i64| Terms { at: Some(ms), ..terms(5, 1.0) };
        let keys = [7u128, 1, 2, 3, 4, 5, 6];
        assert!(!a.stretches(&store, &s, &keys[..2], at(0), (ttl, None)).unwrap()[0].1.cold, "the first request: nothing before it");
        assert!(!a.stretches(&store, &s, &keys[..3], at(300_000), (ttl, None)).unwrap()[1].1.cold, "exactly the TTL later: warm");
        let got = a.stretches(&store, &s, &keys[..5], at(600_001), (ttl, None)).unwrap();
        assert!(got[2].1.cold && got[2].0 == 4, "more than the TTL after the previous request: cold");
        let again = b.stretches(&store, &s, &keys[..5], at(600_002), (CacheTtl::NONE, None)).unwrap();
        assert_eq!(again, got, "another process reads the decision, whatever its clock and TTL");
        let next = b.stretches(&store, &s, &keys[..6], at(700_000), (ttl, None)).unwrap();
        assert!(!next[3].1.cold, "100 s after the cold one");
        let local = b.stretches(&store, &s, &keys, at(1_100_000), (ttl, Some(1_000_000))).unwrap();
        assert!(!local[4].1.cold, "this process's own last request of it was 100 s before");
    }
}
