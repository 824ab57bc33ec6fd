//! `lam replay`: a recorded session sent through the proxy's engine the way
//! its agent sends it, one request per tool result, and what the provider
//! would bill for it with and without `lam`.
//!
//! Each agent's requests are written by its room
//! (`lam_trajectory::agents`, `requests`), as observed on the wire. The
//! upstream is in-process: each forwarded body is measured, nothing is sent.
//!
//! Billing is [`crate::bill`]'s rule, the proxy's own: tokens are cl100k of
//! each item's JSON bytes, the same for both paths, so the ratio is what
//! matters; a request's time is the transcript's ([`Call::time`]), which
//! says when the cache expired ([`CacheTtl`]).
//!
//! This module drives the proxy from above, as the HTTP layer does;
//! nothing below it imports it.

use crate::bill::{Bill, CacheTtl, Pricing};
use crate::proxy::Proxy;
use lam_core::TokenCounter;
use lam_trajectory::agents::Agent;
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

mod priced;
#[cfg(test)]
mod tests;

pub use priced::{Recalls, RequestRow};

/// The requests each agent sends, written by its room.
pub use lam_trajectory::agents::{Call, forwarded_results, requests};

/// One replayed session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionReport {
    /// Session name (the transcript's).
    pub session: String,
    /// Requests sent (the task, then one per tool result).
    pub requests: usize,
    /// Proxy sessions the requests made (1 when every request continued the first).
    pub proxy_sessions: u64,
    /// Tool results sent (non-empty ones: the proxy admits each of those once).
    pub tool_results: u64,
    /// Observations admitted.
    pub admitted: u64,
    /// cl100k tokens of the tool results sent, and of what was forwarded for them.
    pub tool_tokens_in: u64,
    /// See `tool_tokens_in`.
    pub tool_tokens_out: u64,
    /// Earlier items whose bytes (annotations aside) changed between requests: must be 0.
    pub earlier_changed: u64,
    /// Lines of the tool results shown for the first time (`lam_core::newlines`).
    pub new_lines: u64,
    /// New lines that no line of what lam forwarded for their tool result equals: must be 0.
    pub new_lines_hidden: u64,
    /// cl100k tokens of the hidden new lines.
    pub new_tokens_hidden: u64,
    /// Prompt tokens over all requests (direct).
    pub prompt_tokens: u64,
    /// Prompt tokens of the last request (direct): everything the session sent, once.
    pub final_prompt_tokens: u64,
    /// Billed input units, direct to the provider.
    pub billed_direct: f64,
    /// The cache TTL it was priced with.
    pub cache_ttl: CacheTtl,
    /// Requests sent more than the cache TTL after the previous one (priced
    /// as cache misses, both ways).
    pub requests_after_expiry: u64,
    /// The part of `billed_direct` spent in those requests.
    pub billed_direct_expired: f64,
    /// Billed input units through `lam`.
    pub billed_lam: f64,
    /// The part of `billed_direct` for items carrying tool results.
    pub billed_direct_tool: f64,
    /// With `--budget`: cuts made and tool results cited.
    pub cuts: u64,
    /// Of `cuts`, those made at a request after the cache TTL (cold: down
    /// to the target), and those made while warm (at the budget).
    pub cuts_cold: u64,
    /// See `cuts_cold`.
    pub cuts_warm: u64,
    /// See `cuts`.
    pub citations: u64,
    /// Cited tool results the agent later needed (`CitedThenUsed`): a
    /// later recorded assistant message or tool input quotes a distinctive
    /// line of one that appears nowhere else in what lam forwarded.
    pub cited_then_used: u64,
    /// Cited tool results whose `§id` was recalled from the archive when the
    /// citation was first forwarded, and of them those whose bytes were not
    /// the tool result's exactly (a check: must read 0).
    pub cited_recalled: u64,
    /// See `cited_recalled`.
    pub cited_recall_wrong: u64,
    /// The largest prompt a request forwarded through lam (tokens, as billed here).
    pub peak_tokens: u64,
    /// Requests whose prompt through lam exceeded the budget (0 without one).
    pub over_budget: u64,
    /// Billed input through lam without the budget (set by the caller that replays both).
    pub billed_no_budget: f64,
    /// The largest prompt through lam without the budget (see `billed_no_budget`).
    pub peak_no_budget: u64,
    /// US dollars direct, through lam, and through lam without the budget
    /// (set by the caller that replays both), at each request's model's
    /// prices ([`crate::bill::prices`]).
    pub usd_direct: f64,
    /// See `usd_direct`.
    pub usd_lam: f64,
    /// See `usd_direct`.
    pub usd_no_budget: f64,
    /// What getting back the cited outputs the agent later used would add
    /// to the bill through lam (`priced`: one recall per `cited_then_used`).
    #[serde(skip)]
    pub recalls: Recalls,
    /// Each request, direct and through lam.
    pub per_request: Vec<RequestRow>,
    /// The tool calls whose outputs lam kept out of the context most, by
    /// tokens (at most [`TOP_CALLS`], the most first).
    pub top_calls: Vec<CallSaving>,
    /// Every `§id` what lam forwarded for a tool result names (a stub's, a
    /// citation's), each once, in order of first appearance.
    pub ids: Vec<String>,
    /// How the models not in the price table were priced, each once.
    pub price_notes: Vec<String>,
    /// Milliseconds the proxy took per request (parse, match, archive, admit, write).
    pub added_ms: Vec<f64>,
    /// Milliseconds of it spent admitting the request's new observations.
    pub admit_ms: Vec<f64>,
}

