//! `lam costmodel ...`: the cost models of `lam-costmodel` as tables, the
//! replay of trajectories under view policies (`lam_eval::replay`), and
//! `calibrate` (`lam_eval::calibrate`), which measures this machine's
//! compaction rates with the pipeline's own code.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use lam_costmodel::classes::{Class3Inputs, Compressor, class1_summarize, class2_prefill_only, class3_lam};
use lam_costmodel::paper::{paper_checks, render_checks};
use lam_costmodel::{
    Arrival, BatchRule, Call, CompactionRates, DEVICE_NAMES, Deployment, Device, DeviceProfile, Efficiency, KvLength, Limit, MODEL_NAMES, Model, PolicyCalls,
    ReplayRow, Roofline, Schedule, ScheduleConfig, ScheduleCost, Serving, phi_table, run_schedule,
};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// `lam costmodel` arguments.
#[derive(Args)]
pub struct CostmodelArgs {
    #[command(subcommand)]
    cmd: CostCmd,
}

#[derive(Args, Clone)]
struct Target {
    /// Device preset: gb10, a100-sxm4-40gb, h200, h200-measured, mi300x.
    #[arg(long)]
    device: String,
    /// Model preset: llama-3.1-8b, qwen2.5-7b-instruct, qwen3-8b, qwen3-32b.
    #[arg(long)]
    model: String,
    /// Memory reserved besides weights and KV (ARC's scratch), bytes (K/M/G suffixes are decimal here).
    #[arg(long, default_value = "0")]
    scratch: String,
}

impl Target {
    fn deployment(&self) -> Result<Deployment> {
        Ok(Deployment::new(Device::preset(&self.device)?, Model::preset(&self.model)?, parse_bytes(&self.scratch)?)?)
    }
}

