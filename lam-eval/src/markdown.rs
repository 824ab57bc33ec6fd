//! `report.md`.

use super::{EvalReport, SettingRow};
use std::fmt::Write as _;

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn opct(x: Option<f64>, digits: usize) -> String {
    x.map(|v| format!("{:.*}%", digits, 100.0 * v)).unwrap_or_else(|| "—".into())
}

fn of(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.4}")).unwrap_or_else(|| "—".into())
}

fn ev_cells(r: &SettingRow) -> String {
    format!(
        "{} | {} | {} | {} | {} | {}",
        opct(r.evidence_micro, 3),
        opct(r.evidence_recoverable, 3),
        opct(r.trajectories_intact, 1),
        r.lines_lost,
        opct(r.rsc, 2),
        hidden_cell(r)
    )
}

/// New lines hidden: `0`, or `1,234 (2.10 %)` (their tokens' share of the input).
fn hidden_cell(r: &SettingRow) -> String {
    if r.new_lines_hidden == 0 { "0".into() } else { format!("{} ({:.2} %)", r.new_lines_hidden, 100.0 * r.new_tokens_hidden) }
}

/// The ECR@tau cells of one family: removal (setting) or "—".
fn ecr_cells(e: &super::Ecr) -> String {
    e.at.iter().map(|(_, v, w)| format!(" {} |", v.map(|v| format!("{} ({})", pct(v), w.clone().unwrap_or_default())).unwrap_or_else(|| "—".into()))).collect()
}

/// Render the report as Markdown: plain sentences first, then the tables.
pub fn markdown(r: &EvalReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# lam eval\n");
    opening(&mut s, r);
    inputs(&mut s, r);
    headline(&mut s, r);
    glossary(&mut s);
    evidence_table(&mut s, r);
    evidence_checks(&mut s, r);
    ecr_table(&mut s, r);
    per_input(&mut s, r);
    per_input_ecr(&mut s, r);
    by_size(&mut s, r);
    bound(&mut s, r);
    bracket(&mut s, r);
    semdedup(&mut s, r);
    controls_and_timing(&mut s, r);
    s
}

/// A share in plain words: `36.7 %`; whole numbers exactly (`100 %`, `0 %`),
/// so `100 %` never stands for 99.96 %.
fn plain_pct(x: f64) -> String {
    let v = 100.0 * x;
    if (v - v.round()).abs() < 1e-9 { format!("{:.0} %", v.round()) } else { format!("{v:.1} %") }
}

/// One sentence per threshold, in plain words, before any paper metric.
fn opening(s: &mut String, r: &EvalReport) {
    let _ = writeln!(
        s,
        "What compaction did to the tool output of {} trajectories ({} tokens), per merge threshold t (higher t: only closer near-duplicates are merged):\n",
        r.trajectories, r.tokens
    );
    for t in &r.thresholds {
        let _ = writeln!(s, "- {}", threshold_sentence(t));
    }
    let _ = writeln!(s);
    if let Some(line) = &r.controls_not_run {
        let _ = writeln!(s, "{line}\n");
    }
}

/// `At t=0.95: 31.2 % of tool-output tokens removed (26.0 % after the stub lines that replace them), 0 of 9,120 lines shown for the first time withheld, gold-patch evidence 100 % kept in the context, 100 % recoverable by recall. The paper's residual: 35.9 % (31.7 % net), withholding 1,204 new lines (2.1 % of the tokens).`
pub(crate) fn threshold_sentence(t: &super::ThresholdRow) -> String {
    let row = &t.l1_l0;
    let paper = &t.l1_l0_paper;
    let evidence = match (row.evidence_micro, row.evidence_recoverable) {
        (Some(kept), Some(rec)) => format!("gold-patch evidence {} kept in the context, {} recoverable by recall", plain_pct(kept), plain_pct(rec)),
        (Some(kept), None) => format!("gold-patch evidence {} kept in the context", plain_pct(kept)),
        _ => "gold-patch evidence not measured (no gold-patch line appears in these tool outputs)".into(),
    };
    format!(
        "At t={}: {} of tool-output tokens removed ({} after the stub lines that replace them), {} of {} lines shown for the first time withheld, {evidence}. \
         The paper's residual: {} ({} net), withholding {} new lines ({} of the tokens).",
        t.threshold,
        plain_pct(row.removal_gross),
        plain_pct(row.removal_net),
        row.new_lines_hidden,
        row.new_lines,
        plain_pct(paper.removal_gross),
        plain_pct(paper.removal_net),
        paper.new_lines_hidden,
        plain_pct(paper.new_tokens_hidden)
    )
}

