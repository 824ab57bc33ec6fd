use super::*;

/// Per-threshold accumulators.
#[derive(Default)]
pub(super) struct ThAcc {
    pub(super) l1l0: Agg,
    pub(super) l1l0_paper: Agg,
    pub(super) l0l1: Agg,
    pub(super) l1_alone: Agg,
    pub(super) tok_in: u64,
    pub(super) tok_l1_first: u64,
    pub(super) delta_hat: f64,
    pub(super) dh_ratio: Vec<f64>,
    pub(super) dist: Vec<(f32, u32)>,
    pub(super) retained: u64,
    pub(super) retained_2d: u64,
    pub(super) cluster_sizes: Vec<u64>,
    pub(super) r_hits: [u64; 3],
    pub(super) r_queries: u64,
    pub(super) digest: DeletionDigest,
    pub(super) equal: bool,
}

pub(super) fn weighted_quantile(sorted: &[(f32, u32)], total: f64, q: f64) -> Option<f64> {
    if sorted.is_empty() || total == 0.0 {
        return sorted.last().map(|x| x.0 as f64);
    }
    let target = q * total;
    let mut acc = 0.0;
    for &(d, w) in sorted {
        acc += w as f64;
        if acc >= target {
            return Some(d as f64);
        }
    }
    sorted.last().map(|x| x.0 as f64)
}

