//! The store's error type. Every variant that concerns a file names it, and
//! every variant that concerns a place in a file names the byte offset.

use std::path::PathBuf;

/// Errors of `arc-store`. Converted into [`lam_core::Error::Backend`] (with
/// `what = "arc-store"`) at the [`lam_core::ObsStore`] boundary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O operation failed.
    ///
    /// Its message includes the OS error, so the OS error is not also its
    /// `source()`: a chain of causes prints it once.
    #[error("{op} {path}{}: {cause}", at(*.offset))]
    Io {
        /// What was being done ("open", "read", "write", "fsync", ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Byte offset in the file, where one applies.
        offset: Option<u64>,
        /// The OS error (in the message; deliberately not `source()`).
        cause: std::io::Error,
    },
    /// The store cannot be read at all: a segment written by a newer format
    /// version. (Damage to records and headers does not stop a store from
    /// opening: it is skipped and reported in [`crate::Recovery`].)
    #[error("corrupt archive: {path} at byte offset {offset}: {reason}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record (or header) in that file.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// Another process (or another handle in this one) holds the writer lock.
    #[error("archive {path} is locked by another writer (lock file {lock}); open it read-only instead")]
    Locked {
        /// The store directory.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The store was opened with [`crate::FileStore::open_read_only`].
    #[error("archive {path} is open read-only: cannot append")]
    ReadOnly {
        /// The store directory.
        path: PathBuf,
    },
    /// One field of a record is larger than the format can hold.
    #[error("record too large for the archive format: {what} is {len} bytes (limit {limit})")]
    TooLarge {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: u64,
        /// The format's limit.
        limit: u64,
    },
    /// A previous write failed and could not be undone; the writer refuses
    /// further appends (reopen the store to recover).
    #[error("archive {path} is poisoned by an earlier failed write; reopen it")]
    Poisoned {
        /// The store directory.
        path: PathBuf,
    },
    /// A store behind the [`lam_core::ObsStore`] trait failed (see its source).
    #[error(transparent)]
    Store(lam_core::Error),
    /// The record asked for is damaged: found damaged on open (and skipped),
    /// or failing its checksum or its content address (SHA-1 over action,
    /// 0x1F, observation) when read. Its bytes are never returned.
    #[error("§{shown} in session {session} is damaged: {path} at byte offset {offset}: {reason}")]
    Damaged {
        /// The session asked.
        session: String,
        /// The visible id asked for (without `§`).
        shown: String,
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record in that file.
        offset: u64,
        /// What check failed (and where a copy of the damaged bytes is, when
        /// a writer made one).
        reason: String,
    },
    /// A directory holds no segment file, so it is not a store (`check`, `salvage`).
    #[error("{path} holds no arc-store segment (seg-NNNNNN.log): not a store directory")]
    NotAStore {
        /// The directory.
        path: PathBuf,
    },
    /// `salvage` writes only into a directory that does not exist yet.
    #[error("{path} already exists; salvage writes a fresh store and never overwrites one")]
    Exists {
        /// The destination.
        path: PathBuf,
    },
    /// A `--store` spec that names no store this build can open.
    #[error("store `{spec}`: {reason}")]
    Spec {
        /// The spec, with any password redacted.
        spec: String,
        /// Why it was refused.
        reason: String,
    },
    /// No session of the store holds the id.
    #[error("no §{shown} in the archive; nearest: {}", if .nearest.is_empty() { "none".to_string() } else { .nearest.join(", ") })]
    NotFound {
        /// The id asked for (without `§`).
        shown: String,
        /// The nearest ids, as `§id (session)`.
        nearest: Vec<String>,
    },
    /// Several sessions show the id for different bytes (a true prefix collision).
    #[error("§{shown} names different observations in sessions {}; pass a session", .sessions.iter().map(|s| s.0.as_str()).collect::<Vec<_>>().join(", "))]
    Ambiguous {
        /// The id asked for (without `§`).
        shown: String,
        /// The sessions that hold it.
        sessions: Vec<lam_core::SessionId>,
    },
    /// A PostgreSQL operation failed: connecting, authenticating, a query, a
    /// commit. The target never carries a password, and the reason has any
    /// password scrubbed.
    #[error("{target}: {op}: {reason}")]
    Postgres {
        /// `postgres://user@host:port/db`.
        target: String,
        /// What was being done ("connect", "append", "get", "schema", ...).
        op: &'static str,
        /// The driver's or the server's message (with SQLSTATE where there is one).
        reason: String,
    },
    /// The store could not be reached: a PostgreSQL connection was lost and
    /// not re-established within the store's reconnect window
    /// ([`crate::PgOptions::reconnect_for`]). Nothing was written by the
    /// call that failed; the same call may succeed once the server is back
    /// ([`StoreError::is_unavailable`]).
    #[error("{target}: {op}: unavailable: {reason}")]
    Unavailable {
        /// `postgres://user@host:port/db`.
        target: String,
        /// What was being done ("append", "get", ...).
        op: &'static str,
        /// Why: the lost connection and the last reconnect attempt.
        reason: String,
    },
    /// The database's lam schema is missing (read-only open), older (read-only
    /// open), or newer than this build.
    #[error("{target}: {}", schema_problem(*.found, *.supported))]
    Schema {
        /// `postgres://user@host:port/db`.
        target: String,
        /// The schema version found (`None`: no lam tables).
        found: Option<i64>,
        /// The version this build reads and writes.
        supported: i64,
    },
    /// The store was opened read-only (a database store: see [`StoreError::ReadOnly`] for a directory).
    #[error("archive {store} is open read-only: cannot append")]
    ReadOnlyStore {
        /// The store, as it may be printed.
        store: String,
    },
}

