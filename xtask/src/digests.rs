//! `cargo xtask verify-digests`: the deletion set must be byte-identical
//! across encoder batch sizes, thread counts, backends and machines (LAM
//! Appendix A, D). Codec streams: of the retained embeddings, identical
//! across configurations on one machine (and equal to the golden file where
//! the vectors have its exact bits: float results are not bit-portable across
//! CPUs); of the stored fixture embeddings, equal to the golden file everywhere.

use anyhow::{Context, Result, bail};
use lam_core::{DeletionDigest, Encoder, Record, Threshold};
use lam_operator::{Config, Session};
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
    encoder: String,
    golden: PathBuf,
    compare_cpu: bool,
    batches: Vec<usize>,
    threads: Option<Vec<usize>>,
}

fn list(s: Option<&String>, what: &str) -> Result<Vec<usize>> {
    let s = s.with_context(|| format!("{what} N[,N...]"))?;
    s.split(',').map(|x| x.trim().parse::<usize>().ok().filter(|&n| n > 0).with_context(|| format!("{what}: `{x}` is not a positive integer"))).collect()
}

fn parse(root: &Path, args: &[String]) -> Result<Args> {
    let mut a = Args {
        corpus: lam_trajectory::corpus_dir().join("mini-swe-agent-gemini3pro-swebench-verified/trajs"),
        sample: DEFAULT_SAMPLE,
        records: None,
        bless: false,
        model: std::env::var_os("LAM_MODEL").map(PathBuf::from).unwrap_or_else(lam_encode::default_model_dir),
        encoder: "bert".into(),
        golden: root.join("xtask/golden"),
        compare_cpu: false,
        batches: BATCHES.to_vec(),
        threads: None,
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
                a.encoder = match args.get(i).map(String::as_str) {
                    Some(e @ ("bert" | "hashing" | "cuda" | "cuda-f32" | "cuda-bf16" | "cuda-f16")) => e.replace("cuda-f32", "cuda"),
                    other => bail!("--encoder bert|hashing|cuda|cuda-bf16|cuda-f16, got {other:?}"),
                };
            }
            "--golden" => {
                i += 1;
                a.golden = PathBuf::from(args.get(i).context("--golden DIR")?);
            }
            "--compare-cpu" => a.compare_cpu = true,
            "--batches" => {
                i += 1;
                a.batches = list(args.get(i), "--batches")?;
            }
            "--threads" => {
                i += 1;
                a.threads = Some(list(args.get(i), "--threads")?);
            }
            other => bail!(
                "verify-digests: unknown argument `{other}` (expected --corpus DIR, --sample [N], --records M, --model DIR, --encoder bert|hashing|cuda|cuda-bf16|cuda-f16, --golden DIR, --compare-cpu, --batches N,.., --threads N,.., --bless)"
            ),
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

/// The encoder `--encoder` names (`lam_encode::BACKEND_NAMES`), through the
/// one opener, with `batch` texts per pass (the CUDA encoder: `batch` x 256
/// padded tokens). A backend xtask was built without names its feature.
fn open_encoder(name: &str, model: &Path, batch: usize) -> Result<Box<dyn Encoder>> {
    let backend: lam_encode::Backend = name.parse()?;
    Ok(lam_encode::EncoderSpec { backend, model: Some(model.to_path_buf()), batch }.load()?)
}

/// The model id a golden file is named after: a GPU encoder's fp32 digests
/// must equal the CPU encoder's of the same weights, so `+cuda-...` is dropped.
fn golden_id(model_id: &str) -> &str {
    model_id.split("+cuda-").next().unwrap_or(model_id)
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

fn golden_path(dir: &Path, model_id: &str, corpus: &Path, n: usize, records: Option<usize>) -> PathBuf {
    let cname = corpus.components().filter_map(|c| c.as_os_str().to_str()).rfind(|s| *s != "trajs").unwrap_or("corpus").to_string();
    let r = records.map_or(String::new(), |m| format!("_r{m}"));
    dir.join(format!("{}__{}__n{n}{r}.json", lam_core::file_stem(golden_id(model_id)), lam_core::file_stem(&cname)))
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let a = parse(root, args)?;
    if a.encoder != "hashing" && !a.model.join("model.safetensors").is_file() {
        bail!("no encoder model at {}; install it with: bash scripts/install-model.sh (or pass --encoder hashing)", a.model.display());
    }
    let mut files = lam_trajectory::read::expand(std::slice::from_ref(&a.corpus)).with_context(|| format!("corpus {}", a.corpus.display()))?;
    files.sort();
    files.truncate(a.sample);
    if files.len() < a.sample {
        bail!("{} holds {} trajectories, fewer than --sample {}", a.corpus.display(), files.len(), a.sample);
    }
    let enc = open_encoder(&a.encoder, &a.model, a.batches.first().copied().unwrap_or(32))?;
    let info = enc.info();
    let (prepared, n_chunks, n_tokens) = prepare(&a, &files, enc.as_ref())?;
    let threads = thread_counts(&a);
    println!(
        "verify-digests: {} ({} trajectories, {n_chunks} chunks, {n_tokens} encoder tokens), encoder {}, batches {:?}, threads {threads:?}",
        a.corpus.display(),
        prepared.len(),
        info.model_id,
        a.batches
    );
    let m = measure(&a, &prepared, &threads, info.dim)?;
    check(root, &a, &files, &info, &prepared, &m)
}

/// Every trajectory's records (cut to `--records`) and chunks, with the
/// chunk and encoder-token counts.
fn prepare(a: &Args, files: &[PathBuf], enc: &dyn Encoder) -> Result<(Vec<Prepared>, usize, usize)> {
    let mut prepared = Vec::new();
    let (mut n_chunks, mut n_tokens) = (0, 0);
    for f in files {
        for mut t in lam_trajectory::read::read_path(f)? {
            if let Some(m) = a.records {
                t.records.truncate(m);
            }
            let mut chunks = Vec::new();
            for r in &t.records {
                let mut c = Vec::new();
                enc.chunks(&r.observation, &mut c)?;
                let mut toks = Vec::new();
                enc.token_spans(&r.observation, &mut toks)?;
                n_tokens += toks.len();
                n_chunks += c.len();
                chunks.push(c);
            }
            prepared.push(Prepared { records: t.records, chunks });
        }
    }
    Ok((prepared, n_chunks, n_tokens))
}

/// Thread counts to run with: `--threads`, else 1, 2 and all (a GPU encoder: all only).
fn thread_counts(a: &Args) -> Vec<usize> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Host threads only tokenise for a GPU encoder: one configuration is enough.
    let mut threads = a.threads.clone().unwrap_or_else(|| if a.encoder.starts_with("cuda") { vec![all] } else { vec![1, 2, all] });
    threads.sort_unstable();
    threads.dedup();
    threads
}

/// What every (threads, batch) configuration gave.
struct Measured {
    rows: Vec<Row>,
    /// The last configuration's vectors (for `--compare-cpu`).
    vectors_of_last: Vec<Vec<f32>>,
    /// Per threshold, every configuration's codec stream digests.
    streams: BTreeMap<String, Vec<(String, String)>>,
    /// Per threshold, the digest of the retained vectors' bits in every configuration.
    bits: BTreeMap<String, Vec<String>>,
}

/// Encode the sample in every configuration and decide it at every threshold.
fn measure(a: &Args, prepared: &[Prepared], threads: &[usize], dim: usize) -> Result<Measured> {
    let mut m = Measured { rows: Vec::new(), vectors_of_last: Vec::new(), streams: BTreeMap::new(), bits: BTreeMap::new() };
    for &th in threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(th).build()?;
        for &batch in &a.batches {
            let mut enc = open_encoder(&a.encoder, &a.model, batch)?;
            let t0 = std::time::Instant::now();
            // Encode every chunk of a trajectory in one call: the encoder cuts it into batches of `batch`.
            let vectors: Vec<Vec<f32>> = pool.install(|| -> Result<Vec<Vec<f32>>> {
                let mut out = Vec::new();
                for p in prepared {
                    let texts: Vec<&[u8]> = p.records.iter().zip(&p.chunks).flat_map(|(r, cs)| cs.iter().map(|c| &r.observation[c.clone()])).collect();
                    let mut v = vec![0f32; texts.len() * dim];
                    enc.encode_batch(&texts, &mut v)?;
                    out.push(v);
                }
                Ok(out)
            })?;
            let secs = t0.elapsed().as_secs_f64();
            for &t in &THRESHOLDS {
                let (digest, margin, retained) = decide_all(prepared, &vectors, t, dim)?;
                let backend = if a.encoder.starts_with("cuda") { a.encoder.clone() } else { "cpu".into() };
                m.rows.push(Row { backend, batch, threads: th, t, digest: digest.hex16(), min_margin: margin, dropped: digest.len(), secs });
                for (name, d) in crate::codecs::stream_digests(&retained, dim)? {
                    m.streams.entry(format!("{t}")).or_default().push((name, d));
                }
                m.bits.entry(format!("{t}")).or_default().push(crate::codecs::f32_digest(&retained));
            }
            m.vectors_of_last = vectors;
        }
    }
    Ok(m)
}

