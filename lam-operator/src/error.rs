//! The operator's errors: each one a case callers can match.

use lam_core::SessionId;

/// Errors of `lam-operator`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Records must arrive in order, numbered densely from 0.
    #[error("record {got} arrived, but the session expects record {expected} next")]
    OutOfOrder {
        /// The index the session expects.
        expected: u32,
        /// The index that arrived.
        got: u32,
    },
    /// The archive and the operator gave one observation different ids: the
    /// store's session already holds records the operator never saw.
    #[error(
        "record {record}: the archive shows its observation as §{archive} but the operator as §{operator}; session `{session}` of the store holds other records with colliding ids"
    )]
    ArchiveMismatch {
        /// Record index.
        record: u32,
        /// The store's session.
        session: SessionId,
        /// Id the store gave.
        archive: String,
        /// Id the operator gave.
        operator: String,
    },
    /// Embeddings given by the caller describe the observation's chunks, but
    /// in the `l0-l1` order L1 chunks the L0 residual.
    #[error("embeddings can be given only in the l1-l0 order (in l0-l1, L1 chunks what L0 left)")]
    EmbeddingsNeedL1First,
    /// Caller-given chunks do not partition the observation.
    #[error("record {record}: chunks must partition the observation in order: {reason}")]
    BadChunks {
        /// Record index.
        record: u32,
        /// What is wrong.
        reason: String,
    },
    /// A setting that cannot work (unknown order, band width outside the dimension, ...).
    #[error("{0}")]
    Setting(String),
    /// An earlier admission failed after it had changed the session's state,
    /// so the session can no longer promise its invariants.
    #[error("the session stopped at record {record} after an error; start a new session")]
    Poisoned {
        /// The record whose admission failed.
        record: u32,
    },
    /// An encoder, embedding or store error (see its source).
    #[error(transparent)]
    Core(#[from] lam_core::Error),
}

impl From<Error> for lam_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Core(c) => c,
            other => lam_core::Error::Backend { what: "lam-operator", cause: Box::new(other) },
        }
    }
}
