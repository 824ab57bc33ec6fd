//! `ArcView`: the deterministic ARC compaction routine with exact recall.

use crate::catalog::Catalog;
use crate::command::{Command, parse_commands};
use crate::text::{lossy, one_line, push_line_block, task_block, verbatim};
use lam_core::id::nearest;
use lam_core::{Error, ObsMeta, ObsStore, Record, Rendered, SessionId, TokenCounter, Turn, ViewPolicy};
use std::collections::HashMap;
use std::ops::Range;

fn err(msg: String) -> Error {
    Error::Backend { what: "arc-view", cause: msg.into() }
}

/// Characters of an action kept in a bare summary entry (`#n §id $ action`).
const BARE_ACTION_CHARS: usize = 60;

/// Smallest recalled part payload.
const MIN_PART: usize = 32;

/// The token counts a budget plan needs that do not depend on `L`.
#[derive(Debug, Clone, Copy)]
struct Fixed {
    /// The rendered task prefix `B`.
    prefix: usize,
    /// The widest recalled-part header.
    part_header: usize,
    /// The widest catalog page header.
    page_reserve: usize,
}

impl Fixed {
    fn of<T: TokenCounter + ?Sized>(prefix_text: &str, tok: &T) -> Self {
        let f = "f".repeat(16);
        let part_header = tok
            .count(format!("[recalled §{f} part 99999/99999: exact bytes 9999999999-9999999999 of 9999999999; next: _recall §{f} 99999/99999]\n").as_bytes());
        Self { prefix: tok.count(prefix_text.as_bytes()), part_header, page_reserve: Catalog::header_reserve(tok) }
    }

    /// The prefix and the smallest summary, recent, catalog and recall budgets.
    fn min_need(&self) -> usize {
        self.prefix + 4 * 64 + self.part_header + MIN_PART + self.page_reserve
    }
}

/// The component budgets within limit `L`, or why they do not fit.
fn plan(cfg: &ArcConfig, limit: usize, f: &Fixed) -> Result<Budgets, String> {
    let (bp, min_need) = (f.prefix, f.min_need());
    if min_need > limit {
        return Err(format!(
            "the task prefix takes {bp} tokens; with the smallest summary, recent, catalog and recall budgets the view needs {min_need} > L = {limit}"
        ));
    }
    let rest = limit - bp;
    let page = cfg.page_tokens.unwrap_or((rest / 10).clamp(96, 512)).max(f.page_reserve + 16);
    let recall = cfg.recall_budget.unwrap_or((rest / 4).min(8192)).max(f.part_header + MIN_PART);
    let part = cfg.recall_max.unwrap_or(2048).min(recall - f.part_header).max(1);
    let eta = 0;
    let left = rest.checked_sub(page + recall + eta).filter(|&l| l >= 128).ok_or_else(|| {
        format!("budgets P = {page} and Q = {recall} leave less than 128 tokens for summary and recent turns within L = {limit} after the prefix ({bp})")
    })?;
    let summary = ((left as f64) * cfg.summary_share.clamp(0.05, 0.95)) as usize;
    Ok(Budgets { limit, prefix: bp, summary, recent: left - summary, page, recall, part, eta })
}

/// The smallest limit `L` a plan fits (the first that works, scanning up
/// from the components' minimum).
fn min_limit(cfg: &ArcConfig, f: &Fixed) -> usize {
    let start = f.min_need();
    (start..start + (1 << 20)).find(|&l| plan(cfg, l, f).is_ok()).unwrap_or(start)
}

/// The summary `M` frozen at the last compaction: its header line, its
/// entries, their tokens, and the last turn listed in the catalog only.
#[derive(Debug, Default)]
struct Summary {
    header: String,
    body: String,
    tokens: usize,
    elided: Option<usize>,
}

impl ViewStats {
    /// The stats of a render with its text, as [`ViewPolicy::render`] returns them.
    pub fn into_rendered(self, text: String) -> Rendered {
        Rendered { text, tokens: self.tokens, limit: Some(self.limit), citations: self.citations, recalled: self.recalled }
    }
}

