//! What both transports check before a message reaches the SDK ([`check`]):
//! one JSON-RPC 2.0 message object, else the error JSON-RPC 2.0
//! prescribes: text that is not JSON gets `-32700 Parse error`; JSON that is
//! not a valid message (a batch, an `id` that is not a string or an integer,
//! no `"jsonrpc": "2.0"`, no `method` and no `result`/`error`) gets `-32600
//! Invalid Request`, with `"id": null` where the id cannot be read. The SDK
//! (rmcp) answers every message it cannot read `-32700`.

use serde_json::{Map, Value, json};

/// A JSON-RPC error answering a message that does not reach the SDK.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// `-32700` or `-32600`.
    pub(crate) code: i64,
    /// What is wrong.
    pub(crate) message: String,
    /// The request's id, or null where it cannot be read.
    pub(crate) id: Value,
}

impl Refusal {
    /// The error response.
    pub(crate) fn to_json(&self) -> Value {
        json!({"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}})
    }
}

/// `-32601 Method not found`.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

/// JSON-RPC's "Invalid Request".
pub(crate) const INVALID_REQUEST: i64 = -32600;

/// The message, when `body` is one well-formed JSON-RPC 2.0 message; else
/// its error.
pub(crate) fn check(body: &[u8]) -> Result<Map<String, Value>, Refusal> {
    let v: Value = serde_json::from_slice(body).map_err(|e| Refusal { code: -32700, message: format!("Parse error: {e}"), id: Value::Null })?;
    let invalid = |why: &str, id: Value| Refusal { code: -32600, message: format!("Invalid Request: {why}"), id };
    let Value::Object(m) = v else {
        let why = if v.is_array() { "batches are not supported" } else { "not a JSON-RPC message object" };
        return Err(invalid(why, Value::Null));
    };
    let id = m.get("id").cloned().unwrap_or(Value::Null);
    let id_ok = matches!(&id, Value::String(_)) || id.as_i64().is_some() || id.as_u64().is_some();
    if m.contains_key("id") && !id_ok {
        return Err(invalid("`id` must be a string or an integer", Value::Null));
    }
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("`jsonrpc` must be \"2.0\"", id));
    }
    let kind_ok = match m.get("method") {
        Some(method) => method.is_string(),
        None => m.contains_key("id") && (m.contains_key("result") || m.contains_key("error")),
    };
    if !kind_ok {
        return Err(invalid("need a string `method`, or an `id` with `result` or `error`", id));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_one_request_object_is_an_invalid_request() {
        let code = |b: &str| check(b.as_bytes()).err().map(|r| (r.code, r.id));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), None);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#), None);
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        for parse in ["{", "", "[1,"] {
            assert_eq!(code(parse), Some((-32700, Value::Null)), "{parse}");
        }
        for batch_or_bad_id in [
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            "[]",
            "3",
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        ] {
            assert_eq!(code(batch_or_bad_id), Some((-32600, Value::Null)), "{batch_or_bad_id}");
        }
        assert_eq!(code(r#"{"id":1,"method":"ping"}"#), Some((-32600, Value::from(1))));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":"k"}"#), Some((-32600, Value::from("k"))));
    }
}
