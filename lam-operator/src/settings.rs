//! The engine's settings, one value for every surface that admits a
//! conversation (feature `settings`, which brings `lam-encode`).

use crate::Config;
use lam_core::{Threshold, TokenCounter};
use lam_encode::{Cache, Cached, EncoderSpec};

/// The engine's settings: everything that decides which bytes the proxy
/// forwards for a conversation. One value, built once from one set of
/// options (`lam serve`, `lam run` and `lam replay` flatten the same
/// `EngineOpts`), with one default per setting; the Python package builds
/// its sessions from it too.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Merge threshold t (validated; default [`Threshold::DEFAULT`], 0.95).
    pub threshold: Threshold,
    /// The encoder (default BERT, all-MiniLM-L6-v2).
    pub encoder: EncoderSpec,
    /// Its embedding cache (default `$LAM_HOME/cache/MODEL.lamemb`).
    pub cache: Cache,
    /// Encoders loaded: sessions that can admit at once (default: CPU cores, at most 4).
    pub encoders: usize,
    /// User turns after the task are observations too.
    pub user_turns: bool,
    /// Tools whose results are forwarded verbatim (still archived).
    pub keep_tools: Vec<String>,
    /// How stubs name the way to recall an original (`lam_core::stub::Recall`).
    /// Default `Recall::None`: through the proxy the agent usually has no
    /// recall tool, so stubs carry no handle; with `lam mcp` configured in
    /// the agent, name its tool as the agent sees it (`mcp__lam__recall`,
    /// `lam_trajectory::agents::Agent::recall_tool`).
    pub recall: lam_core::stub::Recall<'static>,
    /// A hard bound on the input a request forwards (`--budget`): none by default.
    pub budget: Option<Budget>,
}

/// `--budget TOKENS`: when the input a request would forward exceeds
/// `tokens`, the oldest tool results the model has answered (never the
/// newest `keep`) are replaced by ARC citations until it is at or under
/// `target`. Tokens are cl100k of the bytes forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The bound.
    pub tokens: u64,
    /// What a cut brings the input down to (default half the bound, at least 1): the
    /// prefix changes once per cut, not every request.
    pub target: u64,
    /// The newest tool results never cited (default 3).
    pub keep: u32,
}

impl Budget {
    /// The newest tool results kept by default.
    pub const KEEP: u32 = 3;

    /// A budget of `tokens` (at least 1), cutting to `target` (default half
    /// of it, at least 1), keeping the newest `keep` results (default
    /// [`Budget::KEEP`]).
    pub fn new(tokens: u64, target: Option<u64>, keep: Option<u32>) -> Result<Self, String> {
        if tokens == 0 {
            return Err("--budget 0: expected at least 1 token".into());
        }
        // The default is always within 1..=tokens; only a given target can be out.
        let target = target.unwrap_or((tokens / 2).max(1));
        if target == 0 || target > tokens {
            return Err(format!("--budget {tokens} --budget-target {target}: expected 0 < target <= budget"));
        }
        Ok(Self { tokens, target, keep: keep.unwrap_or(Self::KEEP) })
    }

    /// The budget in lam's tokens when the upstream counts `factor` (>= 1)
    /// of its tokens per token of lam's.
    pub fn scaled(self, factor: f64) -> Self {
        let f = factor.max(1.0);
        let scale = |t: u64| ((t as f64 / f).floor() as u64).max(1);
        Self { tokens: scale(self.tokens), target: scale(self.target), keep: self.keep }
    }
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            threshold: Threshold::DEFAULT,
            encoder: EncoderSpec::new(lam_encode::Backend::Bert),
            cache: Cache::Default,
            encoders: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            user_turns: false,
            keep_tools: Vec::new(),
            recall: lam_core::stub::Recall::None,
            budget: None,
        }
    }
}

impl EngineSettings {
    /// The defaults with the model-free hashing encoder, no cache file and two encoders.
    pub fn for_tests() -> Self {
        Self { encoder: EncoderSpec::new(lam_encode::Backend::Hashing), cache: Cache::Off, encoders: 2, ..Self::default() }
    }

    /// The operator settings these give, counting tokens with `counter`.
    pub fn operator(&self, counter: &'static dyn TokenCounter) -> Config {
        Config::new(self.threshold).with_counter(counter).with_recall(self.recall)
    }

    /// What of these settings decides the bytes forwarded, one `key: value`
    /// line each (`model`: the loaded encoder's model id, which names its
    /// weights' digest). Processes that archive one conversation in one store
    /// session (replicas of a proxy under one `lam serve --run`) must agree on
    /// it, or they would forward other bytes for the same request. The cache
    /// and the number of encoders are not in it: they change only speed.
    pub fn identity(&self, model: &str) -> String {
        let mut kept = self.keep_tools.clone();
        kept.sort();
        kept.dedup();
        let mut s = format!(
            "lam settings/1\nthreshold: {}\nencoder: {model}\nrecall: {}\nuser-turns: {}\nkeep-tools: {}\n",
            self.threshold,
            self.recall,
            self.user_turns,
            kept.join(",")
        );
        // A line only when set, so a run recorded without a budget reads the same.
        if let Some(b) = self.budget {
            s.push_str(&format!("budget: {} target {} keep {}\n", b.tokens, b.target, b.keep));
        }
        s
    }

    /// One encoder behind its embedding cache, and the file the cache is saved to.
    pub fn load_encoder(&self) -> Result<Cached, lam_encode::Error> {
        load_cached(&self.encoder, &self.cache)
    }
}

/// The encoder `spec` names behind the embedding cache `cache`, and the
/// file that cache is saved to: [`EncoderSpec::load_cached`], with a shared
/// cache ([`Cache::Shared`], `postgres://...`) opened and attached
/// (`arc_store::open_embeddings`; one connection per encoder).
pub fn load_cached(spec: &EncoderSpec, cache: &Cache) -> Result<Cached, lam_encode::Error> {
    let (mut enc, path) = spec.load_cached(cache)?;
    if let Cache::Shared(url) = cache {
        let store = arc_store::open_embeddings(url)
            .map_err(|e| lam_encode::Error::CacheSpec { spec: lam_core::redact::url(url), reason: format!("opening the shared embedding cache: {e}") })?;
        enc.share(store);
    }
    Ok((enc, path))
}
