//! Group commit: writer tasks (each with its own connection; see [`Pool`])
//! take turns at the store's queue; the one whose turn it is takes every append waiting
//! (up to a batch limit, optionally lingering for more), inserts them in one
//! transaction, and answers each only after `COMMIT` returned. Appends that
//! arrive while a commit is in flight form the next batch, which another
//! writer commits meanwhile, so concurrent callers share commits and commits
//! overlap without any added delay.
//!
//! Failures: a lost connection (server restart, network) is re-established
//! and the batch run again until `reconnect_for` has passed; this is safe
//! because appends are idempotent (a batch that did commit before the
//! connection broke finds its rows and returns their metadata). A batch that
//! fails for any other reason is split and each append committed alone, so
//! one bad record fails only its own append.

use super::conn::{Conn, lost, transient};
use super::schema::{LOCK_IDS, LOCK_SESSION};
use super::{Counters, PgOptions, Spec, meta_of};
use crate::StoreError;
use lam_core::{ObsId, ObsMeta, Record, SessionId, previews};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Largest observation accepted: PostgreSQL's `bytea` and protocol messages
/// stop at 1 GiB, and the row carries previews and the action besides.
pub(crate) const MAX_BODY: usize = (1 << 30) - (1 << 20);

pub(crate) const BACKOFF_START: Duration = Duration::from_millis(50);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One row to insert, prepared by the caller (hashing and previews happen
/// on the appending thread, not on the writer).
#[derive(Debug)]
pub(crate) struct Insert {
    session: Vec<u8>,
    id: ObsId,
    candidates: Vec<String>,
    action: Vec<u8>,
    returncode: Option<i32>,
    step: i64,
    tokens: i64,
    head: Vec<u8>,
    tail: Vec<u8>,
    body: Vec<u8>,
    /// Written only as the session's first observation (`ObsStore::claim`).
    claim: bool,
    /// The session holds observations: its ids are the store's (else a
    /// run's settings, ids of its own).
    shared: bool,
}

impl Insert {
    pub fn new(session: &SessionId, r: &Record, tokens: u32) -> Result<Insert, StoreError> {
        let obs = &r.observation;
        if obs.len() > MAX_BODY {
            return Err(StoreError::TooLarge { what: "observation", len: obs.len() as u64, limit: MAX_BODY as u64 });
        }
        let id = ObsId::of(r.action.as_bytes(), obs);
        let hex = id.hex();
        let (h, t) = previews(obs);
        Ok(Insert {
            session: session.0.as_bytes().to_vec(),
            id,
            candidates: (lam_core::MIN_SHOWN..=40).map(|n| hex[..n].to_string()).collect(),
            action: r.action.as_bytes().to_vec(),
            returncode: r.returncode,
            step: i64::from(r.index),
            tokens: i64::from(tokens),
            head: obs[h].to_vec(),
            tail: obs[t].to_vec(),
            body: obs.clone(),
            claim: false,
            shared: session.holds_observations(),
        })
    }

    /// This insert as a claim: refused (no row) when the session begins with another observation.
    pub fn claiming(self) -> Insert {
        Insert { claim: true, ..self }
    }

    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// The key of the lock its shown id is chosen under: its session's
    /// (`LOCK_SESSION`), or, in the observations' space, the first two bytes
    /// of its id (`LOCK_IDS`).
    fn id_lock(&self) -> Option<i32> {
        self.shared.then(|| i32::from(u16::from_be_bytes([self.id.0[0], self.id.0[1]])))
    }
}

/// An append waiting for its commit.
#[derive(Debug)]
pub(crate) struct Job {
    pub ins: Insert,
    pub reply: oneshot::Sender<Result<Option<ObsMeta>, StoreError>>,
}

/// Why a batch failed: `lost` when the server could not be reached again in time.
struct Fail {
    lost: bool,
    reason: String,
}

/// The writer tasks of one store and the queue they share: whichever writer
/// is free takes the next batch. A store starts with one writer; another
/// (with its own connection) is added, up to `PgOptions::writers`, whenever
/// appends are found waiting while every writer is busy, so that commits
/// overlap under concurrent load while a lone caller uses one connection.
pub(crate) struct Pool {
    spec: Arc<Spec>,
    opts: PgOptions,
    stats: Arc<Counters>,
    queue: tokio::sync::Mutex<mpsc::Receiver<Job>>,
    /// Appends sent and not yet taken by a writer.
    queued: AtomicUsize,
    /// Writers running or connecting.
    live: AtomicUsize,
    /// Writers waiting for the queue.
    idle: AtomicUsize,
}

impl Pool {
    /// Start the first writer on `conn` (on the current runtime); returns the pool and its queue's sender.
    pub fn start(spec: Arc<Spec>, opts: PgOptions, stats: Arc<Counters>, conn: Conn) -> (Arc<Pool>, mpsc::Sender<Job>) {
        let (tx, rx) = mpsc::channel(opts.max_batch.max(1) * 4);
        let pool = Arc::new(Pool {
            spec,
            opts,
            stats,
            queue: tokio::sync::Mutex::new(rx),
            queued: AtomicUsize::new(0),
            live: AtomicUsize::new(1),
            idle: AtomicUsize::new(0),
        });
        tokio::spawn(task(pool.clone(), conn));
        (pool, tx)
    }

    /// Count an append about to be sent.
    pub fn sending(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Uncount an append whose sending failed.
    pub fn unsent(&self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
    }

    /// Writers running or connecting.
    pub fn writers(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Add a writer if appends wait and no writer is free.
    fn grow(self: &Arc<Self>) {
        if self.idle.load(Ordering::Relaxed) > 0 || self.queued.load(Ordering::Relaxed) == 0 {
            return;
        }
        let max = self.opts.writers.max(1);
        if self.live.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1)).is_err() {
            return;
        }
        let pool = self.clone();
        tokio::spawn(async move {
            match Conn::open(&pool.spec, true).await {
                Ok(c) => task(pool, c).await,
                // The writers already running carry on; a later grow tries again.
                Err(_) => {
                    pool.live.fetch_sub(1, Ordering::Relaxed);
                }
            }
        });
    }
}

/// A writer as a boxed future (a writer may start another).
fn task(pool: Arc<Pool>, conn: Conn) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(run(pool, conn))
}

