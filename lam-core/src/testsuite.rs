//! Conformance suites every implementation of a lam-core trait runs from its
//! own tests (feature `testsuite`). They panic with a message on violation.

use crate::{ByteCodec, CandidateIndex, Encoder, Rendered, Shape, TokenCounter, Turn, ViewPolicy, check_unit};

/// The shared corpus ([`crate::corpus_dir`]); tests that need it fail with
/// instructions instead of skipping silently.
pub fn corpus() -> std::path::PathBuf {
    let p = crate::corpus_dir();
    assert!(p.is_dir(), "corpus not found at {}: check out the repository beside `shared/` (as CI does) or set LAM_CORPUS", p.display());
    p
}

/// The session the project recorded itself: `examples/edit-session.jsonl`.
pub fn example() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/edit-session.jsonl")
}

/// One unit vector per seed (`crate::random_unit_vectors`, the seed stepped once first).
fn lcg_unit(seed: u64, dim: usize) -> Vec<f32> {
    let mut s = seed;
    crate::lcg_uniform(&mut s);
    crate::random_unit_vectors(1, dim, s)
}

/// Checks the [`CandidateIndex`] contract on `make(dim)` for a few dimensions:
/// candidates are ascending, unique, a subset of the inserted ids, an
/// exact copy of an inserted vector is always proposed, and the heap bytes
/// counted cover at least the ids held.
pub fn candidate_index<I: CandidateIndex>(make: impl Fn(usize) -> I) {
    for dim in [8usize, 64, 384] {
        let mut idx = make(dim);
        let mut out = vec![99];
        idx.candidates(&lcg_unit(1, dim), &mut out);
        assert!(out.is_empty(), "{}: empty index proposed {out:?}", idx.describe());
        assert_eq!(idx.len(), 0);
        let ids: Vec<u32> = (0..40).map(|i| i * 3 + 1).collect();
        let vecs: Vec<f32> = ids.iter().flat_map(|&i| lcg_unit(u64::from(i), dim)).collect();
        idx.insert_batch(&ids[..20], &vecs[..20 * dim]);
        idx.insert_batch(&ids[20..], &vecs[20 * dim..]);
        assert_eq!(idx.len(), ids.len());
        assert!(idx.heap_bytes() >= ids.len() * 4, "{}: {} heap bytes for {} ids", idx.describe(), idx.heap_bytes(), ids.len());
        for (k, &id) in ids.iter().enumerate() {
            idx.candidates(&vecs[k * dim..(k + 1) * dim], &mut out);
            assert!(out.windows(2).all(|w| w[0] < w[1]), "{}: not ascending/unique: {out:?}", idx.describe());
            assert!(out.iter().all(|c| ids.contains(c)), "{}: unknown id in {out:?}", idx.describe());
            assert!(out.contains(&id), "{}: exact copy of {id} not proposed (dim {dim})", idx.describe());
            visits_in_order(&idx, &vecs[k * dim..(k + 1) * dim], &out);
        }
    }
}

/// Checks that `visit_candidates` offers exactly `want` (what `candidates`
/// gave for `query`), in order, and stops right after the visitor breaks.
pub fn visits_in_order<I: CandidateIndex>(idx: &I, query: &[f32], want: &[u32]) {
    let mut scratch = Vec::new();
    for stop in [usize::MAX, 0, want.len() / 2] {
        let mut seen = Vec::new();
        idx.visit_candidates(query, &mut scratch, &mut |c| {
            seen.push(c);
            if seen.len() > stop { std::ops::ControlFlow::Break(()) } else { std::ops::ControlFlow::Continue(()) }
        });
        let n = want.len().min(stop.saturating_add(1));
        assert_eq!(seen, want[..n], "{}: visit_candidates (stop after {stop}) differs from candidates", idx.describe());
    }
}

/// The texts the encoder suites embed (code, a test log, non-ASCII, invalid
/// UTF-8, blanks), for encoders that must be prepared for them (precomputed files).
pub fn encoder_texts() -> Vec<&'static [u8]> {
    vec![
        b"fn main() { println!(\"hello\"); }\n",
        b"FAILED tests/test_stats.py::test_mean - AssertionError: 2 != 3",
        "unicode: \u{3b1}\u{3b2}\u{3b3} \u{1f600} caf\u{e9}".as_bytes(),
        b"caf\xe9 latin-1 \xff\xfe bytes",
        b"  x  ",
    ]
}

