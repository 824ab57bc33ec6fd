//! `lam mcp`: an MCP server (the official Rust SDK, `rmcp`) that recalls
//! archived observations exactly, for any MCP client (Claude Code, Codex,
//! Cursor, ...).
//!
//! Tools (schemas in `docs/mcp.md`):
//! - `recall {id, session?, part?}`: the exact archived text of `§id`, or its
//!   part `K`/`K/N` (parts of at most `part_tokens` cl100k tokens, cut as
//!   `lam recall` cuts them). Bytes that are not UTF-8 come back as lossy
//!   text, a note, and the exact bytes as a base64 blob resource.
//! - `recall_meta {id, session?}`: size, parts, sessions, first line (JSON).
//! - `catalog {session?, page?}`: one page of a session's citation catalog as
//!   ARC renders it; without a session, the list of sessions.
//!
//! Ids resolve as `lam recall` resolves them ([`arc_store::find`]): without a
//! session, in the sessions that hold observations (never a run's settings),
//! those showing the id exactly first. A server can be
//! scoped to one session ([`Config::session`]). Every failure is a tool error
//! (`isError: true`) with a message; the connection stays up.
//!
//! ```
//! use lam_mcp::{Archive, Config};
//! use lam_core::{ObsStore, Record, SessionId};
//!
//! let mut store = arc_store::MemStore::new();
//! let rec = Record { index: 0, action: "cat a.txt".into(), observation: b"hello\n".to_vec(), returncode: Some(0) };
//! let m = store.append(&SessionId::new("s"), &rec, 2)?;
//! let archive = Archive::with_store(Config::new(arc_store::StoreSpec::Memory), Box::new(store))?;
//! assert_eq!(archive.recall(&format!("§{}", m.shown), None, None)?.bytes, b"hello\n");
//! let server = lam_mcp::RecallServer::new(std::sync::Arc::new(archive)); // serve with rmcp
//! # let _ = server;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod archive;
mod http;
mod jsonrpc;
mod server;
mod stdio;

pub use archive::{Archive, Config, Error, Meta, REOPEN_AFTER, Recalled};
pub use http::{HttpAccess, MAX_BODY, serve_http};
pub use server::{CatalogArgs, MetaArgs, PartArg, RecallArgs, RecallServer, recall_content};

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

/// Characters of a client's string a message quotes whole.
const QUOTE_CHARS: usize = 64;

/// A string the client sent (an id, a session, a part, a method) as every
/// message of this server quotes it: whole when at most 64 characters, else
/// its first 64 characters (cut on a character boundary), `…` and its
/// length in bytes. An answer stays small whatever was asked: a
/// 1,000,000-character id once came back whole in a tool error.
pub(crate) fn quote(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(QUOTE_CHARS) {
        None => Cow::Borrowed(s),
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &s[..cut], s.len())),
    }
}

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Opening the store (or a bad setting).
    #[error(transparent)]
    Archive(#[from] Error),
    /// Binding or serving the socket, or starting the runtime.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error (in the message; deliberately not `source()`, so a
        /// chain of causes prints it once).
        error: std::io::Error,
    },
    /// A setting that would serve the archive unprotected (a non-loopback
    /// address without a token), or a bad token.
    #[error("refused: {0}")]
    Refused(String),
    /// The MCP session failed to start or ended with an error.
    #[error("mcp: {0}")]
    Protocol(String),
}

/// Serve `archive` on standard input and output until the client closes it
/// (a request before `initialize`, such as Claude Code's `server/discover`
/// probe, is answered "method not found": `stdio`).
pub async fn serve_stdio(archive: Arc<Archive>) -> Result<(), ServeError> {
    stdio::serve(archive, tokio::io::BufReader::new(tokio::io::stdin()), tokio::io::stdout()).await
}

fn runtime() -> Result<tokio::runtime::Runtime, ServeError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| ServeError::Io { what: "starting the async runtime".into(), error })
}

/// Open `cfg.store` and serve it over stdio (blocking; `lam mcp`).
pub fn run_stdio(cfg: Config) -> Result<(), ServeError> {
    let archive = Arc::new(Archive::open(cfg)?);
    runtime()?.block_on(serve_stdio(archive))
}

/// Open `cfg.store` and serve it over streamable HTTP on `addr` until
/// Ctrl-C or SIGTERM (blocking; `lam mcp --http ADDR`), admitting requests
/// as `access` says (a non-loopback `addr` needs a token: refused before
/// anything is opened). `ready` is called with the bound address (port 0
/// picks a free one).
pub fn run_http(cfg: Config, addr: SocketAddr, access: HttpAccess, ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    access.check_bind(addr)?;
    let archive = Arc::new(Archive::open(cfg)?);
    let rt = runtime()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|error| ServeError::Io { what: format!("binding {addr}"), error })?;
        ready(listener.local_addr().map_err(|error| ServeError::Io { what: "listener address".into(), error })?);
        serve_http(archive, listener, access, shutdown_signal()).await
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_strings_are_quoted_whole_long_ones_by_a_prefix() {
        use super::{QUOTE_CHARS, quote};
        assert_eq!(quote("a1b2"), "a1b2");
        let edge = "é".repeat(QUOTE_CHARS);
        assert_eq!(quote(&edge), edge);
        let long = format!("{edge}x");
        assert_eq!(quote(&long), format!("{edge}… ({} bytes)", long.len()));
        let q = quote(&"€".repeat(1_000_000)).into_owned();
        assert!(q.starts_with("€€€") && q.ends_with("… (3000000 bytes)") && q.chars().count() < 100, "{q}");
    }
}
