//! `lam replay`: recorded sessions sent through `lam serve`'s engine the way
//! their agent sends them, and what they would have cost with and
//! without `lam` (`lam_serve::replay`).

use anyhow::{Context, Result, bail};
use lam_core::wire::Api;
use lam_serve::bill::{CacheTtl, Pricing};
use lam_serve::replay::{self, Call, SessionReport};
use lam_serve::{Proxy, ServeConfig};
use lam_trajectory::Unreadable;
use lam_trajectory::agents::Agent;
use lam_trajectory::read::{self, Trajectory};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// `--shape`: `auto` (`None`: each transcript as its own agent sends it) or an agent.
#[derive(Clone, Copy, Debug)]
struct Shape(Option<Agent>);

fn shape(s: &str) -> Result<Shape, String> {
    if s == "auto" { Ok(Shape(None)) } else { s.parse().map(|a| Shape(Some(a))).map_err(|e| format!("{e} or auto")) }
}

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// Transcripts: Claude Code (~/.claude/projects), Codex (~/.codex/sessions), opencode (~/.local/share/opencode/opencode.db), Gemini CLI (~/.gemini/tmp), or any `lam compact` format; files or folders.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Which agent's requests to send: `auto` (an agent's transcripts as that agent sends them, everything else as Claude Code), `claude-code` (Anthropic `/v1/messages` as Claude Code sends it: system array, tools, moving `cache_control`), `codex` (OpenAI `/v1/responses` as the Codex CLI sends it), `opencode` (Anthropic `/v1/messages` as opencode sends it: one system block, `cache_control` on the last two messages) or `gemini-cli` (the Gemini API, `models/MODEL:streamGenerateContent`, as Gemini CLI sends it: `contents` of `functionCall` and `functionResponse` parts).
    #[arg(long, value_parser = shape, default_value = "auto", value_name = "AGENT")]
    shape: Shape,
    /// Prompt-cache pricing: `anthropic` (write 1.25x, read 0.1x), `openai` (read 0.1x, no write premium), `gemini` (implicit caching: read 0.1x, no write premium) or `read=R,write=W`; default: the provider's, by the API the agent speaks.
    #[arg(long, value_parser = Pricing::parse)]
    pricing: Option<Pricing>,
    /// How long the provider keeps a cached prefix after its last use: SECONDS or `none` (never expires). A request sent longer than that after the previous one (the transcript's timestamps) is priced as a cache miss, direct and through lam. Default: the TTL the transcript shows the agent asked for (Claude Code's 1-hour cache), else the provider's: 300 (Anthropic 5 minutes; OpenAI's in-memory retention, 5 to 10 minutes).
    #[arg(long, value_parser = CacheTtl::parse, value_name = "SECONDS|none")]
    cache_ttl: Option<CacheTtl>,
    /// Dollars by this price table (JSON, the built-in's format: `lam replay --json` names the built-in's date) instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Also write one self-contained HTML page (no network needed) drawing the run: context per request direct and through lam, cuts, cache expiries, the bill in dollars, and every cited output's original.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    #[command(flatten)]
    engine: crate::serve::EngineOpts,
    /// Where the replayed tool results are archived (a directory, `postgres://...` where built in); default `mem:` (in memory, gone when it exits).
    #[arg(long, default_value = "mem:")]
    store: String,
    /// Print one JSON object (sessions and total) instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write every request it sends to FILE, one JSON object per line (`session`, `agent`, `path`, `body`: the request as the agent would send it), to send them to a deployed proxy (docs/deploy.md).
    #[arg(long, value_name = "FILE")]
    requests_out: Option<PathBuf>,
    /// Which results a cut cites first: `oldest` (the default) or `superseded` (then the oldest), to measure the two (`cited_then_used`).
    #[arg(long, hide = true, default_value = "oldest", value_name = "ORDER")]
    cite_order: lam_serve::CiteOrder,
}

