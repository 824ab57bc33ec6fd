//! What sessions hold against `--max-memory`: many large conversations driven
//! through the proxy in-process (HTTP, loopback upstream stub, hashing
//! encoder, `mem:` store); prints the budget, the most the sessions held
//! (`/lam/stats` `memory_bytes`, sampled after every round), evictions, and
//! the process's peak RSS (`VmHWM` of `/proc/self/status`).
//!
//! `cargo bench -p lam-serve --bench memory [-- --sessions 200 --turns 6 --obs-kib 64 --budget-mib 64 --clients 8]`
//! (`--budget-mib 0`: no budget, for comparison).

#[path = "../tests/support/mod.rs"]
mod support;

use lam_serve::{ServeConfig, Stats};
use serde_json::json;
use std::time::Instant;

struct Args {
    sessions: usize,
    turns: usize,
    obs_kib: usize,
    budget_mib: usize,
    clients: usize,
}

fn args() -> Args {
    let mut a = Args { sessions: 200, turns: 6, obs_kib: 64, budget_mib: 64, clients: 8 };
    let argv: Vec<String> = std::env::args().collect();
    for w in argv.windows(2) {
        let n = || w[1].parse::<usize>().expect("a number");
        match w[0].as_str() {
            "--sessions" => a.sessions = n(),
            "--turns" => a.turns = n(),
            "--obs-kib" => a.obs_kib = n(),
            "--budget-mib" => a.budget_mib = n(),
            "--clients" => a.clients = n(),
            _ => {}
        }
    }
    a
}

/// `VmHWM` (peak resident set) in KiB.
fn peak_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

/// A tool result of about `kib` KiB of random words, different per session
/// and turn (so line dedup does not empty it and the operator retains its
/// chunks: the worst case for memory).
fn observation(session: usize, turn: usize, kib: usize) -> String {
    let mut out = String::with_capacity(kib << 10);
    let mut x = (session as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ turn as u64;
    while out.len() < kib << 10 {
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push_str(&format!("{:08x} ", x as u32));
        }
        out.push('\n');
    }
    out
}

fn request(session: usize, turns: usize, kib: usize) -> Vec<u8> {
    let mut m = vec![json!({"role": "user", "content": format!("task {session}")})];
    for k in 0..turns {
        let id = format!("call_{k}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\":\"step {k}\"}}")}}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": observation(session, k, kib)}));
    }
    serde_json::to_vec(&json!({"model": "stub", "messages": m})).expect("json")
}

async fn round(base: &str, a: &Args, turn: usize) {
    let c = reqwest::Client::new();
    let next = std::sync::Arc::new(std::sync::Mutex::new((0..a.sessions).rev().collect::<Vec<_>>()));
    let mut tasks = Vec::new();
    for _ in 0..a.clients {
        let (c, base, next, kib) = (c.clone(), base.to_string(), next.clone(), a.obs_kib);
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(s) = next.lock().expect("queue").pop() else { break };
                let body = request(s, turn, kib);
                let r = c.post(format!("{base}/v1/chat/completions")).body(body).send().await.expect("send");
                assert_eq!(r.status(), 200);
                r.bytes().await.expect("answer");
            }
        }));
    }
    for t in tasks {
        t.await.expect("client");
    }
}

/// An upstream that reads each request and answers the stub reply, keeping
/// nothing (the tests' stub records every body).
async fn start_upstream() -> std::net::SocketAddr {
    async fn answer(req: axum::extract::Request) -> ([(axum::http::HeaderName, &'static str); 1], &'static str) {
        let _ = axum::body::to_bytes(req.into_body(), usize::MAX).await;
        ([(axum::http::header::CONTENT_TYPE, "application/json")], support::REPLY)
    }
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, axum::Router::new().fallback(answer)).await });
    addr
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let up = start_upstream().await;
    let mut cfg = ServeConfig::for_tests(&format!("http://{up}"));
    cfg.max_memory = if a.budget_mib == 0 { usize::MAX } else { a.budget_mib << 20 };
    let mut run = support::start_proxy(cfg);
    let base = format!("http://{}", run.addr);
    let (rss0, started) = (peak_rss_kib(), Instant::now());
    let mut most = 0;
    for turn in 1..=a.turns {
        round(&base, &a, turn).await;
        most = most.max(run.proxy.stats().memory_bytes);
    }
    let st: Stats = run.proxy.stats();
    let rss = peak_rss_kib();
    let sent: u64 = (a.sessions * a.turns * (a.turns + 1) / 2 * a.obs_kib) as u64;
    println!(
        "sessions {} x turns {} x {} KiB observations ({} requests, {:.0} MiB of tool results sent) in {:.1} s, {} clients",
        a.sessions,
        a.turns,
        a.obs_kib,
        a.sessions * a.turns,
        sent as f64 / 1024.0,
        started.elapsed().as_secs_f64(),
        a.clients
    );
    let budget = if a.budget_mib == 0 { "none".to_string() } else { format!("{} MiB", a.budget_mib) };
    println!("| budget | most held MiB | held at end MiB | sessions held | evicted | created | peak RSS MiB (start) |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {budget} | {:.1} | {:.1} | {} | {} | {} | {:.0} ({:.0}) |",
        most as f64 / 1048576.0,
        st.memory_bytes as f64 / 1048576.0,
        st.sessions.len(),
        st.evicted_sessions,
        st.sessions_created,
        rss as f64 / 1024.0,
        rss0 as f64 / 1024.0
    );
    run.stop.take().expect("stop").send(()).expect("stop");
    run.done.await.expect("join").expect("serve");
}
