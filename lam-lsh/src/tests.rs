use super::*;
use lam_core::{CandidateIndex, Decision, Threshold, normalize_in_place};
use proptest::prelude::*;

/// Small deterministic generator (tests only).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Approximately Gaussian (sum of uniforms).
    fn gauss(&mut self) -> f64 {
        (0..4).map(|_| self.next()).sum::<f64>() - 2.0
    }
    fn unit(&mut self, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|_| self.gauss() as f32).collect();
        normalize_in_place(&mut v).unwrap();
        v
    }
    /// A unit vector at chord distance about `a` from `base`.
    fn near(&mut self, base: &[f32], a: f64) -> Vec<f32> {
        let n = self.unit(base.len());
        let mut v: Vec<f32> = base.iter().zip(&n).map(|(b, x)| b + (a as f32) * x).collect();
        normalize_in_place(&mut v).unwrap();
        v
    }
}

fn dist64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum::<f64>().sqrt()
}

/// Clustered data: bases far apart, members within `near` (fraction of delta)
/// of their base, or at `far` (fraction of delta), never close to the boundary.
fn clustered(seed: u64, dim: usize, n: usize, t: Threshold) -> Vec<f32> {
    let mut rng = Rng(seed);
    let delta = t.delta();
    let bases: Vec<Vec<f32>> = (0..1 + n / 4).map(|_| rng.unit(dim)).collect();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let b = &bases[(rng.next() * bases.len() as f64) as usize];
        let a = if rng.next() < 0.6 { 0.3 * delta * rng.next() } else { 1.7 * delta };
        let v = rng.near(b, a);
        out.extend_from_slice(&v);
    }
    out
}

fn run<I: CandidateIndex>(vs: &[f32], dim: usize, t: Threshold, index: I) -> (Vec<Decision>, Greedy<I>) {
    let mut g = Greedy::new(dim, t, index);
    let ids: Vec<u32> = (0..(vs.len() / dim) as u32).collect();
    let mut out = Vec::new();
    g.decide_batch(&ids, vs, &mut out).unwrap();
    (out, g)
}

#[test]
fn conformance_banded() {
    lam_core::testsuite::candidate_index(|dim| BandedIndex::new(dim, BandParams { r: 4, rel: 0.2 }));
    lam_core::testsuite::candidate_index(|dim| BandedIndex::new(dim, BandParams { r: 8, rel: 0.2 }));
}

/// Sparse vectors (most bands quantise to zero, so buckets hold thousands of
/// ids), with and without gaps between ids: the lazy, windowed visit equals
/// `candidates`, in ascending or out-of-order insertion; and `candidates`
/// are exactly the ids sharing a band with the query.
#[test]
fn lazy_visits_equal_candidates_in_big_buckets() {
    let dim = 64;
    let mut rng = Rng(7);
    let sparse = |rng: &mut Rng| {
        let mut v = vec![0.0f32; dim];
        for _ in 0..3 {
            v[(rng.next() * dim as f64) as usize] = 0.2 + rng.next() as f32;
        }
        normalize_in_place(&mut v).unwrap();
        v
    };
    let vs: Vec<Vec<f32>> = (0..3000).map(|_| sparse(&mut rng)).collect();
    // Gaps (0) keep the big buckets as lists; dense ids (1) read them as
    // bitmaps; dense then sparse (2) builds bitmaps and drops them again.
    for (ascending, shape) in [(true, 0), (true, 1), (true, 2), (false, 0)] {
        let mut idx = BandedIndex::new(dim, BandParams { r: 4, rel: 0.2 });
        let id = |i: u32| match shape {
            0 => i * 7 + (i / 500) * 100_000,
            1 => i,
            _ => i.min(1500) + i.saturating_sub(1500) * 1000,
        };
        let mut ids: Vec<u32> = (0..vs.len() as u32).map(id).collect();
        if !ascending {
            ids.swap(10, 2000);
        }
        for (id, v) in ids.iter().zip(&vs) {
            idx.insert_batch(&[*id], v);
        }
        let mut out = Vec::new();
        let mut qd = Vec::new();
        for q in vs.iter().step_by(97) {
            idx.candidates(q, &mut out);
            idx.digests(q, &mut qd);
            let mut want: Vec<u32> = ids
                .iter()
                .zip(&vs)
                .filter(|(_, v)| {
                    let mut d = Vec::new();
                    idx.digests(v, &mut d);
                    d.iter().zip(&qd).any(|(a, b)| a == b)
                })
                .map(|(i, _)| *i)
                .collect();
            want.sort_unstable();
            assert_eq!(out, want);
            assert!(out.len() > 256, "the test must reach the windowed path");
            lam_core::testsuite::visits_in_order(&idx, q, &out);
        }
    }
}