/// Settings of the ARC view. Token figures are in the counter's tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct ArcConfig {
    /// Context window `L_ctx`.
    pub context: usize,
    /// Tokens reserved for the model's completion `G_max`; the view limit is `L = L_ctx - G_max`.
    pub completion: usize,
    /// Observations shorter than `rho` tokens stay inline in the summary.
    pub rho: usize,
    /// Most recent turns kept verbatim by a compaction (fewer when they do not fit `R`).
    pub recent_turns: usize,
    /// Characters of an older thought kept in the summary.
    pub thought_chars: usize,
    /// Characters of an action kept in the summary.
    pub action_chars: usize,
    /// Recall commands honoured per step (`r`, default 2).
    pub per_step: usize,
    /// Total budget of materialised recalled bodies `Q` (default: a quarter of what the prefix leaves, at most 8192).
    pub recall_budget: Option<usize>,
    /// Largest recalled part `q`, in payload tokens (default: `Q` less the part header, at most 2048).
    pub recall_max: Option<usize>,
    /// Budget of one catalog page `P` (default: a tenth of what the prefix leaves, 96..=512).
    pub page_tokens: Option<usize>,
    /// Share of the rest that goes to the summary `M`; the recent suffix `R` gets the remainder.
    pub summary_share: f64,
}

impl Default for ArcConfig {
    fn default() -> Self {
        Self {
            context: 16_384,
            completion: 0,
            rho: 64,
            recent_turns: 3,
            thought_chars: 120,
            action_chars: 160,
            per_step: 2,
            recall_budget: None,
            recall_max: None,
            page_tokens: None,
            summary_share: 0.4,
        }
    }
}

impl ArcConfig {
    /// A configuration for a usable input budget of `limit` tokens (`L_ctx = limit`, `G_max = 0`).
    pub fn with_limit(limit: usize) -> Self {
        Self { context: limit, ..Self::default() }
    }
}

/// The fixed component budgets of one view: `K = B + M + R + P + Q + eta <= L`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Budgets {
    /// `L = L_ctx - G_max`.
    pub limit: usize,
    /// `B`: the immutable task prefix, as rendered.
    pub prefix: usize,
    /// `M`: the deterministic summary.
    pub summary: usize,
    /// `R`: the recent verbatim suffix kept by a compaction.
    pub recent: usize,
    /// `P`: one catalog page.
    pub page: usize,
    /// `Q`: materialised recalled bodies.
    pub recall: usize,
    /// `q`: payload tokens of one recalled part.
    pub part: usize,
    /// `eta`: separators between components (zero: every entry ends with a newline and the next starts with a marker).
    pub eta: usize,
}

impl Budgets {
    /// `K = B + M + R + P + Q + eta`.
    pub fn total(&self) -> usize {
        self.prefix + self.summary + self.recent + self.page + self.recall + self.eta
    }
}

/// What one render produced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ViewStats {
    /// Tokens of the view (sum of its entries' counts).
    pub tokens: usize,
    /// The limit `L`.
    pub limit: usize,
    /// Compactions so far (each is a re-prefill event).
    pub compactions: usize,
    /// Whether this render compacted.
    pub compacted_now: bool,
    /// Ids cited (full or bare) in the visible summary, oldest first.
    pub citations: Vec<String>,
    /// Recalled parts materialised in the view, as `id k/m`.
    pub recalled: Vec<String>,
    /// Catalog page shown (1-based) and page count; `(0, 0)` before the first compaction.
    pub page: (usize, usize),
}

#[derive(Debug)]
enum Kind {
    /// A normal action whose observation is archived.
    Normal(ObsMeta),
    /// An ARC control action answered by the view.
    Control(String),
}

#[derive(Debug)]
struct Entry {
    thought: String,
    action: String,
    kind: Kind,
    verbatim: (String, usize),
    full: Option<(String, usize)>,
    bare: Option<(String, usize)>,
}

