//! Bounds, round trips, stream checks and the bounded fuzz of the decoder.

use lam_codec::{Bound, Codec, CodecId, Error, SzpMode, SzpReader, decode};
use lam_core::{ByteCodec, Shape};
use proptest::prelude::*;

fn szp(mode: SzpMode, bound: Bound) -> Codec {
    Codec::Szp { mode, bound }
}

fn roundtrip(c: Codec, v: &[f32], rows: usize, dim: usize) -> (Vec<u8>, Vec<f32>) {
    let mut s = Vec::new();
    c.encode(v, Shape { rows, dim }, &mut s).unwrap();
    let mut out = Vec::new();
    let shape = c.decode(&s, &mut out).unwrap();
    assert_eq!(shape, Shape { rows, dim });
    assert_eq!(out.len(), v.len());
    (s, out)
}

fn max_err(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).abs()).fold(0.0, f64::max)
}

/// Values of many magnitudes, including exact quantisation midpoints.
fn values() -> impl Strategy<Value = Vec<f32>> {
    let scale = prop_oneof![Just(1e-3f32), Just(0.05), Just(1.0), Just(300.0), Just(1e6)];
    (scale, prop::collection::vec(prop_oneof![-1.0f32..1.0, any::<i8>().prop_map(|i| i as f32 / 64.0)], 0..700))
        .prop_map(|(s, v)| v.into_iter().map(|x| x * s).collect())
}

fn mode() -> impl Strategy<Value = SzpMode> {
    prop_oneof![Just(SzpMode::Fixed), Just(SzpMode::Plain)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn szp_abs_bound_holds(v in values(), m in mode(), e in prop_oneof![Just(1.0f64/128.0), Just(1.0/256.0), 1e-4f64..0.5, 1e-6f64..1e-3]) {
        let bound = e * v.iter().fold(1e-3f64, |a, x| a.max(x.abs() as f64));
        match szp(m, Bound::Abs(bound)).encode_to(&v, v.len(), 1, &mut Vec::new()) {
            Err(Error::BoundTooSmall { .. }) => return Ok(()),
            r => { r.unwrap(); }
        }
        let (s, out) = roundtrip(szp(m, Bound::Abs(bound)), &v, v.len(), 1);
        for (i, (&x, &y)) in v.iter().zip(&out).enumerate() {
            prop_assert!((x as f64 - y as f64).abs() <= bound, "value {i}: {x} -> {y}, bound {bound}");
        }
        let h = lam_codec::Header::parse(&s).unwrap();
        prop_assert_eq!(h.bound_abs, bound);
    }

    #[test]
    fn szp_rel_bound_resolves_to_range(v in values(), m in mode(), r in prop_oneof![Just(1e-2f64), Just(1e-3), 1e-5f64..0.1]) {
        let rows = v.len() / 4;
        let v = &v[..rows * 4];
        let (s, out) = roundtrip(szp(m, Bound::Rel(r)), v, rows, 4);
        let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x as f64), b.max(x as f64)));
        let h = lam_codec::Header::parse(&s).unwrap();
        let want = if v.is_empty() { 0.0 } else { r * (hi - lo) };
        prop_assert_eq!(h.bound_abs, want);
        prop_assert!(max_err(v, &out) <= want);
        prop_assert!(h.step > 0.0 && (v.is_empty() || lo == hi || h.step <= 2.0 * want));
    }

    #[test]
    fn f16_within_half_ulp(v in prop::collection::vec(-60000f32..60000.0, 0..300)) {
        let (_, out) = roundtrip(Codec::F16, &v, v.len(), 1);
        for (&x, &y) in v.iter().zip(&out) {
            let tol = if x.abs() >= 6.103_515_6e-5 { x.abs() as f64 * 2f64.powi(-11) } else { 2f64.powi(-25) };
            prop_assert!((x as f64 - y as f64).abs() <= tol, "{x} -> {y}");
        }
    }

    #[test]
    fn int8_within_half_scale(v in prop::collection::vec(-3f32..3.0, 0..40), dim in 1usize..9) {
        let rows = v.len() / dim;
        let v = &v[..rows * dim];
        let (_, out) = roundtrip(Codec::Int8PerVector, v, rows, dim);
        for (row, orow) in v.chunks(dim).zip(out.chunks(dim)) {
            let scale = row.iter().fold(0f32, |m, x| m.max(x.abs())) as f64 / 127.0;
            prop_assert!(max_err(row, orow) <= 0.5001 * scale + 1e-30);
        }
    }

    #[test]
    fn binary_keeps_signs_and_norm(v in prop::collection::vec(-3f32..3.0, 0..60), dim in 1usize..13) {
        let rows = v.len() / dim;
        let v = &v[..rows * dim];
        let (_, out) = roundtrip(Codec::SignBinary, v, rows, dim);
        for (row, orow) in v.chunks(dim).zip(out.chunks(dim)) {
            let n = |r: &[f32]| r.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            prop_assert!((n(row) - n(orow)).abs() <= 1e-5 * n(row).max(1e-30));
            for (&x, &y) in row.iter().zip(orow) {
                prop_assert!(x == 0.0 || (x < 0.0) == (y < 0.0) || y == 0.0);
            }
        }
    }

    /// Random bytes and mutated valid streams: decoding returns Ok or Err,
    /// never panics, and output stays proportional to the input length.
    #[test]
    fn decoder_survives_garbage(
        v in prop::collection::vec(-1f32..1.0, 0..200),
        which in 0usize..6,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
        noise in prop::collection::vec(any::<u8>(), 0..300),
        refix in any::<bool>(),
    ) {
        let codecs = [Codec::F16, Codec::Int8PerVector, Codec::SignBinary,
            szp(SzpMode::Fixed, Bound::Rel(1e-2)), szp(SzpMode::Plain, Bound::Abs(1e-3)), Codec::F16];
        let mut s = Vec::new();
        if which == 5 {
            s = b"LAMC".to_vec();
            s.extend_from_slice(&noise);
        } else {
            codecs[which].encode(&v, Shape { rows: v.len(), dim: 1 }, &mut s).unwrap();
            for (i, b) in &edits {
                let i = i.index(s.len());
                s[i] ^= b | 1;
            }
            if !edits.is_empty() && refix && s.len() >= 72 {
                // Re-seal the checksums so the structural checks are reached.
                let h = xxhash_rust::xxh3::xxh3_64(&s[..56]);
                s[56..64].copy_from_slice(&h.to_le_bytes());
                let end = s.len() - 8;
                let t = xxhash_rust::xxh3::xxh3_64(&s[..end]);
                s[end..].copy_from_slice(&t.to_le_bytes());
            }
            if edits.is_empty() {
                let k = cut.index(s.len() + 1);
                s.truncate(k);
            }
        }
        let mut out = Vec::new();
        if let Ok(h) = decode(&s, &mut out) {
            prop_assert_eq!(out.len() as u64, h.rows * h.dim);
            prop_assert!(out.len() <= 64 * s.len());
        }
        if let Ok(r) = SzpReader::new(&s) {
            let mut blk = [0f32; 32];
            for b in 0..r.blocks() { r.block(b, &mut blk).unwrap(); }
        }
    }
}

