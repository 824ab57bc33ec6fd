//! `lam compact`: the LAM admission test over trajectories, online and batch.

use crate::opts::EncoderOpts;
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use lam_core::{DeletionDigest, Encoder, Threshold};
use lam_encode::{CachedEncoder, EmbeddingsWriter, PrecomputedEncoder};
use lam_eval::report::{self, Run};
use lam_operator::{Config, IndexChoice, Order};
use lam_trajectory::read::{self, JsonlRecord, Trajectory};
use lam_trajectory::{SessionNames, Unreadable};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, ValueEnum)]
pub enum OrderArg {
    #[value(name = "l1-l0")]
    L1L0,
    #[value(name = "l0-l1")]
    L0L1,
}

#[derive(clap::Args)]
pub struct CompactArgs {
    /// Trajectory files or folders (mini-swe-agent, SWE-agent, OpenAI chat, Claude Code transcript, Codex rollout, lam JSONL; .gz ok).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Merge threshold t (cosine); delta = sqrt(2 - 2t).
    #[arg(long, default_value_t = lam_core::Threshold::DEFAULT.cosine(), value_parser = crate::opts::threshold)]
    threshold: f64,
    /// Layer order.
    #[arg(long, value_enum, default_value = "l1-l0")]
    order: OrderArg,
    /// What is forwarded for near-duplicate chunks: `faithful` (default: every line the model has
    /// not seen is kept, only lines it can read elsewhere become stubs) or `paper` (the LAM paper's
    /// residual: a whole run of dropped chunks becomes one `similar to` stub, hiding lines the model
    /// never saw; for reproducing the paper's figures only).
    #[arg(long, default_value = "faithful", value_parser = residual)]
    residual: lam_operator::Residual,
    /// How stubs name the way to get an original back: `_recall` (default, the ARC view's action), `lam recall` (an agent with a shell and this store), `recall` or another tool name (`lam mcp`), or `none`.
    #[arg(long, value_parser = crate::opts::recall, default_value = "_recall", value_name = "HANDLE")]
    recall: lam_core::stub::Recall<'static>,
    /// Write every repeated run as a line stub of its own (the v6 form),
    /// never one stub plus the difference for a near-duplicate output
    /// (docs/stubs.md, "Delta").
    #[arg(long)]
    line_stubs: bool,
    /// Print one JSON object per trajectory.
    #[arg(long)]
    json: bool,
    /// Write each residual (lam JSONL) and its decisions into DIR.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    enc: EncoderOpts,
    /// Use precomputed embeddings (lam-embeddings/1 file) instead of an encoder.
    #[arg(long)]
    embeddings: Option<PathBuf>,
    /// Write the embeddings used to FILE (lam-embeddings/1).
    #[arg(long)]
    dump_embeddings: Option<PathBuf>,
    /// Candidate index: `default` (full-recall bands for t, else exhaustive), `exhaustive`, or `banded:R,REL`.
    #[arg(long, default_value = "default", value_parser = index)]
    index: IndexChoice,
    /// Embedding cache (lam-embeddings/1 chunk lines), default $LAM_HOME/cache/MODEL.lamemb; or postgres://... to share it through that database.
    #[arg(long)]
    cache: Option<String>,
    /// Do not read or write the embedding cache.
    #[arg(long)]
    no_cache: bool,
    /// Skip cl100k_base token accounting (faster).
    #[arg(long)]
    no_tokens: bool,
    /// L2: store each session's retained embeddings through this codec in `--out DIR`
    /// (`SESSION.retained.lamc`, docs/codec-format.md): f16, int8, binary, or szp[-fixed|-plain][-rel<B>|-abs<B>] (szp: fixed, rel 1e-3);
    /// `cuda:SZP`, `rocm:SZP` run the Szp kernel on a GPU (builds with those features).
    #[arg(long, requires = "out", value_parser = codec)]
    codec: Option<lam_codec::CodecSpec>,
    /// Archive every observation into this store first (a FileStore directory, or
    /// `postgres://...` where built in), so every stub's `_recall §id` can be answered
    /// with `lam recall --store STORE §id`.
    #[arg(long)]
    store: Option<String>,
    /// With --store: append each trajectory to the store's session of the same name even when that
    /// session holds another run. Default: a session name already holding other content gets a
    /// qualified name (`NAME@2`, `NAME@3`, ...); the same trajectory archived again is a no-op.
    #[arg(long, requires = "store")]
    append: bool,
}

fn index(s: &str) -> Result<IndexChoice, String> {
    s.parse().map_err(|e: lam_operator::Error| e.to_string())
}

fn residual(s: &str) -> Result<lam_operator::Residual, String> {
    s.parse().map_err(|e: lam_operator::Error| e.to_string())
}

