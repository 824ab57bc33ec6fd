//! Any bytes: decoding returns Ok or Err, never panics, and never produces
//! more values than the stream's own length can describe.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    if let Ok(h) = lam_codec::decode(data, &mut out) {
        assert_eq!(out.len() as u64, h.rows * h.dim);
        assert!(out.len() <= 64 * data.len());
    }
    if let Ok(r) = lam_codec::SzpReader::new(data) {
        let mut blk = [0f32; 32];
        for b in 0..r.blocks() {
            r.block(b, &mut blk).unwrap();
        }
    }
});
