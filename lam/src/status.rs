//! What the proxy saves, in view while the agent works: `lam status-line`
//! (Claude Code's status line command, and with `--mcp` Codex's status line
//! provider, an MCP server on stdio), both reading `GET /lam/stats`.
//!
//! One line for the conversation: tool-result tokens in -> forwarded, the
//! budget's peak and last input and its cuts (with a budget), and the input
//! bill so far against direct (`lam_serve::replay`'s pricing rule, summed
//! by the proxy per session).

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::time::Duration;

#[derive(clap::Args)]
pub struct StatusLineArgs {
    /// The proxy's address (`lam run` gives its own); default: the newest running `lam run` of this user's (docs/agents.md, "Run files").
    #[arg(long, value_name = "URL")]
    proxy: Option<String>,
    /// Serve Codex's status line: an MCP server on stdio whose `status` tool's resource is the line.
    #[arg(long)]
    mcp: bool,
}

/// How long reading the stats may take in all: a status line never holds the agent up.
pub const TIMEOUT: Duration = Duration::from_millis(800);

/// One proxy session's figures, as `GET /lam/stats` gives them (fields it
/// lacks read 0: an older proxy).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Row {
    pub conversation: u64,
    pub session: String,
    pub agent_session: Option<String>,
    pub requests: u64,
    pub observations: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cuts: u64,
    pub peak_input_tokens: u64,
    pub upstream_input_tokens: u64,
    /// The budget it was held to (0: none): `--budget`, or the default for its model.
    pub budget_tokens: u64,
    pub billed_direct: f64,
    pub billed_lam: f64,
}

impl Row {
    /// Add another session's figures (peaks: the larger).
    fn absorb(&mut self, o: &Row) {
        // Sums saturate: figures from a proxy are never trusted to fit.
        self.requests = self.requests.saturating_add(o.requests);
        self.observations = self.observations.saturating_add(o.observations);
        self.tokens_in = self.tokens_in.saturating_add(o.tokens_in);
        self.tokens_out = self.tokens_out.saturating_add(o.tokens_out);
        self.cuts = self.cuts.saturating_add(o.cuts);
        self.peak_input_tokens = self.peak_input_tokens.max(o.peak_input_tokens);
        self.upstream_input_tokens = self.upstream_input_tokens.max(o.upstream_input_tokens);
        self.budget_tokens = self.budget_tokens.max(o.budget_tokens);
        self.billed_direct += o.billed_direct;
        self.billed_lam += o.billed_lam;
    }

    /// Share of the tool-result tokens kept out (0 before any).
    pub fn removal(&self) -> f64 {
        if self.tokens_in == 0 { 0.0 } else { 1.0 - self.tokens_out as f64 / self.tokens_in as f64 }
    }
}

/// `GET /lam/stats`, the part read here.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    pub sessions: Vec<Row>,
    pub evicted: Row,
    pub budget_tokens: Option<u64>,
}

impl Snapshot {
    /// The figures of the agent's conversation `agent` (every proxy session
    /// it sent that id with: its subagents and compactions), and whether it
    /// matched; else (no id, or none matches) every session's, evicted included.
    pub fn conversation(&self, agent: Option<&str>) -> (Row, bool) {
        let mine: Vec<&Row> = match agent {
            Some(id) => self.sessions.iter().filter(|s| s.agent_session.as_deref() == Some(id)).collect(),
            None => Vec::new(),
        };
        let matched = !mine.is_empty();
        let mut sum = if matched { Row::default() } else { self.evicted.clone() };
        let all: Vec<&Row> = if matched { mine } else { self.sessions.iter().collect() };
        all.iter().for_each(|s| sum.absorb(s));
        (sum, matched)
    }
}

/// A count of tokens, short: 950, 12.3k, 4.56M.
pub fn short(n: f64) -> String {
    let n = n.max(0.0);
    match n {
        _ if n >= 1e6 => format!("{:.2}M", n / 1e6),
        _ if n >= 1e4 => format!("{:.1}k", n / 1e3),
        _ if n >= 1e3 => format!("{:.2}k", n / 1e3),
        _ => format!("{n:.0}"),
    }
}

