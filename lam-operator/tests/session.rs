//! The operator's contracts seen from outside: typed errors, one code path
//! for online and batch, admissions that carry what callers need, and
//! LAM-over-ARC as a conforming `ViewPolicy`.
#![allow(clippy::single_range_in_vec_init)] // `&[0..n]`: one chunk covering the text

use lam_core::{Encoder, ObsStore, Record, SessionId, SimpleCounter, Stub, Threshold, TokenCounter};
use lam_encode::HashingEncoder;
use lam_operator::{Config, Error, Order, Session, compact_batch};

fn rec(i: u32, action: &str, obs: &[u8]) -> Record {
    Record { index: i, action: action.into(), observation: obs.to_vec(), returncode: Some(0) }
}

fn log(n: usize, tag: &str) -> Vec<u8> {
    (0..n).map(|i| format!("{tag} test_case_{i} ... PASSED in {}ms\n", i * 3)).collect::<String>().into_bytes()
}

fn cfg() -> Config {
    Config::new(Threshold::from_cosine(0.95).unwrap())
}

#[test]
fn records_must_arrive_in_order() {
    let mut enc = HashingEncoder::default();
    let mut s = Session::new(cfg(), 384).unwrap();
    let e = s.admit(&mut enc, &rec(1, "ls", b"a\n")).unwrap_err();
    assert!(matches!(e, Error::OutOfOrder { expected: 0, got: 1 }), "{e}");
    s.admit(&mut enc, &rec(0, "ls", b"a\n")).unwrap();
    assert!(matches!(s.admit(&mut enc, &rec(0, "ls", b"a\n")), Err(Error::OutOfOrder { expected: 1, got: 0 })));
    let e = compact_batch(cfg(), &mut enc, &[rec(0, "a", b"x"), rec(2, "b", b"y")]).unwrap_err();
    assert!(matches!(e, Error::OutOfOrder { expected: 1, got: 2 }), "{e}");
}

#[test]
fn refused_input_leaves_the_session_unchanged() {
    let mut s = Session::new(cfg(), 3).unwrap();
    let r = rec(0, "ls", b"abcdef");
    let unit = [1.0f32, 0.0, 0.0];
    let e = s.admit_embedded(&r, &[0..3, 4..6], &[unit, unit].concat()).unwrap_err();
    assert!(matches!(e, Error::BadChunks { record: 0, .. }), "{e}");
    let e = s.admit_embedded(&r, &[0..3], &unit).unwrap_err();
    assert!(matches!(e, Error::BadChunks { .. }), "chunks must cover the text: {e}");
    let e = s.admit_embedded(&r, &[0..6], &[f32::NAN, 0.0, 0.0]).unwrap_err();
    assert!(e.to_string().contains("record 0 chunk 1"), "{e}");
    assert!(matches!(s.admit_embedded(&r, &[0..6], &[1.0, 0.0]), Err(Error::Core(lam_core::Error::Dimension { .. }))));
    // Nothing was admitted: record 0 is still next, and goes through.
    assert_eq!(s.records(), 0);
    let a = s.admit_embedded(&r, &[0..6], &unit).unwrap();
    assert_eq!(a.residual, b"abcdef");
    let mut l0l1 = cfg();
    l0l1.order = Order::L0L1;
    let mut s = Session::new(l0l1, 3).unwrap();
    assert!(matches!(s.admit_embedded(&r, &[0..6], &unit), Err(Error::EmbeddingsNeedL1First)));
}

/// An encoder that fails on demand.
struct Flaky(HashingEncoder, bool);

impl Encoder for Flaky {
    fn info(&self) -> lam_core::EncoderInfo {
        self.0.info()
    }
    fn token_spans(&self, text: &[u8], out: &mut Vec<std::ops::Range<usize>>) -> Result<(), lam_core::Error> {
        self.0.token_spans(text, out)
    }
    fn encode_batch(&mut self, texts: &[&[u8]], out: &mut [f32]) -> Result<(), lam_core::Error> {
        if self.1 {
            return Err(lam_core::Error::Encoder { model: "flaky".into(), cause: "device lost".into() });
        }
        self.0.encode_batch(texts, out)
    }
}

#[test]
fn an_encoder_error_is_typed_and_never_half_admits() {
    // l1-l0: encoding happens before the session changes, so a retry works.
    let mut enc = Flaky(HashingEncoder::default(), true);
    let mut s = Session::new(cfg(), 384).unwrap();
    assert!(matches!(s.admit(&mut enc, &rec(0, "ls", b"a b c\n")), Err(Error::Core(lam_core::Error::Encoder { .. }))));
    enc.1 = false;
    s.admit(&mut enc, &rec(0, "ls", b"a b c\n")).unwrap();
    // l0-l1: L0 has run when the encoder fails, so the session stops.
    let mut c = cfg();
    c.order = Order::L0L1;
    let mut s = Session::new(c, 384).unwrap();
    enc.1 = true;
    assert!(s.admit(&mut enc, &rec(0, "ls", b"a b c\n")).is_err());
    enc.1 = false;
    assert!(matches!(s.admit(&mut enc, &rec(1, "ls", b"x\n")), Err(Error::Poisoned { record: 0 })));
}