/// Checks the [`Encoder`] contract: token spans are ordered, disjoint and in
/// bounds; then [`encoder_embeddings`].
pub fn encoder<E: Encoder>(enc: &mut E) {
    let info = enc.info();
    assert!(info.dim > 0 && info.max_tokens > 0);
    let texts = encoder_texts();
    let mut spans = Vec::new();
    for t in &texts {
        enc.token_spans(t, &mut spans).expect("token_spans");
        let mut end = 0;
        for s in &spans {
            assert!(s.start >= end && s.start < s.end && s.end <= t.len(), "bad span {s:?} in {t:?}");
            end = s.end;
        }
        assert!(!spans.is_empty(), "no tokens in {t:?}");
    }
    encoder_embeddings(enc);
}

/// The embedding half of the [`Encoder`] contract, for every encoder
/// (those whose chunking is given, such as precomputed files, have no
/// tokenizer and run only this): embeddings of [`encoder_texts`] are unit,
/// deterministic and the same in a batch as alone; texts with invalid UTF-8
/// do not fail; an empty batch is fine and a wrong output length an error.
pub fn encoder_embeddings<E: Encoder>(enc: &mut E) {
    let texts = encoder_texts();
    let dim = enc.info().dim;
    assert!(dim > 0);
    let mut batch = vec![0.0f32; texts.len() * dim];
    enc.encode_batch(&texts, &mut batch).expect("encode_batch");
    for (i, t) in texts.iter().enumerate() {
        let row = &batch[i * dim..(i + 1) * dim];
        check_unit(row).unwrap_or_else(|e| panic!("row {i}: {e}"));
        let mut one = vec![0.0f32; dim];
        enc.encode_batch(&[t], &mut one).expect("encode one");
        // Padding and GEMM blocking may move the last bits; nothing more.
        let diff = row.iter().zip(&one).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(diff <= 1e-5, "row {i} differs between batch and single encoding by {diff}");
    }
    // The same call twice gives the same bits.
    let mut again = vec![0.0f32; texts.len() * dim];
    enc.encode_batch(&texts, &mut again).expect("encode_batch");
    assert!(batch.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "encoder is not deterministic");
    let mut empty: Vec<f32> = Vec::new();
    enc.encode_batch(&[], &mut empty).expect("empty batch");
    let mut short = vec![0.0f32; dim - 1];
    assert!(enc.encode_batch(&[texts[0]], &mut short).is_err(), "wrong output length accepted");
}

// ---- ObsStore ----

use crate::{ObsId, ObsStore, Record, SessionId, previews};

/// A session id.
pub fn sid(s: &str) -> SessionId {
    SessionId(s.to_string())
}

/// A record.
pub fn rec(index: u32, action: &str, obs: &[u8], rc: Option<i32>) -> Record {
    Record { index, action: action.to_string(), observation: obs.to_vec(), returncode: rc }
}

/// Two different observations of action `cat` whose ids share the first 8 hex
/// characters (found by a birthday search over decimal strings; deterministic).
pub fn colliding_pair() -> (Vec<u8>, Vec<u8>) {
    use std::collections::HashMap;
    let mut seen: HashMap<[u8; 4], u64> = HashMap::new();
    for i in 0u64.. {
        let obs = format!("needle {i}\n");
        let id = ObsId::of(b"cat", obs.as_bytes());
        let key: [u8; 4] = id.0[..4].try_into().unwrap();
        if let Some(j) = seen.insert(key, i) {
            return (format!("needle {j}\n").into_bytes(), obs.into_bytes());
        }
    }
    unreachable!()
}

