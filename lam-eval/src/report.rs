//! Running both operator forms over a trajectory and reporting the contract
//! fields of `lam compact --json`.

use lam_core::{Encoder, Error};
use lam_operator::{Admission, Config, Session, compact_batch, without_stubs};
use lam_trajectory::{Trajectory, tokens};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// One trajectory's report (`lam compact --json` prints one per line).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Session name.
    pub session: String,
    /// Source file.
    pub source: String,
    /// Reader used.
    pub format: lam_trajectory::Format,
    /// Encoder model id.
    pub encoder: String,
    /// Candidate index.
    pub index: String,
    /// Layer order (`l1-l0` or `l0-l1`).
    pub order: &'static str,
    /// What was forwarded for dropped chunks (`faithful` or `paper`).
    pub residual: &'static str,
    /// Observation records.
    pub records: usize,
    /// Chunks embedded.
    pub chunks: usize,
    /// Chunks dropped by L1.
    pub chunks_dropped: usize,
    /// Lines replaced by L0.
    pub lines_replaced: u64,
    /// Stub lines emitted (L1 + L0).
    pub stubs: usize,
    /// cl100k_base tokens of the original observations.
    pub tokens_in: usize,
    /// cl100k_base tokens of the residual observations (stubs included).
    pub tokens_out: usize,
    /// Share of tokens removed before charging stubs.
    pub removal_gross: f64,
    /// Share of tokens removed after charging stubs.
    pub removal_net: f64,
    /// Lines shown for the first time (`lam_core::newlines`).
    pub new_lines: usize,
    /// New lines no residual line equals (0 for the faithful residual).
    pub new_lines_hidden: usize,
    /// cl100k_base tokens of the hidden new lines (0 without token accounting).
    pub new_tokens_hidden: usize,
    /// Share removed by L0 (gross).
    pub removal_l0: f64,
    /// Share removed by L1 (gross).
    pub removal_l1: f64,
    /// Merge threshold `t`.
    pub threshold: f64,
    /// Configured bound `delta = sqrt(2 - 2t)`.
    pub delta: f64,
    /// Largest substitution distance used.
    pub delta_hat: f64,
    /// Smallest decision margin `|cos - t|` among verified nearest pairs (null if none).
    pub min_margin: Option<f64>,
    /// Deletion-set digest (docs/digest.md).
    pub digest: String,
    /// SHA-256 (first 16 hex) of all residuals, each followed by 0x1E.
    pub residual_digest: String,
    /// Online and batch residuals and digests are byte-identical.
    pub online_equals_batch: bool,
    /// Median admission time per arrival, embeddings given (us).
    pub admit_us_p50: f64,
    /// 99th percentile admission time per arrival (us).
    pub admit_us_p99: f64,
    /// Median encoding time per arrival (us).
    pub encode_us_p50: f64,
}

/// Everything a run produced for one trajectory.
#[derive(Debug)]
pub struct Run {
    /// The report.
    pub report: Report,
    /// Online admissions, in order.
    pub online: Vec<Admission>,
    /// Unit embeddings of every retained chunk, in arrival order (L2's input).
    pub retained: Vec<f32>,
    /// The online session's totals (tokens when counted, stubs, time).
    pub totals: lam_operator::SessionTotals,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1] as f64 / 1000.0
}

/// Digest of a sequence of residuals.
pub fn residual_digest<'a>(residuals: impl Iterator<Item = &'a [u8]>) -> String {
    let mut h = Sha256::new();
    for r in residuals {
        h.update(r);
        h.update([0x1E]);
    }
    hex::encode(&h.finalize()[..8])
}

/// New lines of a trajectory and those its residuals hide (`lam_core::newlines`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hidden {
    /// Lines shown for the first time.
    pub new: usize,
    /// Of those, lines no line of their residual equals.
    pub lines: usize,
    /// Their cl100k_base tokens, each line with its newline (0 when not counted).
    pub tokens: usize,
}

/// Count the new lines of `traj` that `online`'s residuals hide.
pub fn hidden_lines(traj: &Trajectory, online: &[Admission], count_tokens: bool) -> Hidden {
    let mut seen = lam_core::newlines::NewLines::new();
    let mut h = Hidden::default();
    for (r, a) in traj.records.iter().zip(online) {
        let o = seen.observe(&r.observation, &a.residual);
        h.new += o.new;
        h.lines += o.hidden.len();
        if count_tokens {
            h.tokens += o.hidden.iter().map(|l| tokens::count(&[l.as_slice(), b"\n"].concat())).sum::<usize>();
        }
    }
    h
}

