//! Stubs name what the model can see, on every reader format: every call a
//! stub names is an earlier call of the same trajectory, named as
//! `lam_core::action::referent` shortens it, and occurs verbatim in the file
//! the agent logged; no stub names its own observation, and lines of "this
//! output" lie above the stub. (Through the proxy: `lam-serve` tests,
//! `check_referents`.)

use lam_core::action::referent;
use lam_core::{Stub, Threshold};
use lam_encode::HashingEncoder;
use lam_operator::{Config, compact_batch};
use lam_trajectory::read;
use std::io::Read;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// One input per reader format.
fn inputs() -> Vec<(&'static str, PathBuf)> {
    let corpus = lam_core::corpus_dir();
    let fixtures = root().join("lam-trajectory/tests/fixtures");
    vec![
        ("mini-swe-agent", corpus.join("mini-swe-agent-gemini3pro-swebench-verified/trajs/astropy__astropy-13453.traj.json.gz")),
        ("SWE-agent", corpus.join("swe-agent-demos/tests/test_data/trajectories/gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1/pydicom__pydicom-1458.traj")),
        ("OpenAI chat", root().join("examples/edit-session.openai.json")),
        ("lam JSONL", root().join("examples/edit-session.jsonl")),
        ("Claude Code", fixtures.join("claude-code/-home-user-demo/1b6f0c3e-5d7a-4c1e-9a55-3f2d8e9c0a11.jsonl")),
        ("Codex", fixtures.join("codex/sessions/2025/10/29/rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl")),
    ]
}

/// The file as the agent logged it (gzip undone).
fn raw(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut s).unwrap();
        return s;
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn every_call_a_stub_names_is_an_earlier_one_the_model_saw() {
    static CL: lam_trajectory::Cl100k = lam_trajectory::Cl100k;
    let mut named = 0;
    for (format, path) in inputs() {
        let text = raw(&path);
        for traj in read::read_path(&path).unwrap_or_else(|e| panic!("{format}: {e}")) {
            let cfg = Config::new(Threshold::from_cosine(0.9).unwrap()).with_counter(&CL);
            let out = compact_batch(cfg, &mut HashingEncoder::default(), &traj.records).unwrap();
            for (i, a) in out.admissions.iter().enumerate() {
                let lines: Vec<&[u8]> = a.residual.split(|&b| b == b'\n').collect();
                for st in &a.stubs {
                    let line = st.to_string();
                    let at = lines.iter().position(|l| *l == line.as_bytes()).expect("the stub is a line of the residual") as u32 + 1;
                    for call in st.calls() {
                        let earlier = traj.records[..i].iter().any(|r| referent(&r.action) == call);
                        assert!(earlier, "{format} {}: record {i}: `{call}` is no earlier call: {line}", traj.session);
                        assert!(text.contains(call), "{format}: `{call}` does not occur in {}", path.display());
                        named += 1;
                    }
                    let above = match st {
                        Stub::Chunks(c) => c.like.iter().filter(|p| p.of.is_none()).all(|p| p.last < at),
                        Stub::Lines(l) => {
                            l.from.of.is_some() || lam_core::expand::place_in(&lines[..at as usize - 1].join(&b'\n'), l.from.first, l.from.last).is_some()
                        }
                        Stub::Repeat(r) => !r.of.is_empty() || i > 0,
                        Stub::Delta(_) => i > 0,
                    };
                    assert!(above, "{format}: record {i}: names text below it: {line}");
                }
            }
        }
    }
    assert!(named > 20, "only {named} calls named: the test would not show much");
}
