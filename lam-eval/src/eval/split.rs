use super::*;

/// Per-input aggregates of the settings, keyed by (input, setting).
pub(super) struct Split {
    pub(super) n: usize,
    pub(super) aggs: HashMap<(usize, String), Agg>,
    pub(super) delta_hat: HashMap<(usize, usize), f64>,
}

impl Split {
    pub(super) fn new(n: usize) -> Self {
        Self { n, aggs: HashMap::new(), delta_hat: HashMap::new() }
    }

    pub(super) fn add(&mut self, p: &Prep, key: &str, s: &Scored, o: &Options) {
        if self.n > 1 {
            self.aggs.entry((p.input, key.to_string())).or_default().add(p, s, o);
        }
    }

    pub(super) fn row(&self, i: usize, key: &str, o: &Options) -> SettingRow {
        self.aggs.get(&(i, key.to_string())).cloned().unwrap_or_default().row(o)
    }

    pub(super) fn summaries(&self, inputs: &[PathBuf], preps: &[Prep], thresholds: &[f64], masking: &[usize], o: &Options) -> Vec<InputSummary> {
        (0..inputs.len())
            .map(|i| {
                let mine: Vec<&Prep> = preps.iter().filter(|p| p.input == i).collect();
                let l0 = self.row(i, "l0", o);
                let mut rows = Vec::new();
                let (mut l0l1, mut gross, mut lam_pts) = (Vec::new(), Vec::new(), Vec::new());
                for (ti, &t) in thresholds.iter().enumerate() {
                    let a = self.row(i, &format!("{:?}@{ti}", Order::L1L0), o);
                    let paper = self.row(i, &format!("paper@{ti}"), o);
                    let b = self.row(i, &format!("{:?}@{ti}", Order::L0L1), o);
                    let l1 = self.row(i, &format!("L1@{ti}"), o);
                    rows.push(Headline {
                        threshold: t,
                        removal_l0: l0.removal_gross,
                        removal_l1: l1.removal_net,
                        removal_l1_l0_net: a.removal_net,
                        removal_l0_l1_net: b.removal_net,
                        removal_l1_l0_paper_net: paper.removal_net,
                        new_lines_hidden: a.new_lines_hidden,
                        new_lines_hidden_paper: paper.new_lines_hidden,
                        new_tokens_hidden_paper: paper.new_tokens_hidden,
                        evidence_micro_paper: paper.evidence_micro,
                        stub_cost_l1_l0: a.stub_cost,
                        stub_floor_l1_l0: a.stub_floor,
                        stub_parts_l1_l0: a.stub_parts,
                        delta_hat: self.delta_hat.get(&(i, ti)).copied().unwrap_or(0.0),
                        evidence_micro: a.evidence_micro,
                        evidence_recoverable: a.evidence_recoverable,
                        trajectories_intact: a.trajectories_intact,
                        digest: String::new(),
                    });
                    l0l1.push(b.removal_net);
                    gross.push(a.removal_gross);
                    lam_pts.push((format!("t={t}"), a));
                }
                let none = self.row(i, "none", o);
                let masks: Vec<(usize, SettingRow)> = masking.iter().map(|&k| (k, self.row(i, &format!("masking@{k}"), o))).collect();
                let mut baselines = vec![
                    BaselineHeadline { baseline: "none".into(), param: None, removal: none.removal_net, evidence_micro: none.evidence_micro },
                    BaselineHeadline { baseline: "l0".into(), param: None, removal: l0.removal_net, evidence_micro: l0.evidence_micro },
                ];
                baselines.extend(masks.iter().map(|(k, r)| BaselineHeadline {
                    baseline: "masking".into(),
                    param: Some(*k as f64),
                    removal: r.removal_net,
                    evidence_micro: r.evidence_micro,
                }));
                let lam: Vec<(String, &SettingRow)> = lam_pts.iter().map(|(n, r)| (n.clone(), r)).collect();
                let mask: Vec<(String, &SettingRow)> = masks.iter().map(|(k, r)| (format!("{k}"), r)).collect();
                let ecr =
                    vec![ecr_of("LAM (L1->L0, net)", &lam, &o.taus), ecr_of("l0", &[("l0".to_string(), &l0)], &o.taus), ecr_of("masking", &mask, &o.taus)];
                InputSummary {
                    input: inputs[i].display().to_string(),
                    trajectories: mine.len() as u64,
                    tokens: mine.iter().map(|p| p.tok_in()).sum(),
                    rows,
                    removal_l0_l1_net: l0l1,
                    removal_l1_l0_gross: gross,
                    baselines,
                    ecr,
                }
            })
            .collect()
    }
}
