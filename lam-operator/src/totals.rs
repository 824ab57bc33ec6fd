//! What admissions add up to: the one totals type and the one removal
//! formula, reported by the proxy (`GET /lam/stats`), the Python package
//! (`Session.stats()`), `lam compact` and `lam eval`.

use crate::Admission;

/// `(in - out) / in`: the share of input tokens removed (0 before any
/// input; negative when more went out than came in).
pub fn removal(tokens_in: u64, tokens_out: u64) -> f64 {
    if tokens_in == 0 { 0.0 } else { (tokens_in as f64 - tokens_out as f64) / tokens_in as f64 }
}

/// Counters over a session's admissions (or several sessions', added up).
/// Token counts are those of [`Admission::tokens`] (0 when the session
/// counts none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionTotals {
    /// Observations admitted.
    pub observations: u64,
    /// Tokens of the originals.
    pub tokens_in: u64,
    /// Tokens of what was sent in their place (stubs included).
    pub tokens_out: u64,
    /// Stub lines sent.
    pub stubs: u64,
    /// Nanoseconds encoding.
    pub encode_ns: u64,
    /// Nanoseconds deciding, hashing and rendering.
    pub admit_ns: u64,
}

impl SessionTotals {
    /// Count an admission whose residual was sent.
    pub fn add(&mut self, a: &Admission) {
        self.count(a, false);
    }

    /// Count an admission whose original was sent whole (a kept tool's result).
    pub fn add_whole(&mut self, a: &Admission) {
        self.count(a, true);
    }

    fn count(&mut self, a: &Admission, whole: bool) {
        let t = a.tokens.unwrap_or_default();
        self.observations += 1;
        self.tokens_in += t.input as u64;
        self.tokens_out += if whole { t.input } else { t.output } as u64;
        self.stubs += if whole { 0 } else { a.stubs.len() as u64 };
        self.encode_ns += a.encode_ns;
        self.admit_ns += a.admit_ns;
    }

    /// Add another's counters.
    pub fn absorb(&mut self, o: &SessionTotals) {
        self.observations += o.observations;
        self.tokens_in += o.tokens_in;
        self.tokens_out += o.tokens_out;
        self.stubs += o.stubs;
        self.encode_ns += o.encode_ns;
        self.admit_ns += o.admit_ns;
    }

    /// Net removal: `(tokens_in - tokens_out) / tokens_in` ([`removal`]).
    pub fn removal(&self) -> f64 {
        removal(self.tokens_in, self.tokens_out)
    }

    /// Seconds spent admitting, encoding included.
    pub fn seconds(&self) -> f64 {
        (self.encode_ns + self.admit_ns) as f64 * 1e-9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_is_one_minus_out_over_in() {
        assert_eq!(removal(0, 0), 0.0);
        assert_eq!(removal(200, 50), 0.75);
        let mut t = SessionTotals { observations: 1, tokens_in: 100, tokens_out: 40, stubs: 2, encode_ns: 5, admit_ns: 5 };
        t.absorb(&t.clone());
        assert_eq!((t.observations, t.tokens_in, t.tokens_out, t.stubs), (2, 200, 80, 4));
        assert!((t.removal() - 0.6).abs() < 1e-12 && (t.seconds() - 2e-8).abs() < 1e-20);
    }
}
