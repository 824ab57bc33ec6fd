//! Admission time against the length of a run without a break: one chat
//! request whose single tool result is a run of N bytes of one character
//! class (letters, `=`, spaces, base64, digits; and ordinary log lines as a
//! control), rewritten by the proxy in-process (parse, identity, archive to
//! memory, tokens, chunks, hashing encoder, L1, L0). Prints a markdown table
//! of milliseconds per request and MB/s. Linear means MB/s flat across N.
//!
//! `cargo bench -p lam-serve --bench long_runs [-- --max-mib 8]`

use lam_serve::{Api, Proxy, ServeConfig};
use std::time::Instant;

fn class(name: &str, n: usize) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u32 = 0x9e37_79b9;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    match name {
        "letters" => (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect(),
        "equals" => "=".repeat(n),
        "spaces" => " ".repeat(n),
        "base64" => (0..n).map(|_| B64[next() as usize % 64] as char).collect(),
        "digits" => (0..n).map(|_| (b'0' + (next() % 10) as u8) as char).collect(),
        _ => (0..)
            .map(|i| format!("tests/test_mod_{}.py::test_case_{i} PASSED [{}%]\n", i % 17, i % 100))
            .take_while({
                let mut len = 0;
                move |l: &String| {
                    len += l.len();
                    len <= n
                }
            })
            .collect(),
    }
}

fn body(text: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"model": "m", "messages": [
        {"role": "user", "content": "look at the file"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"cat blob\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": text}]}))
    .expect("JSON")
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let max_mib: usize = argv.windows(2).find(|w| w[0] == "--max-mib").map_or(8, |w| w[1].parse().expect("a number"));
    let sizes: Vec<usize> = [1 << 10, 16 << 10, 128 << 10, 1 << 20, 8 << 20].into_iter().filter(|&n| n <= max_mib << 20).collect();
    let classes = ["letters", "equals", "spaces", "base64", "digits", "log lines"];
    println!("| class | {} |", sizes.iter().map(|n| size_name(*n)).collect::<Vec<_>>().join(" | "));
    println!("|---|{}", "---:|".repeat(sizes.len()));
    for c in classes {
        let mut cells = Vec::new();
        for &n in &sizes {
            let b = body(&class(c, n));
            let runs = if n >= 1 << 20 { 1 } else { 3 };
            let mut best = f64::MAX;
            for _ in 0..runs {
                // A fresh proxy each time: the run is new to it.
                let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).expect("proxy");
                let t = Instant::now();
                let r = proxy.try_rewrite(Api::ChatCompletions, None, &b).expect("rewritten");
                best = best.min(t.elapsed().as_secs_f64());
                assert!(r.session.is_some());
                assert_eq!(proxy.stats().failed_open, 0);
            }
            cells.push(format!("{:.1} ms ({:.0} MB/s)", best * 1e3, n as f64 / best / 1e6));
        }
        println!("| {c} | {} |", cells.join(" | "));
    }
}

fn size_name(n: usize) -> String {
    if n >= 1 << 20 { format!("{} MiB", n >> 20) } else { format!("{} KiB", n >> 10) }
}
