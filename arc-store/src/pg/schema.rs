//! The versioned schema: created on the first read-write connect, migrated
//! forward one version at a time, refused when newer than this build.
//!
//! Every migration runs inside one transaction that first takes a
//! transaction-scoped advisory lock, so concurrent first connects (eight
//! workers starting at once) serialise: one creates, the others find the
//! current version and do nothing. The tables live in the first schema of
//! the connection's `search_path` (normally `public`; set another with
//! `?options=-csearch_path%3Dname` in the URL).
//!
//! Version 1 (see `docs/postgres.md`):
//!
//! - `lam_meta(key, value)`: `schema_version` and nothing else yet.
//! - `lam_obs`: one row per (session, observation), keyed by the session's
//!   bytes and the full SHA-1; `shown` unique per session; every column of
//!   `ObsMeta` plus the body; `seq` gives creation order.
//!
//! Version 2: the keys and the index use `session_key`, a stored
//! `sha256(session)`, instead of the session's bytes, so a session name of
//! any length fits a btree row (the file store accepts any name; so must
//! this one). Every lookup is `session_key = sha256($1) AND session = $1`.
//!
//! Version 3: visible ids of 4 to 40 hex (the `shown` check relaxed).
//!
//! Version 4: `lam_embeddings`, the embedding cache replicas share
//! (`PgEmbeddings`): one row per (model, chunk key), the vector's bytes and
//! a checksum.
//!
//! Version 5: one id space for the observations of every session
//! (`lam_core::id`): `lam_obs_observation_id`, an index of the ids of rows
//! whose session holds observations, so a new row's shown id is chosen
//! against every observation of the store by a range of ids. Rows written
//! before keep their shown ids.

use crate::StoreError;
use tokio_postgres::{Client, GenericClient};

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 5;

/// `MIGRATIONS[v]` takes a database from version `v` to `v + 1` (0: no lam tables).
pub(crate) const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [V1, V2, V3, V4, V5];

pub(crate) const V1: &str = r"
CREATE TABLE lam_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE lam_obs (
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    session    bytea       NOT NULL,
    id         bytea       NOT NULL CHECK (octet_length(id) = 20),
    shown      text        NOT NULL CHECK (shown ~ '^[0-9a-f]{8}([0-9a-f]{4}){0,8}$'),
    action     bytea       NOT NULL,
    returncode integer,
    step       bigint      NOT NULL CHECK (step BETWEEN 0 AND 4294967295),
    tokens     bigint      NOT NULL CHECK (tokens BETWEEN 0 AND 4294967295),
    bytes      bigint      NOT NULL CHECK (bytes = octet_length(body)),
    head       bytea       NOT NULL,
    tail       bytea       NOT NULL,
    body       bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, id),
    UNIQUE (session, shown)
);
CREATE INDEX lam_obs_session_seq ON lam_obs (session, seq);
COMMENT ON TABLE lam_obs IS 'lam archive (ARC): append-only; one row per (session, observation); written only through arc-store PgStore';
";

const V2: &str = r"
ALTER TABLE lam_obs ADD COLUMN session_key bytea GENERATED ALWAYS AS (sha256(session)) STORED;
ALTER TABLE lam_obs DROP CONSTRAINT lam_obs_pkey;
ALTER TABLE lam_obs DROP CONSTRAINT lam_obs_session_shown_key;
DROP INDEX lam_obs_session_seq;
ALTER TABLE lam_obs ADD CONSTRAINT lam_obs_pkey PRIMARY KEY (session_key, id);
ALTER TABLE lam_obs ADD CONSTRAINT lam_obs_session_shown_key UNIQUE (session_key, shown);
CREATE INDEX lam_obs_session_seq ON lam_obs (session_key, seq);
";

/// Version 3: visible ids are the shortest prefix of 4 or more hex with
/// which no earlier id of the session begins (`lam_core::id`); rows written
/// before keep their 8- or 12-hex ids, which still resolve.
const V3: &str = r"
ALTER TABLE lam_obs DROP CONSTRAINT lam_obs_shown_check;
ALTER TABLE lam_obs ADD CONSTRAINT lam_obs_shown_check CHECK (shown ~ '^[0-9a-f]{4,40}$');
";

