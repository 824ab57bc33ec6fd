//! [`PgEmbeddings`]: the embedding cache that replicas share, a
//! [`lam_core::EmbeddingStore`] in the same database as the archive (table
//! `lam_embeddings`, schema version 4).
//!
//! One row per (model, chunk key): the vector's `f32` bytes (little-endian)
//! and a checksum over model, dimension, key and bytes. A row that does not
//! verify is never returned (`get` answers `None` and counts it) and the
//! next `put` of its key replaces it; otherwise the first writer wins
//! (`ON CONFLICT DO NOTHING`), so replicas encoding the same chunk at once
//! store it once. One connection on a private runtime.
//!
//! The cache only saves work, so losing the server is not an error: while
//! the connection is lost, `get` answers "not cached" and `put` keeps
//! nothing, and the next call at least [`RETRY_AFTER`] after the last try
//! connects again (a restarted or failed-over server is used again without
//! restarting the replica). Any other failure is an error (the encoder then
//! goes on without the shared cache).

use super::conn::Conn;
use super::{PrivateRuntime, Spec, wait};
use crate::StoreError;
use lam_core::{EmbeddingStore, Error};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// Least time between two tries to reach a lost server.
pub const RETRY_AFTER: Duration = Duration::from_secs(2);

const GET: &str = "SELECT key, vec, sum FROM lam_embeddings WHERE model = $1 AND dim = $2 AND key = ANY($3::bytea[])";
/// Insert the rows; a key already held keeps its row unless it is in `$6`
/// (keys this process found damaged).
const PUT: &str = r"
INSERT INTO lam_embeddings (model, dim, key, vec, sum)
SELECT $1, $2, k, v, s FROM unnest($3::bytea[], $4::bytea[], $5::int8[]) AS u(k, v, s)
ON CONFLICT (model, key) DO UPDATE SET dim = EXCLUDED.dim, vec = EXCLUDED.vec, sum = EXCLUDED.sum
WHERE lam_embeddings.key = ANY($6::bytea[])";

/// The shared embedding cache in PostgreSQL.
pub struct PgEmbeddings {
    /// `None` while the server cannot be reached.
    conn: Option<Arc<Conn>>,
    /// When a lost server may next be tried.
    retry_at: Instant,
    spec: Arc<Spec>,
    handle: Handle,
    _rt: Arc<PrivateRuntime>,
    /// Keys found damaged, to be replaced by the next `put`.
    damaged: HashSet<(String, u128)>,
    /// Rows that did not verify, so far.
    pub rejected: u64,
    /// Connections made again after one was lost, so far.
    pub reconnects: u64,
    /// Calls answered without the server (it could not be reached), so far.
    pub unreachable: u64,
}

impl std::fmt::Debug for PgEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgEmbeddings")
            .field("target", &self.spec.target.shown)
            .field("connected", &self.conn.is_some())
            .field("rejected", &self.rejected)
            .field("reconnects", &self.reconnects)
            .finish_non_exhaustive()
    }
}

impl PgEmbeddings {
    /// Connect to `url` (read-write: the schema is created or migrated).
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let shown = super::redact(url);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("arc-store-pg-emb")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Postgres { target: shown.clone(), op: "start runtime", reason: e.to_string() })?;
        let handle = rt.handle().clone();
        let drivers = super::Drivers::default();
        let rt = Arc::new(PrivateRuntime { rt: Some(rt), drivers: drivers.clone() });
        let url = url.to_string();
        let (spec, conn) = wait(&handle, &shown, async move {
            let spec = Arc::new(Spec::new(&url, drivers)?);
            let conn = Conn::open(&spec, true).await?;
            Ok((spec, Arc::new(conn)))
        })?;
        let now = Instant::now();
        Ok(Self { conn: Some(conn), retry_at: now, spec, handle, _rt: rt, damaged: HashSet::new(), rejected: 0, reconnects: 0, unreachable: 0 })
    }

    /// The connection, made again when it was lost and [`RETRY_AFTER`] has
    /// passed since the last try; `None` while the server cannot be reached.
    fn connection(&mut self) -> Option<Arc<Conn>> {
        if let Some(c) = &self.conn
            && !c.client.is_closed()
        {
            return Some(c.clone());
        }
        if Instant::now() < self.retry_at {
            return None;
        }
        self.retry_at = Instant::now() + RETRY_AFTER;
        let spec = self.spec.clone();
        match wait(&self.handle, &self.spec.target.shown, async move { Conn::open(&spec, true).await }) {
            Ok(c) => {
                self.reconnects += 1;
                eprintln!("note: shared embedding cache {}: connected again", self.spec.target.shown);
                self.conn = Some(Arc::new(c));
            }
            Err(e) => {
                if self.conn.take().is_some() {
                    eprintln!("note: shared embedding cache: {e}; encoding without it, trying again every {RETRY_AFTER:?}");
                }
            }
        }
        self.conn.clone()
    }

    /// Run `query` on the connection: `Ok(None)` when the server cannot be
    /// reached (or the connection was lost during the call).
    fn call<T: Send + 'static, F>(&mut self, op: &'static str, query: impl FnOnce(Arc<Conn>) -> F) -> Result<Option<T>, StoreError>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let Some(conn) = self.connection() else {
            self.unreachable += 1;
            return Ok(None);
        };
        let (spec, fut, c) = (self.spec.clone(), query(conn.clone()), conn.clone());
        let got = wait(&self.handle, &self.spec.target.shown, async move {
            match fut.await {
                Ok(v) => Ok(Some(v)),
                Err(e) if c.lost(&e) => Ok(None),
                Err(e) => Err(spec.err(op, &e)),
            }
        })?;
        if got.is_none() {
            eprintln!("note: shared embedding cache {}: connection lost during {op}; encoding without it until it is back", self.spec.target.shown);
            self.conn = None;
            self.unreachable += 1;
        }
        Ok(got)
    }
}

