//! `PgStore`: the archive in a PostgreSQL database (feature `postgres`), so
//! agents on many hosts share one archive and one id space.
//!
//! - **Schema**: versioned (`lam_meta.schema_version`), created or migrated
//!   on the first read-write connect under an advisory lock; a database whose
//!   schema is newer than this build is refused ([`StoreError::Schema`]).
//! - **Appends** are content-addressed and idempotent: one row per (session,
//!   full SHA-1), from any number of processes; the same observation appended
//!   again returns the first record's metadata. Shown ids follow
//!   `lam_core::id`: the observations of every session share one id space
//!   (an observation shown elsewhere keeps that id while no other shows it;
//!   else the shortest prefix, 4 hex or more, with which no other
//!   observation's id of the store begins; rows written before schema
//!   version 5 keep their per-session ids and count as taken); a run's
//!   settings session is a space of its own. Each transaction takes its
//!   sessions' advisory locks and then one lock per 4-hex prefix of its
//!   observations' ids, all in one fixed order, so ids beginning alike are
//!   assigned one at a time, in commit order, by every writer alike; a
//!   unique constraint on (session, shown) guards each session.
//! - **Group commit**: appends from every thread or task sharing a handle
//!   (clones share it) are inserted in one transaction per batch, and each
//!   returns only after that transaction committed; under concurrent load
//!   up to four writing connections overlap their commits ([`PgOptions`]).
//! - **Sessions**: every read names its session; an id resolves to the row
//!   of that session showing it, else the earliest whose id begins with it.
//! - **Bytes** are `bytea`: invalid UTF-8, NUL bytes, anything, exactly; a
//!   recalled body is checked against its SHA-1.
//! - **Credentials** come from the URL or the usual `PG*` variables and never
//!   appear in a message: errors name the target as `postgres://user@host:port/db`.
//! - **TLS** through rustls, with libpq's `sslmode` (`disable`, `prefer`
//!   (default), `require`, `verify-ca`, `verify-full`) and `sslrootcert`.
//!
//! # Sync and async
//!
//! [`PgStore::connect`] is for synchronous code: it starts a private tokio
//! runtime (one worker thread) that drives the connections, and the
//! [`ObsStore`] methods wait for it. [`PgStore::connect_async`] is for async
//! code (a proxy on axum, say): it spawns the connections and the writer on
//! the caller's runtime and creates no runtime of its own, and the `*_async`
//! methods never block a thread. A handle made by `connect_async` may still
//! be used through [`ObsStore`] from a thread outside any runtime or from a
//! multi-threaded runtime (through `block_in_place`); on a current-thread
//! runtime that would deadlock, so it is an error there.

/// SQL for "the row `$t` belongs to a session that holds observations":
/// `lam_core::SessionId::holds_observations` over the name's bytes (a name
/// `RUN.settings`, `RUN` not empty, holds a run's settings). The schema's
/// index of the observations' ids (version 5) and the statements that use
/// it write this same text, so the planner matches them; a test checks it
/// against the Rust rule.
macro_rules! observations {
    ($t:literal) => {
        concat!("NOT (octet_length(", $t, "session) > 9 AND substring(", $t, "session FROM octet_length(", $t, "session) - 8) = '.settings'::bytea)")
    };
}

mod config;
mod conn;
mod embeddings;
mod schema;
mod tls;
mod writer;

pub use embeddings::PgEmbeddings;
pub use schema::SCHEMA_VERSION;

use crate::open::redact;
use crate::{Access, StoreError};
use conn::Conn;
use lam_core::{Error, ObsId, ObsMeta, ObsStore, Record, SessionId};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres_rustls::MakeRustlsConnect;
use writer::{BACKOFF_MAX, BACKOFF_START, Insert, Job};

/// How a [`PgStore`] connects and commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgOptions {
    /// Read-write (creates or migrates the schema; appends allowed) or
    /// read-only (the schema must already be current; the database session is
    /// read-only).
    pub access: Access,
    /// Most writing connections (default 4). A store starts with one and
    /// opens another whenever appends wait while every writer is busy, so
    /// commits overlap under concurrent load; 1 commits one batch at a time.
    pub writers: usize,
    /// Most appends committed in one transaction (default 256).
    pub max_batch: usize,
    /// A batch closes once its bodies reach this many bytes (default 16 MiB).
    pub max_batch_bytes: usize,
    /// How long a batch waits for more appends after its first (default 0:
    /// it takes what is queued; appends that arrive during a commit form the
    /// next batch, so concurrent writers share commits anyway).
    pub max_delay: Duration,
    /// After a lost connection, how long reconnecting is retried before the
    /// waiting calls fail (default 30 s).
    pub reconnect_for: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            access: Access::ReadWrite,
            writers: 4,
            max_batch: 256,
            max_batch_bytes: 16 << 20,
            max_delay: Duration::ZERO,
            reconnect_for: Duration::from_secs(30),
        }
    }
}

