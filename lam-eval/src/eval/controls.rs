use super::*;

/// The specificity control of the evidence metric (LAM F.3): each
/// trajectory's witnessed lines searched in the original observations of an
/// unrelated trajectory (the gold-joined trajectory half the list away, the
/// next one with a different instance id).
pub(super) fn evidence_control(preps: &[Prep]) -> Option<EvidenceControl> {
    let ev: Vec<&Prep> = preps.iter().filter(|p| p.evidence.as_ref().is_some_and(|e| !e.is_empty())).collect();
    let n = ev.len();
    if n < 2 {
        return None;
    }
    let (mut lines, mut found, mut pairs) = (0u64, 0u64, 0u64);
    for (i, p) in ev.iter().enumerate() {
        let Some(other) = (0..n).map(|d| ev[(i + n / 2 + d) % n]).find(|q| q.traj.session != p.traj.session) else { continue };
        pairs += 1;
        for l in p.evidence.as_deref().unwrap_or_default() {
            lines += 1;
            found += other.traj.records.iter().any(|r| contains(&r.observation, l)) as u64;
        }
    }
    (pairs > 0).then(|| EvidenceControl { trajectories: pairs, lines, found_in_unrelated: found, share: if lines == 0 { 0.0 } else { found as f64 / lines as f64 } })
}

pub(super) fn ecr_of(family: &str, pts: &[(String, &SettingRow)], taus: &[f64]) -> Ecr {
    let best = pts.iter().map(|p| p.1.removal_net).fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    let at = taus
        .iter()
        .map(|&tau| {
            let mut b: Option<(f64, String)> = None;
            for (name, r) in pts {
                if r.evidence_micro.is_some_and(|m| m >= tau - 1e-12) && b.as_ref().is_none_or(|x| r.removal_net > x.0) {
                    b = Some((r.removal_net, name.clone()));
                }
            }
            (tau, b.as_ref().map(|x| x.0), b.map(|x| x.1))
        })
        .collect();
    Ecr { family: family.to_string(), best, at }
}

/// Near-duplicate pairs among all LoCoMo dialogue turns at threshold `t`.
pub(super) fn locomo_control(path: &Path, enc: &mut dyn Encoder, t: f64) -> Result<Locomo> {
    let turns = evidence::read_locomo(path)?;
    let dim = enc.info().dim;
    let mut texts: Vec<&[u8]> = Vec::new();
    for tr in &turns {
        let mut c = Vec::new();
        enc.chunks(tr.text.as_bytes(), &mut c)?;
        texts.extend(c.into_iter().map(|r| &tr.text.as_bytes()[r]));
    }
    let mut v = vec![0.0f32; texts.len() * dim];
    for (t, o) in texts.chunks(64).zip(v.chunks_mut(64 * dim)) {
        enc.encode_batch(t, o)?;
    }
    let th = Threshold::from_cosine(t)?;
    let d2 = th.delta_sq_f32();
    let n = texts.len();
    use rayon::prelude::*;
    let near: u64 = (0..n)
        .into_par_iter()
        .map(|i| {
            let a = &v[i * dim..(i + 1) * dim];
            (i + 1..n).filter(|&j| lam_lsh::sq_l2(a, &v[j * dim..(j + 1) * dim]) <= d2).count() as u64
        })
        .sum();
    Ok(Locomo { source: path.display().to_string(), records: turns.len() as u64, chunks: n as u64, pairs: (n as u64) * (n as u64).saturating_sub(1) / 2, near_duplicate_pairs: near, threshold: t })
}