#[test]
fn conformance_exhaustive() {
    lam_core::testsuite::candidate_index(|_| ExhaustiveIndex::new());
}

#[test]
fn conformance_l1_index() {
    lam_core::testsuite::candidate_index(|dim| L1Index::Banded(BandedIndex::new(dim, BandParams { r: 8, rel: 0.2 })));
    lam_core::testsuite::candidate_index(|_| L1Index::Exhaustive(ExhaustiveIndex::new()));
}

#[test]
fn distance_is_exact_and_portable() {
    let mut rng = Rng(7);
    for dim in [1usize, 3, 16, 17, 384, 768, 1000] {
        let a = rng.unit(dim);
        let b = rng.unit(dim);
        let d = sq_l2(&a, &b);
        assert_eq!(d.to_bits(), sq_l2_scalar(&a, &b).to_bits(), "SIMD and portable paths differ at D={dim}");
        assert!((f64::from(d) - dist64(&a, &b).powi(2)).abs() < 1e-5);
        assert_eq!(sq_l2(&a, &a), 0.0);
    }
}

/// The bounded distance is the full one, bit for bit, whenever it answers,
/// and answers whenever the distance is within the bound.
#[test]
fn bounded_distance_is_the_full_one_or_a_proof_it_is_farther() {
    let mut rng = Rng(11);
    for dim in [1usize, 17, 64, 65, 384, 1000] {
        for k in 0..200 {
            let a = rng.unit(dim);
            let b = if k % 2 == 0 { rng.unit(dim) } else { rng.near(&a, 0.05 * (k % 13) as f64) };
            let d = sq_l2(&a, &b);
            for bound in [0.0f32, 0.05, 0.1, d, d.next_down(), 1.0, 2.0, f32::INFINITY] {
                for got in [sq_l2_within(&a, &b, bound), sq_l2_scalar_within(&a, &b, bound)] {
                    match got {
                        Some(x) => assert_eq!(x.to_bits(), d.to_bits(), "D={dim} bound {bound}"),
                        None => assert!(d > bound, "D={dim}: {d} refused under bound {bound}"),
                    }
                }
                if d <= bound {
                    assert!(sq_l2_within(&a, &b, bound).is_some());
                }
            }
        }
    }
}

/// The greedy rule written out with full distances over every retained
/// vector: decisions, `delta_hat`, `min_margin` and the pairs verified.
fn reference(vs: &[f32], dim: usize, t: Threshold) -> (Vec<Decision>, L1Stats) {
    let (mut kept, mut out, mut st) = (Vec::<u32>::new(), Vec::new(), L1Stats::default());
    for (id, v) in vs.chunks_exact(dim).enumerate() {
        let (mut best, mut hit) = (None::<f32>, None);
        for &c in &kept {
            st.verified_pairs += 1;
            let d2 = sq_l2(v, &vs[c as usize * dim..][..dim]);
            best = Some(best.map_or(d2, |b| b.min(d2)));
            if d2 <= t.delta_sq_f32() {
                hit = Some((c, d2));
                break;
            }
        }
        if let Some(b) = best {
            let m = ((1.0 - f64::from(b) / 2.0) - t.cosine()).abs();
            st.min_margin = Some(st.min_margin.map_or(m, |x| x.min(m)));
        }
        out.push(match hit {
            Some((c, d2)) => {
                st.delta_hat = st.delta_hat.max(f64::from(d2).sqrt());
                Decision::Dropped { representative: c, distance: f64::from(d2).sqrt() as f32 }
            }
            None => {
                kept.push(id as u32);
                Decision::Retained
            }
        });
    }
    (out, st)
}

