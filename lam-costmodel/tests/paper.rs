//! Our models, fed the papers' stated inputs, beside the papers' printed numbers.
//!
//! The test does not loosen where we differ: the table is a snapshot, rows more
//! than 10 % apart are marked `>10%`, and the reasons are written here. No
//! constant was chosen to close a gap; every input is a preset (with its source)
//! or a number the paper states (Delta = 637, G_a = 39, Table 1 / 22 rates).
//!
//! Where we differ by more than 10 %, and what the paper leaves unstated:
//!
//! - **Table 7, batch 32 (phi at 3K and 8K; ceilings at 8K, 32K, 128K).** The
//!   paper gives no formula for the two parts of a turn. We charge the prefill
//!   of the arrivals against the context `4 L d C Delta` FLOPs (QK^T and AV,
//!   each new token attends to all C cached tokens; the cross term of eq. 11's
//!   `2 L d T^2`) and decode `(M_w / B + C kv_b) / BW` per request. Two facts
//!   locate the gap: (1) the paper's batch-1 row is reproduced within 1 % if the
//!   cross term is `2 L d C Delta` instead (2.54, 6.51, 21.8, 52.7 %), so the
//!   paper seems to count half the attention FLOPs against the context — it
//!   does not say; (2) its batch-32 row then implies a context-independent part
//!   of about 0.234 s per turn at every C (0.0718 s x (1/0.235 - 1) at 3K,
//!   0.766 s x (1/0.766 - 1) at 32K), against our 0.197 s (weights
//!   39 x 16.06 GB / 32 / 237.4 GB/s = 0.082 s plus the arrivals' prefill 0.115 s).
//!   How the batch-32 prefill and weight stream are charged (prefill
//!   interference with the decode batch, or a different effective batch) is
//!   not stated. Ceilings `1 / (1 - phi)` amplify small phi differences as phi
//!   approaches 1, hence the larger ceiling gaps (5.2x vs 4.28x at 32K).
//! - **E.2 re-prefill of 360K (440 s vs 538 s).** We charge `2 P C + 2 L d C^2`
//!   FLOPs at the measured 90.3 TFLOP/s with no efficiency factor (Table 1 takes
//!   `R_p` from the Table 22 anchor). 538 s is 4.86e16 FLOPs at 90.3 TFLOP/s,
//!   1.22x ours: the paper states neither its prefill efficiency `mu_c` for the
//!   serving model (M.1's 0.70 for baselines would give 629 s), nor its
//!   attention-FLOP convention for a full re-prefill, nor whether 360K is
//!   360,000 or 368,640 tokens (460 s with our formula).
//!
//! Rows that match: the turn's inference at 360K (11.8 s vs 12 s), the 67 ms
//! weight stream per decode step, the 854K-token KV capacity (which also fixes
//! GB10's memory at 128 GB decimal), the 1,341-turn exhaustion, 1,729 vs 1,727
//! turns at r = 0.2247 (the paper's r on arrivals is not exactly the 22.47 %
//! observation-token removal, 94 % of Delta being observation), the 2.8K
//! snapshot steady state, 1,635 vs 1,615 turns for L0 alone (r = 18.04 %) and
//! so 1.06x vs 1.07x for L1 over L0, the summarizer at 4,958x vs 4,957x (rho =
//! 10 from Table 2; tau = 0), LLMLingua-2's 1.33x, and ARC's decode times from its
//! own traffic (T_decode = BW / 4.8 TB/s). ARC's Tables 3, 4, 9-13 need the
//! recorded trajectories of each method, which we do not have; `replay` runs
//! the same roofline on ours.

#[test]
fn paper_check_table() {
    let rows = lam_costmodel::paper::paper_checks().unwrap();
    let table = lam_costmodel::paper::render_checks(&rows);
    insta::assert_snapshot!("paper_checks", table);
}

#[test]
fn paper_checks_serialise_with_the_same_rows() {
    let rows = lam_costmodel::paper::paper_checks().unwrap();
    let v = serde_json::to_value(&rows).unwrap();
    assert_eq!(v.as_array().unwrap().len(), rows.len());
    assert!(v[0].get("ours").is_some() && v[0].get("paper").is_some());
}
