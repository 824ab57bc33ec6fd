//! `lam view`: the bounded prompt a model would see of a trajectory.

use crate::opts::{EncoderOpts, PolicyArg, PolicyOpts};
use anyhow::{Context, Result, bail};
use lam_core::{ObsStore, Rendered};
use lam_eval::policy;
use lam_trajectory::read;
use std::path::PathBuf;

#[derive(clap::Args)]
// The shared budget options, worded here without the paper's bare symbols.
#[command(mut_arg("budget", |a| a.help("Context window in cl100k_base tokens (L_ctx)")))]
#[command(mut_arg("completion", |a| a.help("Tokens reserved for the model's answer (G_max); the view gets budget - completion")))]
pub struct ViewArgs {
    /// A trajectory file (mini-swe-agent, SWE-agent, OpenAI chat, Claude Code transcript, Codex rollout, lam JSONL; .gz ok).
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
    enc: EncoderOpts,
}

pub fn run(a: ViewArgs) -> Result<()> {
    // Sessions named as `lam compact` names them (lam_trajectory::names), so both archive into the same session.
    let mut names = lam_trajectory::SessionNames::new([a.trajectory.as_path()]);
    let mut trajs = Vec::new();
    for mut t in read::read_path(&a.trajectory)? {
        let own = names.assign(&mut t).unwrap_or_else(|| t.session.0.clone());
        trajs.push((own, t));
    }
    let traj = match &a.session {
        Some(s) => trajs.into_iter().find(|(own, t)| own == s || &t.session.0 == s).with_context(|| format!("{}: no session `{s}`", a.trajectory.display()))?.1,
        None => trajs.into_iter().next().with_context(|| format!("{}: no session", a.trajectory.display()))?.1,
    };
    let turns = traj.turns();
    let n = a.at_turn.unwrap_or(turns.len());
    if n > turns.len() {
        bail!("--at-turn {n}: {} has {} turns", a.trajectory.display(), turns.len());
    }
    let limit = a.opts.limit()?;
    let store: Box<dyn ObsStore> = match &a.store {
        Some(s) => Box::new(crate::opts::open_store(s, arc_store::Access::ReadWrite)?),
        None => Box::new(arc_store::MemStore::new()),
    };
    let settings = a.opts.settings(a.enc.batch as usize);
    if let Some(min) = policy::min_budget(a.policy.kind(), &settings, &traj).filter(|&m| a.opts.budget < m) {
        bail!(
            "--budget must be at least {min} for this trajectory (room for its task and the smallest summary, recent-turn, catalog and recall sections{})",
            if a.opts.completion > 0 { ", --completion included" } else { "" }
        );
    }
    // One message, not the same one again as its cause.
    let mut view = policy::build(a.policy.kind(), &settings, &traj, store, || a.enc.load().map_err(|e| lam_eval::Error::Input(format!("{e:#}"))))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    // One model call after every turn: ARC compacts when it would.
    let mut last = None;
    for t in &turns[..n] {
        view.push(t)?;
        last = Some(view.render()?);
    }
    let Rendered { text, tokens, citations, .. } = match last {
        Some(x) => x,
        None => view.render()?,
    };
    let name = view.name();
    let whole = lam_trajectory::tokens::count(text.as_bytes());
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
