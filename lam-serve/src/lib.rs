//! `lam serve`: a drop-in OpenAI/Anthropic/Gemini-compatible HTTP proxy that keeps
//! an agent's context small without breaking provider prompt caches.
//!
//! Point an agent's base URL at the proxy. For OpenAI `POST
//! /v1/chat/completions` and `POST /v1/responses`, Anthropic `POST
//! /v1/messages` and Gemini `POST /v1beta/models/MODEL:generateContent` and
//! `:streamGenerateContent` (streaming or not) it archives every tool result verbatim
//! (`arc-store`), admits it once with the LAM operator (`lam-operator`), and
//! forwards the residual in its place, in that request and every later one of
//! the session. Every item a session has forwarded is forwarded byte for byte
//! the same ever after (prefix stability), so the provider's prompt cache keeps
//! hitting. Responses stream back event by event; every other path passes
//! through unchanged. Protocol and session rule: `docs/serve.md`.
//!
//! The modules are the stages a request meets, in order: `http` (routes,
//! guard, forward and stream, listen and shutdown), `request` (the body
//! parsed once: members, items, keys), `registry` (which conversation),
//! `conversation` (frozen items, what is new), `admission` (archive and
//! admit each new observation), `budget` (with `--budget`: cuts, after
//! each item; one stage that owns the plan, the cut, what may be cited and
//! the calibration), `rewrite` (the bytes forwarded) and `stats` (what is
//! counted); `usage` reads the upstream's count from its answer. `api` says, per API, which items are tool calls and
//! results; `canon` reads an item's identity and annotations from its bytes;
//! `engine` holds the store, the encoders and the operator settings.
//!
//! ```
//! use lam_serve::{Api, Proxy, ServeConfig};
//!
//! let cfg = ServeConfig::for_tests("http://127.0.0.1:9"); // mem: store, hashing encoder
//! let proxy = Proxy::open(cfg)?;
//! let log: String = (0..40).map(|i| format!("tests/test_{i}.py::test_case PASSED\n")).collect();
//! let turn = |n: usize| {
//!     let mut m = vec![serde_json::json!({"role": "user", "content": "fix the bug"})];
//!     for k in 0..n {
//!         let id = format!("call_{k}");
//!         m.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"pytest\"}"}}]}));
//!         m.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": log}));
//!     }
//!     serde_json::to_vec(&serde_json::json!({"model": "m", "messages": m})).unwrap()
//! };
//! let first = proxy.rewrite(Api::ChatCompletions, None, &turn(1));
//! let second = proxy.rewrite(Api::ChatCompletions, None, &turn(2));
//! assert_eq!(first.session, second.session); // the second request continues the first
//! assert!(second.body.len() < turn(2).len()); // the rerun's log became a stub
//! let sent: serde_json::Value = serde_json::from_slice(&second.body)?;
//! // One line: the same call run again gave the same output (`docs/stubs.md`).
//! assert!(sent["messages"][4]["content"].as_str().unwrap().starts_with("[lam: same output as last time"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// `eprintln!` that never panics: a line to a closed terminal (its window
/// shut: EIO) or a closed pipe is lost, never the request or the proxy
/// task writing it (`lam run` serves the proxy in its own process).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod admission;
mod api;
pub mod bill;
mod budget;
mod canon;
mod config;
mod conversation;
mod engine;
mod error;
mod http;
mod json;
mod log;
mod proxy;
mod registry;
pub mod replay;
mod report;
mod request;
mod rewrite;
mod stats;
mod store;
mod sync;
mod usage;

pub use api::{Api, Policy};
pub use budget::DefaultBudget;
pub use budget::{CITED_LEAD, CiteOrder};
pub use config::{Budget, EngineSettings, ServeConfig, Token, default_max_memory, valid_run};
pub use error::Error;
pub use http::{read_upstream_ca, run, serve};
pub use proxy::{Arrival, Proxy, Rewritten};
pub use stats::{SessionStats, Stats};
