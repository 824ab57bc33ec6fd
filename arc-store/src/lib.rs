//! Append-only, content-addressed, crash-safe observation archive (ARC).
//!
//! Implementations of [`lam_core::ObsStore`]:
//!
//! - [`MemStore`]: in memory, for tests and short-lived sessions.
//! - [`FileStore`]: the durable default, a directory of length-prefixed,
//!   CRC-32-checksummed records in segment files (format: `FORMAT.md` and
//!   the `format` module), a stated sync policy ([`Durability`], group commit
//!   by default), recovery on open that never destroys bytes (a torn tail
//!   is copied to `DIR/quarantine/` before it is cut; damage elsewhere is
//!   skipped, kept in place, copied and reported in [`Recovery`]), one
//!   writer per store enforced by a file lock and any number of read-only
//!   handles.
//! - `PgStore` (feature `postgres`): the archive in a PostgreSQL database,
//!   shared by writers on many hosts (schema, isolation and durability:
//!   `docs/postgres.md`).
//!
//! [`check`] verifies every record of a store without writing anything;
//! [`salvage`] rewrites the intact records into a fresh store. Recall
//! verifies each record's checksum and content address and answers
//! [`StoreError::Damaged`] for a damaged record. The rules:
//! `docs/store-recovery.md` and `FORMAT.md`. [`open`] opens any store from
//! a `--store` spec (a directory, `mem:`, `postgres://...`).
//!
//! Ids follow `lam_core::id`: SHA-1 over (action, 0x1F, observation), shown
//! as the shortest prefix (4 hex or more) with which no other observation's
//! id of the store begins: the observations of every session share one id
//! space (a run's settings session is a space of its own), so an exact
//! visible id names one observation in the whole store and [`find`]
//! resolves it without a session. Stores made before keep ids per session
//! (`FileStore` format version 1; PostgreSQL rows written before schema
//! version 5). Records live in sessions: `get(session, id)` answers only
//! for that session's records. Observations are bytes; invalid UTF-8 is
//! kept exactly.
//! Recall bookkeeping (what was recalled, when) is not stored here: it
//! belongs to the view.
//!
//! ```
//! use arc_store::{Access, StoreSpec};
//! use lam_core::{ObsStore, Record, SessionId};
//!
//! let dir = std::env::temp_dir().join(format!("arc-store-doc-{}", std::process::id()));
//! let mut store = arc_store::open(&StoreSpec::parse(dir.to_str().unwrap())?, Access::ReadWrite)?;
//! let s = SessionId::new("run-1");
//! let rec = Record { index: 0, action: "cat a.bin".into(), observation: b"\xff not utf-8\n".to_vec(), returncode: Some(0) };
//! let meta = store.append(&s, &rec, 5)?;
//! store.flush()?;
//! assert_eq!(store.get(&s, &meta.shown)?.as_deref(), Some(&rec.observation[..]));
//! // Recall by id alone, across sessions that agree on the bytes.
//! assert_eq!(arc_store::find(store.as_ref(), None, &format!("§{}", meta.shown))?.bytes, rec.observation);
//! # drop(store);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod claim;
mod error;
mod file;
pub mod format;
mod index;
mod mem;
mod open;
#[cfg(feature = "postgres")]
mod pg;
mod quarantine;
mod recovery;
mod repair;
mod scan;
mod secure;

pub use claim::claim_session;
pub use error::{Result, StoreError, is_unavailable};
pub use file::{Durability, FileStore, Options};
pub use mem::MemStore;
pub use open::{Access, AnyStore, Found, StoreSpec, find, find_in, observation_sessions, open, open_embeddings, open_reported, open_with_reconnect, redact};
#[cfg(feature = "postgres")]
pub use pg::{PgEmbeddings, PgInfo, PgOptions, PgStats, PgStore, SCHEMA_VERSION};
pub use quarantine::{QUARANTINE_DIR, REPAIR_LOG};
pub use recovery::{Damage, DamageKind, DamagedRecord, Recovery};
pub use repair::{CheckReport, Renamed, SalvageReport, check, salvage};
pub use scan::{SegmentReport, inspect_segment};
pub use secure::{DIR_MODE, FILE_MODE};
