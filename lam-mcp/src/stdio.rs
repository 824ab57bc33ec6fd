//! `lam mcp` on standard input and output: every line is checked before the
//! MCP server (rmcp) reads it, and answered here where rmcp would answer it
//! wrongly or end the session.
//!
//! - A line that is not one JSON-RPC 2.0 message gets its JSON-RPC error
//!   ([`jsonrpc::check`], the HTTP transport's check): `-32700` for text
//!   that is not JSON, `-32600 Invalid Request` for a batch or an `id` that
//!   is an object or an array (`"id": null`). rmcp answers all of these
//!   `-32700 Parse error`.
//! - Before `initialize`: a client of a newer protocol revision may probe
//!   first (Claude Code sends `server/discover`); rmcp's server ends the
//!   session on any first message but `initialize`. Each request before it
//!   is answered "method not found" (`-32601`); notifications and responses
//!   are dropped. From `initialize` on, every valid line goes to rmcp
//!   unchanged.
//! - A message over [`MAX_LINE`] bytes gets `-32600` with its id, here.
//!
//! Answers are written as whole lines between rmcp's (one lock on the output).

use crate::jsonrpc::{self, METHOD_NOT_FOUND};
use crate::{RecallServer, ServeError, archive::Archive, quote};
use rmcp::ServiceExt;
use serde_json::Value;
use std::sync::{Arc, Mutex as SyncMutex};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// Buffer of each in-process pipe between this filter and rmcp.
const PIPE: usize = 1 << 16;

/// Longest message passed to rmcp, in bytes. `lam mcp`'s requests are
/// small (an id, a part, a page); rmcp 1.8's line reader answered some
/// lines of 1 MB `-32700` without an id, depending on how they arrived in
/// the pipe, so a longer message is answered here, `-32600` with its id.
const MAX_LINE: usize = 64 << 10;

/// Serve `archive` on `input` and `output` (standard input and output)
/// until the input ends.
pub(crate) async fn serve<R, W>(archive: Arc<Archive>, input: R, output: W) -> Result<(), ServeError>
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let out = Arc::new(Mutex::new(output));
    let (to_server, server_in) = tokio::io::duplex(PIPE);
    let (server_out, from_server) = tokio::io::duplex(PIPE);
    let stopped: Arc<SyncMutex<Option<Stopped>>> = Arc::default();
    let pump = tokio::spawn(pump(BufReader::new(from_server), out.clone()));
    let feeder = tokio::spawn({
        let stopped = stopped.clone();
        async move {
            let mut to_server = to_server;
            if let Err(e) = feed(input, &mut to_server, &out).await {
                *stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
            drop(to_server); // rmcp reads the end of its input only now, after the error is set
        }
    });
    let served: Result<(), ServeError> = async {
        let running = RecallServer::new(archive).serve((server_in, server_out)).await.map_err(|e| ServeError::Protocol(e.to_string()))?;
        running.waiting().await.map_err(|e| ServeError::Protocol(e.to_string()))?;
        Ok(())
    }
    .await;
    // rmcp has ended (the input ended, or a fatal protocol error): its output
    // closed, so the pump ends once it has written every answer.
    feeder.abort();
    let pumped = pump.await.map_err(|e| ServeError::Protocol(format!("the output task failed: {e}")))?;
    if let Some((what, error)) = stopped.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(ServeError::Io { what: what.into(), error });
    }
    served?;
    pumped.map_err(|error| ServeError::Io { what: "writing standard output".into(), error })
}

/// Copy rmcp's answers to `out`, a line at a time.
async fn pump<R, W>(mut from_server: R, out: Arc<Mutex<W>>) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    loop {
        line.clear();
        if from_server.read_until(b'\n', &mut line).await? == 0 {
            return Ok(());
        }
        let mut out = out.lock().await;
        out.write_all(&line).await?;
        out.flush().await?;
    }
}

