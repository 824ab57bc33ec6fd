//! Conformance suites every implementation of a lam-core trait runs from its
//! own tests (feature `testsuite`). They panic with a message on violation.

use crate::{CandidateIndex, Encoder, check_unit};

fn lcg_unit(seed: u64, dim: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut v: Vec<f32> = (0..dim)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect();
    crate::normalize_in_place(&mut v).expect("non-zero");
    v
}

/// Checks the [`CandidateIndex`] contract on `make(dim)` for a few dimensions:
/// candidates are ascending, unique, a subset of the inserted ids, and an
/// exact copy of an inserted vector is always proposed.
pub fn candidate_index<I: CandidateIndex>(make: impl Fn(usize) -> I) {
    for dim in [8usize, 64, 384] {
        let mut idx = make(dim);
        let mut out = vec![99];
        idx.candidates(&lcg_unit(1, dim), &mut out);
        assert!(out.is_empty(), "{}: empty index proposed {out:?}", idx.describe());
        assert_eq!(idx.len(), 0);
        let ids: Vec<u32> = (0..40).map(|i| i * 3 + 1).collect();
        let vecs: Vec<f32> = ids.iter().flat_map(|&i| lcg_unit(u64::from(i), dim)).collect();
        idx.insert_batch(&ids[..20], &vecs[..20 * dim]);
        idx.insert_batch(&ids[20..], &vecs[20 * dim..]);
        assert_eq!(idx.len(), ids.len());
        for (k, &id) in ids.iter().enumerate() {
            idx.candidates(&vecs[k * dim..(k + 1) * dim], &mut out);
            assert!(out.windows(2).all(|w| w[0] < w[1]), "{}: not ascending/unique: {out:?}", idx.describe());
            assert!(out.iter().all(|c| ids.contains(c)), "{}: unknown id in {out:?}", idx.describe());
            assert!(out.contains(&id), "{}: exact copy of {id} not proposed (dim {dim})", idx.describe());
        }
    }
}

/// Checks the [`Encoder`] contract: token spans are ordered, disjoint and in
/// bounds; embeddings are unit, deterministic, and the same in a batch as alone;
/// texts with invalid UTF-8 do not fail.
pub fn encoder<E: Encoder>(enc: &mut E) {
    let info = enc.info();
    assert!(info.dim > 0 && info.max_tokens > 0);
    let texts: Vec<&[u8]> = vec![
        b"fn main() { println!(\"hello\"); }\n",
        b"FAILED tests/test_stats.py::test_mean - AssertionError: 2 != 3",
        "unicode: \u{3b1}\u{3b2}\u{3b3} \u{1f600} caf\u{e9}".as_bytes(),
        b"caf\xe9 latin-1 \xff\xfe bytes",
        b"  x  ",
    ];
    let mut spans = Vec::new();
    for t in &texts {
        enc.token_spans(t, &mut spans).expect("token_spans");
        let mut end = 0;
        for s in &spans {
            assert!(s.start >= end && s.start < s.end && s.end <= t.len(), "bad span {s:?} in {t:?}");
            end = s.end;
        }
        assert!(!spans.is_empty(), "no tokens in {t:?}");
    }
    let dim = info.dim;
    let mut batch = vec![0.0f32; texts.len() * dim];
    enc.encode_batch(&texts, &mut batch).expect("encode_batch");
    for (i, t) in texts.iter().enumerate() {
        let row = &batch[i * dim..(i + 1) * dim];
        check_unit(row).unwrap_or_else(|e| panic!("row {i}: {e}"));
        let mut one = vec![0.0f32; dim];
        enc.encode_batch(&[t], &mut one).expect("encode one");
        // Padding and GEMM blocking may move the last bits; nothing more.
        let diff = row.iter().zip(&one).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(diff <= 1e-5, "row {i} differs between batch and single encoding by {diff}");
    }
    // The same call twice gives the same bits.
    let mut again = vec![0.0f32; texts.len() * dim];
    enc.encode_batch(&texts, &mut again).expect("encode_batch");
    assert!(batch.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "encoder is not deterministic");
    let mut empty: Vec<f32> = Vec::new();
    enc.encode_batch(&[], &mut empty).expect("empty batch");
    let mut short = vec![0.0f32; dim - 1];
    assert!(enc.encode_batch(&[texts[0]], &mut short).is_err(), "wrong output length accepted");
}