/// Run the evaluation over `inputs` with `enc` (wrap it in a
/// `CachedEncoder` to reuse embeddings between runs): read and prepare every
/// trajectory once, sweep the thresholds, run the baselines, then ECR, RSC and
/// the controls.
pub fn evaluate<E: Encoder>(inputs: &[PathBuf], enc: &mut CachedEncoder<E>, o: &Options, progress: &mut dyn Progress) -> Result<EvalReport> {
    let start = Instant::now();
    let info = enc.info();
    let (thresholds, ths) = sorted_thresholds(o)?;
    let mut failed = Vec::new();
    let files = read_sample(read::expand_inputs(inputs)?, o.sample, progress, &mut failed)?;
    if files.is_empty() {
        let why: Vec<String> = failed.iter().map(|f| f.error.clone()).collect();
        bail!("no readable trajectory files under {inputs:?}{}", if why.is_empty() { String::new() } else { format!(": {}", why.join("; ")) });
    }
    let gold_path = o.gold.clone().or_else(|| find_beside(inputs, "swebench-gold-patches"));
    let gold = gold_path.as_deref().map(GoldPatches::load).transpose()?;
    let locomo_found = find_beside(inputs, "locomo/locomo10.json");
    let locomo_path = controls_input(o, locomo_found.as_deref())?;
    let mut memo = TokMemo::default();
    enc.memo_chunks();
    let (chunk0, encode0) = enc.timings();

    // 1. Read and prepare (chunk, embed, count) every trajectory once.
    let preps = prepare_all(files, inputs, &mut *enc, gold.as_ref(), &mut memo, &mut failed, progress)?;

    // 2. The threshold sweep.
    let sweep_start = Instant::now();
    let mut sw = Sweep::new(ths.len(), inputs.len());
    progress.stage("sweep", (preps.len() * ths.len()) as u64);
    for (si, p) in preps.iter().enumerate() {
        sw.uncompacted_and_l0(p, &mut memo, o);
        for (ti, th) in ths.iter().enumerate() {
            sw.threshold(si, p, ti, *th, &mut *enc, &mut memo, o)?;
            progress.inc(1);
        }
    }
    let sweep_s = sweep_start.elapsed().as_secs_f64();
    let n_chunks: u64 = preps.iter().map(|p| p.n_chunks() as u64).sum();
    let tok_total: u64 = preps.iter().map(Prep::tok_in).sum();
    let removal_l0 = lam_operator::removal(tok_total, sw.l0_first);
    let rows: Vec<ThresholdRow> = ths.iter().zip(&mut sw.acc).map(|(th, a)| threshold_row(a, *th, n_chunks, removal_l0, o)).collect();

    // 3. Baselines.
    let base_start = Instant::now();
    let mut baselines = vec![BaselineRow::single("none", None, sw.none_agg.row(o)), BaselineRow::single("l0", None, sw.l0_agg.row(o))];
    baselines.extend(masking_rows(&preps, &mut memo, &mut sw.split, o, progress));
    if o.semdedup && n_chunks > 0 {
        baselines.extend(semdedup(&preps, info.dim, o, &mut memo, progress));
    }
    let baselines_s = base_start.elapsed().as_secs_f64();

    // 4. ECR and RSC.
    let ecr = ecr_rows(&rows, &baselines, o);
    let rsc_non_increasing = rsc_non_increasing(&rows, &sw.none_agg.row(o));

    // 5. The controls, when asked for.
    let (locomo, controls_not_run) = match &locomo_path {
        Some(p) => (Some(locomo_control(p, &mut *enc, 0.95, progress)?), None),
        None => (None, Some(controls_not_run_line(o.locomo.as_deref().or(locomo_found.as_deref())))),
    };
    let by_input = if inputs.len() > 1 { sw.split.summaries(inputs, &preps, &thresholds, &o.masking, o) } else { Vec::new() };

    let (chunk1, encode1) = enc.timings();
    let encode_s = (encode1 - encode0).as_secs_f64();
    let chunking_s = (chunk1 - chunk0).as_secs_f64();
    let wall_s = start.elapsed().as_secs_f64();
    let ev: Vec<&Prep> = preps.iter().filter(|p| p.evidence.is_some()).collect();
    Ok(EvalReport {
        inputs: inputs.iter().map(|p| p.display().to_string()).collect(),
        encoder: info.model_id,
        trajectories: preps.len() as u64,
        records: preps.iter().map(|p| p.traj.records.len() as u64).sum(),
        chunks: n_chunks,
        tokens: tok_total,
        with_gold: ev.len() as u64,
        with_witnessed: ev.iter().filter(|p| p.evidence.as_ref().is_some_and(|e| !e.is_empty())).count() as u64,
        candidate_lines: ev.iter().map(|p| p.candidates as u64).sum(),
        with_outcome: ev.iter().filter(|p| p.resolved.is_some()).count() as u64,
        resolved: ev.iter().filter(|p| p.resolved == Some(true)).count() as u64,
        gold_sources: gold.map(|g| g.sources.iter().map(|p| p.display().to_string()).collect()).unwrap_or_default(),
        thresholds: rows,
        baselines,
        ecr,
        rsc_non_increasing,
        evidence_control: evidence_control(&preps),
        by_input,
        locomo,
        controls_not_run,
        timing: Timing { wall_s, encode_s, chunking_s, encode_share: if wall_s > 0.0 { (encode_s + chunking_s) / wall_s } else { 0.0 }, sweep_s, baselines_s },
        failed,
    })
}

/// The thresholds asked for, highest first, without repeats.
fn sorted_thresholds(o: &Options) -> Result<(Vec<f64>, Vec<Threshold>)> {
    let mut thresholds = o.thresholds.clone();
    thresholds.sort_by(|a, b| b.total_cmp(a));
    thresholds.dedup();
    let ths = thresholds.iter().map(|&t| Threshold::from_cosine(t)).collect::<Result<_, _>>()?;
    Ok((thresholds, ths))
}

/// Step 1: every trajectory chunked, embedded and counted once; one that
/// fails is added to `failed` and the others go on.
fn prepare_all(
    files: Vec<(read::Input, Vec<Trajectory>)>,
    inputs: &[PathBuf],
    enc: &mut dyn Encoder,
    gold: Option<&GoldPatches>,
    memo: &mut TokMemo,
    failed: &mut Vec<FailedInput>,
    progress: &mut dyn Progress,
) -> Result<Vec<Prep>> {
    let mut outcomes = evidence::Outcomes::default();
    progress.stage("embed", files.len() as u64);
    let mut preps: Vec<Prep> = Vec::new();
    for (f, trajs) in files {
        for t in trajs {
            let name = format!("{}: session {}", f.path.display(), t.session);
            match prepare(t, &mut *enc, gold, &mut outcomes, memo).context(name) {
                Ok(mut p) => {
                    p.input = inputs.iter().position(|i| f.path.starts_with(i)).unwrap_or(0);
                    preps.push(p);
                }
                Err(e) => failed.push(FailedInput::new(&f.path, None, &e.to_string())),
            }
        }
        progress.inc(1);
    }
    if preps.is_empty() {
        bail!("no trajectory with observations under {inputs:?}");
    }
    Ok(preps)
}

