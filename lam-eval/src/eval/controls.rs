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
    (pairs > 0).then(|| EvidenceControl {
        trajectories: pairs,
        lines,
        found_in_unrelated: found,
        share: if lines == 0 { 0.0 } else { found as f64 / lines as f64 },
    })
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

/// The LoCoMo file the controls run on: `None` without `controls`; with
/// them, `--locomo` or the one found beside the inputs, or an error naming
/// both (before any work is done).
pub(super) fn controls_input(o: &Options, found: Option<&Path>) -> Result<Option<PathBuf>> {
    if !o.controls {
        return Ok(None);
    }
    match o.locomo.as_deref().or(found) {
        Some(p) => Ok(Some(p.to_path_buf())),
        None => bail!("--controls: no LoCoMo file (looked for locomo/locomo10.json beside the inputs); pass --locomo FILE"),
    }
}

/// The one line a report carries when the controls were not run.
pub(super) fn controls_not_run_line(locomo: Option<&Path>) -> String {
    match locomo {
        Some(p) => format!(
            "Controls not run: the LoCoMo control (near duplicates in ordinary dialogue, {}) runs with `lam eval --controls` (minutes with a real encoder; a time estimate is printed first).",
            p.display()
        ),
        None => {
            "Controls not run: the LoCoMo control runs with `lam eval --controls --locomo FILE` (LoCoMo's locomo10.json; minutes with a real encoder).".into()
        }
    }
}

/// Near-duplicate pairs among all LoCoMo dialogue turns at threshold `t`,
/// with a time estimate (from the first batch) noted before the long part.
pub(super) fn locomo_control(path: &Path, enc: &mut dyn Encoder, t: f64, progress: &mut dyn Progress) -> Result<Locomo> {
    let start = Instant::now();
    let turns = evidence::read_locomo(path)?;
    let dim = enc.info().dim;
    let mut texts: Vec<&[u8]> = Vec::new();
    for tr in &turns {
        let mut c = Vec::new();
        enc.chunks(tr.text.as_bytes(), &mut c)?;
        texts.extend(c.into_iter().map(|r| &tr.text.as_bytes()[r]));
    }
    let n = texts.len();
    let mut v = vec![0.0f32; n * dim];
    let first = Instant::now();
    let batch = 64.min(n);
    enc.encode_batch(&texts[..batch], &mut v[..batch * dim])?;
    let est = LocomoEstimate {
        turns: turns.len(),
        chunks: n,
        prep_s: first.duration_since(start).as_secs_f64(),
        per_chunk_s: first.elapsed().as_secs_f64() / batch.max(1) as f64,
        per_pair_s: pair_cost(&v, dim, batch),
    };
    progress.note(&est.line(path));
    progress.stage("locomo", 1);
    for (t, o) in texts[batch..].chunks(64).zip(v[batch * dim..].chunks_mut(64 * dim)) {
        enc.encode_batch(t, o)?;
    }
    let near = near_pairs(&v, dim, Threshold::from_cosine(t)?.delta_sq_f32());
    progress.inc(1);
    Ok(Locomo {
        source: path.display().to_string(),
        records: turns.len() as u64,
        chunks: n as u64,
        pairs: pairs_of(n),
        near_duplicate_pairs: near,
        threshold: t,
    })
}

fn pairs_of(n: usize) -> u64 {
    (n as u64) * (n as u64).saturating_sub(1) / 2
}

/// Seconds per distance, timed on the pairs among the first `k` vectors, on one thread.
fn pair_cost(v: &[f32], dim: usize, k: usize) -> f64 {
    let t0 = Instant::now();
    let mut sink = 0.0f32;
    for i in 0..k {
        for j in i + 1..k {
            sink += lam_lsh::sq_l2(&v[i * dim..(i + 1) * dim], &v[j * dim..(j + 1) * dim]);
        }
    }
    std::hint::black_box(sink);
    t0.elapsed().as_secs_f64() / pairs_of(k).max(1) as f64
}

/// Pairs of rows of `v` within squared distance `d2` (all pairs, in parallel).
fn near_pairs(v: &[f32], dim: usize, d2: f32) -> u64 {
    use rayon::prelude::*;
    let n = v.len() / dim.max(1);
    (0..n)
        .into_par_iter()
        .map(|i| {
            let a = &v[i * dim..(i + 1) * dim];
            (i + 1..n).filter(|&j| lam_lsh::sq_l2(a, &v[j * dim..(j + 1) * dim]) <= d2).count() as u64
        })
        .sum()
}

/// What the LoCoMo control will cost, measured on its first batch.
#[derive(Debug)]
pub(super) struct LocomoEstimate {
    pub turns: usize,
    pub chunks: usize,
    /// Reading and chunking (already spent).
    pub prep_s: f64,
    pub per_chunk_s: f64,
    pub per_pair_s: f64,
}

impl LocomoEstimate {
    /// Seconds left: encoding the remaining chunks and scanning every pair on all threads.
    pub fn remaining_s(&self) -> f64 {
        let threads = rayon::current_num_threads().max(1) as f64;
        self.per_chunk_s * self.chunks as f64 + self.per_pair_s * pairs_of(self.chunks) as f64 / threads
    }

    /// `LoCoMo control: N dialogue turns (C chunks, P pairs) from FILE: about X more (chunking took Y).`
    pub fn line(&self, path: &Path) -> String {
        format!(
            "LoCoMo control: {} dialogue turns ({} chunks, {:.1} M pairs) from {}: about {} more (estimated from the first batch; reading and chunking took {})",
            self.turns,
            self.chunks,
            pairs_of(self.chunks) as f64 / 1e6,
            path.display(),
            human_s(self.remaining_s()),
            human_s(self.prep_s)
        )
    }
}

/// `12 s`, `3.5 min`, `1.2 h`.
pub(super) fn human_s(s: f64) -> String {
    if s < 90.0 {
        format!("{:.0} s", s.max(1.0))
    } else if s < 5400.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_reads_in_plain_units() {
        assert_eq!(human_s(0.2), "1 s");
        assert_eq!(human_s(42.0), "42 s");
        assert_eq!(human_s(600.0), "10.0 min");
        assert_eq!(human_s(7200.0), "2.0 h");
        let e = LocomoEstimate { turns: 5882, chunks: 6000, prep_s: 2.0, per_chunk_s: 0.01, per_pair_s: 0.0 };
        assert!((e.remaining_s() - 60.0).abs() < 1e-9);
        let line = e.line(Path::new("locomo10.json"));
        assert!(line.starts_with("LoCoMo control: 5882 dialogue turns (6000 chunks, 18.0 M pairs) from locomo10.json: about 60 s more"), "{line}");
    }

    #[test]
    fn controls_are_off_unless_asked() {
        let o = Options::default();
        assert!(!o.controls);
        assert_eq!(controls_input(&o, Some(Path::new("x.json"))).unwrap(), None);
        let on = Options { controls: true, ..Options::default() };
        assert_eq!(controls_input(&on, Some(Path::new("x.json"))).unwrap(), Some(PathBuf::from("x.json")));
        assert!(controls_input(&on, None).unwrap_err().to_string().contains("--locomo FILE"));
        assert!(controls_not_run_line(None).contains("--controls"));
        assert!(controls_not_run_line(Some(Path::new("l.json"))).contains("`lam eval --controls`"));
    }
}
