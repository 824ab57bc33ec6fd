//! An agent loop over LAM-over-ARC, one turn at a time.
//!
//! Replays a recorded trajectory as if a model were acting: before every
//! model call the loop renders the bounded prompt; each action first goes to
//! the view (`_recall §id` is answered from the archive, never run); every
//! observation is archived, admitted by LAM and shown as its residual. When a
//! residual carries stubs, the "agent" recalls the original and checks that
//! it comes back byte for byte.
//!
//! ```sh
//! cargo run -p lam-operator --features arc --example agent_loop -- [TRAJECTORY] [BUDGET]
//! ```
//! (default: the bundled `examples/edit-session.jsonl`, budget 6000 cl100k tokens).

use arc_view::ArcConfig;
use lam_core::{Threshold, ViewPolicy};
use lam_operator::{Config, LamArcView};
use lam_trajectory::{Cl100k, read};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/edit-session.jsonl").into());
    let budget: usize = args.next().map_or(Ok(6000), |b| b.parse())?;
    let traj = read::read_path(path.as_ref())?.into_iter().next().ok_or("no session in the file")?;
    // The model-free encoder keeps the example fast; lam_encode::BertEncoder is the papers' choice.
    let enc = lam_encode::HashingEncoder::default();
    let cfg = Config::new(Threshold::from_cosine(0.95)?);
    let mut view = LamArcView::new(ArcConfig::with_limit(budget), cfg, traj.session.clone(), &traj.task, arc_store::MemStore::new(), Cl100k, enc)?;
    for turn in traj.turns() {
        let prompt = view.render()?;
        println!("model call: {} of {} tokens, {} citations", prompt.tokens, budget, prompt.citations.len());
        // The model answered with this thought and action (here: the recorded ones).
        if let Some(answer) = view.act(&turn.thought, &turn.record.action)? {
            println!("  view answered `{}`: {}", turn.record.action, answer.trim_end());
            continue;
        }
        let a = view.push_turn(&turn.thought, &turn.record)?;
        let t = a.tokens;
        println!(
            "  $ {} -> §{}: {} bytes shown of {}, {} stubs{}",
            turn.record.action,
            a.id,
            a.residual.len(),
            turn.record.observation.len(),
            a.stubs.len(),
            t.map_or(String::new(), |t| format!(", {} -> {} tokens", t.input, t.output))
        );
        if let Some(stub) = a.stubs.first() {
            println!("  {stub}");
            let answer = view.act("look at the original", &format!("_recall §{}", stub.id()))?.ok_or("_recall is a view command")?;
            println!("  _recall §{} -> {}", stub.id(), answer.trim_end());
            let exact = ViewPolicy::recall(&view, stub.id())?.ok_or("cited id is archived")?;
            assert_eq!(exact, turn.record.observation, "recall returns the exact original");
        }
    }
    let last = view.render()?;
    println!("final prompt: {} tokens (limit {:?}), {} citations, {} recalled parts", last.tokens, last.limit, last.citations.len(), last.recalled.len());
    println!("deletion digest {}, delta_hat {:.4}", view.operator().digest().hex16(), view.operator().delta_hat());
    Ok(())
}
