//! Any bytes as a segment file: `inspect_segment` returns Ok or the
//! newer-version error, never panics, and accounts for every byte: the
//! header, the records and the damaged places tile the file exactly, in
//! order; a torn tail only in the last segment, and only at its end; every
//! record it lists decodes to exactly its length.
#![no_main]

use arc_store::{DamageKind, format, inspect_segment};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for last in [false, true] {
        let Ok(r) = inspect_segment(data, 1, last) else { continue };
        let mut spans: Vec<(u64, u64, bool)> = r.records.iter().map(|&(o, l)| (o, l, false)).collect();
        spans.extend(r.damage.iter().map(|d| (d.offset, d.len, d.kind == DamageKind::TornTail)));
        spans.sort_unstable();
        let good_header = data.len() >= format::HEADER_LEN && format::check_header(&data[..format::HEADER_LEN], 1).is_ok();
        let mut at = if good_header { format::HEADER_LEN as u64 } else { 0 };
        for &(o, l, torn) in &spans {
            assert_eq!(o, at, "gap or overlap at {at}: {spans:?}");
            assert!(l > 0 || data.is_empty(), "empty span at {o}");
            if torn {
                assert!(last, "torn tail in a segment that is not the last");
                assert_eq!(o + l, data.len() as u64, "torn tail not at the end");
                assert_eq!(r.end, o);
            }
            at = o + l;
        }
        assert_eq!(at, data.len() as u64, "bytes unaccounted for: {spans:?}");
        assert!(r.end <= data.len() as u64);
        for &(o, l) in &r.records {
            let (_, n) = format::decode(&data[o as usize..]).expect("a listed record decodes");
            assert_eq!(n as u64, l);
        }
    }
});
