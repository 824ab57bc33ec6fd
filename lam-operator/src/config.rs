//! Operator settings: threshold, layer order, candidate index.

use crate::Error;
use lam_core::stub::Recall;
use lam_core::{Threshold, TokenCounter};
use lam_lsh::{BandParams, BandedIndex, ExhaustiveIndex, L1Index};
use std::fmt;
use std::str::FromStr;

/// Which layer runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// L1 (near-duplicate chunks) then L0 (lines): the default (LAM B.3).
    #[default]
    L1L0,
    /// L0 then L1 (the paper's ablation "A"); L1 then sees L0's stubs.
    L0L1,
}

impl Order {
    /// `l1-l0` or `l0-l1`, as the command line and reports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Order::L1L0 => "l1-l0",
            Order::L0L1 => "l0-l1",
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Order {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "l1-l0" => Ok(Order::L1L0),
            "l0-l1" => Ok(Order::L0L1),
            _ => Err(Error::Setting(format!("order: expected l1-l0 or l0-l1, got `{s}`"))),
        }
    }
}

/// What is forwarded for the text L1 drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Residual {
    /// Every line the model has not seen is forwarded verbatim, in place;
    /// only lines equal, line for line, to lines the model can read are
    /// replaced (by L0's line stubs, ``lines 3-9 of `ls` ``, or one `same
    /// output as` line for a byte-identical output). L1 still decides which chunks are
    /// near-duplicates (the deletion set, `delta_hat` and the digest are
    /// the paper's); it never hides a line. The default, and the only
    /// residual a live agent is given.
    #[default]
    Faithful,
    /// The paper's residual: each run of dropped chunks is one `similar to`
    /// stub, whatever lines it held. Hides lines the model has never seen;
    /// only for reproducing the paper's figures (`lam compact`, `lam eval`).
    Paper,
}

impl Residual {
    /// `faithful` or `paper`, as the command line and reports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Residual::Faithful => "faithful",
            Residual::Paper => "paper",
        }
    }
}

impl fmt::Display for Residual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Residual {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "faithful" => Ok(Residual::Faithful),
            "paper" => Ok(Residual::Paper),
            _ => Err(Error::Setting(format!("residual: expected faithful or paper, got `{s}`"))),
        }
    }
}

/// Candidate index choice.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum IndexChoice {
    /// Full-recall band setting for the threshold, exhaustive where none is known.
    #[default]
    Default,
    /// Exhaustive scan.
    Exhaustive,
    /// Explicit band settings.
    Banded(BandParams),
}

impl FromStr for IndexChoice {
    type Err = Error;
    /// `default`, `exhaustive` or `banded:R,REL` (R >= 1 coordinates per band,
    /// REL > 0 the quantisation step relative to `delta`).
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::Setting(format!("index `{s}`: {why} (expected default, exhaustive or banded:R,REL)"));
        match s {
            "default" => Ok(IndexChoice::Default),
            "exhaustive" => Ok(IndexChoice::Exhaustive),
            _ => {
                let rest = s.strip_prefix("banded:").ok_or_else(|| bad("unknown index"))?;
                let (r, rel) = rest.split_once(',').ok_or_else(|| bad("missing `,REL`"))?;
                let r: usize = r.trim().parse().map_err(|_| bad("R is not a whole number"))?;
                let rel: f32 = rel.trim().parse().map_err(|_| bad("REL is not a number"))?;
                if r == 0 {
                    return Err(bad("R must be at least 1"));
                }
                if !(rel.is_finite() && rel > 0.0) {
                    return Err(bad("REL must be a positive finite number"));
                }
                Ok(IndexChoice::Banded(BandParams { r, rel }))
            }
        }
    }
}

impl IndexChoice {
    /// The index for embeddings of dimension `dim` at threshold `t`.
    pub fn build(self, dim: usize, t: Threshold) -> Result<L1Index, Error> {
        Ok(match self {
            IndexChoice::Default => L1Index::default_for(dim, t),
            IndexChoice::Exhaustive => L1Index::Exhaustive(ExhaustiveIndex::new()),
            IndexChoice::Banded(p) => {
                if p.r == 0 || p.r > dim || !(p.rel.is_finite() && p.rel > 0.0) {
                    return Err(Error::Setting(format!("banded index R={} REL={}: R must be in 1..={dim} and REL positive", p.r, p.rel)));
                }
                L1Index::Banded(BandedIndex::new(dim, p))
            }
        })
    }
}