/// Observations every suite stores: invalid UTF-8, empty, long, multibyte at the preview cut.
pub fn samples() -> Vec<(String, Vec<u8>, Option<i32>)> {
    let mut long = Vec::new();
    for i in 0..2000 {
        long.extend_from_slice(format!("line {i}: é ü ✓\n").as_bytes());
    }
    vec![
        ("ls -la".into(), b"total 0\ndrwxr-xr-x  2 a a 40 .\n".to_vec(), Some(0)),
        ("cat bin".into(), vec![0xff, 0xfe, 0x00, b'a', 0xc3, 0x28, 0x80, 0xed, 0xa0, 0x80], Some(1)),
        ("true".into(), Vec::new(), None),
        ("seq".into(), long, Some(-9)),
        ("printf".into(), "é".repeat(200).into_bytes(), None),
    ]
}

/// The `EmbeddingStore` conformance suite: what was put comes back bit for
/// bit, in the order asked; absent keys, another model's and another
/// dimension's are `None`; the first writer wins; an empty ask is empty;
/// `put` checks its lengths. `s` must be empty.
pub fn embedding_store<S: crate::EmbeddingStore + ?Sized>(s: &mut S) {
    let (m, d) = ("model@0123abcd", 3);
    let v: Vec<f32> = vec![0.5, -0.25, 1e-7, 0.0, -0.0, f32::MIN_POSITIVE];
    s.put(m, d, &[1, u128::MAX], &v).unwrap();
    let got = s.get(m, d, &[u128::MAX, 2, 1]).unwrap();
    assert_eq!(got.len(), 3);
    let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(got[0].as_deref().unwrap()), bits(&v[3..]), "the second row, bit for bit (-0.0 included)");
    assert!(got[1].is_none(), "a key never put");
    assert_eq!(bits(got[2].as_deref().unwrap()), bits(&v[..3]));
    assert_eq!(s.get("other@0", d, &[1]).unwrap(), vec![None], "another model's key");
    assert_eq!(s.get(m, 4, &[1]).unwrap(), vec![None], "another dimension");
    s.put(m, d, &[1], &[9.0, 9.0, 9.0]).unwrap();
    assert_eq!(bits(s.get(m, d, &[1]).unwrap()[0].as_deref().unwrap()), bits(&v[..3]), "the first writer wins");
    assert!(s.get(m, d, &[]).unwrap().is_empty());
    assert!(s.put(m, d, &[5], &[1.0]).is_err(), "a row of the wrong length is refused");
    assert_eq!(s.get(m, d, &[5]).unwrap(), vec![None], "and nothing of it kept");
}

