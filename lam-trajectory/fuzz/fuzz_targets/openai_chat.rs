//! Any bytes as an OpenAI chat-completions message list; JSON inputs also as
//! a `messages` object.
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    common::read_in(data, "fuzz.json", |v| json!({"messages": v}));
});