impl SessionReport {
    /// Removal of tool-result tokens.
    pub fn removal(&self) -> f64 {
        lam_operator::removal(self.tool_tokens_in, self.tool_tokens_out)
    }

    /// Share of the session's prompt (sent once) that is tool results.
    pub fn tool_share(&self) -> f64 {
        if self.final_prompt_tokens == 0 { 0.0 } else { (self.tool_tokens_in as f64 / self.final_prompt_tokens as f64).min(1.0) }
    }

    /// Share of the direct bill paid for items carrying tool results.
    pub fn tool_bill_share(&self) -> f64 {
        if self.billed_direct == 0.0 { 0.0 } else { self.billed_direct_tool / self.billed_direct }
    }

    /// Share of the direct bill spent in requests after the cache expired.
    pub fn expired_share(&self) -> f64 {
        if self.billed_direct == 0.0 { 0.0 } else { self.billed_direct_expired / self.billed_direct }
    }

    /// Billed input through `lam` over direct.
    pub fn billed_ratio(&self) -> f64 {
        if self.billed_direct == 0.0 { 1.0 } else { self.billed_lam / self.billed_direct }
    }

    /// Billed input through `lam`, the recalls of cited outputs included, over direct: the headline.
    pub fn billed_ratio_with_recalls(&self) -> f64 {
        if self.billed_direct == 0.0 { 1.0 } else { (self.billed_lam + self.recalls.billed) / self.billed_direct }
    }

    /// Dollars through `lam`, the recalls included.
    pub fn usd_lam_with_recalls(&self) -> f64 {
        self.usd_lam + self.recalls.usd
    }

    /// Add another session (totals).
    pub fn absorb(&mut self, o: &SessionReport) {
        self.requests += o.requests;
        self.proxy_sessions += o.proxy_sessions;
        self.tool_results += o.tool_results;
        self.admitted += o.admitted;
        self.tool_tokens_in += o.tool_tokens_in;
        self.tool_tokens_out += o.tool_tokens_out;
        self.earlier_changed += o.earlier_changed;
        self.new_lines += o.new_lines;
        self.new_lines_hidden += o.new_lines_hidden;
        self.new_tokens_hidden += o.new_tokens_hidden;
        self.prompt_tokens += o.prompt_tokens;
        self.final_prompt_tokens += o.final_prompt_tokens;
        self.billed_direct += o.billed_direct;
        self.requests_after_expiry += o.requests_after_expiry;
        self.billed_direct_expired += o.billed_direct_expired;
        self.billed_lam += o.billed_lam;
        self.billed_direct_tool += o.billed_direct_tool;
        self.cuts += o.cuts;
        self.cuts_cold += o.cuts_cold;
        self.cuts_warm += o.cuts_warm;
        self.citations += o.citations;
        self.cited_then_used += o.cited_then_used;
        self.cited_recalled += o.cited_recalled;
        self.cited_recall_wrong += o.cited_recall_wrong;
        self.peak_tokens = self.peak_tokens.max(o.peak_tokens);
        self.over_budget += o.over_budget;
        self.billed_no_budget += o.billed_no_budget;
        self.peak_no_budget = self.peak_no_budget.max(o.peak_no_budget);
        self.usd_direct += o.usd_direct;
        self.usd_lam += o.usd_lam;
        self.usd_no_budget += o.usd_no_budget;
        self.recalls.count += o.recalls.count;
        self.recalls.billed += o.recalls.billed;
        self.recalls.usd += o.recalls.usd;
        for n in &o.price_notes {
            if !self.price_notes.contains(n) {
                self.price_notes.push(n.clone());
            }
        }
        self.added_ms.extend_from_slice(&o.added_ms);
        self.admit_ms.extend_from_slice(&o.admit_ms);
    }
}