fn inputs(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "Inputs: {}  ", r.inputs.join(", "));
    let _ = writeln!(s, "Encoder: `{}`  ", r.encoder);
    let _ = writeln!(
        s,
        "{} trajectories, {} observation records, {} chunks, {} observation tokens (cl100k_base). {} joined with a gold patch ({} with witnessed evidence, {} candidate lines); {} with a recorded outcome ({} resolved).\n",
        r.trajectories, r.records, r.chunks, r.tokens, r.with_gold, r.with_witnessed, r.candidate_lines, r.with_outcome, r.resolved
    );
    let _ = writeln!(
        s,
        "Definitions of every column: `docs/eval.md`; the terms below the headline table. Plots: `removal-vs-evidence.svg` (paper Fig. 3), `removal-vs-size.svg` (Fig. 9b).\n"
    );
}

/// The paper's terms, one line each.
const GLOSSARY: &[(&str, &str)] = &[
    (
        "t",
        "merge threshold: the cosine similarity at which two chunks of tool output count as near duplicates; δ = √(2 − 2t) is the same threshold as a distance",
    ),
    ("L0, L1", "the two layers: L0 removes exactly repeated lines, L1 near-duplicate chunks; L1→L0 (the default) runs L1 first"),
    (
        "faithful, paper residual",
        "what is forwarded for near-duplicate chunks: faithful (lam's default) keeps every line the model has not seen and names only lines it can read, line for line; the paper's replaces each run of them by one `similar to` stub",
    ),
    ("new lines hidden", "lines shown for the first time (line numbers and spaces aside) that the residual withholds, with their share of the tokens"),
    ("gross, net", "removal before and after counting the stub lines that replace removed text"),
    ("stub cost (floor)", "the stub lines' tokens, in points of removal; the floor is what any stub design that keeps recall must pay"),
    ("order effect", "net removal of L1→L0 minus that of L0→L1, both with the paper's residual"),
    ("δ̂ (delta-hat)", "the largest distance between a removed chunk and the chunk kept in its place; never above δ"),
    (
        "evidence, recoverable, intact",
        "gold-patch lines seen in tool output that stay in the context; that stay or can be restored by `_recall §id`; trajectories losing none",
    ),
    ("digest", "fingerprint of the set of removed chunks: the same input gives the same digest"),
    ("online=batch", "compacting turn by turn gives exactly what compacting the whole trajectory at once gives"),
    ("RSC", "resolve-rate ceiling: resolved trajectories whose evidence stays intact, over those with a recorded outcome"),
    ("BFR@16K", "budget feasibility rate: share of trajectories whose tool output, after compaction, fits 16K tokens"),
    ("ECR@τ", "evidence-constrained removal: the largest net removal whose evidence stays at least τ"),
    ("metric-entropy bracket", "the paper's bounds (C.3) on how much any compactor could remove at this threshold, in bits per chunk"),
    ("t' = 4t−3", "the partner threshold (distance 2δ) of the bracket's upper bound"),
    ("paper Table 14", "the harness check that L1 alone keeps the evidence L1→L0 keeps"),
];

fn glossary(s: &mut String) {
    let _ = writeln!(s, "\nTerms:\n");
    for (term, gloss) in GLOSSARY {
        let _ = writeln!(s, "- **{term}**: {gloss}.");
    }
}

