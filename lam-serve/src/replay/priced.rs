//! A replayed session in dollars, request by request, and what the cited
//! outputs the agent later used would have cost to get back.
//!
//! Each request is priced at its model's prices ([`crate::bill::prices`]):
//! the model that made the call whose result the request carries, as the
//! transcript records it, else the one the request names. A recall
//! ([`super::CitedThenUsed`]) is one more request where the agent used the
//! output: its prefix read from the cache, the output written as new
//! input; every later request then carries the output, read from the cache.
//! The estimate errs both ways: an agent may use an output without quoting
//! it (a recall not counted) or quote it without needing it (one counted
//! that a live run would not make), and a recalled output a later cut
//! cites again is still counted in every later request.

use crate::bill::prices::Price;
use serde::Serialize;

/// One request of a replayed session: what it cost direct and through lam.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestRow {
    /// The model it was priced as (the one asked; see [`crate::bill::prices::Priced::note`]).
    pub model: String,
    /// Prompt tokens sent direct, and through lam.
    pub direct_tokens: u64,
    /// See `direct_tokens`.
    pub lam_tokens: u64,
    /// Billed input units (plain-input tokens at prompt-cache prices), direct and through lam.
    pub direct_billed: f64,
    /// See `direct_billed`.
    pub lam_billed: f64,
    /// The same in US dollars.
    pub direct_usd: f64,
    /// See `direct_usd`.
    pub lam_usd: f64,
    /// Sent more than the cache TTL after the previous request (a cache miss both ways).
    pub cold: bool,
    /// Cuts the budget made at this request.
    pub cuts: u64,
    /// The budget it was held to (tokens), if any.
    pub budget: Option<u64>,
}

/// What a session's recalls add: recalls, billed units, dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Recalls {
    /// Recalls priced.
    pub count: u64,
    /// Billed input units they add.
    pub billed: f64,
    /// US dollars they add.
    pub usd: f64,
}

/// The recalls `used` (each: the request the agent answered using the
/// output, and the output's tokens) over `rows`, each row's dollar prices
/// `usd` (cache writes at the 1-hour price when `hour`), `(read, write)`
/// the prompt-cache multiples of the plain input price.
pub(crate) fn recalls(used: &[(usize, u64)], rows: &[RequestRow], usd: &[Price], (read, write): (f64, f64), hour: bool) -> Recalls {
    let mut r = Recalls::default();
    for &(q, t) in used {
        let (Some(row), Some(p)) = (rows.get(q), usd.get(q)) else { continue };
        let w = if hour { p.write_1h } else { p.write_5m };
        r.count += 1;
        // The recall's own request: the prefix read, the output written.
        r.billed += row.lam_tokens as f64 * read + t as f64 * write;
        r.usd += (row.lam_tokens as f64 * p.read + t as f64 * w) / 1e6;
        // Every later request carries the output, read from the cache.
        for p in &usd[q + 1..] {
            r.billed += t as f64 * read;
            r.usd += t as f64 * p.read / 1e6;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(lam_tokens: u64) -> RequestRow {
        RequestRow { lam_tokens, ..RequestRow::default() }
    }

    /// One recall at request 1 of three: its request reads request 1's
    /// prompt and writes the output; request 2 reads the output again.
    #[test]
    fn a_recall_is_one_more_request_and_the_output_afterwards() {
        let p = Price { input: 3.0, write_5m: 3.75, write_1h: 6.0, read: 0.3 };
        let rows = [row(1000), row(2000), row(2500)];
        let got = recalls(&[(1, 400)], &rows, &[p; 3], (0.1, 1.25), false);
        assert_eq!(got.count, 1);
        assert!((got.billed - (2000.0 * 0.1 + 400.0 * 1.25 + 400.0 * 0.1)).abs() < 1e-9, "{got:?}");
        let usd = (2000.0 * 0.3 + 400.0 * 3.75 + 400.0 * 0.3) / 1e6;
        assert!((got.usd - usd).abs() < 1e-12, "{got:?}");
        let hour = recalls(&[(1, 400)], &rows, &[p; 3], (0.1, 1.25), true);
        assert!(hour.usd > got.usd, "1-hour writes cost more");
        assert_eq!(recalls(&[], &rows, &[p; 3], (0.1, 1.25), false), Recalls::default());
        assert_eq!(recalls(&[(9, 400)], &rows, &[p; 3], (0.1, 1.25), false).count, 0, "past the session: nothing");
    }
}