fn dim_i32(dim: usize) -> Result<i32, StoreError> {
    i32::try_from(dim).map_err(|_| StoreError::Store(Error::Dimension { expected: i32::MAX as usize, got: dim }))
}

/// The checksum a row carries: model, dimension, key and vector bytes.
fn checksum(model: &str, dim: usize, key: &[u8], vec: &[u8]) -> i64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(model.len() as u64).to_le_bytes());
    h.update(model.as_bytes());
    h.update(&(dim as u64).to_le_bytes());
    h.update(key);
    h.update(vec);
    h.digest() as i64
}

/// One stored row back as (key, vector) when it verifies.
fn verified(row: &tokio_postgres::Row, model: &str, dim: usize) -> Result<(u128, Option<Vec<f32>>), String> {
    let key: Vec<u8> = row.try_get(0).map_err(|e| super::describe(&e))?;
    let vec: Vec<u8> = row.try_get(1).map_err(|e| super::describe(&e))?;
    let sum: i64 = row.try_get(2).map_err(|e| super::describe(&e))?;
    let k = u128::from_le_bytes(key.as_slice().try_into().map_err(|_| format!("a key of {} bytes, not 16", key.len()))?);
    let ok = vec.len() == dim * 4 && checksum(model, dim, &key, &vec) == sum;
    Ok((k, ok.then(|| vec.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())))
}

impl EmbeddingStore for PgEmbeddings {
    fn get(&mut self, model: &str, dim: usize, keys: &[u128]) -> Result<Vec<Option<Vec<f32>>>, Error> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (m, d, ks) = (model.to_string(), dim_i32(dim)?, keys.iter().map(|k| k.to_le_bytes().to_vec()).collect::<Vec<_>>());
        let got = self.call("embeddings get", move |c| async move { c.client.query(GET, &[&m, &d, &ks]).await })?;
        let Some(rows) = got else {
            return Ok(vec![None; keys.len()]);
        };
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let (k, v) =
                verified(row, model, dim).map_err(|r| StoreError::Postgres { target: self.spec.target.shown.clone(), op: "embeddings get", reason: r })?;
            match v {
                Some(v) => {
                    found.insert(k, v);
                }
                None => {
                    self.rejected += 1;
                    self.damaged.insert((model.to_string(), k));
                }
            }
        }
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    fn put(&mut self, model: &str, dim: usize, keys: &[u128], vectors: &[f32]) -> Result<(), Error> {
        if vectors.len() != keys.len() * dim || dim == 0 {
            return Err(Error::Dimension { expected: keys.len() * dim, got: vectors.len() });
        }
        let mut seen = HashSet::new();
        let (mut ks, mut vs, mut sums, mut replace, mut replace_keys) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (k, v) in keys.iter().zip(vectors.chunks_exact(dim)) {
            if !seen.insert(*k) {
                continue;
            }
            let key = k.to_le_bytes().to_vec();
            let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
            sums.push(checksum(model, dim, &key, &bytes));
            if self.damaged.remove(&(model.to_string(), *k)) {
                replace.push(key.clone());
                replace_keys.push((model.to_string(), *k));
            }
            ks.push(key);
            vs.push(bytes);
        }
        let (m, d) = (model.to_string(), dim_i32(dim)?);
        let kept = self.call("embeddings put", move |c| async move { c.client.execute(PUT, &[&m, &d, &ks, &vs, &sums, &replace]).await })?;
        if kept.is_none() {
            // Not kept: a damaged row stays marked for the next put.
            self.damaged.extend(replace_keys);
        }
        Ok(())
    }
}
