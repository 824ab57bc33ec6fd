//! Append-only, content-addressed, crash-safe observation archive (ARC).
//!
//! Two implementations of [`lam_core::ObsStore`]:
//!
//! - [`MemStore`]: in memory, for tests and short-lived sessions.
//! - [`FileStore`]: the durable default, a directory of length-prefixed,
//!   CRC-32-checksummed records in segment files (format: `FORMAT.md` and
//!   the `format` module), a stated sync policy ([`Durability`], group commit
//!   by default), torn-tail recovery on open, one writer per store enforced by
//!   a file lock and any number of read-only handles.
//! - `PgStore` (feature `postgres`): the archive in a PostgreSQL database,
//!   shared by writers on many hosts (schema, isolation and durability:
//!   `docs/postgres.md`).
//!
//! Ids follow `lam_core::id`: SHA-1 over (action, 0x1F, observation), shown
//! as 8 hex characters, extended by 4 on a collision within the session.
//! Every session is a namespace: an id shown in one session never resolves
//! in another. Observations are bytes; invalid UTF-8 is kept exactly.
//! Recall bookkeeping (what was recalled, when) is not stored here: it
//! belongs to the view.
#![warn(missing_docs)]

mod error;
mod file;
pub mod format;
mod index;
mod mem;
mod open;
#[cfg(feature = "postgres")]
mod pg;

pub use error::{Result, StoreError};
pub use file::{Durability, FileStore, Options, Recovery};
pub use mem::MemStore;
pub use open::{Access, AnyStore, Found, StoreSpec, find, open, redact};
#[cfg(feature = "postgres")]
pub use pg::{PgInfo, PgOptions, PgStats, PgStore, SCHEMA_VERSION};
