//! One connection: the driver's client, its prepared statements, and the
//! reason its connection task ended (so a later "connection closed" can say
//! why).

use super::Spec;
use super::schema;
use crate::StoreError;
use std::sync::{Arc, Mutex};
use tokio_postgres::{Client, Statement};

/// SQL for "the id in `col` begins with the hex prefix `p`" (4 to 40
/// lowercase hex) as a range of the primary key `(session_key, id)`: an id is
/// 20 bytes, so it begins with `p` exactly when it lies between `p` padded
/// with `0`s and `p` padded with `f`s. (`starts_with(encode(id, 'hex'), p)`
/// says the same but reads every row of the session: choosing a new id's
/// visible form took 247 ms in a session of 300,000 rows, against 0.1 ms
/// with the range, by `EXPLAIN ANALYZE` on PostgreSQL 15.)
macro_rules! prefixed {
    ($col:literal, $p:literal) => {
        concat!($col, " BETWEEN decode(rpad(", $p, ", 40, '0'), 'hex') AND decode(rpad(", $p, ", 40, 'f'), 'hex')")
    };
}

/// The first steps of an append, inside a transaction that holds its
/// session's lock: `refused`, a claim (`$12`, `ObsStore::claim`) whose
/// session's first row is another observation (under the lock, the check
/// and the insert are one step for every host); `old`, the session's row of
/// the id, when it holds it already.
macro_rules! append_head {
    () => {
        r"
WITH refused AS (
    SELECT 1 FROM (
        SELECT id FROM lam_obs WHERE session_key = sha256($1::bytea) AND session = $1 ORDER BY seq LIMIT 1
    ) f WHERE $12::bool AND f.id <> $2
), old AS (
    SELECT shown, action, returncode, step, tokens, bytes, head, tail
    FROM lam_obs WHERE session_key = sha256($1::bytea) AND session = $1 AND id = $2
    AND NOT EXISTS (SELECT 1 FROM refused)
), "
    };
}

/// The last step: insert the row with the shown id `pick` chose (unless the
/// session holds it or the claim is refused); return the new row's
/// metadata, or the first record's.
macro_rules! append_tail {
    () => {
        r"
), ins AS (
    INSERT INTO lam_obs (session, id, shown, action, returncode, step, tokens, bytes, head, tail, body)
    SELECT $1, $2, pick.p, $4, $5, $6, $7, $8, $9, $10, $11 FROM pick
    WHERE NOT EXISTS (SELECT 1 FROM old) AND NOT EXISTS (SELECT 1 FROM refused)
    RETURNING shown, action, returncode, step, tokens, bytes, head, tail
)
SELECT * FROM ins UNION ALL SELECT * FROM old"
    };
}

/// Append one observation to a session that holds observations, inside a
/// transaction that holds its session's lock and the lock of its id's
/// 4-hex prefix (`LOCK_IDS`). The shown id (`lam_core::id`, the
/// observations' space) is the one the observation shows in another session
/// (the earliest row) while no other observation shows it; else the first
/// of the candidates (`$3`: the id's hex prefixes of 4, 5, ..., 40
/// characters) with which no other observation's id of the store begins.
/// That is `StoreIds::visible` exactly, because the locks make this
/// statement the only one assigning ids of that prefix until commit.
const APPEND: &str = concat!(
    append_head!(),
    r"pick AS (
    SELECT k.p FROM (
        (SELECT t.shown AS p, 0::bigint AS o FROM lam_obs t
        WHERE t.id = $2 AND ",
    observations!("t."),
    r" AND NOT EXISTS (
            SELECT 1 FROM lam_obs u WHERE ",
    observations!("u."),
    " AND u.id <> $2 AND u.shown = t.shown AND ",
    prefixed!("u.id", "t.shown"),
    r"
        ) ORDER BY t.seq LIMIT 1)
        UNION ALL
        SELECT c.p, c.o FROM unnest($3::text[]) WITH ORDINALITY AS c(p, o)
        WHERE NOT EXISTS (SELECT 1 FROM lam_obs t WHERE ",
    observations!("t."),
    " AND t.id <> $2 AND ",
    prefixed!("t.id", "c.p"),
    r")
    ) k ORDER BY k.o LIMIT 1",
    append_tail!()
);

