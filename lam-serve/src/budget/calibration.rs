//! Calibration: upstream tokens per token lam counts, learnt from the
//! upstream's answers (their `usage`, read by [`crate::usage`]), which
//! tightens a conversation's budget. The budget's state, held by the
//! session (the registry's `Handle`); `/lam/stats` only reports it.
//!
//! **Nothing flows back from the response path but through a recorded
//! decision.** An answer's `usage` ([`crate::usage::Sink::report`]) may
//! only raise this figure in memory; it never changes bytes already
//! forwarded, nor any other state the rewrite reads. The figure is read
//! once when the conversation's next request comes
//! (`Proxy::try_rewrite_at`), as that request's own terms,
//! and reaches the forwarded bytes only as the factor the ledger records
//! for a point no record names yet ([`crate::budget::ledger`]: never below the one
//! recorded before it); every stretch already recorded is folded under its
//! recorded factor, whatever this process's answers said since. So a
//! replica or a restart, which never saw these answers, forwards the same
//! bytes. The one exception is an unreadable store: no terms can be
//! recorded or read, and the request is folded under this process's own
//! (an error counted), like everything else a store outage leaves whole.

use std::sync::atomic::{AtomicU64, Ordering};

/// The most a calibration tightens a budget: no provider's tokenizer counts
/// text at twice what cl100k does (the real agents' runs read 1.09 to 1.47,
/// docs/serve.md), so a larger ratio means the `usage` counts something
/// else, and one bad answer must not make a conversation cut on every request.
pub(crate) const MAX_CALIBRATION: f64 = 2.0;

/// Upstream tokens per local token, rounded up to 1/32, from 1 to
/// [`MAX_CALIBRATION`]: a budget is only ever tightened by what the
/// upstream counts, and at most so much.
pub(crate) fn factor(upstream: u64, local: u64) -> f64 {
    let k = upstream as f64 / local.max(1) as f64;
    ((k * 32.0).ceil() / 32.0).clamp(1.0, MAX_CALIBRATION)
}

/// A conversation's calibration: the largest factor its answers gave, 1
/// before any. Raised from the response path without a lock (the bits of
/// a positive `f64` order as its values).
#[derive(Debug)]
pub(crate) struct Calibration(AtomicU64);

impl Default for Calibration {
    fn default() -> Self {
        Self(AtomicU64::new(1.0_f64.to_bits()))
    }
}

impl Calibration {
    /// The factor now: what the conversation's next request is folded
    /// under where no record says otherwise.
    pub(crate) fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    /// The upstream counted `upstream` tokens for a request lam counted as
    /// `local`: raise the factor when it counts more.
    pub(crate) fn raise(&self, upstream: u64, local: u64) {
        if local > 0 {
            self.0.fetch_max(factor(upstream, local).to_bits(), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounded up to 1/32, at least 1 and at most the ceiling; only ever raised.
    #[test]
    fn a_factor_is_bounded_and_only_ever_raised() {
        assert_eq!((factor(1000, 1000), factor(900, 1000), factor(1100, 1000)), (1.0, 1.0, 1.125));
        assert_eq!(factor(1_000_000_000_000, 1537), MAX_CALIBRATION);
        let c = Calibration::default();
        assert_eq!(c.get(), 1.0);
        c.raise(1500, 1000);
        c.raise(1100, 1000);
        c.raise(9999, 0);
        assert_eq!(c.get(), 1.5, "the largest; a request lam counted as 0 says nothing");
    }
}
