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

#[derive(clap::Args)]
pub struct ViewArgs {
    /// A trajectory file (mini-swe-agent, SWE-agent, OpenAI chat, lam JSONL; .gz ok).
    trajectory: PathBuf,
    /// Context window L_ctx in cl100k_base tokens.
    #[arg(long, default_value_t = 16_000)]
    budget: usize,
    /// Tokens reserved for the completion G_max (the view limit is L = budget - completion).
    #[arg(long, default_value_t = 0)]
    completion: usize,
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
    /// Turns kept by `--policy window`.
    #[arg(long, default_value_t = 5)]
    window: usize,
    /// Observations kept by `--policy masking`.
    #[arg(long, default_value_t = 10)]
    mask: usize,
    /// Merge threshold for `--policy lam`.
    #[arg(long, default_value_t = 0.95)]
    threshold: f64,
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
    let limit = a.budget.checked_sub(a.completion).context("--completion exceeds --budget")?;
    let mut text = String::new();
    let (name, tokens, citations) = match a.policy {
        PolicyArg::Arc | PolicyArg::Lam => {
            let mut cfg = ArcConfig::with_limit(a.budget);
            cfg.completion = a.completion;
            let mut v = ArcView::new(cfg, traj.session.clone(), &traj.task, open_store(&a.store)?, Cl100k)?;
            let mut lam = None;
            if a.policy == PolicyArg::Lam {
                let enc = crate::make_encoder(&a.enc)?;
                let mut c = lam::operator::Config::new(lam_core::Threshold::from_cosine(a.threshold)?);
                c.encode_batch = a.enc.batch;
                let s = lam::operator::Session::new(c, enc.info().dim);
                lam = Some((s, enc));
            }
            let mut last = None;
            for t in &turns[..n] {
                if v.act(&t.thought, &t.record.action)?.is_none() {
                    match &mut lam {
                        Some((s, enc)) => {
                            let tokens = Cl100k.count(&t.record.observation) as u32;
                            let adm = s.admit_archived(v.store_mut(), &traj.session, tokens, enc.as_mut(), &t.record)?;
                            v.push_turn_shown(&t.thought, &t.record, &adm.residual)?;
                        }
                        None => {
                            v.push_turn(&t.thought, &t.record)?;
                        }
                    }
                }
                // One model call after every turn: compaction happens when it would.
                last = Some(v.render_view(&mut text)?);
            }
            let st = match last {
                Some(s) => s,
                None => v.render_view(&mut text)?,
            };
            let name = if a.policy == PolicyArg::Lam { "lam" } else { "arc" };
            (name.to_string(), st.tokens, st.citations)
        }
        _ => {
            let mut p: Box<dyn ViewPolicy> = match a.policy {
                PolicyArg::Window => Box::new(SlidingWindow::new(&traj.task, Cl100k, a.window, limit)),
                PolicyArg::Masking => Box::new(ObservationMasking::new(&traj.task, Cl100k, a.mask, limit)),
                _ => Box::new(FullContext::new(&traj.task, Cl100k)),
            };
            for t in &turns[..n] {
                p.push(t)?;
            }
            let tokens = p.render(&mut text)?;
            (p.name(), tokens, Vec::new())
        }
    };
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
