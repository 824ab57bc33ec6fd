//! The bill: what a provider charges for a conversation's input with
//! prompt caching, request by request, sent direct and as lam forwards it
//! (the one pricing rule: the proxy's receipt for each request, its
//! budget's pay-back test, and `lam replay` all use it), and in dollars by
//! each request's model ([`prices`]).
//!
//! A request's prompt is the preamble and its items; the items it shares,
//! from the start, with the previous request of the conversation
//! (identity: bytes without annotations) are cache reads, the rest cache
//! writes (or plain input where the provider has no write premium). A
//! cached prefix lives for the provider's TTL after its last use
//! ([`CacheTtl`]): a request sent more than that after the previous one
//! reads nothing from the cache, and writes its whole prompt.

use crate::canon;
use lam_core::TokenCounter;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

pub mod prices;

/// Prompt-cache pricing, as multiples of the plain input price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pricing {
    /// Price of a cached prefix token (cache read).
    pub read: f64,
    /// Price of a token not read from the cache (cache write, or plain input).
    pub write: f64,
}

impl Pricing {
    /// Anthropic: cache writes 1.25x, reads 0.1x.
    pub const ANTHROPIC: Pricing = Pricing { read: 0.1, write: 1.25 };
    /// OpenAI: cached input 0.1x, no write premium.
    pub const OPENAI: Pricing = Pricing { read: 0.1, write: 1.0 };
    /// Google Gemini (2.5 and newer), implicit caching: cached tokens at a
    /// 90 % discount, the tokens that create the cache at the plain input
    /// price, no storage charge (Google's "Context caching overview").
    pub const GEMINI: Pricing = Pricing { read: 0.1, write: 1.0 };

    /// The pricing the provider of `api` bills with: Anthropic's for
    /// `/v1/messages`, Google's for Gemini, OpenAI's for its two routes.
    pub fn of(api: crate::api::Api) -> Pricing {
        match api {
            crate::api::Api::Messages => Pricing::ANTHROPIC,
            crate::api::Api::Gemini => Pricing::GEMINI,
            crate::api::Api::ChatCompletions | crate::api::Api::Responses => Pricing::OPENAI,
        }
    }

