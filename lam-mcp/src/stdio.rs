//! What `lam mcp` answers on standard input before `initialize`. A client of
//! a newer protocol revision may probe first (Claude Code sends
//! `server/discover`); rmcp's server ends the session on any first message
//! but `initialize`. Each request before it is answered "method not found"
//! (JSON-RPC `-32601`), notifications are dropped, and the stream from
//! `initialize` on goes to rmcp unchanged.

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest line read before `initialize` (a probe is a few hundred bytes).
const MAX_PROBE: usize = 1 << 20;

/// Read `input` up to the first message that is not a request or
/// notification other than `initialize` (normally `initialize` itself),
/// answering each request on `output`; returns that message's line, to be
/// read again by the MCP server. Empty at the end of the input.
pub(crate) async fn before_initialize<R, W>(input: &mut R, output: &mut W) -> std::io::Result<Vec<u8>>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let mut line = Vec::new();
        let n = AsyncReadExt::take(&mut *input, MAX_PROBE as u64).read_until(b'\n', &mut line).await?;
        if n == 0 {
            return Ok(line);
        }
        let msg: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(_) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Err(_) => return Ok(line),
        };
        let method = msg.get("method").and_then(Value::as_str);
        match (method, msg.get("id")) {
            (Some("initialize") | None, _) => return Ok(line),
            (Some(_), None) => continue,
            (Some(m), Some(id)) => {
                let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601,
                    "message": format!("method not found: `{m}` (this server starts with `initialize`)"),
                }});
                let mut out = serde_json::to_vec(&answer).expect("a JSON value serialises");
                out.push(b'\n');
                output.write_all(&out).await?;
                output.flush().await?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_probe_is_refused_and_initialize_passed_on() {
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{}}"#,
            "\n\n",
            r#"{"jsonrpc":"2.0","method":"notifications/something"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n"
        );
        let mut reader = tokio::io::BufReader::new(input.as_bytes());
        let mut out = Vec::new();
        let first = before_initialize(&mut reader, &mut out).await.unwrap();
        assert!(first.starts_with(br#"{"jsonrpc":"2.0","id":1,"method":"initialize""#));
        let answer: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!((answer["id"].as_i64(), answer["error"]["code"].as_i64()), (Some(0), Some(-32601)));
        let mut rest = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut reader, &mut rest).await.unwrap();
        assert!(rest.contains("notifications/initialized"), "the rest is left for the server");
        let mut empty = tokio::io::BufReader::new(&b""[..]);
        assert!(before_initialize(&mut empty, &mut Vec::new()).await.unwrap().is_empty());
    }
}
