use super::*;

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
    /// Run the controls (the LoCoMo control: minutes with a real encoder);
    /// off by default, and the report says they were not run.
    pub controls: bool,
    /// Evidence tau floors for ECR.
    pub taus: Vec<f64>,
    /// How stubs write their recall handle (`lam_core::stub::Recall`):
    /// stub cost and net removal depend on it.
    pub recall: lam_core::stub::Recall<'static>,
    /// Forward a near-duplicate output as one stub and its difference
    /// (`lam_operator::Config::delta`; default on). Off: every repeated run
    /// is a line stub of its own (the v6 form, for comparison).
    pub delta: bool,
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
            controls: false,
            taus: vec![1.0, 0.999, 0.99, 0.95],
            recall: lam_core::stub::Recall::ARC,
            delta: true,
        }
    }
}

/// Progress reporting (the command draws a bar; tests pass [`NoProgress`]).
pub trait Progress {
    /// A new stage with `total` steps.
    fn stage(&mut self, name: &str, total: u64);
    /// `n` steps done.
    fn inc(&mut self, n: u64);
    /// A one-line message for the user (e.g. a time estimate before a long stage).
    fn note(&mut self, _message: &str) {}
}

/// Progress that draws nothing.
#[derive(Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&mut self, _: &str, _: u64) {}
    fn inc(&mut self, _: u64) {}
}