/// Whether [`Config::delta`] is on by default: on since issue 55
/// (`docs/eval.md`, "Stubs v7"); [`Config::with_delta`]`(false)` (`lam
/// compact --line-stubs`, `lam eval --line-stubs`) writes the v6 form.
pub const DELTA: bool = true;

/// Operator settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Merge threshold.
    pub threshold: Threshold,
    /// Layer order.
    pub order: Order,
    /// What is forwarded for dropped chunks (default [`Residual::Faithful`]).
    pub residual: Residual,
    /// Candidate index.
    pub index: IndexChoice,
    /// Chunks per encoder call in the batch form.
    pub encode_batch: usize,
    /// The tokens stubs are judged by (a stub replaces a run only when it
    /// costs fewer tokens than the run; `lam_core::stub::worth_replacing`).
    /// `None`: by bytes (a run of at least twice the stub's bytes).
    pub counter: Option<&'static dyn TokenCounter>,
    /// Count each admission's tokens by `counter` ([`crate::Admission::tokens`])
    /// and record them in the archive (on with [`Config::with_counter`]).
    pub count_tokens: bool,
    /// Fill the admission's diagnostics: the chunk vectors
    /// ([`crate::Admission::vectors`]) and the first layer's kept bytes
    /// ([`crate::Admission::first_layer_plain`]). Off by default: they cost a
    /// copy per admission and only evaluation and embedding dumps read them.
    pub diagnostics: bool,
    /// How each observation's first stub line says to get its original back
    /// (`lam_core::stub::Recall`; default the ARC view's `_recall §id`).
    pub recall: Recall<'static>,
    /// Forward an output near the newest earlier output of a call as one
    /// stub naming that call plus the hunks that differ (`docs/stubs.md`,
    /// "Delta"), when that costs fewer tokens than L0's residual. Default
    /// order and faithful residual only. On by default (`DELTA`).
    pub delta: bool,
}

impl Config {
    /// Defaults at threshold `t`.
    pub fn new(threshold: Threshold) -> Self {
        Self {
            threshold,
            order: Order::default(),
            residual: Residual::default(),
            index: IndexChoice::default(),
            encode_batch: 64,
            counter: None,
            count_tokens: false,
            diagnostics: false,
            recall: Recall::ARC,
            delta: DELTA,
        }
    }

    /// Forward dropped chunks as `residual` says.
    pub fn with_residual(mut self, residual: Residual) -> Self {
        self.residual = residual;
        self
    }

    /// Forward near-duplicate outputs as their difference ([`Config::delta`]).
    pub fn with_delta(mut self, on: bool) -> Self {
        self.delta = on;
        self
    }

    /// Write recall handles as `how` (`Recall::None`: none).
    pub fn with_recall(mut self, how: Recall<'static>) -> Self {
        self.recall = how;
        self
    }

    /// Judge stubs by `counter`'s tokens (cl100k: `lam_tokens::Cl100k`) and
    /// count every admission's tokens with it: the one place a session gets
    /// its counter.
    pub fn with_counter(mut self, counter: &'static dyn TokenCounter) -> Self {
        self.counter = Some(counter);
        self.count_tokens = true;
        self
    }

    /// Whether admissions report (and the archive records) token counts;
    /// stubs are judged by the counter either way.
    pub fn with_token_counts(mut self, on: bool) -> Self {
        self.count_tokens = on;
        self
    }

    /// Fill each admission's diagnostics (vectors, first layer's kept bytes).
    pub fn with_diagnostics(mut self) -> Self {
        self.diagnostics = true;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_settings() {
        assert_eq!("l0-l1".parse::<Order>().unwrap(), Order::L0L1);
        assert!("l2".parse::<Order>().is_err());
        assert_eq!("exhaustive".parse::<IndexChoice>().unwrap(), IndexChoice::Exhaustive);
        assert_eq!("banded:8,0.2".parse::<IndexChoice>().unwrap(), IndexChoice::Banded(BandParams { r: 8, rel: 0.2 }));
        for bad in ["banded:0,0", "banded:1,0", "banded:8,-1", "banded:8,NaN", "banded:8,inf", "banded:8", "banded:x,1", "lsh"] {
            assert!(bad.parse::<IndexChoice>().is_err(), "{bad}");
        }
        let t = Threshold::from_cosine(0.95).unwrap();
        assert!(IndexChoice::Banded(BandParams { r: 1000, rel: 1.0 }).build(384, t).is_err());
        assert!(IndexChoice::Banded(BandParams { r: 8, rel: 0.2 }).build(384, t).is_ok());
    }
}