/// Append one record to a session that holds a run's settings (its own id
/// space), inside a transaction that holds its session's lock: the shown id
/// is the first of the candidates with which no id of the session begins,
/// which is `IdBook::visible` exactly, because the lock makes this
/// statement the only one assigning ids in the session until commit.
const APPEND_OWN: &str = concat!(
    append_head!(),
    r"pick AS (
    SELECT c.p FROM unnest($3::text[]) WITH ORDINALITY AS c(p, o)
    WHERE NOT EXISTS (SELECT 1 FROM lam_obs t WHERE t.session_key = sha256($1::bytea) AND t.session = $1 AND ",
    prefixed!("t.id", "c.p"),
    r")
    ORDER BY c.o LIMIT 1",
    append_tail!()
);

/// The advisory locks `$1, k` for every `k` of `$2` (sorted), in that order
/// (the rows of `unnest` come in the array's order).
const LOCKS: &str = "SELECT pg_advisory_xact_lock($1, k) FROM unnest($2::int4[]) AS k";
/// The row a visible id (`$2`, checked to be 4 to 40 lowercase hex) names:
/// the row showing it, else the earliest of the session whose id begins with
/// it (`lam_core::id`: a longer prefix, or an id of an earlier build).
macro_rules! resolve {
    () => {
        concat!(
            "FROM lam_obs WHERE session_key = sha256($1::bytea) AND session = $1 AND (shown = $2 OR ",
            prefixed!("id", "$2"),
            ") ORDER BY shown = $2 DESC, seq LIMIT 1"
        )
    };
}
const GET: &str = concat!("SELECT id, action, body ", resolve!());
const META: &str = concat!("SELECT shown, action, returncode, step, tokens, bytes, head, tail, id ", resolve!());
const IDS: &str = "SELECT shown FROM lam_obs WHERE session_key = sha256($1::bytea) AND session = $1 ORDER BY seq";
/// The ids after the one shown as `$2` (all when it is null or not there),
/// by the `(session_key, seq)` index: only the rows after it are read.
const IDS_AFTER: &str = r"
SELECT shown FROM lam_obs WHERE session_key = sha256($1::bytea) AND session = $1
AND seq > COALESCE((SELECT seq FROM lam_obs WHERE session_key = sha256($1::bytea) AND session = $1 AND shown = $2), 0)
ORDER BY seq";
/// Distinct sessions by a skip scan of the primary key's `session_key` (one
/// index probe per session, not a scan of every row), then each key's name;
/// sorted by name in Rust.
const SESSIONS: &str = r"
WITH RECURSIVE s(k) AS (
    (SELECT session_key FROM lam_obs ORDER BY session_key LIMIT 1)
    UNION ALL
    SELECT (SELECT t.session_key FROM lam_obs t WHERE t.session_key > s.k ORDER BY t.session_key LIMIT 1)
    FROM s WHERE s.k IS NOT NULL
)
SELECT (SELECT o.session FROM lam_obs o WHERE o.session_key = s.k LIMIT 1) FROM s WHERE s.k IS NOT NULL";

/// Prepared statements of one connection.
#[derive(Debug)]
pub(crate) struct Stmts {
    pub append: Statement,
    pub append_own: Statement,
    pub locks: Statement,
    pub get: Statement,
    pub meta: Statement,
    pub ids: Statement,
    pub ids_after: Statement,
    pub sessions: Statement,
}

/// A live connection.
pub(crate) struct Conn {
    pub client: Client,
    pub st: Stmts,
    /// The schema version found on connect (before any migration).
    pub schema_found: i64,
    /// Why the connection task ended, once it has.
    died: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("closed", &self.client.is_closed()).finish_non_exhaustive()
    }
}

impl Conn {
    /// Connect (on the current tokio runtime), check or create the schema,
    /// and prepare the statements. `create`: migrate a missing or older
    /// schema (read-write); otherwise it must already be current and the
    /// session is read-only.
    pub async fn open(spec: &Spec, create: bool) -> Result<Conn, StoreError> {
        let (mut client, connection) = spec.target.config.connect(spec.tls.clone()).await.map_err(|e| spec.err("connect", &e))?;
        let died = Arc::new(Mutex::new(None));
        let slot = died.clone();
        spec.driving(tokio::spawn(async move {
            if let Err(e) = connection.await
                && let Ok(mut s) = slot.lock()
            {
                *s = Some(super::describe(&e));
            }
        }));
        if !create {
            client.batch_execute("SET default_transaction_read_only = on").await.map_err(|e| spec.err("connect", &e))?;
        }
        let schema_found = schema::ensure(&mut client, &spec.target.shown, create).await?;
        let st = Stmts {
            append: prepare(spec, &client, APPEND).await?,
            append_own: prepare(spec, &client, APPEND_OWN).await?,
            locks: prepare(spec, &client, LOCKS).await?,
            get: prepare(spec, &client, GET).await?,
            meta: prepare(spec, &client, META).await?,
            ids: prepare(spec, &client, IDS).await?,
            ids_after: prepare(spec, &client, IDS_AFTER).await?,
            sessions: prepare(spec, &client, SESSIONS).await?,
        };
        Ok(Conn { client, st, schema_found, died })
    }

    /// True when this connection can no longer be used: the client is closed,
    /// or `e` says the server is going away or not there.
    pub fn lost(&self, e: &tokio_postgres::Error) -> bool {
        self.client.is_closed() || lost(e)
    }

    /// The reason the connection task ended, if it has.
    pub fn death(&self) -> Option<String> {
        self.died.lock().ok().and_then(|d| d.clone())
    }
}

/// Errors after which a new connection may succeed: the connection closed or
/// broke, the server shut down or crashed, or is still starting up.
pub(crate) fn lost(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(c) => [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN, SqlState::CANNOT_CONNECT_NOW].contains(c) || c.code().starts_with("08"),
        // No SQLSTATE: an I/O, TLS or protocol failure of the connection itself.
        None => e.as_db_error().is_none() && std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()),
    }
}

/// Errors after which the same transaction may succeed when simply run again.
pub(crate) fn transient(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| [SqlState::T_R_SERIALIZATION_FAILURE, SqlState::T_R_DEADLOCK_DETECTED, SqlState::UNIQUE_VIOLATION].contains(c))
}

async fn prepare(spec: &Spec, client: &Client, sql: &str) -> Result<Statement, StoreError> {
    client.prepare(sql).await.map_err(|e| spec.err("prepare", &e))
}