fn codec(s: &str) -> Result<lam_codec::CodecSpec, String> {
    lam_codec::CodecSpec::parse(s).map_err(|e| e.to_string())
}

/// Where embeddings come from: a precomputed file or an encoder behind its cache.
enum Enc {
    Pre(PrecomputedEncoder),
    Cached(Box<CachedEncoder<Box<dyn Encoder>>>, Option<PathBuf>),
}

impl Enc {
    fn new(a: &CompactArgs) -> Result<Self> {
        Ok(match &a.embeddings {
            Some(p) => Enc::Pre(PrecomputedEncoder::open(p)?),
            // Online and batch forms share one memo, persisted between runs: each chunk is encoded once.
            None => {
                let (c, path) = a.enc.load_cached(&a.cache, a.no_cache || a.enc.backend() == lam_encode::Backend::Hashing)?;
                Enc::Cached(Box::new(c), path)
            }
        })
    }

    fn as_dyn(&mut self) -> &mut dyn Encoder {
        match self {
            Enc::Pre(p) => p,
            Enc::Cached(c, _) => c.as_mut(),
        }
    }

    fn save(&mut self) -> Result<()> {
        if let Enc::Cached(c, Some(p)) = self {
            c.save(p).with_context(|| format!("writing embedding cache {}", p.display()))?;
        }
        Ok(())
    }
}

/// Totals over every trajectory of the run.
#[derive(Default)]
struct Totals {
    corpus: DeletionDigest,
    sessions: u32,
    /// Every session's admissions added up (tokens when counted).
    tokens: lam_operator::SessionTotals,
    all_equal: bool,
    /// New lines, and those the residuals hide (`lam_core::newlines`).
    new_lines: usize,
    hidden_lines: usize,
    hidden_tokens: usize,
    l2_raw: usize,
    l2_stored: usize,
}

pub fn run(a: CompactArgs) -> Result<()> {
    let t = Threshold::from_cosine(a.threshold)?;
    let cfg = config(&a, t);
    let mut enc = Enc::new(&a)?;
    let dump = match &a.dump_embeddings {
        Some(p) => Some(EmbeddingsWriter::new(
            std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?),
            &enc.as_dyn().info(),
        )?),
        None => None,
    };
    if let Some(d) = &a.out {
        lam_core::fsdir::create_private(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let archive = a.store.as_deref().map(|s| crate::opts::open_store(s, arc_store::Access::ReadWrite)).transpose()?;
    let codec = a.codec.map(lam_codec::CodecSpec::open).transpose().context("--codec")?;
    let files = read::expand_inputs(&a.paths)?;
    if files.is_empty() {
        bail!("no trajectory files under {:?}", a.paths);
    }
    let stdout = std::io::stdout();
    let mut so = stdout.lock();
    if !a.json {
        print_header(&mut so)?;
    }
    let names = SessionNames::new(files.iter().map(|i| i.path.as_path()));
    let mut r = Runner { a: &a, cfg, enc: &mut enc, dump, archive, codec, names, tot: Totals { all_equal: true, ..Totals::default() } };
    // Every readable input is processed; each bad one is named with its error, and the run fails at the end.
    let mut failed = Vec::new();
    for input in &files {
        if let Err(e) = r.input(input, &mut so) {
            let u = Unreadable::new(&input.path, e.downcast_ref::<read::ReadError>(), &crate::opts::one_line(&e));
            eprintln!("lam compact: {}", u.error);
            if a.json {
                writeln!(so, "{}", serde_json::json!({ "unreadable": u }))?;
            }
            failed.push(u);
        }
    }
    let Runner { dump, mut archive, tot, .. } = r;
    if let Some(d) = dump {
        d.finish()?;
    }
    if let Some(st) = archive.as_mut() {
        st.flush().context("flushing the store")?;
    }
    enc.save()?;
    if !a.json {
        summary(&mut so, &a, t, &tot, enc.as_dyn())?;
    }
    if !failed.is_empty() {
        let named: Vec<String> = failed.iter().map(Unreadable::place).collect();
        bail!("{} of {} input(s) failed (errors above): {}", failed.len(), files.len(), named.join(", "));
    }
    if !tot.all_equal {
        bail!("online and batch residuals differ");
    }
    Ok(())
}

/// The operator settings `a` asks for at threshold `t`.
fn config(a: &CompactArgs, t: Threshold) -> Config {
    let mut cfg = Config::new(t).with_counter(&lam_trajectory::Cl100k).with_recall(a.recall).with_residual(a.residual).with_delta(!a.line_stubs);
    cfg.order = match a.order {
        OrderArg::L1L0 => Order::L1L0,
        OrderArg::L0L1 => Order::L0L1,
    };
    cfg.index = a.index;
    // --dump-embeddings writes every chunk's vector: the admissions carry them.
    cfg.diagnostics = a.dump_embeddings.is_some();
    cfg
}

/// The table's header line ([`print_row`] writes its rows).
fn print_header(so: &mut impl Write) -> Result<()> {
    writeln!(
        so,
        "{:<44} {:>5} {:>6} {:>9} {:>7} {:>7} {:>6} {:>6} {:>7} {:>16} {:>4} {:>8}",
        "session", "recs", "chunks", "tok_in", "gross%", "net%", "L1%", "L0%", "d_hat", "digest", "o=b", "p50us"
    )?;
    Ok(())
}

/// The run's state while it goes through the inputs.
struct Runner<'a> {
    a: &'a CompactArgs,
    cfg: Config,
    enc: &'a mut Enc,
    dump: Option<EmbeddingsWriter<std::io::BufWriter<std::fs::File>>>,
    archive: Option<arc_store::AnyStore>,
    /// L2's codec (`--codec`).
    codec: Option<lam_codec::BoxCodec>,
    names: SessionNames,
    tot: Totals,
}