#[test]
fn online_and_batch_run_one_function_in_both_orders() {
    let recs: Vec<Record> = (0..12u32).map(|i| rec(i, &format!("cmd {}", i % 4), &log(20 + (i as usize % 5) * 30, &format!("run{}", i % 3)))).collect();
    for order in [Order::L1L0, Order::L0L1] {
        let mut c = cfg().with_diagnostics();
        c.order = order;
        c.encode_batch = 7;
        let mut enc = HashingEncoder::default();
        let mut s = Session::new(c, 384).unwrap();
        let online: Vec<_> = recs.iter().map(|r| s.admit(&mut enc, r).unwrap()).collect();
        let batch = compact_batch(c, &mut enc, &recs).unwrap();
        assert_eq!(s.digest().hex16(), batch.digest.hex16());
        assert!(!s.digest().is_empty(), "{order}: nothing dropped; the test would not show much");
        for (a, b) in online.iter().zip(&batch.admissions) {
            assert_eq!((&a.residual, &a.chunks, &a.stubs, &a.vectors), (&b.residual, &b.chunks, &b.stubs, &b.vectors));
        }
    }
}

#[test]
fn an_admission_carries_stubs_vectors_and_tokens() {
    let mut enc = HashingEncoder::default();
    static COUNTER: SimpleCounter = SimpleCounter;
    let counter = &COUNTER;
    let mut s = Session::new(cfg().with_counter(counter).with_diagnostics(), 384).unwrap();
    let mut store = arc_store::MemStore::new();
    let sid = SessionId::new("s");
    let first = s.admit_archived(&mut store, &sid, &mut enc, &rec(0, "pytest", &log(300, "a"))).unwrap();
    let again = s.admit_archived(&mut store, &sid, &mut enc, &rec(1, "pytest -x", &log(300, "a"))).unwrap();
    assert_eq!(first.tokens.unwrap().input, counter.count(&log(300, "a")));
    let t = again.tokens.unwrap();
    assert_eq!(t.output, counter.count(&again.residual));
    assert!(t.output * 10 < t.input, "{t:?}");
    assert_eq!(store.meta(&sid, &first.id).unwrap().unwrap().tokens as usize, t.input, "the archive records the counter's tokens");
    // Stubs: typed, in the residual, parsed back, recalled exactly from the archive.
    assert!(!again.stubs.is_empty());
    for st in &again.stubs {
        let line = st.to_string();
        assert!(again.residual.split(|&b| b == b'\n').any(|l| l == line.as_bytes()));
        assert_eq!(Stub::parse(&line).unwrap().to_string(), line, "parsed back (distance to 3 decimals)");
        assert_eq!(store.get(&sid, st.id()).unwrap().unwrap(), log(300, "a"));
    }
    // Vectors: one row per chunk; the retained ones are the session's retained set.
    let dim = 384;
    assert_eq!(first.vectors.len(), first.chunks.len() * dim);
    let kept: Vec<f32> = [&first, &again].iter().flat_map(|a| a.retained().flatten().copied().collect::<Vec<_>>()).collect();
    assert_eq!(kept, s.retained_vectors());
    assert!(s.delta_hat() <= cfg().threshold.delta());
}

/// A session other conversations share (a proxy run's) may already hold an
/// id that begins like this observation's: the archive then gives it a
/// longer visible id, and the operator cites that one.
#[test]
fn the_operator_cites_the_archive_s_id() {
    // Two long outputs whose ids share their first 4 hex (a birthday search).
    let out = |i: u64| [log(200, "x"), format!("variant {i}\n").into_bytes()].concat();
    let mut seen = std::collections::HashMap::new();
    let (a, b) = (0u64..)
        .find_map(|i| {
            let key = lam_core::ObsId::of(b"cat", &out(i)).hex()[..4].to_string();
            seen.insert(key, i).map(|j| (out(j), out(i)))
        })
        .unwrap();
    let mut enc = HashingEncoder::default();
    let mut store = arc_store::MemStore::new();
    let sid = SessionId::new("s");
    // Another conversation archived `a` in the session first.
    store.append(&sid, &rec(0, "cat", &a), 1).unwrap();
    let mut s = Session::new(cfg(), 384).unwrap();
    let first = s.admit_archived(&mut store, &sid, &mut enc, &rec(0, "cat", &b)).unwrap();
    assert!(first.id.len() > 4, "{}", first.id);
    assert_eq!(store.get(&sid, &first.id).unwrap().unwrap(), b);
    let again = s.admit_archived(&mut store, &sid, &mut enc, &rec(1, "cat", &b)).unwrap();
    assert!(!again.stubs.is_empty() && again.stubs.iter().all(|st| st.id() == first.id), "{:?}", again.stubs);
}

