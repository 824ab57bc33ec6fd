//! `lam eval`: the papers' measurements over trajectory corpora, with the
//! baselines in the same run and the same tables (definitions: `docs/eval.md`).
//!
//! One run reads the trajectories, chunks and embeds every observation once
//! (the encoder's memo serves every threshold and baseline), then for each
//! threshold runs the online and batch operators in both layer orders and
//! scores removal, the substitution bound, the metric-entropy bracket,
//! gold-patch evidence, retrieval and determinism; observation masking,
//! SemDeDup and L0 alone are scored on the same texts; LoCoMo gives the
//! conversational control.

pub mod baselines;
pub mod evidence;
mod markdown;
pub mod svg;

use crate::operator::{Config, Order, without_stubs};
use lam_core::Stub;
use crate::read::{self, Trajectory};
use crate::report;
use crate::tokens;
use anyhow::{Context, Result, bail};
use lam_core::{DeletionDigest, Decision, Encoder, EncoderInfo, Error, ObsStore, Threshold};
use lam_hash::{LineDedup, Segment};
use lam_lsh::{Greedy, L1Index};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xxhash_rust::xxh3::{xxh3_64, xxh3_128};

pub use evidence::{GoldPatches, evidence_lines};
pub use markdown::markdown;

/// The default threshold sweep (LAM Table 23's range).
pub const DEFAULT_THRESHOLDS: [f64; 8] = [0.99, 0.98, 0.96, 0.95, 0.93, 0.90, 0.85, 0.80];
/// Observation-masking windows (keep the last k observations).
pub const DEFAULT_MASKING: [usize; 7] = [3, 5, 10, 20, 30, 50, 100];
/// Budgets for BFR@B (tokens).
pub const DEFAULT_BUDGETS: [usize; 3] = [16_384, 32_768, 65_536];
/// Input sizes T for removal against input size (tokens).
pub const DEFAULT_SIZES: [usize; 9] = [1_000, 2_000, 4_000, 8_000, 16_000, 33_000, 66_000, 131_000, 262_000];
/// SemDeDup thresholds swept in addition to the LAM sweep (near perfect retention).
pub const SEMDEDUP_EXTRA: [f64; 3] = [0.9999, 0.999, 0.995];

/// Settings of one evaluation.
#[derive(Debug, Clone)]
pub struct Options {
    /// Merge thresholds t (cosine).
    pub thresholds: Vec<f64>,
    /// Evaluate a deterministic sample of N input files (by SHA-256 of the file name).
    pub sample: Option<usize>,
    /// Masking windows.
    pub masking: Vec<usize>,
    /// SemDeDup thresholds.
    pub semdedup_thresholds: Vec<f64>,
    /// SemDeDup seeds.
    pub semdedup_seeds: u64,
    /// Chunks per k-means cluster (k = ceil(n / this)).
    pub semdedup_cluster_size: usize,
    /// k-means iterations (at most).
    pub kmeans_iters: usize,
    /// Run SemDeDup.
    pub semdedup: bool,
    /// BFR budgets.
    pub budgets: Vec<usize>,
    /// Input sizes for removal against T.
    pub sizes: Vec<usize>,
    /// Gold patches (file or folder); `None`: look for `swebench-gold-patches` beside the inputs.
    pub gold: Option<PathBuf>,
    /// LoCoMo file; `None`: look for `locomo/locomo10.json` beside the inputs.
    pub locomo: Option<PathBuf>,
    /// Skip LoCoMo.
    pub no_locomo: bool,
    /// Evidence tau floors for ECR.
    pub taus: Vec<f64>,
}

impl Default for Options {
    fn default() -> Self {
        let mut sd: Vec<f64> = SEMDEDUP_EXTRA.to_vec();
        sd.extend([0.99, 0.98, 0.95, 0.90]);
        Self {
            thresholds: DEFAULT_THRESHOLDS.to_vec(),
            sample: None,
            masking: DEFAULT_MASKING.to_vec(),
            semdedup_thresholds: sd,
            semdedup_seeds: 5,
            semdedup_cluster_size: 50,
            kmeans_iters: 20,
            semdedup: true,
            budgets: DEFAULT_BUDGETS.to_vec(),
            sizes: DEFAULT_SIZES.to_vec(),
            gold: None,
            locomo: None,
            no_locomo: false,
            taus: vec![1.0, 0.999, 0.99, 0.95],
        }
    }
}

/// Progress reporting (the command draws a bar; tests pass [`NoProgress`]).
pub trait Progress {
    /// A new stage with `total` steps.
    fn stage(&mut self, name: &str, total: u64);
    /// `n` steps done.
    fn inc(&mut self, n: u64);
}

/// Progress that draws nothing.
#[derive(Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&mut self, _: &str, _: u64) {}
    fn inc(&mut self, _: u64) {}
}

/// Wraps an encoder: memoises `chunks` by content, and times encoding.
struct MemoEncoder<'a> {
    inner: &'a mut dyn Encoder,
    chunks: RefCell<HashMap<u128, Vec<Range<usize>>>>,
    chunk_time: RefCell<Duration>,
    encode_time: Duration,
}

impl Encoder for MemoEncoder<'_> {
    fn info(&self) -> EncoderInfo {
        self.inner.info()
    }
    fn token_spans(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        self.inner.token_spans(text, out)
    }
    fn chunks(&self, text: &[u8], out: &mut Vec<Range<usize>>) -> Result<(), Error> {
        let k = xxh3_128(text);
        if let Some(v) = self.chunks.borrow().get(&k) {
            out.clear();
            out.extend_from_slice(v);
            return Ok(());
        }
        let t = Instant::now();
        self.inner.chunks(text, out)?;
        *self.chunk_time.borrow_mut() += t.elapsed();
        self.chunks.borrow_mut().insert(k, out.clone());
        Ok(())
    }
    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), Error> {
        let t = Instant::now();
        let r = self.inner.encode_batch(texts, out);
        self.encode_time += t.elapsed();
        r
    }
}

/// cl100k counts memoised by content.
#[derive(Default)]
struct TokMemo(HashMap<(u64, usize), u32>);

impl TokMemo {
    fn count(&mut self, b: &[u8]) -> u32 {
        if b.is_empty() {
            return 0;
        }
        *self.0.entry((xxh3_64(b), b.len())).or_insert_with(|| tokens::count(b) as u32)
    }
}

