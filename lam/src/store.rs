//! `lam store check DIR` and `lam store salvage DIR --to NEW`: a FileStore's
//! integrity, over `arc_store::check` and `arc_store::salvage`
//! (docs/store-recovery.md).

use anyhow::{Result, bail};
use arc_store::StoreSpec;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    cmd: StoreCmd,
}

#[derive(clap::Subcommand)]
enum StoreCmd {
    /// Verify every record (framing, CRC-32, SHA-1 content address); print each damaged place; exit 1 when any.
    /// Also warns (path and mode) about the store's directory and files that group or others may access.
    /// Read-only: safe while a writer uses the store.
    Check {
        /// The store directory.
        dir: String,
    },
    /// Rewrite every intact record into a fresh store NEW; copy each damaged place into NEW/quarantine/.
    /// DIR is only read.
    Salvage {
        /// The damaged store directory.
        dir: String,
        /// The fresh store to write (must not exist).
        #[arg(long)]
        to: PathBuf,
    },
}

/// Only a directory store has segments to check; a database keeps its own integrity.
fn dir_of(spec: &str) -> Result<PathBuf> {
    match StoreSpec::parse(spec)? {
        StoreSpec::Dir(d) => Ok(d),
        other => bail!("store {}: check and salvage read a FileStore directory; this is not one", other.display()),
    }
}

pub fn run(a: StoreArgs) -> Result<()> {
    match a.cmd {
        StoreCmd::Check { dir } => {
            let r = arc_store::check(dir_of(&dir)?)?;
            println!("{r}");
            let n = r.damaged().count();
            if n > 0 {
                let dir = arc_store::redact(&dir);
                bail!("{dir}: {n} damaged places (recover the intact records with `lam store salvage {dir} --to NEW`)");
            }
        }
        StoreCmd::Salvage { dir, to } => {
            let r = arc_store::salvage(dir_of(&dir)?, &to)?;
            println!("{r}");
        }
    }
    Ok(())
}
