//! `PgStore` against a real PostgreSQL server (`LAM_TEST_PG_URL`; run by
//! `scripts/test-postgres.sh`, which starts a throwaway cluster and sets
//! `LAM_REQUIRE_PG=1` so that a missing server fails these tests): the
//! conformance suite, the same metadata as `FileStore`, eight writer
//! processes at once, SIGKILL of writers mid-batch, bad input, TLS.
//! Every test works in a schema of its own.

mod common;
mod pgcommon;

use arc_store::{Access, FileStore, PgOptions, PgStore, StoreError, StoreSpec};
use common::*;
use lam_core::{ObsStore, SessionId};
use pgcommon::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Child mode for the multi-process tests (a no-op in a normal run).
#[test]
fn child_entry() {
    child_main();
}

#[test]
fn conformance_suite() {
    let Some(admin) = admin_url() else { return };
    let db = Scratch::new(&admin, "conf");
    let mut s = PgStore::connect(&db.url, Access::ReadWrite).unwrap();
    assert_eq!(s.info().schema_found, 0, "a database without the schema gets one on connect");
    behaviour(&mut s);
    collision(&mut s);
    assert_eq!(db.sql("SELECT value FROM lam_meta WHERE key = 'schema_version'"), arc_store::SCHEMA_VERSION.to_string());
    // A second handle (another process would do the same) sees it all, through the opener too.
    let again = arc_store::open(&StoreSpec::parse(&db.url).unwrap(), Access::ReadOnly).unwrap();
    assert_eq!(again.sessions().unwrap().len(), 8);
    for session in ["A", "B", "C", "coll", "coll-b", "shared-p", "shared-q", "shared-p.settings"] {
        let sid = SessionId(session.into());
        let ids = s.ids(&sid).unwrap();
        assert_eq!(again.ids(&sid).unwrap(), ids);
        for id in &ids {
            assert_eq!(again.meta(&sid, id).unwrap(), s.meta(&sid, id).unwrap());
        }
    }
    let ro = PgStore::connect(&db.url, Access::ReadOnly).unwrap();
    assert_eq!(ro.info().schema_found, arc_store::SCHEMA_VERSION);
    let e = { ro }.append(&sid("A"), &rec(0, "x", b"y", None), 1).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    check_integrity(&s);
    // A body changed behind lam's back is reported, not returned.
    let first = s.ids(&sid("A")).unwrap().remove(0);
    db.sql(&format!(
        "UPDATE lam_obs SET body = overlay(body PLACING '\\x00'::bytea FROM 1 FOR 1) WHERE shown = '{first}' AND session = convert_to('A', 'UTF8')"
    ));
    let e = s.get(&sid("A"), &first).unwrap_err().to_string();
    assert!(e.contains("altered outside lam") && e.contains(&first), "{e}");
}

#[test]
fn same_metadata_as_file_store() {
    let Some(admin) = admin_url() else { return };
    let db = Scratch::new(&admin, "same");
    let dir = tempfile::tempdir().unwrap();
    let mut f = FileStore::open(dir.path()).unwrap();
    let mut p = PgStore::connect(&db.url, Access::ReadWrite).unwrap();
    let (x, y) = colliding_pair();
    let mut records = Vec::new();
    for (i, (act, obs, rc)) in samples().into_iter().enumerate() {
        records.push(("s1".to_string(), rec(i as u32, &act, &obs, rc)));
    }
    records.push(("s1".into(), rec(10, "cat", &x, None)));
    records.push(("s1".into(), rec(11, "cat", &y, None)));
    records.push(("s2".into(), rec(0, "cat", &y, None)));
    records.push(("s2".into(), rec(1, "cat", &x, None)));
    for i in 0..200u64 {
        let session = ["s1", "s2", "s3 ünïcode", "s\u{0}nul", "s1.settings"][(i % 5) as usize].to_string();
        records.push((session, observation(i % 70, false)));
    }
    for (session, r) in &records {
        let sid = SessionId(session.clone());
        let tokens = r.observation.len() as u32 / 3;
        assert_eq!(p.append(&sid, r, tokens).unwrap(), f.append(&sid, r, tokens).unwrap(), "append to {session}");
    }
    assert_eq!(p.sessions().unwrap(), f.sessions());
    for s in f.sessions() {
        let ids = f.ids(&s).unwrap();
        assert_eq!(p.ids(&s).unwrap(), ids, "{s}");
        for id in &ids {
            assert_eq!(p.meta(&s, id).unwrap(), f.meta(&s, id).unwrap());
            assert_eq!(p.get(&s, id).unwrap(), f.get(&s, id).unwrap());
        }
    }
    check_integrity(&p);
}

