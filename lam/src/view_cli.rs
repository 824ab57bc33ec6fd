//! `lam view` and `lam recall`.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use lam::read;
use lam::tokens::Cl100k;
use lam::operator::LamArcView;
use lam::view::{ArcConfig, ArcView, FullContext, ObservationMasking, SlidingWindow, cut_parts};
use arc_store::{Access, StoreSpec};
use lam_core::{ObsStore, Rendered, SessionId, ViewPolicy};
use std::io::Write;
use std::path::PathBuf;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum PolicyArg {
    /// ARC: summary with citations, catalog page, exact recall.
    Arc,
    /// ARC over LAM residuals: near-duplicate chunks and repeated lines as stubs citing the archive.
    Lam,
    /// The last N turns (--window).
    Window,
    /// Every action, the last K observations (--mask).
    Masking,
    /// Everything verbatim (overflows).
    Full,
}

/// The budget and policy parameters shared by `lam view` and `lam costmodel replay`.
#[derive(clap::Args, Clone, Copy)]
pub struct PolicyOpts {
    /// Context window L_ctx in cl100k_base tokens.
    #[arg(long, default_value_t = 16_000)]
    pub budget: usize,
    /// Tokens reserved for the completion G_max (the view limit is L = budget - completion).
    #[arg(long, default_value_t = 0)]
    pub completion: usize,
    /// Turns kept by the `window` policy.
    #[arg(long, default_value_t = 5)]
    pub window: usize,
    /// Observations kept by the `masking` policy.
    #[arg(long, default_value_t = 10)]
    pub mask: usize,
    /// Merge threshold of the `lam` policy.
    #[arg(long, default_value_t = 0.95)]
    pub threshold: f64,
}

impl PolicyOpts {
    /// The view limit L = budget - completion.
    pub fn limit(&self) -> Result<usize> {
        self.budget.checked_sub(self.completion).context("--completion exceeds --budget")
    }
}

/// One policy's view of a trajectory, turn by turn: ARC (optionally over LAM
/// residuals, archive first) or a baseline, all behind `ViewPolicy`.
pub struct Driver(Box<dyn ViewPolicy>);

impl Driver {
    /// The policy `p` over a trajectory with prefix `task`, archiving into `store`.
    pub fn new(p: PolicyArg, o: &PolicyOpts, enc: &crate::EncoderOpts, traj: &read::Trajectory, store: Box<dyn ObsStore>) -> Result<Self> {
        let limit = o.limit()?;
        let arc_cfg = || {
            let mut cfg = ArcConfig::with_limit(o.budget);
            cfg.completion = o.completion;
            cfg
        };
        Ok(Driver(match p {
            PolicyArg::Arc => Box::new(ArcView::new(arc_cfg(), traj.session.clone(), &traj.task, store, Cl100k)?),
            PolicyArg::Lam => {
                let mut c = lam::operator::Config::new(lam_core::Threshold::from_cosine(o.threshold)?);
                c.encode_batch = enc.batch;
                Box::new(LamArcView::new(arc_cfg(), c, traj.session.clone(), &traj.task, store, Cl100k, crate::make_encoder(enc)?)?)
            }
            PolicyArg::Window => Box::new(SlidingWindow::new(&traj.task, Cl100k, o.window, limit)),
            PolicyArg::Masking => Box::new(ObservationMasking::new(&traj.task, Cl100k, o.mask, limit)),
            PolicyArg::Full => Box::new(FullContext::new(&traj.task, Cl100k)),
        }))
    }

    /// The policy's name in reports.
    pub fn name(&self) -> String {
        self.0.name()
    }

    /// One turn: the agent's thought and action, then (unless the action is
    /// a command the view answers itself) the observation.
    pub fn push(&mut self, t: &lam_core::Turn) -> Result<()> {
        Ok(self.0.push(t)?)
    }

    /// The prompt the model sees now (ARC compacts here when it would).
    pub fn render(&mut self) -> Result<Rendered> {
        Ok(self.0.render()?)
    }
}

#[derive(clap::Args)]
pub struct ViewArgs {
    /// A trajectory file (mini-swe-agent, SWE-agent, OpenAI chat, lam JSONL; .gz ok).
    trajectory: PathBuf,
    #[command(flatten)]
    opts: PolicyOpts,
    /// View policy.
    #[arg(long, value_enum, default_value = "arc")]
    policy: PolicyArg,
    /// Render the view the model sees before call N (after N turns); default: after the last turn.
    #[arg(long)]
    at_turn: Option<usize>,
    /// Archive the trajectory into this store (a FileStore directory; `postgres://...` where built in); default: in memory.
    #[arg(long)]
    store: Option<String>,
    /// Session within a multi-session JSONL file.
    #[arg(long)]
    session: Option<String>,
    /// Print `{"policy","turn","tokens","limit","citations","text"}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    enc: crate::EncoderOpts,
}

