//! The proxy's added latency and its throughput, against the loopback
//! upstream stub of the tests; prints a table.
//!
//! Latency: p50/p99 time to first byte (response headers and the first body
//! chunk) of chat-completion requests, straight to the stub and through the
//! proxy, non-streaming and streaming. Each request continues a real
//! trajectory by one tool result, as an agent's do, so the proxy parses,
//! matches, admits one new observation (hashing encoder, in-memory store) and
//! re-forwards the rest from its session. Throughput: requests per second with
//! 1, 16 and 64 sessions running at once.
//!
//! `cargo bench -p lam-serve --bench proxy [-- --turns N --sessions N]`

#[path = "../tests/support/mod.rs"]
mod support;

use lam_serve::ServeConfig;
use serde_json::json;
use std::time::{Duration, Instant};

/// Conversations: the first `turns` records of the first trajectories.
fn conversations(count: usize, turns: usize) -> Vec<Vec<(String, String)>> {
    let dir = lam_core::testsuite::corpus().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("corpus").map(|e| e.expect("entry").path()).collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| lam_trajectory::read::read_path(f).ok()?.into_iter().next())
        .filter(|t| t.records.len() >= turns)
        .take(count)
        .map(|t| t.records.iter().take(turns).map(|r| (r.action.clone(), String::from_utf8_lossy(&r.observation).into_owned())).collect())
        .collect()
}

/// The chat request after `k` tool results of conversation `c` (tagged so
/// every session is distinct).
fn request(c: &[(String, String)], k: usize, tag: usize, stream: bool) -> Vec<u8> {
    let mut m = vec![json!({"role": "system", "content": "You are a helpful assistant."}), json!({"role": "user", "content": format!("task {tag}")})];
    for (j, (action, obs)) in c.iter().take(k).enumerate() {
        let id = format!("call_{j}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": json!({"command": action}).to_string()}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": obs}));
    }
    serde_json::to_vec(&json!({"model": "stub", "stream": stream, "messages": m})).expect("json")
}

/// Send one request; time to first byte, and drain the rest.
async fn ttfb(c: &reqwest::Client, url: &str, body: Vec<u8>) -> Duration {
    let t = Instant::now();
    let mut r = c.post(url).header("content-type", "application/json").body(body).send().await.expect("send");
    assert!(r.status().is_success(), "{}", r.status());
    let first = r.chunk().await.expect("chunk");
    let d = t.elapsed();
    assert!(first.is_some());
    while r.chunk().await.expect("chunk").is_some() {}
    d
}

fn pct(v: &mut [Duration], p: usize) -> f64 {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)].as_secs_f64() * 1e3
}

/// `max(sessions, convs.len())` conversations turn by turn, `sessions` at
/// once (worker `w` runs conversations `w`, `w + sessions`, ...); (TTFBs, wall time).
async fn drive(base: &str, convs: &[Vec<(String, String)>], sessions: usize, stream: bool, round: usize) -> (Vec<Duration>, Duration) {
    let url = format!("{base}/v1/chat/completions");
    let total = sessions.max(convs.len());
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..sessions {
        let (url, convs) = (url.clone(), convs.to_vec());
        tasks.push(tokio::spawn(async move {
            let c = reqwest::Client::new();
            let mut out = Vec::new();
            for s in (w..total).step_by(sessions) {
                let conv = &convs[s % convs.len()];
                for k in 1..=conv.len() {
                    out.push(ttfb(&c, &url, request(conv, k, round * 1000 + s, stream)).await);
                }
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    (all, t.elapsed())
}

fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter().position(|x| x == name).and_then(|i| a.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let turns = arg("--turns", 15);
    let convs = conversations(arg("--conversations", 8), turns);
    assert!(!convs.is_empty(), "no trajectory with {turns} records");
    let (up, _) = support::start_upstream().await;
    let mut cfg = ServeConfig::for_tests(&format!("http://{up}"));
    cfg.engine.encoders = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let run = support::start_proxy(cfg);
    let direct = format!("http://{up}");
    let proxied = format!("http://{}", run.addr);
    let n = convs.len() * turns;
    println!(
        "lam serve: added latency and throughput (loopback stub, hashing encoder, mem: store; {} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("each request continues a real trajectory by one tool result ({} conversations x {turns} turns = {n} requests per row)\n", convs.len());
    println!("| mode | path | p50 TTFB ms | p99 TTFB ms |");
    println!("|---|---|---|---|");
    let mut round = 0;
    for stream in [false, true] {
        for (name, base) in [("direct", &direct), ("proxy", &proxied)] {
            // One session at a time: every conversation in turn.
            round += 1;
            let (mut d, _) = drive(base, &convs, 1, stream, round).await;
            let mode = if stream { "streaming" } else { "non-streaming" };
            println!("| {mode} | {name} | {:.2} | {:.2} |", pct(&mut d, 50), pct(&mut d, 99));
        }
    }
    println!("\n| sessions at once | path | requests | req/s | p50 TTFB ms | p99 TTFB ms |");
    println!("|---|---|---|---|---|---|");
    for sessions in [1, 16, 64] {
        for (name, base) in [("direct", &direct), ("proxy", &proxied)] {
            round += 1;
            let (mut d, wall) = drive(base, &convs, sessions, false, round).await;
            println!("| {sessions} | {name} | {} | {:.0} | {:.2} | {:.2} |", d.len(), d.len() as f64 / wall.as_secs_f64(), pct(&mut d, 50), pct(&mut d, 99));
        }
    }
    let st = run.proxy.stats();
    let (tin, tout): (u64, u64) = st.sessions.iter().fold((0, 0), |(a, b), s| (a + s.tokens_in, b + s.tokens_out));
    let errors: u64 = st.sessions.iter().map(|s| s.admission_errors).sum::<u64>() + st.upstream_errors + st.upstream_unreachable;
    println!("\nproxy: {} sessions, cl100k tool-result tokens {tin} in, {tout} forwarded; {errors} errors", st.sessions.len());
    assert_eq!(errors, 0);
}