/// Eight processes, two threads each, append to one shared session and one
/// session of their own at once, with duplicates across processes.
#[test]
fn eight_processes_at_once() {
    let Some(admin) = admin_url() else { return };
    let db = Scratch::new(&admin, "eight");
    // The schema exists before the children start: they race on appends
    // (`concurrent_first_connects` races on creating it).
    let store = PgStore::connect(&db.url, Access::ReadWrite).unwrap();
    let n = 60u64;
    let writers: Vec<Writer> = (0..8).map(|k| Writer::spawn(&db.url, k, &[("LAM_PG_CHILD_N", n.to_string())])).collect();
    let mut acks = Vec::new();
    for (k, w) in writers.into_iter().enumerate() {
        let (st, said) = w.finish();
        assert!(st.success() && said.errors.is_empty(), "writer {k}: {st:?} {:?}", said.errors);
        assert_eq!(said.acks.len() as u64, 2 * n, "writer {k}");
        acks.extend(said.acks);
    }
    check_acks(&store, &acks, false);
    // Duplicates collapsed, sessions apart: each session holds exactly the
    // distinct observations acknowledged in it, under the acknowledged ids.
    let mut want: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in &acks {
        want.entry(a.session.clone()).or_default().insert(a.shown.clone());
    }
    let counts = check_integrity(&store);
    assert_eq!(counts.len(), 9, "shared + 8 own sessions: {counts:?}");
    for (session, shown) in &want {
        let got: BTreeSet<String> = store.ids(&SessionId(session.clone())).unwrap().into_iter().collect();
        assert_eq!(&got, shown, "{session}");
    }
    // Another session shows an id only if it archived the same observation.
    for a in acks.iter().filter(|a| a.session.starts_with("own-")) {
        let other = if a.session == "own-0" { "own-1" } else { "own-0" };
        let there = want[other].contains(&a.shown);
        let shown = store.meta(&SessionId(other.into()), &a.shown).unwrap().is_some_and(|m| m.shown == a.shown);
        assert_eq!(shown, there, "§{} of {} in {other}", a.shown, a.session);
    }
    let rows: usize = db.sql("SELECT count(*) FROM lam_obs").parse().unwrap();
    assert_eq!(rows, want.values().map(BTreeSet::len).sum::<usize>(), "one row per (session, observation)");
}

/// Writers of different sessions on four hosts (four stores, each with its
/// own connections, two threads each) race to give ids to 16 observations
/// whose ids all begin with the same 4 hex: the lock of that prefix makes
/// them take turns, so every observation shows one id in every session and
/// no id names two observations.
#[test]
fn writers_of_different_sessions_race_on_one_prefix() {
    let Some(admin) = admin_url() else { return };
    let db = Scratch::new(&admin, "race");
    let obs = same_prefix(16);
    let stores: Vec<PgStore> = (0..4).map(|_| PgStore::connect(&db.url, Access::ReadWrite).unwrap()).collect();
    let barrier = std::sync::Barrier::new(8);
    std::thread::scope(|sc| {
        for (k, st) in stores.iter().enumerate() {
            for t in 0..2 {
                let (mut st, obs, barrier) = (st.clone(), &obs, &barrier);
                sc.spawn(move || {
                    let s = sid(&format!("race-{k}"));
                    barrier.wait();
                    for j in 0..obs.len() {
                        let o = &obs[(j + 4 * k + 7 * t) % obs.len()];
                        st.append(&s, &rec(j as u32, "cat", o, None), 1).unwrap();
                    }
                });
            }
        }
    });
    let counts = check_integrity(&stores[0]);
    assert_eq!(counts.iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![16; 4], "{counts:?}");
    let shown: BTreeSet<String> = stores[0].ids(&sid("race-0")).unwrap().into_iter().collect();
    for k in 1..4 {
        let theirs: BTreeSet<String> = stores[0].ids(&sid(&format!("race-{k}"))).unwrap().into_iter().collect();
        assert_eq!(theirs, shown, "race-{k}: the same 16 ids");
    }
    for id in &shown {
        let f = arc_store::find(&stores[0], None, id).unwrap();
        assert_eq!(f.sessions.len(), 4, "§{id} names one observation, held by the four sessions");
    }
}

/// `n` observations of `cat` whose ids begin with the same 4 hex.
fn same_prefix(n: usize) -> Vec<Vec<u8>> {
    let mut by: std::collections::HashMap<[u8; 2], Vec<Vec<u8>>> = std::collections::HashMap::new();
    for i in 0u64.. {
        let o = format!("race {i}\n").into_bytes();
        let id = lam_core::ObsId::of(b"cat", &o);
        let same = by.entry([id.0[0], id.0[1]]).or_default();
        same.push(o);
        if same.len() == n {
            return std::mem::take(same);
        }
    }
    unreachable!()
}

