//! The upstream's own count of a request's input, read from the `usage` of
//! its answer as it streams back, and the calibration it gives a budget.
//!
//! What it changes is the conversation's calibration, in memory, and
//! nothing else: it reaches the forwarded bytes only as the next request's
//! terms, recorded in the ledger before any cut is made under them
//! ([`crate::budget`]'s `calibration.rs`, [`crate::budget::ledger`]).
//!
//! Anthropic reports `input_tokens` without the cached prefix, which it
//! reports apart (`cache_read_input_tokens`, `cache_creation_input_tokens`):
//! the input is their sum. OpenAI Responses reports `input_tokens`, Chat
//! Completions `prompt_tokens`, both with the cached part included. Gemini
//! reports `usageMetadata` (not `usage`): `promptTokenCount` with the cached
//! part included (`cachedContentTokenCount` is a part of it, and
//! `candidatesTokenCount` the output), in a JSON answer, in every SSE
//! chunk of a streamed one (`alt=sse`), and in every element of the JSON
//! array a stream without `alt=sse` is.

use crate::api::Api;
use crate::registry::Handle;
use crate::sync::lock;
use std::sync::Arc;

/// The fields read, by API.
fn fields(api: Api) -> &'static [&'static str] {
    match api {
        Api::Messages => &["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"],
        Api::Responses => &["input_tokens"],
        Api::ChatCompletions => &["prompt_tokens"],
        Api::Gemini => &["promptTokenCount"],
    }
}

/// The member that holds an answer's counts, by API.
fn usage_key(api: Api) -> &'static str {
    match api {
        Api::Gemini => "usageMetadata",
        _ => "usage",
    }
}

/// Reads the `usage` of an answer streamed in chunks, as JSON: each SSE
/// `data:` line, or a plain JSON body once it is complete, is parsed, and
/// every `usage` object in it read. A field counts only as a JSON integer
/// from 0 to 2^64 - 1: a string, a float, a negative number, one too large,
/// or JSON that does not parse is ignored. The largest value of each field
/// is kept (Anthropic repeats its counts in later events; OpenAI's
/// `response.created` carries none).
#[derive(Debug)]
pub(crate) struct Scan {
    api: Api,
    seen: Vec<u64>,
    /// The answer's bytes not yet read: the current SSE line, or the whole
    /// JSON body until it parses.
    pending: Vec<u8>,
    /// Whether the answer is SSE (decided by its first byte that is not
    /// white space: a plain JSON body starts with `{`, the Gemini API's
    /// JSON-array stream, `:streamGenerateContent` without `alt=sse`, with `[`).
    sse: Option<bool>,
}

/// Most bytes of one SSE line or one JSON body read for `usage`: an answer
/// larger than this goes on streaming, unread.
const MAX_PENDING: usize = 4 << 20;

impl Scan {
    pub(crate) fn new(api: Api) -> Self {
        Self { api, seen: vec![0; fields(api).len()], pending: Vec::new(), sse: None }
    }

    /// Read one chunk.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if self.sse.is_none() {
            self.sse = chunk.iter().find(|b| !b.is_ascii_whitespace()).map(|&b| b != b'{' && b != b'[');
        }
        match self.sse {
            Some(true) => self.feed_lines(chunk),
            Some(false) => self.feed_body(chunk),
            None => {}
        }
    }

    /// SSE: every complete `data:` line parsed.
    fn feed_lines(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            self.push(&rest[..i]);
            let line = std::mem::take(&mut self.pending);
            if let Some(data) = line.strip_prefix(b"data:") {
                self.read(data);
            }
            rest = &rest[i + 1..];
        }
        self.push(rest);
    }

    /// Plain JSON (an object, or an array of them): the body parsed once it
    /// ends with `}` or `]` (a complete one parses).
    fn feed_body(&mut self, chunk: &[u8]) {
        self.push(chunk);
        if matches!(self.pending.iter().rev().find(|b| !b.is_ascii_whitespace()), Some(b'}' | b']')) {
            let body = std::mem::take(&mut self.pending);
            if !self.read(&body) {
                self.pending = body;
            }
        }
    }

    /// Keep `bytes` for the current line or body, within [`MAX_PENDING`].
    fn push(&mut self, bytes: &[u8]) {
        if self.pending.len() + bytes.len() <= MAX_PENDING {
            self.pending.extend_from_slice(bytes);
        } else {
            self.pending.clear();
        }
    }

    /// Every `usage` in the JSON `text`; false when it does not parse.
    fn read(&mut self, text: &[u8]) -> bool {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(text) else { return false };
        self.usages(&v);
        true
    }

    fn usages(&mut self, v: &serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                let key = usage_key(self.api);
                if let Some(u) = o.get(key).and_then(serde_json::Value::as_object) {
                    for (k, f) in fields(self.api).iter().enumerate() {
                        if let Some(n) = u.get(*f).and_then(serde_json::Value::as_u64) {
                            self.seen[k] = self.seen[k].max(n);
                        }
                    }
                }
                o.iter().filter(|(k, _)| *k != key).for_each(|(_, x)| self.usages(x));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| self.usages(x)),
            _ => {}
        }
    }

    /// The input the upstream counted, when the answer said.
    pub(crate) fn input(&self) -> Option<u64> {
        let total = self.seen.iter().fold(0u64, |a, &b| a.saturating_add(b));
        (total > 0).then_some(total)
    }
}