/// Cutting far pairs short changes no decision, no representative, and
/// neither `delta_hat` nor `min_margin` (bit for bit).
#[test]
fn cut_short_verification_reports_what_full_distances_do() {
    for (seed, c) in [(1u64, 0.95), (2, 0.99), (3, 0.9), (4, 0.8)] {
        let t = Threshold::from_cosine(c).unwrap();
        for dim in [16usize, 384] {
            let vs = clustered(seed, dim, 300, t);
            let (want, st) = reference(&vs, dim, t);
            let (got, g) = run(&vs, dim, t, ExhaustiveIndex::new());
            assert_eq!(got, want, "t={c} D={dim}");
            let gs = g.stats();
            assert_eq!(gs.delta_hat.to_bits(), st.delta_hat.to_bits());
            assert_eq!(gs.min_margin.map(f64::to_bits), st.min_margin.map(f64::to_bits), "t={c} D={dim}");
            assert_eq!(gs.verified_pairs, st.verified_pairs);
        }
    }
}

#[test]
fn defaults_follow_the_paper_grid() {
    let p = |c| BandParams::full_recall_default(Threshold::from_cosine(c).unwrap());
    assert_eq!(p(0.99), Some(BandParams { r: 8, rel: 0.2 }));
    assert_eq!(p(0.98), Some(BandParams { r: 4, rel: 0.2 }));
    assert_eq!(p(0.95), Some(BandParams { r: 4, rel: 0.2 }));
    assert_eq!(p(0.90), None);
    let q = Quantizer::new(768, 0.2);
    // sigma = 1/sqrt(768) = 0.0361 (LAM K.2); step = 2 eps.
    assert!((q.step() - 2.0 * 0.2 * 0.036_084).abs() < 1e-5);
}

#[test]
fn refuses_bad_vectors() {
    let t = Threshold::from_cosine(0.95).unwrap();
    let mut g = Greedy::new(3, t, ExhaustiveIndex::new());
    assert!(g.decide(0, &[f32::NAN, 0.0, 1.0]).is_err());
    assert!(g.decide(1, &[f32::INFINITY, 0.0, 0.0]).is_err());
    assert!(g.decide(2, &[0.0, 0.0, 0.0]).is_err());
    assert!(g.decide(3, &[1.0, 0.0]).is_err());
    assert_eq!(g.decide(4, &[1.0, 0.0, 0.0]).unwrap(), Decision::Retained);
    assert_eq!(g.stats().chunks, 1, "refused vectors are not counted");
}