/// How many of a session's calls [`SessionReport::top_calls`] names.
pub const TOP_CALLS: usize = 10;

/// One tool call's output and what lam kept of it out of the context: at
/// its first forwarding (a stub of lines the model had seen) or later (a
/// budget's citation: the whole output, less the citation).
#[derive(Debug, Clone, Default, Serialize)]
pub struct CallSaving {
    /// The call (`name(arguments)`, at most 120 characters).
    pub action: String,
    /// Tokens of its output.
    pub tokens: u64,
    /// Tokens kept out: the output's less what lam last forwarded for it.
    pub kept_out: u64,
    /// Whether a budget's cut cited it.
    pub cited: bool,
    /// The `§id` lam's text for it names (its own when cited; the earlier
    /// observation a stub points to), if any.
    pub id: Option<String>,
}

/// The calls whose outputs lam kept out most (`first`: what was first
/// forwarded for each; `cited`: each citation's text, in order).
fn top_calls(calls: &[Call], first: &[String], cited: &[(usize, String)], counter: &dyn TokenCounter) -> Vec<CallSaving> {
    let citation = |k: usize| cited.iter().find(|(i, _)| *i == k).map(|(_, c)| c);
    let mut out: Vec<CallSaving> = calls
        .iter()
        .zip(first)
        .enumerate()
        .map(|(k, (c, f))| {
            let action = format!("{}({})", c.name, c.arguments);
            let tokens = counter.count(c.output.as_bytes()) as u64;
            let cited = citation(k);
            let last = cited.unwrap_or(f);
            let kept_out = tokens.saturating_sub(counter.count(last.as_bytes()) as u64);
            let id = section_ids(last).next().map(str::to_string);
            CallSaving { action: action.chars().take(120).collect(), tokens, kept_out, cited: cited.is_some(), id }
        })
        .filter(|s| s.kept_out > 0)
        .collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.kept_out));
    out.truncate(TOP_CALLS);
    out
}

/// The `q`-quantile (0..=1) of `xs` (nearest rank; 0 when empty).
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

/// The conversation items of a body (raw JSON each) and its preamble's bytes.
fn split(api: lam_core::wire::Api, body: &[u8]) -> (Vec<Box<serde_json::value::RawValue>>, Vec<u8>) {
    let m = crate::json::Members::parse(body).expect("replay bodies are objects");
    let list = m.raw(api.list_field()).unwrap_or("[]");
    let items = serde_json::from_str(list).unwrap_or_default();
    let mut pre = Vec::new();
    for f in api.preamble_fields().iter().chain(&["tools"]) {
        pre.extend_from_slice(m.raw(f).unwrap_or("").as_bytes());
    }
    (items, pre)
}