/// Why feeding stopped early: what was being done, and the error.
type Stopped = (&'static str, std::io::Error);

/// Pass each line of `input` that rmcp should read to `server`; answer the
/// others on `out` (module docs). Returns at the end of the input, or when
/// rmcp stops reading.
async fn feed<R, S, W>(mut input: R, server: &mut S, out: &Mutex<W>) -> Result<(), Stopped>
where
    R: AsyncBufRead + Unpin,
    S: AsyncWrite + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut started = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).await.map_err(|e| ("reading standard input", e))? == 0 {
            return Ok(());
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text); // a UTF-8 byte order mark, as rmcp reads it
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let to_rmcp = match jsonrpc::check(text) {
            Err(refusal) => Err(refusal.to_json()),
            Ok(msg) if text.len() > MAX_LINE => match msg.get("id") {
                Some(id) => Err(serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": jsonrpc::INVALID_REQUEST,
                    "message": format!("Invalid Request: the message is {} bytes, over lam mcp's limit of {MAX_LINE} (a recall names an id, a part or a page)", text.len()),
                }})),
                None => continue,
            },
            Ok(_) if started => Ok(()),
            Ok(msg) => match (msg.get("method").and_then(Value::as_str), msg.get("id")) {
                (Some("initialize"), Some(_)) => {
                    started = true;
                    Ok(())
                }
                (Some(m), Some(id)) => Err(serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": METHOD_NOT_FOUND,
                    "message": format!("method not found: `{}` (this server starts with `initialize`)", quote(m)),
                }})),
                // A notification, or a response to nothing asked: nothing to answer.
                _ => continue,
            },
        };
        match to_rmcp {
            Ok(()) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if server.write_all(&line).await.is_err() {
                    return Ok(()); // rmcp has ended
                }
            }
            Err(answer) => {
                let mut bytes = serde_json::to_vec(&answer).expect("a JSON value serialises");
                bytes.push(b'\n');
                let mut out = out.lock().await;
                let written = match out.write_all(&bytes).await {
                    Ok(()) => out.flush().await,
                    Err(e) => Err(e),
                };
                written.map_err(|e| ("writing standard output", e))?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `serve` over in-memory pipes: writes `lines`, reads `answers` lines
    /// back, then closes the input and waits for the server to end.
    async fn session(lines: Vec<String>, answers: usize) -> Vec<Value> {
        let mut store = arc_store::MemStore::new();
        let rec = lam_core::Record { index: 0, action: "cat a".into(), observation: b"hello\n".to_vec(), returncode: Some(0) };
        lam_core::ObsStore::append(&mut store, &lam_core::SessionId::new("s"), &rec, 2).unwrap();
        let archive = Arc::new(Archive::with_store(crate::Config::new(arc_store::StoreSpec::Memory), Box::new(store)).unwrap());
        let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_out) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(serve(archive, tokio::io::BufReader::new(server_in), server_out));
        let write = async move {
            for l in lines {
                client_in.write_all(l.as_bytes()).await.unwrap();
                client_in.write_all(b"\n").await.unwrap();
            }
            client_in
        };
        let read = async move {
            let mut out = tokio::io::BufReader::new(client_out);
            let mut got = Vec::new();
            for _ in 0..answers {
                let mut l = String::new();
                out.read_line(&mut l).await.unwrap();
                got.push(serde_json::from_str::<Value>(&l).unwrap_or_else(|e| panic!("{e}: {l:?}")));
            }
            got
        };
        let talk = async move {
            let (client_in, got) = tokio::join!(write, read);
            drop(client_in);
            server.await.unwrap().unwrap();
            got
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), talk).await.expect("every answer within a minute, then the end")
    }

    const INIT: &str =
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

    /// Issue 57: JSON that is not one valid Request object (a batch, an `id`
    /// that is an object or an array), before `initialize` or after, gets
    /// `-32600 Invalid Request` with `"id": null`; text that is not JSON
    /// `-32700`; a message over [`MAX_LINE`] (a 1 MB id, method or page) gets `-32600` with its id.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn invalid_requests_get_invalid_request_and_huge_strings_small_answers() {
        let huge = "a".repeat(1_000_000);
        let call = |id: u32, tool: &str, args: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
        };
        let lines = vec![
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"server/discover"}"#.to_string(),
            r#"[{"jsonrpc":"2.0","id":0,"method":"server/discover"}]"#.into(),
            INIT.into(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
            r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#.into(),
            r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#.into(),
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#.into(),
            "[]".into(),
            "{not json".into(),
            call(3, "recall", json!({"id": huge})),
            call(4, "recall_meta", json!({"id": format!("§{huge}")})),
            json!({"jsonrpc": "2.0", "id": 5, "method": "m".repeat(1_000_000)}).to_string(),
            call(6, "catalog", json!({"page": "9".repeat(1_000_000)})),
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#.into(),
        ];
        let got = session(lines, 13).await;
        let nulls: Vec<i64> = got.iter().filter(|v| v["id"].is_null()).map(|v| v["error"]["code"].as_i64().unwrap()).collect();
        assert_eq!(nulls.iter().filter(|&&c| c == -32600).count(), 6, "{nulls:?}");
        assert_eq!(nulls.iter().filter(|&&c| c == -32700).count(), 1, "{nulls:?}");
        assert_eq!(nulls.len(), 7, "{nulls:?}");
        let by_id = |id: i64| got.iter().find(|v| v["id"].as_i64() == Some(id)).unwrap_or_else(|| panic!("no answer {id}: {got:?}"));
        assert!(by_id(1)["result"]["serverInfo"].is_object());
        assert_eq!(by_id(7)["result"], json!({}));
        for id in 3..=6 {
            let text = by_id(id).to_string();
            assert!(
                text.len() < 1024 && text.contains("-32600") && text.contains("over lam mcp's limit"),
                "answer {id}: {} bytes: {}",
                text.len(),
                &text[..text.len().min(300)]
            );
        }
    }

    #[tokio::test]
    async fn a_probe_is_refused_and_initialize_passed_on() {
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{}}"#,
            "\n\n",
            r#"{"jsonrpc":"2.0","method":"notifications/something"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n"
        );
        let (mut server, out) = (Vec::new(), Mutex::new(Vec::new()));
        feed(tokio::io::BufReader::new(input.as_bytes()), &mut server, &out).await.unwrap();
        let answer: Value = serde_json::from_slice(&out.into_inner()).unwrap();
        assert_eq!((answer["id"].as_i64(), answer["error"]["code"].as_i64()), (Some(0), Some(-32601)));
        let passed = String::from_utf8(server).unwrap();
        assert!(passed.starts_with(r#"{"jsonrpc":"2.0","id":1,"method":"initialize""#), "{passed}");
        assert!(passed.ends_with("\"notifications/initialized\"}\n") && passed.lines().count() == 2, "{passed}");
    }
}
