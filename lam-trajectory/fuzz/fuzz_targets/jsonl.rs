//! Any bytes as a lam JSONL file (`docs/trajectory-format.md`).
#![no_main]

mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.jsonl");
    let r = lam_trajectory::read::read_bytes(data, path);
    // What the reader keeps of a valid file writes back and reads again to the same records.
    if let Ok(ts) = &r {
        let mut out = Vec::new();
        for t in ts {
            for rec in &t.records {
                out.extend(serde_json::to_vec(&lam_trajectory::JsonlRecord::from_record(&t.session.0, rec)).unwrap());
                out.push(b'\n');
            }
        }
        let again = lam_trajectory::read::read_bytes(&out, path).expect("lam's own JSONL reads back");
        let flat = |ts: &[lam_trajectory::Trajectory]| ts.iter().flat_map(|t| t.records.iter().map(|r| (t.session.0.clone(), r.action.clone(), r.observation.clone()))).collect::<Vec<_>>();
        assert_eq!(flat(ts), flat(&again));
    }
    common::check(r, path);
});
