//! Replaying a trajectory under a view policy: the model calls it would make
//! (prompt, decoded and prefix-cached tokens), for the ARC paper's cost model.

use crate::Result;
use crate::policy::{self, PolicyKind, PolicySettings};
use lam_core::{Encoder, TokenCounter, Turn};
use lam_costmodel::Call;
use lam_trajectory::{Cl100k, Trajectory};

/// Tokens of the longest common prefix of two prompts (cut at a char boundary;
/// tokenising a prefix alone can differ from the whole by a token at the cut).
pub fn shared_prefix_tokens(prev: &str, next: &str) -> u64 {
    let mut n = prev.bytes().zip(next.bytes()).take_while(|(a, b)| a == b).count();
    while !next.is_char_boundary(n) {
        n -= 1;
    }
    Cl100k.count(&next.as_bytes()[..n]) as u64
}

/// One trajectory's model calls under one policy: call `k` sees the view of
/// turns `0..k` and decodes turn `k`'s thought and action (as `lam view` builds
/// views; one model call per turn). With `prefix_cache`, the prompt prefix
/// shared with the previous call counts as cached.
pub fn policy_calls(
    t: &Trajectory,
    kind: PolicyKind,
    s: &PolicySettings,
    prefix_cache: bool,
    encoder: impl FnOnce() -> Result<Box<dyn Encoder>>,
) -> Result<Vec<Call>> {
    let turns = t.turns();
    let decoded = |turn: &Turn| (Cl100k.count(turn.thought.as_bytes()) + Cl100k.count(turn.record.action.as_bytes())) as u64;
    let mut prev = String::new();
    let mut calls = Vec::with_capacity(turns.len());
    let mut view = policy::build(kind, s, t, Box::new(arc_store::MemStore::new()), encoder)?;
    for turn in &turns {
        let r = view.render()?;
        let cached_tokens = if prefix_cache { shared_prefix_tokens(&prev, &r.text).min(r.tokens as u64) } else { 0 };
        calls.push(Call { prompt_tokens: r.tokens as u64, decoded_tokens: decoded(turn), cached_tokens });
        if prefix_cache {
            prev = r.text;
        }
        view.push(turn)?;
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_calls_follow_the_turns() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/edit-session.jsonl");
        let t = &lam_trajectory::read::read_path(&path).unwrap()[0];
        let s = PolicySettings { budget: 16_000, completion: 0, window: 5, mask: 10, threshold: 0.95, encode_batch: 8 };
        let hashing = || -> Result<Box<dyn Encoder>> { Ok(Box::new(lam_encode::HashingEncoder::default())) };
        let full = policy_calls(t, PolicyKind::Full, &s, true, hashing).unwrap();
        let window = policy_calls(t, PolicyKind::Window, &s, true, hashing).unwrap();
        assert_eq!(full.len(), t.turns().len());
        assert_eq!(window.len(), full.len());
        // The first call sees only the task; prompts under the full policy never shrink.
        assert_eq!(full[0].prompt_tokens, window[0].prompt_tokens);
        assert!(full.windows(2).all(|w| w[0].prompt_tokens <= w[1].prompt_tokens));
        assert!(window.iter().zip(&full).all(|(w, f)| w.prompt_tokens <= f.prompt_tokens));
        assert_eq!(full.iter().map(|c| c.decoded_tokens).sum::<u64>(), window.iter().map(|c| c.decoded_tokens).sum::<u64>());
        // The full view only appends, so nearly all of each prompt is a reusable prefix.
        assert_eq!(full[0].cached_tokens, 0);
        assert!(full[1..].iter().all(|c| c.cached_tokens + 2 >= full[0].prompt_tokens && c.cached_tokens <= c.prompt_tokens));
        let lam = policy_calls(t, PolicyKind::Lam, &s, true, hashing).unwrap();
        assert_eq!(lam.len(), full.len());
        assert!(lam.iter().all(|c| c.prompt_tokens <= 16_000), "the LAM-over-ARC view stays within the budget");
    }
}