/// The `ObsStore` conformance suite: ids, exact bytes (invalid UTF-8 and
/// empty observations included), metadata and previews, same content same
/// record, sessions apart, one id space for the observations of every
/// session (a run's settings apart), unknown ids. `s` must be empty.
pub fn obs_store<S: ObsStore>(s: &mut S) {
    let a = sid("A");
    let b = sid("B");
    let mut shown = Vec::new();
    let mut earlier = Vec::new();
    for (i, (act, obs, rc)) in samples().into_iter().enumerate() {
        let m = s.append(&a, &rec(i as u32, &act, &obs, rc), 10 + i as u32).unwrap();
        let id = ObsId::of(act.as_bytes(), &obs);
        assert_eq!(m.id, id);
        assert_eq!(m.shown, expected_shown(&earlier, &id), "the shortest prefix (>= 4) no earlier id begins with");
        assert_eq!(s.get(&a, &id.hex()).unwrap().as_deref(), Some(&obs[..]), "a longer prefix resolves to the same record");
        earlier.push(id);
        assert_eq!(m.action, act);
        assert_eq!(m.returncode, rc);
        assert_eq!(m.step, i as u32);
        assert_eq!(m.bytes, obs.len() as u64);
        assert_eq!(m.tokens, 10 + i as u32);
        let (h, t) = previews(&obs);
        assert_eq!(m.head, obs[h]);
        assert_eq!(m.tail, obs[t]);
        assert_eq!(s.get(&a, &m.shown).unwrap().as_deref(), Some(&obs[..]), "exact bytes of {act}");
        assert_eq!(s.meta(&a, &m.shown).unwrap().as_ref(), Some(&m));
        shown.push(m.shown);
    }
    // Same content: the first record's metadata, no new id.
    let (act, obs, _) = samples().remove(1);
    let again = s.append(&a, &rec(99, &act, &obs, Some(5)), 1).unwrap();
    assert_eq!(again.shown, shown[1]);
    assert_eq!((again.step, again.returncode, again.tokens), (1, Some(1), 11));
    // Same observation, other action: another id.
    let other = s.append(&a, &rec(100, "cat other", &obs, None), 1).unwrap();
    assert_ne!(other.shown, shown[1]);
    shown.push(other.shown.clone());
    assert_eq!(s.ids(&a).unwrap(), shown);
    // Sessions hold their own records.
    for id in &shown {
        assert_eq!(s.get(&b, id).unwrap(), None);
        assert_eq!(s.meta(&b, id).unwrap(), None);
    }
    assert!(s.ids(&b).unwrap().is_empty());
    let mb = s.append(&b, &rec(0, &act, &obs, Some(7)), 3).unwrap();
    assert_eq!(mb.shown, shown[1], "ids are a function of content");
    assert_eq!((mb.step, mb.returncode, mb.tokens), (0, Some(7), 3), "B has its own record");
    assert_eq!(s.ids(&b).unwrap(), vec![mb.shown.clone()]);
    assert_eq!(s.get(&b, &shown[0]).unwrap(), None);
    // Unknown ids and prefixes do not resolve.
    assert_eq!(s.get(&a, "00000000").unwrap(), None);
    assert_eq!(s.get(&a, &shown[0][..3]).unwrap(), None, "fewer than 4 hex");
    assert_eq!(s.get(&a, &shown[0].to_uppercase()).unwrap(), None, "not lowercase hex");
    assert_eq!(s.get(&sid("nobody"), &shown[0]).unwrap(), None);
    assert!(s.ids(&sid("nobody")).unwrap().is_empty());
    assert_eq!(s.sessions().unwrap(), vec![a.clone(), b], "sessions() lists both, sorted");
    obs_store_ids_after(s, &a, &shown);
    obs_store_claims(s, &a, &shown);
    obs_store_shared_ids(s);
    s.flush().unwrap();
}

/// `ids_after`: the ids after a given one, in creation order; all of them
/// after none or an id the session does not hold.
fn obs_store_ids_after<S: ObsStore>(s: &mut S, a: &SessionId, shown: &[String]) {
    assert_eq!(s.ids_after(a, None).unwrap(), shown);
    for (k, id) in shown.iter().enumerate() {
        assert_eq!(s.ids_after(a, Some(id)).unwrap(), shown[k + 1..], "after {id}");
    }
    assert_eq!(s.ids_after(a, Some("ffffffff")).unwrap(), shown, "an id it does not hold: all");
    assert!(s.ids_after(&sid("nobody"), None).unwrap().is_empty());
}

/// `claim`: a session that begins with the record is claimed again (and
/// nothing new is written), one that begins with another is refused
/// untouched, a free one is claimed with the record as its first.
fn obs_store_claims<S: ObsStore>(s: &mut S, a: &SessionId, shown: &[String]) {
    let (act, obs, rc) = samples().remove(0);
    let again = s.claim(a, &rec(0, &act, &obs, rc), 10).unwrap().expect("A begins with this record");
    assert_eq!(again.shown, shown[0]);
    let (act1, obs1, rc1) = samples().remove(1);
    assert_eq!(s.claim(a, &rec(0, &act1, &obs1, rc1), 1).unwrap(), None, "A begins with another record");
    assert_eq!(s.ids(a).unwrap(), shown, "a refused claim writes nothing");
    let c = sid("C");
    let first = s.claim(&c, &rec(0, &act1, &obs1, rc1), 4).unwrap().expect("C is free");
    assert_eq!(s.ids(&c).unwrap(), vec![first.shown]);
    assert_eq!(s.claim(&c, &rec(0, &act, &obs, rc), 1).unwrap(), None);
}

