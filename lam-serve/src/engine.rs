//! What every session admits with: the archive (one store, locked per call,
//! behind its health gate: [`crate::store`]),
//! a pool of encoders (a session borrows one for its admissions, so sessions
//! encode in parallel) and the operator settings (with the token counter).

use crate::error::Error;
use crate::store::SharedStore;
use crate::sync::lock;
use arc_store::AnyStore;
use lam_core::{Encoder, ObsStore};
use lam_encode::CachedEncoder;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};

/// An encoder behind its embedding cache.
pub(crate) type Enc = CachedEncoder<Box<dyn Encoder>>;

/// Bytes of embeddings the encoders keep in memory, all together
/// ([`CachedEncoder::bounded`]): part of the constant above `--max-memory`
/// that the process may hold (`docs/serve.md`).
pub(crate) const MEMO_BYTES: usize = 32 << 20;

/// Encoders lent one at a time.
pub(crate) struct Pool {
    free: Mutex<Vec<Enc>>,
    ready: Condvar,
    cache: Option<PathBuf>,
}

/// An encoder on loan; it goes back to the pool when dropped.
pub(crate) struct Loan<'a> {
    pool: &'a Pool,
    enc: Option<Enc>,
}

impl std::fmt::Debug for Loan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Loan")
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("free", &lock(&self.free).len()).field("cache", &self.cache).finish()
    }
}

impl Pool {
    pub(crate) fn new(encoders: Vec<Enc>, cache: Option<PathBuf>) -> Self {
        Self { free: Mutex::new(encoders), ready: Condvar::new(), cache }
    }

    /// Wait for a free encoder.
    pub(crate) fn take(&self) -> Loan<'_> {
        let mut free = lock(&self.free);
        loop {
            if let Some(e) = free.pop() {
                return Loan { pool: self, enc: Some(e) };
            }
            free = self.ready.wait(free).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Append every encoder's new embeddings to the cache file (on shutdown).
    pub(crate) fn save(&self) -> Result<usize, Error> {
        let Some(path) = &self.cache else {
            return Ok(0);
        };
        let mut n = 0;
        for e in lock(&self.free).iter_mut() {
            n += e.save(path).map_err(|source| Error::Io { what: format!("saving the embedding cache {}", path.display()), source })?;
        }
        Ok(n)
    }
}

impl Loan<'_> {
    pub(crate) fn encoder(&mut self) -> &mut Enc {
        self.enc.as_mut().expect("an encoder is on loan until drop")
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if let Some(e) = self.enc.take() {
            lock(&self.pool.free).push(e);
            self.pool.ready.notify_one();
        }
    }
}

/// Everything admission needs besides a session's own state.
pub(crate) struct Engine {
    pub store: SharedStore,
    pub pool: Pool,
    /// The operator settings, with the token counter (`Config::with_counter`).
    pub operator: lam_operator::Config,
    pub dim: usize,
    /// The encoders' model id (it names the weights' digest).
    pub model_id: String,
    /// What is compacted (user turns, kept tools).
    pub policy: crate::api::Policy,
    /// Which results a cut cites first.
    pub cite_order: crate::budget::CiteOrder,
    /// What the models cost, to put each request's receipt in dollars ([`crate::bill::prices`]).
    pub prices: std::sync::Arc<crate::bill::prices::Prices>,
    /// The terms the budget's cuts were decided under, as recorded ([`crate::budget::ledger`]).
    pub ledger: crate::budget::ledger::Ledger,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("operator", &self.operator).field("dim", &self.dim).field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl Engine {
    /// Load the encoders (each behind the cache) and set the operator up
    /// for `store`, the one writer.
    pub(crate) fn open(s: &crate::config::EngineSettings, store: AnyStore, shown: String) -> Result<Self, Error> {
        if s.encoders == 0 {
            return Err(Error::Setting("--encoders must be at least 1".into()));
        }
        let mut encoders = Vec::with_capacity(s.encoders);
        let mut cache = None;
        for _ in 0..s.encoders {
            let (e, path) = s.load_encoder()?;
            // Bounded: a proxy that runs for weeks must not keep every chunk
            // it ever saw; what ages out is saved first when there is a file.
            let e = e.bounded(MEMO_BYTES / s.encoders);
            let e = match &path {
                Some(p) => e.autosave(p, usize::MAX),
                None => e,
            };
            cache = path;
            encoders.push(e);
        }
        let info = Encoder::info(&encoders[0]);
        let (dim, model_id) = (info.dim, info.model_id.to_string());
        // Load the cl100k tables now, not in the first request (~70 ms).
        lam_tokens::count(b"warm");
        let recall_tool = match s.recall {
            lam_core::stub::Recall::Via(tool) => Some(tool.to_string()),
            _ => None,
        };
        Ok(Self {
            store: SharedStore::new(store, shown),
            pool: Pool::new(encoders, cache),
            operator: s.operator(&lam_tokens::Cl100k),
            dim,
            model_id,
            policy: crate::api::Policy { user_turns: s.user_turns, keep_tools: s.keep_tools.iter().cloned().collect(), recall_tool },
            cite_order: crate::budget::CiteOrder::default(),
            prices: std::sync::Arc::new(crate::bill::prices::Prices::builtin().clone()),
            ledger: crate::budget::ledger::Ledger::default(),
        })
    }

    /// A fresh operator session with the engine's settings.
    pub(crate) fn operator_session(&self) -> Result<lam_operator::Session, Error> {
        Ok(lam_operator::Session::new(self.operator, self.dim)?)
    }

    /// Make every acknowledged append durable and save the embedding caches.
    pub(crate) fn close(&self) -> Result<(), Error> {
        (&self.store).flush()?;
        self.pool.save()?;
        Ok(())
    }
}
