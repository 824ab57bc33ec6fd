//! The `lam` command.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use lam::operator::{Config, IndexChoice, Order};
use lam::read::{self, JsonlRecord};
use lam::report;
use lam_core::{DeletionDigest, Encoder, Threshold};
use lam_encode::{CachedEncoder, EmbeddingsWriter, HashingEncoder, PrecomputedEncoder};
use std::io::Write;
use std::path::PathBuf;

mod codec_cli;
mod costmodel_cli;
mod eval_cli;
mod view_cli;

#[derive(Parser)]
#[command(name = "lam", version, about = "Keep agent context small, fast and lossless (LAM + ARC).")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum OrderArg {
    #[value(name = "l1-l0")]
    L1L0,
    #[value(name = "l0-l1")]
    L0L1,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum EncoderArg {
    /// BERT-family sentence encoder on the CPU (default model: all-MiniLM-L6-v2).
    Bert,
    /// Model-free lexical hashing encoder (no weights needed; not the papers' encoder).
    Hashing,
    /// The BERT encoder's tokenisation and pooling with the transformer in ONNX Runtime (scripts/install-onnx.sh).
    #[cfg(feature = "ort")]
    Ort,
}

#[derive(clap::Args)]
struct EncoderOpts {
    /// Encoder backend.
    #[arg(long, value_enum, default_value = "bert")]
    encoder: EncoderArg,
    /// Model directory (sentence-transformers layout); default $LAM_MODEL or $LAM_HOME/models/all-MiniLM-L6-v2.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Texts per encoder forward pass.
    #[arg(long, default_value_t = 32)]
    batch: usize,
}

fn make_encoder(o: &EncoderOpts) -> Result<Box<dyn Encoder>> {
    Ok(match o.encoder {
        EncoderArg::Hashing => Box::new(HashingEncoder::default()),
        EncoderArg::Bert => {
            let dir = o.model.clone().unwrap_or_else(lam_encode::default_model_dir);
            if !dir.join("model.safetensors").is_file() {
                bail!(
                    "no encoder model at {}\ninstall the default model with:\n    {}\nor pass --model DIR (a sentence-transformers directory), or --encoder hashing",
                    dir.display(),
                    lam_encode::INSTALL_HINT
                );
            }
            let mut e = lam_encode::BertEncoder::load(&dir)?;
            e.set_batch_size(o.batch);
            Box::new(e)
        }
        #[cfg(feature = "ort")]
        EncoderArg::Ort => {
            // Errors name the missing graph or library and scripts/install-onnx.sh.
            let dir = o.model.clone().unwrap_or_else(lam_encode::default_model_dir);
            let mut e = lam_encode::OrtEncoder::load(&dir)?;
            e.set_batch_size(o.batch);
            Box::new(e)
        }
    })
}