/// What connecting found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgInfo {
    /// The target as `postgres://user@host:port/db` (never a password).
    pub target: String,
    /// The server's `server_version`.
    pub server_version: String,
    /// Whether the reading connection is encrypted (TLS).
    pub tls: bool,
    /// The schema version before this connect (0: none; this connect created it).
    pub schema_found: i64,
}

/// Counters of the writer since connect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgStats {
    /// Transactions committed.
    pub commits: u64,
    /// Appends acknowledged.
    pub appends: u64,
    /// Largest number of appends in one commit.
    pub largest_batch: u64,
    /// Batches run again (lost connection, deadlock, serialisation failure).
    pub retries: u64,
    /// Batches that failed and were committed one append at a time.
    pub splits: u64,
    /// Connections re-established (writing and reading).
    pub reconnects: u64,
    /// Writing connections open or opening now.
    pub writers: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    commits: AtomicU64,
    appends: AtomicU64,
    largest_batch: AtomicU64,
    retries: AtomicU64,
    splits: AtomicU64,
    reconnects: AtomicU64,
}

/// Connection target and TLS connector, shared by every connection of a store.
pub(crate) struct Spec {
    target: config::Target,
    tls: MakeRustlsConnect,
    /// The connections' driver tasks, so a closing store can let each one
    /// say goodbye to the server instead of vanishing.
    drivers: Drivers,
}

type Drivers = Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>;

impl Spec {
    /// The target `url` names and its TLS connector.
    fn new(url: &str, drivers: Drivers) -> Result<Self, StoreError> {
        let target = config::resolve(url)?;
        let tls = tls::connector(target.ssl, target.root_cert.as_deref()).map_err(|reason| StoreError::Postgres {
            target: target.shown.clone(),
            op: "TLS set-up",
            reason,
        })?;
        Ok(Spec { target, tls, drivers })
    }

    /// Remember a connection's driver task.
    fn driving(&self, task: tokio::task::JoinHandle<()>) {
        let mut d = self.drivers.lock().unwrap_or_else(|p| p.into_inner());
        d.retain(|t| !t.is_finished());
        d.push(task);
    }
}

impl Spec {
    /// A driver error as a [`StoreError`], password scrubbed.
    fn err(&self, op: &'static str, e: &tokio_postgres::Error) -> StoreError {
        self.fail(op, &describe(e))
    }

    fn fail(&self, op: &'static str, reason: &str) -> StoreError {
        StoreError::Postgres { target: self.target.shown.clone(), op, reason: self.target.scrub(reason) }
    }

    /// The server out of reach for `op` ([`StoreError::Unavailable`]), password scrubbed.
    fn unavailable(&self, op: &'static str, reason: &str) -> StoreError {
        StoreError::Unavailable { target: self.target.shown.clone(), op, reason: self.target.scrub(reason) }
    }
}

/// A driver error with its causes (the driver's own message names only the kind).
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    if let Some(db) = e.as_db_error() {
        s.push_str(&format!(" (SQLSTATE {})", db.code().code()));
    }
    s
}

/// The archive in a PostgreSQL database. Cheap to clone: clones share the
/// connections and the group-commit writer.
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
    handle: Handle,
    /// `Some` for [`PgStore::connect`]: the runtime the connections run on,
    /// dropped with the last handle (never by a task running on it).
    rt: Option<Arc<PrivateRuntime>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("target", &self.shared.info.target).field("access", &self.shared.opts.access).finish_non_exhaustive()
    }
}

struct Shared {
    spec: Arc<Spec>,
    opts: PgOptions,
    info: PgInfo,
    writer: Option<(Arc<writer::Pool>, mpsc::Sender<Job>)>,
    reader: Mutex<Arc<Conn>>,
    reconnecting: tokio::sync::Mutex<()>,
    stats: Arc<Counters>,
}

struct PrivateRuntime {
    rt: Option<Runtime>,
    drivers: Drivers,
}

