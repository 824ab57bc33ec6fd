//! The server crashes (`pg_ctl stop -m immediate`) and comes back while
//! writers run. A test binary of its own, so that no other test is using the
//! server when it goes down (cargo runs test binaries one at a time).
//! Needs `LAM_TEST_PG_URL` and `LAM_TEST_PG_CTL` (a `pg_ctl` for the test
//! cluster), both set by `scripts/test-postgres.sh`.

mod pgcommon;

use arc_store::{Access, PgStore};
use pgcommon::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn child_entry() {
    child_main();
}

fn pg_ctl(args: &[&str]) {
    let ctl = std::env::var("LAM_TEST_PG_CTL").unwrap();
    let out = Command::new(&ctl).args(args).output().unwrap_or_else(|e| panic!("{ctl}: {e}"));
    assert!(out.status.success(), "pg_ctl {args:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// Six writers run while the server is killed and, three seconds later,
/// started again. Four may reconnect for 30 s and must carry on; two may
/// reconnect for only one second and must stop with a clear error. Nothing
/// acknowledged is lost, and nothing half-written is visible.
#[test]
fn server_crash_and_restart_while_writing() {
    let Some(admin) = admin_url() else { return };
    if std::env::var("LAM_TEST_PG_CTL").is_err() {
        assert!(std::env::var("LAM_REQUIRE_PG").as_deref() != Ok("1"), "LAM_REQUIRE_PG=1 but LAM_TEST_PG_CTL is not set");
        eprintln!("SKIPPED: LAM_TEST_PG_CTL is not set (a pg_ctl for the test server)");
        return;
    }
    let pw = password(&admin);
    let db = Scratch::new(&admin, "restart");
    // A reader connected before the crash must reconnect after it.
    let store = PgStore::connect(&db.url, Access::ReadWrite).unwrap();
    let patient = [("LAM_PG_CHILD_DELAY_MS", "2".to_string())];
    let hasty = [("LAM_PG_CHILD_DELAY_MS", "2".to_string()), ("LAM_PG_CHILD_RECONNECT_MS", "1000".into())];
    let mut writers: Vec<Writer> = (0..6).map(|k| Writer::spawn(&db.url, k, if k < 4 { &patient } else { &hasty })).collect();
    for w in &writers {
        assert!(w.wait_for(20, Duration::from_secs(60)), "no progress before the crash: {:?}", w.said.lock().unwrap().errors);
    }
    pg_ctl(&["stop", "-m", "immediate"]);
    let before: Vec<usize> = writers.iter().map(Writer::acks).collect();
    std::thread::sleep(Duration::from_secs(3));
    pg_ctl(&["start"]);
    let restarted = Instant::now();
    for (k, w) in writers.iter().enumerate().take(4) {
        assert!(w.wait_for(before[k] + 20, Duration::from_secs(60)), "writer {k} did not carry on after the restart: {:?}", w.said.lock().unwrap().errors);
    }
    eprintln!("patient writers carried on {:?} after the restart", restarted.elapsed());
    let mut acks = Vec::new();
    for (k, mut w) in writers.drain(..).enumerate() {
        if k < 4 {
            w.kill();
        }
        let (st, said) = w.finish();
        if k < 4 {
            assert!(said.errors.is_empty(), "writer {k}: {:?}", said.errors);
        } else {
            assert_eq!(st.code(), Some(3), "writer {k} should have given up");
            let e = said.errors.first().unwrap_or_else(|| panic!("writer {k} gave up without a message"));
            assert!(e.contains("postgres://lam@127.0.0.1:") && e.contains("connection lost") && e.contains("not reconnected within"), "{e}");
            assert!(!e.contains(&pw), "password in message: {e}");
        }
        acks.extend(said.acks);
    }
    check_acks(&store, &acks, false);
    let counts = check_integrity(&store);
    assert!(store.stats().reconnects >= 1, "the reader reconnected: {:?}", store.stats());
    eprintln!("{} acknowledged appends, sessions {counts:?}", acks.len());
}