pub fn run(a: ReplayArgs) -> Result<()> {
    let mut cfg = ServeConfig::new("http://replay.invalid");
    cfg.engine = a.engine.settings(lam_core::stub::Recall::None, Some(1))?;
    // `lam run`'s default budget, so the bill is what `lam run` would save.
    cfg.default_budget = a.engine.default_budget(true)?;
    cfg.cite_order = a.cite_order;
    cfg.store = arc_store::StoreSpec::parse(&a.store).with_context(|| format!("--store {}", lam_core::redact::url(&a.store)))?;
    if let Some(p) = &a.prices {
        cfg.prices = Some(std::sync::Arc::new(lam_serve::bill::prices::Prices::read(p).map_err(anyhow::Error::msg)?));
    }
    // With a budget, the same sessions go through a second engine without
    // one too, for the bill with no budget.
    let unbounded = match (cfg.engine.budget, cfg.default_budget) {
        (None, None) => None,
        _ => {
            let mut c = cfg.clone();
            (c.engine.budget, c.default_budget, c.store) = (None, None, arc_store::StoreSpec::Memory);
            Some(Proxy::open(c).context("lam replay: starting the engine without --budget")?)
        }
    };
    let budget = (cfg.engine.budget, cfg.default_budget);
    let proxy = Proxy::open(cfg).context("lam replay: starting the proxy engine")?;
    let mut out = match &a.requests_out {
        Some(p) => Some(BufWriter::new(std::fs::File::create(p).with_context(|| format!("--requests-out {}", p.display()))?)),
        None => None,
    };
    let mut sessions = Vec::new();
    // The budget each session was held to (0: none).
    let mut budgets = Vec::new();
    // Every readable input is replayed; each unreadable one is named with its error, and the run fails at the end.
    let mut unreadable = Vec::new();
    let inputs = read::expand_inputs(&a.paths)?;
    for input in &inputs {
        let trajs = match read::read_input(input) {
            Ok(Some(trajs)) => trajs,
            Ok(None) => {
                eprintln!("note: skipping {} (not a transcript)", input.path.display());
                continue;
            }
            Err(e) => {
                eprintln!("lam replay: {e}");
                unreadable.push(Unreadable::new(&input.path, Some(&e), &e.to_string()));
                continue;
            }
        };
        for t in trajs.iter().filter(|t| !t.records.is_empty()) {
            let created = proxy.stats().sessions_created;
            sessions.push(one((&proxy, unbounded.as_ref()), &a, t, out.as_mut())?);
            budgets.push(held_to(&proxy, created));
        }
    }
    if let (Some(w), Some(p)) = (out.as_mut(), &a.requests_out) {
        w.flush().with_context(|| format!("--requests-out {}", p.display()))?;
    }
    let proxy_prices = proxy.prices().clone();
    // The originals of every `§id` the page links to, while the archive is open.
    let originals = match a.html {
        Some(_) => crate::html::originals(&proxy, sessions.iter().flat_map(|s| &s.1.ids)),
        None => Vec::new(),
    };
    proxy.close().context("lam replay: saving the embedding cache")?;
    if sessions.is_empty() {
        let paths = a.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        bail!("no tool results found in {paths}{}", failed_note(&unreadable, inputs.len()));
    }
    let mut total = SessionReport { session: "total".into(), ..Default::default() };
    sessions.iter().for_each(|s| total.absorb(&s.1));
    let report = report_json(&sessions, &total, (budget, &budgets), &unreadable, &proxy_prices.date);
    if let Some(p) = &a.html {
        std::fs::write(p, crate::html::page(&report, &originals)).with_context(|| format!("--html {}", p.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&sessions, &total, &proxy_prices.date);
        if budget != (None, None) {
            print_budget(&sessions, &total, (budget, &budgets));
        }
    }
    if !unreadable.is_empty() {
        bail!("{}", failed_note(&unreadable, inputs.len()).trim_start_matches("; "));
    }
    Ok(())
}

/// `; N of M input(s) unreadable (errors above): FILE line L, ...`; empty when none.
fn failed_note(unreadable: &[Unreadable], inputs: usize) -> String {
    if unreadable.is_empty() {
        return String::new();
    }
    let named: Vec<String> = unreadable.iter().map(Unreadable::place).collect();
    format!("; {} of {inputs} input(s) unreadable (errors above), the rest replayed: {}", unreadable.len(), named.join(", "))
}

/// `--budget N`, or the default budget (`lam run`'s; none with `--budget off`).
type Held = (Option<lam_serve::Budget>, Option<lam_serve::DefaultBudget>);

/// The budget the proxy sessions started after the `created`-th held
/// their requests to (the largest; 0: none).
fn held_to(proxy: &Proxy, created: u64) -> u64 {
    proxy.stats().sessions.iter().filter(|s| s.conversation > created).map(|s| s.budget_tokens).max().unwrap_or(0)
}

/// `--shape`, else the transcript's agent, else the first agent lam knows.
fn agent_of(a: &ReplayArgs, t: &Trajectory) -> Agent {
    a.shape.0.or_else(|| t.format.agent()).unwrap_or(Agent::ALL[0])
}

fn one(
    (proxy, unbounded): (&Proxy, Option<&Proxy>),
    a: &ReplayArgs,
    t: &Trajectory,
    out: Option<&mut BufWriter<std::fs::File>>,
) -> Result<(Agent, SessionReport, Pricing)> {
    let agent = agent_of(a, t);
    // The provider's, by the API the agent speaks.
    let anthropic = agent.api() == Api::Messages;
    let pricing = a.pricing.unwrap_or(Pricing::of(agent.api()));
    let ttl = a.cache_ttl.or(t.cache_ttl.map(|s| CacheTtl(Some(s)))).unwrap_or(if anthropic { CacheTtl::ANTHROPIC } else { CacheTtl::OPENAI });
    let calls: Vec<Call> = t
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| Call {
            time: t.times.get(i).copied().flatten(),
            model: t.models.get(i).cloned().flatten(),
            ..Call::from_action(&r.action, String::from_utf8_lossy(&r.observation).into_owned(), t.thoughts.get(i).cloned().unwrap_or_default())
        })
        .collect();
    let task = if t.task.is_empty() { format!("(task of {})", t.session.0) } else { t.task.clone() };
    if let Some(w) = out {
        write_requests(w, agent, &t.session.0, &task, &calls).context("--requests-out")?;
    }
    let mut r = replay::replay(proxy, agent, &t.session.0, &task, &calls, (pricing, ttl), &lam_trajectory::Cl100k);
    if let Some(u) = unbounded {
        let without = replay::replay(u, agent, &t.session.0, &task, &calls, (pricing, ttl), &lam_trajectory::Cl100k);
        (r.billed_no_budget, r.peak_no_budget, r.usd_no_budget) = (without.billed_lam, without.peak_tokens, without.usd_lam);
    }
    Ok((agent, r, pricing))
}

