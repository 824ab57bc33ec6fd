//! Any bytes as a SWE-agent `.traj` file; JSON inputs also as its
//! `trajectory` steps and as its `history` messages.
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    common::read_in(data, "fuzz.traj", |v| json!({"trajectory": v.clone(), "history": v}));
    common::read_in(data, "fuzz.traj", |v| json!({"history": v}));
});
