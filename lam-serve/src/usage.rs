//! The upstream's own count of a request's input, read from the `usage` of
//! its answer as it streams back, and the calibration it gives a budget.
//!
//! Anthropic reports `input_tokens` without the cached prefix, which it
//! reports apart (`cache_read_input_tokens`, `cache_creation_input_tokens`):
//! the input is their sum. OpenAI Responses reports `input_tokens`, Chat
//! Completions `prompt_tokens`, both with the cached part included.

use crate::api::Api;
use crate::engine::lock;
use crate::registry::Handle;
use std::sync::Arc;

/// The fields read, by API.
fn fields(api: Api) -> &'static [&'static str] {
    match api {
        Api::Messages => &["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"],
        Api::Responses => &["input_tokens"],
        Api::ChatCompletions => &["prompt_tokens"],
    }
}

/// Reads `"FIELD": N` out of an answer streamed in chunks (JSON or SSE):
/// the largest value of each field (Anthropic repeats its counts in later
/// events; OpenAI's `response.created` carries none).
#[derive(Debug)]
pub(crate) struct Scan {
    api: Api,
    seen: Vec<u64>,
    /// The end of the previous chunk (a field may straddle two).
    carry: Vec<u8>,
}

impl Scan {
    pub(crate) fn new(api: Api) -> Self {
        Self { api, seen: vec![0; fields(api).len()], carry: Vec::new() }
    }

    /// Read one chunk.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        for (k, f) in fields(self.api).iter().enumerate() {
            let pat = format!("\"{f}\"");
            let mut at = 0;
            while let Some(i) = memchr::memmem::find(&buf[at..], pat.as_bytes()) {
                let rest = &buf[at + i + pat.len()..];
                let digits: Vec<u8> = rest.iter().skip_while(|b| b" \t:".contains(b)).take_while(|b| b.is_ascii_digit()).copied().collect();
                if let Some(n) = std::str::from_utf8(&digits).ok().and_then(|d| d.parse::<u64>().ok()) {
                    self.seen[k] = self.seen[k].max(n);
                }
                at += i + 1;
            }
        }
        let keep = buf.len().min(64);
        self.carry = buf[buf.len() - keep..].to_vec();
    }

    /// The input the upstream counted, when the answer said.
    pub(crate) fn input(&self) -> Option<u64> {
        let total: u64 = self.seen.iter().sum();
        (total > 0).then_some(total)
    }
}

/// Where an answer's count goes: the conversation and what lam counted for
/// the request it answers.
#[derive(Debug, Clone)]
pub(crate) struct Sink {
    pub handle: Arc<Handle>,
    pub local: u64,
    pub api: Api,
}

impl Sink {
    /// The upstream counted `upstream` tokens for a request lam counted as
    /// `local`: note it, and raise the conversation's calibration when the
    /// upstream counts more.
    pub(crate) fn report(&self, upstream: u64) {
        let mut st = lock(&self.handle.stats);
        st.upstream_input_tokens = upstream;
        if self.local > 0 {
            st.calibration = st.calibration.max(factor(upstream, self.local));
        }
    }
}

/// Upstream tokens per local token, rounded up to 1/32, at least 1: a
/// budget is only ever tightened by what the upstream counts.
pub(crate) fn factor(upstream: u64, local: u64) -> f64 {
    let k = upstream as f64 / local.max(1) as f64;
    ((k * 32.0).ceil() / 32.0).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_across_chunks_per_api() {
        let sse = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":3000,\"cache_read_input_tokens\":40000,\"output_tokens\":1}}}\n\n";
        let mut s = Scan::new(Api::Messages);
        for c in sse.chunks(7) {
            s.feed(c);
        }
        assert_eq!(s.input(), Some(43012));
        let mut s = Scan::new(Api::Responses);
        s.feed(br#"{"type":"response.created","response":{"usage":null}}"#);
        assert_eq!(s.input(), None);
        s.feed(br#"{"type":"response.completed","response":{"usage":{"input_tokens": 5100,"input_tokens_details":{"cached_tokens":4000},"output_tokens":9}}}"#);
        assert_eq!(s.input(), Some(5100));
        let mut s = Scan::new(Api::ChatCompletions);
        s.feed(br#"{"usage":{"prompt_tokens":77,"completion_tokens":5}}"#);
        assert_eq!(s.input(), Some(77));
        assert_eq!((factor(1000, 1000), factor(900, 1000), factor(1100, 1000)), (1.0, 1.0, 1.125));
    }
}