#[derive(Debug)]
struct Part {
    shown: String,
    part: u32,
    parts: u32,
    text: String,
    tokens: usize,
    used: u64,
}

/// The catalog page last rendered: (page, pages, entries) it was rendered
/// for, its text and its tokens.
type PageCache = ((usize, usize, usize), String, usize);

/// The ARC view of one session over an [`ObsStore`].
///
/// Turns are archived before anything else; the view is rebuilt before
/// every model call from the task prefix, the deterministic summary (frozen
/// between compactions), the turns since the last compaction verbatim, one
/// catalog page and the recalled bodies. A compaction happens when the next
/// view would exceed `L` (proactive), when forced ([`ArcView::compact_now`],
/// e.g. on a fixed call schedule), or after the model reported an overflow
/// ([`ArcView::on_overflow`], reactive).
#[derive(Debug)]
pub struct ArcView<S, T> {
    cfg: ArcConfig,
    b: Budgets,
    session: SessionId,
    store: S,
    tok: T,
    prefix: String,
    entries: Vec<Entry>,
    // Summary state: turns [0, upto) summarised at the last compaction.
    upto: Option<usize>,
    summary: Summary,
    cited: Vec<String>,
    compactions: usize,
    margin: usize,
    // Catalog: every archived observation, in creation order, in fixed pages.
    catalog: Catalog,
    page: usize,
    page_cache: std::cell::RefCell<Option<PageCache>>,
    // Recall bookkeeping (kept apart from the immutable archive).
    parts_of: HashMap<String, Vec<Range<usize>>>,
    bodies: HashMap<String, Vec<u8>>,
    rendered: HashMap<(String, u32), (String, usize, usize)>,
    recalled: Vec<Part>,
    clock: u64,
    recalls_total: u64,
}

impl<S: ObsStore, T: TokenCounter> ArcView<S, T> {
    /// A view for `session` with task prefix `prefix`. Fails when the prefix
    /// and the smallest workable components cannot fit `L`; the error names
    /// the smallest context window that works ([`ArcView::min_context`]).
    pub fn new(cfg: ArcConfig, session: SessionId, prefix: &str, store: S, tok: T) -> Result<Self, Error> {
        let limit = cfg
            .context
            .checked_sub(cfg.completion)
            .ok_or_else(|| err(format!("completion reserve {} exceeds the context window {}", cfg.completion, cfg.context)))?;
        let pre = task_block(prefix);
        let fixed = Fixed::of(&pre, &tok);
        let b = plan(&cfg, limit, &fixed).map_err(|why| {
            err(format!(
                "{why} (context {} - completion {}; the smallest context that works for this task is {})",
                cfg.context,
                cfg.completion,
                min_limit(&cfg, &fixed) + cfg.completion
            ))
        })?;
        debug_assert!(b.total() <= limit);
        let catalog = Catalog::new(&tok, b.page);
        Ok(Self {
            cfg,
            b,
            session,
            store,
            tok,
            prefix: pre,
            entries: Vec::new(),
            upto: None,
            summary: Summary::default(),
            cited: Vec::new(),
            compactions: 0,
            margin: 0,
            catalog,
            page: 0,
            page_cache: std::cell::RefCell::new(None),
            parts_of: HashMap::new(),
            bodies: HashMap::new(),
            rendered: HashMap::new(),
            recalled: Vec::new(),
            clock: 0,
            recalls_total: 0,
        })
    }

    /// The smallest context window `L_ctx` (with `cfg.completion` reserved)
    /// for which [`ArcView::new`] accepts task prefix `prefix`.
    pub fn min_context(cfg: &ArcConfig, prefix: &str, tok: &T) -> usize {
        min_limit(cfg, &Fixed::of(&task_block(prefix), tok)) + cfg.completion
    }

    /// The component budgets.
    pub fn budgets(&self) -> Budgets {
        self.b
    }

    /// The archive behind the view.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The archive, for a caller that archives before admission (LAM).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// The token counter.
    pub fn counter(&self) -> &T {
        &self.tok
    }