/// One id space for the observations of every session (`crate::id`): two
/// sessions whose observations share a 4-hex prefix show them by different
/// ids; an observation shows one id in every session that holds it; a run's
/// settings session neither takes nor blocks an observation's id (its
/// records get ids of their own space); every id shown names one
/// observation in the whole store.
fn obs_store_shared_ids<S: ObsStore>(s: &mut S) {
    let (x, y) = colliding_pair();
    let (ix, iy) = (ObsId::of(b"cat", &x), ObsId::of(b"cat", &y));
    let (p, q, settings) = (sid("shared-p"), sid("shared-q"), SessionId::settings_of("shared-p"));
    let w = s.append(&settings, &rec(0, "cat", &y, None), 1).unwrap();
    assert_eq!(w.shown, expected_shown(&[], &iy), "a settings session is a space of its own");
    let before = observation_ids(s);
    let mx = s.append(&p, &rec(0, "cat", &x, None), 1).unwrap();
    assert_eq!(mx.shown, expected_shown(&before, &ix), "the settings record blocks no observation's id");
    assert!(iy.hex().starts_with(&mx.shown), "x and y share their first 8 hex");
    let before = observation_ids(s);
    let my = s.append(&q, &rec(0, "cat", &y, None), 1).unwrap();
    assert_ne!(my.shown, mx.shown, "another session's observation with the same 4 hex");
    assert_eq!(my.shown, expected_shown(&before, &iy), "the shortest prefix no other observation of the store begins with");
    let mx_q = s.append(&q, &rec(1, "cat", &x, None), 1).unwrap();
    assert_eq!(mx_q.shown, mx.shown, "one observation, one id in every session");
    assert_eq!(s.ids(&q).unwrap(), vec![my.shown.clone(), mx.shown.clone()]);
    assert_eq!(s.get(&q, &mx.shown).unwrap().as_deref(), Some(&x[..]), "shown exactly, though y came first in q");
    assert_eq!(s.get(&q, &my.shown).unwrap().as_deref(), Some(&y[..]));
    let wx = s.append(&settings, &rec(1, "cat", &x, None), 1).unwrap();
    assert_eq!(wx.shown, expected_shown(&[iy], &ix), "the settings session keeps the per-session rule");
    assert_eq!(s.get(&settings, &w.shown).unwrap().as_deref(), Some(&y[..]), "its ids resolve in it");
    // Every id shown in an observation session names one observation.
    let mut named: std::collections::HashMap<String, ObsId> = std::collections::HashMap::new();
    for session in s.sessions().unwrap().into_iter().filter(SessionId::holds_observations) {
        for shown in s.ids(&session).unwrap() {
            let m = s.meta(&session, &shown).unwrap().expect("a listed id has metadata");
            assert_eq!(m.shown, shown, "{session}: §{shown} resolves to the observation shown so");
            let first = *named.entry(shown.clone()).or_insert(m.id);
            assert_eq!(first, m.id, "§{shown} names two observations ({session})");
        }
    }
}

/// The distinct ids of the observations of `s` (every session but runs' settings).
pub fn observation_ids<S: ObsStore>(s: &S) -> Vec<ObsId> {
    let mut ids = std::collections::BTreeSet::new();
    for session in s.sessions().unwrap().into_iter().filter(SessionId::holds_observations) {
        for shown in s.ids(&session).unwrap() {
            ids.insert(s.meta(&session, &shown).unwrap().expect("a listed id has metadata").id);
        }
    }
    ids.into_iter().collect()
}

/// The visible id `id` gets after `earlier` (`lam_core::id`'s rule).
pub fn expected_shown(earlier: &[ObsId], id: &ObsId) -> String {
    let hex = id.hex();
    let taken = |n: usize| earlier.iter().any(|e| e.hex().starts_with(&hex[..n]));
    hex[..(crate::MIN_SHOWN..40).find(|&n| !taken(n)).unwrap_or(40)].to_string()
}