/// Eight processes connecting to a database without the schema at the same
/// moment: one creates it, none fails.
#[test]
fn concurrent_first_connects() {
    let Some(admin) = admin_url() else { return };
    let db = Scratch::new(&admin, "first");
    let writers: Vec<Writer> = (0..8).map(|k| Writer::spawn(&db.url, k, &[("LAM_PG_CHILD_N", "3".into())])).collect();
    for (k, w) in writers.into_iter().enumerate() {
        let (st, said) = w.finish();
        assert!(st.success() && said.errors.is_empty(), "writer {k}: {st:?} {:?}", said.errors);
    }
    assert_eq!(db.sql("SELECT value FROM lam_meta"), arc_store::SCHEMA_VERSION.to_string());
}

/// Writers appending large observations in lingering batches are killed at
/// random moments: every acknowledged append is there, every row is whole.
#[test]
fn sigkill_mid_batch() {
    let Some(admin) = admin_url() else { return };
    let db = Scratch::new(&admin, "kill");
    let store = PgStore::connect(&db.url, Access::ReadWrite).unwrap();
    let mut acks = Vec::new();
    let mut r = Rng::new(99);
    for round in 0..3u64 {
        let env = [("LAM_PG_CHILD_BIG", "1".to_string()), ("LAM_PG_CHILD_DELAY_MS", "15".into()), ("LAM_PG_CHILD_THREADS", "3".into())];
        let mut writers: Vec<Writer> = (0..4).map(|k| Writer::spawn(&db.url, round * 10 + k, &env)).collect();
        for w in &mut writers {
            let n = 2 + r.below(6) as usize;
            assert!(w.wait_for(n, Duration::from_secs(60)), "a writer made no progress: {:?}", w.said.lock().unwrap().errors);
            std::thread::sleep(Duration::from_millis(r.below(20)));
            w.kill();
        }
        for w in writers {
            let (st, said) = w.finish();
            assert!(!st.success(), "killed");
            assert!(said.errors.is_empty(), "{:?}", said.errors);
            acks.extend(said.acks);
        }
    }
    check_acks(&store, &acks, true);
    check_integrity(&store);
}