fn taus_of(r: &EvalReport) -> Vec<f64> {
    r.ecr.first().map(|e| e.at.iter().map(|a| a.0).collect()).unwrap_or_default()
}

/// The headline table, one row per threshold.
fn headline(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "## Headline\n");
    let _ = writeln!(
        s,
        "| t | L0 alone | L1 alone | L1→L0 gross | L1→L0 net | L1→L0 stub cost (floor) | paper L1→L0 gross | paper L1→L0 net | paper L1→L0 new lines hidden | paper L0→L1 net | order effect net (gross) | δ̂ | evidence | recoverable | intact | digest | online=batch |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for t in &r.thresholds {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} ({:.2}) pt | {} | {} | {} | {} | {:+.2} ({:+.2}) pt | {:.4} | {} | {} | {} | `{}` | {} |",
            t.threshold,
            pct(t.removal_l0),
            pct(t.removal_l1),
            pct(t.l1_l0.removal_gross),
            pct(t.l1_l0.removal_net),
            100.0 * t.l1_l0.stub_cost,
            100.0 * t.l1_l0.stub_floor,
            pct(t.l1_l0_paper.removal_gross),
            pct(t.l1_l0_paper.removal_net),
            hidden_cell(&t.l1_l0_paper),
            pct(t.l0_l1.removal_net),
            100.0 * t.order_effect,
            100.0 * t.order_effect_gross,
            t.delta_hat,
            opct(t.l1_l0.evidence_micro, 3),
            opct(t.l1_l0.evidence_recoverable, 3),
            opct(t.l1_l0.trajectories_intact, 1),
            t.digest,
            if t.online_equals_batch { "yes" } else { "NO" }
        );
    }
    stub_parts(s, r);
}

/// Where the L1→L0 stub tokens go, per threshold.
fn stub_parts(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "\nL1→L0 stub cost by part, in points of removal (each stub line counted on its own; the parts add up to about the stub cost):\n");
    for t in &r.thresholds {
        let p = &t.l1_l0.stub_parts;
        let _ = writeln!(
            s,
            "- t={}: recall handles {:.2}, call names {:.2}, line numbers {:.2}, the rest (`[lam: `, verbs, separators, `]`, newlines) {:.2}",
            t.threshold,
            100.0 * p.handles,
            100.0 * p.calls,
            100.0 * p.line_numbers,
            100.0 * p.rest
        );
    }
}

/// Evidence, RSC and feasibility per setting.
fn evidence_table(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "\n## Evidence, RSC and feasibility (lossy: stub = lost; recoverable: via `_recall §id`)\n");
    let mut bh = String::new();
    for b in r.thresholds.first().map(|t| t.l1_l0.bfr.clone()).unwrap_or_default() {
        let _ = write!(bh, " BFR@{}K |", b.budget / 1024);
    }
    let nb = r.thresholds.first().map(|t| t.l1_l0.bfr.len()).unwrap_or(0);
    let _ = writeln!(s, "| setting | removal (net) | evidence | recoverable | intact | lines lost | RSC | new lines hidden |{bh}");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|{}", "---|".repeat(nb));
    let bfr = |row: &SettingRow| row.bfr.iter().map(|b| format!(" {} |", pct(b.fits))).collect::<String>();
    for b in r.baselines.iter().filter(|b| b.baseline == "none" || b.baseline == "l0") {
        let _ = writeln!(
            s,
            "| {} | {} | {} |{}",
            if b.baseline == "none" { "no compaction" } else { "L0 alone" },
            pct(b.row.removal_net),
            ev_cells(&b.row),
            bfr(&b.row)
        );
    }
    for t in &r.thresholds {
        let _ = writeln!(s, "| LAM t={} (L1→L0) | {} | {} |{}", t.threshold, pct(t.l1_l0.removal_net), ev_cells(&t.l1_l0), bfr(&t.l1_l0));
    }
    for t in &r.thresholds {
        let row = &t.l1_l0_paper;
        let _ = writeln!(s, "| LAM t={} (L1→L0, paper's residual) | {} | {} |{}", t.threshold, pct(row.removal_net), ev_cells(row), bfr(row));
    }
    for t in &r.thresholds {
        let _ = writeln!(s, "| LAM t={} (L0→L1, paper's residual) | {} | {} |{}", t.threshold, pct(t.l0_l1.removal_net), ev_cells(&t.l0_l1), bfr(&t.l0_l1));
    }
    for b in r.baselines.iter().filter(|b| b.baseline != "none" && b.baseline != "l0") {
        let name = match b.baseline.as_str() {
            "masking" => format!("masking k={}", b.param.unwrap_or(0.0)),
            other => format!("{other} cos {} (mean of seeds)", b.param.unwrap_or(0.0)),
        };
        let _ = writeln!(s, "| {name} | {} | {} |{}", pct(b.row.removal_net), ev_cells(&b.row), bfr(&b.row));
    }
}