/// One trajectory, prepared once for every setting.
struct Prep {
    traj: Trajectory,
    tok: Vec<u32>,
    chunks: Vec<Vec<Range<usize>>>,
    vecs: Vec<f32>,
    chunk_tok: Vec<u32>,
    /// Witnessed evidence lines (None: no gold patch for this id).
    evidence: Option<Vec<Vec<u8>>>,
    /// Candidate (not necessarily witnessed) evidence lines.
    candidates: usize,
    resolved: Option<bool>,
    store: arc_store::MemStore,
    /// Per query: its full-index top-1 chunk and the chunk order by descending score.
    queries: Vec<Vec<u32>>,
    /// Index of the command-line input (file or folder) it came from.
    input: usize,
}

impl Prep {
    fn n_chunks(&self) -> usize {
        self.chunk_tok.len()
    }
    fn tok_in(&self) -> u64 {
        self.tok.iter().map(|&t| t as u64).sum()
    }
}

/// The per-trajectory measurement of one setting.
struct Scored {
    tok_gross: u64,
    tok_net: u64,
    rec_net: Vec<u32>,
    witnessed: u32,
    kept: u32,
    recovered: u32,
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// The `_recall §id` handles of stubs, each once, in order.
fn recall_ids(stubs: &[Stub]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for s in stubs {
        if !ids.iter().any(|i| i == s.id()) {
            ids.push(s.id().to_string());
        }
    }
    ids
}

fn score(p: &Prep, memo: &mut TokMemo, residuals: &[&[u8]], gross: Option<&[u64]>, stubs: &[Stub]) -> Scored {
    let rec_net: Vec<u32> = residuals.iter().zip(&p.traj.records).zip(&p.tok).map(|((r, rec), &t)| if *r == rec.observation.as_slice() { t } else { memo.count(r) }).collect();
    let tok_net: u64 = rec_net.iter().map(|&t| t as u64).sum();
    let tok_gross = gross.map(|g| g.iter().sum()).unwrap_or(tok_net);
    let (mut witnessed, mut kept, mut recovered) = (0, 0, 0);
    if let Some(ev) = &p.evidence {
        let mut recalled: Option<Vec<Vec<u8>>> = None;
        for line in ev {
            witnessed += 1;
            if residuals.iter().any(|r| contains(r, line)) {
                kept += 1;
                recovered += 1;
                continue;
            }
            let bodies = recalled.get_or_insert_with(|| recall_ids(stubs).iter().filter_map(|id| p.store.get(&p.traj.session, id).ok().flatten()).collect());
            if bodies.iter().any(|b| contains(b, line)) {
                recovered += 1;
            }
        }
    }
    Scored { tok_gross, tok_net, rec_net, witnessed, kept, recovered }
}

/// Aggregate of one setting over the corpus.
#[derive(Debug, Clone, Default)]
struct Agg {
    n: u64,
    tok_in: u64,
    tok_gross: u64,
    tok_net: u64,
    witnessed: u64,
    kept: u64,
    recovered: u64,
    traj_ev: u64,
    intact: u64,
    intact_rec: u64,
    n_outcome: u64,
    resolved: u64,
    rsc_hits: u64,
    bfr_fit: Vec<u64>,
    size_in: Vec<u64>,
    size_out: Vec<u64>,
    size_n: Vec<u64>,
}

impl Agg {
    fn add(&mut self, p: &Prep, s: &Scored, o: &Options) {
        if self.bfr_fit.is_empty() {
            self.bfr_fit = vec![0; o.budgets.len()];
            self.size_in = vec![0; o.sizes.len()];
            self.size_out = vec![0; o.sizes.len()];
            self.size_n = vec![0; o.sizes.len()];
        }
        self.n += 1;
        let tin = p.tok_in();
        self.tok_in += tin;
        self.tok_gross += s.tok_gross;
        self.tok_net += s.tok_net;
        for (i, &b) in o.budgets.iter().enumerate() {
            if s.tok_net <= b as u64 {
                self.bfr_fit[i] += 1;
            }
        }
        for (i, &t) in o.sizes.iter().enumerate() {
            if tin < t as u64 {
                continue;
            }
            // The shortest prefix of records reaching T input tokens.
            let (mut a, mut b) = (0u64, 0u64);
            for (ti, ri) in p.tok.iter().zip(&s.rec_net) {
                a += *ti as u64;
                b += *ri as u64;
                if a >= t as u64 {
                    break;
                }
            }
            self.size_in[i] += a;
            self.size_out[i] += b;
            self.size_n[i] += 1;
        }
        if p.evidence.is_some() {
            self.traj_ev += 1;
            self.witnessed += s.witnessed as u64;
            self.kept += s.kept as u64;
            self.recovered += s.recovered as u64;
            let intact = s.kept == s.witnessed;
            self.intact += intact as u64;
            self.intact_rec += (s.recovered == s.witnessed) as u64;
            if let Some(r) = p.resolved {
                self.n_outcome += 1;
                self.resolved += r as u64;
                self.rsc_hits += (r && intact) as u64;
            }
        }
    }

    fn removal(&self, out: u64) -> f64 {
        if self.tok_in == 0 { 0.0 } else { (self.tok_in as f64 - out as f64) / self.tok_in as f64 }
    }

