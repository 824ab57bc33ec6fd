//! ARC with real trajectories and the papers' tokenizer: LAM stubs resolve in
//! the archive, the view bound holds for the whole text, the needle comes
//! back, and rendered views stay as reviewed.

use arc_store::MemStore;
use arc_view::{ArcConfig, ArcView, ObservationMasking, SlidingWindow};
use lam_core::{ObsStore, Threshold, TokenCounter, Turn, ViewPolicy};
use lam_encode::HashingEncoder;
use lam_eval::report;
use lam_operator::Config;
use lam_trajectory::Cl100k;
use lam_trajectory::read::{self, Trajectory};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

fn mini_swe(n: usize, min_turns: usize) -> Vec<Trajectory> {
    let dir = lam_core::testsuite::corpus().join("mini-swe-agent-gemini3pro-swebench-verified/trajs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let t = read::read_path(&f).unwrap().remove(0);
        if t.records.len() >= min_turns {
            out.push(t);
        }
        if out.len() == n {
            break;
        }
    }
    assert_eq!(out.len(), n, "corpus has too few trajectories of {min_turns}+ turns");
    out
}

#[test]
fn every_lam_stub_resolves_to_the_archived_original() {
    let cfg = Config::new(Threshold::from_cosine(0.95).unwrap());
    let mut trajs = mini_swe(4, 10);
    trajs.push(read::read_path(&lam_core::testsuite::example()).unwrap().remove(0));
    let mut stubs_checked = 0;
    for traj in &trajs {
        let mut store = MemStore::new();
        let mut enc = HashingEncoder::default();
        let run = report::run_archived(cfg, &mut enc, traj, false, Some(&mut store)).unwrap();
        let by_id: HashMap<String, &lam_core::Record> = run.online.iter().zip(&traj.records).map(|(a, r)| (a.id.clone(), r)).collect();
        for (a, r) in run.online.iter().zip(&traj.records) {
            // The archive holds every observation exactly, under the operator's id.
            assert_eq!(store.get(&traj.session, &a.id).unwrap().as_deref(), Some(&r.observation[..]));
            for s in &a.stubs {
                // The stub is in the residual and reads back as itself.
                let line = s.to_string();
                assert!(a.residual.split(|&b| b == b'\n').any(|l| l == line.as_bytes()), "{line} not in the residual");
                assert_eq!(lam_core::Stub::parse(&line).map(|p| p.to_string()), Ok(line.clone()));
                let id = s.id();
                let body = store.get(&traj.session, id).unwrap().unwrap_or_else(|| panic!("{}: {s}: §{id} not archived", traj.session));
                assert_eq!(body, by_id[id].observation);
                // Every call it names is an earlier call of the trajectory, as the model saw it.
                for call in s.calls() {
                    let earlier = &traj.records[..a.record as usize];
                    assert!(earlier.iter().any(|r| lam_core::action::referent(&r.action) == call), "{s}: `{call}` is no earlier call");
                }
                // The recall handle is the record's own archived original.
                assert_eq!(s.id(), a.id, "{s}");
                stubs_checked += 1;
            }
        }
    }
    assert!(stubs_checked > 20, "only {stubs_checked} stubs: the test would not show much");
}

/// cl100k with a memo, so a thousand trials over the same trajectories stay cheap.
#[derive(Clone, Default)]
struct Memo(Arc<Mutex<HashMap<u64, usize>>>);

impl TokenCounter for Memo {
    fn count(&self, text: &[u8]) -> usize {
        let h = xxhash_rust::xxh3::xxh3_64(text);
        if let Some(&n) = self.0.lock().unwrap().get(&h) {
            return n;
        }
        let n = Cl100k.count(text);
        self.0.lock().unwrap().insert(h, n);
        n
    }
    fn spans(&self, text: &[u8], out: &mut Vec<std::ops::Range<usize>>) {
        Cl100k.spans(text, out)
    }
}