/// Every trajectory admitted at threshold `t` from its vectors: the
/// deletion digest, the smallest margin and the retained vectors.
fn decide_all(prepared: &[Prepared], vectors: &[Vec<f32>], t: f64, dim: usize) -> Result<(DeletionDigest, Option<f64>, Vec<f32>)> {
    let th = Threshold::from_cosine(t)?;
    let mut digest = DeletionDigest::new();
    let mut margin: Option<f64> = None;
    let mut retained: Vec<f32> = Vec::new();
    for (si, (p, v)) in prepared.iter().zip(vectors).enumerate() {
        let mut s = Session::new(Config::new(th), dim)?;
        let mut at = 0;
        for (r, cs) in p.records.iter().zip(&p.chunks) {
            let n = cs.len() * dim;
            let adm = s.admit_embedded(r, cs, &v[at..at + n])?;
            for (c, row) in adm.chunks.iter().zip(v[at..at + n].chunks_exact(dim)) {
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
    Ok((digest, margin, retained))
}

/// Every configuration must agree with the first, and with the golden
/// file; prints the table and the codec checks, and blesses with `--bless`.
fn check(root: &Path, a: &Args, files: &[PathBuf], info: &lam_core::EncoderInfo, prepared: &[Prepared], m: &Measured) -> Result<()> {
    let (model_id, dim) = (info.model_id.as_str(), info.dim);
    // Only the fp32 paths must reproduce the golden digests; 16-bit ones are reported.
    let strict = !a.encoder.ends_with("bf16") && !a.encoder.ends_with("f16");
    let mut reference: BTreeMap<String, String> = BTreeMap::new();
    for r in &m.rows {
        reference.entry(format!("{}", r.t)).or_insert_with(|| r.digest.clone());
    }
    let mut codec_ref: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut codec_ok = true;
    for (t, list) in &m.streams {
        for (name, d) in list {
            let e = codec_ref.entry(t.clone()).or_default().entry(name.clone()).or_insert_with(|| d.clone());
            codec_ok &= e == d;
        }
    }
    let gpath = golden_path(&a.golden, model_id, &a.corpus, a.sample, a.records);
    let golden = read_golden(&gpath)?;
    let rows_ok = print_rows(&m.rows, &reference, golden.as_ref(), a.bless || !strict);
    let mut ok = codec_ok && rows_ok;
    for line in crate::codecs::backend_lines() {
        println!("{line}");
    }
    let fixture = crate::codecs::stream_digests(&crate::codecs::read_fixture(root)?, crate::codecs::FIXTURE_DIM)?;
    let fpath = a.golden.join(format!("codec-fixture__{}.json", crate::codecs::FIXTURE.trim_end_matches(".f32")));
    let fgolden = read_golden(&fpath)?;
    ok &= print_fixture_streams(fgolden.as_ref(), &fixture) || a.bless;
    let retained_bits: BTreeMap<String, String> = m.bits.iter().map(|(t, v)| (t.clone(), v[0].clone())).collect();
    codec_ok &= m.bits.values().all(|v| v.iter().all(|d| *d == v[0]));
    ok &= print_retained_streams(golden.as_ref(), &codec_ref, &retained_bits) || a.bless || !strict;
    if !codec_ok {
        println!("codec streams (or the retained vectors' bits) differ between configurations");
    }
    if a.compare_cpu {
        compare_with_cpu(a, prepared, &m.vectors_of_last, dim)?;
    }
    if a.bless {
        let v = serde_json::json!({
            "encoder": model_id,
            "corpus": a.corpus.file_name().and_then(|s| s.to_str()).unwrap_or(""),
            "files": files.iter().map(|f| f.file_name().and_then(|s| s.to_str()).unwrap_or("").to_string()).collect::<Vec<_>>(),
            "records_per_trajectory": a.records,
            "digests": reference,
            "codec": codec_ref,
            "retained_f32": retained_bits,
        });
        let f = serde_json::json!({ "fixture": crate::codecs::FIXTURE, "dim": crate::codecs::FIXTURE_DIM, "codec": fixture.iter().cloned().collect::<BTreeMap<String, String>>() });
        std::fs::write(&fpath, serde_json::to_string_pretty(&f)? + "\n")?;
        std::fs::create_dir_all(gpath.parent().expect("has parent"))?;
        std::fs::write(&gpath, serde_json::to_string_pretty(&v)? + "\n")?;
        println!("blessed {}", gpath.display());
    } else if golden.is_none() {
        bail!("no golden file at {} (review the table, then run with --bless to write it)", gpath.display());
    }
    if !ok {
        bail!("digest mismatch");
    }
    println!("all digests match ({} configurations)", m.rows.len());
    Ok(())
}

/// The table of configurations; whether every row agrees with the first
/// of its threshold and (unless `lenient`: blessing, 16-bit) with the golden file.
fn print_rows(rows: &[Row], reference: &BTreeMap<String, String>, golden: Option<&serde_json::Value>, lenient: bool) -> bool {
    let golden_digest = |t: f64| golden.and_then(|g| g["digests"][format!("{t}")].as_str().map(str::to_string));
    println!(
        "{:<8} {:>5} {:>7} {:>5} {:>16} {:>7} {:>7} {:>10} {:>7}",
        "backend", "batch", "threads", "t", "digest", "dropped", "match", "min_margin", "enc_s"
    );
    let mut ok = true;
    for r in rows {
        let same = reference[&format!("{}", r.t)] == r.digest;
        let gold = golden_digest(r.t).is_none_or(|g| g == r.digest);
        ok &= same && (gold || lenient);
        let verdict = if same && gold {
            "yes"
        } else if same {
            "GOLDEN≠"
        } else {
            "NO"
        };
        let margin = r.min_margin.map_or("-".into(), |m| format!("{m:.2e}"));
        println!("{:<8} {:>5} {:>7} {:>5} {:>16} {:>7} {:>7} {:>10} {:>7.2}", r.backend, r.batch, r.threads, r.t, r.digest, r.dropped, verdict, margin, r.secs);
    }
    ok
}

/// A golden file's JSON, or `None` when there is none yet.
fn read_golden(path: &Path) -> Result<Option<serde_json::Value>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(serde_json::from_slice(&b).with_context(|| format!("{}: not JSON", path.display()))?)),
        Err(_) => Ok(None),
    }
}

