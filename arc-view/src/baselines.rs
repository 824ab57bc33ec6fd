//! Baseline view policies behind the same trait, for comparison in one harness.

use crate::text::{lossy, task_block, verbatim};
use lam_core::{Error, Rendered, TokenCounter, Turn, ViewPolicy};

fn err(msg: String) -> Error {
    Error::Backend { what: "arc-view", cause: msg.into() }
}

#[derive(Debug)]
struct Seen {
    verbatim: (String, usize),
    masked: (String, usize),
}

/// What observation masking leaves of an observation older than its window:
/// SWE-agent's `LastNObservations` placeholder (the masking of Lindenbauer et
/// al., 2025). An empty observation stays empty. The one definition: the
/// `masking` view and `lam eval`'s masking baseline both use it.
pub fn masking_placeholder(obs: &[u8]) -> String {
    if obs.is_empty() {
        return String::new();
    }
    let lines = obs.split(|&b| b == b'\n').count() - usize::from(obs.ends_with(b"\n"));
    format!("Old environment output: ({lines} lines omitted)")
}

/// Turns rendered once, shared by the baselines.
#[derive(Debug)]
struct History<T> {
    tok: T,
    prefix: (String, usize),
    turns: Vec<Seen>,
}

impl<T: TokenCounter> History<T> {
    fn new(prefix: &str, tok: T) -> Self {
        let p = task_block(prefix);
        let t = tok.count(p.as_bytes());
        Self { tok, prefix: (p, t), turns: Vec::new() }
    }

    fn push(&mut self, turn: &Turn) {
        let n = self.turns.len() + 1;
        let r = &turn.record;
        let v = verbatim(n, None, &turn.thought, &r.action, &lossy(&r.observation));
        let m = verbatim(n, None, &turn.thought, &r.action, &masking_placeholder(&r.observation));
        let (vt, mt) = (self.tok.count(v.as_bytes()), self.tok.count(m.as_bytes()));
        self.turns.push(Seen { verbatim: (v, vt), masked: (m, mt) });
    }

    /// Render turns `[start..]`, masking those before `keep_from`, dropping the
    /// oldest until the view fits `limit` (when given).
    fn render(&self, mut start: usize, keep_from: usize, limit: Option<usize>) -> Result<Rendered, Error> {
        let form = |i: usize| if i >= keep_from { &self.turns[i].verbatim } else { &self.turns[i].masked };
        let mut total: usize = self.prefix.1 + (start..self.turns.len()).map(|i| form(i).1).sum::<usize>();
        if let Some(l) = limit {
            if self.prefix.1 > l {
                return Err(err(format!("the task prefix takes {} tokens, more than the limit {l}", self.prefix.1)));
            }
            while total > l {
                total -= form(start).1;
                start += 1;
            }
        }
        let mut text = self.prefix.0.clone();
        for i in start..self.turns.len() {
            text.push_str(&form(i).0);
        }
        Ok(Rendered { text, tokens: total, limit, citations: Vec::new(), recalled: Vec::new() })
    }
}

/// Every turn verbatim, whatever the size (overflows once the history outgrows the window).
#[derive(Debug)]
pub struct FullContext<T> {
    h: History<T>,
}

impl<T: TokenCounter> FullContext<T> {
    /// A full-context view with task prefix `prefix`.
    pub fn new(prefix: &str, tok: T) -> Self {
        Self { h: History::new(prefix, tok) }
    }
}

impl<T: TokenCounter> ViewPolicy for FullContext<T> {
    fn name(&self) -> String {
        "full".into()
    }
    fn push(&mut self, turn: &Turn) -> Result<(), Error> {
        self.h.push(turn);
        Ok(())
    }
    fn render(&mut self) -> Result<Rendered, Error> {
        self.h.render(0, 0, None)
    }
}

/// The last `n` turns verbatim, fewer when they do not fit the limit; older turns are gone.
#[derive(Debug)]
pub struct SlidingWindow<T> {
    h: History<T>,
    n: usize,
    limit: usize,
}

impl<T: TokenCounter> SlidingWindow<T> {
    /// Keep the last `n` turns within `limit` tokens.
    pub fn new(prefix: &str, tok: T, n: usize, limit: usize) -> Self {
        Self { h: History::new(prefix, tok), n, limit }
    }
}

impl<T: TokenCounter> ViewPolicy for SlidingWindow<T> {
    fn name(&self) -> String {
        format!("window({})", self.n)
    }
    fn push(&mut self, turn: &Turn) -> Result<(), Error> {
        self.h.push(turn);
        Ok(())
    }
    fn render(&mut self) -> Result<Rendered, Error> {
        let start = self.h.turns.len().saturating_sub(self.n);
        self.h.render(start, 0, Some(self.limit))
    }
}

/// Every action, but only the last `k` observations (SWE-agent, OpenHands);
/// the oldest turns are dropped when even that does not fit the limit.
#[derive(Debug)]
pub struct ObservationMasking<T> {
    h: History<T>,
    k: usize,
    limit: usize,
}

impl<T: TokenCounter> ObservationMasking<T> {
    /// Keep the last `k` observations within `limit` tokens.
    pub fn new(prefix: &str, tok: T, k: usize, limit: usize) -> Self {
        Self { h: History::new(prefix, tok), k, limit }
    }
}

impl<T: TokenCounter> ViewPolicy for ObservationMasking<T> {
    fn name(&self) -> String {
        format!("masking({})", self.k)
    }
    fn push(&mut self, turn: &Turn) -> Result<(), Error> {
        self.h.push(turn);
        Ok(())
    }
    fn render(&mut self) -> Result<Rendered, Error> {
        let keep_from = self.h.turns.len().saturating_sub(self.k);
        self.h.render(0, keep_from, Some(self.limit))
    }
}
