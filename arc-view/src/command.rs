//! Recognising ARC control commands in the agent's actions.
//!
//! Commands are recognised only in actions, never in observation text: the
//! caller passes the action string it is about to execute. An action is a
//! control action only when every non-empty line of it is a command, so a
//! shell command that merely mentions `_recall` (`echo _recall §x`) is an
//! ordinary action.

/// One ARC control command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `_recall §id` or `_recall §id k/n` (or `_recall §id k`): the exact body, part `k`.
    Recall {
        /// Visible id without `§`.
        shown: String,
        /// Requested part (1-based); `None` means the first.
        part: Option<u32>,
    },
    /// `_recall_meta §id`: the citation-level metadata only.
    RecallMeta {
        /// Visible id without `§`.
        shown: String,
    },
    /// `catalog next`.
    CatalogNext,
    /// `catalog prev`.
    CatalogPrev,
    /// `catalog page N` (1-based).
    CatalogPage(usize),
}

fn parse_id(tok: &str) -> Option<String> {
    let t = tok.strip_prefix('§').unwrap_or(tok);
    let ok = (4..=40).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| t.to_ascii_lowercase())
}

fn parse_line(line: &str) -> Option<Command> {
    let mut w = line.split_whitespace();
    match w.next()? {
        "_recall" => {
            let shown = parse_id(w.next()?)?;
            let part = match w.next() {
                None => None,
                Some(p) => {
                    let k = p.split_once('/').map_or(p, |(k, _)| k);
                    Some(k.parse::<u32>().ok().filter(|&k| k >= 1)?)
                }
            };
            w.next().is_none().then_some(Command::Recall { shown, part })
        }
        "_recall_meta" => {
            let shown = parse_id(w.next()?)?;
            w.next().is_none().then_some(Command::RecallMeta { shown })
        }
        "catalog" => {
            let c = match (w.next()?, w.next()) {
                ("next", None) => Command::CatalogNext,
                ("prev", None) => Command::CatalogPrev,
                ("page", Some(n)) => Command::CatalogPage(n.parse().ok().filter(|&n: &usize| n >= 1)?),
                _ => return None,
            };
            w.next().is_none().then_some(c)
        }
        _ => None,
    }
}

/// The commands of `action` when it is a control action (every non-empty
/// line a command, at least one line); `None` for an ordinary action.
pub fn parse_commands(action: &str) -> Option<Vec<Command>> {
    let mut out = Vec::new();
    for line in action.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        out.push(parse_line(line)?);
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_commands() {
        assert_eq!(parse_commands("_recall §a1b2c3d4 2/5"), Some(vec![Command::Recall { shown: "a1b2c3d4".into(), part: Some(2) }]));
        assert_eq!(parse_commands("_recall a1b2c3d4"), Some(vec![Command::Recall { shown: "a1b2c3d4".into(), part: None }]));
        assert_eq!(
            parse_commands("_recall_meta §A1B2C3D4\ncatalog next\n"),
            Some(vec![Command::RecallMeta { shown: "a1b2c3d4".into() }, Command::CatalogNext])
        );
        assert_eq!(parse_commands("catalog page 3"), Some(vec![Command::CatalogPage(3)]));
    }

    #[test]
    fn ordinary_actions_are_not_commands() {
        assert_eq!(parse_commands("echo _recall §a1b2c3d4"), None);
        assert_eq!(parse_commands("_recall §a1b2c3d4\nrm -rf /"), None);
        assert_eq!(parse_commands("_recall §xyz"), None);
        assert_eq!(parse_commands("_recall §a1b2c3d4 0/5"), None);
        assert_eq!(parse_commands(""), None);
        assert_eq!(parse_commands("catalog"), None);
    }
}