/// One session's requests, as `replay::replay` sends them, one JSON line each.
fn write_requests(w: &mut impl Write, agent: Agent, session: &str, task: &str, calls: &[Call]) -> Result<()> {
    for body in replay::requests(agent, task, calls) {
        let body = serde_json::value::RawValue::from_string(String::from_utf8(body)?)?;
        let line = serde_json::json!({"session": session, "agent": agent.name(), "path": agent.path(), "body": body});
        serde_json::to_writer(&mut *w, &line)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

fn row(shape: &str, r: &SessionReport) -> String {
    let q = |xs: &[f64], p| replay::quantile(xs, p);
    format!(
        "{:<40} {:<11} {:>4} {:>4} {:>6} {:>9} {:>9} {:>6.1}% {:>4} {:>5} {:>11.0} {:>11.0} {:>6.3} {:>4} {:>5.1}% {:>7.2} {:>7.2} {:>7.2}",
        truncate(&r.session, 40),
        shape,
        r.requests,
        r.proxy_sessions,
        format!("{}/{}", r.admitted, r.tool_results),
        r.tool_tokens_in,
        r.tool_tokens_out,
        100.0 * r.removal(),
        r.earlier_changed,
        r.new_lines_hidden,
        r.billed_direct,
        r.billed_lam,
        r.billed_ratio(),
        r.requests_after_expiry,
        100.0 * r.expired_share(),
        q(&r.added_ms, 0.5),
        q(&r.added_ms, 0.99),
        q(&overhead(r), 0.5),
    )
}

/// Per request: the time added beyond admitting its new tool results.
fn overhead(r: &SessionReport) -> Vec<f64> {
    r.added_ms.iter().zip(&r.admit_ms).map(|(a, m)| a - m).collect()
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}~", s.chars().take(n - 1).collect::<String>()) }
}

fn print_table(sessions: &[(Agent, SessionReport, Pricing)], total: &SessionReport, date: &str) {
    println!(
        "{:<40} {:<11} {:>4} {:>4} {:>6} {:>9} {:>9} {:>7} {:>4} {:>5} {:>11} {:>11} {:>6} {:>4} {:>6} {:>7} {:>7} {:>7}",
        "session",
        "shape",
        "req",
        "sess",
        "admit",
        "tool tok",
        "fwd tok",
        "removed",
        "chg",
        "hid",
        "bill direct",
        "bill lam",
        "ratio",
        "exp",
        "exp %",
        "p50 ms",
        "p99 ms",
        "ovh p50"
    );
    for (shape, r, _) in sessions {
        println!("{}", row(shape.name(), r));
    }
    println!("{}", row("", total));
    let share = total.tool_share();
    println!();
    println!("req: requests sent (the task, then one per tool result); sess: proxy sessions they made (1 = one conversation, one session);");
    println!("admit: tool results admitted / sent (each once); tool tok / fwd tok: cl100k tokens of the tool results and of what lam forwarded;");
    println!("chg: earlier items whose bytes changed between requests (must be 0); hid: lines of the tool results shown for the first time that");
    println!("lam did not forward (must be 0; docs/stubs.md); bill: input price units under prompt caching");
    println!("(cached prefix read, rest written; tokens of each item's JSON), direct vs through lam; ratio = lam / direct;");
    println!("exp: requests sent more than the cache TTL after the previous one (--cache-ttl; priced as cache misses both ways),");
    println!("exp %: the direct bill's share spent in them;");
    println!("p50/p99 ms: time lam added per request; ovh p50: of it, the part beyond admitting (encoding) the request's new tool results.");
    println!(
        "In total lam removed {:.1} % of tool-result tokens. Tool results are {:.1} % of what the sessions sent and {:.1} % of the direct bill",
        100.0 * total.removal(),
        100.0 * share,
        100.0 * total.tool_bill_share()
    );
    println!(
        "(removal x bill share = {:.1} %); billed input through lam was {:.1} % of direct: {:.1} % saved.",
        100.0 * total.removal() * total.tool_bill_share(),
        100.0 * total.billed_ratio(),
        100.0 * (1.0 - total.billed_ratio())
    );
    println!(
        "{} of {} requests came after the prompt cache expired ({:.1} % of the direct bill).",
        total.requests_after_expiry,
        total.requests,
        100.0 * total.expired_share()
    );
    print_dollars(total, date);
}

/// The bill in dollars and with the recalls of cited outputs priced (`lam_serve::replay::priced`).
fn print_dollars(total: &SessionReport, date: &str) {
    let ratio = |x: f64| if total.usd_direct == 0.0 { 1.0 } else { x / total.usd_direct };
    println!(
        "In dollars (prices of {date}, each request at its model's): direct ${:.2}, through lam ${:.2} ({:.3}x); with the {} cited outputs the agent",
        total.usd_direct,
        total.usd_lam,
        ratio(total.usd_lam),
        total.recalls.count
    );
    println!(
        "later used recalled (one more request each, the output in the context after): ${:.2} ({:.3}x), billed input {:.1} % of direct.",
        total.usd_lam_with_recalls(),
        ratio(total.usd_lam_with_recalls()),
        100.0 * total.billed_ratio_with_recalls()
    );
    println!("(Recalls are estimated from the transcript: an output used without being quoted is missed, one quoted but not needed is counted.)");
    for n in &total.price_notes {
        println!("note: {n}");
    }
}

fn budget_row(r: &SessionReport, shape: &str, budget: u64) -> String {
    let ratio = |x: f64| if r.billed_direct == 0.0 { 1.0 } else { x / r.billed_direct };
    format!(
        "{:<40} {:<11} {:>7} {:>4} {:>5} {:>6} {:>9} {:>9} {:>5} {:>11.0} {:>11.0} {:>11.0} {:>7.3} {:>7.3} {:>7.3}",
        truncate(&r.session, 40),
        shape,
        budget,
        r.requests,
        r.cuts,
        r.citations,
        r.peak_no_budget,
        r.peak_tokens,
        r.over_budget,
        r.billed_direct,
        r.billed_no_budget,
        r.billed_lam,
        ratio(r.billed_no_budget),
        ratio(r.billed_lam),
        if r.billed_no_budget == 0.0 { 1.0 } else { r.billed_lam / r.billed_no_budget },
    )
}

fn print_budget(sessions: &[(Agent, SessionReport, Pricing)], total: &SessionReport, (held, budgets): (Held, &[u64])) {
    println!();
    match held {
        (Some(b), _) => println!("--budget {} (cut to {}, the newest {} results kept):", b.tokens, b.target, b.keep),
        (None, Some(d)) => println!(
            "The default budget (`lam run`'s; --budget off: none): the smaller of {} and a level below the agent's own compaction threshold for the model, cut to half, the newest {} results kept:",
            d.ceiling,
            d.keep.unwrap_or(lam_serve::Budget::KEEP)
        ),
        (None, None) => return,
    }
    println!(
        "{:<40} {:<11} {:>7} {:>4} {:>5} {:>6} {:>9} {:>9} {:>5} {:>11} {:>11} {:>11} {:>7} {:>7} {:>7}",
        "session",
        "shape",
        "budget",
        "req",
        "cuts",
        "cited",
        "peak",
        "peak bud",
        "over",
        "bill direct",
        "bill no bud",
        "bill budget",
        "nb/dir",
        "b/dir",
        "b/nb"
    );
    for ((shape, r, _), b) in sessions.iter().zip(budgets) {
        println!("{}", budget_row(r, shape.name(), *b));
    }
    println!("{}", budget_row(total, "", budgets.iter().copied().max().unwrap_or(0)));
    println!(
        "cuts: {} cold (after the cache TTL), {} warm; cited, then used: {}; cited ids recalled exactly: {} of {} (must be all)",
        total.cuts_cold,
        total.cuts_warm,
        total.cited_then_used,
        total.cited_recalled - total.cited_recall_wrong,
        total.cited_recalled
    );
    println!();
    println!("budget: the budget the session was held to, in tokens (the total: the largest);");
    println!("cuts: cuts made (each re-writes the prompt cache from the first cited item on); cited: tool results replaced by citations;");
    println!("peak / peak bud: the largest prompt a request sent through lam without and with the budget (tokens as billed here; total: the");
    println!("largest of any session); over: requests over the budget with it (what cannot be cited exceeded it); bill: input price units,");
    println!("direct, through lam without the budget, and with it (every cut's re-written prefix priced as a cache write).");
    println!("With a budget, chg in the table above counts the items re-written at cuts.");
}

/// The run as `--json` prints it and `--html` draws it (`prices`: the table's date).
fn report_json(
    sessions: &[(Agent, SessionReport, Pricing)],
    total: &SessionReport,
    (held, budgets): (Held, &[u64]),
    unreadable: &[Unreadable],
    prices: &str,
) -> serde_json::Value {
    let summary = |r: &SessionReport| {
        serde_json::json!({
            "session": r.session, "requests": r.requests, "proxy_sessions": r.proxy_sessions,
            "tool_results": r.tool_results, "admitted": r.admitted,
            "tool_tokens_in": r.tool_tokens_in, "tool_tokens_out": r.tool_tokens_out, "removal": r.removal(),
            "earlier_changed": r.earlier_changed, "new_lines": r.new_lines, "new_lines_hidden": r.new_lines_hidden, "new_tokens_hidden": r.new_tokens_hidden,
            "prompt_tokens": r.prompt_tokens, "final_prompt_tokens": r.final_prompt_tokens, "tool_share": r.tool_share(), "billed_direct_tool": r.billed_direct_tool, "tool_bill_share": r.tool_bill_share(),
            "billed_direct": r.billed_direct, "billed_lam": r.billed_lam, "billed_ratio": r.billed_ratio(),
            "requests_after_expiry": r.requests_after_expiry, "expired_share": r.expired_share(),
            "cuts": r.cuts, "cuts_cold": r.cuts_cold, "cuts_warm": r.cuts_warm, "citations": r.citations, "cited_then_used": r.cited_then_used, "cited_recalled": r.cited_recalled, "cited_recall_wrong": r.cited_recall_wrong, "peak_tokens": r.peak_tokens, "over_budget": r.over_budget,
            "billed_no_budget": r.billed_no_budget, "peak_no_budget": r.peak_no_budget,
            "added_ms_p50": replay::quantile(&r.added_ms, 0.5), "added_ms_p99": replay::quantile(&r.added_ms, 0.99),
            "admit_ms_p50": replay::quantile(&r.admit_ms, 0.5), "admit_ms_p99": replay::quantile(&r.admit_ms, 0.99),
            "overhead_ms_p50": replay::quantile(&overhead(r), 0.5), "overhead_ms_p99": replay::quantile(&overhead(r), 0.99),
        })
    };
    let summary = |r: &SessionReport| {
        let mut v = summary(r);
        let usd = |x: f64| if r.usd_direct == 0.0 { 1.0 } else { x / r.usd_direct };
        let more = serde_json::json!({
            "usd_direct": r.usd_direct, "usd_lam": r.usd_lam, "usd_no_budget": r.usd_no_budget,
            "recalls": r.recalls.count, "billed_recalls": r.recalls.billed, "usd_recalls": r.recalls.usd,
            "billed_ratio_with_recalls": r.billed_ratio_with_recalls(), "usd_lam_with_recalls": r.usd_lam_with_recalls(),
            "usd_ratio": usd(r.usd_lam), "usd_ratio_with_recalls": usd(r.usd_lam_with_recalls()),
            "price_notes": r.price_notes, "top_calls": r.top_calls,
        });
        if let (Some(v), serde_json::Value::Object(m)) = (v.as_object_mut(), more) {
            v.extend(m);
        }
        v
    };
    let rows: Vec<_> = sessions
        .iter()
        .zip(budgets)
        .map(|((shape, r, p), b)| {
            let mut v = summary(r);
            v["budget"] = serde_json::json!((*b > 0).then_some(*b));
            v["shape"] = shape.name().into();
            v["pricing"] = serde_json::json!({"read": p.read, "write": p.write});
            v["cache_ttl"] = serde_json::json!(r.cache_ttl.0);
            v["per_request"] = serde_json::json!(r.per_request);
            v
        })
        .collect();
    // How the budget was chosen: `given` (--budget N), `default` (`lam run`'s), or `off`.
    let budget = match held {
        (Some(b), _) => serde_json::json!({"mode": "given", "tokens": b.tokens, "target": b.target, "keep": b.keep}),
        (None, Some(d)) => serde_json::json!({"mode": "default", "ceiling": d.ceiling, "keep": d.keep.unwrap_or(lam_serve::Budget::KEEP)}),
        (None, None) => serde_json::json!({"mode": "off"}),
    };
    serde_json::json!({"budget": budget, "prices": {"date": prices}, "sessions": rows, "total": summary(total), "unreadable": unreadable})
}