impl Runner<'_> {
    /// Every trajectory of one input file.
    fn input(&mut self, input: &read::Input, so: &mut impl Write) -> Result<()> {
        let f = &input.path;
        let Some(trajs) = read::read_input(input)? else {
            eprintln!("note: skipping {} (not a trajectory)", f.display());
            return Ok(());
        };
        for mut traj in trajs {
            if let Some(own) = self.names.assign(&mut traj) {
                eprintln!("note: {}: session `{own}` is named `{}` in this run (an earlier input has a session named like it)", f.display(), traj.session);
            }
            self.trajectory(&traj, so).with_context(|| format!("{}: session {}", f.display(), traj.session))?;
        }
        Ok(())
    }

    fn trajectory(&mut self, traj: &Trajectory, so: &mut impl Write) -> Result<()> {
        let a = self.a;
        let claimed = self.claim(traj)?;
        let traj = claimed.as_ref().unwrap_or(traj);
        let st = self.archive.as_mut().map(|s| s.as_mut() as &mut dyn lam_core::ObsStore);
        let run = report::run_archived(self.cfg, self.enc.as_dyn(), traj, !a.no_tokens, st)?;
        account(&mut self.tot, &run);
        if let Some(d) = self.dump.as_mut() {
            for (rec, adm) in traj.records.iter().zip(&run.online) {
                let ranges: Vec<_> = adm.chunks.iter().map(|c| c.range.clone()).collect();
                d.observation(&rec.observation, &ranges, &adm.vectors)?;
            }
        }
        if let Some(dir) = &a.out {
            write_outputs(dir, traj, &run)?;
            if let Some(c) = self.codec.as_deref() {
                write_retained(dir, traj, &run, c, self.enc.as_dyn().info().dim, &mut self.tot)?;
            }
        }
        print_row(so, a.json, &run.report)
    }
}

impl Runner<'_> {
    /// The trajectory renamed to the store session it may claim (`arc_store::claim_session`),
    /// when that is not its own name; `None`: archive it under its name (or no store, or --append).
    fn claim(&mut self, traj: &Trajectory) -> Result<Option<Trajectory>> {
        let (Some(st), Some(first), false) = (self.archive.as_mut(), traj.records.first(), self.a.append) else {
            return Ok(None);
        };
        // The count the archive records for it (`run_archived` counts cl100k tokens).
        let tokens = u32::try_from(lam_trajectory::tokens::count(&first.observation)).unwrap_or(u32::MAX);
        let session = arc_store::claim_session(st.as_mut(), &traj.session, first, tokens)?;
        if session == traj.session {
            return Ok(None);
        }
        eprintln!("note: the store's session `{}` holds another run; this one is archived as `{session}` (--append to add to it)", traj.session);
        Ok(Some(Trajectory { session, ..traj.clone() }))
    }
}

fn summary(so: &mut impl Write, a: &CompactArgs, t: Threshold, tot: &Totals, enc: &mut dyn Encoder) -> Result<()> {
    let share = 100.0 * tot.tokens.removal();
    writeln!(
        so,
        "\n{} sessions, encoder {}, t={} (delta={:.4}), net removal {:.2}% of {} tokens, run digest {}, online==batch: {}",
        tot.sessions,
        enc.info().model_id,
        a.threshold,
        t.delta(),
        share,
        tot.tokens.tokens_in,
        tot.corpus.hex16(),
        if tot.all_equal { "all" } else { "NOT ALL" }
    )?;
    writeln!(
        so,
        "{} residual: {} of {} new lines hidden ({} tokens, {:.2}% of the input)",
        a.residual,
        tot.hidden_lines,
        tot.new_lines,
        tot.hidden_tokens,
        100.0 * tot.hidden_tokens as f64 / tot.tokens.tokens_in.max(1) as f64
    )?;
    if a.codec.is_some() {
        writeln!(
            so,
            "retained embeddings (L2): {} bytes as f32, {} bytes stored ({:.2}x)",
            tot.l2_raw,
            tot.l2_stored,
            tot.l2_raw as f64 / tot.l2_stored.max(1) as f64
        )?;
    }
    Ok(())
}

