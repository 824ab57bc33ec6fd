//! Any bytes as a Claude Code transcript: as a `.jsonl` file (detected by its
//! first line), after a Claude Code first line (so the fuzzer spends its time
//! inside the reader), and given to the reader directly.
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;

const HEAD: &[u8] = br#"{"type":"user","sessionId":"fuzz","uuid":"u0","message":{"role":"user","content":"task"}}"#;

fuzz_target!(|data: &[u8]| {
    common::read_lines(data, HEAD, lam_trajectory::Format::Agent(lam_trajectory::agents::Agent::ClaudeCode), lam_trajectory::agents::claude_code::read);
});
