use super::*;

/// SemDeDup across the corpus and within each trajectory, for every seed and threshold.
pub(super) fn semdedup(preps: &[Prep], dim: usize, o: &Options, memo: &mut TokMemo, progress: &mut dyn Progress) -> Vec<BaselineRow> {
    let seeds = o.semdedup_seeds.max(1);
    let mut base = Vec::with_capacity(preps.len());
    let mut n = 0usize;
    for p in preps {
        base.push(n);
        n += p.n_chunks();
    }
    let all: Vec<f32> = preps.iter().flat_map(|p| p.vecs.iter().copied()).collect();
    let mut ths = o.semdedup_thresholds.clone();
    ths.sort_by(|a, b| b.total_cmp(a));
    ths.dedup();
    progress.stage("semdedup", 2 * seeds);
    let mut out = Vec::new();
    for scope in ["semdedup-global", "semdedup-trajectory"] {
        // scores[seed][global chunk]
        let scores: Vec<Vec<f32>> = (0..seeds)
            .map(|seed| {
                let sc = semdedup_scores((scope == "semdedup-global").then_some(&all[..]), preps, dim, n, seed, o);
                progress.inc(1);
                sc
            })
            .collect();
        for &t in &ths {
            let tf = t as f32;
            let mut aggs = Vec::new();
            let mut sets: Vec<Vec<u32>> = Vec::new();
            for sc in &scores {
                sets.push((0..n as u32).filter(|&i| sc[i as usize] >= tf).collect());
                let mut agg = Agg::default();
                for (p, &b) in preps.iter().zip(&base) {
                    let res = semdedup_residuals(p, &sc[b..], tf);
                    let rs: Vec<&[u8]> = res.iter().map(Vec::as_slice).collect();
                    let s = score(p, memo, &rs, None, &[], lam_core::stub::Recall::None);
                    agg.add(p, &s, o);
                }
                aggs.push(agg);
            }
            out.push(semdedup_row(scope, t, &aggs, &sets, o));
        }
    }
    out
}

/// One seed's SemDeDup scores of every chunk: k-means over the whole corpus
/// (`global`: every chunk's vector) or within each trajectory.
fn semdedup_scores(global: Option<&[f32]>, preps: &[Prep], dim: usize, n: usize, seed: u64, o: &Options) -> Vec<f32> {
    let cs = o.semdedup_cluster_size.max(1);
    if let Some(all) = global {
        let (a, s) = crate::baselines::kmeans(all, dim, n.div_ceil(cs), seed, o.kmeans_iters);
        return crate::baselines::semdedup_scores(all, dim, &a, &s);
    }
    let mut v = Vec::with_capacity(n);
    for p in preps {
        let (a, s) = crate::baselines::kmeans(&p.vecs, dim, p.n_chunks().div_ceil(cs), seed.wrapping_add(1_000_003), o.kmeans_iters);
        v.extend(crate::baselines::semdedup_scores(&p.vecs, dim, &a, &s));
    }
    v
}

/// A trajectory's observations without the chunks whose score (`sc`, from
/// its first chunk on) is at least `tf`.
fn semdedup_residuals(p: &Prep, sc: &[f32], tf: f32) -> Vec<Vec<u8>> {
    let mut k = 0usize;
    p.traj
        .records
        .iter()
        .zip(&p.chunks)
        .map(|(r, cs)| {
            let mut keep = Vec::with_capacity(r.observation.len());
            let mut at = 0usize;
            for c in cs {
                if sc[k] >= tf {
                    keep.extend_from_slice(&r.observation[at..c.start]);
                    at = c.end;
                }
                k += 1;
            }
            keep.extend_from_slice(&r.observation[at..]);
            keep
        })
        .collect()
}

/// The row of one SemDeDup setting: the seeds' mean, each seed's removal and
/// evidence, and how much the seeds' deletion sets agree.
fn semdedup_row(scope: &str, t: f64, aggs: &[Agg], sets: &[Vec<u32>], o: &Options) -> BaselineRow {
    let k = aggs.len() as u64;
    let mut row = mean_of(aggs).row(o);
    // Removal from the exact per-seed mean rather than rounded counts.
    let per: Vec<SettingRow> = aggs.iter().map(|a| a.row(o)).collect();
    row.removal_net = per.iter().map(|r| r.removal_net).sum::<f64>() / k as f64;
    row.removal_gross = row.removal_net;
    row.stub_cost = 0.0;
    row.stub_floor = 0.0;
    let mut js = Vec::new();
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            js.push(crate::baselines::jaccard(&sets[i], &sets[j]));
        }
    }
    let union: std::collections::BTreeSet<u32> = sets.iter().flatten().copied().collect();
    let common = union.iter().filter(|x| sets.iter().all(|s| s.binary_search(x).is_ok())).count();
    BaselineRow {
        baseline: scope.into(),
        param: Some(t),
        seed_removal: Some(per.iter().map(|r| r.removal_net).collect()),
        seed_evidence: Some(per.iter().map(|r| r.evidence_micro).collect()),
        jaccard_mean: if js.is_empty() { None } else { Some(js.iter().sum::<f64>() / js.len() as f64) },
        common_share: if union.is_empty() { None } else { Some(common as f64 / union.len() as f64) },
        row,
    }
}

/// The seeds' mean: token and line counts averaged (rounded), the rest as one seed's.
fn mean_of(aggs: &[Agg]) -> Agg {
    let mut mean = Agg::default();
    for a in aggs {
        mean.n = a.n;
        mean.tok_in = a.tok_in;
        mean.tok_gross += a.tok_gross;
        mean.tok_net += a.tok_net;
        mean.witnessed = a.witnessed;
        mean.kept += a.kept;
        mean.recovered += a.recovered;
        mean.traj_ev = a.traj_ev;
        mean.intact += a.intact;
        mean.intact_rec += a.intact_rec;
        mean.n_outcome = a.n_outcome;
        mean.resolved = a.resolved;
        mean.rsc_hits += a.rsc_hits;
        if mean.bfr_fit.is_empty() {
            mean.bfr_fit = vec![0; a.bfr_fit.len()];
            mean.size_in = vec![0; a.size_in.len()];
            mean.size_out = vec![0; a.size_out.len()];
            mean.size_n = a.size_n.clone();
        }
        for i in 0..a.bfr_fit.len() {
            mean.bfr_fit[i] += a.bfr_fit[i];
        }
        for i in 0..a.size_in.len() {
            mean.size_in[i] += a.size_in[i];
            mean.size_out[i] += a.size_out[i];
        }
    }
    let k = aggs.len() as u64;
    let div = |x: &mut u64| *x = (*x as f64 / k as f64).round() as u64;
    for x in [&mut mean.tok_gross, &mut mean.tok_net, &mut mean.kept, &mut mean.recovered, &mut mean.intact, &mut mean.intact_rec, &mut mean.rsc_hits] {
        div(x);
    }
    mean.bfr_fit.iter_mut().for_each(div);
    mean.size_in.iter_mut().for_each(div);
    mean.size_out.iter_mut().for_each(div);
    mean
}
