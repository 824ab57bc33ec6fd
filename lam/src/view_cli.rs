//! `lam view` and `lam recall`.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use lam::read;
use lam::tokens::Cl100k;
use lam::view::{ArcConfig, ArcView, FullContext, ObservationMasking, SlidingWindow, cut_parts};
use lam_core::{ObsStore, SessionId, TokenCounter, ViewPolicy};
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
/// residuals, archive first) or a baseline behind `ViewPolicy`.
pub enum Driver {
    /// ARC, with the LAM operator and its encoder for `--policy lam`.
    Arc { view: Box<ArcView<Box<dyn ObsStore>, Cl100k>>, session: SessionId, lam: Option<Box<(lam::operator::Session, Box<dyn lam_core::Encoder>)>> },
    /// Window, masking or full context.
    Plain(Box<dyn ViewPolicy>),
}

impl Driver {
    /// The policy `p` over a trajectory with prefix `task`, archiving into `store`.
    pub fn new(p: PolicyArg, o: &PolicyOpts, enc: &crate::EncoderOpts, traj: &read::Trajectory, store: Box<dyn ObsStore>) -> Result<Self> {
        let limit = o.limit()?;
        Ok(match p {
            PolicyArg::Arc | PolicyArg::Lam => {
                let mut cfg = ArcConfig::with_limit(o.budget);
                cfg.completion = o.completion;
                let view = Box::new(ArcView::new(cfg, traj.session.clone(), &traj.task, store, Cl100k)?);
                let lam = if p == PolicyArg::Lam {
                    let e = crate::make_encoder(enc)?;
                    let mut c = lam::operator::Config::new(lam_core::Threshold::from_cosine(o.threshold)?);
                    c.encode_batch = enc.batch;
                    Some(Box::new((lam::operator::Session::new(c, e.info().dim), e)))
                } else {
                    None
                };
                Driver::Arc { view, session: traj.session.clone(), lam }
            }
            PolicyArg::Window => Driver::Plain(Box::new(SlidingWindow::new(&traj.task, Cl100k, o.window, limit))),
            PolicyArg::Masking => Driver::Plain(Box::new(ObservationMasking::new(&traj.task, Cl100k, o.mask, limit))),
            PolicyArg::Full => Driver::Plain(Box::new(FullContext::new(&traj.task, Cl100k))),
        })
    }

    /// The policy's name in reports.
    pub fn name(&self) -> String {
        match self {
            Driver::Arc { lam: Some(_), .. } => "lam".into(),
            Driver::Arc { .. } => "arc".into(),
            Driver::Plain(p) => p.name(),
        }
    }

    /// One turn: the agent's thought and action, then (unless the action is
    /// an ARC command the view answers itself) the observation.
    pub fn push(&mut self, t: &lam_core::Turn) -> Result<()> {
        match self {
            Driver::Arc { view, session, lam } => {
                if view.act(&t.thought, &t.record.action)?.is_none() {
                    match lam.as_deref_mut() {
                        Some((s, enc)) => {
                            let tokens = Cl100k.count(&t.record.observation) as u32;
                            let adm = s.admit_archived(view.store_mut(), session, tokens, enc.as_mut(), &t.record)?;
                            view.push_turn_shown(&t.thought, &t.record, &adm.residual)?;
                        }
                        None => {
                            view.push_turn(&t.thought, &t.record)?;
                        }
                    }
                }
            }
            Driver::Plain(p) => p.push(t)?,
        }
        Ok(())
    }

    /// The prompt the model sees now (ARC compacts here when it would);
    /// returns its tokens and the ids it cites.
    pub fn render(&mut self, text: &mut String) -> Result<(usize, Vec<String>)> {
        Ok(match self {
            Driver::Arc { view, .. } => {
                let st = view.render_view(text)?;
                (st.tokens, st.citations)
            }
            Driver::Plain(p) => (p.render(text)?, Vec::new()),
        })
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
    /// Archive the trajectory into this store directory (FileStore); default: in memory.
    #[arg(long)]
    store: Option<PathBuf>,
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
    /// Store directory written by `lam view --store` or `lam compact --store`.
    #[arg(long)]
    store: PathBuf,
    /// The id, as cited (`§a1b2c3d4` or `a1b2c3d4`).
    id: String,
    /// Part `K` or `K/N` of the observation in parts of at most --part-tokens tokens.
    chunk: Option<String>,
    /// Session holding the id (needed only when several sessions show the same id).
    #[arg(long)]
    session: Option<String>,
    /// Payload tokens per part (ARC's q).
    #[arg(long, default_value_t = 2048)]
    part_tokens: usize,
}

fn open_store(dir: &Option<PathBuf>) -> Result<Box<dyn ObsStore>> {
    Ok(match dir {
        Some(d) => Box::new(lam::store::FileStore::open(d).with_context(|| format!("opening store {}", d.display()))?),
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
    let mut text = String::new();
    // One model call after every turn: ARC compacts when it would (the
    // baselines' views depend on the turns only, so they render once).
    let mut last = None;
    for (i, t) in turns[..n].iter().enumerate() {
        d.push(t)?;
        if matches!(d, Driver::Arc { .. }) || i + 1 == n {
            last = Some(d.render(&mut text)?);
        }
    }
    let (tokens, citations) = match last {
        Some(x) => x,
        None => d.render(&mut text)?,
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

pub fn recall(a: RecallArgs) -> Result<()> {
    let store = lam::store::FileStore::open_read_only(&a.store).with_context(|| format!("opening store {}", a.store.display()))?;
    let shown = a.id.trim_start_matches('§').to_ascii_lowercase();
    let sessions: Vec<SessionId> = match &a.session {
        Some(s) => vec![SessionId(s.clone())],
        None => store.sessions(),
    };
    let mut found = Vec::new();
    for s in &sessions {
        if let Some(b) = store.get(s, &shown)? {
            found.push((s.clone(), b));
        }
    }
    let (session, body) = match found.len() {
        0 => {
            let mut near = Vec::new();
            for s in &sessions {
                for id in lam::view::nearest(&store.ids(s)?, &shown, 3) {
                    near.push(format!("§{id} ({s})"));
                }
            }
            bail!("no §{shown} in {}; nearest: {}", a.store.display(), if near.is_empty() { "none".into() } else { near.join(", ") });
        }
        1 => found.pop().expect("one"),
        _ => bail!(
            "§{shown} exists in several sessions ({}); pass --session",
            found.iter().map(|(s, _)| s.0.as_str()).collect::<Vec<_>>().join(", ")
        ),
    };
    let out = match &a.chunk {
        None => &body[..],
        Some(c) => {
            let k: usize = c.split_once('/').map_or(c.as_str(), |(k, _)| k).parse().with_context(|| format!("part `{c}`: expected K or K/N"))?;
            let parts = cut_parts(&Cl100k, &body, a.part_tokens);
            if k == 0 || k > parts.len() {
                bail!("§{shown} (session {session}) has {} parts of at most {} tokens; part {k} does not exist", parts.len(), a.part_tokens);
            }
            &body[parts[k - 1].clone()]
        }
    };
    let stdout = std::io::stdout();
    let mut so = stdout.lock();
    so.write_all(out)?;
    so.flush()?;
    Ok(())
}