impl Drop for PrivateRuntime {
    fn drop(&mut self) {
        let Some(rt) = self.rt.take() else { return };
        // Waiting is not allowed inside async code.
        if Handle::try_current().is_ok() {
            rt.shutdown_background();
            return;
        }
        // The last handle is gone, so every client is (or is about to be)
        // dropped: let each connection send its Terminate and finish, rather
        // than leave a "connection reset" in the server's log.
        let drivers = std::mem::take(&mut *self.drivers.lock().unwrap_or_else(|p| p.into_inner()));
        rt.block_on(async {
            let all = async {
                for d in drivers {
                    let _ = d.await;
                }
            };
            let _ = tokio::time::timeout(Duration::from_millis(500), all).await;
        });
        rt.shutdown_timeout(Duration::from_millis(100));
    }
}

impl PgStore {
    /// Connect from synchronous code (starts a private runtime), creating or
    /// migrating the schema when `access` is read-write.
    pub fn connect(url: &str, access: Access) -> Result<Self, StoreError> {
        Self::connect_with(url, PgOptions { access, ..PgOptions::default() })
    }

    /// [`PgStore::connect`] with options.
    pub fn connect_with(url: &str, opts: PgOptions) -> Result<Self, StoreError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("arc-store-pg")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Postgres { target: redact(url), op: "start runtime", reason: e.to_string() })?;
        let handle = rt.handle().clone();
        let drivers = Drivers::default();
        let rt = Arc::new(PrivateRuntime { rt: Some(rt), drivers: drivers.clone() });
        let url = url.to_string();
        let shown = redact(&url);
        let shared = wait(&handle, &shown, async move { Shared::start(&url, opts, drivers).await.map(Arc::new) })?;
        Ok(PgStore { shared, handle, rt: Some(rt) })
    }

    /// Connect from async code: the connections and the writer run on the
    /// current tokio runtime (which must have its I/O and time drivers
    /// enabled); no runtime is created.
    pub async fn connect_async(url: &str, access: Access) -> Result<Self, StoreError> {
        Self::connect_async_with(url, PgOptions { access, ..PgOptions::default() }).await
    }

    /// [`PgStore::connect_async`] with options.
    pub async fn connect_async_with(url: &str, opts: PgOptions) -> Result<Self, StoreError> {
        let handle = Handle::try_current().map_err(|_| StoreError::Spec {
            spec: redact(url),
            reason: "PgStore::connect_async must run inside a tokio runtime (use PgStore::connect from synchronous code)".into(),
        })?;
        let shared = Arc::new(Shared::start(url, opts, Drivers::default()).await?);
        Ok(PgStore { shared, handle, rt: None })
    }

    /// What connecting found (target, server version, TLS, schema).
    pub fn info(&self) -> &PgInfo {
        &self.shared.info
    }

    /// The writer's counters so far.
    pub fn stats(&self) -> PgStats {
        let c = &self.shared.stats;
        PgStats {
            commits: c.commits.load(Ordering::Relaxed),
            appends: c.appends.load(Ordering::Relaxed),
            largest_batch: c.largest_batch.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            splits: c.splits.load(Ordering::Relaxed),
            reconnects: c.reconnects.load(Ordering::Relaxed),
            writers: self.shared.writer.as_ref().map_or(0, |(p, _)| p.writers() as u64),
        }
    }

    /// Archive `record` in `session`; returns after the commit that stored it
    /// (or found it already stored). See [`ObsStore::append`].
    pub async fn append_async(&self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, StoreError> {
        self.shared.append(Insert::new(session, record, tokens)?).await
    }

    /// Claim `session` with `record` as its first observation; see [`ObsStore::claim`].
    pub async fn claim_async(&self, session: &SessionId, record: &Record, tokens: u32) -> Result<Option<ObsMeta>, StoreError> {
        self.shared.submit(Insert::new(session, record, tokens)?.claiming()).await
    }

    /// Exact bytes of the observation shown as `shown` in `session`.
    pub async fn get_async(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.shared.get(session.0.as_bytes().to_vec(), shown.to_string()).await
    }

    /// Metadata of the observation shown as `shown` in `session`.
    pub async fn meta_async(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, StoreError> {
        self.shared.meta(session.0.as_bytes().to_vec(), shown.to_string()).await
    }

    /// Shown ids of `session`, in creation order.
    pub async fn ids_async(&self, session: &SessionId) -> Result<Vec<String>, StoreError> {
        self.shared.ids(session.0.as_bytes().to_vec()).await
    }

    /// Shown ids of `session` created after the one shown as `after` ([`ObsStore::ids_after`]).
    pub async fn ids_after_async(&self, session: &SessionId, after: Option<&str>) -> Result<Vec<String>, StoreError> {
        self.shared.ids_after(session.0.as_bytes().to_vec(), after.map(str::to_string)).await
    }

    /// Sessions holding at least one observation, sorted by their bytes.
    pub async fn sessions_async(&self) -> Result<Vec<SessionId>, StoreError> {
        self.shared.sessions().await
    }

    /// Run `fut` on the store's runtime and wait for it on this thread.
    fn block<T: Send + 'static>(&self, fut: impl Future<Output = Result<T, StoreError>> + Send + 'static) -> Result<T, StoreError> {
        if self.rt.is_none()
            && let Ok(h) = Handle::try_current()
        {
            if h.runtime_flavor() == RuntimeFlavor::MultiThread {
                return tokio::task::block_in_place(|| wait(&self.handle, &self.shared.info.target, fut));
            }
            return Err(self.shared.spec.fail(
                "blocking call",
                "a PgStore made by connect_async was used through the blocking ObsStore methods on a current-thread runtime, which would deadlock; use the *_async methods",
            ));
        }
        wait(&self.handle, &self.shared.info.target, fut)
    }
}

