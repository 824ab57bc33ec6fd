//! Our models fed with the papers' stated inputs, beside the numbers the papers
//! print. Nothing here is fitted: every input is a preset or a number the paper
//! states, and the differences are reported, not tuned away.

use crate::classes::{Class3Inputs, Compressor, class1_summarize, class2_prefill_only, class3_lam};
use crate::error::Result;
use crate::preset::Deployment;
use crate::profile::CompactionRates;
use crate::schedule::{snapshot_steady_state, turns_to_capacity};
use crate::serving::{Efficiency, Serving};
use serde::Serialize;

/// One quantity: our value, the paper's, and where the paper prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaperCheck {
    /// Where in which paper.
    pub source: &'static str,
    /// What is compared.
    pub quantity: String,
    /// Our model's value.
    pub ours: f64,
    /// The paper's printed value.
    pub paper: f64,
    /// Unit of both.
    pub unit: &'static str,
}

impl PaperCheck {
    /// `100 (ours - paper) / paper`.
    pub fn diff_pct(&self) -> f64 {
        100.0 * (self.ours - self.paper) / self.paper
    }
}

/// LAM's Table 7 inputs: `Delta = 637` arriving, `G_a = 39` decoded tokens per turn.
pub const LAM_DELTA: f64 = 637.0;
/// See [`LAM_DELTA`].
pub const LAM_DECODED: f64 = 39.0;
/// LAM's default-threshold removal of observation tokens (section 3: 22.47 %).
pub const LAM_REMOVAL: f64 = 0.2247;
/// L0 alone (line hashing) removes 18.04 % of observation tokens (section 3).
pub const L0_REMOVAL: f64 = 0.1804;
/// Context lengths of Table 7; "K" read as 1024 tokens.
pub const TABLE7_CONTEXTS: [(&str, f64); 4] = [("3K", 3072.0), ("8K", 8192.0), ("32K", 32768.0), ("128K", 131072.0)];

