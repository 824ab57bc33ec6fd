//! `lam recall`: the exact bytes of an archived observation, or one part.

use anyhow::{Context, Result};
use arc_store::Access;
use arc_view::{cut_parts, parse_part};
use lam_core::SessionId;
use lam_trajectory::Cl100k;
use std::io::Write;

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

pub fn run(a: RecallArgs) -> Result<()> {
    let store = crate::opts::open_store(&a.store, Access::ReadOnly)?;
    let session = a.session.as_deref().map(SessionId::from);
    let found = arc_store::find(store.as_ref(), session.as_ref(), &a.id).with_context(|| format!("recall from {}", a.store))?;
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
