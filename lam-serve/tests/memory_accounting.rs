//! What `--max-memory` counts against what sessions really hold: a counting
//! allocator measures the bytes still allocated after conversations went
//! through the proxy (their sessions alive), with the archive in a
//! directory (not in memory), and compares them with `memory_bytes`.

use lam_serve::{Api, Proxy, ServeConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator, counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size() as isize, Ordering::Relaxed) + l.size() as isize;
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // Old and new blocks both live while the bytes are copied.
        PEAK.fetch_max(LIVE.load(Ordering::Relaxed) + new as isize, Ordering::Relaxed);
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The counters are process-wide: the tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// A chat conversation of `turns` tool results, each `lines` short lines
/// (distinct, so little merges), `tag` making it its own.
fn chat(tag: usize, turns: usize, lines: usize) -> Vec<u8> {
    let mut msgs = vec![serde_json::json!({"role": "user", "content": format!("task {tag}")})];
    for t in 0..turns {
        let id = format!("c{t}");
        let out: String = (0..lines).map(|k| format!("{tag} {t} line {k} value {}\n", (tag * 7919 + t * 104_729 + k * 31) % 100_003)).collect();
        msgs.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": format!("{{\"cmd\":\"step {t}\"}}")}}]}));
        msgs.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": out}));
    }
    serde_json::to_vec(&serde_json::json!({"model": "m", "messages": msgs})).unwrap()
}

/// Many small tool results (the shape the probe found undercounted about 6x:
/// the banded index and L0's line table were not counted) and a few large
/// ones: what sessions hold is within [0.7, 1.6] of what the proxy counts.
#[test]
fn max_memory_counts_what_sessions_hold() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    for (sessions, turns, lines) in [(40, 60, 2), (6, 4, 2000)] {
        let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
        cfg.store = arc_store::StoreSpec::Dir(dir.path().join(format!("s{sessions}")));
        let proxy = Proxy::open(cfg).unwrap();
        let bodies: Vec<Vec<u8>> = (0..sessions).map(|s| chat(s, turns, lines)).collect();
        let warm = chat(10_000, 2, 2);
        proxy.rewrite(Api::ChatCompletions, None, &warm);
        let before = live();
        for b in &bodies {
            let r = proxy.rewrite(Api::ChatCompletions, None, b);
            assert!(r.session.is_some());
        }
        let held = (live() - before) as f64;
        let counted = proxy.stats().memory_bytes as f64;
        let ratio = held / counted;
        eprintln!("{sessions} sessions x {turns} results x {lines} lines: held {held:.0} B, counted {counted:.0} B, ratio {ratio:.2}");
        assert!((0.7..=1.6).contains(&ratio), "held {held} vs counted {counted}");
        drop(bodies);
        drop(proxy);
    }
}

/// The working memory of one request, above what was live before it: a
/// body of many tiny messages (the probe's 47x case) and one of a few large
/// tool results. Printed for the docs; bounded loosely so a regression shows.
#[test]
fn a_request_works_in_a_small_multiple_of_its_body() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (name, body) in [("tiny messages", tiny_messages(4 << 20)), ("large tool results", chat(1, 8, 12_000))] {
        let proxy = Proxy::open(ServeConfig::for_tests("http://127.0.0.1:9")).unwrap();
        proxy.rewrite(Api::ChatCompletions, None, &chat(10_000, 2, 2));
        let before = live();
        PEAK.store(before, Ordering::Relaxed);
        let r = proxy.rewrite(Api::ChatCompletions, None, &body);
        let peak = (PEAK.load(Ordering::Relaxed) - before) as f64 / body.len() as f64;
        let held = (live() - before) as f64 / body.len() as f64;
        eprintln!("{name}: body {} B, peak {peak:.1}x the body, held after {held:.1}x", body.len());
        assert!(r.session.is_some());
        assert!(peak <= 16.0, "{name}: {peak:.1}x");
    }
}

/// A chat body of about `size` bytes of one-word user and assistant turns.
fn tiny_messages(size: usize) -> Vec<u8> {
    let mut msgs = Vec::new();
    let mut n = 0;
    while n < size {
        let m = serde_json::json!({"role": if msgs.len() % 2 == 0 { "user" } else { "assistant" }, "content": format!("w{}", msgs.len())});
        n += m.to_string().len() + 1;
        msgs.push(m);
    }
    serde_json::to_vec(&serde_json::json!({"model": "m", "messages": msgs})).unwrap()
}