#[test]
fn bound_holds_at_quantisation_midpoints() {
    // x = (k + 1/2) * 2eb exactly: the f32 reconstruction must still round inside.
    for &eb in &[1e-3f64, 1.0 / 1024.0, 0.3, 7.0] {
        let v: Vec<f32> = (-2000..2000).map(|k| ((k as f64 + 0.5) * 2.0 * eb) as f32).chain([f32::MIN_POSITIVE, -1e-40, 0.0, -0.0]).collect();
        for m in [SzpMode::Fixed, SzpMode::Plain] {
            let (_, out) = roundtrip(szp(m, Bound::Abs(eb)), &v, v.len(), 1);
            assert!(max_err(&v, &out) <= eb, "eb {eb}: {}", max_err(&v, &out));
        }
    }
}

#[test]
fn constant_and_empty_batches() {
    let v = vec![0.37f32; 100];
    let (_, out) = roundtrip(szp(SzpMode::Fixed, Bound::Rel(1e-2)), &v, 10, 10);
    assert_eq!(out, v);
    let (_, out) = roundtrip(szp(SzpMode::Plain, Bound::Rel(1e-2)), &[], 0, 384);
    assert!(out.is_empty());
    let (_, out) = roundtrip(szp(SzpMode::Plain, Bound::Abs(0.0)), &[-2.5; 7], 7, 1);
    assert_eq!(out, vec![-2.5; 7]);
}

#[test]
fn impossible_bounds_and_inputs_are_errors() {
    let v = [1e6f32, -1e6, 3.0];
    let e = szp(SzpMode::Fixed, Bound::Abs(1e-4)).encode_to(&v, 3, 1, &mut Vec::new()).unwrap_err();
    assert!(matches!(e, Error::BoundTooSmall { .. }), "{e}");
    let e = szp(SzpMode::Fixed, Bound::Abs(f64::NAN)).encode_to(&v, 3, 1, &mut Vec::new()).unwrap_err();
    assert!(matches!(e, Error::InvalidBound(_)), "{e}");
    let e = szp(SzpMode::Fixed, Bound::Rel(1e-2)).encode_to(&[1.0, f32::NAN], 2, 1, &mut Vec::new()).unwrap_err();
    assert!(matches!(e, Error::NonFinite { index: 1, .. }), "{e}");
    let e = Codec::F16.encode_to(&[1e5], 1, 1, &mut Vec::new()).unwrap_err();
    assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
    let e = Codec::F16.encode_to(&[1.0; 5], 2, 2, &mut Vec::new()).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
}