/// Collision extension: of two observations whose ids share 8 hex, the
/// first gets 4 and the second one more than they share; each id resolves
/// to the record shown so, and any other prefix (the 8 hex earlier builds
/// showed) to the earliest record of the session whose id begins with it.
pub fn obs_store_collision<S: ObsStore>(s: &mut S) -> (String, String) {
    let (x, y) = colliding_pair();
    let (ix, iy) = (ObsId::of(b"cat", &x), ObsId::of(b"cat", &y));
    let shared = ix.hex().bytes().zip(iy.hex().bytes()).take_while(|(p, q)| p == q).count();
    assert!(shared >= 8);
    let a = sid("coll");
    let mx = s.append(&a, &rec(0, "cat", &x, None), 1).unwrap();
    let my = s.append(&a, &rec(1, "cat", &y, None), 1).unwrap();
    assert_eq!(mx.shown.len(), 4);
    assert_eq!(my.shown.len(), shared + 1);
    assert_eq!(s.get(&a, &mx.shown).unwrap().unwrap(), x);
    assert_eq!(s.get(&a, &my.shown).unwrap().unwrap(), y);
    assert_eq!(s.get(&a, &ix.hex()[..8]).unwrap().unwrap(), x, "an 8-hex id of earlier builds: the earliest");
    assert_eq!(s.get(&a, &iy.hex()).unwrap().unwrap(), y);
    // In another session the order differs; the visible ids do not (one id space).
    let b = sid("coll-b");
    let my_b = s.append(&b, &rec(0, "cat", &y, None), 1).unwrap();
    let mx_b = s.append(&b, &rec(1, "cat", &x, None), 1).unwrap();
    assert_eq!((&my_b.shown, &mx_b.shown), (&my.shown, &mx.shown));
    assert_eq!(s.get(&b, &mx_b.shown).unwrap().unwrap(), x);
    assert_eq!(s.get(&b, &my_b.shown).unwrap().unwrap(), y);
    assert_eq!(s.get(&b, &ix.hex()[..8]).unwrap().unwrap(), y, "not shown so: the earliest of the session whose id begins with it");
    (mx.shown, my.shown)
}

/// Checks the [`ByteCodec`] contract on unit vectors (the retained
/// embeddings it stores) of several shapes, including none:
/// `decode(encode(x))` returns the shape and exactly `rows * dim` values,
/// both calls append (what `out` held before is kept), encoding is
/// deterministic, `fidelity(original, decoded)` accepts the values, a
/// length that does not match the shape is an error, every strict prefix of a
/// stream is an error, a failed decode leaves `out` as it was, and a
/// single-byte corruption never panics.
pub fn byte_codec<C: ByteCodec>(c: &C, fidelity: impl Fn(&[f32], &[f32]) -> Result<(), String>) {
    let name = c.name().to_string();
    for (rows, dim) in [(0usize, 384usize), (1, 1), (1, 384), (3, 5), (17, 384), (64, 8)] {
        let shape = Shape { rows, dim };
        let v: Vec<f32> = (0..rows).flat_map(|r| lcg_unit(1000 + r as u64, dim)).collect();
        let mut stream = vec![0xAB, 0xCD];
        c.encode(&v, shape, &mut stream).unwrap_or_else(|e| panic!("{name}: encode {rows}x{dim}: {e}"));
        assert_eq!(&stream[..2], &[0xAB, 0xCD], "{name}: encode must append, not overwrite");
        let stream = stream.split_off(2);
        let mut again = Vec::new();
        c.encode(&v, shape, &mut again).unwrap();
        assert_eq!(stream, again, "{name}: encoding {rows}x{dim} is not deterministic");
        let mut out = vec![7.0f32];
        let got = c.decode(&stream, &mut out).unwrap_or_else(|e| panic!("{name}: decode {rows}x{dim}: {e}"));
        assert_eq!(got, shape, "{name}: decoded shape");
        assert_eq!(out.len(), 1 + rows * dim, "{name}: decode must append exactly rows * dim values");
        assert_eq!(out[0], 7.0, "{name}: decode must append, not overwrite");
        if let Err(e) = fidelity(&v, &out[1..]) {
            panic!("{name}: {rows}x{dim}: decoded values out of bounds: {e}");
        }
        // Strict prefixes are errors that leave `out` as it was.
        for cut in 0..stream.len() {
            let mut o = vec![1.0f32];
            assert!(c.decode(&stream[..cut], &mut o).is_err(), "{name}: prefix {cut}/{} of a {rows}x{dim} stream decoded", stream.len());
            assert_eq!(o, [1.0], "{name}: a failed decode must leave out as it was");
        }
        // Single-byte corruptions: never a panic; an error leaves `out` as it
        // was; a success returns values matching its shape.
        for i in 0..stream.len().min(256) {
            let mut bad = stream.clone();
            bad[i] ^= 0x5A;
            let mut o = vec![1.0f32];
            match c.decode(&bad, &mut o) {
                Ok(s) => assert_eq!(o.len(), 1 + s.rows * s.dim, "{name}: corrupted byte {i}: values do not match the returned shape"),
                Err(_) => assert_eq!(o, [1.0], "{name}: corrupted byte {i}: a failed decode must leave out as it was"),
            }
        }
    }
    let mut out = Vec::new();
    assert!(c.encode(&[0.5; 7], Shape { rows: 2, dim: 4 }, &mut out).is_err(), "{name}: 7 values for a 2x4 shape must be an error");
    let mut o = Vec::new();
    assert!(c.decode(b"", &mut o).is_err() && o.is_empty(), "{name}: an empty stream must be an error");
}