/// The line: `lam: tool output 182.4k -> 41.0k tokens (-77.5%) | budget
/// 160k: peak 98.2k, last 80.1k, 3 cuts | input bill 1.21M vs 2.96M direct
/// (-59.1%)`; `run` when the figures are the whole run's.
pub fn line(r: &Row, budget: Option<u64>, matched: bool) -> String {
    let who = if matched { "lam" } else { "lam (all conversations)" };
    if r.requests == 0 {
        return format!("{who}: no model request through lam yet");
    }
    let mut parts = vec![format!("tool output {} -> {} tokens (-{:.1}%)", short(r.tokens_in as f64), short(r.tokens_out as f64), 100.0 * r.removal())];
    if let Some(b) = budget {
        let s = if r.cuts == 1 { "" } else { "s" };
        parts.push(format!(
            "budget {}: peak {}, last {}, {} cut{s}",
            short(b as f64),
            short(r.peak_input_tokens as f64),
            short(r.upstream_input_tokens as f64),
            r.cuts
        ));
    }
    if r.billed_direct > 0.0 {
        let pct = 100.0 * (r.billed_direct - r.billed_lam) / r.billed_direct;
        parts.push(format!(
            "input bill {} vs {} direct ({}{:.1}%)",
            short(r.billed_lam),
            short(r.billed_direct),
            if pct >= 0.0 { "-" } else { "+" },
            pct.abs()
        ));
    }
    format!("{who}: {}", parts.join(" | "))
}

/// `GET PATH` from the proxy at `base` (`http://host:port`), with
/// `LAM_TOKEN` when set; the body, within [`TIMEOUT`].
pub fn get(base: &str, path: &str) -> Result<Vec<u8>> {
    let rest = base.trim_end_matches('/').strip_prefix("http://").with_context(|| format!("proxy `{base}`: expected http://HOST:PORT"))?;
    let (authority, prefix) = rest.split_once('/').map_or((rest, String::new()), |(a, p)| (a, format!("/{p}")));
    let uri = format!("{prefix}{path}");
    let token = std::env::var("LAM_TOKEN").ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting a runtime")?;
    let fetch = async {
        let stream = tokio::net::TcpStream::connect(authority).await.with_context(|| format!("connecting to {authority}"))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.context("HTTP handshake")?;
        tokio::spawn(conn);
        let mut req = hyper::Request::get(uri.as_str()).header(hyper::header::HOST, authority);
        if let Some(t) = &token {
            req = req.header("x-lam-token", t.as_str());
        }
        let resp = send.send_request(req.body(String::new()).context("the request")?).await.context("sending the request")?;
        let status = resp.status();
        let body = read_body(resp.into_body()).await?;
        if !status.is_success() {
            bail!("{uri} answered {status}{}", if status.as_u16() == 401 { " (set LAM_TOKEN)" } else { "" });
        }
        Ok(body)
    };
    rt.block_on(async { tokio::time::timeout(TIMEOUT, fetch).await.unwrap_or_else(|_| bail!("no answer within {} ms", TIMEOUT.as_millis())) })
}

/// A body's bytes (at most 64 MiB).
async fn read_body(mut body: hyper::body::Incoming) -> Result<Vec<u8>> {
    use hyper::body::Body as _;
    let mut out = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame.context("reading the answer")?.into_data() {
            out.extend_from_slice(&data);
        }
        if out.len() > 64 << 20 {
            bail!("the answer exceeds 64 MiB");
        }
    }
    Ok(out)
}

/// The proxy's stats.
pub fn snapshot(base: &str) -> Result<Snapshot> {
    let body = get(base, "/lam/stats")?;
    serde_json::from_slice(&body).context("reading /lam/stats")
}

/// The line for the agent's conversation `agent` at the proxy `base`, or
/// why there is none (never an error: a status line always prints).
pub fn line_for(base: Option<&str>, agent: Option<&str>) -> String {
    let Some(base) = base else { return "lam: no running `lam run` found".to_string() };
    match snapshot(base) {
        Ok(s) => {
            let (row, matched) = s.conversation(agent);
            // The proxy's `--budget`, else the one the conversation was held to (the default budget).
            let budget = s.budget_tokens.or((row.budget_tokens > 0).then_some(row.budget_tokens));
            line(&row, budget, matched)
        }
        Err(e) => format!("lam: proxy {base} unreachable ({})", first_cause(&e)),
    }
}