/// Every check, in paper order.
pub fn paper_checks() -> Result<Vec<PaperCheck>> {
    let dep = Deployment::preset("gb10", "llama-3.1-8b")?;
    let eff = Efficiency::MEASURED;
    let mut rows = Vec::new();
    let mut push = |source, quantity: String, ours, paper, unit| rows.push(PaperCheck { source, quantity, ours, paper, unit });

    push("LAM Table 22", "GB10 machine balance F/B".into(), dep.device.balance(), 380.0, "FLOP/B");

    let table7: [(f64, [f64; 4], [f64; 4]); 2] =
        [(1.0, [2.5, 6.4, 21.6, 52.4], [1.03, 1.07, 1.28, 2.10]), (32.0, [23.5, 45.0, 76.6, 92.9], [1.31, 1.82, 4.28, 14.1])];
    for (b, phis, ceilings) in table7 {
        let s = Serving::new(dep.clone(), b, eff)?;
        for (i, (label, c)) in TABLE7_CONTEXTS.iter().enumerate() {
            let t = s.turn(*c, LAM_DELTA, LAM_DECODED);
            push("LAM Table 7", format!("phi, batch {b}, C={label}"), 100.0 * t.phi(), phis[i], "%");
            push("LAM Table 7", format!("ceiling, batch {b}, C={label}"), t.ceiling(), ceilings[i], "x");
        }
    }

    let s1 = Serving::new(dep.clone(), 1.0, eff)?;
    // "360K" read as 360,000 tokens (the paper's own arithmetic in E.2 is decimal).
    let c360 = 360_000.0;
    push("LAM E.2", "re-prefill of a 360K context".into(), s1.reprefill_s(c360), 538.0, "s");
    push("LAM E.2", "one turn's inference at C=360K, batch 1".into(), s1.turn(c360, LAM_DELTA, LAM_DECODED).total_s(), 12.0, "s");
    push("LAM M.1", "decode weight stream per token, 8B fp16".into(), 1e3 * dep.model.weight_bytes() / dep.device.bandwidth, 67.0, "ms");
    let cap = dep.kv_capacity_tokens();
    push("LAM M.2", "KV capacity at batch 1".into(), cap, 854_000.0, "tokens");
    push("LAM E.1", "turn exhausting KV, no compaction".into(), turns_to_capacity(cap, 0.0, LAM_DELTA, 0.0), 1341.0, "turn");
    push("LAM M.3", "turns before KV capacity, r=0.2247".into(), turns_to_capacity(cap, 0.0, LAM_DELTA, LAM_REMOVAL) - 1.0, 1727.0, "turns");
    push("LAM Table 27", "snapshot steady state Delta/r".into(), snapshot_steady_state(LAM_DELTA, LAM_REMOVAL), 2800.0, "tokens");

    // L0 alone removes 18.04 % (section 3); M.3: 1,615 turns, L1 over L0 1.07x.
    let (lam_turns, l0_turns) = (turns_to_capacity(cap, 0.0, LAM_DELTA, LAM_REMOVAL) - 1.0, turns_to_capacity(cap, 0.0, LAM_DELTA, L0_REMOVAL) - 1.0);
    push("LAM M.3", "turns before KV capacity, L0 r=0.1804".into(), l0_turns, 1615.0, "turns");
    push("LAM M.3", "L1 over L0 alone, growth regime".into(), lam_turns / l0_turns, 1.07, "x");

    // M.2 at T = 1e6: eq. 12 with 512-token windows at D = 768 (Table 4), the
    // Table 22 quantizer, no candidate pairs (run-dependent, negligible here);
    // eq. 11 at rho = 10 (Table 2's summarizer) and tau = 0 (not stated).
    let t = 1e6;
    let x = Class3Inputs { chunks: (t / 512.0_f64).ceil(), dim: 768.0, candidate_pairs: 0.0, quantize_bytes_s: 65.4e9 };
    let lam = class3_lam(&CompactionRates::LAM_GB10, &x, t)?.total_s();
    let lingua = class2_prefill_only(&Compressor::xlm_roberta_large(), &dep.device, Efficiency::LAM_BASELINE, t);
    let summ = class1_summarize(&dep, Efficiency::LAM_BASELINE, t, 10.0, 0.0)?.total_s();
    push("LAM M.2", "summarizer (rho=10) / LAM compaction, T=1e6".into(), summ / lam, 4957.0, "x");
    push("LAM M.2", "LLMLingua-2 / LAM compaction, T=1e6".into(), lingua / lam, 1.33, "x");

    // ARC's decode time is its traffic over 4.8 TB/s; fed its own Table 9 traffic
    // (ARC row, 16k / 8k) the roofline must give its decode time back.
    let h200 = Deployment::preset("h200", "qwen3-8b")?;
    push("ARC Table 9", "t_dec from BW 4.8694 TB (ARC, 16k/8k)".into(), 4.8694e12 / h200.device.bandwidth, 1.014, "s");
    push("ARC Table 9", "t_dec from BW 27.7007 TB (window, 16k/8k)".into(), 27.7007e12 / h200.device.bandwidth, 5.771, "s");
    Ok(rows)
}

/// The checks as a fixed-width table (what the snapshot holds).
pub fn render_checks(rows: &[PaperCheck]) -> String {
    let mut s = format!("{:<13} {:<42} {:>12} {:>12} {:>8} {:<7}\n", "source", "quantity", "ours", "paper", "diff %", "unit");
    for r in rows {
        s += &format!(
            "{:<13} {:<42} {:>12} {:>12} {:>+8.1} {:<7}{}\n",
            r.source,
            r.quantity,
            sig(r.ours),
            sig(r.paper),
            r.diff_pct(),
            r.unit,
            if r.diff_pct().abs() > 10.0 { " >10%" } else { "" }
        );
    }
    s
}

/// Four significant digits, no exponent below 1e9.
fn sig(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}