/// Replay one session through `proxy` (sequentially: the proxy's counters
/// before and after are this session's). A request sent more than `ttl`
/// after the previous one (the calls' times; the first request, the task
/// alone, has none) is priced as a cache miss both ways.
pub fn replay(
    proxy: &Proxy,
    agent: Agent,
    session: &str,
    task: &str,
    calls: &[Call],
    (pricing, ttl): (Pricing, CacheTtl),
    counter: &dyn TokenCounter,
) -> SessionReport {
    let api = agent.api();
    let before = proxy.stats();
    let (mut direct, mut lam) = (Bill::default(), Bill::default());
    let sent = calls.iter().filter(|c| !c.output.is_empty()).count() as u64;
    let mut r = SessionReport { session: session.to_string(), tool_results: sent, cache_ttl: ttl, ..Default::default() };
    let mut admitted_s = totals(&before).1;
    // What was forwarded for each tool result the first time: a cut later
    // cites only results the model has answered, so this is what it read.
    let mut first: Vec<String> = Vec::new();
    // When each request was sent: the task's is not recorded.
    let times = std::iter::once(None).chain(calls.iter().map(|c| c.time));
    let mut last_time = None;
    let mut used = CitedThenUsed::new(calls);
    let mut recalled = vec![false; calls.len()];
    // Each cited result and its citation's text when first forwarded.
    let mut cited: Vec<(usize, String)> = Vec::new();
    let (mut usd, mut model) = (Vec::new(), None);
    let hour = ttl.0.is_some_and(|s| s > 300);
    let mut cuts = before.total().cuts;
    for (q, (body, time)) in requests(agent, task, calls).into_iter().zip(times).enumerate() {
        let cold = ttl.expired(last_time, time);
        last_time = time.or(last_time);
        let t = Instant::now();
        // The proxy's cuts follow the same timestamps and TTL.
        let out = proxy.rewrite_at(api, None, &body, crate::proxy::Arrival { at_ms: time, ttl: Some(ttl) });
        let shown = forwarded_results(agent, &out.body);
        used.answer(q, &shown, &out.body);
        cited.extend(recall_cited(proxy, calls, &shown, &mut recalled, &mut r));
        first.extend(shown.into_iter().skip(first.len()));
        r.added_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let stats = proxy.stats();
        let now = totals(&stats).1;
        r.admit_ms.push((now - admitted_s) * 1e3);
        admitted_s = now;
        let mut billed = [0.0; 2];
        for ((bill, b), billed) in [(&mut direct, &body), (&mut lam, &out.body)].into_iter().zip(&mut billed) {
            let (items, pre) = split(api, b);
            let raws: Vec<&[u8]> = items.iter().map(|x| x.get().as_bytes()).collect();
            if cold {
                bill.expire();
            }
            *billed = bill.add(api, &raws, counter.count(&pre) as u64, pricing, counter);
        }
        if cold {
            r.requests_after_expiry += 1;
            r.billed_direct_expired += billed[0];
        }
        // `--budget`, else the default for the request's model.
        let budget = crate::budget::default::budget_of(proxy.config(), &body).map(|b| b.tokens);
        r.over_budget += u64::from(budget.is_some_and(|b| lam.last > b));
        r.requests += 1;
        // In dollars, by the model that answers it (the transcript's, else the request's).
        model = calls.get(q).and_then(|c| c.model.clone()).or(model).or_else(|| crate::request::model_of(&body));
        let priced = proxy.prices().price(model.as_deref(), api);
        if let Some(n) = priced.note(&proxy.prices().date).filter(|n| !r.price_notes.contains(n)) {
            r.price_notes.push(n);
        }
        let (direct_usd, lam_usd) = (direct.last_usd(&priced, hour), lam.last_usd(&priced, hour));
        (r.usd_direct, r.usd_lam) = (r.usd_direct + direct_usd, r.usd_lam + lam_usd);
        let made = stats.total().cuts - std::mem::replace(&mut cuts, stats.total().cuts);
        r.per_request.push(RequestRow {
            model: model.clone().unwrap_or_else(|| priced.entry.model.clone()),
            direct_tokens: direct.last,
            lam_tokens: lam.last,
            direct_billed: billed[0],
            lam_billed: billed[1],
            direct_usd,
            lam_usd,
            cold,
            cuts: made,
            budget,
        });
        usd.push(priced.price(lam.last));
    }
    let after = proxy.stats();
    r.proxy_sessions = after.sessions_created - before.sessions_created;
    let (t0, t1) = (totals(&before).0, totals(&after).0);
    r.admitted = t1[0] - t0[0];
    r.tool_tokens_in = t1[1] - t0[1];
    r.tool_tokens_out = t1[2] - t0[2];
    r.earlier_changed = lam.changed;
    r.cited_then_used = used.count();
    let events: Vec<(usize, u64)> = used.events().map(|(k, q)| (q, counter.count(calls[k].output.as_bytes()) as u64)).collect();
    r.recalls = priced::recalls(&events, &r.per_request, &usd, (pricing.read, pricing.write), hour);
    hidden_lines(&mut r, calls, &first, counter);
    r.ids = named_ids(first.iter().chain(cited.iter().map(|(_, c)| c)));
    r.top_calls = top_calls(calls, &first, &cited, counter);
    let (b, a) = (before.total(), after.total());
    (r.cuts, r.citations) = (a.cuts - b.cuts, a.citations - b.citations);
    (r.cuts_cold, r.cuts_warm) = (a.cuts_cold - b.cuts_cold, a.cuts_warm - b.cuts_warm);
    r.peak_tokens = lam.peak;
    r.prompt_tokens = direct.prompt;
    r.final_prompt_tokens = direct.last;
    r.billed_direct = direct.billed;
    r.billed_lam = lam.billed;
    r.billed_direct_tool = direct.billed_tool;
    r
}