fn account(tot: &mut Totals, run: &Run) {
    for adm in &run.online {
        for c in adm.chunks.iter().filter(|c| c.decision.is_dropped()) {
            tot.corpus.push(tot.sessions, c.index);
        }
    }
    tot.sessions += 1;
    tot.tokens.absorb(&run.totals);
    tot.all_equal &= run.report.online_equals_batch;
    tot.new_lines += run.report.new_lines;
    tot.hidden_lines += run.report.new_lines_hidden;
    tot.hidden_tokens += run.report.new_tokens_hidden;
}

fn print_row(so: &mut impl Write, json: bool, r: &report::Report) -> Result<()> {
    if json {
        serde_json::to_writer(&mut *so, r)?;
        writeln!(so)?;
    } else {
        writeln!(
            so,
            "{:<44} {:>5} {:>6} {:>9} {:>7.2} {:>7.2} {:>6.2} {:>6.2} {:>7.4} {:>16} {:>4} {:>8.1}",
            truncate(&r.session, 44),
            r.records,
            r.chunks,
            r.tokens_in,
            100.0 * r.removal_gross,
            100.0 * r.removal_net,
            100.0 * r.removal_l1,
            100.0 * r.removal_l0,
            r.delta_hat,
            r.digest,
            if r.online_equals_batch { "yes" } else { "NO" },
            r.admit_us_p50
        )?;
    }
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { s.chars().take(n - 1).chain(std::iter::once('…')).collect() }
}

/// L2: the retained chunks' embeddings, as the operator kept them, through the codec.
fn write_retained(dir: &Path, traj: &Trajectory, run: &Run, c: &dyn lam_core::ByteCodec, dim: usize, tot: &mut Totals) -> Result<()> {
    let v = &run.retained;
    let mut stream = Vec::new();
    c.encode(v, lam_core::Shape { rows: v.len() / dim, dim }, &mut stream)?;
    let p = dir.join(format!("{}.retained.lamc", lam_core::file_stem(traj.session.as_str())));
    std::fs::write(&p, &stream).with_context(|| format!("writing {}", p.display()))?;
    tot.l2_raw += v.len() * 4;
    tot.l2_stored += stream.len();
    Ok(())
}

fn write_outputs(dir: &Path, traj: &Trajectory, run: &Run) -> Result<()> {
    let safe = lam_core::file_stem(traj.session.as_str());
    let mut res = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{safe}.residual.jsonl")))?);
    let mut dec = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{safe}.decisions.jsonl")))?);
    // Session chunk index -> the stubs' name for it, `§id#k` (k from 1).
    let mut names: Vec<String> = Vec::new();
    for (rec, adm) in traj.records.iter().zip(&run.online) {
        let r = lam_core::Record { index: rec.index, action: rec.action.clone(), observation: adm.residual.clone(), returncode: rec.returncode };
        serde_json::to_writer(&mut res, &JsonlRecord::from_record(&traj.session.0, &r))?;
        writeln!(res)?;
        for c in &adm.chunks {
            names.push(format!("§{}#{}", adm.id, c.ordinal + 1));
            serde_json::to_writer(&mut dec, &decision_line(adm, c, &names))?;
            writeln!(dec)?;
        }
    }
    Ok(())
}

/// One chunk's decision in the stubs' numbering: `id` as `§id`, `chunk` from
/// 1 within the observation, the representative as `§id#k`; `session_chunk`
/// is the index the deletion digest uses.
fn decision_line(adm: &lam_operator::Admission, c: &lam_operator::ChunkOutcome, names: &[String]) -> serde_json::Value {
    let (decision, rep, d) = match c.decision {
        lam_core::Decision::Retained => ("retained", None, None),
        lam_core::Decision::Dropped { representative, distance } => ("dropped", names.get(representative as usize).cloned(), Some(distance)),
    };
    serde_json::json!({"record": adm.record, "id": format!("§{}", adm.id), "chunk": c.ordinal + 1, "session_chunk": c.index,
        "start": c.range.start, "end": c.range.end, "decision": decision, "representative": rep, "distance": d})
}