    /// `anthropic`, `openai`, `gemini`, or `read=R,write=W`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "anthropic" => return Ok(Self::ANTHROPIC),
            "openai" => return Ok(Self::OPENAI),
            "gemini" => return Ok(Self::GEMINI),
            _ if !s.contains('=') => return Err(format!("`{s}`: expected anthropic, openai, gemini or read=R,write=W")),
            _ => {}
        }
        let (mut read, mut write) = (None, None);
        for part in s.split(',') {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}`: expected KEY=NUMBER"))?;
            let v: f64 = v.trim().parse().map_err(|_| format!("`{part}`: not a number"))?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("`{part}`: must be a finite number >= 0"));
            }
            match k.trim() {
                "read" => read = Some(v),
                "write" => write = Some(v),
                other => return Err(format!("`{other}`: expected read or write")),
            }
        }
        match (read, write) {
            (Some(read), Some(write)) => Ok(Self { read, write }),
            _ => Err(format!("`{s}`: expected anthropic, openai, gemini or read=R,write=W")),
        }
    }
}

/// How long a provider keeps a cached prefix after its last use, in
/// seconds; `None`: forever (the cache never expires).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheTtl(pub Option<u64>);

impl CacheTtl {
    /// Anthropic's default: 5 minutes, refreshed at each use; a request may
    /// ask for 1 hour with `cache_control: {"type": "ephemeral", "ttl": "1h"}`
    /// (<https://docs.claude.com/en/docs/build-with-claude/prompt-caching>).
    pub const ANTHROPIC: CacheTtl = CacheTtl(Some(300));
    /// OpenAI's in-memory retention: cached prefixes stay active for 5 to 10
    /// minutes of inactivity, up to an hour off-peak; the documented lower
    /// bound, 5 minutes (<https://developers.openai.com/api/docs/guides/prompt-caching>;
    /// extended `prompt_cache_retention: "24h"` is not modelled).
    pub const OPENAI: CacheTtl = CacheTtl(Some(300));
    /// A cache that never expires (`lam replay`'s pricing before timestamps).
    pub const NONE: CacheTtl = CacheTtl(None);

    /// `SECONDS` (a whole number) or `none`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "none" => Ok(Self::NONE),
            t => t.parse::<u64>().map(|n| CacheTtl(Some(n))).map_err(|_| format!("`{s}`: expected SECONDS (a whole number) or none")),
        }
    }

    /// Whether a cache last used at `prev` has expired by `now` (Unix ms):
    /// more than the TTL between them. Unknown times never expire it.
    pub fn expired(self, prev: Option<i64>, now: Option<i64>) -> bool {
        match (self.0, prev, now) {
            (Some(ttl), Some(p), Some(n)) => n.saturating_sub(p) > (ttl as i64).saturating_mul(1000),
            _ => false,
        }
    }
}

/// Prompt cost of one path (direct or through lam) across a session's
/// requests: the one pricing rule, used by `lam replay` and by the proxy
/// for each request it forwards ([`Bills`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Bill {
    prev: Vec<u128>,
    /// Tokens of each item seen, and whether it carries a tool result.
    tokens: HashMap<u128, (u64, bool)>,
    /// What it billed in all, in plain-input tokens.
    pub(crate) billed: f64,
    /// The part of `billed` for items carrying tool results.
    pub(crate) billed_tool: f64,
    /// Prompt tokens over every request, of the last one, and of the largest.
    pub(crate) prompt: u64,
    /// See `prompt`.
    pub(crate) last: u64,
    /// See `prompt`.
    pub(crate) peak: u64,
    /// Earlier items whose identity changed between requests.
    pub(crate) changed: u64,
    /// The last request's prompt tokens read from the cache, and written
    /// (or plain input): what its dollars are reckoned from ([`Bill::last_usd`]).
    pub(crate) last_split: (u64, u64),
    /// The cache expired before the next request: it reads nothing.
    expired: bool,
}

impl Bill {
    /// Add one request's conversation items (raw JSON each) and preamble tokens.
    pub(crate) fn add(&mut self, api: lam_core::wire::Api, items: &[&[u8]], preamble: u64, pricing: Pricing, counter: &dyn TokenCounter) -> f64 {
        let ids: Vec<u128> = items.iter().map(|b| canon::identity_key(b, canon::parse(b).ok().as_ref())).collect();
        self.add_keyed(&ids, |i| (counter.count(items[i]) as u64, carries_tool_result(api, items[i])), preamble, pricing)
    }

    /// The prompt cache expired: the next request reads nothing from it and
    /// writes its whole prompt, preamble included (earlier items are still
    /// compared for `changed`).
    pub(crate) fn expire(&mut self) {
        self.expired = true;
    }

    /// Add one request whose items have identities `ids` (equal identity:
    /// the same item, annotations aside); `size(i)`: item `i`'s tokens and
    /// whether it carries a tool result, asked once per identity. The items
    /// it shares, from the start, with the previous request are cache reads,
    /// the rest (and the preamble, the first time or after [`Bill::expire`])
    /// writes. Returns what this request is billed, in plain-input tokens.
    pub(crate) fn add_keyed(&mut self, ids: &[u128], mut size: impl FnMut(usize) -> (u64, bool), preamble: u64, pricing: Pricing) -> f64 {
        let shared = ids.iter().zip(&self.prev).take_while(|(a, b)| a == b).count();
        let cold = std::mem::take(&mut self.expired);
        self.changed += (shared..self.prev.len().min(ids.len())).filter(|&i| ids[i] != self.prev[i]).count() as u64;
        let shared = if cold { 0 } else { shared };
        let first = self.prev.is_empty() || cold;
        let mut cached = if first { 0 } else { preamble };
        let mut fresh = if first { preamble } else { 0 };
        for (i, id) in ids.iter().enumerate() {
            let (t, tool) = *self.tokens.entry(*id).or_insert_with(|| size(i));
            let price = if i < shared { pricing.read } else { pricing.write };
            if tool {
                self.billed_tool += t as f64 * price;
            }
            if i < shared { cached += t } else { fresh += t }
        }
        self.prompt += cached + fresh;
        self.last = cached + fresh;
        self.last_split = (cached, fresh);
        self.peak = self.peak.max(self.last);
        let billed = cached as f64 * pricing.read + fresh as f64 * pricing.write;
        self.billed += billed;
        self.prev = ids.to_vec();
        billed
    }

    /// The last request in US dollars at its model's prices (`priced`; the
    /// long-prompt row where its prompt is above [`prices::LONG_PROMPT`]),
    /// cache writes at the 1-hour price when `hour`.
    pub(crate) fn last_usd(&self, priced: &prices::Priced<'_>, hour: bool) -> f64 {
        let p = priced.price(self.last);
        let write = if hour { p.write_1h } else { p.write_5m };
        (self.last_split.0 as f64 * p.read + self.last_split.1 as f64 * write) / 1e6
    }

    /// The token counts held for the items seen (identity: tokens, tool result).
    pub(crate) fn known(&self, id: u128) -> Option<(u64, bool)> {
        self.tokens.get(&id).copied()
    }

    /// An estimate of the bytes it holds.
    fn heap_bytes(&self) -> usize {
        self.prev.capacity() * 16 + self.tokens.capacity() * (std::mem::size_of::<(u128, (u64, bool))>() + 1)
    }
}

/// What one request was billed, in plain-input tokens (a token at the
/// provider's plain input price is 1; cache reads and writes are priced by
/// [`Pricing`]): sent direct, and as lam forwarded it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Receipt {
    /// What the request as the client sent it would have cost.
    pub direct: f64,
    /// What the request lam forwarded cost.
    pub lam: f64,
    /// The same in US dollars, at the request's model's prices ([`prices`]).
    pub direct_usd: f64,
    /// See `direct_usd`.
    pub lam_usd: f64,
}

impl Receipt {
    /// `direct - lam` (negative when lam's request cost more: a cut rewrites the cached prefix).
    pub fn saved(&self) -> f64 {
        self.direct - self.lam
    }
}

/// A conversation's bill both ways, request by request ([`Bill`]'s rule,
/// the same as `lam replay`'s): the proxy's receipt for each request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bills {
    direct: Bill,
    lam: Bill,
}

impl Bills {
    /// The pricing an API's provider bills with ([`Pricing::of`]).
    pub(crate) fn pricing(api: crate::api::Api) -> Pricing {
        Pricing::of(api)
    }

    /// Bill one request: its items as sent (`direct`: identity and bytes
    /// each) and as forwarded (`lam`), both after the same preamble of
    /// `preamble` tokens, priced `pricing` (in dollars at `usd`'s model
    /// prices, cache writes at the hour's price when it says so). An item
    /// forwarded as sent is counted once.
    pub(crate) fn add(
        &mut self,
        direct: (&[u128], &[&[u8]]),
        lam: (&[u128], &[&[u8]]),
        preamble: u64,
        (pricing, usd): (Pricing, (&prices::Priced<'_>, bool)),
    ) -> Receipt {
        let count = |b: &[u8]| (lam_tokens::count(b) as u64, false);
        let d = self.direct.add_keyed(direct.0, |i| count(direct.1[i]), preamble, pricing);
        let known = &self.direct;
        let l = self.lam.add_keyed(lam.0, |i| known.known(lam.0[i]).unwrap_or_else(|| count(lam.1[i])), preamble, pricing);
        let (direct_usd, lam_usd) = (self.direct.last_usd(usd.0, usd.1), self.lam.last_usd(usd.0, usd.1));
        Receipt { direct: d, lam: l, direct_usd, lam_usd }
    }

    /// An estimate of the bytes it holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.direct.heap_bytes() + self.lam.heap_bytes()
    }
}

/// Whether an item of `api` carries a tool result, as `lam_core::wire`
/// reads one ([`lam_core::wire::results`]).
pub(crate) fn carries_tool_result(api: lam_core::wire::Api, b: &[u8]) -> bool {
    let Ok(Value::Object(v)) = serde_json::from_slice::<Value>(b) else {
        return false;
    };
    !lam_core::wire::results(api, &v).is_empty()
}