    /// The archive, consuming the view.
    pub fn into_store(self) -> S {
        self.store
    }

    /// The session.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Number of turns seen.
    pub fn turns(&self) -> usize {
        self.entries.len()
    }

    /// Visible id of turn `i`'s archived observation (0-based), if it was a normal action.
    pub fn id_of_turn(&self, i: usize) -> Option<&str> {
        match &self.entries.get(i)?.kind {
            Kind::Normal(m) => Some(&m.shown),
            Kind::Control(_) => None,
        }
    }

    /// Recall commands honoured so far.
    pub fn recalls(&self) -> u64 {
        self.recalls_total
    }

    /// Archive a completed normal turn (before anything else) and add it to the view.
    /// A turn whose action is an ARC control command is answered by [`ArcView::act`] instead.
    pub fn push_turn(&mut self, thought: &str, record: &Record) -> Result<ObsMeta, Error> {
        self.push_turn_shown(thought, record, &record.observation)
    }

    /// Archive a completed normal turn, but show `shown` in its verbatim form
    /// (the LAM residual, whose stubs cite the archived original). Appending
    /// an observation the store already holds returns its first record.
    pub fn push_turn_shown(&mut self, thought: &str, record: &Record, shown: &[u8]) -> Result<ObsMeta, Error> {
        let tokens = self.tok.count(&record.observation);
        let meta = self.store.append(&self.session, record, u32::try_from(tokens).unwrap_or(u32::MAX))?;
        self.add_turn(thought, record, meta.clone(), shown, Some(tokens));
        Ok(meta)
    }

    /// Add a completed normal turn whose observation the caller has already
    /// archived in this view's store and session as `meta` (archive once:
    /// LAM archives before it admits), showing `shown` in its verbatim form.
    pub fn push_archived(&mut self, thought: &str, record: &Record, meta: ObsMeta, shown: &[u8]) {
        self.add_turn(thought, record, meta, shown, None);
    }

    /// `obs_tokens`: the counter's count of `record.observation`, when known.
    fn add_turn(&mut self, thought: &str, record: &Record, meta: ObsMeta, shown: &[u8], obs_tokens: Option<usize>) {
        let n = self.entries.len() + 1;
        let body = lossy(shown);
        let v = verbatim(n, Some(&meta.shown), thought, &record.action, &body);
        // Counts add up where a newline meets a non-whitespace byte, so an
        // observation that starts with one and ends with a newline is not
        // tokenized twice (the whole-view tests check the sum).
        let clean = std::ptr::eq(shown, &record.observation[..]) && shown.first().is_some_and(|b| !b.is_ascii_whitespace()) && shown.ends_with(b"\n");
        let vt = match obs_tokens {
            Some(tokens) if clean => {
                let head = &v[..v.len() - body.len()];
                self.tok.count(head.as_bytes()) + tokens
            }
            _ => self.tok.count(v.as_bytes()),
        };
        self.catalog.push(&self.tok, &meta);
        self.entries.push(Entry {
            thought: thought.to_string(),
            action: record.action.clone(),
            kind: Kind::Normal(meta),
            verbatim: (v, vt),
            full: None,
            bare: None,
        });
    }