/// Spawn `fut` on `handle` and wait for its result on this thread (the
/// runtime's own threads keep driving the connections meanwhile).
fn wait<T: Send + 'static>(handle: &Handle, target: &str, fut: impl Future<Output = Result<T, StoreError>> + Send + 'static) -> Result<T, StoreError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .unwrap_or_else(|_| Err(StoreError::Postgres { target: target.to_string(), op: "wait", reason: "the store's runtime stopped before answering".into() }))
}

impl Shared {
    async fn start(url: &str, opts: PgOptions, drivers: Drivers) -> Result<Shared, StoreError> {
        let spec = Arc::new(Spec::new(url, drivers)?);
        let stats = Arc::new(Counters::default());
        // The first writer connects first: it creates or migrates the schema the reader checks.
        let writer_conn = match opts.access {
            Access::ReadWrite => Some(Conn::open(&spec, true).await?),
            Access::ReadOnly => None,
        };
        let schema_found = writer_conn.as_ref().map(|c| c.schema_found);
        let reader = Conn::open(&spec, false).await?;
        let row = reader
            .client
            .query_one("SELECT current_setting('server_version'), coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)", &[])
            .await
            .map_err(|e| spec.err("connect", &e))?;
        let info = PgInfo {
            target: spec.target.shown.clone(),
            server_version: row.try_get(0).map_err(|e| spec.err("connect", &e))?,
            tls: row.try_get(1).map_err(|e| spec.err("connect", &e))?,
            schema_found: schema_found.unwrap_or(reader.schema_found),
        };
        let writer = writer_conn.map(|c| writer::Pool::start(spec.clone(), opts, stats.clone(), c));
        Ok(Shared { spec, opts, info, writer, reader: Mutex::new(Arc::new(reader)), reconnecting: tokio::sync::Mutex::new(()), stats })
    }

    async fn append(&self, ins: Insert) -> Result<ObsMeta, StoreError> {
        self.submit(ins).await?.ok_or_else(|| self.spec.fail("append", "the commit returned no row"))
    }

    /// Queue `ins` for the writers and wait for its commit (`None`: a claim refused).
    async fn submit(&self, ins: Insert) -> Result<Option<ObsMeta>, StoreError> {
        let Some((pool, w)) = &self.writer else {
            return Err(StoreError::ReadOnlyStore { store: self.info.target.clone() });
        };
        let (reply, rx) = oneshot::channel();
        let stopped = || self.spec.fail("append", "the writer stopped");
        pool.sending();
        if w.send(Job { ins, reply }).await.is_err() {
            pool.unsent();
            return Err(stopped());
        }
        rx.await.map_err(|_| stopped())?
    }