#[derive(Subcommand)]
enum Cmd {
    /// Render the bounded view a model would see of a trajectory (ARC, or a baseline policy).
    View(view_cli::ViewArgs),
    /// Write an archived observation's exact bytes (or one part) to standard output.
    Recall(view_cli::RecallArgs),
    /// Cost models of the LAM and ARC papers: phi, schedules, roofline, cost classes, paper checks, calibration.
    Costmodel(costmodel_cli::CostmodelArgs),
    /// Compress or decompress raw float32 embeddings with lam-codec (szp, f16, int8, binary).
    Codec(codec_cli::CodecArgs),
    /// The papers' measurements over trajectory corpora (removal, bound, evidence, retrieval, baselines, plots).
    Eval(eval_cli::EvalArgs),
    /// Embed JSON strings (one per line on stdin) into unit vectors (one JSON array per line on stdout).
    Embed {
        #[command(flatten)]
        enc: EncoderOpts,
        /// Print the model id, dimension, pooling and max_seq_length as JSON and exit.
        #[arg(long)]
        info: bool,
    },
    /// Run the LAM admission test (L1 then L0) over trajectories, online and batch.
    Compact {
        /// Trajectory files or folders (mini-swe-agent, SWE-agent, OpenAI chat, lam JSONL; .gz ok).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Merge threshold t (cosine); delta = sqrt(2 - 2t).
        #[arg(long, default_value_t = 0.95)]
        threshold: f64,
        /// Layer order.
        #[arg(long, value_enum, default_value = "l1-l0")]
        order: OrderArg,
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
        #[arg(long, default_value = "default")]
        index: String,
        /// Embedding cache (lam-embeddings/1 chunk lines), default $LAM_HOME/cache/MODEL.lamemb.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Do not read or write the embedding cache.
        #[arg(long)]
        no_cache: bool,
        /// Skip cl100k_base token accounting (faster).
        #[arg(long)]
        no_tokens: bool,
        /// L2: store each session's retained embeddings through this codec in `--out DIR`
        /// (`SESSION.retained.lamc`, docs/codec-format.md): szp (fixed, rel 1e-3), szp-plain, f16, int8, binary.
        #[arg(long, requires = "out")]
        codec: Option<String>,
        /// Archive every observation into this store first (a FileStore directory, or
        /// `postgres://...` where built in), so every stub's `_recall §id` can be answered
        /// with `lam recall --store STORE §id`.
        #[arg(long)]
        store: Option<String>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Embed { enc, info } => embed(&enc, info)?,
        Cmd::Costmodel(a) => costmodel_cli::run(a)?,
        Cmd::Codec(a) => codec_cli::run(a)?,
        Cmd::Eval(a) => eval_cli::run(a)?,
        Cmd::View(a) => view_cli::view(a)?,
        Cmd::Recall(a) => view_cli::recall(a)?,
        Cmd::Compact { paths, threshold, order, json, out, enc: enc_opts, embeddings, dump_embeddings, index, cache, no_cache, no_tokens, store, codec } => {
            let t = Threshold::from_cosine(threshold)?;
            let mut cfg = Config::new(t);
            cfg.order = match order {
                OrderArg::L1L0 => Order::L1L0,
                OrderArg::L0L1 => Order::L0L1,
            };
            cfg.index = index.parse::<IndexChoice>()?;
            // Online and batch forms share one memo, persisted between runs:
            // each chunk is encoded once.
            let mut cache_path: Option<PathBuf> = None;
            let mut enc: Enc = match &embeddings {
                Some(p) => Enc::Pre(PrecomputedEncoder::open(p)?),
                None => {
                    let inner = make_encoder(&enc_opts)?;
                    if no_cache || enc_opts.encoder == EncoderArg::Hashing {
                        Enc::Cached(CachedEncoder::new(inner))
                    } else {
                        let p = cache.clone().unwrap_or_else(|| {
                            let id: String = inner.info().model_id.chars().map(|c| if c.is_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
                            lam_encode::lam_home().join("cache").join(format!("{id}.lamemb"))
                        });
                        let c = CachedEncoder::with_file(inner, &p);
                        cache_path = Some(p);
                        Enc::Cached(c)
                    }
                }
            };
            let mut dump = match &dump_embeddings {
                Some(p) => Some(EmbeddingsWriter::new(
                    std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?),
                    &enc.as_dyn().info(),
                )?),
                None => None,
            };
            if let Some(d) = &out {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
            let codec = match codec.as_deref() {
                None => None,
                Some("szp") => Some(lam_codec::Codec::Szp { mode: lam_codec::SzpMode::Fixed, bound: lam_codec::Bound::Rel(1e-3) }),
                Some("szp-plain") => Some(lam_codec::Codec::Szp { mode: lam_codec::SzpMode::Plain, bound: lam_codec::Bound::Rel(1e-3) }),
                Some("f16") => Some(lam_codec::Codec::F16),
                Some("int8") => Some(lam_codec::Codec::Int8PerVector),
                Some("binary") => Some(lam_codec::Codec::SignBinary),
                Some(other) => bail!("--codec: expected szp, szp-plain, f16, int8 or binary, got `{other}`"),
            };
            let (mut l2_raw, mut l2_stored) = (0usize, 0usize);
            let mut archive = match &store {
                Some(s) => {
                    let spec = arc_store::StoreSpec::parse(s)?;
                    Some(arc_store::open(&spec, arc_store::Access::ReadWrite).with_context(|| format!("opening store {}", spec.display()))?)
                }
                None => None,
            };
            let files = read::expand_inputs(&paths)?;
            if files.is_empty() {
                bail!("no trajectory files under {:?}", paths);
            }
            let stdout = std::io::stdout();
            let mut so = stdout.lock();
            if !json {
                writeln!(so, "{:<44} {:>5} {:>6} {:>9} {:>7} {:>7} {:>6} {:>6} {:>7} {:>16} {:>4} {:>8}", "session", "recs", "chunks", "tok_in", "gross%", "net%", "L1%", "L0%", "d_hat", "digest", "o=b", "p50us")?;
            }
            let mut corpus = DeletionDigest::new();
            let mut n_sessions = 0u32;
            let (mut all_in, mut all_out, mut all_eq) = (0usize, 0usize, true);
            for input in &files {
                let f = &input.path;
                let Some(trajs) = read::read_input(input)? else {
                    eprintln!("note: skipping {} (not a trajectory)", f.display());
                    continue;
                };
                for traj in trajs {
                    let run = match archive.as_mut() {
                        Some(st) => report::run_archived(cfg, enc.as_dyn(), &traj, !no_tokens, Some(st.as_mut() as &mut dyn lam_core::ObsStore)),
                        None => report::run(cfg, enc.as_dyn(), &traj, !no_tokens),
                    }
                    .with_context(|| format!("{}: session {}", f.display(), traj.session))?;
                    let r = &run.report;
                    for a in &run.online {
                        for c in &a.chunks {
                            if c.decision.is_dropped() {
                                corpus.push(n_sessions, c.index);
                            }
                        }
                    }
                    n_sessions += 1;
                    all_in += r.tokens_in;
                    all_out += r.tokens_out;
                    all_eq &= r.online_equals_batch;
                    if let Some(d) = dump.as_mut() {
                        for (rec, a) in traj.records.iter().zip(&run.online) {
                            let ranges: Vec<_> = a.chunks.iter().map(|c| c.range.clone()).collect();
                            d.observation(&rec.observation, &ranges, &a.vectors)?;
                        }
                    }
                    if let Some(dir) = &out {
                        write_outputs(dir, &traj, &run)?;
                        if let Some(c) = &codec {
                            // L2: the retained chunks' embeddings, as the operator kept them, through the codec.
                            let dim = enc.as_dyn().info().dim;
                            let v = &run.retained;
                            let mut stream = Vec::new();
                            c.encode_to(v, v.len() / dim, dim, &mut stream)?;
                            let safe: String = traj.session.0.chars().map(|c| if c.is_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
                            let p = dir.join(format!("{safe}.retained.lamc"));
                            std::fs::write(&p, &stream).with_context(|| format!("writing {}", p.display()))?;
                            l2_raw += v.len() * 4;
                            l2_stored += stream.len();
                        }
                    }
                    if json {
                        serde_json::to_writer(&mut so, r)?;
                        writeln!(so)?;
                    } else {
                        writeln!(
                            so,
                            "{:<44} {:>5} {:>6} {:>9} {:>7.2} {:>7.2} {:>6.2} {:>6.2} {:>7.4} {:>16} {:>4} {:>8.1}",
                            truncate(&r.session, 44), r.records, r.chunks, r.tokens_in, 100.0 * r.removal_gross, 100.0 * r.removal_net,
                            100.0 * r.removal_l1, 100.0 * r.removal_l0, r.delta_hat, r.digest, if r.online_equals_batch { "yes" } else { "NO" }, r.admit_us_p50
                        )?;
                    }
                }
            }
            if let Some(d) = dump {
                d.finish()?;
            }
            if let Some(st) = archive.as_mut() {
                st.flush().context("flushing the store")?;
            }
            if let (Some(p), Enc::Cached(c)) = (&cache_path, &mut enc) {
                c.save(p).with_context(|| format!("writing embedding cache {}", p.display()))?;
            }
            if !json {
                let share = if all_in == 0 { 0.0 } else { 100.0 * (all_in as f64 - all_out as f64) / all_in as f64 };
                writeln!(
                    so,
                    "\n{} sessions, encoder {}, t={} (delta={:.4}), net removal {:.2}% of {} tokens, run digest {}, online==batch: {}",
                    n_sessions, enc.as_dyn().info().model_id, threshold, t.delta(), share, all_in, corpus.hex16(), if all_eq { "all" } else { "NOT ALL" }
                )?;
            }
            if codec.is_some() && !json {
                writeln!(so, "retained embeddings (L2): {l2_raw} bytes as f32, {l2_stored} bytes stored ({:.2}x)", l2_raw as f64 / l2_stored.max(1) as f64)?;
            }
            if !all_eq {
                bail!("online and batch residuals differ");
            }
        }
    }
    Ok(())
}

enum Enc {
    Pre(PrecomputedEncoder),
    Cached(CachedEncoder<Box<dyn Encoder>>),
}

impl Enc {
    fn as_dyn(&mut self) -> &mut dyn Encoder {
        match self {
            Enc::Pre(p) => p,
            Enc::Cached(c) => c,
        }
    }
}

fn embed(o: &EncoderOpts, info: bool) -> Result<()> {
    let mut enc = make_encoder(o)?;
    let i = enc.info();
    if info {
        let (pooling, max_seq) = match o.encoder {
            EncoderArg::Bert => ("mean-or-cls (from 1_Pooling/config.json)", i.max_tokens + 2),
            EncoderArg::Hashing => ("signed feature hashing", i.max_tokens),
            #[cfg(feature = "ort")]
            EncoderArg::Ort => ("mean-or-cls (from 1_Pooling/config.json)", i.max_tokens + 2),
        };
        let pooling = if o.encoder == EncoderArg::Bert {
            let dir = o.model.clone().unwrap_or_else(lam_encode::default_model_dir);
            match lam_encode::BertEncoder::load(&dir)?.pooling() {
                lam_encode::Pooling::Mean => "mean",
                lam_encode::Pooling::Cls => "cls",
            }
        } else {
            pooling
        };
        println!("{}", serde_json::json!({"model_id": i.model_id, "dim": i.dim, "pooling": pooling, "max_seq_length": max_seq}));
        return Ok(());
    }
    let stdin = std::io::stdin();
    let mut texts: Vec<String> = Vec::new();
    for (n, line) in std::io::BufRead::lines(stdin.lock()).enumerate() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let t: String = serde_json::from_str(&line).with_context(|| format!("stdin line {}: expected a JSON string", n + 1))?;
        texts.push(t);
    }
    let bytes: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
    let mut out = vec![0.0f32; bytes.len() * i.dim];
    enc.encode_batch(&bytes, &mut out)?;
    let so = std::io::stdout();
    let mut so = std::io::BufWriter::new(so.lock());
    for row in out.chunks_exact(i.dim) {
        serde_json::to_writer(&mut so, row)?;
        writeln!(so)?;
    }
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { s.chars().take(n - 1).chain(std::iter::once('…')).collect() }
}

fn write_outputs(dir: &std::path::Path, traj: &read::Trajectory, run: &report::Run) -> Result<()> {
    let safe: String = traj.session.0.chars().map(|c| if c.is_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    let mut res = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{safe}.residual.jsonl")))?);
    let mut dec = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{safe}.decisions.jsonl")))?);
    for (rec, a) in traj.records.iter().zip(&run.online) {
        let r = lam_core::Record { index: rec.index, action: rec.action.clone(), observation: a.residual.clone(), returncode: rec.returncode };
        serde_json::to_writer(&mut res, &JsonlRecord::from_record(&traj.session.0, &r))?;
        writeln!(res)?;
        for c in &a.chunks {
            let (decision, rep, d) = match c.decision {
                lam_core::Decision::Retained => ("retained", None, None),
                lam_core::Decision::Dropped { representative, distance } => ("dropped", Some(representative), Some(distance)),
            };
            serde_json::to_writer(
                &mut dec,
                &serde_json::json!({"record": a.record, "id": a.id, "chunk": c.index, "ordinal": c.ordinal, "start": c.range.start, "end": c.range.end, "decision": decision, "representative": rep, "distance": d}),
            )?;
            writeln!(dec)?;
        }
    }
    Ok(())
}