/// The harness checks, the specificity control and the masking note.
fn evidence_checks(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "\nL1 alone must score what L1→L0 with the paper's residual scores (the harness check of paper Table 14):");
    for t in &r.thresholds {
        let _ = write!(s, " t={}: {} vs {};", t.threshold, opct(t.l1_alone_evidence_micro, 3), opct(t.l1_l0_paper.evidence_micro, 3));
    }
    let _ = writeln!(s, "\n\nRSC non-increasing along the sweep: {}.", r.rsc_non_increasing.map(|b| if b { "yes" } else { "NO" }).unwrap_or("— (no outcomes)"));
    if let Some(c) = &r.evidence_control {
        let _ = writeln!(
            s,
            "\nSpecificity control (paper F.3: 0.7 %): of {} witnessed lines of {} trajectories, {} ({}) occur in an unrelated trajectory's original observations.",
            c.lines,
            c.trajectories,
            c.found_in_unrelated,
            opct(Some(c.share), 2)
        );
    }
    let masks: Vec<String> =
        r.baselines.iter().filter(|b| b.baseline == "masking").map(|b| format!("k={}: {}", b.param.unwrap_or(0.0), pct(b.row.removal_gross))).collect();
    if !masks.is_empty() {
        let _ = writeln!(
            s,
            "\nMasking's net removal charges SWE-agent's placeholder `Old environment output: (N lines omitted)` per masked observation; without it (gross): {}.",
            masks.join(", ")
        );
    }
}

/// ECR@τ per family.
fn ecr_table(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "\n## ECR@τ (largest net removal with evidence ≥ τ)\n");
    let taus = taus_of(r);
    let _ = writeln!(s, "| family | best |{}", taus.iter().map(|t| format!(" τ={t} |")).collect::<String>());
    let _ = writeln!(s, "|---|---|{}", "---|".repeat(taus.len()));
    for e in &r.ecr {
        let cells = ecr_cells(e);
        let _ = writeln!(s, "| {} | {} |{cells}", e.family, opct(e.best, 2));
    }
}