/// Recall each tool result forwarded as a citation for the first time by
/// the citation's `§id` and compare the bytes with the result's (counted in
/// `r`: `cited_recalled`, `cited_recall_wrong`; an id the archive cannot
/// answer counts as wrong).
fn recall_cited(proxy: &Proxy, calls: &[Call], shown: &[String], done: &mut [bool], r: &mut SessionReport) -> Vec<(usize, String)> {
    let mut texts = Vec::new();
    for (k, s) in shown.iter().enumerate().take(calls.len()) {
        if done[k] || !s.starts_with(crate::budget::CITED_LEAD) {
            continue;
        }
        done[k] = true;
        let id = section_ids(s).next();
        let exact = id.and_then(|id| proxy.recall(id).ok()).is_some_and(|b| b == calls[k].output.as_bytes());
        r.cited_recalled += 1;
        r.cited_recall_wrong += u64::from(!exact);
        texts.push((k, s.clone()));
    }
    texts
}

/// The `§id`s a text names (`§` and at least 4 lowercase hex digits).
fn section_ids(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices('§').filter_map(|(at, _)| {
        let rest = &text[at + '§'.len_utf8()..];
        let end = rest.find(|c: char| !matches!(c, '0'..='9' | 'a'..='f')).unwrap_or(rest.len());
        (end >= 4).then(|| &rest[..end])
    })
}

/// The `§id`s `texts` name, each once, in order.
fn named_ids<'t>(texts: impl Iterator<Item = &'t String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    texts.flat_map(|t| section_ids(t)).filter(|id| seen.insert(*id)).map(str::to_string).collect()
}

/// What a budget's cuts took away that the agent later needed, over one
/// replayed session: the cited tool results it then used.
///
/// A tool result counts when, after the first request that forwards it as
/// a citation ([`crate::budget::CITED_LEAD`]), the agent's next recorded turn (the
/// call's thought and its tool input) quotes one of its distinctive lines
/// that the request the agent answered does not hold anywhere else (every
/// string of the forwarded body, JSON strings inside strings read too: a
/// citation's head and tail previews, the other results, the agent's own
/// earlier turns). A distinctive line: a line of the result, less a line
/// number prefix (Claude Code's `   12→`, `cat -n`'s `12<tab>`) and
/// surrounding white space, with at least [`CitedThenUsed::MIN_CHARS`]
/// non-space characters; quoted: it occurs, as a substring, in one of the
/// turn's texts. Each result is counted once.
pub(crate) struct CitedThenUsed<'c> {
    calls: &'c [Call],
    /// When each result was first forwarded cited (request index).
    cited: Vec<Option<usize>>,
    /// When each result was first used (the request the agent answered quoting it).
    used: Vec<Option<usize>>,
    /// Each result's distinctive lines, read when first cited.
    lines: Vec<Vec<String>>,
}

impl<'c> CitedThenUsed<'c> {
    /// Non-space characters a line needs to be distinctive.
    pub(crate) const MIN_CHARS: usize = 20;

    pub(crate) fn new(calls: &'c [Call]) -> Self {
        let n = calls.len();
        Self { calls, cited: vec![None; n], used: vec![None; n], lines: vec![Vec::new(); n] }
    }