    fn row(&self, o: &Options) -> SettingRow {
        let frac = |a: u64, b: u64| if b == 0 { None } else { Some(a as f64 / b as f64) };
        SettingRow {
            removal_gross: self.removal(self.tok_gross),
            removal_net: self.removal(self.tok_net),
            tokens_in: self.tok_in,
            tokens_out: self.tok_net,
            evidence_micro: frac(self.kept, self.witnessed),
            evidence_recoverable: frac(self.recovered, self.witnessed),
            trajectories_intact: frac(self.intact, self.traj_ev),
            trajectories_intact_recoverable: frac(self.intact_rec, self.traj_ev),
            lines_witnessed: self.witnessed,
            lines_lost: self.witnessed - self.kept,
            lines_lost_recoverable: self.witnessed - self.recovered,
            rsc: frac(self.rsc_hits, self.n_outcome),
            bfr: o.budgets.iter().zip(&self.bfr_fit).map(|(&b, &f)| Bfr { budget: b, fits: f as f64 / self.n.max(1) as f64 }).collect(),
            by_size: o
                .sizes
                .iter()
                .enumerate()
                .map(|(i, &t)| SizePoint {
                    size: t,
                    trajectories: self.size_n[i],
                    removal: if self.size_in[i] == 0 { None } else { Some((self.size_in[i] as f64 - self.size_out[i] as f64) / self.size_in[i] as f64) },
                })
                .collect(),
        }
    }
}

/// Budget feasibility at one budget.
#[derive(Debug, Clone, Serialize)]
pub struct Bfr {
    /// Budget B (tokens).
    pub budget: usize,
    /// Fraction of trajectories whose (net) observation stream fits in B.
    pub fits: f64,
}

/// Removal at one input size.
#[derive(Debug, Clone, Serialize)]
pub struct SizePoint {
    /// T (tokens).
    pub size: usize,
    /// Trajectories reaching T.
    pub trajectories: u64,
    /// Pooled removal over their shortest prefixes reaching T.
    pub removal: Option<f64>,
}

/// Removal, evidence and feasibility of one setting.
#[derive(Debug, Clone, Serialize)]
pub struct SettingRow {
    /// Removal before charging stub tokens.
    pub removal_gross: f64,
    /// Removal after charging stub tokens.
    pub removal_net: f64,
    /// Input tokens.
    pub tokens_in: u64,
    /// Output tokens (net).
    pub tokens_out: u64,
    /// Witnessed evidence lines found in the residual text (pooled).
    pub evidence_micro: Option<f64>,
    /// ... or recoverable through a stub's `_recall §id` in the archive.
    pub evidence_recoverable: Option<f64>,
    /// Trajectories (with gold patches) losing no witnessed line.
    pub trajectories_intact: Option<f64>,
    /// Same, counting recoverable lines as kept.
    pub trajectories_intact_recoverable: Option<f64>,
    /// Witnessed evidence lines.
    pub lines_witnessed: u64,
    /// Lines not found in the residual text.
    pub lines_lost: u64,
    /// Lines neither in the residual nor recoverable.
    pub lines_lost_recoverable: u64,
    /// Resolve-rate ceiling (resolved and intact / trajectories with outcome and gold patch).
    pub rsc: Option<f64>,
    /// Budget feasibility.
    pub bfr: Vec<Bfr>,
    /// Removal against input size.
    pub by_size: Vec<SizePoint>,
}

/// Substitution-distance summary (token-weighted over deleted chunks).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Distances {
    /// Substitutions.
    pub substitutions: u64,
    /// Token-weighted median distance.
    pub median: Option<f64>,
    /// Token-weighted 99th percentile.
    pub p99: Option<f64>,
    /// Largest distance (delta_hat of the run).
    pub max: Option<f64>,
    /// Token-weighted mean of d / delta.
    pub mean_over_delta: Option<f64>,
    /// Share of substituted tokens with d <= delta / 2.
    pub below_half: Option<f64>,
}

/// The metric-entropy bracket (LAM C.3, Corollary 3, Table 23), pooled over
/// within-trajectory greedy passes.
#[derive(Debug, Clone, Serialize)]
pub struct Bracket {
    /// log2 |S| (all chunks).
    pub log2_s: f64,
    /// Partner threshold t' = 4t - 3.
    pub t_prime: f64,
    /// log2 |R(2 delta)| (None when t' < 0.2).
    pub log2_r_2delta: Option<f64>,
    /// H(pi(X)), X uniform over chunks.
    pub h_pi: f64,
    /// log2 |R(delta)|.
    pub log2_r_delta: f64,
    /// Chunks removed at delta (cardinality).
    pub chunks_removed: f64,
    /// Ceiling rho_greedy(2 delta) >= rho*(delta) (cardinality).
    pub ceiling: Option<f64>,
    /// chunks_removed / ceiling.
    pub attained_of_ceiling: Option<f64>,
}

/// Retrieval quality (F.2).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Retrieval {
    /// Queries (distinct action texts).
    pub queries: u64,
    /// Retained chunk fraction.
    pub keep: f64,
    /// recall@1.
    pub recall_at_1: Option<f64>,
    /// recall@10.
    pub recall_at_10: Option<f64>,
    /// recall@20.
    pub recall_at_20: Option<f64>,
}

/// Everything measured at one threshold.
#[derive(Debug, Clone, Serialize)]
pub struct ThresholdRow {
    /// t.
    pub threshold: f64,
    /// delta = sqrt(2 - 2t).
    pub delta: f64,
    /// Largest substitution distance over the corpus.
    pub delta_hat: f64,
    /// Mean over trajectories with a substitution of delta_hat / delta.
    pub mean_traj_delta_hat_over_delta: Option<f64>,
    /// L0 alone (gross), threshold independent.
    pub removal_l0: f64,
    /// L1 alone (gross).
    pub removal_l1: f64,
    /// L1 then L0 (default): gross, net, evidence, feasibility.
    pub l1_l0: SettingRow,
    /// L0 then L1.
    pub l0_l1: SettingRow,
    /// L1 alone (its first-layer text): evidence.
    pub l1_alone_evidence_micro: Option<f64>,
    /// l1_l0 net minus l0_l1 net.
    pub order_effect: f64,
    /// l1_l0 gross minus l0_l1 gross.
    pub order_effect_gross: f64,
    /// Substitution distances.
    pub distances: Distances,
    /// Metric-entropy bracket.
    pub bracket: Bracket,
    /// Retrieval.
    pub retrieval: Retrieval,
    /// Corpus deletion-set digest (session index = trajectory ordinal).
    pub digest: String,
    /// Online and batch residuals, decisions and digests agree on every trajectory, both orders.
    pub online_equals_batch: bool,
}

/// One baseline setting.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineRow {
    /// `none`, `l0`, `masking`, `semdedup-global`, `semdedup-trajectory`.
    pub baseline: String,
    /// k for masking, threshold for SemDeDup, null otherwise.
    pub param: Option<f64>,
    /// Mean over seeds (SemDeDup) or the single run.
    pub row: SettingRow,
    /// SemDeDup: removal (net) per seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_removal: Option<Vec<f64>>,
    /// SemDeDup: evidence micro per seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_evidence: Option<Vec<Option<f64>>>,
    /// SemDeDup: mean pairwise deletion-set Jaccard across seeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jaccard_mean: Option<f64>,
    /// SemDeDup: chunks deleted by every seed / deleted by any seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub common_share: Option<f64>,
}