/// One writer: takes batches until every sender is gone.
async fn run(pool: Arc<Pool>, conn: Conn) {
    let mut conn = Some(conn);
    loop {
        pool.idle.fetch_add(1, Ordering::Relaxed);
        let taken = {
            let mut rx = pool.queue.lock().await;
            match rx.recv().await {
                Some(first) => {
                    let mut bytes = first.ins.len();
                    let mut batch = vec![first];
                    gather(&mut rx, &mut batch, &mut bytes, &pool.opts).await;
                    Some(batch)
                }
                None => None,
            }
        };
        pool.idle.fetch_sub(1, Ordering::Relaxed);
        let Some(batch) = taken else { break };
        pool.queued.fetch_sub(batch.len(), Ordering::Relaxed);
        pool.grow();
        let results = commit(&pool.spec, &mut conn, &batch, &pool.opts, &pool.stats).await;
        // Appends that waited for this whole commit with no writer free: add one.
        pool.grow();
        for (job, r) in batch.into_iter().zip(results) {
            // The caller may have stopped waiting (its future was dropped); the row is stored anyway.
            let _ = job.reply.send(r);
        }
    }
    pool.live.fetch_sub(1, Ordering::Relaxed);
}

async fn gather(rx: &mut mpsc::Receiver<Job>, batch: &mut Vec<Job>, bytes: &mut usize, opts: &PgOptions) {
    let deadline = Instant::now() + opts.max_delay;
    while batch.len() < opts.max_batch.max(1) && *bytes < opts.max_batch_bytes {
        let next = match rx.try_recv() {
            Ok(j) => Some(j),
            Err(mpsc::error::TryRecvError::Disconnected) => None,
            Err(mpsc::error::TryRecvError::Empty) if opts.max_delay.is_zero() => None,
            Err(mpsc::error::TryRecvError::Empty) => tokio::time::timeout_at(deadline, rx.recv()).await.ok().flatten(),
        };
        let Some(j) = next else { break };
        *bytes += j.ins.len();
        batch.push(j);
    }
}

