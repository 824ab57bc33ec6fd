//! Any bytes as a mini-swe-agent `.traj.json` file; JSON inputs also as its
//! `messages`.
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    common::read_in(data, "fuzz.traj.json", |v| json!({"trajectory_format": "mini-swe-agent-1", "instance_id": "fuzz", "messages": v}));
});