/// ECR@tau of one family.
#[derive(Debug, Clone, Serialize)]
pub struct Ecr {
    /// Family.
    pub family: String,
    /// Largest removal without the floor.
    pub best: Option<f64>,
    /// (tau, largest net removal with micro >= tau, the setting achieving it).
    pub at: Vec<(f64, Option<f64>, Option<String>)>,
}

/// The evidence metric's specificity control (LAM F.3: 0.7 % of witnessed
/// lines are found in an unrelated trajectory's memory).
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceControl {
    /// Trajectories with witnessed lines, each paired with an unrelated one.
    pub trajectories: u64,
    /// Witnessed lines searched.
    pub lines: u64,
    /// ... found verbatim in the unrelated trajectory's original observations.
    pub found_in_unrelated: u64,
    /// found / lines.
    pub share: f64,
}

/// One command-line input's headline rows (when several are evaluated together).
#[derive(Debug, Clone, Serialize)]
pub struct InputSummary {
    /// The input as given.
    pub input: String,
    /// Trajectories from it.
    pub trajectories: u64,
    /// Observation tokens.
    pub tokens: u64,
    /// Per threshold, its rows restricted to this input (`removal_l0` is L0
    /// alone's gross removal, `removal_l1` L1 alone's; `digest` is empty: the
    /// deletion-set digest is defined over the whole run).
    pub rows: Vec<Headline>,
    /// L0 -> L1 net removal per threshold (same order as `rows`).
    pub removal_l0_l1_net: Vec<f64>,
    /// L1 -> L0 gross removal per threshold.
    pub removal_l1_l0_gross: Vec<f64>,
    /// No compaction, L0 alone and masking.
    pub baselines: Vec<BaselineHeadline>,
    /// ECR@tau of LAM (L1 -> L0), L0 alone and masking on this input.
    pub ecr: Vec<Ecr>,
}

/// Per-input aggregates of the settings, keyed by (input, setting).
struct Split {
    n: usize,
    aggs: HashMap<(usize, String), Agg>,
    delta_hat: HashMap<(usize, usize), f64>,
}

impl Split {
    fn new(n: usize) -> Self {
        Self { n, aggs: HashMap::new(), delta_hat: HashMap::new() }
    }

    fn add(&mut self, p: &Prep, key: &str, s: &Scored, o: &Options) {
        if self.n > 1 {
            self.aggs.entry((p.input, key.to_string())).or_default().add(p, s, o);
        }
    }

    fn row(&self, i: usize, key: &str, o: &Options) -> SettingRow {
        self.aggs.get(&(i, key.to_string())).cloned().unwrap_or_default().row(o)
    }

    fn summaries(&self, inputs: &[PathBuf], preps: &[Prep], thresholds: &[f64], masking: &[usize], o: &Options) -> Vec<InputSummary> {
        (0..inputs.len())
            .map(|i| {
                let mine: Vec<&Prep> = preps.iter().filter(|p| p.input == i).collect();
                let l0 = self.row(i, "l0", o);
                let mut rows = Vec::new();
                let (mut l0l1, mut gross, mut lam_pts) = (Vec::new(), Vec::new(), Vec::new());
                for (ti, &t) in thresholds.iter().enumerate() {
                    let a = self.row(i, &format!("{:?}@{ti}", Order::L1L0), o);
                    let b = self.row(i, &format!("{:?}@{ti}", Order::L0L1), o);
                    let l1 = self.row(i, &format!("L1@{ti}"), o);
                    rows.push(Headline {
                        threshold: t,
                        removal_l0: l0.removal_gross,
                        removal_l1: l1.removal_net,
                        removal_l1_l0_net: a.removal_net,
                        removal_l0_l1_net: b.removal_net,
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
                baselines.extend(masks.iter().map(|(k, r)| BaselineHeadline { baseline: "masking".into(), param: Some(*k as f64), removal: r.removal_net, evidence_micro: r.evidence_micro }));
                let lam: Vec<(String, &SettingRow)> = lam_pts.iter().map(|(n, r)| (n.clone(), r)).collect();
                let mask: Vec<(String, &SettingRow)> = masks.iter().map(|(k, r)| (format!("{k}"), r)).collect();
                let ecr = vec![ecr_of("LAM (L1->L0, net)", &lam, &o.taus), ecr_of("l0", &[("l0".to_string(), &l0)], &o.taus), ecr_of("masking", &mask, &o.taus)];
                InputSummary { input: inputs[i].display().to_string(), trajectories: mine.len() as u64, tokens: mine.iter().map(|p| p.tok_in()).sum(), rows, removal_l0_l1_net: l0l1, removal_l1_l0_gross: gross, baselines, ecr }
            })
            .collect()
    }
}

/// The LoCoMo control.
#[derive(Debug, Clone, Serialize)]
pub struct Locomo {
    /// File read.
    pub source: String,
    /// Dialogue turns.
    pub records: u64,
    /// Chunks embedded.
    pub chunks: u64,
    /// Unordered chunk pairs.
    pub pairs: u64,
    /// Pairs with cosine >= t.
    pub near_duplicate_pairs: u64,
    /// The threshold.
    pub threshold: f64,
}

/// Timing.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Timing {
    /// Whole run (s).
    pub wall_s: f64,
    /// Encoder forward passes, cache misses included (s).
    pub encode_s: f64,
    /// Encoder tokenisation for chunking (s).
    pub chunking_s: f64,
    /// (encode + chunking) / wall.
    pub encode_share: f64,
    /// Threshold sweep (s).
    pub sweep_s: f64,
    /// Baselines (s).
    pub baselines_s: f64,
}

/// The report of `lam eval`.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// Inputs.
    pub inputs: Vec<String>,
    /// Encoder model id.
    pub encoder: String,
    /// Trajectories.
    pub trajectories: u64,
    /// Observation records.
    pub records: u64,
    /// Chunks.
    pub chunks: u64,
    /// Observation tokens (cl100k_base).
    pub tokens: u64,
    /// Trajectories joined with a gold patch.
    pub with_gold: u64,
    /// ... of which with at least one witnessed evidence line.
    pub with_witnessed: u64,
    /// Candidate evidence lines (before the witnessed filter).
    pub candidate_lines: u64,
    /// Trajectories with a recorded outcome (and a gold patch).
    pub with_outcome: u64,
    /// ... of which resolved.
    pub resolved: u64,
    /// Gold-patch files.
    pub gold_sources: Vec<String>,
    /// Threshold rows.
    pub thresholds: Vec<ThresholdRow>,
    /// Baselines (no compaction, L0, masking, SemDeDup).
    pub baselines: Vec<BaselineRow>,
    /// ECR@tau per family.
    pub ecr: Vec<Ecr>,
    /// RSC is non-increasing along the sweep (decreasing t).
    pub rsc_non_increasing: Option<bool>,
    /// Specificity of the evidence metric (witnessed lines found in an unrelated trajectory).
    pub evidence_control: Option<EvidenceControl>,
    /// The headline rows of each command-line input alone (empty for one input).
    pub by_input: Vec<InputSummary>,
    /// LoCoMo control.
    pub locomo: Option<Locomo>,
    /// Timing.
    pub timing: Timing,
}

/// One headline row of `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    /// t.
    pub threshold: f64,
    /// L0 alone.
    pub removal_l0: f64,
    /// L1 alone.
    pub removal_l1: f64,
    /// L1 -> L0 net.
    pub removal_l1_l0_net: f64,
    /// L0 -> L1 net.
    pub removal_l0_l1_net: f64,
    /// delta_hat.
    pub delta_hat: f64,
    /// Evidence micro (lossy).
    pub evidence_micro: Option<f64>,
    /// Evidence with recall.
    pub evidence_recoverable: Option<f64>,
    /// Trajectories intact.
    pub trajectories_intact: Option<f64>,
    /// Digest.
    pub digest: String,
}