/// The headline rows of each command-line input alone.
fn per_input(s: &mut String, r: &EvalReport) {
    if r.by_input.is_empty() {
        return;
    }
    {
        let _ = writeln!(s, "\n## Per input (each command-line input alone)\n");
        let _ = writeln!(
            s,
            "| input | trajectories | tokens | t | L0 alone (net) | L1 alone | L1→L0 net | L1→L0 stub cost | new lines hidden | paper L1→L0 net | paper new lines hidden | paper evidence | paper L0→L1 net | δ̂ | evidence | recoverable | intact |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for i in &r.by_input {
            let l0_net = i.baselines.iter().find(|b| b.baseline == "l0").map_or(0.0, |b| b.removal);
            for (h, l0l1) in i.rows.iter().zip(&i.removal_l0_l1_net) {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} ({}) | {} | {} | {:.2} pt | {} | {} | {} ({:.2} %) | {} | {} | {:.4} | {} | {} | {} |",
                    i.input,
                    i.trajectories,
                    i.tokens,
                    h.threshold,
                    pct(h.removal_l0),
                    pct(l0_net),
                    pct(h.removal_l1),
                    pct(h.removal_l1_l0_net),
                    100.0 * h.stub_cost_l1_l0,
                    h.new_lines_hidden,
                    pct(h.removal_l1_l0_paper_net),
                    h.new_lines_hidden_paper,
                    100.0 * h.new_tokens_hidden_paper,
                    opct(h.evidence_micro_paper, 3),
                    pct(*l0l1),
                    h.delta_hat,
                    opct(h.evidence_micro, 3),
                    opct(h.evidence_recoverable, 3),
                    opct(h.trajectories_intact, 1)
                );
            }
        }
    }
}

/// ECR@τ and masking of each command-line input alone.
fn per_input_ecr(s: &mut String, r: &EvalReport) {
    if r.by_input.is_empty() {
        return;
    }
    let taus = taus_of(r);
    {
        let _ = writeln!(s, "\n| input | family | best |{}", taus.iter().map(|t| format!(" τ={t} |")).collect::<String>());
        let _ = writeln!(s, "|---|---|---|{}", "---|".repeat(taus.len()));
        for i in &r.by_input {
            for e in &i.ecr {
                let cells = ecr_cells(e);
                let _ = writeln!(s, "| {} | {} | {} |{cells}", i.input, e.family, opct(e.best, 2));
            }
        }
        let _ = writeln!(s, "\nMasking per input (net removal, evidence):");
        for i in &r.by_input {
            let m: Vec<String> = i
                .baselines
                .iter()
                .filter(|b| b.baseline == "masking")
                .map(|b| format!("k={}: {} / {}", b.param.unwrap_or(0.0), pct(b.removal), opct(b.evidence_micro, 2)))
                .collect();
            let _ = writeln!(s, "- {}: {}", i.input, m.join("; "));
        }
    }
}

/// Removal against input size T.
fn by_size(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "\n## Removal against input size T (trajectories reaching T; net, L1→L0)\n");
    let sizes: Vec<usize> = r.thresholds.first().map(|t| t.l1_l0.by_size.iter().map(|p| p.size).collect()).unwrap_or_default();
    let _ = writeln!(s, "| setting |{}", sizes.iter().map(|t| format!(" T={}K |", t / 1000)).collect::<String>());
    let _ = writeln!(s, "|---|{}", "---|".repeat(sizes.len()));
    if let Some(t) = r.thresholds.first() {
        let _ = writeln!(s, "| trajectories |{}", t.l1_l0.by_size.iter().map(|p| format!(" {} |", p.trajectories)).collect::<String>());
    }
    for b in r.baselines.iter().filter(|b| b.baseline == "l0") {
        let _ = writeln!(s, "| L0 alone |{}", b.row.by_size.iter().map(|p| format!(" {} |", opct(p.removal, 2))).collect::<String>());
    }
    for t in &r.thresholds {
        let _ = writeln!(s, "| t={} |{}", t.threshold, t.l1_l0.by_size.iter().map(|p| format!(" {} |", opct(p.removal, 2))).collect::<String>());
    }
}

/// The substitution bound and retrieval.
fn bound(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "\n## Bound (paper Table 11; distances token-weighted over deleted chunks)\n");
    let _ = writeln!(s, "| t | δ | δ̂ | mean traj δ̂/δ | substitutions | median | p99 | max | mean d/δ | share ≤ δ/2 | keep | R@1 | R@10 | R@20 | queries |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for t in &r.thresholds {
        let d = &t.distances;
        let q = &t.retrieval;
        let _ = writeln!(
            s,
            "| {} | {:.4} | {:.4} | {} | {} | {} | {} | {} | {} | {} | {:.3} | {} | {} | {} | {} |",
            t.threshold,
            t.delta,
            t.delta_hat,
            of(t.mean_traj_delta_hat_over_delta),
            d.substitutions,
            of(d.median),
            of(d.p99),
            of(d.max),
            of(d.mean_over_delta),
            opct(d.below_half, 1),
            q.keep,
            of(q.recall_at_1),
            of(q.recall_at_10),
            of(q.recall_at_20),
            q.queries
        );
    }
}