/// Run the online operator and the batch form over `traj` and compare them.
/// Token accounting is skipped (zeros) when `count_tokens` is false.
pub fn run(cfg: Config, enc: &mut dyn Encoder, traj: &Trajectory, count_tokens: bool) -> Result<Run, Error> {
    run_archived(cfg, enc, traj, count_tokens, None)
}

/// [`run`], archiving every observation in `store` first when one is given
/// (so every stub's `_recall §id` resolves there; the archive records
/// tokens by `cfg.counter`, 0 without one).
pub fn run_archived(
    cfg: Config,
    enc: &mut dyn Encoder,
    traj: &Trajectory,
    count_tokens: bool,
    mut store: Option<&mut dyn lam_core::ObsStore>,
) -> Result<Run, Error> {
    let info = enc.info();
    // The archive records each observation's tokens (by `cfg.counter`), and
    // the accounting below needs the first layer's kept bytes.
    let mut cfg = cfg.with_token_counts(store.is_some() || count_tokens);
    if count_tokens {
        cfg = cfg.with_diagnostics();
    }
    let mut s = Session::new(cfg, info.dim)?;
    let mut online = Vec::with_capacity(traj.records.len());
    for r in &traj.records {
        online.push(match store.as_deref_mut() {
            Some(st) => s.admit_archived(st, &traj.session, enc, r)?,
            None => s.admit(enc, r)?,
        });
    }
    let batch = compact_batch(cfg, enc, &traj.records)?;
    let equal = online.len() == batch.admissions.len()
        && online.iter().zip(&batch.admissions).all(|(a, b)| a.residual == b.residual && a.chunks == b.chunks)
        && s.digest().hex16() == batch.digest.hex16()
        && s.delta_hat() == batch.delta_hat;

    let (mut tin, mut tout, mut tgross, mut tfirst) = (0usize, 0usize, 0usize, 0usize);
    if count_tokens {
        for (r, a) in traj.records.iter().zip(&online) {
            let t = a.tokens.unwrap_or_else(|| lam_operator::Tokens { input: tokens::count(&r.observation), output: tokens::count(&a.residual) });
            tin += t.input;
            tout += t.output;
            tgross += tokens::count(&without_stubs(&a.residual, &a.stubs, cfg.recall));
            tfirst += tokens::count(&a.first_layer_plain);
        }
    }
    let share = |x: usize| lam_operator::removal(tin as u64, x as u64);
    let (gross, first) = (share(tgross), share(tfirst));
    let (removal_l0, removal_l1) = match cfg.order {
        lam_operator::Order::L1L0 => (gross - first, first),
        lam_operator::Order::L0L1 => (first, gross - first),
    };
    let hidden = hidden_lines(traj, &online, count_tokens);
    let mut admit: Vec<u64> = online.iter().map(|a| a.admit_ns).collect();
    admit.sort_unstable();
    let mut encode: Vec<u64> = online.iter().map(|a| a.encode_ns).collect();
    encode.sort_unstable();
    let report = Report {
        session: traj.session.0.clone(),
        source: traj.source.display().to_string(),
        format: traj.format,
        encoder: info.model_id,
        index: s.index_description(),
        order: cfg.order.as_str(),
        residual: cfg.residual.as_str(),
        records: traj.records.len(),
        chunks: online.iter().map(|a| a.chunks.len()).sum(),
        chunks_dropped: s.digest().len(),
        lines_replaced: online.iter().map(|a| a.l0.lines_replaced).sum(),
        stubs: online.iter().map(|a| a.stubs.len()).sum(),
        tokens_in: tin,
        tokens_out: tout,
        removal_gross: gross,
        removal_net: share(tout),
        new_lines: hidden.new,
        new_lines_hidden: hidden.lines,
        new_tokens_hidden: hidden.tokens,
        removal_l0,
        removal_l1,
        threshold: cfg.threshold.cosine(),
        delta: cfg.threshold.delta(),
        delta_hat: s.delta_hat(),
        min_margin: s.l1_stats().min_margin,
        digest: s.digest().hex16(),
        residual_digest: residual_digest(online.iter().map(|a| a.residual.as_slice())),
        online_equals_batch: equal,
        admit_us_p50: percentile(&admit, 50.0),
        admit_us_p99: percentile(&admit, 99.0),
        encode_us_p50: percentile(&encode, 50.0),
    };
    let retained = s.retained_vectors().to_vec();
    Ok(Run { report, online, retained, totals: s.totals() })
}