/// One baseline headline row of `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineHeadline {
    /// Family.
    pub baseline: String,
    /// Parameter.
    pub param: Option<f64>,
    /// Net removal.
    pub removal: f64,
    /// Evidence micro.
    pub evidence_micro: Option<f64>,
}

impl EvalReport {
    /// Headline rows per threshold.
    pub fn headline(&self) -> Vec<Headline> {
        self.thresholds
            .iter()
            .map(|r| Headline {
                threshold: r.threshold,
                removal_l0: r.removal_l0,
                removal_l1: r.removal_l1,
                removal_l1_l0_net: r.l1_l0.removal_net,
                removal_l0_l1_net: r.l0_l1.removal_net,
                delta_hat: r.delta_hat,
                evidence_micro: r.l1_l0.evidence_micro,
                evidence_recoverable: r.l1_l0.evidence_recoverable,
                trajectories_intact: r.l1_l0.trajectories_intact,
                digest: r.digest.clone(),
            })
            .collect()
    }

    /// Headline rows per baseline setting.
    pub fn baseline_headline(&self) -> Vec<BaselineHeadline> {
        self.baselines.iter().map(|b| BaselineHeadline { baseline: b.baseline.clone(), param: b.param, removal: b.row.removal_net, evidence_micro: b.row.evidence_micro }).collect()
    }
}

/// Look for `name` beside any ancestor of the inputs.
pub fn find_beside(inputs: &[PathBuf], name: &str) -> Option<PathBuf> {
    for i in inputs {
        let abs = std::fs::canonicalize(i).unwrap_or_else(|_| i.clone());
        let mut d = abs.as_path();
        for _ in 0..4 {
            let cand = d.join(name);
            if cand.exists() {
                return Some(cand);
            }
            d = d.parent()?;
        }
    }
    None
}

/// The input files in the order they are tried: all of them, or with
/// `--sample` ordered by the SHA-256 of the file name (deterministic; a larger
/// sample contains a smaller one).
fn sample_order(mut files: Vec<read::Input>, n: Option<usize>) -> Vec<read::Input> {
    use sha2::{Digest, Sha256};
    if n.is_some() {
        let key = |p: &Path| -> Vec<u8> { Sha256::digest(p.file_name().map(|s| s.as_encoded_bytes()).unwrap_or_default()).to_vec() };
        files.sort_by_key(|f| key(&f.path));
    }
    files
}

/// Read the inputs; with `sample = Some(n)`, the first `n` files in sample
/// order that hold a trajectory with observations (metadata files found in a
/// folder do not count), then sorted by path.
fn read_sample(files: Vec<read::Input>, sample: Option<usize>, progress: &mut dyn Progress) -> Result<Vec<(read::Input, Vec<Trajectory>)>> {
    progress.stage("read", sample.map_or(files.len(), |n| n.min(files.len())) as u64);
    let mut out = Vec::new();
    for f in sample_order(files, sample) {
        if sample.is_some_and(|n| out.len() >= n) {
            break;
        }
        let trajs: Vec<Trajectory> = read::read_input(&f)?.unwrap_or_default().into_iter().filter(|t| !t.records.is_empty()).collect();
        // The bar counts files tried, or with a sample the trajectories taken.
        if sample.is_none() || !trajs.is_empty() {
            progress.inc(1);
        }
        if !trajs.is_empty() {
            out.push((f, trajs));
        }
    }
    if sample.is_some() {
        out.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    }
    Ok(out)
}

fn prepare(traj: Trajectory, enc: &mut MemoEncoder<'_>, gold: Option<&GoldPatches>, outcomes: &mut evidence::Outcomes, memo: &mut TokMemo) -> Result<Prep> {
    let dim = enc.info().dim;
    let tok: Vec<u32> = traj.records.iter().map(|r| memo.count(&r.observation)).collect();
    let mut chunks = Vec::with_capacity(traj.records.len());
    for r in &traj.records {
        let mut c = Vec::new();
        enc.chunks(&r.observation, &mut c)?;
        chunks.push(c);
    }
    let flat: Vec<&[u8]> = traj.records.iter().zip(&chunks).flat_map(|(r, cs)| cs.iter().map(move |c| &r.observation[c.clone()])).collect();
    let mut vecs = vec![0.0f32; flat.len() * dim];
    for (t, o) in flat.chunks(64).zip(vecs.chunks_mut(64 * dim)) {
        enc.encode_batch(t, o)?;
    }
    let chunk_tok: Vec<u32> = flat.iter().map(|t| memo.count(t)).collect();
    let mut store = arc_store::MemStore::new();
    for (r, &t) in traj.records.iter().zip(&tok) {
        store.append(&traj.session, r, t)?;
    }
    let (evidence, candidates) = match gold.and_then(|g| g.get(&traj.session.0)) {
        Some(patch) => {
            let cand = evidence_lines(patch);
            let n = cand.len();
            let w: Vec<Vec<u8>> = cand.into_iter().map(String::into_bytes).filter(|l| traj.records.iter().any(|r| contains(&r.observation, l))).collect();
            (Some(w), n)
        }
        None => (None, 0),
    };
    let resolved = if evidence.is_some() { outcomes.outcome(&traj.source, &traj.session.0) } else { None };
    // Retrieval: distinct non-empty action texts as queries (first chunk of each).
    let mut seen = std::collections::HashSet::new();
    let actions: Vec<&[u8]> = traj.records.iter().map(|r| r.action.as_bytes()).filter(|a| !a.is_empty() && seen.insert(*a)).collect();
    let mut queries = Vec::new();
    let n = flat.len();
    if n > 0 && !actions.is_empty() {
        let mut qtexts = Vec::with_capacity(actions.len());
        for a in &actions {
            let mut c = Vec::new();
            enc.chunks(a, &mut c)?;
            if let Some(first) = c.first() {
                qtexts.push(&a[first.clone()]);
            }
        }
        let mut qv = vec![0.0f32; qtexts.len() * dim];
        for (t, o) in qtexts.chunks(64).zip(qv.chunks_mut(64 * dim)) {
            enc.encode_batch(t, o)?;
        }
        for q in qv.chunks_exact(dim) {
            let mut s: Vec<(f32, u32)> = vecs.chunks_exact(dim).enumerate().map(|(i, c)| (q.iter().zip(c).map(|(a, b)| a * b).sum::<f32>(), i as u32)).collect();
            s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            queries.push(s.into_iter().map(|x| x.1).collect());
        }
    }
    Ok(Prep { traj, tok, chunks, vecs, chunk_tok, evidence, candidates, resolved, store, queries, input: 0 })
}

