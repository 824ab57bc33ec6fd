use super::*;

/// cl100k counts memoised by content.
#[derive(Default)]
pub(super) struct TokMemo(pub(super) HashMap<(u64, usize), u32>);

impl TokMemo {
    pub(super) fn count(&mut self, b: &[u8]) -> u32 {
        if b.is_empty() {
            return 0;
        }
        *self.0.entry((xxh3_64(b), b.len())).or_insert_with(|| tokens::count(b) as u32)
    }
}

/// One trajectory, prepared once for every setting.
pub(super) struct Prep {
    pub(super) traj: Trajectory,
    pub(super) tok: Vec<u32>,
    pub(super) chunks: Vec<Vec<Range<usize>>>,
    pub(super) vecs: Vec<f32>,
    pub(super) chunk_tok: Vec<u32>,
    /// Witnessed evidence lines (None: no gold patch for this id).
    pub(super) evidence: Option<Vec<Vec<u8>>>,
    /// Candidate (not necessarily witnessed) evidence lines.
    pub(super) candidates: usize,
    pub(super) resolved: Option<bool>,
    pub(super) store: arc_store::MemStore,
    /// Per query: its full-index top-1 chunk and the chunk order by descending score.
    pub(super) queries: Vec<Vec<u32>>,
    /// Index of the command-line input (file or folder) it came from.
    pub(super) input: usize,
}

impl Prep {
    pub(super) fn n_chunks(&self) -> usize {
        self.chunk_tok.len()
    }
    pub(super) fn tok_in(&self) -> u64 {
        self.tok.iter().map(|&t| t as u64).sum()
    }
}

/// Look for `name` beside any ancestor of the inputs.
pub fn find_beside(inputs: &[PathBuf], name: &str) -> Option<PathBuf> {
    for i in inputs {
        let abs = std::fs::canonicalize(i).unwrap_or_else(|_| i.clone());
        let mut d = abs.as_path();
        for _ in 0..4 {
            let cand = d.join(name);
            if cand.exists() {
                return Some(cand);
            }
            d = d.parent()?;
        }
    }
    None
}

/// The input files in the order they are tried: all of them, or with
/// `--sample` ordered by the SHA-256 of the file name (deterministic; a larger
/// sample contains a smaller one).
pub(super) fn sample_order(mut files: Vec<read::Input>, n: Option<usize>) -> Vec<read::Input> {
    use sha2::{Digest, Sha256};
    if n.is_some() {
        let key = |p: &Path| -> Vec<u8> { Sha256::digest(p.file_name().map(|s| s.as_encoded_bytes()).unwrap_or_default()).to_vec() };
        files.sort_by_key(|f| key(&f.path));
    }
    files
}

/// Read the inputs; with `sample = Some(n)`, the first `n` files in sample
/// order that hold a trajectory with observations (metadata files found in a
/// folder do not count), then sorted by path. A file that cannot be read is
/// added to `failed` and the others are still read.
pub(super) fn read_sample(
    files: Vec<read::Input>,
    sample: Option<usize>,
    progress: &mut dyn Progress,
    failed: &mut Vec<FailedInput>,
) -> Result<Vec<(read::Input, Vec<Trajectory>)>> {
    progress.stage("read", sample.map_or(files.len(), |n| n.min(files.len())) as u64);
    let mut out = Vec::new();
    for f in sample_order(files, sample) {
        if sample.is_some_and(|n| out.len() >= n) {
            break;
        }
        let trajs: Vec<Trajectory> = match read::read_input(&f) {
            Ok(t) => t.unwrap_or_default().into_iter().filter(|t| !t.records.is_empty()).collect(),
            Err(e) => {
                failed.push(FailedInput::new(&f.path, Some(&e), &e.to_string()));
                Vec::new()
            }
        };
        // The bar counts files tried, or with a sample the trajectories taken.
        if sample.is_none() || !trajs.is_empty() {
            progress.inc(1);
        }
        if !trajs.is_empty() {
            out.push((f, trajs));
        }
    }
    if sample.is_some() {
        out.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    }
    Ok(out)
}

pub(super) fn prepare(
    traj: Trajectory,
    enc: &mut dyn Encoder,
    gold: Option<&GoldPatches>,
    outcomes: &mut evidence::Outcomes,
    memo: &mut TokMemo,
) -> Result<Prep> {
    let dim = enc.info().dim;
    let tok: Vec<u32> = traj.records.iter().map(|r| memo.count(&r.observation)).collect();
    let mut chunks = Vec::with_capacity(traj.records.len());
    for r in &traj.records {
        let mut c = Vec::new();
        enc.chunks(&r.observation, &mut c)?;
        chunks.push(c);
    }
    let flat: Vec<&[u8]> = traj.records.iter().zip(&chunks).flat_map(|(r, cs)| cs.iter().map(move |c| &r.observation[c.clone()])).collect();
    let mut vecs = vec![0.0f32; flat.len() * dim];
    for (t, o) in flat.chunks(64).zip(vecs.chunks_mut(64 * dim)) {
        enc.encode_batch(t, o)?;
    }
    let chunk_tok: Vec<u32> = flat.iter().map(|t| memo.count(t)).collect();
    let mut store = arc_store::MemStore::new();
    for (r, &t) in traj.records.iter().zip(&tok) {
        store.append(&traj.session, r, t)?;
    }
    let (evidence, candidates) = match gold.and_then(|g| g.get(&traj.session.0)) {
        Some(patch) => {
            let cand = evidence_lines(patch);
            let n = cand.len();
            let w: Vec<Vec<u8>> = cand.into_iter().map(String::into_bytes).filter(|l| traj.records.iter().any(|r| contains(&r.observation, l))).collect();
            (Some(w), n)
        }
        None => (None, 0),
    };
    let resolved = if evidence.is_some() { outcomes.outcome(&traj.source, &traj.session.0) } else { None };
    // Retrieval: distinct non-empty action texts as queries (first chunk of each).
    let mut seen = std::collections::HashSet::new();
    let actions: Vec<&[u8]> = traj.records.iter().map(|r| r.action.as_bytes()).filter(|a| !a.is_empty() && seen.insert(*a)).collect();
    let mut queries = Vec::new();
    let n = flat.len();
    if n > 0 && !actions.is_empty() {
        let mut qtexts = Vec::with_capacity(actions.len());
        for a in &actions {
            let mut c = Vec::new();
            enc.chunks(a, &mut c)?;
            if let Some(first) = c.first() {
                qtexts.push(&a[first.clone()]);
            }
        }
        let mut qv = vec![0.0f32; qtexts.len() * dim];
        for (t, o) in qtexts.chunks(64).zip(qv.chunks_mut(64 * dim)) {
            enc.encode_batch(t, o)?;
        }
        for q in qv.chunks_exact(dim) {
            let mut s: Vec<(f32, u32)> =
                vecs.chunks_exact(dim).enumerate().map(|(i, c)| (q.iter().zip(c).map(|(a, b)| a * b).sum::<f32>(), i as u32)).collect();
            s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            queries.push(s.into_iter().map(|x| x.1).collect());
        }
    }
    Ok(Prep { traj, tok, chunks, vecs, chunk_tok, evidence, candidates, resolved, store, queries, input: 0 })
}
