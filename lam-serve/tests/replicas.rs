//! With `--budget`, replicas of a run on one store, and a proxy restarted
//! between cuts, forward the same bytes as one proxy: on a real Claude Code
//! transcript (`shared/corpus/agent-transcripts`, read in place; skipped
//! when absent), requests in round robin over three replicas, a fresh
//! proxy after every two cuts, and an upstream whose `usage` counts more
//! than lam (calibration above 1).

use arc_store::AnyStore;
use lam_serve::replay::{Call, requests};
use lam_serve::{Api, Budget, Proxy, ServeConfig};
use lam_trajectory::agents::Agent;
use std::path::{Path, PathBuf};

mod shared_store;
use shared_store::Shared;

/// The requests Claude Code sent for a real transcript, or `None` when the corpus is absent.
fn transcript(rel: &str) -> Option<Vec<Vec<u8>>> {
    let path: PathBuf = lam_core::corpus_dir().join("agent-transcripts").join(rel);
    if !path.exists() {
        eprintln!("skipped: {} is absent", path.display());
        return None;
    }
    let t = lam_trajectory::read::read_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).remove(0);
    let calls: Vec<Call> = t
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| Call::from_action(&r.action, String::from_utf8_lossy(&r.observation).into_owned(), t.thoughts.get(i).cloned().unwrap_or_default()))
        .collect();
    Some(requests(Agent::ClaudeCode, &t.task, &calls))
}

/// The context budget of the transcript under test (`check`): low enough
/// for several cuts.
static BUDGET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(30_000);

fn proxy(store: &Shared, dir: &Path) -> Proxy {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = arc_store::StoreSpec::Dir(dir.to_path_buf());
    cfg.run = Some("team".into());
    cfg.engine.budget = Some(Budget::new(BUDGET.load(std::sync::atomic::Ordering::Relaxed), None, None).unwrap());
    Proxy::open_on(cfg, Box::new(store.clone()) as AnyStore).unwrap()
}

fn store(dir: &Path) -> Shared {
    Shared::new(dir)
}

/// The upstream's count: one token per 3 bytes (more than cl100k's), or none.
fn usage(calibrated: bool, body: &[u8]) -> Option<u64> {
    calibrated.then_some(body.len() as u64 / 3)
}

/// What one proxy forwards for every request, and its cuts after each.
fn single(reqs: &[Vec<u8>], calibrated: bool) -> (Vec<Vec<u8>>, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path());
    let p = proxy(&st, dir.path());
    let mut cuts = Vec::new();
    let bodies = reqs
        .iter()
        .map(|r| {
            let out = p.try_rewrite(Api::Messages, None, r).unwrap();
            usage(calibrated, &out.body).into_iter().for_each(|n| out.report_usage(n));
            cuts.push(p.stats().total().cuts);
            out.body
        })
        .collect();
    (bodies, cuts)
}

/// What proxies on one store forward: request `k` goes to the proxy
/// `pick(k, proxies)` names (a new one when it names none yet).
fn spread(reqs: &[Vec<u8>], calibrated: bool, mut pick: impl FnMut(usize) -> usize) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path());
    let mut proxies: Vec<Proxy> = Vec::new();
    let mut out = Vec::new();
    for (k, r) in reqs.iter().enumerate() {
        let i = pick(k);
        while proxies.len() <= i {
            proxies.push(proxy(&st, dir.path()));
        }
        let rw = proxies[i].try_rewrite(Api::Messages, None, r).unwrap();
        usage(calibrated, &rw.body).into_iter().for_each(|n| rw.report_usage(n));
        out.push(rw.body);
    }
    out
}

fn differing(a: &[Vec<u8>], b: &[Vec<u8>]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}

/// `body` as Python's `json.dumps` writes it (`, ` and `: `), as the
/// official Python SDKs send requests: a replica must forward the client's
/// own bytes whether or not it saw a mark come and go (issue 68: 521 of 530
/// bodies differed in bytes, none as JSON).
fn spaced(body: &[u8]) -> Vec<u8> {
    struct Python;
    impl serde_json::ser::Formatter for Python {
        fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let v: serde_json::Value = serde_json::from_slice(body).unwrap();
    let mut out = Vec::new();
    serde::Serialize::serialize(&v, &mut serde_json::Serializer::with_formatter(&mut out, Python)).unwrap();
    out
}

/// Round robin over three replicas, and a restart after every two cuts
/// (of the single proxy's), with and without calibration; the requests as
/// Claude Code sends them, then as a Python client would.
fn check(rel: &str, budget: u64) {
    let Some(compact) = transcript(rel) else { return };
    let python: Vec<Vec<u8>> = compact.iter().map(|b| spaced(b)).collect();
    for (style, reqs) in [("as Claude Code sends them", compact), ("as Python's json.dumps writes them", python)] {
        check_requests(rel, style, &reqs, budget);
    }
}

fn check_requests(rel: &str, style: &str, reqs: &[Vec<u8>], budget: u64) {
    BUDGET.store(budget, std::sync::atomic::Ordering::Relaxed);
    let mut found = Vec::new();
    for calibrated in [false, true] {
        let (one, cuts) = single(reqs, calibrated);
        let total = *cuts.last().unwrap();
        assert!(total >= 4, "{rel}: {total} cuts; the test needs several");
        let rr = spread(reqs, calibrated, |k| k % 3);
        let mut restarts = 0;
        let mut since = 0;
        let re = spread(reqs, calibrated, |k| {
            if k > 0 && cuts[k - 1] - since >= 2 {
                (since, restarts) = (cuts[k - 1], restarts + 1);
            }
            restarts
        });
        let (d_rr, d_re) = (differing(&one, &rr), differing(&one, &re));
        if let Some(k) = (0..one.len()).find(|&k| one[k] != rr[k]) {
            let (a, b) = (&one[k], &rr[k]);
            let i = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]).unwrap_or(0);
            let show = |x: &[u8]| String::from_utf8_lossy(&x[i.saturating_sub(300)..(i + 200).min(x.len())]).into_owned();
            eprintln!("{rel}, {style}: request {k} first differs at byte {i}\n  one proxy:   {}\n  round robin: {}", show(a), show(b));
        }
        eprintln!(
            "{rel}, {style} (calibrated: {calibrated}): {total} cuts; bodies differing of {}: round robin over 3: {d_rr}, restarted {restarts} times: {d_re}",
            reqs.len()
        );
        found.push((calibrated, d_rr, d_re));
    }
    assert!(found.iter().all(|f| (f.1, f.2) == (0, 0)), "{rel}, {style}: bodies differing from one proxy's (calibrated, round robin, restarts): {found:?}");
}

#[test]
fn replicas_and_restarts_forward_what_one_proxy_forwards() {
    check("cctrace/main.jsonl", 25_000);
    check("spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", 5_000);
}