    /// Intercept an action before it reaches the environment. When it is an
    /// ARC control action (`_recall §id [k/n]`, `_recall_meta §id`,
    /// `catalog next|prev|page N`), answer it, record the turn and return the
    /// answer; otherwise return `None` and leave the action to the caller.
    pub fn act(&mut self, thought: &str, action: &str) -> Result<Option<String>, Error> {
        let Some(cmds) = parse_commands(action) else { return Ok(None) };
        let mut answer = String::new();
        let mut recalls = 0;
        for c in cmds {
            let line = match c {
                Command::Recall { shown, part } => {
                    if recalls == self.cfg.per_step {
                        format!("[recall limit: at most {} recalls per step; not done: _recall §{shown}]", self.cfg.per_step)
                    } else {
                        recalls += 1;
                        self.recall(&shown, part.unwrap_or(1))?
                    }
                }
                Command::RecallMeta { shown } => match self.store.meta(&self.session, &shown)? {
                    Some(m) => {
                        let (mut s, _) = self.citation(&m, "meta");
                        s.truncate(s.trim_end().len());
                        s
                    }
                    None => self.unknown(&shown)?,
                },
                Command::CatalogNext | Command::CatalogPrev | Command::CatalogPage(_) => {
                    let pages = self.catalog.pages();
                    self.page = match c {
                        Command::CatalogNext => (self.page + 1) % pages,
                        Command::CatalogPrev => (self.page + pages - 1) % pages,
                        Command::CatalogPage(n) => (n - 1).min(pages - 1),
                        _ => unreachable!("matched above"),
                    };
                    format!("[catalog page {}/{} is shown below]", self.page + 1, pages)
                }
            };
            answer.push_str(&line);
            answer.push('\n');
        }
        let n = self.entries.len() + 1;
        let v = verbatim(n, None, thought, action, &answer);
        let vt = self.tok.count(v.as_bytes());
        self.entries.push(Entry {
            thought: thought.to_string(),
            action: action.to_string(),
            kind: Kind::Control(answer.clone()),
            verbatim: (v, vt),
            full: None,
            bare: None,
        });
        Ok(Some(answer))
    }

    /// The exact parts of an archived observation: byte ranges of at most `q`
    /// tokens each, non-overlapping and covering it.
    pub fn parts(&mut self, shown: &str) -> Result<Option<Vec<Range<usize>>>, Error> {
        if let Some(p) = self.parts_of.get(shown) {
            return Ok(Some(p.clone()));
        }
        let Some(body) = self.store.get(&self.session, shown)? else { return Ok(None) };
        let p = cut_parts(&self.tok, &body, self.b.part);
        self.parts_of.insert(shown.to_string(), p.clone());
        Ok(Some(p))
    }

    fn recall(&mut self, shown: &str, part: u32) -> Result<String, Error> {
        // Parts are cut once per id and rendered once per part: a warm
        // recall touches neither the archive nor the tokenizer.
        if !self.parts_of.contains_key(shown) {
            let Some(body) = self.store.get(&self.session, shown)? else { return self.unknown(shown) };
            let p = cut_parts(&self.tok, &body, self.b.part);
            self.parts_of.insert(shown.to_string(), p);
            self.bodies.insert(shown.to_string(), body);
        }
        let parts = &self.parts_of[shown];
        let m = parts.len() as u32;
        if part > m {
            return Ok(format!("[§{shown} has {m} part{}; part {part} does not exist]", if m == 1 { "" } else { "s" }));
        }
        let r = parts[part as usize - 1].clone();
        let key = (shown.to_string(), part);
        if !self.rendered.contains_key(&key) {
            let body = match self.bodies.get(shown) {
                Some(b) => b.clone(),
                None => self.store.get(&self.session, shown)?.ok_or_else(|| err(format!("§{shown} vanished from the archive")))?,
            };
            let next = if part < m { format!("; next: _recall §{shown} {}/{m}", part + 1) } else { String::new() };
            let mut text = format!("[recalled §{shown} part {part}/{m}: exact bytes {}-{} of {}{next}]\n", r.start, r.end, body.len());
            push_line_block(&mut text, &lossy(&body[r.clone()]));
            let tokens = self.tok.count(text.as_bytes());
            self.rendered.insert(key.clone(), (text, tokens, body.len()));
        }
        let (text, tokens, len) = self.rendered[&key].clone();
        if tokens > self.b.recall {
            return Ok(format!("[§{shown} part {part}/{m} needs {tokens} tokens, more than the recall budget {}]", self.b.recall));
        }
        self.recalls_total += 1;
        self.clock += 1;
        if let Some(p) = self.recalled.iter_mut().find(|p| p.shown == shown && p.part == part) {
            p.used = self.clock;
        } else {
            self.recalled.push(Part { shown: shown.to_string(), part, parts: m, text, tokens, used: self.clock });
        }
        // Least recently used bodies fall back to their citations.
        let mut total: usize = self.recalled.iter().map(|p| p.tokens).sum();
        while total > self.b.recall {
            let i = self.recalled.iter().enumerate().min_by_key(|(_, p)| p.used).map(|(i, _)| i).expect("non-empty");
            total -= self.recalled.remove(i).tokens;
        }
        Ok(format!("[§{shown} part {part}/{m} (bytes {}-{} of {len}) is in the recall section]", r.start, r.end))
    }