fn first_cause(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    if let Some(c) = e.chain().nth(1) {
        s = format!("{s}: {c}");
    }
    s.chars().take(120).collect()
}

pub fn run(a: StatusLineArgs) -> Result<()> {
    let proxy = a.proxy.or_else(crate::runfiles::newest_run);
    if a.mcp {
        return mcp(proxy.as_deref());
    }
    let agent = stdin_session();
    let text = line_for(proxy.as_deref(), agent.as_deref());
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    Ok(())
}

/// Claude Code's `session_id` from the JSON on stdin (none when stdin is a
/// terminal, or gives nothing within 300 ms).
fn stdin_session() -> Option<String> {
    if std::io::stdin().is_terminal() {
        return None;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::stdin().lock().take(1 << 20).read_to_string(&mut s);
        let _ = tx.send(s);
    });
    let text = rx.recv_timeout(Duration::from_millis(300)).ok()?;
    session_of(&text)
}

/// The `session_id` of a status line input.
pub fn session_of(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("session_id").and_then(serde_json::Value::as_str).map(str::to_string)
}

/// Whether `lam run` registers lam's status line with the agent (its room
/// says how: `lam_trajectory::agents`): unless `LAM_STATUS_LINE=0`.
pub fn line_wanted() -> bool {
    !std::env::var("LAM_STATUS_LINE").is_ok_and(|v| v.trim() == "0")
}

/// The resource Codex reads for the line.
const URI: &str = "ui://lam/status";

/// Codex's status line provider: newline-delimited JSON-RPC (MCP) on
/// stdio. Its one tool, `status`, names the resource [`URI`] as its
/// status line entrypoint; each `resources/read` of it is the line for the
/// thread Codex shows (`params._meta["com.openai/codex-statusline-state"].thread.id`,
/// which Codex also sends as `prompt_cache_key`).
fn mcp(proxy: Option<&str>) -> Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.context("lam status-line --mcp: reading stdin")?;
        let Some(reply) = mcp_reply(&line, &|thread| line_for(proxy, thread)) else { continue };
        writeln!(out, "{reply}").and_then(|()| out.flush()).context("lam status-line --mcp: writing stdout")?;
    }
    Ok(())
}