    async fn get(&self, session: Vec<u8>, shown: String) -> Result<Option<Vec<u8>>, StoreError> {
        if !lam_core::is_shown_form(&shown) {
            return Ok(None);
        }
        let row = self.read("get", |c| query_opt(c, Q::Get, vec![Box::new(session.clone()), Box::new(shown.clone())])).await?;
        let Some(row) = row else { return Ok(None) };
        let checked = (|| -> Result<Vec<u8>, String> {
            let id = obs_id(&row, 0)?;
            let action: Vec<u8> = row.try_get(1).map_err(|e| describe(&e))?;
            let body: Vec<u8> = row.try_get(2).map_err(|e| describe(&e))?;
            let actual = ObsId::of(&action, &body);
            if actual != id {
                return Err(format!("stored id {} but the stored content hashes to {}: the row was altered outside lam", id.hex(), actual.hex()));
            }
            Ok(body)
        })();
        checked.map(Some).map_err(|e| self.spec.fail("get", &format!("§{shown} in session {}: {e}", String::from_utf8_lossy(&session))))
    }

    async fn meta(&self, session: Vec<u8>, shown: String) -> Result<Option<ObsMeta>, StoreError> {
        if !lam_core::is_shown_form(&shown) {
            return Ok(None);
        }
        let row = self.read("meta", |c| query_opt(c, Q::Meta, vec![Box::new(session.clone()), Box::new(shown.clone())])).await?;
        let Some(row) = row else { return Ok(None) };
        obs_id(&row, 8).and_then(|id| meta_of(&row, id)).map(Some).map_err(|e| self.spec.fail("meta", &format!("§{shown}: {e}")))
    }

    async fn ids(&self, session: Vec<u8>) -> Result<Vec<String>, StoreError> {
        let rows = self.read("ids", |c| query(c, Q::Ids, vec![Box::new(session.clone())])).await?;
        rows.iter().map(|r| r.try_get::<_, String>(0).map_err(|e| self.spec.err("ids", &e))).collect()
    }

    async fn ids_after(&self, session: Vec<u8>, after: Option<String>) -> Result<Vec<String>, StoreError> {
        let rows = self.read("ids", |c| query(c, Q::IdsAfter, vec![Box::new(session.clone()), Box::new(after.clone())])).await?;
        rows.iter().map(|r| r.try_get::<_, String>(0).map_err(|e| self.spec.err("ids", &e))).collect()
    }

    async fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        let rows = self.read("sessions", |c| query(c, Q::Sessions, Vec::new())).await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let b: Vec<u8> = r.try_get(0).map_err(|e| self.spec.err("sessions", &e))?;
            let name = String::from_utf8(b).map_err(|e| self.spec.fail("sessions", &format!("a session name is not UTF-8: {:?}", e.as_bytes())))?;
            out.push(SessionId(name));
        }
        out.sort();
        Ok(out)
    }

    /// Run a read on the reading connection; after a lost connection,
    /// reconnect (for up to `reconnect_for`) and run it again.
    async fn read<T, F, Fut>(&self, op: &'static str, f: F) -> Result<T, StoreError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let deadline = Instant::now() + self.opts.reconnect_for;
        let mut conn = self.current_reader();
        loop {
            match f(conn.clone()).await {
                Ok(v) => return Ok(v),
                Err(e) if conn.lost(&e) && Instant::now() < deadline => conn = self.reconnect(&conn, deadline, op, &e).await?,
                Err(e) if conn.lost(&e) => return Err(self.spec.unavailable(op, &format!("connection lost: {}", describe(&e)))),
                Err(e) => return Err(self.spec.err(op, &e)),
            }
        }
    }

    fn current_reader(&self) -> Arc<Conn> {
        self.reader.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn reconnect(&self, failed: &Arc<Conn>, deadline: Instant, op: &'static str, first: &tokio_postgres::Error) -> Result<Arc<Conn>, StoreError> {
        let _one_at_a_time = self.reconnecting.lock().await;
        let cur = self.current_reader();
        if !Arc::ptr_eq(&cur, failed) && !cur.client.is_closed() {
            return Ok(cur);
        }
        let mut backoff = BACKOFF_START;
        loop {
            match Conn::open(&self.spec, false).await {
                Ok(c) => {
                    let c = Arc::new(c);
                    *self.reader.lock().unwrap_or_else(|p| p.into_inner()) = c.clone();
                    self.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                    return Ok(c);
                }
                Err(_) if Instant::now() + backoff < deadline => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Err(e) => {
                    let reason = format!("connection lost ({}); not reconnected within {:?}: {e}", describe(first), self.opts.reconnect_for);
                    return Err(self.spec.unavailable(op, &reason));
                }
            }
        }
    }
}

type Param = Box<dyn tokio_postgres::types::ToSql + Sync + Send>;

