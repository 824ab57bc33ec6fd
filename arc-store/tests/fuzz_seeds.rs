//! Every input under `fuzz/seeds/segment/` (among them each input the
//! `segment` fuzz target once failed on) goes through `inspect_segment` with
//! the target's checks, so a fixed finding stays fixed without a fuzzer.

use arc_store::{DamageKind, format, inspect_segment};
use std::path::Path;

fn check(name: &str, data: &[u8]) {
    for last in [false, true] {
        let Ok(r) = inspect_segment(data, 1, last) else { continue };
        let mut spans: Vec<(u64, u64, bool)> = r.records.iter().map(|&(o, l)| (o, l, false)).collect();
        spans.extend(r.damage.iter().map(|d| (d.offset, d.len, d.kind == DamageKind::TornTail)));
        spans.sort_unstable();
        let good = data.len() >= format::HEADER_LEN && format::check_header(&data[..format::HEADER_LEN], 1).is_ok();
        let mut at = if good { format::HEADER_LEN as u64 } else { 0 };
        for &(o, l, torn) in &spans {
            assert_eq!(o, at, "{name}: gap or overlap at {at}");
            assert!(!torn || (last && o + l == data.len() as u64), "{name}: misplaced torn tail");
            at = o + l;
        }
        assert_eq!(at, data.len() as u64, "{name}: bytes unaccounted for");
    }
}

#[test]
fn fuzz_seeds_and_past_findings() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/segment");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        check(&p.display().to_string(), &data);
        if p.file_name().unwrap().to_str().unwrap().starts_with("valid") {
            let r = inspect_segment(&data, 1, true).unwrap();
            assert!(r.damage.is_empty() && !r.records.is_empty(), "{}: {:?}", p.display(), r.damage);
        }
        n += 1;
    }
    assert!(n >= 2, "no seeds in {}", dir.display());
}