fn sample_stream() -> Vec<u8> {
    let v: Vec<f32> = (0..5000).map(|i| ((i as f32) * 0.37).sin() * 0.1).collect();
    let mut s = Vec::new();
    szp(SzpMode::Plain, Bound::Rel(1e-3)).encode_to(&v, 50, 100, &mut s).unwrap();
    s
}

#[test]
fn newer_version_and_bad_checksum_are_errors() {
    let s = sample_stream();
    let mut newer = s.clone();
    newer[4] = 2;
    assert!(matches!(decode(&newer, &mut Vec::new()), Err(Error::UnsupportedVersion { found: 2, supported: 1 })));
    let mut flipped = s.clone();
    flipped[500] ^= 0x10;
    assert!(matches!(decode(&flipped, &mut Vec::new()), Err(Error::Checksum { what: "stream" })));
    let mut hdr = s.clone();
    hdr[9] ^= 1;
    assert!(matches!(decode(&hdr, &mut Vec::new()), Err(Error::Checksum { what: "header" })));
    assert!(matches!(decode(b"nope", &mut Vec::new()), Err(Error::BadMagic)));
    assert!(decode(&s[..s.len() - 1], &mut Vec::new()).is_err());
    let mut f16 = Vec::new();
    Codec::F16.encode(&[1.0], Shape { rows: 1, dim: 1 }, &mut f16).unwrap();
    assert!(szp(SzpMode::Fixed, Bound::Rel(0.1)).decode(&f16, &mut Vec::new()).is_err());
}

#[test]
fn every_block_decodes_alone() {
    let s = sample_stream();
    let mut all = Vec::new();
    decode(&s, &mut all).unwrap();
    let r = SzpReader::new(&s).unwrap();
    assert_eq!(r.header().codec, CodecId::Szp);
    let mut blk = [0f32; 32];
    for b in 0..r.blocks() {
        let n = r.block(b, &mut blk).unwrap();
        assert_eq!(&blk[..n], &all[b * 32..b * 32 + n]);
    }
    assert!(r.block(r.blocks(), &mut blk).is_err());
}

#[test]
fn streams_are_deterministic_across_thread_counts() {
    let v: Vec<f32> = (0..200_000).map(|i| ((i as f32) * 0.0137).cos() * 0.2).collect();
    let enc = || {
        let mut s = Vec::new();
        szp(SzpMode::Fixed, Bound::Rel(1e-3)).encode_to(&v, 200_000 / 8, 8, &mut s).unwrap();
        s
    };
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(enc);
    let many = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap().install(enc);
    assert_eq!(one, many);
}

#[test]
fn gpu_types_exist_without_their_feature() {
    #[cfg(not(feature = "cuda"))]
    assert!(matches!(lam_codec::gpu::CudaSzp::new(0), Err(Error::BackendNotCompiled("cuda", _))));
    #[cfg(not(feature = "rocm"))]
    assert!(matches!(lam_codec::gpu::RocmSzp::new(0), Err(Error::BackendNotCompiled("rocm", _))));
}

/// The lam-core `ByteCodec` conformance suite, for every codec, with each
/// codec's own fidelity promise on unit vectors.
#[test]
fn every_codec_passes_the_byte_codec_conformance_suite() {
    let within = |tol: f64| {
        move |a: &[f32], b: &[f32]| {
            let e = max_err(a, b);
            if e <= tol { Ok(()) } else { Err(format!("max abs error {e} > {tol}")) }
        }
    };
    // f16: half an ulp of values below 1 in magnitude.
    lam_core::testsuite::byte_codec(&Codec::F16, within(2f64.powi(-12)));
    // int8: half a quantisation step of the per-vector scale (max |x| / 127).
    lam_core::testsuite::byte_codec(&Codec::Int8PerVector, within(0.5 / 127.0 + 1e-7));
    // binary: the sign of every coordinate survives, magnitudes do not.
    lam_core::testsuite::byte_codec(&Codec::SignBinary, |a: &[f32], b: &[f32]| {
        match a.iter().zip(b).position(|(x, y)| (*x > 0.0) != (*y > 0.0) && *x != 0.0) {
            None => Ok(()),
            Some(i) => Err(format!("sign of value {i} flipped: {} -> {}", a[i], b[i])),
        }
    });
    for mode in [SzpMode::Fixed, SzpMode::Plain] {
        lam_core::testsuite::byte_codec(&szp(mode, Bound::Abs(1e-3)), within(1e-3));
        // rel: relative to the value range of the batch (at most 2 for unit vectors).
        lam_core::testsuite::byte_codec(&szp(mode, Bound::Rel(1e-2)), within(2e-2));
    }
}