/// Per-threshold accumulators.
#[derive(Default)]
struct ThAcc {
    l1l0: Agg,
    l0l1: Agg,
    l1_alone: Agg,
    tok_in: u64,
    tok_l1_first: u64,
    delta_hat: f64,
    dh_ratio: Vec<f64>,
    dist: Vec<(f32, u32)>,
    retained: u64,
    retained_2d: u64,
    cluster_sizes: Vec<u64>,
    r_hits: [u64; 3],
    r_queries: u64,
    digest: DeletionDigest,
    equal: bool,
}

fn weighted_quantile(sorted: &[(f32, u32)], total: f64, q: f64) -> Option<f64> {
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
pub fn evaluate(inputs: &[PathBuf], enc: &mut dyn Encoder, o: &Options, progress: &mut dyn Progress) -> Result<EvalReport> {
    let start = Instant::now();
    let info = enc.info();
    let dim = info.dim;
    let mut thresholds = o.thresholds.clone();
    thresholds.sort_by(|a, b| b.total_cmp(a));
    thresholds.dedup();
    let ths: Vec<Threshold> = thresholds.iter().map(|&t| Threshold::from_cosine(t)).collect::<Result<_, _>>()?;
    let files = read_sample(read::expand_inputs(inputs)?, o.sample, progress)?;
    if files.is_empty() {
        bail!("no trajectory files under {inputs:?}");
    }
    let gold_path = o.gold.clone().or_else(|| find_beside(inputs, "swebench-gold-patches"));
    let gold = match &gold_path {
        Some(p) => Some(GoldPatches::load(p)?),
        None => None,
    };
    let mut outcomes = evidence::Outcomes::default();
    let mut memo = TokMemo::default();
    let mut menc = MemoEncoder { inner: enc, chunks: RefCell::new(HashMap::new()), chunk_time: RefCell::new(Duration::ZERO), encode_time: Duration::ZERO };

    // 1. Read and prepare (chunk, embed, count) every trajectory once.
    progress.stage("embed", files.len() as u64);
    let mut preps: Vec<Prep> = Vec::new();
    for (f, trajs) in files {
        for t in trajs {
            let name = format!("{}: session {}", f.path.display(), t.session);
            let mut p = prepare(t, &mut menc, gold.as_ref(), &mut outcomes, &mut memo).context(name)?;
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
        let s = score(p, &mut memo, &orig, None, &[]);
        none_agg.add(p, &s, o);
        split.add(p, "none", &s, o);
        let mut l0 = LineDedup::new();
        let mut book = lam_core::IdBook::new();
        let (mut l0_res, mut l0_stubs, mut l0_gross) = (Vec::new(), Vec::new(), Vec::new());
        for r in &p.traj.records {
            let id = book.visible(lam_core::ObsId::of(r.action.as_bytes(), &r.observation)).to_string();
            let mut out = Vec::new();
            l0.process(r.index, &id, &[Segment::Text(&r.observation)], &mut out);
            let st: Vec<Stub> = l0.last_stubs().iter().cloned().map(Stub::Lines).collect();
            l0_gross.push(memo.count(&without_stubs(&out, &st)) as u64);
            l0_stubs.extend(st);
            l0_res.push(out);
        }
        l0_first += l0_gross.iter().sum::<u64>();
        let rs: Vec<&[u8]> = l0_res.iter().map(Vec::as_slice).collect();
        let s = score(p, &mut memo, &rs, Some(&l0_gross), &l0_stubs);
        l0_agg.add(p, &s, o);
        split.add(p, "l0", &s, o);

        for (ti, th) in ths.iter().enumerate() {
            let a = &mut acc[ti];
            let mut runs = Vec::with_capacity(2);
            for order in [Order::L1L0, Order::L0L1] {
                let mut cfg = Config::new(*th);
                cfg.order = order;
                let run = report::run(cfg, &mut menc, &p.traj, false).with_context(|| format!("session {} at t={}", p.traj.session, th.cosine()))?;
                a.equal &= run.report.online_equals_batch;
                let res: Vec<&[u8]> = run.online.iter().map(|x| x.residual.as_slice()).collect();
                let gross: Vec<u64> = run.online.iter().map(|x| if x.stubs.is_empty() { memo.count(&x.residual) as u64 } else { memo.count(&without_stubs(&x.residual, &x.stubs)) as u64 }).collect();
                let stubs: Vec<Stub> = run.online.iter().flat_map(|x| x.stubs.iter().cloned()).collect();
                let s = score(p, &mut memo, &res, Some(&gross), &stubs);
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
            let s1 = score(p, &mut memo, &first, None, &[]);
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
        let h_pi = if n_chunks == 0 { 0.0 } else { -a.cluster_sizes.iter().map(|&c| { let q = c as f64 / nf; q * q.log2() }).sum::<f64>() };
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
        BaselineRow { baseline: "none".into(), param: None, row: none_agg.row(o), seed_removal: None, seed_evidence: None, jaccard_mean: None, common_share: None },
        BaselineRow { baseline: "l0".into(), param: None, row: l0_agg.row(o), seed_removal: None, seed_evidence: None, jaccard_mean: None, common_share: None },
    ];
    progress.stage("masking", o.masking.len() as u64);
    for &k in &o.masking {
        let mut agg = Agg::default();
        for p in &preps {
            let n = p.traj.records.len();
            let cut = n.saturating_sub(k);
            let res: Vec<Vec<u8>> = p.traj.records.iter().take(cut).map(|r| masking_placeholder(&r.observation)).collect();
            let res: Vec<&[u8]> = res.iter().map(Vec::as_slice).chain(p.traj.records[cut..].iter().map(|r| r.observation.as_slice())).collect();
            let gross: Vec<u64> = p.tok.iter().enumerate().map(|(i, &t)| if i < cut { 0 } else { t as u64 }).collect();
            let s = score(p, &mut memo, &res, Some(&gross), &[]);
            agg.add(p, &s, o);
            split.add(p, &format!("masking@{k}"), &s, o);
        }
        baselines.push(BaselineRow { baseline: "masking".into(), param: Some(k as f64), row: agg.row(o), seed_removal: None, seed_evidence: None, jaccard_mean: None, common_share: None });
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
        let pts: Vec<(String, &SettingRow)> = baselines.iter().filter(|b| b.baseline == fam).map(|b| (b.param.map(|p| format!("{p}")).unwrap_or_else(|| fam.to_string()), &b.row)).collect();
        if !pts.is_empty() {
            ecr.push(ecr_of(fam, &pts, &o.taus));
        }
    }
    let rsc: Vec<f64> = rows.iter().filter_map(|r| r.l1_l0.rsc).collect();
    let rsc_non_increasing = if rsc.is_empty() { None } else { Some(rsc.windows(2).all(|w| w[1] <= w[0] + 1e-12) && none_agg.row(o).rsc.is_none_or(|r0| rsc[0] <= r0 + 1e-12)) };

    // 5. LoCoMo.
    let locomo = if o.no_locomo {
        None
    } else {
        match o.locomo.clone().or_else(|| find_beside(inputs, "locomo/locomo10.json")) {
            Some(p) => {
                progress.stage("locomo", 1);
                let l = locomo_control(&p, &mut menc, 0.95)?;
                progress.inc(1);
                Some(l)
            }
            None => None,
        }
    };

    let by_input = if inputs.len() > 1 { split.summaries(inputs, &preps, &thresholds, &o.masking, o) } else { Vec::new() };

    let encode_s = menc.encode_time.as_secs_f64();
    let chunking_s = menc.chunk_time.borrow().as_secs_f64();
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
        timing: Timing { wall_s, encode_s, chunking_s, encode_share: if wall_s > 0.0 { (encode_s + chunking_s) / wall_s } else { 0.0 }, sweep_s, baselines_s },
    })
}

/// What observation masking leaves of an observation older than the window:
/// SWE-agent's `LastNObservations` placeholder (the masking of Lindenbauer et
/// al., 2025), charged in the net removal; the gross removal drops it. An
/// empty observation stays empty.
pub fn masking_placeholder(obs: &[u8]) -> Vec<u8> {
    if obs.is_empty() {
        return Vec::new();
    }
    let lines = obs.split(|&b| b == b'\n').count() - usize::from(obs.ends_with(b"\n"));
    format!("Old environment output: ({lines} lines omitted)").into_bytes()
}

/// The specificity control of the evidence metric (LAM F.3): each
/// trajectory's witnessed lines searched in the original observations of an
/// unrelated trajectory (the gold-joined trajectory half the list away, the
/// next one with a different instance id).
fn evidence_control(preps: &[Prep]) -> Option<EvidenceControl> {
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

fn ecr_of(family: &str, pts: &[(String, &SettingRow)], taus: &[f64]) -> Ecr {
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

/// SemDeDup across the corpus and within each trajectory, for every seed and threshold.
fn semdedup(preps: &[Prep], dim: usize, o: &Options, memo: &mut TokMemo, progress: &mut dyn Progress) -> Vec<BaselineRow> {
    let seeds = o.semdedup_seeds.max(1);
    let mut base = Vec::with_capacity(preps.len());
    let mut n = 0usize;
    for p in preps {
        base.push(n);
        n += p.n_chunks();
    }
    let all: Vec<f32> = preps.iter().flat_map(|p| p.vecs.iter().copied()).collect();
    let cs = o.semdedup_cluster_size.max(1);
    let mut ths = o.semdedup_thresholds.clone();
    ths.sort_by(|a, b| b.total_cmp(a));
    ths.dedup();
    progress.stage("semdedup", 2 * seeds);
    let mut out = Vec::new();
    for scope in ["semdedup-global", "semdedup-trajectory"] {
        // scores[seed][global chunk]
        let mut scores: Vec<Vec<f32>> = Vec::new();
        for seed in 0..seeds {
            let sc = if scope == "semdedup-global" {
                let (a, s) = baselines::kmeans(&all, dim, n.div_ceil(cs), seed, o.kmeans_iters);
                baselines::semdedup_scores(&all, dim, &a, &s)
            } else {
                let mut v = Vec::with_capacity(n);
                for p in preps {
                    let m = p.n_chunks();
                    let (a, s) = baselines::kmeans(&p.vecs, dim, m.div_ceil(cs), seed.wrapping_add(1_000_003), o.kmeans_iters);
                    v.extend(baselines::semdedup_scores(&p.vecs, dim, &a, &s));
                }
                v
            };
            scores.push(sc);
            progress.inc(1);
        }
        for &t in &ths {
            let tf = t as f32;
            let mut aggs = Vec::new();
            let mut sets: Vec<Vec<u32>> = Vec::new();
            let mut mean = Agg::default();
            for sc in &scores {
                let set: Vec<u32> = (0..n as u32).filter(|&i| sc[i as usize] >= tf).collect();
                let mut agg = Agg::default();
                for (pi, p) in preps.iter().enumerate() {
                    let b = base[pi];
                    let mut k = 0usize;
                    let res: Vec<Vec<u8>> = p
                        .traj
                        .records
                        .iter()
                        .zip(&p.chunks)
                        .map(|(r, cs)| {
                            let mut keep = Vec::with_capacity(r.observation.len());
                            let mut at = 0usize;
                            for c in cs {
                                if sc[b + k] >= tf {
                                    keep.extend_from_slice(&r.observation[at..c.start]);
                                    at = c.end;
                                }
                                k += 1;
                            }
                            keep.extend_from_slice(&r.observation[at..]);
                            keep
                        })
                        .collect();
                    let rs: Vec<&[u8]> = res.iter().map(Vec::as_slice).collect();
                    let s = score(p, memo, &rs, None, &[]);
                    agg.add(p, &s, o);
                }
                sets.push(set);
                aggs.push(agg);
            }
            // The mean row: token and line counts averaged over seeds.
            for a in &aggs {
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
            let mut row = mean.row(o);
            // Removal from the exact per-seed mean rather than rounded counts.
            let per: Vec<SettingRow> = aggs.iter().map(|a| a.row(o)).collect();
            row.removal_net = per.iter().map(|r| r.removal_net).sum::<f64>() / k as f64;
            row.removal_gross = row.removal_net;
            let mut js = Vec::new();
            for i in 0..sets.len() {
                for j in i + 1..sets.len() {
                    js.push(baselines::jaccard(&sets[i], &sets[j]));
                }
            }
            let union: std::collections::BTreeSet<u32> = sets.iter().flatten().copied().collect();
            let common = union.iter().filter(|x| sets.iter().all(|s| s.binary_search(x).is_ok())).count();
            out.push(BaselineRow {
                baseline: scope.into(),
                param: Some(t),
                seed_removal: Some(per.iter().map(|r| r.removal_net).collect()),
                seed_evidence: Some(per.iter().map(|r| r.evidence_micro).collect()),
                jaccard_mean: if js.is_empty() { None } else { Some(js.iter().sum::<f64>() / js.len() as f64) },
                common_share: if union.is_empty() { None } else { Some(common as f64 / union.len() as f64) },
                row,
            });
        }
    }
    out
}

/// Near-duplicate pairs among all LoCoMo dialogue turns at threshold `t`.
fn locomo_control(path: &Path, enc: &mut MemoEncoder<'_>, t: f64) -> Result<Locomo> {
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

/// Write `report.json`, `report.md` and the SVG plots into `dir`.
pub fn write_report(r: &EvalReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut put = |name: &str, body: &[u8]| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
        written.push(p);
        Ok(())
    };
    put("report.json", &serde_json::to_vec_pretty(r)?)?;
    put("report.md", markdown(r).as_bytes())?;
    put("removal-vs-evidence.svg", plot_removal_evidence(r).render().as_bytes())?;
    let mut zoom = plot_removal_evidence(r);
    zoom.xmax = Some(2.0);
    zoom.title = format!("{} (evidence lost <= 2%)", zoom.title);
    put("removal-vs-evidence-zoom.svg", zoom.render().as_bytes())?;
    put("removal-vs-size.svg", plot_removal_size(r).render().as_bytes())?;
    Ok(written)
}

/// Figure 3: token removal (y) against evidence lost (x), one marker per setting.
pub fn plot_removal_evidence(r: &EvalReport) -> svg::Chart {
    use svg::{COLORS, Point, Series};
    let pt = |row: &SettingRow, label: String, yerr: Option<(f64, f64)>| Point { x: 100.0 * (1.0 - row.evidence_micro.unwrap_or(f64::NAN)), y: 100.0 * row.removal_net, label, yerr };
    let mut series = vec![Series { name: "LAM L1->L0 (net)".into(), color: COLORS[0], line: true, points: r.thresholds.iter().map(|t| pt(&t.l1_l0, format!("t={}", t.threshold), None)).collect() }];
    series.push(Series { name: "LAM L0->L1 (net)".into(), color: COLORS[5], line: true, points: r.thresholds.iter().map(|t| pt(&t.l0_l1, String::new(), None)).collect() });
    for (i, (fam, name)) in [("l0", "L0 alone"), ("masking", "masking (last k)"), ("semdedup-global", "SemDeDup global"), ("semdedup-trajectory", "SemDeDup per trajectory")].iter().enumerate() {
        let pts: Vec<Point> = r
            .baselines
            .iter()
            .filter(|b| b.baseline == *fam)
            .map(|b| {
                let label = match (*fam, b.param) {
                    ("masking", Some(k)) => format!("k={k}"),
                    (_, Some(t)) => format!("{t}"),
                    _ => String::new(),
                };
                let yerr = b.seed_removal.as_ref().map(|v| (100.0 * v.iter().cloned().fold(f64::INFINITY, f64::min), 100.0 * v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)));
                pt(&b.row, label, yerr)
            })
            .collect();
        if !pts.is_empty() {
            series.push(Series { name: name.to_string(), color: COLORS[i + 1], line: *fam != "l0", points: pts });
        }
    }
    svg::Chart {
        title: format!("Token removal vs evidence lost ({} trajectories)", r.trajectories),
        xlabel: "gold-patch evidence lines lost (%, stubs count as lost)".into(),
        ylabel: "observation tokens removed (%, net of stubs)".into(),
        log2_x: false,
        series,
        xmax: None,
    }
}

/// Figure 9b: removal against input size T.
pub fn plot_removal_size(r: &EvalReport) -> svg::Chart {
    use svg::{COLORS, Point, Series};
    let mut series = Vec::new();
    for (i, t) in r.thresholds.iter().enumerate() {
        series.push(Series {
            name: format!("LAM t={}", t.threshold),
            color: svg::COLORS[i % COLORS.len()],
            line: true,
            points: t
                .l1_l0
                .by_size
                .iter()
                .filter_map(|s| s.removal.map(|x| Point { x: s.size as f64, y: 100.0 * x, label: if i == 0 { format!("n={}", s.trajectories) } else { String::new() }, yerr: None }))
                .collect(),
        });
    }
    if let Some(b) = r.baselines.iter().find(|b| b.baseline == "l0") {
        series.push(Series {
            name: "L0 alone".into(),
            color: "#000000",
            line: true,
            points: b.row.by_size.iter().filter_map(|s| s.removal.map(|x| Point { x: s.size as f64, y: 100.0 * x, label: String::new(), yerr: None })).collect(),
        });
    }
    svg::Chart { title: "Removal vs input size T (trajectories reaching T)".into(), xlabel: "input size T (observation tokens, log scale)".into(), ylabel: "tokens removed (%, net)".into(), log2_x: true, series, xmax: None }
}
