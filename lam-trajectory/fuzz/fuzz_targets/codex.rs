//! Any bytes as a Codex CLI rollout: as a `.jsonl` file (detected by its
//! first line), after a `session_meta` line (so the fuzzer spends its time
//! inside the reader), and given to the reader directly.
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;

const HEAD: &[u8] = br#"{"timestamp":"t","type":"session_meta","payload":{"id":"fuzz"}}"#;

fuzz_target!(|data: &[u8]| {
    common::read_lines(data, HEAD, lam_trajectory::Format::Agent(lam_trajectory::agents::Agent::Codex), lam_trajectory::agents::codex::read);
});