/// Version 4: the shared embedding cache.
const V4: &str = r"
CREATE TABLE lam_embeddings (
    model      text        NOT NULL,
    key        bytea       NOT NULL CHECK (octet_length(key) = 16),
    dim        integer     NOT NULL CHECK (dim > 0),
    vec        bytea       NOT NULL,
    sum        bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, key)
);
COMMENT ON TABLE lam_embeddings IS 'lam embedding cache: one row per (model, chunk content key); written only through arc-store PgEmbeddings; rows are checked on read';
";

/// Version 5: the observations' ids, store-wide (the rows of runs'
/// settings sessions left out: their ids are per session).
const V5: &str = concat!("CREATE INDEX lam_obs_observation_id ON lam_obs (id) WHERE ", observations!(""), ";");

/// First key of every advisory lock lam takes ("LAM" + 0): the second key is
/// 0 for the schema lock.
pub(crate) const LOCK_SCHEMA: i32 = 0x4C41_4D00;
/// First key of the per-session shown-id locks ("LAM" + 1); the second key is
/// a hash of the session.
pub(crate) const LOCK_SESSION: i32 = 0x4C41_4D01;
/// First key of the shown-id locks of the observations' space ("LAM" + 2);
/// the second key is the first two bytes of an id (its 4-hex prefix), the
/// only ids its shown id depends on.
pub(crate) const LOCK_IDS: i32 = 0x4C41_4D02;

/// The schema version of the database `c` is connected to (0: no lam tables).
pub(crate) async fn version(c: &impl GenericClient) -> Result<i64, String> {
    // pg_class through a fresh snapshot, not to_regclass: its cache may
    // still say "no such table" just after another connect created it.
    let row = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname = 'lam_meta' AND n.nspname = current_schema())",
            &[],
        )
        .await
        .map_err(|e| super::describe(&e))?;
    let exists: bool = row.try_get(0).map_err(|e| super::describe(&e))?;
    if !exists {
        return Ok(0);
    }
    let row = c.query_opt("SELECT value FROM lam_meta WHERE key = 'schema_version'", &[]).await.map_err(|e| super::describe(&e))?;
    let Some(row) = row else { return Err("table lam_meta exists but holds no schema_version".into()) };
    let v: String = row.try_get(0).map_err(|e| super::describe(&e))?;
    v.trim().parse::<i64>().map_err(|_| format!("lam_meta.schema_version is `{v}`, not a number"))
}

/// Bring the database to [`SCHEMA_VERSION`] (read-write) or check that it is
/// there (read-only). Returns the version found before any migration.
pub(crate) async fn ensure(c: &mut Client, target: &str, create: bool) -> Result<i64, StoreError> {
    let fail = |reason: String| StoreError::Postgres { target: target.into(), op: "schema", reason };
    let too_new = |found| StoreError::Schema { target: target.into(), found: Some(found), supported: SCHEMA_VERSION };
    let found = version(c).await.map_err(fail)?;
    if found == SCHEMA_VERSION {
        return Ok(found);
    }
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    if !create {
        return Err(StoreError::Schema { target: target.into(), found: (found > 0).then_some(found), supported: SCHEMA_VERSION });
    }
    let tx = c.transaction().await.map_err(|e| fail(super::describe(&e)))?;
    tx.execute("SELECT pg_advisory_xact_lock($1, 0)", &[&LOCK_SCHEMA]).await.map_err(|e| fail(super::describe(&e)))?;
    // Another connect may have migrated while we waited for the lock.
    let now = version(&tx).await.map_err(fail)?;
    if now > SCHEMA_VERSION {
        return Err(too_new(now));
    }
    for (v, sql) in MIGRATIONS.iter().enumerate().skip(now as usize) {
        tx.batch_execute(sql).await.map_err(|e| fail(format!("migrating to version {}: {}", v + 1, super::describe(&e))))?;
    }
    tx.execute(
        "INSERT INTO lam_meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        &[&SCHEMA_VERSION.to_string()],
    )
    .await
    .map_err(|e| fail(super::describe(&e)))?;
    tx.commit().await.map_err(|e| fail(super::describe(&e)))?;
    Ok(found)
}
