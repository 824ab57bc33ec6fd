//! ARC view assembly per turn with 10,000 archived observations (target
//! <= 200 us) and warm recall latency (target <= 50 us median), with the
//! sliding-window and masking baselines rendered over the same history as
//! peers. Tokens are cl100k_base throughout.

use arc_store::MemStore;
use arc_view::{ArcConfig, ArcView, ObservationMasking, SlidingWindow};
use criterion::{Criterion, black_box};
use lam_core::{Record, SessionId, Turn, ViewPolicy};
use lam_trajectory::Cl100k;
use std::time::Instant;

const ARCHIVED: usize = 10_000;

fn real_turns() -> (String, Vec<Turn>) {
    let root = lam_trajectory::corpus_dir();
    let files = lam_trajectory::read::expand(&[root.join("mini-swe-agent-gemini3pro-swebench-verified/trajs")]).unwrap();
    let mut task = String::new();
    let mut turns = Vec::new();
    for f in files.iter().take(40) {
        let t = lam_trajectory::read::read_path(f).unwrap().remove(0);
        if task.is_empty() {
            task = t.task.clone();
        }
        turns.extend(t.turns());
    }
    (task, turns)
}

/// Turn `i` of an endless session cycled from real turns; the action carries
/// the turn number so every observation is a distinct archive record.
fn turn(base: &[Turn], i: usize) -> Turn {
    let b = &base[i % base.len()];
    Turn {
        thought: b.thought.clone(),
        record: Record {
            index: i as u32,
            action: format!("{} # {i}", b.record.action),
            observation: b.record.observation.clone(),
            returncode: b.record.returncode,
        },
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let (task, base) = real_turns();
    let mut cfg = ArcConfig::with_limit(16_384);
    cfg.completion = 4096;
    let limit = 16_384 - 4096;
    let mut arc = ArcView::new(cfg, SessionId("bench".into()), &task, MemStore::new(), Cl100k).unwrap();
    let mut win = SlidingWindow::new(&task, Cl100k, 5, limit);
    let mut mask = ObservationMasking::new(&task, Cl100k, 10, limit);
    let t0 = Instant::now();
    let mut out = String::new();
    let mut ids = Vec::new();
    for i in 0..ARCHIVED {
        let t = turn(&base, i);
        ids.push(arc.push_turn(&t.thought, &t.record).unwrap().shown);
        win.push(&t).unwrap();
        mask.push(&t).unwrap();
        arc.render_view(&mut out).unwrap();
    }
    let s = arc.render_view(&mut out).unwrap();
    eprintln!(
        "setup: {ARCHIVED} real turns archived and rendered after each in {:.1} s ({} compactions, view {} of {} tokens)",
        t0.elapsed().as_secs_f64(),
        s.compactions,
        s.tokens,
        s.limit
    );

    let mut g = c.benchmark_group("view");
    g.bench_function("arc render (10k archived)", |b| b.iter(|| black_box(arc.render_view(&mut out).unwrap().tokens)));
    g.bench_function("window(5) render (peer)", |b| b.iter(|| black_box(win.render().unwrap())));
    g.bench_function("masking(10) render (peer)", |b| b.iter(|| black_box(mask.render().unwrap())));
    let mut next = ARCHIVED;
    g.bench_function("arc turn: archive + count + render", |b| {
        b.iter(|| {
            let t = turn(&base, next);
            next += 1;
            arc.push_turn(&t.thought, &t.record).unwrap();
            black_box(arc.render_view(&mut out).unwrap().tokens)
        })
    });
    g.finish();

    // Warm recall: the part was cut and counted at its first recall.
    let warm: Vec<String> = ids.iter().step_by(97).take(64).cloned().collect();
    for id in &warm {
        arc.act("", &format!("_recall §{id}")).unwrap();
    }
    let mut k = 0;
    c.bench_function("arc recall (warm)", |b| {
        b.iter(|| {
            k += 1;
            black_box(arc.act("", &format!("_recall §{}", warm[k % warm.len()])).unwrap())
        })
    });
    c.final_summary();
}
