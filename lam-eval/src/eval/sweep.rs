use super::*;

/// Per-threshold accumulators.
#[derive(Default)]
pub(super) struct ThAcc {
    pub(super) l1l0: Agg,
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
/// `CachedEncoder` to reuse embeddings between runs).
pub fn evaluate<E: Encoder>(inputs: &[PathBuf], enc: &mut CachedEncoder<E>, o: &Options, progress: &mut dyn Progress) -> Result<EvalReport> {
    let start = Instant::now();
    let info = enc.info();
    let dim = info.dim;
    let mut thresholds = o.thresholds.clone();
    thresholds.sort_by(|a, b| b.total_cmp(a));
    thresholds.dedup();
    let ths: Vec<Threshold> = thresholds.iter().map(|&t| Threshold::from_cosine(t)).collect::<Result<_, _>>()?;
    let mut failed = Vec::new();
    let files = read_sample(read::expand_inputs(inputs)?, o.sample, progress, &mut failed)?;
    if files.is_empty() {
        let why: Vec<String> = failed.iter().map(|f| f.error.clone()).collect();
        bail!("no readable trajectory files under {inputs:?}{}", if why.is_empty() { String::new() } else { format!(": {}", why.join("; ")) });
    }
    let gold_path = o.gold.clone().or_else(|| find_beside(inputs, "swebench-gold-patches"));
    let gold = match &gold_path {
        Some(p) => Some(GoldPatches::load(p)?),
        None => None,
    };
    let locomo_found = find_beside(inputs, "locomo/locomo10.json");
    let locomo_path = controls_input(o, locomo_found.as_deref())?;
    let mut outcomes = evidence::Outcomes::default();
    let mut memo = TokMemo::default();
    enc.memo_chunks();
    let (chunk0, encode0) = enc.timings();

    // 1. Read and prepare (chunk, embed, count) every trajectory once.
    progress.stage("embed", files.len() as u64);
    let mut preps: Vec<Prep> = Vec::new();
    for (f, trajs) in files {
        for t in trajs {
            let name = format!("{}: session {}", f.path.display(), t.session);
            let mut p = match prepare(t, &mut *enc, gold.as_ref(), &mut outcomes, &mut memo).context(name) {
                Ok(p) => p,
                Err(e) => {
                    failed.push(FailedInput { path: f.path.display().to_string(), error: e.to_string() });
                    continue;
                }
            };
            p.input = inputs.iter().position(|i| f.path.starts_with(i)).unwrap_or(0);
            preps.push(p);
        }
        progress.inc(1);
    }
    if preps.is_empty() {
        bail!("no trajectory with observations under {inputs:?}");
    }

    // 2. The threshold sweep.
    let sweep_start = Instant::now();
    progress.stage("sweep", (preps.len() * ths.len()) as u64);
    let mut acc: Vec<ThAcc> = ths.iter().map(|_| ThAcc { equal: true, ..Default::default() }).collect();
    let mut l0_agg = Agg::default();
    let mut none_agg = Agg::default();
    let mut l0_first = 0u64;
    let mut split = Split::new(inputs.len());
    for (si, p) in preps.iter().enumerate() {
        // No compaction and L0 alone.
        let orig: Vec<&[u8]> = p.traj.records.iter().map(|r| r.observation.as_slice()).collect();
        let s = score(p, &mut memo, &orig, None, &[], lam_core::stub::Recall::None);
        none_agg.add(p, &s, o);
        split.add(p, "none", &s, o);
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
        l0_first += l0_gross.iter().sum::<u64>();
        let rs: Vec<&[u8]> = l0_res.iter().map(Vec::as_slice).collect();
        let s = score(p, &mut memo, &rs, Some(&l0_gross), &l0_stubs, o.recall);
        l0_agg.add(p, &s, o);
        split.add(p, "l0", &s, o);

        for (ti, th) in ths.iter().enumerate() {
            let a = &mut acc[ti];
            let mut runs = Vec::with_capacity(2);
            for order in [Order::L1L0, Order::L0L1] {
                let mut cfg = Config::new(*th).with_counter(&lam_trajectory::Cl100k).with_recall(o.recall).with_diagnostics();
                cfg.order = order;
                let run = report::run(cfg, &mut *enc, &p.traj, false).with_context(|| format!("session {} at t={}", p.traj.session, th.cosine()))?;
                a.equal &= run.report.online_equals_batch;
                let res: Vec<&[u8]> = run.online.iter().map(|x| x.residual.as_slice()).collect();
                let gross: Vec<u64> =
                    run.online
                        .iter()
                        .map(|x| {
                            if x.stubs.is_empty() {
                                memo.count(&x.residual) as u64
                            } else {
                                memo.count(&without_stubs(&x.residual, &x.stubs, cfg.recall)) as u64
                            }
                        })
                        .collect();
                let stubs: Vec<Stub> = run.online.iter().flat_map(|x| x.stubs.iter().cloned()).collect();
                let s = score(p, &mut memo, &res, Some(&gross), &stubs, o.recall);
                match order {
                    Order::L1L0 => a.l1l0.add(p, &s, o),
                    Order::L0L1 => a.l0l1.add(p, &s, o),
                }
                split.add(p, &format!("{order:?}@{ti}"), &s, o);
                runs.push(run);
            }
            let run = &runs[0];
            // L1 alone: the first layer's text.
            let first: Vec<&[u8]> = run.online.iter().map(|x| x.first_layer_plain.as_slice()).collect();
            let s1 = score(p, &mut memo, &first, None, &[], lam_core::stub::Recall::None);
            a.tok_l1_first += s1.tok_net;
            a.l1_alone.add(p, &s1, o);
            split.add(p, &format!("L1@{ti}"), &s1, o);
            a.tok_in += p.tok_in();
            // Bound and bracket inputs.
            let delta = th.delta();
            a.delta_hat = a.delta_hat.max(run.report.delta_hat);
            let dh = split.delta_hat.entry((p.input, ti)).or_default();
            *dh = dh.max(run.report.delta_hat);
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
            if any && delta > 0.0 {
                a.dh_ratio.push(run.report.delta_hat / delta);
            }
            let mut sizes: HashMap<u32, u64> = HashMap::new();
            for &r in &reps {
                *sizes.entry(r).or_default() += 1;
            }
            a.retained += sizes.len() as u64;
            // In representative order: the entropy sum must not depend on hash order.
            let mut sizes: Vec<(u32, u64)> = sizes.into_iter().collect();
            sizes.sort_unstable();
            a.cluster_sizes.extend(sizes.into_iter().map(|x| x.1));
            let tp = 4.0 * th.cosine() - 3.0;
            if tp >= 0.2 && p.n_chunks() > 0 {
                let t2 = Threshold::from_cosine(tp)?;
                let mut g = Greedy::new(dim, t2, L1Index::default_for(dim, t2));
                let ids: Vec<u32> = (0..p.n_chunks() as u32).collect();
                let mut d = Vec::new();
                g.decide_batch(&ids, &p.vecs, &mut d)?;
                a.retained_2d += d.iter().filter(|x| !x.is_dropped()).count() as u64;
            }
            // Retrieval: pi(top-1 of the full index) among the top k retained.
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
            progress.inc(1);
        }
    }
    let sweep_s = sweep_start.elapsed().as_secs_f64();

    let n_chunks: u64 = preps.iter().map(|p| p.n_chunks() as u64).sum();
    let tok_total: u64 = preps.iter().map(Prep::tok_in).sum();
    let removal_l0 = if tok_total == 0 { 0.0 } else { (tok_total as f64 - l0_first as f64) / tok_total as f64 };
    let mut rows = Vec::new();
    for (ti, th) in ths.iter().enumerate() {
        let a = &mut acc[ti];
        let delta = th.delta();
        a.dist.sort_by(|x, y| x.0.total_cmp(&y.0));
        let wtot: f64 = a.dist.iter().map(|x| x.1 as f64).sum();
        let distances = Distances {
            substitutions: a.dist.len() as u64,
            median: weighted_quantile(&a.dist, wtot, 0.5),
            p99: weighted_quantile(&a.dist, wtot, 0.99),
            max: a.dist.last().map(|x| x.0 as f64),
            mean_over_delta: if wtot > 0.0 { Some(a.dist.iter().map(|x| x.0 as f64 * x.1 as f64).sum::<f64>() / wtot / delta) } else { None },
            below_half: if wtot > 0.0 { Some(a.dist.iter().filter(|x| (x.0 as f64) <= delta / 2.0).map(|x| x.1 as f64).sum::<f64>() / wtot) } else { None },
        };
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
        let bracket = Bracket {
            log2_s: nf.log2(),
            t_prime: tp,
            log2_r_2delta: if tp >= 0.2 { Some((a.retained_2d as f64).log2()) } else { None },
            h_pi,
            log2_r_delta: (a.retained as f64).log2(),
            chunks_removed: removed,
            ceiling,
            attained_of_ceiling: ceiling.and_then(|c| if c > 0.0 { Some(removed / c) } else { None }),
        };
        let rq = a.r_queries;
        let retrieval = Retrieval {
            queries: rq,
            keep: if n_chunks == 0 { 1.0 } else { a.retained as f64 / nf },
            recall_at_1: (rq > 0).then(|| a.r_hits[0] as f64 / rq as f64),
            recall_at_10: (rq > 0).then(|| a.r_hits[1] as f64 / rq as f64),
            recall_at_20: (rq > 0).then(|| a.r_hits[2] as f64 / rq as f64),
        };
        let l1l0 = a.l1l0.row(o);
        let l0l1 = a.l0l1.row(o);
        rows.push(ThresholdRow {
            threshold: th.cosine(),
            delta,
            delta_hat: a.delta_hat,
            mean_traj_delta_hat_over_delta: if a.dh_ratio.is_empty() { None } else { Some(a.dh_ratio.iter().sum::<f64>() / a.dh_ratio.len() as f64) },
            removal_l0,
            removal_l1: if a.tok_in == 0 { 0.0 } else { (a.tok_in as f64 - a.tok_l1_first as f64) / a.tok_in as f64 },
            order_effect: l1l0.removal_net - l0l1.removal_net,
            order_effect_gross: l1l0.removal_gross - l0l1.removal_gross,
            l1_alone_evidence_micro: a.l1_alone.row(o).evidence_micro,
            l1_l0: l1l0,
            l0_l1: l0l1,
            distances,
            bracket,
            retrieval,
            digest: a.digest.hex16(),
            online_equals_batch: a.equal,
        });
    }

    // 3. Baselines.
    let base_start = Instant::now();
    let mut baselines = vec![
        BaselineRow {
            baseline: "none".into(),
            param: None,
            row: none_agg.row(o),
            seed_removal: None,
            seed_evidence: None,
            jaccard_mean: None,
            common_share: None,
        },
        BaselineRow { baseline: "l0".into(), param: None, row: l0_agg.row(o), seed_removal: None, seed_evidence: None, jaccard_mean: None, common_share: None },
    ];
    progress.stage("masking", o.masking.len() as u64);
    for &k in &o.masking {
        let mut agg = Agg::default();
        for p in &preps {
            let n = p.traj.records.len();
            let cut = n.saturating_sub(k);
            let res: Vec<Vec<u8>> = p.traj.records.iter().take(cut).map(|r| arc_view::masking_placeholder(&r.observation).into_bytes()).collect();
            let res: Vec<&[u8]> = res.iter().map(Vec::as_slice).chain(p.traj.records[cut..].iter().map(|r| r.observation.as_slice())).collect();
            let gross: Vec<u64> = p.tok.iter().enumerate().map(|(i, &t)| if i < cut { 0 } else { t as u64 }).collect();
            let s = score(p, &mut memo, &res, Some(&gross), &[], lam_core::stub::Recall::None);
            agg.add(p, &s, o);
            split.add(p, &format!("masking@{k}"), &s, o);
        }
        baselines.push(BaselineRow {
            baseline: "masking".into(),
            param: Some(k as f64),
            row: agg.row(o),
            seed_removal: None,
            seed_evidence: None,
            jaccard_mean: None,
            common_share: None,
        });
        progress.inc(1);
    }
    if o.semdedup && n_chunks > 0 {
        baselines.extend(semdedup(&preps, dim, o, &mut memo, progress));
    }
    let baselines_s = base_start.elapsed().as_secs_f64();

    // 4. ECR and RSC.
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
    let rsc: Vec<f64> = rows.iter().filter_map(|r| r.l1_l0.rsc).collect();
    let rsc_non_increasing =
        if rsc.is_empty() { None } else { Some(rsc.windows(2).all(|w| w[1] <= w[0] + 1e-12) && none_agg.row(o).rsc.is_none_or(|r0| rsc[0] <= r0 + 1e-12)) };

    // 5. The controls, when asked for.
    let (locomo, controls_not_run) = match &locomo_path {
        Some(p) => (Some(locomo_control(p, &mut *enc, 0.95, progress)?), None),
        None => (None, Some(controls_not_run_line(o.locomo.as_deref().or(locomo_found.as_deref())))),
    };

    let by_input = if inputs.len() > 1 { split.summaries(inputs, &preps, &thresholds, &o.masking, o) } else { Vec::new() };

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