/// Step 2's accumulators: per threshold, the uncompacted and L0-alone rows,
/// L0's first-layer tokens and the per-input split.
struct Sweep {
    acc: Vec<ThAcc>,
    l0_agg: Agg,
    none_agg: Agg,
    l0_first: u64,
    split: Split,
}

impl Sweep {
    fn new(thresholds: usize, inputs: usize) -> Self {
        let acc = (0..thresholds).map(|_| ThAcc { equal: true, ..Default::default() }).collect();
        Sweep { acc, l0_agg: Agg::default(), none_agg: Agg::default(), l0_first: 0, split: Split::new(inputs) }
    }

    /// No compaction, and L0 alone, over one trajectory.
    fn uncompacted_and_l0(&mut self, p: &Prep, memo: &mut TokMemo, o: &Options) {
        let orig: Vec<&[u8]> = p.traj.records.iter().map(|r| r.observation.as_slice()).collect();
        let s = score(p, memo, &orig, None, &[], lam_core::stub::Recall::None);
        self.none_agg.add(p, &s, o);
        self.split.add(p, "none", &s, o);
        let mut l0 = LineDedup::new().with_counter(Some(&lam_trajectory::Cl100k)).with_recall(o.recall);
        let mut book = lam_core::IdBook::new();
        let (mut l0_res, mut l0_stubs, mut l0_gross) = (Vec::new(), Vec::new(), Vec::new());
        for r in &p.traj.records {
            let id = book.visible(lam_core::ObsId::of(r.action.as_bytes(), &r.observation)).to_string();
            let mut out = Vec::new();
            l0.process(r.index, &id, &lam_core::action::referent(&r.action), &[Segment::Text(&r.observation)], &mut out);
            let st: Vec<Stub> = l0.last_stubs().to_vec();
            l0_gross.push(memo.count(&without_stubs(&out, &st, o.recall)) as u64);
            l0_stubs.extend(st);
            l0_res.push(out);
        }
        self.l0_first += l0_gross.iter().sum::<u64>();
        let rs: Vec<&[u8]> = l0_res.iter().map(Vec::as_slice).collect();
        let s = score(p, memo, &rs, Some(&l0_gross), &l0_stubs, o.recall);
        self.l0_agg.add(p, &s, o);
        self.split.add(p, "l0", &s, o);
    }

    /// Trajectory `si` at threshold `ti`: both orders scored, L1 alone, the
    /// bound, the clusters, the 2-delta ceiling and retrieval.
    #[allow(clippy::too_many_arguments)]
    fn threshold(&mut self, si: usize, p: &Prep, ti: usize, th: Threshold, enc: &mut dyn Encoder, memo: &mut TokMemo, o: &Options) -> Result<()> {
        let run = self.orders(p, ti, th, enc, memo, o)?;
        let a = &mut self.acc[ti];
        // L1 alone: the first layer's text.
        let first: Vec<&[u8]> = run.online.iter().map(|x| x.first_layer_plain.as_slice()).collect();
        let s1 = score(p, memo, &first, None, &[], lam_core::stub::Recall::None);
        a.tok_l1_first += s1.tok_net;
        a.l1_alone.add(p, &s1, o);
        self.split.add(p, &format!("L1@{ti}"), &s1, o);
        a.tok_in += p.tok_in();
        let dh = self.split.delta_hat.entry((p.input, ti)).or_default();
        *dh = dh.max(run.report.delta_hat);
        let reps = bound(a, si, p, th, &run);
        clusters(a, &reps);
        ceiling(a, p, th)?;
        retrieval(a, p, &reps);
        Ok(())
    }