    fn unknown(&self, shown: &str) -> Result<String, Error> {
        let ids = self.store.ids(&self.session)?;
        let near = nearest(&ids, shown, 3);
        Ok(if near.is_empty() {
            format!("[no §{shown} in this session; it has no archived observations]")
        } else {
            format!("[no §{shown} in this session; nearest: {}]", near.iter().map(|s| format!("§{s}")).collect::<Vec<_>>().join(", "))
        })
    }

    fn citation(&self, m: &ObsMeta, lead: &str) -> (String, usize) {
        let s = lam_core::cite::citation(m, lead, lam_core::stub::Recall::ARC, self.b.part, lam_core::cite::PREVIEW_CHARS);
        let t = self.tok.count(s.as_bytes());
        (s, t)
    }

    fn full_form(&mut self, i: usize) -> (String, usize) {
        if let Some(f) = &self.entries[i].full {
            return f.clone();
        }
        let e = &self.entries[i];
        let n = i + 1;
        let mut s = String::new();
        if !e.thought.trim().is_empty() {
            s.push_str(&format!("#{n} · {}\n", one_line(&e.thought, self.cfg.thought_chars)));
        }
        let lead = format!("#{n} $ {}", one_line(&e.action, self.cfg.action_chars));
        match &e.kind {
            Kind::Normal(m) if (m.tokens as usize) < self.cfg.rho => {
                s.push_str(&lead);
                s.push_str(" →\n");
                // Short observations stay inline: from the store, exact text.
                let body = self.store.get(&self.session, &m.shown).ok().flatten().unwrap_or_default();
                push_line_block(&mut s, &lossy(&body));
            }
            Kind::Normal(m) => s.push_str(&self.citation(m, &lead).0),
            Kind::Control(answer) => {
                s.push_str(&lead);
                s.push_str(&format!(" → {}\n", one_line(answer, 200)));
            }
        }
        let t = self.tok.count(s.as_bytes());
        self.entries[i].full = Some((s.clone(), t));
        (s, t)
    }

    fn bare_form(&mut self, i: usize) -> (String, usize) {
        if let Some(f) = &self.entries[i].bare {
            return f.clone();
        }
        let n = i + 1;
        let e = &self.entries[i];
        let action = one_line(&e.action, BARE_ACTION_CHARS);
        let s = match &e.kind {
            Kind::Normal(m) => format!("#{n} §{} $ {action}\n", m.shown),
            Kind::Control(_) => format!("#{n} $ {action} (ARC command)\n"),
        };
        let t = self.tok.count(s.as_bytes());
        self.entries[i].bare = Some((s.clone(), t));
        (s, t)
    }

    fn page_text(&self) -> (String, usize) {
        let key = (self.page, self.catalog.pages(), self.catalog.len());
        if let Some((k, text, t)) = &*self.page_cache.borrow()
            && *k == key
        {
            return (text.clone(), *t);
        }
        let (text, t) = self.catalog.page(&self.tok, self.page).expect("the shown page exists");
        *self.page_cache.borrow_mut() = Some((key, text.clone(), t));
        (text, t)
    }

