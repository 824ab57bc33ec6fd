//! The async API against a real server (`LAM_TEST_PG_URL`, set by
//! `scripts/test-postgres.sh`; with `LAM_REQUIRE_PG=1` a missing server is a
//! failure): concurrent `append_async` calls share commits, and the blocking
//! facade behaves inside and outside async code.

use super::*;
use lam_core::EmbeddingStore as _;
use lam_core::testsuite::{rec, sid};

fn admin_url() -> Option<String> {
    match std::env::var("LAM_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(std::env::var("LAM_REQUIRE_PG").as_deref() != Ok("1"), "LAM_REQUIRE_PG=1 but LAM_TEST_PG_URL is not set");
            eprintln!("SKIPPED: LAM_TEST_PG_URL is not set (scripts/test-postgres.sh)");
            None
        }
    }
}

/// A fresh schema named `name` (created through the driver itself), and the URL that uses it.
async fn scratch(admin: &str, name: &str) -> String {
    let schema = format!("t_{name}_{}", std::process::id());
    let target = config::resolve(admin).unwrap();
    let tls = tls::connector(target.ssl, None).unwrap();
    let (client, conn) = target.config.connect(tls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")).await.unwrap();
    format!("{admin}{}options=-csearch_path%3D{schema}", if admin.contains('?') { '&' } else { '?' })
}

fn runtime(multi: bool) -> Runtime {
    let mut b = if multi { tokio::runtime::Builder::new_multi_thread() } else { tokio::runtime::Builder::new_current_thread() };
    b.enable_all().build().unwrap()
}

#[test]
fn concurrent_async_appends_share_commits() {
    let Some(admin) = admin_url() else { return };
    runtime(true).block_on(async {
        let url = scratch(&admin, "async").await;
        let store = PgStore::connect_async(&url, Access::ReadWrite).await.unwrap();
        let records: Vec<Record> = (0..400u32).map(|i| rec(i, "echo", format!("line {}\n", i % 300).as_bytes(), Some(0))).collect();
        let s = sid("async");
        let tasks: Vec<_> = records
            .iter()
            .map(|r| {
                let (store, s, r) = (store.clone(), s.clone(), r.clone());
                tokio::spawn(async move { store.append_async(&s, &r, 1).await })
            })
            .collect();
        let mut metas = Vec::new();
        for t in tasks {
            metas.push(t.await.unwrap().unwrap());
        }
        let stats = store.stats();
        assert!(stats.largest_batch > 1 && stats.commits < 400, "appends in flight together share commits: {stats:?}");
        assert!(stats.writers > 1 && stats.writers <= 4, "a busy store opens more writers: {stats:?}");
        for (r, m) in records.iter().zip(&metas) {
            assert_eq!(store.get_async(&s, &m.shown).await.unwrap().as_deref(), Some(&r.observation[..]));
        }
        // 300 distinct observations; the 100 repeats got the first one's metadata.
        assert_eq!(store.ids_async(&s).await.unwrap().len(), 300);
        assert_eq!(metas[305], metas[5]);
        assert_eq!(store.sessions_async().await.unwrap(), vec![s.clone()]);
        assert_eq!(store.meta_async(&s, &metas[7].shown).await.unwrap().as_ref(), Some(&metas[7]));
        // The blocking facade on a multi-threaded runtime goes through block_in_place.
        assert_eq!(ObsStore::ids(&store, &s).unwrap().len(), 300);
    });
}

#[test]
fn blocking_facade_inside_and_outside_async_code() {
    let Some(admin) = admin_url() else { return };
    let url = runtime(false).block_on(scratch(&admin, "facade"));
    // A handle made by connect_async on a current-thread runtime: the blocking
    // methods there are an error, not a deadlock; the async ones work.
    let rt = runtime(false);
    let store = rt.block_on(async {
        let store = PgStore::connect_async(&url, Access::ReadWrite).await.unwrap();
        let e = ObsStore::ids(&store, &sid("x")).unwrap_err().to_string();
        assert!(e.contains("current-thread runtime"), "{e}");
        store.append_async(&sid("x"), &rec(0, "a", b"b", None), 1).await.unwrap();
        store
    });
    drop(store);
    drop(rt);
    // A handle made by connect (private runtime) works inside async code too,
    // and may be dropped there.
    runtime(false).block_on(async {
        let mut s = PgStore::connect(&url, Access::ReadWrite).unwrap();
        assert_eq!(s.ids(&sid("x")).unwrap().len(), 1);
        s.append(&sid("x"), &rec(1, "a", b"c", None), 1).unwrap();
        drop(s);
    });
    let e = runtime(false).block_on(async { PgStore::connect_async("postgres://h/db?sslmode=nope", Access::ReadOnly).await.unwrap_err() });
    assert!(e.to_string().contains("sslmode `nope`"), "{e}");
}

/// Session names of any length, as the file store accepts them (defect: a
/// long incompressible name overflowed the btree row of schema version 1).
#[test]
fn long_session_names_fit_both_stores() {
    let Some(admin) = admin_url() else { return };
    let url = runtime(false).block_on(scratch(&admin, "longname"));
    let name: String = (0..100_000u32).map(|i| char::from(b"0123456789abcdef"[(i.wrapping_mul(2_654_435_761) >> 28) as usize])).collect();
    let s = SessionId(name);
    let r = rec(0, "cat big", b"body of a long-named session\n", Some(0));
    let mut pg = PgStore::connect(&url, Access::ReadWrite).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut file = crate::FileStore::open(dir.path().join("store")).unwrap();
    for st in [&mut pg as &mut dyn ObsStore, &mut file] {
        let m = st.append(&s, &r, 3).unwrap();
        st.flush().unwrap();
        assert_eq!(st.get(&s, &m.shown).unwrap().as_deref(), Some(&r.observation[..]));
        assert_eq!(st.sessions().unwrap(), vec![s.clone()]);
    }
}

/// A version 1 database is migrated to version 2 on a read-write connect,
/// every record still there.
#[test]
fn version_1_databases_migrate() {
    let Some(admin) = admin_url() else { return };
    let id = lam_core::ObsId::of(b"cat", b"abc").hex();
    let shown = id[..8].to_string();
    let url = runtime(false).block_on(async {
        let url = scratch(&admin, "v1").await;
        let target = config::resolve(&url).unwrap();
        let (client, conn) = target.config.connect(tls::connector(target.ssl, None).unwrap()).await.unwrap();
        tokio::spawn(conn);
        client.batch_execute(schema::V1).await.unwrap();
        client
            .batch_execute(&format!(
                "INSERT INTO lam_meta VALUES ('schema_version', '1'); \
                 INSERT INTO lam_obs (session, id, shown, action, step, tokens, bytes, head, tail, body) \
                 VALUES ('old'::bytea, decode('{id}', 'hex'), '{shown}', 'cat'::bytea, 0, 1, 3, 'abc'::bytea, ''::bytea, 'abc'::bytea)"
            ))
            .await
            .unwrap();
        url
    });
    let st = PgStore::connect(&url, Access::ReadWrite).unwrap();
    let s = sid("old");
    assert_eq!(ObsStore::ids(&st, &s).unwrap(), vec![shown.clone()]);
    assert_eq!(ObsStore::get(&st, &s, &shown).unwrap().as_deref(), Some(&b"abc"[..]));
    assert_eq!(ObsStore::get(&st, &s, &id[..4]).unwrap().as_deref(), Some(&b"abc"[..]), "a shorter prefix: the earliest");
    // Version 3: a new record gets the shortest prefix no earlier id begins with.
    let mut st = st;
    let m = ObsStore::append(&mut st, &s, &rec(1, "cat", b"new", None), 1).unwrap();
    let new_id = lam_core::ObsId::of(b"cat", b"new");
    assert_eq!(m.shown, lam_core::testsuite::expected_shown(&[lam_core::ObsId::of(b"cat", b"abc")], &new_id));
    assert_eq!(ObsStore::ids(&st, &s).unwrap(), vec![shown.clone(), m.shown.clone()]);
    assert_eq!(ObsStore::get(&st, &s, "zz12").unwrap(), None, "not hex");
}

/// Defect: two hosts compacting different runs that share a name into one
/// store merged them. Eight stores (eight hosts: each its own connections)
/// claim one name at once, each with its own first observation, twice: every
/// run gets a session of its own that begins with its record, and claiming
/// again finds the same session.
#[test]
fn concurrent_claims_across_hosts_never_merge() {
    let Some(admin) = admin_url() else { return };
    runtime(true).block_on(async {
        let url = scratch(&admin, "claims").await;
        let mut hosts = Vec::new();
        for _ in 0..8 {
            hosts.push(PgStore::connect_async(&url, Access::ReadWrite).await.unwrap());
        }
        let name = sid("task-42");
        let firsts: Vec<Record> = (0..8u32).map(|h| rec(0, "cat README", format!("run {h}\n").as_bytes(), Some(0))).collect();
        let claim_all = || -> Vec<_> {
            let each = hosts.iter().zip(&firsts).map(|(st, r)| (st.clone(), r.clone(), name.clone()));
            each.map(|(mut st, r, name)| tokio::task::spawn_blocking(move || crate::claim_session(&mut st, &name, &r, 1))).collect()
        };
        let mut got = Vec::new();
        for t in claim_all() {
            got.push(t.await.unwrap().unwrap());
        }
        let distinct: std::collections::BTreeSet<_> = got.iter().collect();
        assert_eq!(distinct.len(), 8, "eight runs, eight sessions: {got:?}");
        for (s, r) in got.iter().zip(&firsts) {
            let ids = hosts[0].ids_async(s).await.unwrap();
            assert_eq!(ids.len(), 1, "{s} holds one run's first record");
            assert_eq!(hosts[0].get_async(s, &ids[0]).await.unwrap().as_deref(), Some(&r.observation[..]));
        }
        let mut again = Vec::new();
        for t in claim_all() {
            again.push(t.await.unwrap().unwrap());
        }
        assert_eq!(again, got, "claiming again is idempotent");
    });
}

/// The shared embedding cache: the conformance suite; two replicas (two
/// connections) see each other's rows; a row damaged in the database is
/// never returned and the next put replaces it; the same rows put by eight
/// replicas at once are stored once.
#[test]
fn shared_embeddings_conform_verify_and_store_once() {
    let Some(admin) = admin_url() else { return };
    let url = runtime(false).block_on(scratch(&admin, "emb"));
    let mut a = PgEmbeddings::connect(&url).unwrap();
    lam_core::testsuite::embedding_store(&mut a);
    let mut b = PgEmbeddings::connect(&url).unwrap();
    let (m, d) = ("all-MiniLM-L6-v2@34cb29e3", 4);
    let rows: Vec<f32> = (0..8).map(|i| i as f32 / 7.0).collect();
    a.put(m, d, &[10, 11], &rows).unwrap();
    assert_eq!(b.get(m, d, &[11, 10]).unwrap(), vec![Some(rows[4..].to_vec()), Some(rows[..4].to_vec())], "another replica's rows");
    // Damage key 10's vector in the database: it is no longer returned.
    let admin_rt = runtime(false);
    admin_rt.block_on(async {
        let target = config::resolve(&url).unwrap();
        let (client, conn) = target.config.connect(tls::connector(target.ssl, None).unwrap()).await.unwrap();
        tokio::spawn(conn);
        let key = 10u128.to_le_bytes().to_vec();
        let n = client.execute("UPDATE lam_embeddings SET vec = set_byte(vec, 0, get_byte(vec, 0) # 1) WHERE key = $1", &[&key]).await.unwrap();
        assert_eq!(n, 1);
    });
    assert_eq!(b.get(m, d, &[10, 11]).unwrap(), vec![None, Some(rows[4..].to_vec())], "a damaged row is never trusted");
    assert_eq!(b.rejected, 1);
    b.put(m, d, &[10], &rows[..4]).unwrap();
    assert_eq!(a.get(m, d, &[10]).unwrap(), vec![Some(rows[..4].to_vec())], "the next put replaced it");
    // Eight replicas put the same rows at once: one row per key.
    let keys: Vec<u128> = (100..164).collect();
    let vecs: Vec<f32> = (0..keys.len() * d).map(|i| (i % 13) as f32).collect();
    std::thread::scope(|s| {
        for _ in 0..8 {
            let (url, keys, vecs) = (&url, &keys, &vecs);
            s.spawn(move || PgEmbeddings::connect(url).unwrap().put(m, d, keys, vecs).unwrap());
        }
    });
    let count = admin_rt.block_on(async {
        let target = config::resolve(&url).unwrap();
        let (client, conn) = target.config.connect(tls::connector(target.ssl, None).unwrap()).await.unwrap();
        tokio::spawn(conn);
        let row = client
            .query_one(
                "SELECT count(*) FROM lam_embeddings WHERE key >= $1 AND key < $2 AND model = $3",
                &[&100u128.to_le_bytes().to_vec(), &164u128.to_le_bytes().to_vec(), &m],
            )
            .await
            .unwrap();
        row.get::<_, i64>(0)
    });
    assert_eq!(count, 64, "one row per key");
    let got = a.get(m, d, &keys).unwrap();
    assert!(got.iter().all(Option::is_some) && got.len() == 64);
}

/// The shared embedding cache survives a lost connection: while it is lost
/// the calls answer "not cached" (never an error, the encoder keeps the
/// cache), and a later call connects again and finds the rows.
#[test]
fn shared_embeddings_connect_again_after_the_connection_is_lost() {
    let Some(admin) = admin_url() else { return };
    let url = runtime(false).block_on(scratch(&admin, "embre"));
    let app = format!("lam_emb_reconnect_{}", std::process::id());
    let mut a = PgEmbeddings::connect(&format!("{url}&application_name={app}")).unwrap();
    let (m, d) = ("all-MiniLM-L6-v2@34cb29e3", 2);
    a.put(m, d, &[1, 2], &[0.5, 0.25, 1.0, 2.0]).unwrap();
    let killed = runtime(false).block_on(async {
        let target = config::resolve(&url).unwrap();
        let (client, conn) = target.config.connect(tls::connector(target.ssl, None).unwrap()).await.unwrap();
        tokio::spawn(conn);
        let sql = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1";
        client.query_one(sql, &[&app]).await.unwrap().get::<_, i64>(0)
    });
    assert_eq!(killed, 1, "the cache's one connection was ended by the server");
    let deadline = std::time::Instant::now() + embeddings::RETRY_AFTER * 5;
    let got = loop {
        let got = a.get(m, d, &[2, 1]).expect("a lost connection is never an error");
        if got.iter().all(Option::is_some) || std::time::Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(got, vec![Some(vec![1.0, 2.0]), Some(vec![0.5, 0.25])], "the rows, after connecting again");
    assert_eq!(a.reconnects, 1);
    a.put(m, d, &[3], &[3.0, 3.0]).unwrap();
    assert_eq!(a.get(m, d, &[3]).unwrap(), vec![Some(vec![3.0, 3.0])]);
}

/// A client of `url` for setting a database up by hand.
async fn client(url: &str) -> tokio_postgres::Client {
    let target = config::resolve(url).unwrap();
    let (client, conn) = target.config.connect(tls::connector(target.ssl, None).unwrap()).await.unwrap();
    tokio::spawn(conn);
    client
}

/// The SQL text of "the session holds observations" says what
/// `SessionId::holds_observations` says, for names of every kind.
#[test]
fn the_sql_rule_of_settings_sessions_is_the_rust_rule() {
    let Some(admin) = admin_url() else { return };
    runtime(false).block_on(async {
        let c = client(&admin).await;
        let sql = concat!("SELECT ", observations!(""), " FROM (SELECT $1::bytea AS session) x");
        for name in
            ["team.settings", "a.b.settings", ".settings", "team", "team.settings@2", "settings", "x.settingsy", "é.settings", "", "s\u{0}.settings", "ü"]
        {
            let got: bool = c.query_one(sql, &[&name.as_bytes()]).await.unwrap().get(0);
            assert_eq!(got, SessionId::new(name).holds_observations(), "{name:?}");
        }
    });
}

/// Observations of `cat` (`"{tag} {i}"`) whose ids begin with the first two
/// bytes of `like`'s, `n` of them.
fn with_prefix_of(like: &lam_core::ObsId, tag: &str, n: usize) -> Vec<Vec<u8>> {
    let obs = (0u64..).map(|i| format!("{tag} {i}\n").into_bytes());
    obs.filter(|o| ObsId::of(b"cat", o).0[..2] == like.0[..2]).take(n).collect()
}

/// A version 4 database whose two sessions show one id for two observations
/// (the per-session rule) migrates to version 5: the old rows keep their
/// ids, a lookup by id alone there is ambiguous rather than a guess, and new
/// rows get ids no other observation of the store shows, an observation
/// shown elsewhere keeping its id only where no other shows it.
#[test]
fn version_4_databases_keep_their_ids_and_new_rows_share_one_space() {
    let Some(admin) = admin_url() else { return };
    let (x, y) = lam_core::testsuite::colliding_pair();
    let (ix, iy) = (ObsId::of(b"cat", &x), ObsId::of(b"cat", &y));
    let old_shown = ix.hex()[..4].to_string();
    let url = runtime(false).block_on(async {
        let url = scratch(&admin, "v4").await;
        let c = client(&url).await;
        for sql in &schema::MIGRATIONS[..4] {
            c.batch_execute(sql).await.unwrap();
        }
        c.batch_execute("INSERT INTO lam_meta VALUES ('schema_version', '4')").await.unwrap();
        let insert = "INSERT INTO lam_obs (session, id, shown, action, step, tokens, bytes, head, tail, body) VALUES ($1, $2, $3, 'cat'::bytea, 0, 1, $4, ''::bytea, ''::bytea, $5)";
        for (session, id, body) in [("old-a", ix, &x), ("old-b", iy, &y)] {
            let (id, n) = (id.0.to_vec(), body.len() as i64);
            c.execute(insert, &[&session.as_bytes(), &id, &old_shown, &n, body]).await.unwrap();
        }
        url
    });
    let mut st = PgStore::connect(&url, Access::ReadWrite).unwrap();
    assert_eq!(st.info().schema_found, 4);
    let (a, b) = (sid("old-a"), sid("old-b"));
    assert_eq!(ObsStore::get(&st, &a, &old_shown).unwrap().as_deref(), Some(&x[..]));
    assert_eq!(ObsStore::get(&st, &b, &old_shown).unwrap().as_deref(), Some(&y[..]));
    let e = crate::find(&st, None, &old_shown).unwrap_err();
    assert!(matches!(e, StoreError::Ambiguous { .. }), "two old sessions show it for two observations: {e}");
    // New rows: z begins as x and y do; x again, in a new session.
    let z = with_prefix_of(&ix, "z", 1).remove(0);
    let iz = ObsId::of(b"cat", &z);
    let n = sid("new");
    let mz = ObsStore::append(&mut st, &n, &rec(0, "cat", &z, None), 1).unwrap();
    assert_eq!(mz.shown, lam_core::testsuite::expected_shown(&[ix, iy], &iz));
    let mx = ObsStore::append(&mut st, &n, &rec(1, "cat", &x, None), 1).unwrap();
    assert_eq!(mx.shown, lam_core::testsuite::expected_shown(&[iy, iz], &ix), "§{old_shown} names y too: not x's to keep");
    for m in [&mz, &mx] {
        let f = crate::find(&st, None, &m.shown).unwrap();
        assert_eq!((ObsId::of(b"cat", &f.bytes), f.sessions.clone()), (m.id, vec![n.clone()]), "§{}", m.shown);
    }
    // y, shown alone by its old id nowhere (x shows it too), gets a new one; z keeps its id in another session.
    let c = sid("new-c");
    assert_eq!(ObsStore::append(&mut st, &c, &rec(0, "cat", &z, None), 1).unwrap().shown, mz.shown);
    let my = ObsStore::append(&mut st, &c, &rec(1, "cat", &y, None), 1).unwrap();
    assert_eq!(my.shown, lam_core::testsuite::expected_shown(&[ix, iz], &iy));
    assert_eq!(crate::find(&st, None, &my.shown).unwrap().bytes, y);
}
