//! The one rule for naming the action of a tool call.
//!
//! A record's `action` is part of its content id (`§id` hashes the action and
//! the observation), so every surface that sees the same tool call must name
//! it the same way: the trajectory readers (`lam compact`), the proxy
//! (`lam serve`) and the Python package. A call is `name(arguments)`, the
//! arguments as the client sent them (a JSON string's text, or a JSON value's
//! compact form); several calls answered together are joined by `"; "`.
//!
//! ```
//! use lam_core::action;
//! assert_eq!(action::tool_call("bash", r#"{"cmd":"ls"}"#), r#"bash({"cmd":"ls"})"#);
//! let v = serde_json::json!({"command": "ls"});
//! assert_eq!(action::tool_call_value("Bash", Some(&v)), r#"Bash({"command":"ls"})"#);
//! assert_eq!(action::join(["a()".to_string(), "b(1)".to_string()]), "a(); b(1)");
//! ```

/// The action of one tool call: `name(arguments)`.
pub fn tool_call(name: &str, arguments: &str) -> String {
    let name = if name.is_empty() { "tool" } else { name };
    format!("{name}({arguments})")
}

/// [`tool_call`] with arguments as a JSON value: a string is taken as its
/// text (OpenAI sends arguments as a JSON-encoded string), anything else in
/// its compact form (Anthropic `input` objects); absent arguments are empty.
pub fn tool_call_value(name: &str, arguments: Option<&serde_json::Value>) -> String {
    match arguments {
        Some(serde_json::Value::String(s)) => tool_call(name, s),
        Some(serde_json::Value::Null) | None => tool_call(name, ""),
        Some(v) => tool_call(name, &v.to_string()),
    }
}

/// Several calls answered by one observation, in order.
pub fn join(calls: impl IntoIterator<Item = String>) -> String {
    calls.into_iter().collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unnamed_calls_are_tools() {
        assert_eq!(tool_call("", "x"), "tool(x)");
        assert_eq!(tool_call_value("f", None), "f()");
        assert_eq!(tool_call_value("f", Some(&serde_json::json!("raw text"))), "f(raw text)");
    }
}
