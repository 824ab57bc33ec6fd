//! `lam eval`.

use crate::opts::EncoderOpts;
use anyhow::{Context, Result};
use lam_eval::{self as eval, Options, Progress};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct EvalArgs {
    /// Trajectory files or folders (mini-swe-agent, SWE-agent, OpenAI chat, Claude Code transcript, Codex rollout, lam JSONL; .gz ok).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Merge thresholds t (cosine), comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = eval::DEFAULT_THRESHOLDS.to_vec(), value_parser = crate::opts::threshold)]
    thresholds: Vec<f64>,
    /// Evaluate a deterministic sample of N files (by SHA-256 of the file name).
    #[arg(long)]
    sample: Option<usize>,
    /// Write report.json, report.md and SVG plots into DIR.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print the headline rows as JSON lines (per threshold, then per baseline setting).
    #[arg(long)]
    json: bool,
    /// Gold patches (file or folder of SWE-bench JSON); default: swebench-gold-patches beside the inputs.
    #[arg(long)]
    gold: Option<PathBuf>,
    /// Also run the controls: the LoCoMo control (near duplicates in ordinary dialogue; minutes with a real encoder, estimate printed first).
    #[arg(long)]
    controls: bool,
    /// LoCoMo file for --controls; default: locomo/locomo10.json beside the inputs.
    #[arg(long)]
    locomo: Option<PathBuf>,
    /// Accepted for old scripts: the controls are off unless --controls.
    #[arg(long, hide = true)]
    no_locomo: bool,
    /// Skip SemDeDup.
    #[arg(long)]
    no_semdedup: bool,
    /// How stubs name the way to get an original back (the stub cost depends on it): `_recall` (default, the ARC view's action), `recall`, `lam recall`, a tool name, or `none`.
    #[arg(long, value_parser = crate::opts::recall, default_value = "_recall", value_name = "HANDLE")]
    recall: lam_core::stub::Recall<'static>,
    /// Write every repeated run as a line stub of its own (the v6 form),
    /// never one stub plus the difference for a near-duplicate output
    /// (docs/stubs.md, "Delta"): for comparison with the default.
    #[arg(long)]
    line_stubs: bool,
    /// SemDeDup seeds.
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// Observation-masking windows k, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = eval::DEFAULT_MASKING.to_vec())]
    masking: Vec<usize>,
    #[command(flatten)]
    enc: EncoderOpts,
    /// Embedding cache (lam-embeddings/1), default $LAM_HOME/cache/MODEL.lamemb; or postgres://... to share it through that database.
    #[arg(long)]
    cache: Option<String>,
    /// Do not read or write the embedding cache.
    #[arg(long)]
    no_cache: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

struct Bar {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
    /// stderr is not a terminal: a line per stage and per tenth of it instead of a bar.
    lines: Option<(String, u64, u64, std::time::Instant)>,
}

impl Progress for Bar {
    fn stage(&mut self, name: &str, total: u64) {
        if let Some(b) = self.bar.take() {
            b.finish();
        }
        if self.quiet {
            return;
        }
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!("lam eval: {name}: 0/{total}");
            self.lines = Some((name.to_string(), total, 0, std::time::Instant::now()));
            return;
        }
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>12} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b.set_prefix(name.to_string());
        self.bar = Some(b);
    }
    fn inc(&mut self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
        if let Some((name, total, pos, t0)) = &mut self.lines {
            let before = *pos * 10 / (*total).max(1);
            *pos += n;
            if *pos * 10 / (*total).max(1) > before {
                eprintln!("lam eval: {name}: {pos}/{total} ({:.0} s)", t0.elapsed().as_secs_f64());
            }
        }
    }
    fn note(&mut self, message: &str) {
        match &self.bar {
            Some(b) => b.println(format!("lam eval: {message}")),
            None => eprintln!("lam eval: {message}"),
        }
    }
}

pub fn run(a: EvalArgs) -> Result<()> {
    let (enc, cache_path) = a.enc.load_cached(&a.cache, a.no_cache || a.enc.backend() == lam_encode::Backend::Hashing)?;
    // Saved every 2,048 new embeddings (~5 MB), so an interrupted run keeps its work.
    let mut enc = match &cache_path {
        Some(p) => enc.autosave(p, 2048),
        None => enc,
    };
    let o = Options {
        thresholds: a.thresholds.clone(),
        sample: a.sample,
        masking: a.masking.clone(),
        semdedup_seeds: a.seeds,
        semdedup: !a.no_semdedup,
        gold: a.gold.clone(),
        locomo: a.locomo.clone(),
        controls: a.controls && !a.no_locomo,
        recall: a.recall,
        delta: !a.line_stubs,
        ..Options::default()
    };
    let mut bar = Bar { bar: None, quiet: a.quiet, lines: None };
    let r = eval::evaluate(&a.paths, &mut enc, &o, &mut bar);
    if let Some(b) = bar.bar.take() {
        b.finish_and_clear();
    }
    if let Some(p) = &cache_path {
        enc.save(p).with_context(|| format!("writing embedding cache {}", p.display()))?;
    }
    let r = r?;
    if let Some(dir) = &a.report {
        for p in eval::write_report(&r, dir)? {
            eprintln!("wrote {}", p.display());
        }
    }
    print(&r, &a)?;
    // Every readable input was evaluated; the bad ones are named here and fail the run.
    for f in &r.failed {
        eprintln!("lam eval: {}", f.error);
    }
    if !r.failed.is_empty() {
        let paths: Vec<&str> = r.failed.iter().map(|f| f.path.as_str()).collect();
        anyhow::bail!("{} input(s) failed (errors above; the report covers the others): {}", r.failed.len(), paths.join(", "));
    }
    Ok(())
}

/// The headline rows as JSON lines (`--json`), or the report's opening,
/// headline and evidence tables as Markdown.
fn print(r: &eval::EvalReport, a: &EvalArgs) -> Result<()> {
    let so = std::io::stdout();
    let mut so = so.lock();
    if let (Some(line), true) = (&r.controls_not_run, a.json) {
        // The text report carries this line; with --json it goes to stderr.
        eprintln!("lam eval: {line}");
    }
    if a.json {
        for h in r.headline() {
            serde_json::to_writer(&mut so, &h)?;
            writeln!(so)?;
        }
        for h in r.baseline_headline() {
            serde_json::to_writer(&mut so, &h)?;
            writeln!(so)?;
        }
    } else {
        let md = eval::markdown(r);
        // The plain sentences, the headline table with its terms and the evidence table are the summary.
        let end = md.find("\n## ECR").unwrap_or(md.len());
        write!(so, "{}", &md[..end])?;
        writeln!(
            so,
            "\n(full report: {})",
            a.report.as_ref().map(|d| d.join("report.md").display().to_string()).unwrap_or_else(|| "pass --report DIR".into())
        )?;
    }
    Ok(())
}