    /// Both orders at threshold `ti`, scored (the default order with both
    /// residuals, the ablation with the paper's); returns the default
    /// order's run with the paper's residual (its first layer is L1 alone).
    fn orders(&mut self, p: &Prep, ti: usize, th: Threshold, enc: &mut dyn Encoder, memo: &mut TokMemo, o: &Options) -> Result<report::Run> {
        let mut first = None;
        for (order, residual) in [(Order::L1L0, Residual::Paper), (Order::L1L0, Residual::Faithful), (Order::L0L1, Residual::Paper)] {
            let mut cfg =
                Config::new(th).with_counter(&lam_trajectory::Cl100k).with_recall(o.recall).with_diagnostics().with_residual(residual).with_delta(o.delta);
            cfg.order = order;
            let run = report::run(cfg, &mut *enc, &p.traj, false).with_context(|| format!("session {} at t={}", p.traj.session, th.cosine()))?;
            let a = &mut self.acc[ti];
            a.equal &= run.report.online_equals_batch;
            let res: Vec<&[u8]> = run.online.iter().map(|x| x.residual.as_slice()).collect();
            let gross: Vec<u64> = run
                .online
                .iter()
                .map(|x| if x.stubs.is_empty() { memo.count(&x.residual) } else { memo.count(&without_stubs(&x.residual, &x.stubs, cfg.recall)) } as u64)
                .collect();
            let stubs: Vec<Stub> = run.online.iter().flat_map(|x| x.stubs.iter().cloned()).collect();
            let s = score(p, memo, &res, Some(&gross), &stubs, o.recall);
            let key = match (order, residual) {
                (Order::L1L0, Residual::Faithful) => {
                    a.l1l0.add(p, &s, o);
                    format!("{order:?}@{ti}")
                }
                (Order::L1L0, Residual::Paper) => {
                    a.l1l0_paper.add(p, &s, o);
                    format!("paper@{ti}")
                }
                (Order::L0L1, _) => {
                    a.l0l1.add(p, &s, o);
                    format!("{order:?}@{ti}")
                }
            };
            self.split.add(p, &key, &s, o);
            first.get_or_insert(run);
        }
        Ok(first.expect("two orders ran"))
    }
}

/// The bound: delta-hat, every substitution's distance, the deletion digest;
/// returns each chunk's representative (itself when retained).
fn bound(a: &mut ThAcc, si: usize, p: &Prep, th: Threshold, run: &report::Run) -> Vec<u32> {
    a.delta_hat = a.delta_hat.max(run.report.delta_hat);
    let mut reps: Vec<u32> = (0..p.n_chunks() as u32).collect();
    let mut any = false;
    for c in run.online.iter().flat_map(|x| x.chunks.iter()) {
        if let Decision::Dropped { representative, distance } = c.decision {
            a.dist.push((distance, p.chunk_tok[c.index as usize]));
            a.digest.push(si as u32, c.index);
            reps[c.index as usize] = representative;
            any = true;
        }
    }
    if any && th.delta() > 0.0 {
        a.dh_ratio.push(run.report.delta_hat / th.delta());
    }
    reps
}

/// Cluster sizes (chunks per representative), in representative order: the
/// entropy sum must not depend on hash order.
fn clusters(a: &mut ThAcc, reps: &[u32]) {
    let mut sizes: HashMap<u32, u64> = HashMap::new();
    for &r in reps {
        *sizes.entry(r).or_default() += 1;
    }
    a.retained += sizes.len() as u64;
    let mut sizes: Vec<(u32, u64)> = sizes.into_iter().collect();
    sizes.sort_unstable();
    a.cluster_sizes.extend(sizes.into_iter().map(|x| x.1));
}

