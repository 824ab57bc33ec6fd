//! Agent trajectories for lam: readers and token accounting.
//!
//! - [`read`]: mini-swe-agent `.traj.json(.gz)`, SWE-agent `.traj(.gz)`,
//!   OpenAI chat-completions message lists and lam's JSON Lines
//!   (`docs/trajectory-format.md`) into [`Trajectory`]s of
//!   [`lam_core::Record`]s. Every error names the file and the record.
//! - [`agents`]: the coding agents lam knows, one room each
//!   ([`agents::Agent`]): how `lam run` launches one through the proxy, the
//!   requests `lam replay` writes as it, its transcripts (told apart from
//!   lam JSONL by their first line; one record per tool result, its action
//!   the call named by [`lam_core::action`]), how it compacts and forks.
//! - Feature `readers` (default): `read` and the agents' transcript readers
//!   (with `flate2`, `rusqlite`); without it, the agents' rooms' facts
//!   only, which the proxy uses.
//! - [`trajectory`]: what every reader produces ([`Trajectory`], [`Format`],
//!   [`ReadError`]); `read` and `agents` both build on it, and `read`
//!   dispatches to `agents`, never the reverse.
//! - [`names`]: the session naming rule of a run over many inputs
//!   ([`SessionNames`]): two inputs never share a session.
//! - [`tokens`]: cl100k_base, the papers' accounting tokenizer, as a
//!   [`lam_core::TokenCounter`] ([`Cl100k`]).
//!
//! ```
//! use lam_core::TokenCounter;
//! use lam_trajectory::{Cl100k, read};
//! # let dir = tempfile_dir();
//! let path = dir.join("s.jsonl");
//! std::fs::write(&path, r#"{"session":"s","index":0,"action":"ls","observation":"a.txt\n"}"#).unwrap();
//! let trajs = read::read_path(&path).unwrap();
//! assert_eq!(trajs[0].records[0].observation, b"a.txt\n");
//! assert_eq!(Cl100k.count(b"hello world"), 2);
//! # fn tempfile_dir() -> std::path::PathBuf {
//! #     let d = std::env::temp_dir().join(format!("lam-trajectory-doc-{}", std::process::id()));
//! #     std::fs::create_dir_all(&d).unwrap();
//! #     d
//! # }
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod agents;
pub mod names;
#[cfg(feature = "readers")]
pub mod read;
pub mod trajectory;

pub use names::SessionNames;
#[cfg(feature = "readers")]
pub use read::{Input, JsonlRecord};
pub use trajectory::{Format, ReadError, Trajectory, Unreadable};

pub use lam_core::corpus_dir;
/// cl100k_base accounting ([`lam_tokens`]), re-exported for the readers' users.
pub use lam_tokens as tokens;
pub use lam_tokens::Cl100k;