/// Where an answer's count goes: the conversation and what lam counted for
/// the request it answers, and where it is recorded.
#[derive(Debug, Clone)]
pub(crate) struct Sink {
    pub handle: Arc<Handle>,
    pub local: u64,
    pub api: Api,
    pub note: Option<Note>,
}

/// Records the factor an answer's count gives in the run's ledger
/// ([`crate::budget::ledger`]), at the point of the request it answers
/// (made by the proxy, which owns the ledger).
#[derive(Clone)]
pub(crate) struct Note(pub Arc<dyn Fn(f64) + Send + Sync>);

impl std::fmt::Debug for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Note(..)")
    }
}

impl Sink {
    /// The upstream counted `upstream` tokens for a request lam counted as
    /// `local`: note it (a reported figure), and raise the conversation's
    /// calibration when the upstream counts more. Nothing else: no bytes
    /// already forwarded, no state the rewrite reads but the calibration,
    /// which the next request reads as its terms and the ledger records
    /// before any cut is made under it ([`crate::budget::Calibration`]).
    /// With a note, the factor it gives is recorded before this returns
    /// (a store write: call it off the async runtime's threads).
    pub(crate) fn report(&self, upstream: u64) {
        lock(&self.handle.stats).upstream_input_tokens = upstream;
        self.handle.calibration.raise(upstream, self.local);
        if let (Some(Note(record)), true) = (&self.note, self.local > 0) {
            record(crate::budget::factor(upstream, self.local));
        }
    }
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
    }

    /// Gemini's `usageMetadata`, in SSE chunks (`\r\n` line ends, as the
    /// Gemini API sends them) and in a JSON answer: `promptTokenCount` is
    /// the input, its cached part (`cachedContentTokenCount`) not added
    /// again, the output (`candidatesTokenCount`) not counted, and a
    /// `usage` member (another API's) ignored.
    #[test]
    fn gemini_usage_metadata_is_read() {
        let sse = b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ok\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":9012,\"cachedContentTokenCount\":8000,\"candidatesTokenCount\":1,\"totalTokenCount\":9013},\"modelVersion\":\"gemini-3.1-pro-preview\"}\r\n\r\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" done\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":9012,\"cachedContentTokenCount\":8000,\"candidatesTokenCount\":3,\"totalTokenCount\":9015}}\r\n\r\n";
        let mut s = Scan::new(Api::Gemini);
        for c in sse.chunks(11) {
            s.feed(c);
        }
        assert_eq!(s.input(), Some(9012));
        let mut s = Scan::new(Api::Gemini);
        s.feed(br#"{"candidates":[],"usageMetadata":{"promptTokenCount":321,"candidatesTokenCount":7},"usage":{"prompt_tokens":5}}"#);
        assert_eq!(s.input(), Some(321));
        let mut s = Scan::new(Api::ChatCompletions);
        s.feed(br#"{"usageMetadata":{"promptTokenCount":321}}"#);
        assert_eq!(s.input(), None, "usageMetadata is Gemini's alone");
        // `:streamGenerateContent` without `alt=sse`: one JSON array, its elements as they come.
        let array = b"[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ok\"}],\"role\":\"model\"}}],\"usageMetadata\":{\"promptTokenCount\":4321,\"candidatesTokenCount\":1}}\r\n,\r\n{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" done\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":4321,\"candidatesTokenCount\":3}}\r\n]";
        let mut s = Scan::new(Api::Gemini);
        for c in array.chunks(13) {
            s.feed(c);
        }
        assert_eq!(s.input(), Some(4321));
    }

    /// Only JSON integers count: a string, a float, a negative or too large
    /// number, a field outside `usage`, and JSON that does not parse are
    /// ignored; a count of 10^12 tightens the budget by the ceiling at most.
    #[test]
    fn usage_counts_only_as_json_integers_and_calibration_has_a_ceiling() {
        use crate::budget::Calibration;
        let read = |api: Api, chunks: &[&[u8]]| {
            let mut s = Scan::new(api);
            chunks.iter().for_each(|c| s.feed(c));
            s.input()
        };
        let chat = |usage: &str| format!(r#"{{"id":"c","usage":{usage}}}"#);
        for bad in [r#"{"prompt_tokens":"5000"}"#, r#"{"prompt_tokens":5e3}"#, r#"{"prompt_tokens":-5}"#, r#"{"prompt_tokens":99999999999999999999999}"#] {
            assert_eq!(read(Api::ChatCompletions, &[chat(bad).as_bytes()]), None, "{bad}");
        }
        assert_eq!(read(Api::ChatCompletions, &[br#"{"prompt_tokens":77,"usage":{}}"#]), None, "outside usage");
        assert_eq!(read(Api::ChatCompletions, &[br#"{"usage":{"prompt_tokens":77}"#]), None, "malformed: no closing brace");
        assert_eq!(read(Api::ChatCompletions, &[br#"{"usage":{"prompt_tokens":77}} trailing"#]), None, "malformed: trailing bytes");
        let body = chat(r#"{"prompt_tokens":77}"#);
        let (a, b) = body.as_bytes().split_at(9);
        assert_eq!(read(Api::ChatCompletions, &[a, b]), Some(77), "a body split across chunks");
        let sse: &[&[u8]] = &[b"data: {\"usage\":{\"input_tokens\":4", b"0}}\n\ndata: {\"usage\":{\"input_tokens\":\"9\"}}\n\ndata: {broken\n\n"];
        assert_eq!(read(Api::Responses, sse), Some(40));
        let c = Calibration::default();
        c.raise(1_000_000_000_000, 1537);
        assert_eq!(c.get(), 2.0, "the ceiling");
    }
}
