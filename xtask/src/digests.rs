//! `cargo xtask verify-digests`: the deletion set (and the codec streams of
//! the retained embeddings) must be byte-identical across encoder batch
//! sizes, thread counts, backends and machines (LAM Appendix A, D).

use anyhow::{Context, Result, bail};
use lam_operator::{Config, Session};
use lam_core::{DeletionDigest, Encoder, Record, Threshold};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

const THRESHOLDS: [f64; 2] = [0.99, 0.95];
const BATCHES: [usize; 6] = [8, 16, 32, 64, 128, 256];
/// `--sample` without a number: the fast sample `.ci/run` uses (the first
/// `FAST_RECORDS` records of the first `FAST_SAMPLE` trajectories).
const FAST_SAMPLE: usize = 2;
const FAST_RECORDS: usize = 10;
const DEFAULT_SAMPLE: usize = 6;

struct Args {
    corpus: PathBuf,
    sample: usize,
    records: Option<usize>,
    bless: bool,
    model: PathBuf,
    hashing: bool,
}

fn parse(_root: &Path, args: &[String]) -> Result<Args> {
    let mut a = Args {
        corpus: lam_trajectory::corpus_dir().join("mini-swe-agent-gemini3pro-swebench-verified/trajs"),
        sample: DEFAULT_SAMPLE,
        records: None,
        bless: false,
        model: std::env::var_os("LAM_MODEL").map(PathBuf::from).unwrap_or_else(lam_encode::default_model_dir),
        hashing: false,
    };
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--corpus" => {
                i += 1;
                a.corpus = PathBuf::from(args.get(i).context("--corpus DIR")?);
            }
            "--model" => {
                i += 1;
                a.model = PathBuf::from(args.get(i).context("--model DIR")?);
            }
            "--sample" => match args.get(i + 1).and_then(|s| s.parse().ok()) {
                Some(n) => {
                    a.sample = n;
                    i += 1;
                }
                None => {
                    a.sample = FAST_SAMPLE;
                    a.records = a.records.or(Some(FAST_RECORDS));
                }
            },
            "--records" => {
                i += 1;
                a.records = Some(args.get(i).and_then(|s| s.parse().ok()).context("--records M")?);
            }
            "--bless" => a.bless = true,
            "--encoder" => {
                i += 1;
                a.hashing = match args.get(i).map(String::as_str) {
                    Some("bert") => false,
                    Some("hashing") => true,
                    other => bail!("--encoder bert|hashing, got {other:?}"),
                };
            }
            other => bail!("verify-digests: unknown argument `{other}` (expected --corpus DIR, --sample [N], --records M, --model DIR, --encoder bert|hashing, --bless)"),
        }
        i += 1;
    }
    Ok(a)
}

/// One trajectory's records and chunks (chunking does not depend on batch or threads).
struct Prepared {
    records: Vec<Record>,
    chunks: Vec<Vec<Range<usize>>>,
}

enum Enc {
    Bert(Box<lam_encode::BertEncoder>),
    Hashing(lam_encode::HashingEncoder),
}

impl Enc {
    fn as_dyn(&mut self) -> &mut dyn Encoder {
        match self {
            Enc::Bert(b) => b.as_mut(),
            Enc::Hashing(h) => h,
        }
    }
}

struct Row {
    backend: String,
    batch: usize,
    threads: usize,
    t: f64,
    digest: String,
    min_margin: Option<f64>,
    dropped: usize,
    secs: f64,
}