/// Texts every [`TokenCounter`] suite counts: code, prose, whitespace runs,
/// multibyte and invalid UTF-8, markers the views start entries with.
fn counter_samples() -> Vec<Vec<u8>> {
    vec![
        b"".to_vec(),
        b"fn main() {\n    println!(\"hi\");\n}\n".to_vec(),
        b"FAILED tests/test_stats.py::test_mean - AssertionError: 2 != 3\n".to_vec(),
        "caf\u{e9} \u{3b1}\u{3b2} \u{1f600} end\n".as_bytes().to_vec(),
        b"bad \xff\xfe bytes\n".to_vec(),
        b"   \n\n\t  \n".to_vec(),
        b"[turn 2]\n".to_vec(),
        b"#3 $ ls -la\n".to_vec(),
        "\u{a7}a1b2c3d4 #2\n".as_bytes().to_vec(),
        b"no newline at the end".to_vec(),
    ]
}

/// Checks the [`TokenCounter`] contract: spans are ordered, non-empty and
/// cover the text exactly (invalid UTF-8 included); for valid UTF-8 there are
/// as many spans as tokens; the empty text has no tokens; and counts are
/// additive where a text ending in a newline meets one starting with a
/// non-whitespace byte (the views add up their entries' counts).
pub fn token_counter<T: TokenCounter>(t: &T) {
    let texts = counter_samples();
    let mut spans = Vec::new();
    for x in &texts {
        t.spans(x, &mut spans);
        let mut end = 0;
        for s in &spans {
            assert!(s.start == end && s.end > s.start, "spans of {x:?} are not contiguous and non-empty: {spans:?}");
            end = s.end;
        }
        assert_eq!(end, x.len(), "spans of {x:?} do not cover it");
        if std::str::from_utf8(x).is_ok() {
            assert_eq!(spans.len(), t.count(x), "spans and count disagree on {x:?}");
        }
    }
    assert_eq!(t.count(b""), 0);
    for a in texts.iter().filter(|a| a.ends_with(b"\n")) {
        for b in texts.iter().filter(|b| b.first().is_some_and(|c| !c.is_ascii_whitespace())) {
            let whole = [a.as_slice(), b.as_slice()].concat();
            assert_eq!(t.count(&whole), t.count(a) + t.count(b), "not additive: {a:?} + {b:?}");
        }
    }
    // Every line holding a printable ASCII byte counts a token of its own
    // (stubs are judged without counting long runs: `stub::worth_replacing`).
    for x in &texts {
        let printable = x.split(|&b| b == b'\n').filter(|l| l.iter().any(|b| (0x21..=0x7e).contains(b))).count();
        assert!(t.count(x) >= printable, "{x:?} counts fewer tokens than it has printable lines");
    }
    for x in [&b"a\nb\nc"[..], b"))\n((\n", b"x\n\n\ny\n", b"  \t}\n  {\n"] {
        assert!(t.count(x) >= x.split(|&b| b == b'\n').filter(|l| l.iter().any(|b| (0x21..=0x7e).contains(b))).count(), "{x:?}");
    }
}

