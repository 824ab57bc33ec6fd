//! The readers on real recorded agent transcripts (`shared/corpus/agent-transcripts`:
//! Claude Code 2.0.76, 2.1.38, 2.1.39 from cctrace and spotter, Codex CLI
//! 0.34 from OpenPrintKit; MIT, see its PROVENANCE.md). The counts were taken
//! independently, by a Python count over the files: `tool_result` blocks of
//! `user` lines (a repeated `uuid` once), split at `compact_boundary` lines;
//! `*_call_output` items of `response_item` lines.

use lam_trajectory::agents::Agent;
use lam_trajectory::read::{self, Format, Trajectory};
use std::path::PathBuf;

fn dir() -> PathBuf {
    lam_core::corpus_dir().join("agent-transcripts")
}

fn read(rel: &str) -> Vec<Trajectory> {
    let p = dir().join(rel);
    read::read_path(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// (session, records, non-empty records) of each trajectory of a file.
fn counts(rel: &str) -> Vec<(String, usize, usize)> {
    read(rel).iter().map(|t| (t.session.0.clone(), t.records.len(), t.records.iter().filter(|r| !r.observation.is_empty()).count())).collect()
}

#[test]
fn claude_code_transcripts_read_every_tool_result() {
    let s = |id: &str, n, e| (id.to_string(), n, e);
    assert_eq!(counts("cctrace/main.jsonl"), [s("132b2f66-ee5f-46f6-8904-32d9dc4d36c3", 154, 147)]);
    assert_eq!(counts("spotter/short.jsonl"), [s("55604662-cf2a-4331-851a-ec234028f8ca", 2, 2)]);
    assert_eq!(counts("spotter/tool_heavy.jsonl"), [s("d6e0bada-1959-4eec-a9d2-0bfade768d8f", 6, 6)]);
    assert_eq!(counts("spotter/subagent.jsonl"), [s("491e126e-1e71-469c-ade2-fcc8af567c74", 17, 17)]);
    // A slash command is the task as the user typed it.
    let sub = &read("spotter/subagent.jsonl")[0];
    assert!(sub.task.starts_with("/handgemacht:create-beads websearch to learn how to fastest setup credo"), "{:?}", sub.task);
    for t in read("cctrace/main.jsonl").iter().chain(&read("spotter/subagent.jsonl")) {
        assert_eq!(t.format, Format::Agent(Agent::ClaudeCode));
        assert!(!t.task.is_empty() && !t.task.starts_with("<"), "{}: task {:?}", t.session.0, t.task);
        assert!(t.records.iter().all(|r| r.action.contains('(')), "every result found its call");
    }
}

#[test]
fn subagent_files_are_sessions_of_their_own() {
    let sub = "spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents";
    let s = |id: &str, n, e| (id.to_string(), n, e);
    assert_eq!(counts(&format!("{sub}/agent-aac57f5.jsonl")), [s("ae4a77f8-aedd-4bc1-888f-c94edc91af04.agent-aac57f5", 12, 12)]);
    let other = "spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl";
    assert_eq!(counts(other), [s("4d5611e5-241a-462a-8d15-5122611a9569.agent-a2898e3", 33, 33)]);
    // The compaction subagent: the summary request and its answer, no tool result.
    assert_eq!(counts(&format!("{sub}/agent-acompact-946d2b.jsonl")), [s("ae4a77f8-aedd-4bc1-888f-c94edc91af04.agent-acompact-946d2b", 0, 0)]);
    let web = &read(&format!("{sub}/agent-aac57f5.jsonl"))[0];
    assert!(web.records.iter().all(|r| r.action.starts_with("WebSearch(") || r.action.starts_with("WebFetch(")));
}

#[test]
fn a_compaction_starts_a_new_conversation() {
    let t = read("spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl");
    let c: Vec<_> = t.iter().map(|t| (t.session.0.as_str(), t.records.len(), t.records.iter().filter(|r| !r.observation.is_empty()).count())).collect();
    assert_eq!(c, [("ae4a77f8-aedd-4bc1-888f-c94edc91af04", 149, 138), ("ae4a77f8-aedd-4bc1-888f-c94edc91af04.compact-1", 94, 88)]);
    assert!(t[0].task.starts_with("Work on bead spotter-4te."), "{:?}", t[0].task);
    assert!(t[1].task.starts_with("This session is being continued from a previous conversation"), "the summary opens the second: {:?}", &t[1].task[..80]);
    assert!(t[1].records.iter().all(|r| r.action.contains('(')), "no result lost its call across the boundary");
}

#[test]
fn codex_rollouts_read_every_output_and_the_plan_updates() {
    let dir = "openprintkit";
    let a = read(&format!("{dir}/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"));
    assert_eq!(a.len(), 1);
    let t = &a[0];
    assert_eq!((t.format, t.session.0.as_str(), t.records.len()), (Format::Agent(Agent::Codex), "c61729d4-da6d-46a4-9a29-ec2c614e5e23", 400));
    assert_eq!(t.task, "Can we continue from where we left off?", "the environment context is not the task");
    let plans: Vec<_> = t.records.iter().filter(|r| r.action.starts_with("update_plan(")).collect();
    assert_eq!(plans.len(), 3);
    assert!(plans.iter().all(|r| r.observation == b"Plan updated" && r.action.contains(r#""plan":[{"status":"#)), "{:?}", plans[0].action);
    let shell: Vec<_> = t.records.iter().filter(|r| r.action.starts_with("shell(")).collect();
    assert_eq!(shell.len(), 397);
    // The shell tool's JSON envelope (361 of them) is unwrapped: the output, and the exit code
    // beside it; the rest are plain text (25 sandbox refusals, 11 apply_patch errors).
    assert!(shell.iter().all(|r| !r.observation.starts_with(br#"{"output""#)));
    assert_eq!(shell.iter().filter(|r| r.returncode.is_some()).count(), 361);
    assert_eq!(shell.iter().filter(|r| r.observation.starts_with(b"failed in sandbox")).count(), 25);
    assert!(shell.iter().any(|r| r.returncode != Some(0)), "failed commands keep their code");
    let b = counts(&format!("{dir}/rollout-2025-11-01T11-34-37-97b66f6c-a160-40e0-bd0f-1fdcbbb9498b.jsonl"));
    assert_eq!((b[0].0.as_str(), b[0].1), ("97b66f6c-a160-40e0-bd0f-1fdcbbb9498b", 329));
    // An aborted session: its meta and one message, no tool call.
    let c = counts(&format!("{dir}/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"));
    assert_eq!(c, [("fa1ac8bf-348e-4b9a-a06d-767050fa1e10".to_string(), 0, 0)]);
}

#[test]
fn the_folder_reads_as_one_input_per_transcript() {
    let inputs = read::expand_inputs(&[dir()]).unwrap();
    let mut sessions = Vec::new();
    for i in &inputs {
        if let Some(ts) = read::read_input(i).unwrap() {
            sessions.extend(ts.into_iter().map(|t| (t.session.0, t.records.len())));
        }
    }
    let records: usize = sessions.iter().map(|s| s.1).sum();
    // 151 + 400 + 329 + 33 + 148 + 94 + 12 + 2 + 16 + 6 (cctrace, the Codex rollouts, spotter).
    assert_eq!(records, 1196, "{sessions:?}");
    assert_eq!(sessions.len(), 12, "11 files, one compacted once: {sessions:?}");
}
