//! Any bytes as a Codex CLI rollout: as a `.jsonl` file (detected by its
//! first line), after a `session_meta` line (so the fuzzer spends its time
//! inside the reader), and given to the reader directly.
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;

const HEAD: &[u8] = br#"{"timestamp":"t","type":"session_meta","payload":{"id":"fuzz"}}"#;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.jsonl");
    common::check(lam_trajectory::read::read_bytes(data, path), path);
    let mut framed = HEAD.to_vec();
    framed.push(b'\n');
    framed.extend_from_slice(data);
    let r = lam_trajectory::read::read_bytes(&framed, path);
    if let Ok(ts) = &r {
        assert!(ts.iter().all(|t| t.format == lam_trajectory::Format::Codex));
    }
    common::check(r, path);
    common::check(lam_trajectory::agents::read_codex(data, path), path);
});