/// The metric-entropy bracket and removal ceiling.
fn bracket(s: &mut String, r: &EvalReport) {
    let _ = writeln!(s, "\n## Metric-entropy bracket and removal ceiling (paper C.3, Tables 6 and 23; bits per chunk, chunk cardinality)\n");
    let log2s = r.thresholds.first().map(|t| t.bracket.log2_s).unwrap_or(0.0);
    let _ = writeln!(s, "log2|S| = {log2s:.2} (lossless)\n");
    let _ = writeln!(s, "| t | δ | t' = 4t−3 | log2 R(2δ) | H(π(X)) | log2 R(δ) | chunks removed | ceiling ρ_greedy(2δ) | % of ceiling |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for t in &r.thresholds {
        let b = &t.bracket;
        let _ = writeln!(
            s,
            "| {} | {:.4} | {:.2} | {} | {:.2} | {:.2} | {} | {} | {} |",
            t.threshold,
            t.delta,
            b.t_prime,
            b.log2_r_2delta.map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into()),
            b.h_pi,
            b.log2_r_delta,
            pct(b.chunks_removed),
            opct(b.ceiling, 2),
            opct(b.attained_of_ceiling, 2)
        );
    }
}

/// SemDeDup across seeds.
fn semdedup(s: &mut String, r: &EvalReport) {
    let sd: Vec<_> = r.baselines.iter().filter(|b| b.baseline.starts_with("semdedup")).collect();
    if !sd.is_empty() {
        let _ = writeln!(s, "\n## SemDeDup seeds (k-means on the same embeddings, k = ⌈chunks/50⌉)\n");
        let _ = writeln!(s, "| scope | cos | removal mean | removal min–max | evidence per seed | mean pairwise Jaccard | common to all seeds |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for b in sd {
            let v = b.seed_removal.clone().unwrap_or_default();
            let (lo, hi) = (v.iter().cloned().fold(f64::INFINITY, f64::min), v.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
            let ev: Vec<String> = b.seed_evidence.clone().unwrap_or_default().iter().map(|e| opct(*e, 3)).collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {}–{} | {} | {} | {} |",
                b.baseline,
                b.param.unwrap_or(0.0),
                pct(b.row.removal_net),
                pct(lo),
                pct(hi),
                ev.join(", "),
                of(b.jaccard_mean),
                opct(b.common_share, 1)
            );
        }
    }
}

/// The controls (or that they were not run) and the timing.
fn controls_and_timing(s: &mut String, r: &EvalReport) {
    if let Some(l) = &r.locomo {
        let _ = writeln!(s, "\n## LoCoMo control\n");
        let _ = writeln!(
            s,
            "{} dialogue turns ({} chunks) from `{}`: {} near-duplicate pairs at cos ≥ {} among {} pairs.",
            l.records, l.chunks, l.source, l.near_duplicate_pairs, l.threshold, l.pairs
        );
    } else if let Some(line) = &r.controls_not_run {
        let _ = writeln!(s, "\n## Controls\n\n{line}");
    }
    let tm = &r.timing;
    let _ = writeln!(s, "\n## Timing\n");
    let _ = writeln!(
        s,
        "wall {:.1} s; encoder forward {:.1} s + chunking {:.1} s = {:.1}% of wall; threshold sweep {:.1} s; baselines {:.1} s.",
        tm.wall_s,
        tm.encode_s,
        tm.chunking_s,
        100.0 * tm.encode_share,
        tm.sweep_s,
        tm.baselines_s
    );
}