/// The codec streams of the stored fixture embeddings against the golden
/// file: the same input bits on every machine, so they must match exactly.
fn print_fixture_streams(golden: Option<&serde_json::Value>, fixture: &[(String, String)]) -> bool {
    let mut ok = true;
    for (name, d) in fixture {
        let g = golden.and_then(|g| g["codec"][name].as_str());
        let gm = g == Some(d.as_str());
        ok &= gm;
        println!(
            "codec {name:<22} fixture stream {d} {}",
            if gm {
                "match"
            } else if g.is_none() {
                "NO GOLDEN"
            } else {
                "GOLDEN≠"
            }
        );
    }
    ok
}

/// The codec streams of the retained embeddings against the golden file.
/// The encoder's float results are deterministic on one machine but not
/// bit-portable across CPUs (its GEMM kernels follow the instruction set),
/// while the deletion digests are (decision margins). So the streams are
/// compared only where the retained vectors have the golden file's exact
/// bits; elsewhere the fixture streams carry the codec check.
fn print_retained_streams(golden: Option<&serde_json::Value>, codec_ref: &BTreeMap<String, BTreeMap<String, String>>, bits: &BTreeMap<String, String>) -> bool {
    let mut ok = true;
    for (t, m) in codec_ref {
        let g_bits = golden.and_then(|g| g["retained_f32"][t].as_str());
        let comparable = g_bits == bits.get(t).map(String::as_str);
        if !comparable {
            println!(
                "codec retained vectors t={t:<5} bits {} differ from the golden machine's ({}): the deletion digests above are what must agree; streams below are not compared with the golden file",
                bits.get(t).map_or("-", String::as_str),
                g_bits.unwrap_or("not recorded")
            );
        }
        for (name, d) in m {
            let g = golden.and_then(|g| g["codec"][t][name].as_str());
            let gm = !comparable || g.is_none_or(|g| g == d);
            ok &= gm;
            let verdict = if !comparable {
                "not compared"
            } else if gm {
                "match"
            } else {
                "GOLDEN≠"
            };
            println!("codec {name:<22} t={t:<5} stream {d} {verdict}");
        }
    }
    ok
}