    /// Request `q` (the task and `calls[..q]`) was forwarded as `body`, its
    /// results shown as `shown`; the agent answered it with `calls[q]`.
    pub(crate) fn answer(&mut self, q: usize, shown: &[String], body: &[u8]) {
        for (k, s) in shown.iter().enumerate().take(self.calls.len()) {
            if self.cited[k].is_none() && s.starts_with(crate::budget::CITED_LEAD) {
                self.cited[k] = Some(q);
                self.lines[k] = distinctive_lines(&self.calls[k].output);
            }
        }
        let Some(next) = self.calls.get(q) else { return };
        let said = turn_texts(next);
        let windows: std::collections::HashSet<&[u8]> = said.iter().flat_map(|t| t.as_bytes().windows(Self::MIN_CHARS)).collect();
        let mut forwarded: Option<String> = None;
        for k in 0..self.calls.len() {
            if self.used[k].is_some() || self.cited[k].is_none() {
                continue;
            }
            let quoted = |l: &&String| windows.contains(&l.as_bytes()[..Self::MIN_CHARS]) && said.iter().any(|t| t.contains(l.as_str()));
            let quoted: Vec<&String> = self.lines[k].iter().filter(quoted).collect();
            if quoted.is_empty() {
                continue;
            }
            let seen = forwarded.get_or_insert_with(|| body_text(body));
            if quoted.iter().any(|l| !seen.contains(l.as_str())) {
                self.used[k] = Some(q);
            }
        }
    }

    /// Results counted.
    pub(crate) fn count(&self) -> u64 {
        self.used.iter().flatten().count() as u64
    }

    /// Each result counted and the request the agent answered quoting it: `(result, request)`.
    pub(crate) fn events(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.used.iter().enumerate().filter_map(|(k, q)| q.map(|q| (k, q)))
    }
}

/// The distinctive lines of a tool result ([`CitedThenUsed`]), each once.
pub(crate) fn distinctive_lines(output: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in output.lines() {
        let t = line.trim_start();
        let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let t = match digits {
            0 => t,
            d => t[d..].strip_prefix('→').or_else(|| t[d..].strip_prefix('\t')).unwrap_or(t),
        };
        let t = t.trim();
        if t.chars().filter(|c| !c.is_whitespace()).count() >= CitedThenUsed::MIN_CHARS && !out.iter().any(|l| l == t) {
            out.push(t.to_string());
        }
    }
    out
}

/// What the agent wrote in a recorded turn: its thought, and every string
/// of its tool input (the raw arguments when they are no JSON).
fn turn_texts(c: &Call) -> Vec<String> {
    let mut out = vec![c.thought.clone()];
    match serde_json::from_str::<Value>(&c.arguments) {
        Ok(v) => strings(&v, &mut out),
        Err(_) => out.push(c.arguments.clone()),
    }
    out
}

/// Every string of a forwarded body, one per line (JSON held in a string,
/// such as Codex's `arguments`, read too).
fn body_text(body: &[u8]) -> String {
    let mut all = Vec::new();
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        strings(&v, &mut all);
    }
    all.join("\n")
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            let t = s.trim_start();
            if (t.starts_with('{') || t.starts_with('['))
                && let Ok(inner) = serde_json::from_str::<Value>(t)
            {
                strings(&inner, out);
            }
            out.push(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Count the new lines of `calls`' outputs that what was first forwarded
/// for each (`shown`, in order) does not show.
fn hidden_lines(r: &mut SessionReport, calls: &[Call], shown: &[String], counter: &dyn TokenCounter) {
    let mut seen = lam_core::newlines::NewLines::new();
    for (c, f) in calls.iter().zip(shown.iter().map(String::as_str).chain(std::iter::repeat(""))) {
        let o = seen.observe(c.output.as_bytes(), f.as_bytes());
        r.new_lines += o.new as u64;
        r.new_lines_hidden += o.hidden.len() as u64;
        r.new_tokens_hidden += o.hidden.iter().map(|l| counter.count(&[l.as_slice(), b"\n"].concat()) as u64).sum::<u64>();
    }
}

/// Observations, tokens in, tokens out, and admit seconds over every session (evicted included).
fn totals(s: &crate::stats::Stats) -> ([u64; 3], f64) {
    let t = s.total();
    ([t.observations, t.tokens_in, t.tokens_out], t.admit_seconds)
}