/// A batch holding one record the server rejects is split: the others are
/// committed, only that append fails, and no part of the failed batch shows.
#[test]
fn one_bad_record_fails_alone() {
    let Some(admin) = admin_url() else { return };
    let db = Scratch::new(&admin, "poison");
    let opts = PgOptions { writers: 1, max_delay: Duration::from_millis(300), ..PgOptions::default() };
    let store = PgStore::connect_with(&db.url, opts).unwrap();
    db.sql(
        "CREATE FUNCTION reject_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         IF NEW.body = convert_to('poison', 'UTF8') THEN RAISE EXCEPTION 'poisoned row'; END IF; RETURN NEW; END $$; \
         CREATE TRIGGER poison BEFORE INSERT ON lam_obs FOR EACH ROW EXECUTE FUNCTION reject_poison()",
    );
    let barrier = std::sync::Barrier::new(8);
    let results: Vec<_> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (mut s, barrier) = (store.clone(), &barrier);
                sc.spawn(move || {
                    let obs = if i == 3 { b"poison".to_vec() } else { format!("fine {i}").into_bytes() };
                    barrier.wait();
                    s.append(&sid("p"), &rec(i, "echo", &obs, None), 1)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let stats = store.stats();
    assert!(stats.splits >= 1 && stats.commits == 7, "the batch holding the poison was split: {stats:?}");
    for (i, r) in results.iter().enumerate() {
        match (i, r) {
            (3, Err(e)) => assert!(e.to_string().contains("poisoned row"), "{e}"),
            (3, Ok(m)) => panic!("the poisoned record was stored: {m:?}"),
            (_, r) => assert!(r.is_ok(), "record {i}: {r:?}"),
        }
    }
    assert_eq!(store.ids(&sid("p")).unwrap().len(), 7);
    assert_eq!(db.sql("SELECT count(*) FROM lam_obs"), "7");
    check_integrity(&store);
}

#[test]
fn bad_input_gives_clear_errors_without_the_password() {
    let Some(admin) = admin_url() else { return };
    let pw = password(&admin);
    assert!(!pw.is_empty(), "the test server must use a password");
    let no_secret = |e: &str| assert!(!e.contains(&pw) && !e.contains("n0t-the-Passw0rd"), "password in message: {e}");

    let wrong = admin.replacen(&format!(":{pw}@"), ":n0t-the-Passw0rd@", 1);
    let e = PgStore::connect(&wrong, Access::ReadWrite).unwrap_err().to_string();
    assert!(e.contains("password authentication failed") && e.contains("28P01"), "{e}");
    no_secret(&e);

    let t = std::time::Instant::now();
    let e = PgStore::connect(&format!("postgres://lam:{pw}@127.0.0.1:1/postgres"), Access::ReadWrite).unwrap_err().to_string();
    assert!(e.contains("127.0.0.1:1") && e.contains("connect") && e.to_lowercase().contains("refused"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(15), "an unreachable server fails promptly");
    no_secret(&e);

    let e = PgStore::connect(&admin.replace("/postgres", "/no_such_db"), Access::ReadWrite).unwrap_err().to_string();
    assert!(e.contains("no_such_db") && e.contains("does not exist"), "{e}");
    no_secret(&e);

    // A database without the schema: read-only refuses, read-write creates it.
    let db = Scratch::new(&admin, "bad");
    let e = PgStore::connect(&db.url, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, StoreError::Schema { found: None, .. }), "{e}");
    assert!(e.to_string().contains("no lam archive"), "{e}");
    no_secret(&e.to_string());
    PgStore::connect(&db.url, Access::ReadWrite).unwrap();

    // A schema newer than this build.
    db.sql("UPDATE lam_meta SET value = '999' WHERE key = 'schema_version'");
    for access in [Access::ReadWrite, Access::ReadOnly] {
        let e = PgStore::connect(&db.url, access).unwrap_err();
        assert!(matches!(e, StoreError::Schema { found: Some(999), supported: arc_store::SCHEMA_VERSION, .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("newer") && msg.contains("999"), "{msg}");
        no_secret(&msg);
    }
    let e = arc_store::open(&StoreSpec::parse(&db.url).unwrap(), Access::ReadWrite).err().unwrap().to_string();
    assert!(e.contains("newer"), "{e}");
    db.sql("UPDATE lam_meta SET value = 'one' WHERE key = 'schema_version'");
    let e = PgStore::connect(&db.url, Access::ReadWrite).unwrap_err().to_string();
    assert!(e.contains("`one`, not a number"), "{e}");

    // The URL's own problems.
    let e = PgStore::connect(&with_param(&admin, "sslmode=bogus"), Access::ReadWrite).unwrap_err().to_string();
    assert!(e.contains("sslmode `bogus`"), "{e}");
    no_secret(&e);
}

/// TLS through rustls: `require` encrypts, `verify-full` checks the chain
/// against `sslrootcert` and the host name, and refuses an unknown CA.
#[test]
fn tls_modes() {
    let Some(admin) = admin_url() else { return };
    let Ok(ca) = std::env::var("LAM_TEST_PG_CA") else {
        assert!(std::env::var("LAM_REQUIRE_PG").as_deref() != Ok("1"), "LAM_REQUIRE_PG=1 but LAM_TEST_PG_CA is not set");
        eprintln!("SKIPPED: LAM_TEST_PG_CA is not set (the server's CA certificate)");
        return;
    };
    let ro = PgOptions { access: Access::ReadOnly, ..PgOptions::default() };
    let db = Scratch::new(&admin, "tls");
    PgStore::connect(&db.url, Access::ReadWrite).unwrap();
    let tls_of = |q: &str| PgStore::connect_with(&with_param(&db.url, q), ro).map(|s| s.info().tls);
    assert!(!tls_of("sslmode=disable").unwrap());
    assert!(tls_of("sslmode=prefer").unwrap());
    assert!(tls_of("sslmode=require").unwrap());
    let ca_q = format!("sslrootcert={}", ca.replace('/', "%2F"));
    assert!(tls_of(&format!("sslmode=verify-ca&{ca_q}")).unwrap());
    let by_name = db.url.replace("@127.0.0.1:", "@localhost:");
    assert!(PgStore::connect_with(&with_param(&by_name, &format!("sslmode=verify-full&{ca_q}")), ro).unwrap().info().tls);
    // Not signed by a root we trust (the webpki roots).
    let e = PgStore::connect_with(&with_param(&by_name, "sslmode=verify-full&sslrootcert=system"), ro).unwrap_err().to_string();
    assert!(e.contains("TLS") && e.to_lowercase().contains("certificate"), "{e}");
    let e = tls_of(&format!("sslmode=verify-full&{}", ca_q.replace("ca.crt", "missing.crt"))).unwrap_err().to_string();
    assert!(e.contains("missing.crt"), "{e}");
}