/// Decisions of every chunk of the sample at threshold `t` from `vectors`,
/// the digest, and the smallest decision margin.
fn decide(prepared: &[Prepared], vectors: &[Vec<f32>], t: f64, dim: usize) -> Result<(DeletionDigest, Vec<lam_core::Decision>, Option<f64>)> {
    let th = Threshold::from_cosine(t)?;
    let mut digest = DeletionDigest::new();
    let mut all = Vec::new();
    let mut margin: Option<f64> = None;
    for (si, (p, v)) in prepared.iter().zip(vectors).enumerate() {
        let mut s = Session::new(Config::new(th), dim)?;
        let mut at = 0;
        for (r, cs) in p.records.iter().zip(&p.chunks) {
            let n = cs.len() * dim;
            let adm = s.admit_embedded(r, cs, &v[at..at + n])?;
            for c in &adm.chunks {
                if c.decision.is_dropped() {
                    digest.push(si as u32, c.index);
                }
                all.push(c.decision);
            }
            at += n;
        }
        if let Some(m) = s.l1_stats().min_margin {
            margin = Some(margin.map_or(m, |x: f64| x.min(m)));
        }
    }
    Ok((digest, all, margin))
}

/// `--compare-cpu`: the CPU encoder on the same chunks and weights beside
/// the encoder under test: embedding agreement (worst cosine, max abs), and
/// per threshold both digests, whether they are equal, and every decision
/// that flips with its margin `|cos - t|` on the side that dropped it.
fn compare_with_cpu(a: &Args, prepared: &[Prepared], vectors: &[Vec<f32>], dim: usize) -> Result<()> {
    let mut cpu = open_encoder("bert", &a.model, 32)?;
    let mut cpu_vectors = Vec::new();
    let (mut worst_cos, mut max_abs) = (1.0f64, 0.0f32);
    for (p, g) in prepared.iter().zip(vectors) {
        let texts: Vec<&[u8]> = p.records.iter().zip(&p.chunks).flat_map(|(r, cs)| cs.iter().map(|c| &r.observation[c.clone()])).collect();
        let mut v = vec![0f32; texts.len() * dim];
        cpu.encode_batch(&texts, &mut v)?;
        for (x, y) in v.chunks_exact(dim).zip(g.chunks_exact(dim)) {
            let cos: f64 = x.iter().zip(y).map(|(p, q)| f64::from(*p) * f64::from(*q)).sum();
            worst_cos = worst_cos.min(cos);
            max_abs = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(max_abs, f32::max);
        }
        cpu_vectors.push(v);
    }
    println!("compare {} with cpu (same weights): worst cosine {worst_cos:.9}, max abs {max_abs:e}", a.encoder);
    for &t in &THRESHOLDS {
        let (dc, cd, mc) = decide(prepared, &cpu_vectors, t, dim)?;
        let (dg, gd, mg) = decide(prepared, vectors, t, dim)?;
        let flips: Vec<(usize, &lam_core::Decision, &lam_core::Decision)> =
            cd.iter().zip(&gd).enumerate().filter(|(_, (x, y))| x.is_dropped() != y.is_dropped()).map(|(i, (x, y))| (i, x, y)).collect();
        let fmt = |m: Option<f64>| m.map_or("-".to_string(), |m| format!("{m:.2e}"));
        println!(
            "compare t={t}: digest cpu {} {} {} ({}), flips {}, min margin cpu {} {} {}",
            dc.hex16(),
            a.encoder,
            dg.hex16(),
            if dc.hex16() == dg.hex16() { "equal" } else { "DIFFERENT" },
            flips.len(),
            fmt(mc),
            a.encoder,
            fmt(mg)
        );
        for (i, c, g) in flips.iter().take(20) {
            let margin = |d: &lam_core::Decision| match d {
                lam_core::Decision::Dropped { distance, .. } => Some((1.0 - f64::from(*distance).powi(2) / 2.0) - t),
                lam_core::Decision::Retained => None,
            };
            let (side, m) = if c.is_dropped() { ("cpu", margin(c)) } else { (a.encoder.as_str(), margin(g)) };
            println!("  flip: chunk {i} (sample order) dropped by {side} only, margin {}", fmt(m));
        }
    }
    Ok(())
}