/// The bracket's ceiling: chunks retained at the 2-delta threshold `t' = 4t - 3`.
fn ceiling(a: &mut ThAcc, p: &Prep, th: Threshold) -> Result<()> {
    let tp = 4.0 * th.cosine() - 3.0;
    if tp >= 0.2 && p.n_chunks() > 0 {
        let dim = p.vecs.len() / p.n_chunks();
        let t2 = Threshold::from_cosine(tp)?;
        let mut g = Greedy::new(dim, t2, L1Index::default_for(dim, t2));
        let ids: Vec<u32> = (0..p.n_chunks() as u32).collect();
        let mut d = Vec::new();
        g.decide_batch(&ids, &p.vecs, &mut d)?;
        a.retained_2d += d.iter().filter(|x| !x.is_dropped()).count() as u64;
    }
    Ok(())
}

/// Retrieval: pi(top-1 of the full index) among the top k retained.
fn retrieval(a: &mut ThAcc, p: &Prep, reps: &[u32]) {
    for q in &p.queries {
        let Some(&g) = q.first() else { continue };
        let target = reps[g as usize];
        a.r_queries += 1;
        let mut rank = 0usize;
        for &c in q {
            if reps[c as usize] != c {
                continue;
            }
            rank += 1;
            if c == target || rank > 20 {
                break;
            }
        }
        if (1..=20).contains(&rank) {
            for (k, lim) in [1usize, 10, 20].iter().enumerate() {
                if rank <= *lim {
                    a.r_hits[k] += 1;
                }
            }
        }
    }
}

/// One threshold's row from its accumulators.
fn threshold_row(a: &mut ThAcc, th: Threshold, n_chunks: u64, removal_l0: f64, o: &Options) -> ThresholdRow {
    let delta = th.delta();
    let l1l0 = a.l1l0.row(o);
    let paper = a.l1l0_paper.row(o);
    let l0l1 = a.l0l1.row(o);
    ThresholdRow {
        threshold: th.cosine(),
        delta,
        delta_hat: a.delta_hat,
        mean_traj_delta_hat_over_delta: if a.dh_ratio.is_empty() { None } else { Some(a.dh_ratio.iter().sum::<f64>() / a.dh_ratio.len() as f64) },
        removal_l0,
        removal_l1: lam_operator::removal(a.tok_in, a.tok_l1_first),
        order_effect: paper.removal_net - l0l1.removal_net,
        order_effect_gross: paper.removal_gross - l0l1.removal_gross,
        l1_alone_evidence_micro: a.l1_alone.row(o).evidence_micro,
        l1_l0: l1l0,
        l1_l0_paper: paper,
        l0_l1: l0l1,
        distances: distances(a, delta),
        bracket: bracket(a, th, n_chunks),
        retrieval: retrieval_row(a, n_chunks),
        digest: a.digest.hex16(),
        online_equals_batch: a.equal,
    }
}

/// The substitution distances, weighted by chunk tokens.
fn distances(a: &mut ThAcc, delta: f64) -> Distances {
    a.dist.sort_by(|x, y| x.0.total_cmp(&y.0));
    let wtot: f64 = a.dist.iter().map(|x| x.1 as f64).sum();
    Distances {
        substitutions: a.dist.len() as u64,
        median: weighted_quantile(&a.dist, wtot, 0.5),
        p99: weighted_quantile(&a.dist, wtot, 0.99),
        max: a.dist.last().map(|x| x.0 as f64),
        mean_over_delta: if wtot > 0.0 { Some(a.dist.iter().map(|x| x.0 as f64 * x.1 as f64).sum::<f64>() / wtot / delta) } else { None },
        below_half: if wtot > 0.0 { Some(a.dist.iter().filter(|x| (x.0 as f64) <= delta / 2.0).map(|x| x.1 as f64).sum::<f64>() / wtot) } else { None },
    }
}

