//! `lam recall`: the exact bytes of an archived observation, or one part;
//! `--list`: what a session (or the store) holds.

use crate::printable::{escaped, first_line};
use anyhow::{Context, Result, bail};
use arc_store::{Access, StoreError};
use arc_view::cut_parts;
use lam_core::{ObsStore, SessionId};
use lam_trajectory::Cl100k;
use std::io::Write;

#[derive(clap::Args)]
pub struct RecallArgs {
    /// Store written by `lam serve`, `lam run`, `lam compact --store`, `lam view --store` or the Python package (`lam.Session(store=...)`): a directory or `postgres://...`.
    #[arg(long)]
    store: String,
    /// The id, as cited (`§a1b2c3d4` or `a1b2c3d4`).
    #[arg(required_unless_present = "list")]
    id: Option<String>,
    /// Part `K` or `K/N` of the observation in parts of at most --part-tokens tokens (1 <= K <= N).
    #[arg(value_parser = part)]
    chunk: Option<Part>,
    /// Session holding the id (needed only when sessions show the id for different observations).
    #[arg(long)]
    session: Option<String>,
    /// Tokens per part when an observation is recalled in parts (ARC's q).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..))]
    part_tokens: u32,
    /// List instead of recalling: with --session one line per archived observation (`§id`, bytes,
    /// first line); without, one line per session (name, observations), leaving out the sessions
    /// that hold a run's settings (`RUN.settings`, written by `lam serve --run RUN`; listed with
    /// --session RUN.settings). Names and first lines are
    /// printed escaped (control characters, newlines and tabs as `\n`, `\t`, `\u{..}`; invalid
    /// UTF-8 as `\xNN`), so each entry is one line.
    #[arg(long, conflicts_with_all = ["id", "chunk"])]
    list: bool,
}

/// A part as asked: `K`, or `K/N` (N, when given, must be the part count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    k: usize,
    n: Option<usize>,
}

/// Parse `K` or `K/N` with whole numbers, 1 <= K (<= N).
fn part(s: &str) -> Result<Part, String> {
    let whole = |x: &str| x.parse::<usize>().map_err(|_| format!("`{s}`: expected K or K/N with whole numbers >= 1"));
    let (k, n) = match s.split_once('/') {
        Some((k, n)) => (whole(k)?, Some(whole(n)?)),
        None => (whole(s)?, None),
    };
    if k == 0 || n == Some(0) {
        return Err(format!("`{s}`: parts are numbered from 1"));
    }
    if n.is_some_and(|n| k > n) {
        return Err(format!("`{s}`: part {k} of {} does not exist", n.unwrap_or(0)));
    }
    Ok(Part { k, n })
}

impl Part {
    /// The 1-based part, checked against the observation's part count.
    fn resolve(self, parts: usize) -> Result<usize> {
        let spec = match self.n {
            Some(n) => format!("{}/{n}", self.k),
            None => self.k.to_string(),
        };
        arc_view::parse_part(&spec, parts).map_err(anyhow::Error::msg)
    }
}

pub fn run(a: RecallArgs) -> Result<()> {
    let (store, recovery) = crate::opts::open_store_reported(&a.store, Access::ReadOnly)?;
    let shown = arc_store::redact(&a.store);
    let session = a.session.as_deref().map(SessionId::from);
    if a.list {
        return list(store.as_ref(), session.as_ref());
    }
    let id = a.id.as_deref().unwrap_or_default();
    let found = match arc_store::find(store.as_ref(), session.as_ref(), id) {
        Ok(f) => f,
        Err(e @ StoreError::NotFound { .. }) if recovery.damaged().next().is_some() => {
            let n = recovery.damaged().count();
            return Err(e).with_context(|| format!("recall from {}: the store has {n} damaged places (listed above); the id may be in one of them", shown));
        }
        Err(e) => return Err(e).with_context(|| format!("recall from {shown}")),
    };
    let body = found.bytes;
    let out = match a.chunk {
        None => &body[..],
        Some(p) => {
            let parts = cut_parts(&Cl100k, &body, a.part_tokens as usize);
            let k = p.resolve(parts.len()).with_context(|| format!("{id} (parts of at most {} tokens)", a.part_tokens))?;
            &body[parts[k - 1].clone()]
        }
    };
    let stdout = std::io::stdout();
    let mut so = stdout.lock();
    so.write_all(out)?;
    so.flush()?;
    Ok(())
}

/// One line per observation of `session` (`§id`, bytes, first line), or per
/// session (but those holding a run's settings, `SessionId::settings_run`).
fn list(store: &dyn ObsStore, session: Option<&SessionId>) -> Result<()> {
    let so = std::io::stdout();
    let mut so = std::io::BufWriter::new(so.lock());
    let Some(s) = session else {
        // A run's settings (`lam serve --run`) are no conversation's session.
        for s in store.sessions()?.into_iter().filter(|s| s.settings_run().is_none()) {
            writeln!(so, "{}\t{} observations", escaped(&s.0), store.ids(&s)?.len())?;
        }
        return Ok(so.flush()?);
    };
    let ids = store.ids(s)?;
    if ids.is_empty() {
        bail!("no session `{}` in the store (list the sessions with `lam recall --store STORE --list`)", escaped(&s.0));
    }
    let mut damaged = 0;
    for id in ids {
        match store.meta(s, &id) {
            Ok(Some(m)) => writeln!(so, "§{id}\t{} bytes\t{}", m.bytes, first_line(&m.head))?,
            Ok(None) => writeln!(so, "§{id}\t(missing)")?,
            Err(e) => {
                damaged += 1;
                writeln!(so, "§{id}\tDAMAGED: {}", StoreError::from(e))?;
            }
        }
    }
    so.flush()?;
    if damaged > 0 {
        bail!("{damaged} observations of session {} are damaged", escaped(&s.0));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_checked() {
        assert_eq!(part("2").unwrap().resolve(3).unwrap(), 2);
        assert_eq!(part("2/3").unwrap().resolve(3).unwrap(), 2);
        for bad in ["0", "1/banana", "1/0", "0/3", "4/3", "x", "-1", "", "1/", "/1"] {
            assert!(part(bad).is_err(), "{bad}");
        }
        assert!(part("4").unwrap().resolve(3).is_err());
        assert!(part("2/4").unwrap().resolve(3).is_err());
        assert!(part("2/3").unwrap().resolve(19_849).is_err());
    }
}
