//! When a cut is made: at a request that finds the provider's prompt
//! cache cold, down to the target whenever the input is above it; while
//! it is warm, at the budget, and only when the cut pays back its re-write
//! ([`pays_back`], [`PAYBACK_REQUESTS`]; the rule is written out in
//! [`crate::budget`]). Here too: the prompt cache's TTL a request is
//! judged by ([`cache_ttl`]) and the prices a cut is weighed at
//! ([`pricing`]).

use crate::bill::{CacheTtl, Pricing};

/// A warm cut is made only when it pays back its re-write within this many
/// requests (its own included): about the requests a cut is read before the
/// cache next goes cold or the session ends, where waiting would have made
/// it free. In the 48 real Claude Code sessions of issue 54 (4,736
/// requests, about 99 a session) 1 request in 77 comes after a 5-minute
/// gap: a cut made at a random warm request is read about 40 more times
/// before either, on average.
pub(crate) const PAYBACK_REQUESTS: f64 = 40.0;

/// Whether a warm cut pays back its re-write within [`PAYBACK_REQUESTS`]
/// requests: `input` tokens before it, `removed` by it, `before` ahead of
/// its first changed item, at `p`'s prices (the module's rule).
pub(crate) fn pays_back(input: u64, removed: u64, before: u64, p: Pricing) -> bool {
    if removed == 0 {
        return false;
    }
    let rewrite = input.saturating_sub(before).saturating_sub(removed) as f64 * (p.write - p.read).max(0.0);
    rewrite <= PAYBACK_REQUESTS * removed as f64 * p.read
}

/// The prices a cut is weighed at: the provider's for `api`
/// ([`crate::bill::Bills::pricing`]), Anthropic's writes to the 1-hour
/// cache at 2x.
pub(crate) fn pricing(api: crate::api::Api, ttl: CacheTtl) -> Pricing {
    let p = crate::bill::Bills::pricing(api);
    match (api, ttl.0) {
        (crate::api::Api::Messages, Some(t)) if t > 300 => Pricing { write: 2.0, ..p },
        _ => p,
    }
}

/// The cache TTL a request is judged by: `given` (`--cache-ttl`), else the
/// longest `cache_control.ttl` the request sets (`"5m"`, `"1h"`; in the
/// preamble or on an item), else the provider's default for `api`.
pub(crate) fn cache_ttl(req: &crate::request::Parsed, given: Option<CacheTtl>) -> CacheTtl {
    if let Some(t) = given {
        return t;
    }
    let items = req.items.iter().flat_map(|it| it.annotations.iter()).map(|(_, _, v)| ttl_in(v));
    let set = items.chain(req.preamble_raws().map(ttl_in)).flatten().max();
    match (set, req.api) {
        (Some(s), _) => CacheTtl(Some(s)),
        (None, crate::api::Api::Messages) => CacheTtl::ANTHROPIC,
        (None, _) => CacheTtl::OPENAI,
    }
}

