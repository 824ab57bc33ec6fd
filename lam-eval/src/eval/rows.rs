use super::*;

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
    /// Stub cost: `removal_gross - removal_net` (the stub lines' share of
    /// the input tokens).
    pub stub_cost: f64,
    /// The part of the stub cost no stub design keeping the guarantees can
    /// avoid (each observation's `_recall §id` once, each L1 representative's
    /// observation id once), as a share of the input tokens: a lower bound.
    pub stub_floor: f64,
    /// Stub lines written (each line of the residuals that stands in text).
    pub stub_lines: u64,
    /// The stub lines' tokens by part, as shares of the input tokens.
    pub stub_parts: StubParts,
    /// Input tokens.
    pub tokens_in: u64,
    /// Output tokens (net).
    pub tokens_out: u64,
    /// Lines shown for the first time (`lam_core::newlines`: text, line
    /// number prefix and surrounding whitespace aside, in no earlier
    /// observation of the trajectory nor earlier in the same one).
    pub new_lines: u64,
    /// New lines that no line of their observation's residual equals: what
    /// the model was never shown.
    pub new_lines_hidden: u64,
    /// The hidden new lines' tokens, as a share of the input tokens.
    pub new_tokens_hidden: f64,
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

/// Where a setting's stub tokens go, each part as a share of the input
/// tokens (each stub line counted on its own, its newline included).
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct StubParts {
    /// The recall handles (`; _recall §id`), one per observation that lost text.
    pub handles: f64,
    /// The earlier calls named, with their backticks.
    pub calls: f64,
    /// The line numbers.
    pub line_numbers: f64,
    /// Everything else: `[lam: `, the verbs, separators, `]`, newlines.
    pub rest: f64,
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
    /// L1 then L0 (default) with the faithful residual (what lam forwards):
    /// gross, net, evidence, feasibility, new lines hidden.
    pub l1_l0: SettingRow,
    /// L1 then L0 with the paper's residual (each run of dropped chunks one
    /// `similar to` stub): the paper's figures.
    pub l1_l0_paper: SettingRow,
    /// L0 then L1, the paper's residual (the paper's ablation).
    pub l0_l1: SettingRow,
    /// L1 alone (its first-layer text): evidence.
    pub l1_alone_evidence_micro: Option<f64>,
    /// l1_l0_paper net minus l0_l1 net (the paper's order effect).
    pub order_effect: f64,
    /// l1_l0_paper gross minus l0_l1 gross.
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

impl BaselineRow {
    /// A baseline run once (no seeds, no overlap statistics).
    pub(super) fn single(baseline: &str, param: Option<f64>, row: SettingRow) -> Self {
        BaselineRow { baseline: baseline.into(), param, row, seed_removal: None, seed_evidence: None, jaccard_mean: None, common_share: None }
    }
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

/// An input `lam eval` could not use (`failed` in its report: `path`, `line`,
/// `record`, `error`), the one form `lam compact` and `lam replay` report too.
pub use lam_trajectory::Unreadable as FailedInput;

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
    /// LoCoMo control (with `controls`).
    pub locomo: Option<Locomo>,
    /// Controls not run (no `controls`): one line saying so and how to run them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controls_not_run: Option<String>,
    /// Timing.
    pub timing: Timing,
    /// Inputs (files, or one trajectory of a file) that could not be read or
    /// prepared, each with its error; every other input was evaluated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedInput>,
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
    /// L0 -> L1 net (the paper's residual).
    pub removal_l0_l1_net: f64,
    /// L1 -> L0 net with the paper's residual.
    pub removal_l1_l0_paper_net: f64,
    /// New lines the faithful L1 -> L0 residual hides (0).
    pub new_lines_hidden: u64,
    /// New lines the paper's L1 -> L0 residual hides, and their share of the input tokens.
    pub new_lines_hidden_paper: u64,
    /// The paper's hidden lines' tokens, as a share of the input tokens.
    pub new_tokens_hidden_paper: f64,
    /// Evidence micro (lossy) of the paper's L1 -> L0 residual.
    pub evidence_micro_paper: Option<f64>,
    /// L1 -> L0 stub cost (gross minus net).
    pub stub_cost_l1_l0: f64,
    /// L1 -> L0 stub floor (`SettingRow::stub_floor`).
    pub stub_floor_l1_l0: f64,
    /// L1 -> L0 stub lines by part (`SettingRow::stub_parts`).
    pub stub_parts_l1_l0: StubParts,
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
                removal_l1_l0_paper_net: r.l1_l0_paper.removal_net,
                new_lines_hidden: r.l1_l0.new_lines_hidden,
                new_lines_hidden_paper: r.l1_l0_paper.new_lines_hidden,
                new_tokens_hidden_paper: r.l1_l0_paper.new_tokens_hidden,
                evidence_micro_paper: r.l1_l0_paper.evidence_micro,
                stub_cost_l1_l0: r.l1_l0.stub_cost,
                stub_floor_l1_l0: r.l1_l0.stub_floor,
                stub_parts_l1_l0: r.l1_l0.stub_parts,
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
        self.baselines
            .iter()
            .map(|b| BaselineHeadline { baseline: b.baseline.clone(), param: b.param, removal: b.row.removal_net, evidence_micro: b.row.evidence_micro })
            .collect()
    }
}