#[test]
fn lowest_index_representative() {
    // 0 and 1 are farther than delta from each other; 2 lies within delta of both.
    let t = Threshold::from_cosine(0.95).unwrap();
    let s = 0.2f32;
    let c = (1.0 - s * s).sqrt();
    let vs = [c, s, 0.0, c, -s, 0.0, 1.0, 0.0, 0.0];
    let (d, g) = run(&vs, 3, t, ExhaustiveIndex::new());
    assert_eq!(d[0], Decision::Retained);
    assert_eq!(d[1], Decision::Retained, "0.4 apart > delta 0.316");
    match d[2] {
        Decision::Dropped { representative, .. } => assert_eq!(representative, 0),
        other => panic!("{other:?}"),
    }
    assert!(g.stats().delta_hat <= t.delta());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every drop has a retained representative within delta (recomputed in f64),
    /// retained chunks are pairwise farther than delta, delta_hat <= delta.
    #[test]
    fn substitution_bound_and_packing(seed in any::<u64>(), n in 1usize..120, tc in prop_oneof![Just(0.99), Just(0.95), Just(0.9), Just(0.8)], dim in prop_oneof![Just(16usize), Just(384)]) {
        let t = Threshold::from_cosine(tc).unwrap();
        let mut rng = Rng(seed);
        // Mix of clustered and arbitrary vectors, including ones near the boundary.
        let base = rng.unit(dim);
        let mut vs = Vec::new();
        for _ in 0..n {
            let v = if rng.next() < 0.5 { let a = 1.2 * t.delta() * rng.next(); rng.near(&base, a) } else { rng.unit(dim) };
            vs.extend_from_slice(&v);
        }
        let (d, g) = run(&vs, dim, t, ExhaustiveIndex::new());
        let row = |i: usize| &vs[i * dim..(i + 1) * dim];
        let mut hat: f64 = 0.0;
        for (i, dec) in d.iter().enumerate() {
            if let Decision::Dropped { representative, distance } = *dec {
                let r = representative as usize;
                prop_assert!(r < i);
                prop_assert_eq!(d[r], Decision::Retained);
                let dd = dist64(row(i), row(r));
                prop_assert!(dd <= t.delta() + 1e-6, "drop {} at {} > delta {}", i, dd, t.delta());
                prop_assert!((dd - f64::from(distance)).abs() < 1e-5);
                // No lower-index retained chunk was within delta.
                for (k, _) in d[..r].iter().enumerate().filter(|(_, x)| **x == Decision::Retained) {
                    prop_assert!(dist64(row(i), row(k)) > t.delta() - 1e-6);
                }
                hat = hat.max(dd);
            }
        }
        let kept: Vec<usize> = (0..n).filter(|&i| d[i] == Decision::Retained).collect();
        for (a, &i) in kept.iter().enumerate() {
            for &j in &kept[a + 1..] {
                prop_assert!(dist64(row(i), row(j)) > t.delta() - 1e-6, "retained {} and {} within delta", i, j);
            }
        }
        prop_assert!(g.stats().delta_hat <= t.delta());
        prop_assert!((g.stats().delta_hat - hat).abs() < 1e-5);
    }

    /// At the full-recall settings, banded index + verification decides exactly
    /// like the exhaustive index on data whose near pairs are clearly inside delta.
    #[test]
    fn banded_equals_exhaustive(seed in any::<u64>(), n in 1usize..200, tc in prop_oneof![Just(0.99), Just(0.95)]) {
        let dim = 384;
        let t = Threshold::from_cosine(tc).unwrap();
        let vs = clustered(seed, dim, n, t);
        let (ex, _) = run(&vs, dim, t, ExhaustiveIndex::new());
        let (banded, g) = run(&vs, dim, t, L1Index::default_for(dim, t));
        prop_assert!(matches!(g.index(), L1Index::Banded(_)));
        prop_assert_eq!(ex, banded);
    }

    /// Quantiser and band digests are pure functions of the vector.
    #[test]
    fn digests_are_deterministic(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let v = rng.unit(384);
        let idx = BandedIndex::new(384, BandParams { r: 4, rel: 0.2 });
        let (mut a, mut b) = (Vec::new(), Vec::new());
        idx.digests(&v, &mut a);
        idx.digests(&v.clone(), &mut b);
        prop_assert_eq!(a.len(), 96);
        prop_assert_eq!(a, b);
    }
}

#[test]
fn large_buckets_give_exactly_the_ids_sharing_a_band() {
    // Sparse vectors (most coordinates 0) share all-zero bands: buckets hold
    // most ids, and candidates take the bitmap path.
    let dim = 32;
    let p = BandParams { r: 4, rel: 0.2 };
    let mut idx = BandedIndex::new(dim, p);
    let mut all: Vec<(u32, Vec<u64>)> = Vec::new();
    let mut state = 7u64;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    for id in (0..3000u32).map(|i| i * 3) {
        let mut v = vec![0.0f32; dim];
        v[next() % dim] = 1.0;
        v[next() % dim] += 0.5;
        normalize_in_place(&mut v).unwrap();
        let mut d = Vec::new();
        idx.digests(&v, &mut d);
        idx.insert_batch(&[id], &v);
        all.push((id, d));
    }
    let mut q = vec![0.0f32; dim];
    q[3] = 1.0;
    let mut qd = Vec::new();
    idx.digests(&q, &mut qd);
    let want: Vec<u32> = all.iter().filter(|(_, d)| d.iter().zip(&qd).any(|(a, b)| a == b)).map(|(id, _)| *id).collect();
    let mut got = Vec::new();
    idx.candidates(&q, &mut got);
    assert!(want.len() > 256, "the bitmap path ran");
    assert_eq!(got, want);
}