/// The reading statements.
#[derive(Debug, Clone, Copy)]
enum Q {
    Get,
    Meta,
    Ids,
    IdsAfter,
    Sessions,
}

impl Q {
    fn of(self, st: &conn::Stmts) -> &tokio_postgres::Statement {
        match self {
            Q::Get => &st.get,
            Q::Meta => &st.meta,
            Q::Ids => &st.ids,
            Q::IdsAfter => &st.ids_after,
            Q::Sessions => &st.sessions,
        }
    }
}

async fn query_opt(c: Arc<Conn>, q: Q, params: Vec<Param>) -> Result<Option<Row>, tokio_postgres::Error> {
    let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
    c.client.query_opt(q.of(&c.st), &refs).await
}

async fn query(c: Arc<Conn>, q: Q, params: Vec<Param>) -> Result<Vec<Row>, tokio_postgres::Error> {
    let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
    c.client.query(q.of(&c.st), &refs).await
}

fn obs_id(row: &Row, col: usize) -> Result<ObsId, String> {
    let id: Vec<u8> = row.try_get(col).map_err(|e| describe(&e))?;
    id.try_into().map(ObsId).map_err(|v: Vec<u8>| format!("stored id has {} bytes, not 20", v.len()))
}

/// [`ObsMeta`] from columns `shown, action, returncode, step, tokens, bytes, head, tail`.
pub(crate) fn meta_of(row: &Row, id: ObsId) -> Result<ObsMeta, String> {
    let get_err = |e: tokio_postgres::Error| describe(&e);
    let action: Vec<u8> = row.try_get(1).map_err(get_err)?;
    let u32_col = |i: usize, name: &str| -> Result<u32, String> {
        let v: i64 = row.try_get(i).map_err(get_err)?;
        u32::try_from(v).map_err(|_| format!("stored {name} {v} is out of range"))
    };
    let bytes: i64 = row.try_get(5).map_err(get_err)?;
    Ok(ObsMeta {
        id,
        shown: row.try_get(0).map_err(get_err)?,
        action: String::from_utf8_lossy(&action).into_owned(),
        returncode: row.try_get(2).map_err(get_err)?,
        step: u32_col(3, "step")?,
        bytes: u64::try_from(bytes).map_err(|_| format!("stored length {bytes} is negative"))?,
        tokens: u32_col(4, "tokens")?,
        head: row.try_get(6).map_err(get_err)?,
        tail: row.try_get(7).map_err(get_err)?,
    })
}

impl ObsStore for PgStore {
    fn append(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<ObsMeta, Error> {
        let ins = Insert::new(session, record, tokens)?;
        let shared = self.shared.clone();
        Ok(self.block(async move { shared.append(ins).await })?)
    }

    fn claim(&mut self, session: &SessionId, record: &Record, tokens: u32) -> Result<Option<ObsMeta>, Error> {
        let ins = Insert::new(session, record, tokens)?.claiming();
        let shared = self.shared.clone();
        Ok(self.block(async move { shared.submit(ins).await })?)
    }

    fn get(&self, session: &SessionId, shown: &str) -> Result<Option<Vec<u8>>, Error> {
        let (shared, s, id) = (self.shared.clone(), session.0.as_bytes().to_vec(), shown.to_string());
        Ok(self.block(async move { shared.get(s, id).await })?)
    }

    fn meta(&self, session: &SessionId, shown: &str) -> Result<Option<ObsMeta>, Error> {
        let (shared, s, id) = (self.shared.clone(), session.0.as_bytes().to_vec(), shown.to_string());
        Ok(self.block(async move { shared.meta(s, id).await })?)
    }

    fn ids(&self, session: &SessionId) -> Result<Vec<String>, Error> {
        let (shared, s) = (self.shared.clone(), session.0.as_bytes().to_vec());
        Ok(self.block(async move { shared.ids(s).await })?)
    }

    fn ids_after(&self, session: &SessionId, after: Option<&str>) -> Result<Vec<String>, Error> {
        let (shared, s, a) = (self.shared.clone(), session.0.as_bytes().to_vec(), after.map(str::to_string));
        Ok(self.block(async move { shared.ids_after(s, a).await })?)
    }

    fn sessions(&self) -> Result<Vec<SessionId>, Error> {
        let shared = self.shared.clone();
        Ok(self.block(async move { shared.sessions().await })?)
    }
}

#[cfg(test)]
mod tests;