fn golden_path(root: &Path, model_id: &str, corpus: &Path, n: usize, records: Option<usize>) -> PathBuf {
    let cname = corpus
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .filter(|s| *s != "trajs")
        .last()
        .unwrap_or("corpus")
        .to_string();
    let r = records.map_or(String::new(), |m| format!("_r{m}"));
    root.join("xtask/golden").join(format!("{}__{}__n{n}{r}.json", lam_core::file_stem(model_id), lam_core::file_stem(&cname)))
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let a = parse(root, args)?;
    if !a.hashing && !a.model.join("model.safetensors").is_file() {
        bail!("no encoder model at {}; install it with: bash scripts/install-model.sh (or pass --encoder hashing)", a.model.display());
    }
    let mut files = lam_trajectory::read::expand(std::slice::from_ref(&a.corpus)).with_context(|| format!("corpus {}", a.corpus.display()))?;
    files.sort();
    files.truncate(a.sample);
    if files.len() < a.sample {
        bail!("{} holds {} trajectories, fewer than --sample {}", a.corpus.display(), files.len(), a.sample);
    }
    let mut enc = if a.hashing { Enc::Hashing(lam_encode::HashingEncoder::default()) } else { Enc::Bert(Box::new(lam_encode::BertEncoder::load(&a.model)?)) };
    let info = enc.as_dyn().info();
    let mut prepared = Vec::new();
    let mut n_chunks = 0;
    let mut n_tokens = 0;
    for f in &files {
        for mut t in lam_trajectory::read::read_path(f)? {
            if let Some(m) = a.records {
                t.records.truncate(m);
            }
            let mut chunks = Vec::new();
            for r in &t.records {
                let mut c = Vec::new();
                enc.as_dyn().chunks(&r.observation, &mut c)?;
                let mut toks = Vec::new();
                enc.as_dyn().token_spans(&r.observation, &mut toks)?;
                n_tokens += toks.len();
                n_chunks += c.len();
                chunks.push(c);
            }
            prepared.push(Prepared { records: t.records, chunks });
        }
    }
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = vec![1, 2, all];
    threads.dedup();
    threads.sort_unstable();
    threads.dedup();
    println!(
        "verify-digests: {} ({} trajectories, {n_chunks} chunks, {n_tokens} encoder tokens), encoder {}, batches {BATCHES:?}, threads {threads:?}",
        a.corpus.display(),
        prepared.len(),
        info.model_id
    );

    let mut rows: Vec<Row> = Vec::new();
    let mut streams: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for &th in &threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(th).build()?;
        for &batch in &BATCHES {
            if let Enc::Bert(b) = &mut enc {
                b.set_batch_size(batch);
            }
            let t0 = std::time::Instant::now();
            // Encode every chunk of a trajectory in one call: the encoder cuts it into batches of `batch`.
            let vectors: Vec<Vec<f32>> = pool.install(|| -> Result<Vec<Vec<f32>>> {
                let mut out = Vec::new();
                for p in &prepared {
                    let texts: Vec<&[u8]> = p.records.iter().zip(&p.chunks).flat_map(|(r, cs)| cs.iter().map(|c| &r.observation[c.clone()])).collect();
                    let mut v = vec![0f32; texts.len() * info.dim];
                    enc.as_dyn().encode_batch(&texts, &mut v)?;
                    out.push(v);
                }
                Ok(out)
            })?;
            let secs = t0.elapsed().as_secs_f64();
            for &t in &THRESHOLDS {
                let th_ = Threshold::from_cosine(t)?;
                let mut digest = DeletionDigest::new();
                let mut margin: Option<f64> = None;
                let mut retained: Vec<f32> = Vec::new();
                for (si, (p, v)) in prepared.iter().zip(&vectors).enumerate() {
                    let mut s = Session::new(Config::new(th_), info.dim)?;
                    let mut at = 0;
                    for (r, cs) in p.records.iter().zip(&p.chunks) {
                        let n = cs.len() * info.dim;
                        let adm = s.admit_embedded(r, cs, &v[at..at + n])?;
                        for (c, row) in adm.chunks.iter().zip(v[at..at + n].chunks_exact(info.dim)) {
                            if c.decision.is_dropped() {
                                digest.push(si as u32, c.index);
                            } else {
                                retained.extend_from_slice(row);
                            }
                        }
                        at += n;
                    }
                    if let Some(m) = s.l1_stats().min_margin {
                        margin = Some(margin.map_or(m, |x: f64| x.min(m)));
                    }
                }
                rows.push(Row { backend: "cpu".into(), batch, threads: th, t, digest: digest.hex16(), min_margin: margin, dropped: digest.len(), secs });
                for (name, d) in crate::codecs::stream_digests(&retained, info.dim)? {
                    streams.entry(format!("{t}")).or_default().push((name, d));
                }
            }
        }
    }

    // Every configuration must agree with the first, and with the golden file.
    let mut reference: BTreeMap<String, String> = BTreeMap::new();
    for r in &rows {
        reference.entry(format!("{}", r.t)).or_insert_with(|| r.digest.clone());
    }
    let mut codec_ref: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut codec_ok = true;
    for (t, list) in &streams {
        for (name, d) in list {
            let e = codec_ref.entry(t.clone()).or_default().entry(name.clone()).or_insert_with(|| d.clone());
            codec_ok &= e == d;
        }
    }
    let gpath = golden_path(root, &info.model_id, &a.corpus, a.sample, a.records);
    let golden: Option<serde_json::Value> = match std::fs::read(&gpath) {
        Ok(b) => Some(serde_json::from_slice(&b).with_context(|| format!("{}: not JSON", gpath.display()))?),
        Err(_) => None,
    };
    let golden_digest = |t: f64| golden.as_ref().and_then(|g| g["digests"][format!("{t}")].as_str().map(str::to_string));

    println!("{:<8} {:>5} {:>7} {:>5} {:>16} {:>7} {:>7} {:>10} {:>7}", "backend", "batch", "threads", "t", "digest", "dropped", "match", "min_margin", "enc_s");
    let mut ok = codec_ok;
    for r in &rows {
        let same = reference[&format!("{}", r.t)] == r.digest;
        let gold = golden_digest(r.t).is_none_or(|g| g == r.digest);
        ok &= same && (gold || a.bless);
        println!(
            "{:<8} {:>5} {:>7} {:>5} {:>16} {:>7} {:>7} {:>10} {:>7.2}",
            r.backend,
            r.batch,
            r.threads,
            r.t,
            r.digest,
            r.dropped,
            if same && gold { "yes" } else if same { "GOLDEN≠" } else { "NO" },
            r.min_margin.map_or("-".into(), |m| format!("{m:.2e}")),
            r.secs
        );
    }
    for line in crate::codecs::backend_lines() {
        println!("{line}");
    }
    for (t, m) in &codec_ref {
        for (name, d) in m {
            let g = golden.as_ref().and_then(|g| g["codec"][t][name].as_str().map(str::to_string));
            let gm = g.as_deref().is_none_or(|g| g == d);
            ok &= gm || a.bless;
            println!("codec {name:<22} t={t:<5} stream {d} {}", if gm { "match" } else { "GOLDEN≠" });
        }
    }
    if !codec_ok {
        println!("codec streams differ between configurations");
    }
    if a.bless {
        let v = serde_json::json!({
            "encoder": info.model_id,
            "corpus": a.corpus.file_name().and_then(|s| s.to_str()).unwrap_or(""),
            "files": files.iter().map(|f| f.file_name().and_then(|s| s.to_str()).unwrap_or("").to_string()).collect::<Vec<_>>(),
            "records_per_trajectory": a.records,
            "digests": reference,
            "codec": codec_ref,
        });
        std::fs::create_dir_all(gpath.parent().expect("has parent"))?;
        std::fs::write(&gpath, serde_json::to_string_pretty(&v)? + "\n")?;
        println!("blessed {}", gpath.display());
    } else if golden.is_none() {
        bail!("no golden file at {} (review the table, then run with --bless to write it)", gpath.display());
    }
    if !ok {
        bail!("digest mismatch");
    }
    println!("all digests match ({} configurations)", rows.len());
    Ok(())
}