#[test]
fn whole_view_counts_stay_within_the_limit_on_real_trajectories() {
    // The budget arithmetic sums entry counts; check the whole text with cl100k.
    for (k, traj) in mini_swe(3, 12).iter().enumerate() {
        for (limit, completion) in [(6000, 0), (16_384, 4096), (9000, 1000)] {
            let mut cfg = ArcConfig::with_limit(limit);
            cfg.completion = completion;
            let mut v = ArcView::new(cfg, traj.session.clone(), &traj.task, MemStore::new(), Cl100k).unwrap();
            let mut out = String::new();
            let mut ids = Vec::new();
            for (i, t) in traj.turns().iter().enumerate() {
                ids.push(v.push_turn(&t.thought, &t.record).unwrap().shown);
                if i % 4 == 3 {
                    v.act("", &format!("_recall §{}", ids[i / 2])).unwrap();
                }
                if (i + k) % 7 == 0 {
                    v.compact_now();
                }
                let s = v.render_view(&mut out).unwrap();
                let whole = Cl100k.count(out.as_bytes());
                assert_eq!(whole, s.tokens, "{} turn {i}", traj.session);
                assert!(whole <= limit - completion, "{} turn {i}: {whole} > {}", traj.session, limit - completion);
            }
        }
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALPHABET: &[u8; 30] = b"ABCDEFGHJKLMNPQRSTUVWXYZ234567";

/// A whole 24-character key after `api_key = ` anywhere in the view (a
/// preview may show a cut-off one).
fn find_needle(view: &str) -> Option<String> {
    view.match_indices("api_key = ").find_map(|(i, _)| {
        let c: String = view[i + 10..].chars().take(24).collect();
        (c.len() == 24 && c.bytes().all(|b| ALPHABET.contains(&b))).then_some(c)
    })
}

/// The id cited for `cat secrets.txt` in the summary or on the catalog page.
fn find_secret_id(view: &str) -> Option<String> {
    for line in view.lines() {
        if line.contains("$ cat secrets.txt") {
            let i = line.find('§')?;
            let id: String = line[i + 2..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            if id.len() >= lam_core::MIN_SHOWN {
                return Some(id);
            }
        }
    }
    None
}

#[test]
fn needle_comes_back_exactly_in_every_trial() {
    let trials: u64 = std::env::var("ARC_NEEDLE_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let trajs = mini_swe(6, 19);
    let tok = Memo::default();
    let (mut arc_ok, mut win_kept, mut mask_kept, mut recalls, mut pages) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for seed in 0..trials {
        let mut rng = Rng(seed);
        let traj = &trajs[rng.below(trajs.len())];
        let needle: String = (0..24).map(|_| ALPHABET[rng.below(30)] as char).collect();
        let lines = 20 + rng.below(60);
        let at = rng.below(lines);
        let mut secrets = String::new();
        for l in 0..lines {
            if l == at {
                secrets.push_str(&format!("api_key = {needle}\n"));
            } else {
                secrets.push_str(&format!("setting_{l:03} = {}\n", rng.next() % 100_000));
            }
        }
        let pos = 1 + rng.below(3);
        let mut turns: Vec<Turn> = traj.turns().into_iter().take(19).collect();
        turns.insert(
            pos,
            Turn {
                thought: "Read the credentials file; the final answer needs the key.".into(),
                record: lam_core::Record { index: 0, action: "cat secrets.txt".into(), observation: secrets.into_bytes(), returncode: Some(0) },
            },
        );
        for (i, t) in turns.iter_mut().enumerate() {
            t.record.index = i as u32;
        }
        let mut cfg = ArcConfig::with_limit(16_384);
        cfg.completion = 4096;
        let limit = 16_384 - 4096;
        let mut v = ArcView::new(cfg, traj.session.clone(), &traj.task, MemStore::new(), tok.clone()).unwrap();
        let mut win = SlidingWindow::new(&traj.task, tok.clone(), 5, limit);
        let mut mask = ObservationMasking::new(&traj.task, tok.clone(), 10, limit);
        let mut out = String::new();
        for (i, t) in turns.iter().enumerate() {
            v.push(t).unwrap();
            win.push(t).unwrap();
            mask.push(t).unwrap();
            let call = i + 1;
            if [5, 10, 15].contains(&call) {
                v.compact_now();
            }
            let s = v.render_view(&mut out).unwrap();
            assert!(s.tokens <= limit);
        }
        // The scripted agent answers from what it sees: the view, then
        // citations it follows, then recalls.
        let mut answer = find_needle(&out);
        let mut steps = 0;
        while answer.is_none() && steps < 40 {
            steps += 1;
            match find_secret_id(&out) {
                Some(id) => {
                    v.act("I need the key from secrets.txt.", &format!("_recall §{id}")).unwrap();
                    recalls += 1;
                }
                None => {
                    v.act("Look for secrets.txt in the catalog.", "catalog next").unwrap();
                    pages += 1;
                }
            }
            let s = v.render_view(&mut out).unwrap();
            assert!(s.tokens <= limit);
            answer = find_needle(&out);
        }
        if answer.as_deref() == Some(needle.as_str()) {
            arc_ok += 1;
        }
        let out = win.render().unwrap().text;
        win_kept += u64::from(find_needle(&out).as_deref() == Some(needle.as_str()));
        let out = mask.render().unwrap().text;
        mask_kept += u64::from(find_needle(&out).as_deref() == Some(needle.as_str()));
    }
    eprintln!(
        "needle, {trials} trials (forced compaction at calls 5, 10, 15; L = 12288): ARC {arc_ok}/{trials} ({recalls} recalls, {pages} catalog pages); sliding window(5) keeps it in {win_kept}/{trials}; masking(10) keeps it in {mask_kept}/{trials}"
    );
    assert_eq!(arc_ok, trials);
}

#[test]
fn rendered_views_of_the_example_session() {
    let traj = read::read_path(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edit-session.openai.json")).unwrap().remove(0);
    assert!(!traj.task.is_empty());
    for limit in [3000, 6000] {
        let mut v = ArcView::new(ArcConfig::with_limit(limit), traj.session.clone(), &traj.task, MemStore::new(), Cl100k).unwrap();
        let mut out = String::new();
        let mut last = None;
        for t in traj.turns() {
            v.push(&t).unwrap();
            last = Some(v.render_view(&mut out).unwrap());
        }
        let s = last.unwrap();
        assert!(s.tokens <= limit && s.compactions > 0);
        insta::assert_snapshot!(
            format!("example_view_{limit}"),
            format!("tokens: {} of {}; compactions: {}; citations: {:?}\n\n{out}", s.tokens, s.limit, s.compactions, s.citations)
        );
    }
}