/// Commit `batch`, returning one result per job in order (`None`: a claim refused).
async fn commit(spec: &Spec, conn: &mut Option<Conn>, batch: &[Job], opts: &PgOptions, stats: &Counters) -> Vec<Result<Option<ObsMeta>, StoreError>> {
    let all: Vec<&Insert> = batch.iter().map(|j| &j.ins).collect();
    let fail = |f: &Fail| if f.lost { spec.unavailable("append", &format!("connection lost: {}", f.reason)) } else { spec.fail("append", &f.reason) };
    match commit_with_retry(spec, conn, &all, opts, stats).await {
        Ok(metas) => metas.into_iter().map(Ok).collect(),
        Err(f) if f.lost || all.len() == 1 => all.iter().map(|_| Err(fail(&f))).collect(),
        Err(_) => {
            stats.splits.fetch_add(1, Ordering::Relaxed);
            let mut out = Vec::with_capacity(all.len());
            for one in &all {
                out.push(match commit_with_retry(spec, conn, std::slice::from_ref(one), opts, stats).await {
                    Ok(mut m) => m.pop().ok_or_else(|| spec.fail("append", "the commit returned no row")),
                    Err(f) => Err(fail(&f)),
                });
            }
            out
        }
    }
}

async fn commit_with_retry(spec: &Spec, conn: &mut Option<Conn>, ins: &[&Insert], opts: &PgOptions, stats: &Counters) -> Result<Vec<Option<ObsMeta>>, Fail> {
    let deadline = Instant::now() + opts.reconnect_for;
    let mut backoff = BACKOFF_START;
    let mut reruns = 0;
    let mut last_loss = String::new();
    loop {
        let c = match conn {
            Some(c) if !c.client.is_closed() => c,
            _ => {
                *conn = None;
                match Conn::open(spec, true).await {
                    Ok(c) => {
                        stats.reconnects.fetch_add(1, Ordering::Relaxed);
                        conn.insert(c)
                    }
                    Err(e) if Instant::now() + backoff < deadline => {
                        last_loss = e.to_string();
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                        continue;
                    }
                    Err(e) => {
                        let reason = format!("{last_loss}; not reconnected within {:?}: {e}", opts.reconnect_for);
                        return Err(Fail { lost: true, reason });
                    }
                }
            }
        };
        match transact(c, ins).await {
            Ok(Ok(metas)) => {
                stats.commits.fetch_add(1, Ordering::Relaxed);
                stats.appends.fetch_add(ins.len() as u64, Ordering::Relaxed);
                stats.largest_batch.fetch_max(ins.len() as u64, Ordering::Relaxed);
                return Ok(metas);
            }
            Ok(Err(bad)) => return Err(Fail { lost: false, reason: bad }),
            Err(e) if c.lost(&e) || lost(&e) => {
                last_loss = match c.death() {
                    Some(d) => format!("{}; connection ended: {d}", super::describe(&e)),
                    None => super::describe(&e),
                };
                *conn = None;
                stats.retries.fetch_add(1, Ordering::Relaxed);
                if Instant::now() >= deadline {
                    return Err(Fail { lost: true, reason: format!("{last_loss}; not reconnected within {:?}", opts.reconnect_for) });
                }
            }
            Err(e) if transient(&e) && reruns < 5 => {
                reruns += 1;
                stats.retries.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(Fail { lost: false, reason: super::describe(&e) }),
        }
    }
}

/// One transaction, sent as one pipeline (one round trip): `BEGIN`, the
/// sessions' locks and then the locks of the observations' 4-hex prefixes,
/// each sorted (so every transaction takes its locks in one global order
/// and two batches never wait for each other in a cycle), every insert,
/// `COMMIT`. The server runs them in that order; if any statement fails,
/// the rest fail too and `COMMIT` rolls back, so the batch is stored whole
/// or not at all. The outer error is the driver's (the first statement's
/// that failed); the inner one a row that does not decode.
async fn transact(c: &Conn, ins: &[&Insert]) -> Result<Result<Vec<Option<ObsMeta>>, String>, tokio_postgres::Error> {
    let sessions: Vec<i32> = ins.iter().map(|i| session_key(&i.session)).collect::<BTreeSet<i32>>().into_iter().collect();
    let prefixes: Vec<i32> = ins.iter().filter_map(|i| i.id_lock()).collect::<BTreeSet<i32>>().into_iter().collect();
    let (client, st) = (&c.client, &c.st);
    let mut steps: Vec<Step<'_>> = Vec::with_capacity(ins.len() + 4);
    steps.push(Box::pin(async move { client.batch_execute("BEGIN").await.map(|()| Vec::new()) }));
    for (class, keys) in [(&LOCK_SESSION, sessions), (&LOCK_IDS, prefixes)] {
        steps.push(Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [class, &keys];
            client.query(&st.locks, &params).await.map(|_| Vec::new())
        }));
    }
    for i in ins {
        steps.push(Box::pin(async move {
            let id: &[u8] = &i.id.0;
            let bytes = i.body.len() as i64;
            let append = if i.shared { &st.append } else { &st.append_own };
            client
                .query(append, &[&i.session, &id, &i.candidates, &i.action, &i.returncode, &i.step, &i.tokens, &bytes, &i.head, &i.tail, &i.body, &i.claim])
                .await
        }));
    }
    steps.push(Box::pin(async move { client.batch_execute("COMMIT").await.map(|()| Vec::new()) }));
    let results = in_order(steps).await;
    let mut rows = Vec::with_capacity(results.len());
    for r in results {
        rows.push(r?);
    }
    let mut metas = Vec::with_capacity(ins.len());
    for (r, i) in rows[3..].iter().zip(ins) {
        match (r.as_slice(), i.claim) {
            ([], true) => metas.push(None),
            ([row], _) => match meta_of(row, i.id) {
                Ok(m) => metas.push(Some(m)),
                Err(e) => return Ok(Err(e)),
            },
            _ => return Ok(Err(format!("appending {} returned {} rows, expected 1", i.id.hex(), r.len()))),
        }
    }
    Ok(Ok(metas))
}

type Step<'a> = Pin<Box<dyn Future<Output = Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>> + Send + 'a>>;

/// Run `steps` concurrently, polling them in order, so that each sends its
/// message before the next does (the driver sends on the first poll): the
/// order on the wire is the order of `steps`. Waits for all of them.
async fn in_order<F: Future + Unpin>(steps: Vec<F>) -> Vec<F::Output> {
    let mut slots: Vec<(F, Option<F::Output>)> = steps.into_iter().map(|f| (f, None)).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in slots.iter_mut().filter(|(_, out)| out.is_none()) {
            match Pin::new(f).poll(cx) {
                Poll::Ready(v) => *out = Some(v),
                Poll::Pending => pending = true,
            }
        }
        if pending { Poll::Pending } else { Poll::Ready(()) }
    })
    .await;
    slots.into_iter().filter_map(|(_, out)| out).collect()
}

/// The second key of a session's advisory lock: 32 bits of a hash of its
/// name. Two sessions sharing a key only wait for each other; nothing else.
pub(crate) fn session_key(session: &[u8]) -> i32 {
    let h = ObsId::of(b"lam-session", session);
    i32::from_le_bytes([h.0[0], h.0[1], h.0[2], h.0[3]])
}
