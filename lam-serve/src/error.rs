//! What can go wrong in `lam-serve`.

/// Errors of `lam-serve`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting that cannot work.
    #[error("{0}")]
    Setting(String),
    /// The store could not be opened or written.
    #[error("store {spec}: {source}")]
    Store {
        /// The store, as given (passwords redacted).
        spec: String,
        /// Why.
        source: Box<arc_store::StoreError>,
    },
    /// The encoder could not be loaded.
    #[error(transparent)]
    Encoder(#[from] lam_encode::Error),
    /// The operator refused its settings.
    #[error(transparent)]
    Operator(#[from] lam_operator::Error),
    /// A store or encoder error while closing.
    #[error(transparent)]
    Core(#[from] lam_core::Error),
    /// A compacted request's body holds a conversation or preamble member
    /// (`messages`, `input`, `system`, `instructions`) twice: which one the
    /// upstream reads is unknown, so the proxy refuses it (`400`).
    #[error("the body holds the member `{0}` twice")]
    DuplicateKey(&'static str),
    /// Stopped before every in-flight request finished (a second signal or
    /// the drain deadline): the store was flushed, the cut requests' clients
    /// saw their connections close. The program exits non-zero.
    #[error("stopped with requests in flight ({0}); the store was flushed")]
    Cut(&'static str),
    /// Listening, serving or writing a file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}