impl StoreError {
    /// Whether the store was out of reach ([`StoreError::Unavailable`]),
    /// as opposed to refusing this call: the same call may succeed later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}

/// Whether an error that crossed the [`lam_core::ObsStore`] boundary says
/// the store was out of reach ([`StoreError::is_unavailable`]).
pub fn is_unavailable(e: &lam_core::Error) -> bool {
    match e {
        lam_core::Error::Backend { cause, .. } => cause.downcast_ref::<StoreError>().is_some_and(StoreError::is_unavailable),
        _ => false,
    }
}

fn schema_problem(found: Option<i64>, supported: i64) -> String {
    match found {
        None => "no lam archive in this database (no lam_meta table); open it read-write once to create the schema".into(),
        Some(f) if f > supported => {
            format!("the lam schema is version {f}, newer than this build supports (version {supported}); upgrade lam to use this database")
        }
        Some(f) => format!("the lam schema is version {f}, older than this build's version {supported}; open it read-write once to migrate"),
    }
}

fn at(offset: Option<u64>) -> String {
    match offset {
        Some(o) => format!(" at byte offset {o}"),
        None => String::new(),
    }
}

impl From<lam_core::Error> for StoreError {
    /// An `arc-store` error that crossed the [`lam_core::ObsStore`] boundary
    /// comes back as itself (so `Damaged` stays matchable); anything else is
    /// wrapped.
    fn from(e: lam_core::Error) -> Self {
        match e {
            lam_core::Error::Backend { what: "arc-store", cause } => match cause.downcast::<StoreError>() {
                Ok(mine) => *mine,
                Err(cause) => StoreError::Store(lam_core::Error::Backend { what: "arc-store", cause }),
            },
            e => StoreError::Store(e),
        }
    }
}

impl From<StoreError> for lam_core::Error {
    fn from(e: StoreError) -> Self {
        lam_core::Error::Backend { what: "arc-store", cause: Box::new(e) }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, offset: Option<u64>) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |cause| StoreError::Io { op, path, offset, cause }
}