/// An archive whose visible id cannot be the observation's (a store that
/// answers wrongly) poisons the session.
#[test]
fn an_archive_id_of_another_observation_poisons_the_session() {
    struct Wrong(arc_store::MemStore);
    impl ObsStore for Wrong {
        fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<lam_core::ObsMeta, lam_core::Error> {
            let mut m = ObsStore::append(&mut self.0, session, record, tokens)?;
            m.shown = if m.shown.starts_with('0') { "1111".into() } else { "0000".into() };
            Ok(m)
        }
        fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, lam_core::Error> {
            ObsStore::get(&self.0, session, shown)
        }
        fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<lam_core::ObsMeta>, lam_core::Error> {
            ObsStore::meta(&self.0, session, shown)
        }
        fn ids(&self, session: &SessionId) -> Result<Vec<String>, lam_core::Error> {
            ObsStore::ids(&self.0, session)
        }
        fn sessions(&self) -> Result<Vec<SessionId>, lam_core::Error> {
            ObsStore::sessions(&self.0)
        }
    }
    let mut enc = HashingEncoder::default();
    let mut store = Wrong(arc_store::MemStore::new());
    let mut s = Session::new(cfg(), 384).unwrap();
    let sid = SessionId::new("s");
    let e = s.admit_archived(&mut store, &sid, &mut enc, &rec(0, "cat", b"out\n")).unwrap_err();
    assert!(matches!(e, Error::ArchiveMismatch { record: 0, .. }), "{e}");
    let e = s.admit_archived(&mut store, &sid, &mut enc, &rec(1, "cat", b"more\n")).unwrap_err();
    assert!(matches!(e, Error::Poisoned { record: 0 }), "{e}");
}

/// Counts how often it counts the observation `WATCHED` (the session must
/// count an archived observation's tokens once).
struct Watching(std::sync::atomic::AtomicUsize);
const WATCHED: &[u8] = b"watched output line\n";
impl TokenCounter for Watching {
    fn count(&self, text: &[u8]) -> usize {
        if text == WATCHED {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        SimpleCounter.count(text)
    }
    fn spans(&self, text: &[u8], out: &mut Vec<std::ops::Range<usize>>) {
        SimpleCounter.spans(text, out)
    }
}

#[test]
fn one_counter_counts_each_observation_once_and_diagnostics_are_opt_in() {
    static W: Watching = Watching(std::sync::atomic::AtomicUsize::new(0));
    let mut enc = HashingEncoder::default();
    let mut s = Session::new(cfg().with_counter(&W), 384).unwrap();
    let mut store = arc_store::MemStore::new();
    let a = s.admit_archived(&mut store, &SessionId::new("s"), &mut enc, &rec(0, "cat w", WATCHED)).unwrap();
    assert_eq!(a.tokens.unwrap().input, SimpleCounter.count(WATCHED));
    // Once for the archive and the admission together; the residual (the same
    // bytes here) once more.
    assert_eq!(W.0.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert!(a.vectors.is_empty() && a.first_layer_plain.is_empty() && a.retained().next().is_none(), "diagnostics are off by default");
    let b = s.admit(&mut enc, &rec(1, "cat w", WATCHED)).unwrap();
    let mut want = lam_operator::SessionTotals::default();
    want.add(&a);
    want.add(&b);
    assert_eq!(s.totals(), want, "the session's totals are its admissions'");
    assert_eq!((want.observations, want.stubs), (2, b.stubs.len() as u64));
    let mut quiet = Session::new(cfg().with_counter(&SIMPLE).with_token_counts(false), 384).unwrap();
    assert!(quiet.admit(&mut enc, &rec(0, "ls", b"a\n")).unwrap().tokens.is_none());
}
static SIMPLE: SimpleCounter = SimpleCounter;

/// `refers` names the records an admission's stubs lean on; after
/// `forget`, no admission leans on a forgotten record: what it repeated
/// comes through, and a record still visible is named instead.
#[test]
fn a_forgotten_record_is_named_by_no_later_admission() {
    let mut enc = HashingEncoder::default();
    let mut s = Session::new(cfg(), 384).unwrap();
    let (a, b) = (log(40, "a"), log(40, "b"));
    s.admit(&mut enc, &rec(0, "pytest a", &a)).unwrap();
    s.admit(&mut enc, &rec(1, "pytest b", &b)).unwrap();
    let again = s.admit(&mut enc, &rec(2, "pytest a again", &a)).unwrap();
    assert_ne!(again.residual, a, "the repeat becomes a stub");
    assert_eq!(s.refers(&again), [0]);
    s.forget(&[0, 2]);
    let third = s.admit(&mut enc, &rec(3, "pytest a third", &a)).unwrap();
    assert_eq!(third.residual, a, "records 0 and 2 are gone: the output comes whole");
    assert!(s.refers(&third).is_empty());
    let fourth = s.admit(&mut enc, &rec(4, "pytest a fourth", &a)).unwrap();
    assert_ne!(fourth.residual, a);
    assert_eq!(s.refers(&fourth), [3], "the visible copy is named");
    let b2 = s.admit(&mut enc, &rec(5, "pytest b again", &b)).unwrap();
    assert_eq!(s.refers(&b2), [1]);
}