#[derive(clap::Args)]
pub struct RecallArgs {
    /// Store written by `lam view --store` or `lam compact --store`: a directory (or `postgres://...` where built in).
    #[arg(long)]
    store: String,
    /// The id, as cited (`§a1b2c3d4` or `a1b2c3d4`).
    id: String,
    /// Part `K` or `K/N` of the observation in parts of at most --part-tokens tokens.
    chunk: Option<String>,
    /// Session holding the id (needed only when sessions show the id for different observations).
    #[arg(long)]
    session: Option<String>,
    /// Payload tokens per part (ARC's q).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..))]
    part_tokens: u32,
}

fn open_store(spec: &Option<String>) -> Result<Box<dyn ObsStore>> {
    Ok(match spec {
        Some(s) => {
            let spec = StoreSpec::parse(s)?;
            Box::new(arc_store::open(&spec, Access::ReadWrite).with_context(|| format!("opening store {}", spec.display()))?)
        }
        None => Box::new(lam::store::MemStore::new()),
    })
}

pub fn view(a: ViewArgs) -> Result<()> {
    let trajs = read::read_path(&a.trajectory)?;
    let traj = match &a.session {
        Some(s) => trajs.into_iter().find(|t| &t.session.0 == s).with_context(|| format!("{}: no session `{s}`", a.trajectory.display()))?,
        None => trajs.into_iter().next().with_context(|| format!("{}: no session", a.trajectory.display()))?,
    };
    let turns = traj.turns();
    let n = a.at_turn.unwrap_or(turns.len());
    if n > turns.len() {
        bail!("--at-turn {n}: {} has {} turns", a.trajectory.display(), turns.len());
    }
    let limit = a.opts.limit()?;
    let mut d = Driver::new(a.policy, &a.opts, &a.enc, &traj, open_store(&a.store)?)?;
    // One model call after every turn: ARC compacts when it would.
    let mut last = None;
    for t in &turns[..n] {
        d.push(t)?;
        last = Some(d.render()?);
    }
    let Rendered { text, tokens, citations, .. } = match last {
        Some(x) => x,
        None => d.render()?,
    };
    let name = d.name();
    let whole = lam::tokens::count(text.as_bytes());
    if whole != tokens {
        eprintln!("note: entry counts sum to {tokens} tokens, the whole view counts {whole}");
    }
    if a.json {
        let v = serde_json::json!({ "policy": name, "turn": n, "tokens": whole, "limit": limit, "citations": citations, "text": text });
        println!("{v}");
    } else {
        print!("{text}");
        eprintln!("[{name}: {whole} tokens of {limit} after {n} turns; {} citations]", citations.len());
    }
    Ok(())
}

/// `K` or `K/N` (1-based; `N`, when given, must be the part count).
fn parse_part(s: &str, parts: usize) -> Result<usize> {
    let (k, n) = match s.split_once('/') {
        Some((k, n)) => (k, Some(n)),
        None => (s, None),
    };
    let k: usize = k.parse().with_context(|| format!("part `{s}`: expected K or K/N with whole numbers"))?;
    if let Some(n) = n {
        let n: usize = n.parse().with_context(|| format!("part `{s}`: expected K or K/N with whole numbers"))?;
        if n != parts {
            bail!("part `{s}`: the observation has {parts} part{} at this --part-tokens, not {n}", if parts == 1 { "" } else { "s" });
        }
    }
    if k == 0 || k > parts {
        bail!("part {k} does not exist: the observation has {parts} part{}", if parts == 1 { "" } else { "s" });
    }
    Ok(k)
}

pub fn recall(a: RecallArgs) -> Result<()> {
    let spec = StoreSpec::parse(&a.store)?;
    let store = arc_store::open(&spec, Access::ReadOnly).with_context(|| format!("opening store {}", spec.display()))?;
    let session = a.session.as_deref().map(SessionId::from);
    let found = arc_store::find(store.as_ref(), session.as_ref(), &a.id).with_context(|| format!("recall from {}", spec.display()))?;
    let body = found.bytes;
    let out = match &a.chunk {
        None => &body[..],
        Some(c) => {
            let parts = cut_parts(&Cl100k, &body, a.part_tokens as usize);
            let k = parse_part(c, parts.len()).with_context(|| format!("{} (parts of at most {} tokens)", a.id, a.part_tokens))?;
            &body[parts[k - 1].clone()]
        }
    };
    let stdout = std::io::stdout();
    let mut so = stdout.lock();
    so.write_all(out)?;
    so.flush()?;
    Ok(())
}