    /// Compact now (forced schedule, or a caller's own trigger).
    pub fn compact_now(&mut self) {
        let upto = self.entries.len() - self.recent_suffix();
        // The summary of turns [0, upto): newest entries full, older bare, oldest elided.
        let header = format!("[summary of turns 1-{upto}: older turns compacted by ARC; `_recall §id` restores an observation exactly]\n");
        let ht = self.tok.count(header.as_bytes());
        let avail = self.b.summary.saturating_sub(ht + self.elision_reserve());
        let (picked, total, first) = self.pick_summary(upto, avail);
        let mut body = String::new();
        self.cited.clear();
        for (i, is_bare, s) in picked.iter().rev() {
            body.push_str(s);
            if let Kind::Normal(m) = &self.entries[*i].kind
                && (*is_bare || m.tokens as usize >= self.cfg.rho)
                && !self.cited.contains(&m.shown)
            {
                self.cited.push(m.shown.clone());
            }
        }
        self.summary = Summary { header, body, tokens: ht + total, elided: (first > 0).then_some(first) };
        self.upto = Some(upto);
        self.compactions += 1;
    }

    /// How many of the newest turns stay verbatim: at most `recent_turns` that fit `R` together.
    fn recent_suffix(&self) -> usize {
        let n = self.entries.len();
        let (mut keep, mut used) = (0, 0);
        while keep < self.cfg.recent_turns.min(n) {
            let t = self.entries[n - 1 - keep].verbatim.1;
            if used + t > self.b.recent {
                break;
            }
            used += t;
            keep += 1;
        }
        keep
    }

    /// The summary entries of turns `[0, upto)` within `avail` tokens, newest
    /// first (full forms, then bare ones): `(turn, bare, text)`, their tokens,
    /// and the first turn listed (turns before it are in the catalog only).
    fn pick_summary(&mut self, upto: usize, avail: usize) -> (Vec<(usize, bool, String)>, usize, usize) {
        let mut picked = Vec::new();
        let (mut total, mut bare, mut first) = (0, false, upto);
        for i in (0..upto).rev() {
            if !bare {
                let f = self.full_form(i);
                if total + f.1 <= avail {
                    total += f.1;
                    picked.push((i, false, f.0));
                    first = i;
                    continue;
                }
                bare = true;
            }
            let b = self.bare_form(i);
            if total + b.1 > avail {
                break;
            }
            total += b.1;
            picked.push((i, true, b.0));
            first = i;
        }
        (picked, total, first)
    }

    /// Tokens reserved in `M` for the elision line at its widest with the
    /// numbers of now (turn numbers up to the turns seen, page numbers up to
    /// the pages); when later turns widen it, the view compacts again.
    fn elision_reserve(&self) -> usize {
        let (n, p) = (self.entries.len().max(1), self.catalog.pages().max(1));
        let widest = |next: String| format!("[turns 1-{n} are in the catalog only; page {p}/{p} below lists turns {n}-{n}{next}]\n");
        let t = |s: String| self.tok.count(s.as_bytes());
        t(widest(format!("; `catalog next` shows page {p}"))).max(t(widest("; `catalog page N` shows page N".into())))
    }

    /// The line saying which turns are in the catalog only, which of them
    /// the catalog page in this view lists and how to see the next page
    /// (rendered with the page shown, so it matches it).
    fn elision_text(&self) -> (String, usize) {
        let Some(first) = self.summary.elided.filter(|_| self.upto.is_some()) else { return (String::new(), 0) };
        let (p, n) = (self.page + 1, self.catalog.pages());
        let lists = match self.catalog.page_turns(self.page) {
            Some((a, b)) if a == b => format!("turn {a}"),
            Some((a, b)) => format!("turns {a}-{b}"),
            None => "no turns".into(),
        };
        let next = if p < n {
            format!("; `catalog next` shows page {}", p + 1)
        } else if n > 1 {
            "; `catalog page N` shows page N".into()
        } else {
            String::new()
        };
        let line = format!("[turns 1-{first} are in the catalog only; page {p}/{n} below lists {lists}{next}]\n");
        let t = self.tok.count(line.as_bytes());
        (line, t)
    }