/// The answer to one JSON-RPC message (`None` for a notification);
/// `line(thread)`: the status line for a Codex thread id.
pub fn mcp_reply(msg: &str, line: &dyn Fn(Option<&str>) -> String) -> Option<String> {
    use serde_json::{Value, json};
    let Ok(req) = serde_json::from_str::<Value>(msg) else {
        return Some(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}).to_string());
    };
    let id = req.get("id")?.clone();
    let method = req.get("method").and_then(Value::as_str).unwrap_or("");
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    let tool = json!({"name": "status", "title": "lam: savings", "description": "What lam kept out of this conversation's context and the input bill against direct.",
        "inputSchema": {"type": "object", "properties": {}}, "_meta": {"openai/ui": {"entrypoints": [{"type": "statusline", "resourceUri": URI}]}}});
    let thread = lam_trajectory::agents::status_thread(&params);
    let result = match method {
        "initialize" => json!({"protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-06-18")),
            "capabilities": {"tools": {}, "resources": {}}, "serverInfo": {"name": "lam-status", "version": env!("CARGO_PKG_VERSION")}}),
        "ping" => json!({}),
        "tools/list" => json!({"tools": [tool]}),
        "tools/call" => json!({"content": [{"type": "text", "text": line(None)}]}),
        "resources/list" => json!({"resources": [{"name": "status", "uri": URI, "mimeType": "application/json"}]}),
        "resources/templates/list" => json!({"resourceTemplates": []}),
        "resources/read" if params.get("uri").and_then(Value::as_str) == Some(URI) => {
            let tree = json!({"type": "text", "props": {"color": "status-usage"}, "children": [line(thread)]});
            json!({"contents": [{"uri": URI, "mimeType": "application/json", "text": tree.to_string()}]})
        }
        "resources/read" => return Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown resource"}}).to_string()),
        _ => return Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}).to_string()),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(agent: Option<&str>, tin: u64, tout: u64, direct: f64, lam: f64) -> Row {
        Row {
            agent_session: agent.map(str::to_string),
            requests: 2,
            tokens_in: tin,
            tokens_out: tout,
            billed_direct: direct,
            billed_lam: lam,
            ..Row::default()
        }
    }

    #[test]
    fn the_line_shows_tokens_kept_out_the_budget_and_the_bill() {
        let mut r = row(Some("a"), 182_400, 41_000, 2_960_000.0, 1_210_000.0);
        (r.peak_input_tokens, r.upstream_input_tokens, r.cuts) = (98_200, 80_100, 3);
        assert_eq!(
            line(&r, Some(160_000), true),
            "lam: tool output 182.4k -> 41.0k tokens (-77.5%) | budget 160.0k: peak 98.2k, last 80.1k, 3 cuts | input bill 1.21M vs 2.96M direct (-59.1%)"
        );
        assert_eq!(line(&r, None, false), "lam (all conversations): tool output 182.4k -> 41.0k tokens (-77.5%) | input bill 1.21M vs 2.96M direct (-59.1%)");
        let dearer = row(None, 0, 0, 1000.0, 1100.0);
        assert_eq!(line(&dearer, None, true), "lam: tool output 0 -> 0 tokens (-0.0%) | input bill 1.10k vs 1.00k direct (+10.0%)");
        assert_eq!(line(&Row::default(), None, true), "lam: no model request through lam yet");
    }

    #[test]
    fn the_conversation_is_every_session_with_the_agent_s_id_else_the_run() {
        let snap = Snapshot {
            sessions: vec![row(Some("a"), 100, 50, 10.0, 5.0), row(Some("b"), 1000, 10, 100.0, 1.0), row(Some("a"), 100, 30, 10.0, 5.0)],
            evicted: row(None, 7, 7, 1.0, 1.0),
            budget_tokens: None,
        };
        let (a, matched) = snap.conversation(Some("a"));
        assert!(matched);
        assert_eq!((a.tokens_in, a.tokens_out, a.requests, a.billed_direct), (200, 80, 4, 20.0));
        for agent in [Some("zzz"), None] {
            let (all, matched) = snap.conversation(agent);
            assert!(!matched);
            assert_eq!((all.tokens_in, all.tokens_out, all.requests), (1207, 97, 8), "the run's total, evicted included");
        }
    }

    #[test]
    fn stdin_session_and_unreachable_proxy() {
        assert_eq!(session_of(r#"{"session_id":"7f0c","cwd":"/x","model":{"id":"m"}}"#).as_deref(), Some("7f0c"));
        assert_eq!(session_of("not json"), None);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let t = std::time::Instant::now();
        let l = line_for(Some(&format!("http://{addr}")), None);
        assert!(l.starts_with(&format!("lam: proxy http://{addr} unreachable (connecting to {addr}")), "{l}");
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(line_for(Some("https://x"), None), "lam: proxy https://x unreachable (proxy `https://x`: expected http://HOST:PORT)");
    }

    /// A proxy that accepts and never answers: the line comes within the timeout.
    #[test]
    fn a_silent_proxy_gives_a_line_within_a_second() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let t = std::time::Instant::now();
        let l = line_for(Some(&format!("http://{addr}")), None);
        assert!(l.contains("no answer within 800 ms"), "{l}");
        assert!(t.elapsed() < Duration::from_millis(1200));
        drop(listener);
    }

    #[test]
    fn codex_s_provider_answers_the_status_line_protocol() {
        let line = |t: Option<&str>| format!("line for {}", t.unwrap_or("-"));
        let ask = |m: &str| serde_json::from_str::<serde_json::Value>(&mcp_reply(m, &line).unwrap()).unwrap();
        let tools = ask(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        assert_eq!(tools["result"]["tools"][0]["_meta"]["openai/ui"]["entrypoints"][0]["resourceUri"], URI);
        let read = ask(&format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{{"uri":"{URI}","_meta":{{"com.openai/codex-statusline-state":{{"thread":{{"id":"019a"}}}}}}}}}}"#
        ));
        let tree: serde_json::Value = serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(tree["children"][0], "line for 019a");
        assert_eq!(ask(r#"{"jsonrpc":"2.0","id":3,"method":"nope"}"#)["error"]["code"], -32601);
        assert!(mcp_reply(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, &line).is_none());
        assert_eq!(ask("{")["error"]["code"], -32700);
    }
}
