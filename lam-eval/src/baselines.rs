//! SemDeDup (Abbas et al., 2023) on the operator's own embeddings: spherical
//! k-means, then within each cluster a point is deleted when its cosine to
//! any point earlier in the cluster's order reaches the threshold.

use rayon::prelude::*;

/// splitmix64: a small, portable, seeded generator.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5EED_1A3E_u64)
    }

    /// Next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut s = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            s[i] += x[i] * y[i];
        }
    }
    let mut t: f32 = s.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        t += x * y;
    }
    t
}

/// Spherical k-means (Lloyd iterations on unit vectors, cosine assignment,
/// Forgy initialisation from `seed`). Returns each point's cluster and its
/// cosine to its centroid.
pub fn kmeans(x: &[f32], dim: usize, k: usize, seed: u64, iters: usize) -> (Vec<u32>, Vec<f32>) {
    let n = x.len() / dim;
    if n == 0 {
        return (Vec::new(), Vec::new());
    }
    let k = k.clamp(1, n);
    // Forgy: k distinct points by a partial Fisher-Yates shuffle.
    let mut rng = SplitMix::new(seed);
    let mut idx: Vec<usize> = (0..n).collect();
    for i in 0..k {
        let j = i + rng.below(n - i);
        idx.swap(i, j);
    }
    let mut cent: Vec<f32> = idx[..k].iter().flat_map(|&i| x[i * dim..(i + 1) * dim].iter().copied()).collect();
    let mut assign = vec![u32::MAX; n];
    let mut sims = vec![0.0f32; n];
    for _ in 0..iters.max(1) {
        let new: Vec<(u32, f32)> = x
            .par_chunks_exact(dim)
            .map(|v| {
                let mut best = (0u32, f32::NEG_INFINITY);
                for (c, cv) in cent.chunks_exact(dim).enumerate() {
                    let s = dot(v, cv);
                    if s > best.1 {
                        best = (c as u32, s);
                    }
                }
                best
            })
            .collect();
        let mut changed = false;
        for (i, (c, s)) in new.into_iter().enumerate() {
            changed |= assign[i] != c;
            assign[i] = c;
            sims[i] = s;
        }
        if !changed {
            break;
        }
        let mut sum = vec![0.0f64; k * dim];
        let mut count = vec![0usize; k];
        for (i, v) in x.chunks_exact(dim).enumerate() {
            let c = assign[i] as usize;
            count[c] += 1;
            for (s, &y) in sum[c * dim..(c + 1) * dim].iter_mut().zip(v) {
                *s += y as f64;
            }
        }
        for c in 0..k {
            let s = &sum[c * dim..(c + 1) * dim];
            let norm = s.iter().map(|v| v * v).sum::<f64>().sqrt();
            if count[c] == 0 || norm == 0.0 {
                // Empty cluster: re-seed at a random point.
                let p = rng.below(n);
                cent[c * dim..(c + 1) * dim].copy_from_slice(&x[p * dim..(p + 1) * dim]);
            } else {
                for (o, v) in cent[c * dim..(c + 1) * dim].iter_mut().zip(s) {
                    *o = (v / norm) as f32;
                }
            }
        }
    }
    (assign, sims)
}

/// SemDeDup's per-point score: within each cluster, members are ordered by
/// decreasing distance to the centroid (ties by index; the original's
/// "keep hard" order), and each member's score is its largest cosine to any
/// member before it (`-inf` for the first). A member is deleted at threshold
/// `t` iff its score is `>= t`.
pub fn semdedup_scores(x: &[f32], dim: usize, assign: &[u32], centroid_sim: &[f32]) -> Vec<f32> {
    let n = assign.len();
    let k = assign.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); k];
    for (i, &c) in assign.iter().enumerate() {
        members[c as usize].push(i as u32);
    }
    let per: Vec<Vec<(u32, f32)>> = members
        .into_par_iter()
        .map(|mut m| {
            m.sort_by(|&a, &b| centroid_sim[a as usize].total_cmp(&centroid_sim[b as usize]).then(a.cmp(&b)));
            let mut out = Vec::with_capacity(m.len());
            for (j, &b) in m.iter().enumerate() {
                let vb = &x[b as usize * dim..(b as usize + 1) * dim];
                let mut best = f32::NEG_INFINITY;
                for &a in &m[..j] {
                    let s = dot(&x[a as usize * dim..(a as usize + 1) * dim], vb);
                    if s > best {
                        best = s;
                    }
                }
                out.push((b, best));
            }
            out
        })
        .collect();
    let mut score = vec![f32::NEG_INFINITY; n];
    for v in per {
        for (i, s) in v {
            score[i as usize] = s;
        }
    }
    score
}

/// Jaccard similarity of two sorted id sets (1 when both are empty).
pub fn jaccard(a: &[u32], b: &[u32]) -> f64 {
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - inter;
    if union == 0 { 1.0 } else { inter as f64 / union as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmeans_separates_two_directions_and_semdedup_drops_the_copy() {
        let x = vec![1.0, 0.0, 0.999, 0.0447, 0.0, 1.0, 0.0, 1.0];
        let (a, s) = kmeans(&x, 2, 2, 7, 20);
        assert_eq!(a[0], a[1]);
        assert_eq!(a[2], a[3]);
        assert_ne!(a[0], a[2]);
        let score = semdedup_scores(&x, 2, &a, &s);
        let dropped: Vec<usize> = (0..4).filter(|&i| score[i] >= 0.995).collect();
        assert_eq!(dropped.len(), 2);
        assert_eq!(jaccard(&[1, 2, 3], &[2, 3, 4]), 0.5);
    }
}
