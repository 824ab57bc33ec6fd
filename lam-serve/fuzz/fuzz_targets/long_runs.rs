//! Long unbroken runs of every character class as one tool result: the
//! input is read as pieces `(class, length)` (one byte each, the length in
//! KiB, up to 255 KiB a piece) followed by free bytes, so a few bytes of
//! input make runs of hundreds of KiB of letters, `=`, spaces, digits,
//! base64, punctuation, non-ASCII or the free bytes repeated. Admission never
//! panics, never fails open, and what it forwards reads back to the run
//! (the same request again is forwarded byte for byte the same).
#![no_main]

use lam_serve::{Api, Proxy, ServeConfig};
use libfuzzer_sys::fuzz_target;

fn run(class: u8, n: usize, free: &[u8]) -> String {
    let cycle = |s: &str| s.chars().cycle().take(n).collect::<String>();
    match class % 8 {
        0 => cycle("abcdefghijklmnopqrstuvwxyz"),
        1 => "=".repeat(n),
        2 => " ".repeat(n),
        3 => cycle("0123456789"),
        4 => cycle("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo+/="),
        5 => cycle("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
        6 => cycle("ünïcödé中文"),
        _ => String::from_utf8_lossy(free).chars().cycle().take(n).collect(),
    }
}

fuzz_target!(|data: &[u8]| {
    let pieces = data.len().min(16) / 2;
    let free = &data[pieces * 2..];
    let text: String = data[..pieces * 2].chunks(2).map(|p| run(p[0], p[1] as usize * 1024, free)).collect();
    if text.is_empty() {
        return;
    }
    let body = serde_json::to_vec(&serde_json::json!({"model": "m", "messages": [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"cat f\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": text}]}))
    .expect("JSON");
    let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).expect("the proxy opens");
    let first = proxy.try_rewrite(Api::ChatCompletions, Some("f"), &body).expect("a body with one conversation");
    assert_eq!(proxy.stats().failed_open, 0, "admission failed open");
    let again = proxy.try_rewrite(Api::ChatCompletions, Some("f"), &body).expect("again");
    assert_eq!(first.body, again.body, "the same request is forwarded the same");
});