/// A deterministic synthetic session for the [`ViewPolicy`] suite: file reads
/// that repeat, test runs, a long listing, invalid UTF-8 and an empty output.
pub fn view_turns() -> Vec<Turn> {
    let mut turns = Vec::new();
    for i in 0..36u32 {
        let (action, obs): (String, Vec<u8>) = match i % 6 {
            0 => (
                format!("cat src/mod{}.py", i % 4),
                (0..40 + i).map(|k| format!("def f{k}(x):\n    return x * {k}  # module {}\n", i % 4)).collect::<String>().into_bytes(),
            ),
            1 => ("pytest -q".into(), format!("..F.\nFAILED tests/test_{}.py::test_x - AssertionError\n1 failed, 3 passed\n", i % 3).into_bytes()),
            2 => (format!("ls -R pkg{}", i % 2), (0..300).map(|k| format!("pkg/file_{k}_{}.txt\n", i % 2)).collect::<String>().into_bytes()),
            3 => ("cat data.bin".into(), [b"header \xff\xfe\x00 ".as_slice(), &i.to_le_bytes(), b"\n"].concat()),
            4 => ("true".into(), Vec::new()),
            _ => (format!("grep -n x src/mod{}.py", i % 4), format!("{i}: x = {i}\n").into_bytes()),
        };
        turns.push(Turn { thought: format!("step {i}: look at the output"), record: Record { index: i, action, observation: obs, returncode: Some(0) } });
    }
    turns
}

/// Checks the [`ViewPolicy`] contract on fresh policies from `make` fed
/// [`view_turns`] one at a time, rendering before every model call: a bounded
/// view never exceeds its limit (also after a `_recall` of a citation); every
/// citation resolves with [`ViewPolicy::recall`] to the exact bytes of an
/// observation that was pushed; the token count is the rendered text's
/// (`count`, the policy's own counter); and two fresh policies fed the same
/// turns render the same views (determinism). Returns how many citations the
/// renders held in all (baselines cite none; a citing view checks it cited).
pub fn view_policy<P: ViewPolicy>(mut make: impl FnMut() -> P, count: impl Fn(&[u8]) -> usize) -> usize {
    let turns = view_turns();
    let (mut a, mut b) = (make(), make());
    let mut cited = 0;
    for (i, t) in turns.iter().enumerate() {
        a.push(t).unwrap_or_else(|e| panic!("{}: push turn {i}: {e}", a.name()));
        b.push(t).unwrap_or_else(|e| panic!("{}: push turn {i}: {e}", b.name()));
        let (ra, rb) = (a.render().expect("render"), b.render().expect("render"));
        assert_eq!(ra, rb, "{}: two fresh policies render turn {i} differently", a.name());
        check_rendered(&a, &ra, &turns[..=i], &count);
        cited += ra.citations.len();
        if i % 9 == 8
            && let Some(id) = ra.citations.first().cloned()
        {
            let cmd = format!("_recall \u{a7}{id}");
            let (x, y) = (a.act("recall it", &cmd).expect("act"), b.act("recall it", &cmd).expect("act"));
            assert_eq!(x, y);
            let r = a.render().expect("render after recall");
            assert_eq!(r, b.render().expect("render after recall"));
            check_rendered(&a, &r, &turns[..=i], &count);
        }
    }
    cited
}

fn check_rendered<P: ViewPolicy>(p: &P, r: &Rendered, pushed: &[Turn], count: &impl Fn(&[u8]) -> usize) {
    if let Some(l) = r.limit {
        assert!(r.tokens <= l, "{}: view of {} tokens exceeds its limit {l}", p.name(), r.tokens);
    }
    assert_eq!(r.tokens, count(r.text.as_bytes()), "{}: token count is not the rendered text's", p.name());
    for id in &r.citations {
        let bytes = p.recall(id).expect("recall").unwrap_or_else(|| panic!("{}: citation §{id} does not resolve", p.name()));
        assert!(pushed.iter().any(|t| t.record.observation == bytes), "{}: §{id} recalls bytes no pushed turn observed", p.name());
    }
}
