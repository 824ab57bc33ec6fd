//! `lam top`: the conversations of a running `lam run` or `lam serve`, as
//! a table refreshed every second from `GET /lam/stats`.
//!
//! Which proxy: `--proxy URL` (a `lam serve`; `LAM_TOKEN` when it has a
//! token), else the newest `lam run` of this user's still running, which
//! writes its address in its private run directory (`crate::runfiles`).
//! What the proxy sends is shown escaped (`crate::printable`).

use crate::status::{Row, Snapshot, short, snapshot};
use anyhow::{Context, Result};
use std::io::{IsTerminal, Write};
use std::time::Duration;

#[derive(clap::Args)]
pub struct TopArgs {
    /// The proxy's address (`lam serve --listen`'s, as http://HOST:PORT); default: the newest running `lam run` of this user's.
    #[arg(long, value_name = "URL")]
    proxy: Option<String>,
    /// Print the table once and exit (what happens anyway when stdout is not a terminal).
    #[arg(long)]
    once: bool,
    /// Milliseconds between refreshes.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    interval_ms: u64,
}

pub fn run(a: TopArgs) -> Result<()> {
    let proxy = a.proxy.or_else(crate::runfiles::newest_run).context("lam top: no running `lam run` found; give the proxy with --proxy http://HOST:PORT")?;
    let live = !a.once && std::io::stdout().is_terminal();
    loop {
        let text = match snapshot(&proxy) {
            Ok(s) => table(&s),
            Err(e) if !live => return Err(e.context(format!("lam top: reading {proxy}/lam/stats"))),
            Err(e) => format!("lam top: {proxy}: {e:#}\n"),
        };
        let mut out = std::io::stdout().lock();
        let clear = if live { "\x1b[H\x1b[2J" } else { "" };
        let head = if live { format!("lam top: {proxy} (every {} ms; Ctrl-C to quit)\n", a.interval_ms) } else { String::new() };
        write!(out, "{clear}{head}{text}").and_then(|()| out.flush()).context("lam top: writing stdout")?;
        if !live {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(a.interval_ms.max(100)));
    }
}

/// The table: one row per conversation, then the total.
pub fn table(s: &Snapshot) -> String {
    let mut o = format!(
        "{:>4}  {:<28} {:>8} {:>6} {:>20} {:>7} {:>5}  {}\n",
        "conv", "session", "requests", "obs", "tokens in -> out", "removed", "cuts", "input bill vs direct"
    );
    for r in &s.sessions {
        o.push_str(&row(&r.conversation.to_string(), &r.session, r));
    }
    let (total, _) = s.conversation(None);
    o.push_str(&row("all", "", &total));
    o
}

fn row(conv: &str, session: &str, r: &Row) -> String {
    let tokens = format!("{} -> {}", short(r.tokens_in as f64), short(r.tokens_out as f64));
    let bill = match r.billed_direct {
        d if d > 0.0 => format!("{} vs {} ({:+.1}%)", short(r.billed_lam), short(d), 100.0 * (r.billed_lam - d) / d),
        _ => "-".to_string(),
    };
    let session: String = crate::printable::escaped(session).chars().take(28).collect();
    format!("{conv:>4}  {session:<28} {:>8} {:>6} {tokens:>20} {:>6.1}% {:>5}  {bill}\n", r.requests, r.observations, 100.0 * r.removal(), r.cuts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_conversation_and_the_total() {
        let r = |c: u64, tin: u64, tout: u64| Row {
            conversation: c,
            session: format!("serve-1-{c}"),
            requests: 3,
            observations: 2,
            tokens_in: tin,
            tokens_out: tout,
            billed_direct: 2000.0,
            billed_lam: 1500.0,
            ..Row::default()
        };
        let t = table(&Snapshot { sessions: vec![r(1, 12_000, 3_000), r(2, 500, 500)], ..Snapshot::default() });
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("tokens in -> out") && lines[0].contains("input bill vs direct"), "{t}");
        assert!(lines[1].contains("serve-1-1") && lines[1].contains("12.0k -> 3.00k") && lines[1].contains("75.0%"), "{t}");
        assert!(lines[1].ends_with("1.50k vs 2.00k (-25.0%)"), "{t}");
        assert!(lines[3].starts_with(" all") && lines[3].contains("12.5k -> 3.50k") && lines[3].contains("3.00k vs 4.00k (-25.0%)"), "{t}");
    }

    /// What a proxy sends reaches the terminal escaped, and sums saturate.
    #[test]
    fn hostile_names_are_escaped_and_sums_saturate() {
        let r = |session: &str| Row { session: session.to_string(), requests: u64::MAX, tokens_in: u64::MAX, ..Row::default() };
        let t = table(&Snapshot { sessions: vec![r("a\x1b]52;c;SGk=\x07"), r("\x1b[2J"), r("b")], ..Snapshot::default() });
        assert!(!t.contains('\x1b') && !t.contains('\x07'), "{t:?}");
        assert!(t.contains("a\\u{1b}]52;c;SGk=\\u{7}"), "{t}");
        let total = t.lines().last().unwrap();
        assert!(total.contains(&u64::MAX.to_string()), "{total}");
    }
}