    /// The model reported a context overflow for the last view (reactive
    /// trigger): the counter underestimates the model's tokenizer, so keep a
    /// margin of 5 % of `L` more from now on, and compact.
    pub fn on_overflow(&mut self) {
        self.margin = (self.margin + self.b.limit / 20).min(self.b.limit / 4);
        self.compact_now();
    }

    fn estimate(&self) -> usize {
        let start = self.upto.unwrap_or(0);
        let mut t = self.b.prefix + self.entries[start..].iter().map(|e| e.verbatim.1).sum::<usize>();
        t += self.recalled.iter().map(|p| p.tokens).sum::<usize>();
        if self.upto.is_some() {
            t += self.summary.tokens + self.elision_text().1 + self.page_text().1;
        }
        t
    }

    /// Build the view for the next model call into `out` (cleared first),
    /// compacting first when it would exceed `L` (less the overflow margin).
    pub fn render_view(&mut self, out: &mut String) -> Result<ViewStats, Error> {
        let limit = self.b.limit - self.margin;
        let mut compacted_now = false;
        if self.estimate() > limit {
            self.compact_now();
            compacted_now = true;
        }
        let tokens = self.estimate();
        if tokens > limit {
            return Err(err(format!("view of {tokens} tokens exceeds L = {limit} after compaction (budgets {:?})", self.b)));
        }
        out.clear();
        out.push_str(&self.prefix);
        let start = self.upto.unwrap_or(0);
        let mut page = (0, 0);
        if self.upto.is_some() {
            out.push_str(&self.summary.header);
            out.push_str(&self.elision_text().0);
            out.push_str(&self.summary.body);
        }
        for e in &self.entries[start..] {
            out.push_str(&e.verbatim.0);
        }
        if self.upto.is_some() {
            out.push_str(&self.page_text().0);
            page = (self.page + 1, self.catalog.pages());
        }
        let mut order: Vec<&Part> = self.recalled.iter().collect();
        order.sort_by_key(|p| p.used);
        for p in &order {
            out.push_str(&p.text);
        }
        Ok(ViewStats {
            tokens,
            limit: self.b.limit,
            compactions: self.compactions,
            compacted_now,
            citations: if self.upto.is_some() { self.cited.clone() } else { Vec::new() },
            recalled: order.iter().map(|p| format!("{} {}/{}", p.shown, p.part, p.parts)).collect(),
            page,
        })
    }
}

/// Cut `body` into non-overlapping byte ranges of at most `q` tokens each
/// (as the counter counts the part alone), covering it exactly; an empty
/// body has one empty part.
pub fn cut_parts<T: TokenCounter + ?Sized>(tok: &T, body: &[u8], q: usize) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    tok.spans(body, &mut spans);
    let mut out = Vec::new();
    let mut i = 0;
    while i < spans.len() {
        let mut take = q.min(spans.len() - i);
        loop {
            let r = spans[i].start..spans[i + take - 1].end;
            let c = tok.count(lossy(&body[r.clone()]).as_bytes());
            if c <= q || take == 1 {
                out.push(r);
                break;
            }
            take = take.saturating_sub((c - q).max(1)).max(1);
        }
        i += take;
    }
    if out.is_empty() {
        out.push(0..body.len());
    }
    out
}

impl<S: ObsStore, T: TokenCounter> ViewPolicy for ArcView<S, T> {
    fn name(&self) -> String {
        "arc".into()
    }

    fn push(&mut self, turn: &Turn) -> Result<(), Error> {
        if self.act(&turn.thought, &turn.record.action)?.is_none() {
            self.push_turn(&turn.thought, &turn.record)?;
        }
        Ok(())
    }

    fn act(&mut self, thought: &str, action: &str) -> Result<Option<String>, Error> {
        ArcView::act(self, thought, action)
    }

    fn render(&mut self) -> Result<Rendered, Error> {
        let mut text = String::new();
        let st = self.render_view(&mut text)?;
        Ok(st.into_rendered(text))
    }

    fn recall(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        self.store.get(&self.session, id.trim_start_matches('§'))
    }
}