/// The bracket of the removal attained between log2 of the retained sets at delta and 2-delta.
fn bracket(a: &ThAcc, th: Threshold, n_chunks: u64) -> Bracket {
    let nf = n_chunks as f64;
    let h_pi = if n_chunks == 0 {
        0.0
    } else {
        -a.cluster_sizes
            .iter()
            .map(|&c| {
                let q = c as f64 / nf;
                q * q.log2()
            })
            .sum::<f64>()
    };
    let tp = 4.0 * th.cosine() - 3.0;
    let removed = if n_chunks == 0 { 0.0 } else { 1.0 - a.retained as f64 / nf };
    let ceiling = if tp >= 0.2 && n_chunks > 0 { Some(1.0 - a.retained_2d as f64 / nf) } else { None };
    Bracket {
        log2_s: nf.log2(),
        t_prime: tp,
        log2_r_2delta: if tp >= 0.2 { Some((a.retained_2d as f64).log2()) } else { None },
        h_pi,
        log2_r_delta: (a.retained as f64).log2(),
        chunks_removed: removed,
        ceiling,
        attained_of_ceiling: ceiling.and_then(|c| if c > 0.0 { Some(removed / c) } else { None }),
    }
}

fn retrieval_row(a: &ThAcc, n_chunks: u64) -> Retrieval {
    let rq = a.r_queries;
    Retrieval {
        queries: rq,
        keep: if n_chunks == 0 { 1.0 } else { a.retained as f64 / n_chunks as f64 },
        recall_at_1: (rq > 0).then(|| a.r_hits[0] as f64 / rq as f64),
        recall_at_10: (rq > 0).then(|| a.r_hits[1] as f64 / rq as f64),
        recall_at_20: (rq > 0).then(|| a.r_hits[2] as f64 / rq as f64),
    }
}

/// Observation masking: every observation but the last `k` as its placeholder.
fn masking_rows(preps: &[Prep], memo: &mut TokMemo, split: &mut Split, o: &Options, progress: &mut dyn Progress) -> Vec<BaselineRow> {
    progress.stage("masking", o.masking.len() as u64);
    let mut rows = Vec::new();
    for &k in &o.masking {
        let mut agg = Agg::default();
        for p in preps {
            let cut = p.traj.records.len().saturating_sub(k);
            let res: Vec<Vec<u8>> = p.traj.records.iter().take(cut).map(|r| arc_view::masking_placeholder(&r.observation).into_bytes()).collect();
            let res: Vec<&[u8]> = res.iter().map(Vec::as_slice).chain(p.traj.records[cut..].iter().map(|r| r.observation.as_slice())).collect();
            let gross: Vec<u64> = p.tok.iter().enumerate().map(|(i, &t)| if i < cut { 0 } else { t as u64 }).collect();
            let s = score(p, memo, &res, Some(&gross), &[], lam_core::stub::Recall::None);
            agg.add(p, &s, o);
            split.add(p, &format!("masking@{k}"), &s, o);
        }
        rows.push(BaselineRow::single("masking", Some(k as f64), agg.row(o)));
        progress.inc(1);
    }
    rows
}

/// ECR curves: LAM's thresholds, then each baseline family's settings.
fn ecr_rows(rows: &[ThresholdRow], baselines: &[BaselineRow], o: &Options) -> Vec<Ecr> {
    let mut ecr = Vec::new();
    let lam_pts: Vec<(String, &SettingRow)> = rows.iter().map(|r| (format!("t={}", r.threshold), &r.l1_l0)).collect();
    ecr.push(ecr_of("LAM (L1->L0, net)", &lam_pts, &o.taus));
    for fam in ["l0", "masking", "semdedup-global", "semdedup-trajectory"] {
        let pts: Vec<(String, &SettingRow)> =
            baselines.iter().filter(|b| b.baseline == fam).map(|b| (b.param.map(|p| format!("{p}")).unwrap_or_else(|| fam.to_string()), &b.row)).collect();
        if !pts.is_empty() {
            ecr.push(ecr_of(fam, &pts, &o.taus));
        }
    }
    ecr
}

/// Whether RSC does not increase as the threshold falls (from no compaction on).
fn rsc_non_increasing(rows: &[ThresholdRow], none: &SettingRow) -> Option<bool> {
    let rsc: Vec<f64> = rows.iter().filter_map(|r| r.l1_l0.rsc).collect();
    if rsc.is_empty() {
        return None;
    }
    Some(rsc.windows(2).all(|w| w[1] <= w[0] + 1e-12) && none.rsc.is_none_or(|r0| rsc[0] <= r0 + 1e-12))
}
