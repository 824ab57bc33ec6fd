//! Any bytes as a Claude Code transcript: as a `.jsonl` file (detected by its
//! first line), after a Claude Code first line (so the fuzzer spends its time
//! inside the reader), and given to the reader directly.
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;

const HEAD: &[u8] = br#"{"type":"user","sessionId":"fuzz","uuid":"u0","message":{"role":"user","content":"task"}}"#;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.jsonl");
    common::check(lam_trajectory::read::read_bytes(data, path), path);
    let mut framed = HEAD.to_vec();
    framed.push(b'\n');
    framed.extend_from_slice(data);
    let r = lam_trajectory::read::read_bytes(&framed, path);
    if let Ok(ts) = &r {
        assert!(ts.iter().all(|t| t.format == lam_trajectory::Format::ClaudeCode));
    }
    common::check(r, path);
    common::check(lam_trajectory::agents::read_claude_code(data, path), path);
});