/// The longest `"ttl": "<n><s|m|h>"` in raw JSON `b`, in seconds.
fn ttl_in(b: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"ttl\"";
    let mut best = None;
    let mut from = 0;
    while let Some(k) = b[from..].windows(KEY.len()).position(|w| w == KEY) {
        from += k + KEY.len();
        let rest = b[from..].trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b":") else { continue };
        let Some(rest) = rest.trim_ascii_start().strip_prefix(b"\"") else { continue };
        let Some(end) = rest.iter().position(|&c| c == b'"') else { continue };
        let v = std::str::from_utf8(&rest[..end]).unwrap_or("");
        let (n, unit) = v.split_at(v.len().saturating_sub(1));
        let mult = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            _ => continue,
        };
        if let Ok(n) = n.parse::<u64>() {
            best = best.max(Some(n.saturating_mul(mult)));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warm rule: a cut pays back when `(P - s - R)(w - r) <= 40 R r`.
    #[test]
    fn a_warm_cut_is_made_when_it_pays_back_within_40_requests() {
        let a = Pricing::ANTHROPIC;
        // Budget 100k, cut to 50k, 20k ahead of the cut point: 30k re-written
        // at 1.15 = 34.5k once; saves 50k x 0.1 = 5k a request: k = 6.9.
        assert!(pays_back(100_000, 50_000, 20_000, a));
        // The worst case of the default target: nothing ahead, k = 11.5.
        assert!(pays_back(100_000, 50_000, 0, a));
        // A narrow target (90k): 10k removed, 90k re-written: k = 103.5.
        assert!(!pays_back(100_000, 10_000, 0, a));
        // The bound itself: 40 R r = 40 x 10k x 0.1 = 40k = (P - s - R) x 1.15.
        let keep = (40_000.0_f64 / 1.15) as u64;
        assert!(pays_back(10_000 + keep, 10_000, 0, a));
        assert!(!pays_back(10_000 + keep + 2, 10_000, 0, a));
        assert!(!pays_back(100_000, 0, 0, a), "a cut that removes nothing never pays back");
        // OpenAI: no write premium, w - r = 0.9.
        assert!(pays_back(100_000, 10_000, 75_000, Pricing::OPENAI));
        assert!(!pays_back(100_000, 10_000, 0, Pricing::OPENAI));
        // Anthropic's 1-hour writes cost 2x: the same cut may pay back at 5 minutes only.
        let hour = pricing(crate::api::Api::Messages, CacheTtl(Some(3600)));
        assert_eq!(hour, Pricing { read: 0.1, write: 2.0 });
        assert_eq!(pricing(crate::api::Api::Messages, CacheTtl(Some(300))), a);
        assert_eq!(pricing(crate::api::Api::Responses, CacheTtl(Some(3600))), Pricing::OPENAI);
        assert!(pays_back(50_000, 10_000, 10_000, a) && !pays_back(50_000, 10_000, 10_000, hour));
    }

    /// `--cache-ttl` wins; else the longest `cache_control.ttl` of the
    /// request (items and preamble); else the provider's default.
    #[test]
    fn the_ttl_is_the_flag_s_else_the_request_s_else_the_provider_s() {
        let parse = |api, body: &str| crate::request::Parsed::parse(api, body.as_bytes()).unwrap_or_else(|| panic!("{body}"));
        let plain = parse(crate::api::Api::Messages, r#"{"messages":[{"role":"user","content":"hi"}]}"#);
        assert_eq!(cache_ttl(&plain, None), CacheTtl::ANTHROPIC);
        assert_eq!(cache_ttl(&plain, Some(CacheTtl::NONE)), CacheTtl::NONE);
        let hour = r#"{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl" : "1h"}}],
            "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]}"#;
        assert_eq!(cache_ttl(&parse(crate::api::Api::Messages, hour), None), CacheTtl(Some(3600)));
        assert_eq!(cache_ttl(&parse(crate::api::Api::Messages, hour), Some(CacheTtl(Some(60)))), CacheTtl(Some(60)));
        let five = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]}"#;
        assert_eq!(cache_ttl(&parse(crate::api::Api::Messages, five), None), CacheTtl(Some(300)));
        let text = r#"{"messages":[{"role":"user","content":"the \"ttl\": \"1h\" of a text is no setting"}]}"#;
        assert_eq!(cache_ttl(&parse(crate::api::Api::Messages, text), None), CacheTtl::ANTHROPIC);
        let codex = parse(crate::api::Api::Responses, r#"{"input":[{"role":"user","content":"hi"}]}"#);
        assert_eq!(cache_ttl(&codex, None), CacheTtl::OPENAI);
        assert_eq!((ttl_in(br#"{"ttl":"90s"}"#), ttl_in(br#"{"ttl":"2d"}"#), ttl_in(br#"{"ttl":5}"#)), (Some(90), None, None));
    }
}
