//! The citation catalog: one line per archived observation of a session, in
//! creation order, cut into fixed pages. [`crate::ArcView`] shows one page of
//! it in every view after the first compaction; `lam mcp`'s `catalog` tool
//! renders the same pages from a store.

use crate::text::one_line;
use lam_core::{ObsMeta, TokenCounter};
use std::collections::HashSet;

/// The widest page header, reserved out of every page's budget.
const WIDEST_HEADER: &[u8] =
    b"[catalog page 99999/99999: 99999 of 9999999 archived observations; catalog next | catalog prev | catalog page N; _recall \xc2\xa7id]\n";

/// The catalog of one session: lines in creation order, pages fixed as
/// lines arrive (a page is closed when the next line would overflow it, so
/// earlier pages never change).
#[derive(Debug, Clone)]
pub struct Catalog {
    cap: usize,
    lines: Vec<(String, usize)>,
    /// The turn (1-based) of each line.
    turns: Vec<u32>,
    seen: HashSet<String>,
    starts: Vec<usize>,
    fill: usize,
}

impl Catalog {
    /// Tokens reserved out of each page for its header.
    pub fn header_reserve<T: TokenCounter + ?Sized>(tok: &T) -> usize {
        tok.count(WIDEST_HEADER)
    }

    /// An empty catalog whose pages hold at most `page_tokens` tokens,
    /// header included (a single line wider than a page gets a page alone).
    pub fn new<T: TokenCounter + ?Sized>(tok: &T, page_tokens: usize) -> Self {
        let cap = page_tokens.saturating_sub(Self::header_reserve(tok)).max(1);
        Self { cap, lines: Vec::new(), turns: Vec::new(), seen: HashSet::new(), starts: vec![0], fill: 0 }
    }

    /// Whether the observation shown as `shown` is listed.
    pub fn contains(&self, shown: &str) -> bool {
        self.seen.contains(shown)
    }

    /// Observations listed.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// True before the first line.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Pages (at least one, empty before the first line).
    pub fn pages(&self) -> usize {
        self.starts.len()
    }

    /// List an observation (once: an id already listed is left as it is):
    /// `§id #step rc=N Ttok $ action`, shortened to `§id #step` when that
    /// line alone would not fit a page.
    pub fn push<T: TokenCounter + ?Sized>(&mut self, tok: &T, m: &ObsMeta) {
        if !self.seen.insert(m.shown.clone()) {
            return;
        }
        let rc = m.returncode.map_or(String::new(), |r| format!(" rc={r}"));
        let mut line = format!("§{} #{}{rc} {}tok $ {}\n", m.shown, m.step + 1, m.tokens, one_line(&m.action, 48));
        let mut t = tok.count(line.as_bytes());
        if t > self.cap {
            line = format!("§{} #{}\n", m.shown, m.step + 1);
            t = tok.count(line.as_bytes());
        }
        if self.fill + t > self.cap && self.lines.len() > *self.starts.last().expect("one page") {
            self.starts.push(self.lines.len());
            self.fill = 0;
        }
        self.fill += t;
        self.lines.push((line, t));
        self.turns.push(m.step + 1);
    }

    /// The first and last turn (1-based) listed on page `k`; `None` for an
    /// empty page or one past the last.
    pub fn page_turns(&self, k: usize) -> Option<(u32, u32)> {
        let s = *self.starts.get(k)?;
        let e = self.starts.get(k + 1).copied().unwrap_or(self.lines.len());
        let t = &self.turns[s..e];
        Some((*t.iter().min()?, *t.iter().max()?))
    }

    /// Page `k` (0-based, `k < pages()`) as text with its header, and its tokens.
    pub fn page<T: TokenCounter + ?Sized>(&self, tok: &T, k: usize) -> Option<(String, usize)> {
        let s = *self.starts.get(k)?;
        let e = self.starts.get(k + 1).copied().unwrap_or(self.lines.len());
        let mut text = format!(
            "[catalog page {}/{}: {} of {} archived observations; catalog next | catalog prev | catalog page N; _recall §id]\n",
            k + 1,
            self.pages(),
            e - s,
            self.lines.len()
        );
        let mut t = tok.count(text.as_bytes());
        for (line, lt) in &self.lines[s..e] {
            text.push_str(line);
            t += lt;
        }
        Some((text, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lam_core::{ObsId, SimpleCounter};

    fn meta(i: u32) -> ObsMeta {
        ObsMeta {
            id: ObsId::of(format!("cat f{i}").as_bytes(), b"x"),
            shown: format!("{i:08x}"),
            action: format!("cat f{i}.txt"),
            returncode: Some(0),
            step: i,
            bytes: 1,
            tokens: 1,
            head: Vec::new(),
            tail: Vec::new(),
        }
    }

    #[test]
    fn pages_are_fixed_and_cover_every_line() {
        let tok = SimpleCounter;
        let mut c = Catalog::new(&tok, Catalog::header_reserve(&tok) + 40);
        for i in 0..50 {
            c.push(&tok, &meta(i));
            c.push(&tok, &meta(i)); // listed once
        }
        assert_eq!(c.len(), 50);
        assert!(c.pages() > 1);
        let mut listed = 0;
        for k in 0..c.pages() {
            let (text, t) = c.page(&tok, k).unwrap();
            assert!(t <= Catalog::header_reserve(&tok) + 40, "page {k}: {t}");
            assert_eq!(t, tok.count(text.as_bytes()));
            listed += text.lines().count() - 1;
        }
        assert_eq!(listed, 50);
        assert!(c.page(&tok, c.pages()).is_none());
        // Pages list consecutive turns: page 1 starts at turn 1, the last ends at turn 50.
        assert_eq!(c.page_turns(0).unwrap().0, 1);
        assert_eq!(c.page_turns(c.pages() - 1).unwrap().1, 50);
        assert!(c.page_turns(c.pages()).is_none());
        assert!(c.page(&tok, 0).unwrap().0.contains("§00000000 #1 rc=0 1tok $ cat f0.txt"));
    }
}