#[derive(Subcommand)]
enum CostCmd {
    /// List device and model presets with their sources.
    Presets {
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// LAM Table 7: phi, the context-scaling share of a turn, and its Amdahl ceiling 1/(1-phi).
    ///
    /// Token counts take K = 1024 and M = 1024^2 suffixes.
    Phi {
        /// Device preset.
        #[arg(long, default_value = "gb10")]
        device: String,
        /// Model preset.
        #[arg(long, default_value = "llama-3.1-8b")]
        model: String,
        /// Arriving tokens per turn (Delta).
        #[arg(long, default_value_t = 637.0, value_parser = crate::opts::positive)]
        delta: f64,
        /// Decoded tokens per turn (G_a).
        #[arg(long, default_value_t = 39.0, value_parser = crate::opts::positive)]
        decoded: f64,
        /// Decode batch sizes, comma-separated.
        #[arg(long, default_value = "1,32", value_delimiter = ',', value_parser = crate::opts::positive)]
        batch: Vec<f64>,
        /// Context lengths, comma-separated.
        #[arg(long, default_value = "3K,8K,32K,128K", value_delimiter = ',')]
        context: Vec<String>,
        /// JSON rows [{"batch","context","phi","ceiling"}].
        #[arg(long)]
        json: bool,
    },
    /// LAM eq. 2 under the three schedules (admit, delete-in-place, defer-to-wall) for
    /// uniform turns: growth regime (stop at KV capacity) or a hard budget with eviction.
    Schedules {
        /// Device preset.
        #[arg(long, default_value = "gb10")]
        device: String,
        /// Model preset.
        #[arg(long, default_value = "llama-3.1-8b")]
        model: String,
        /// Turns offered.
        #[arg(long, default_value_t = 1453)]
        turns: usize,
        /// Arriving tokens per turn (Delta).
        #[arg(long, default_value_t = 637)]
        delta: u64,
        /// Decoded tokens per turn (G_a).
        #[arg(long, default_value_t = 39)]
        decoded: u64,
        /// Removal rate r of arriving tokens.
        #[arg(long, default_value_t = 0.2247, value_parser = crate::opts::fraction)]
        removal: f64,
        /// Candidate pairs verified per arrival.
        #[arg(long, default_value_t = 0)]
        pairs: u64,
        /// Decode batch.
        #[arg(long, default_value_t = 1.0, value_parser = crate::opts::positive)]
        batch: f64,
        /// Hard context budget (tokens); without it, the growth regime.
        #[arg(long)]
        budget: Option<String>,
        /// Context at which defer-to-wall compacts (default: the budget, else the KV capacity).
        #[arg(long)]
        wall: Option<String>,
        /// Charge re-prefill of the retained context after each eviction.
        #[arg(long)]
        evict_reprefill: bool,
        /// Share of the context a deletion invalidates (LAM charges 1.0; measured mean 0.94).
        #[arg(long, default_value_t = 1.0, value_parser = crate::opts::fraction)]
        invalidated_share: f64,
        /// Compaction rates from a device profile (cargo xtask calibrate); default LAM Table 1 (GB10).
        #[arg(long)]
        profile: Option<PathBuf>,
        /// Text bytes per token (beta) with --profile.
        #[arg(long, default_value_t = 3.68, value_parser = crate::opts::positive)]
        bytes_per_token: f64,
        /// JSON rows.
        #[arg(long)]
        json: bool,
    },
    /// ARC's roofline per call: batch from HBM capacity, bytes per decoded token
    /// M_w/B + L*kv_b, decode time from bandwidth, prefill time from FLOPs.
    Roofline {
        #[command(flatten)]
        target: Target,
        /// Prompt lengths, comma-separated (K = 1024).
        #[arg(long, default_value = "2K,8K,16K,32K", value_delimiter = ',')]
        prompt: Vec<String>,
        /// Decoded tokens per call.
        #[arg(long, default_value_t = 512)]
        decoded: u64,
        /// Fixed batch instead of ARC's capacity rule.
        #[arg(long, value_parser = crate::opts::positive)]
        batch: Option<f64>,
        /// Count generated tokens in L_k (exact growth) instead of L_k = prompt.
        #[arg(long)]
        kv_growth: bool,
        /// JSON rows.
        #[arg(long)]
        json: bool,
    },
    /// LAM M.1: compaction cost of T tokens for the three classes (summarizer, LLMLingua-2, LAM).
    Classes {
        /// Device preset.
        #[arg(long, default_value = "gb10")]
        device: String,
        /// LLM used by the summarizer (class 1).
        #[arg(long, default_value = "llama-3.1-8b")]
        model: String,
        /// Token counts, comma-separated (plain numbers or K = 1024).
        #[arg(long, default_value = "1000,10000,100000,1000000", value_delimiter = ',')]
        tokens: Vec<String>,
        /// Summarization ratio rho (class 1 decodes T/rho tokens; the paper does not state it).
        #[arg(long, default_value_t = 10.0, value_parser = crate::opts::positive)]
        rho: f64,
        /// Compaction rates from a device profile; default LAM Table 1 (GB10).
        #[arg(long)]
        profile: Option<PathBuf>,
        /// JSON rows.
        #[arg(long)]
        json: bool,
    },
    /// Our models fed the papers' stated inputs, beside the papers' numbers.
    CheckPapers {
        /// JSON rows [{"source","quantity","ours","paper","unit"}].
        #[arg(long)]
        json: bool,
    },
    /// Replay recorded trajectories under view policies through ARC's roofline: per model
    /// call, the prompt each policy would build (cl100k_base tokens) and the tokens the
    /// model decoded there (the recorded thought and action); prints modeled time, HBM
    /// traffic and ratios to the first policy.
    Replay {
        /// Trajectory files or folders (mini-swe-agent, SWE-agent, OpenAI chat, Claude Code transcript, Codex rollout, lam JSONL; .gz ok).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Device preset.
        #[arg(long, default_value = "h200")]
        device: String,
        /// Model preset.
        #[arg(long, default_value = "qwen3-8b")]
        model: String,
        /// Policies, comma-separated; the first is the baseline of the ratios.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "window,masking,arc")]
        policy: Vec<crate::opts::PolicyArg>,
        #[command(flatten)]
        opts: crate::opts::PolicyOpts,
        /// Count generated tokens in L_k (exact growth) instead of L_k = prompt.
        #[arg(long)]
        kv_growth: bool,
        /// Reuse the KV of the prompt prefix a call shares with the previous call's
        /// prompt (a prefix cache); ARC's replay prefills every prompt from scratch.
        #[arg(long)]
        prefix_cache: bool,
        /// Encoder for `lam` (bert: all-MiniLM-L6-v2 by default; hashing: model-free; cuda[-bf16|-f16] on a `cuda` build).
        #[arg(long, default_value = "bert", value_parser = crate::opts::encoder)]
        encoder: lam_encode::Backend,
        /// Encoder model directory for `lam`; default $LAM_MODEL or $LAM_HOME/models/all-MiniLM-L6-v2.
        #[arg(long)]
        encoder_model: Option<PathBuf>,
        /// JSON rows.
        #[arg(long)]
        json: bool,
    },
    /// Measure this machine's compaction rates with the pipeline's code and write a device profile.
    Calibrate {
        /// Output file; default $LAM_HOME/costmodel/profile.json.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Encoder model directory; default $LAM_MODEL or $LAM_HOME/models/all-MiniLM-L6-v2
        /// (the model-free hashing encoder is measured, with a note, when it is missing).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Seconds spent per measurement (at least one pass each).
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
}

/// Run `lam costmodel ...`.
pub fn run(a: CostmodelArgs) -> Result<()> {
    match a.cmd {
        CostCmd::Presets { json } => presets(json),
        CostCmd::Phi { device, model, delta, decoded, batch, context, json } => phi(&device, &model, delta, decoded, &batch, &context, json),
        c @ CostCmd::Schedules { .. } => schedules(c),
        CostCmd::Roofline { target, prompt, decoded, batch, kv_growth, json } => roofline(&target, &prompt, decoded, batch, kv_growth, json),
        CostCmd::Classes { device, model, tokens, rho, profile, json } => classes(&device, &model, &tokens, rho, profile.as_deref(), json),
        CostCmd::CheckPapers { json } => {
            let rows = paper_checks()?;
            if json {
                return print_json(&rows);
            }
            print!("{}", render_checks(&rows));
            Ok(())
        }
        CostCmd::Calibrate { out, model, seconds } => calibrate(out, model, seconds),
        c @ CostCmd::Replay { .. } => replay(c),
    }
}

fn phi(device: &str, model: &str, delta: f64, decoded: f64, batch: &[f64], context: &[String], json: bool) -> Result<()> {
    let dep = Deployment::new(Device::preset(device)?, Model::preset(model)?, 0.0)?;
    let contexts = context.iter().map(|c| parse_tokens(c)).collect::<Result<Vec<_>>>()?;
    let rows = phi_table(&dep, Efficiency::MEASURED, delta, decoded, batch, &contexts)?;
    if json {
        return print_json(&rows);
    }
    println!("phi: {model} on {device}, Delta = {delta} arriving, G_a = {decoded} decoded tokens per turn");
    println!("{:>6} {:>9} {:>8} {:>9}", "batch", "context", "phi %", "ceiling");
    for r in &rows {
        println!("{:>6} {:>9} {:>8.1} {:>8.2}x", r.batch, r.context, 100.0 * r.phi, r.ceiling);
    }
    Ok(())
}

fn schedules(c: CostCmd) -> Result<()> {
    let CostCmd::Schedules {
        device,
        model,
        turns,
        delta,
        decoded,
        removal,
        pairs,
        batch,
        budget,
        wall,
        evict_reprefill,
        invalidated_share,
        profile,
        bytes_per_token,
        json,
    } = c
    else {
        unreachable!("called for the schedules subcommand only")
    };
    let dep = Deployment::new(Device::preset(&device)?, Model::preset(&model)?, 0.0)?;
    let s = Serving::new(dep, batch, Efficiency::MEASURED)?;
    let rates = rates_from(profile.as_deref(), bytes_per_token)?;
    if !(0.0..=1.0).contains(&removal) {
        bail!("--removal must be in [0, 1], got {removal}");
    }
    let arrivals = Arrival::uniform(turns, delta, removal, decoded, pairs);
    let limit = match &budget {
        Some(b) => Limit::HardBudget { tokens: parse_tokens(b)?, reprefill_on_evict: evict_reprefill },
        None => Limit::Growth,
    };
    let wall = match (&wall, &budget) {
        (Some(w), _) => parse_tokens(w)?,
        (None, Some(b)) => parse_tokens(b)?,
        (None, None) => s.deployment().kv_capacity_tokens(),
    };
    let mut rows = Vec::new();
    for sch in Schedule::ALL {
        let cfg = ScheduleConfig { wall: Some(wall), invalidated_share, ..ScheduleConfig::new(sch, limit) };
        rows.push(run_schedule(&s, &rates, &arrivals, &cfg)?);
    }
    if json {
        return print_json(&rows);
    }
    let regime = match limit {
        Limit::Growth => format!("growth regime (stop at KV capacity {:.0} tokens)", s.deployment().kv_capacity_tokens()),
        Limit::HardBudget { tokens, .. } => format!("hard budget {tokens:.0} tokens, eviction{}", if evict_reprefill { " + re-prefill" } else { "" }),
    };
    println!("schedules: {model} on {device}, batch {batch}, {turns} turns x Delta {delta}, r = {removal}, G_a {decoded}; {regime}; defer wall {wall:.0}");
    print_schedules(&rows);
    Ok(())
}

/// One line per schedule, its total also as a ratio to the first's (admit).
fn print_schedules(rows: &[ScheduleCost]) {
    println!(
        "{:<16} {:>6} {:>9} {:>11} {:>11} {:>11} {:>11} {:>12} {:>8} {:>9} {:>7}",
        "schedule", "turns", "exhausted", "prefill s", "decode s", "compact s", "reprefill s", "total s", "% comp", "mean C", "vs admit"
    );
    let admit = rows[0].total_s;
    for r in rows {
        println!(
            "{:<16} {:>6} {:>9} {:>11.1} {:>11.1} {:>11.2} {:>11.1} {:>12.1} {:>8.1} {:>9.0} {:>6.1}x",
            r.schedule.name(),
            r.turns,
            r.exhausted_at_turn.map_or("-".to_string(), |t| t.to_string()),
            r.prefill_s,
            r.decode_s,
            r.compaction_s,
            r.reprefill_s,
            r.total_s,
            100.0 * (r.compaction_s + r.reprefill_s) / r.total_s,
            r.mean_context,
            r.total_s / admit
        );
    }
}

/// One prompt length under the roofline (`lam costmodel roofline`).
#[derive(Serialize)]
struct RooflineRow {
    prompt_tokens: u64,
    decoded_tokens: u64,
    batch: f64,
    bytes_per_token: f64,
    decode_bytes: f64,
    decode_s: f64,
    prefill_s: f64,
    total_s: f64,
}

fn roofline(target: &Target, prompt: &[String], decoded: u64, batch: Option<f64>, kv_growth: bool, json: bool) -> Result<()> {
    let mut r = Roofline::arc(target.deployment()?);
    if let Some(b) = batch {
        r.batch = BatchRule::Fixed(b);
    }
    if kv_growth {
        r.kv_length = KvLength::PromptPlusGenerated;
    }
    let mut rows = Vec::new();
    for p in prompt {
        let p = parse_tokens(p)? as u64;
        let t = r.trajectory(&[Call::new(p, decoded)])?;
        rows.push(RooflineRow {
            prompt_tokens: p,
            decoded_tokens: decoded,
            batch: t.batch,
            bytes_per_token: r.bytes_per_token(p as f64, t.batch),
            decode_bytes: t.decode_bytes,
            decode_s: t.decode_s,
            prefill_s: t.prefill_s,
            total_s: t.total_s,
        });
    }
    if json {
        return print_json(&rows);
    }
    print_roofline(&r, &rows);
    Ok(())
}

/// The deployment, then one line per prompt length.
fn print_roofline(r: &Roofline, rows: &[RooflineRow]) {
    let d = r.deployment();
    println!(
        "roofline: {} on {} ({:.1} GB, {:.2} TB/s, {:.0} TFLOP/s); M_w = {:.2} GB, kv_b = {:.0} B/token",
        d.model.name,
        d.device.name,
        d.device.memory_bytes / 1e9,
        d.device.bandwidth / 1e12,
        d.device.flops / 1e12,
        d.model.weight_bytes() / 1e9,
        d.model.kv_bytes_per_token()
    );
    println!("{:>8} {:>8} {:>6} {:>12} {:>11} {:>11} {:>11} {:>11}", "prompt", "decoded", "B", "MB/token", "decode GB", "decode s", "prefill s", "total s");
    for x in rows {
        println!(
            "{:>8} {:>8} {:>6} {:>12.1} {:>11.2} {:>11.4} {:>11.4} {:>11.4}",
            x.prompt_tokens,
            x.decoded_tokens,
            x.batch,
            x.bytes_per_token / 1e6,
            x.decode_bytes / 1e9,
            x.decode_s,
            x.prefill_s,
            x.total_s
        );
    }
}

fn classes(device: &str, model: &str, tokens: &[String], rho: f64, profile: Option<&Path>, json: bool) -> Result<()> {
    let dep = Deployment::new(Device::preset(device)?, Model::preset(model)?, 0.0)?;
    let rates = rates_from(profile, CompactionRates::LAM_GB10.bytes_per_token)?;
    let comp = Compressor::xlm_roberta_large();
    #[derive(Serialize)]
    struct Row {
        tokens: f64,
        summarize_s: f64,
        llmlingua2_s: f64,
        lam_s: f64,
        lam_encode_share: f64,
    }
    let mut rows = Vec::new();
    for t in tokens {
        let t = parse_tokens(t)?;
        // Eq. 12 inputs: 512-token windows of 768-d embeddings (bge-base, LAM Table 4);
        // candidate pairs are run-dependent and taken as 0 here.
        let x = Class3Inputs { chunks: (t / 512.0).ceil(), dim: 768.0, candidate_pairs: 0.0, quantize_bytes_s: 65.4e9 };
        let lam = class3_lam(&rates, &x, t)?;
        rows.push(Row {
            tokens: t,
            summarize_s: class1_summarize(&dep, Efficiency::LAM_BASELINE, t, rho, 0.0)?.total_s(),
            llmlingua2_s: class2_prefill_only(&comp, &dep.device, Efficiency::LAM_BASELINE, t),
            lam_s: lam.total_s(),
            lam_encode_share: lam.encode_s / lam.total_s(),
        });
    }
    if json {
        return print_json(&rows);
    }
    println!(
        "cost classes (LAM M.1) on {device}: summarizer {model} at rho = {rho}, LLMLingua-2 (xlm-roberta-large), LAM eq. 12; mu_c = 0.70, mu_m = 1.00 for the LLMs"
    );
    println!("{:>10} {:>14} {:>14} {:>12} {:>10} {:>10}", "T", "summarize s", "llmlingua2 s", "lam s", "sum/lam", "enc share");
    for r in &rows {
        println!(
            "{:>10} {:>14.2} {:>14.3} {:>12.4} {:>9.0}x {:>9.3}%",
            r.tokens,
            r.summarize_s,
            r.llmlingua2_s,
            r.lam_s,
            r.summarize_s / r.lam_s,
            100.0 * r.lam_encode_share
        );
    }
    Ok(())
}

fn replay(c: CostCmd) -> Result<()> {
    let CostCmd::Replay { paths, device, model, policy, opts: popts, kv_growth, prefix_cache, encoder, encoder_model, json } = c else {
        unreachable!("called for the replay subcommand only")
    };
    let enc = crate::opts::EncoderOpts { encoder: Some(encoder), model: encoder_model, batch: 32 };
    let settings = popts.settings(32);
    let mut r = Roofline::arc(Deployment::new(Device::preset(&device)?, Model::preset(&model)?, 0.0)?);
    if kv_growth {
        r.kv_length = KvLength::PromptPlusGenerated;
    }
    if policy.is_empty() {
        bail!("--policy: name at least one policy");
    }
    let mut calls: Vec<PolicyCalls> = policy.iter().map(|p| PolicyCalls { policy: p.kind().name().into(), trajectories: Vec::new() }).collect();
    for input in lam_trajectory::read::expand_inputs(&paths)? {
        let Some(trajs) = lam_trajectory::read::read_input(&input)? else {
            eprintln!("note: {} is not a trajectory; skipped", input.path.display());
            continue;
        };
        for t in &trajs {
            for (i, p) in policy.iter().enumerate() {
                let load = || enc.load().map_err(|e| lam_eval::Error::Input(format!("{e:#}")));
                let c = lam_eval::replay::policy_calls(t, p.kind(), &settings, prefix_cache, load)
                    .with_context(|| format!("{} ({}): policy {}", input.path.display(), t.session.0, p.kind().name()))?;
                calls[i].trajectories.push(c);
            }
        }
    }
    let rows = lam_costmodel::replay(&r, &calls, 0)?;
    if json {
        return print_json(&rows);
    }
    println!(
        "replay: {} trajectories, {model} on {device}, budget {} cl100k tokens; roofline L_k = {}; {}; ratios to {}",
        calls[0].trajectories.len(),
        popts.budget,
        if kv_growth { "prompt + generated" } else { "prompt" },
        if prefix_cache { "shared prompt prefixes reused" } else { "every prompt prefilled in full" },
        rows[0].policy
    );
    print_replay(&rows);
    Ok(())
}

/// One line per policy.
fn print_replay(rows: &[ReplayRow]) {
    println!(
        "{:<9} {:>6} {:>12} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7}",
        "policy", "calls", "prompt tok", "decoded", "mean B", "HBM TB", "decode s", "prefill s", "total s", "speedup", "sav %"
    );
    for x in rows {
        println!(
            "{:<9} {:>6} {:>12} {:>9} {:>7.0} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>7.2}x {:>7.1}",
            x.policy,
            x.calls,
            x.prompt_tokens,
            x.decoded_tokens,
            x.mean_batch,
            x.decode_bytes / 1e12,
            x.decode_s,
            x.prefill_s,
            x.total_s,
            x.speedup,
            x.savings_pct
        );
    }
}

fn calibrate(out: Option<PathBuf>, model: Option<PathBuf>, seconds: f64) -> Result<()> {
    let profile = lam_eval::calibrate::measure(model.as_deref(), seconds, &mut |line| eprintln!("{line}"))?;
    let path = out.unwrap_or_else(|| lam_encode::lam_home().join("costmodel/profile.json"));
    if let Some(p) = path.parent()
        && !p.as_os_str().is_empty()
    {
        lam_core::fsdir::create_private(p).with_context(|| format!("creating {}", p.display()))?;
    }
    std::fs::write(&path, profile.to_json()).with_context(|| format!("writing {}", path.display()))?;
    print!("{}", profile.to_json());
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn print_json<T: Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn rates_from(profile: Option<&Path>, bytes_per_token: f64) -> Result<CompactionRates> {
    Ok(match profile {
        Some(p) => {
            let r = DeviceProfile::load(p)?.rates(bytes_per_token);
            r.validate()?;
            r
        }
        None => CompactionRates::LAM_GB10,
    })
}

fn presets(json: bool) -> Result<()> {
    let devices = DEVICE_NAMES.iter().map(|d| Device::preset(d)).collect::<Result<Vec<_>, _>>()?;
    let models = MODEL_NAMES.iter().map(|m| Model::preset(m)).collect::<Result<Vec<_>, _>>()?;
    if json {
        return print_json(&serde_json::json!({ "devices": devices, "models": models }));
    }
    println!("{:<16} {:>9} {:>10} {:>9}  source", "device", "mem GB", "BW GB/s", "TFLOP/s");
    for d in &devices {
        println!("{:<16} {:>9.1} {:>10.1} {:>9.1}  {}", d.name, d.memory_bytes / 1e9, d.bandwidth / 1e9, d.flops / 1e12, d.source);
    }
    println!();
    println!("{:<20} {:>6} {:>6} {:>5} {:>4} {:>5} {:>9} {:>9}  source", "model", "layers", "hidden", "heads", "kv", "d_h", "M_w GB", "kv B/tok");
    for m in &models {
        println!(
            "{:<20} {:>6} {:>6} {:>5} {:>4} {:>5} {:>9.2} {:>9.0}  {}",
            m.name,
            m.layers,
            m.hidden,
            m.heads,
            m.kv_heads,
            m.head_dim,
            m.weight_bytes() / 1e9,
            m.kv_bytes_per_token(),
            m.source
        );
    }
    Ok(())
}

/// Token counts: plain numbers, or K = 1024, M = 1024^2 suffixes (as context lengths are quoted).
fn parse_tokens(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1024.0),
        Some('M' | 'm') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().with_context(|| format!("not a token count: `{s}`"))?;
    if !(v.is_finite() && v >= 0.0) {
        bail!("token count must be >= 0: `{s}`");
    }
    Ok(v * mul)
}

/// Byte counts with decimal K/M/G suffixes.
fn parse_bytes(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1e3),
        Some('M' | 'm') => (&t[..t.len() - 1], 1e6),
        Some('G' | 'g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().with_context(|| format!("not a byte count: `{s}`"))?;
    Ok(v * mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_and_byte_counts() {
        assert_eq!(parse_tokens("3K").unwrap(), 3072.0);
        assert_eq!(parse_tokens("128k").unwrap(), 131072.0);
        assert_eq!(parse_tokens("1M").unwrap(), 1048576.0);
        assert_eq!(parse_tokens("360000").unwrap(), 360000.0);
        assert!(parse_tokens("-1").is_err() && parse_tokens("lots").is_err());
        assert_eq!(parse_bytes("2G").unwrap(), 2e9);
    }
}
