//! One request to a compacted route, parsed once: its members as received,
//! its conversation items (raw bytes, their one tree, identity and annotations)
//! and the keys that session matching compares.

use crate::api::Api;
use crate::canon::{self, Annotation, Node};
use crate::json::{Members, occurrence_key};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;
use xxhash_rust::xxh3::Xxh3;

/// One conversation item: the bytes the client sent and what they say.
#[derive(Debug)]
pub(crate) struct Item {
    pub raw: Box<RawValue>,
    /// Whether the item can be read faithfully (if not, it is forwarded
    /// exactly as sent and never admitted).
    pub faithful: bool,
    /// Its reading ([`canon::parse`]), kept for the request when it weighs
    /// no more than the item's bytes (a tool result: a few nodes over long
    /// strings); a tree that would outweigh them (a short message) is
    /// dropped and, if the conversation has not seen the item, read again.
    tree: Option<Node>,
    /// Its identity key ([`canon::identity_key`]).
    pub identity: u128,
    /// Its annotations as sent now (`cache_control`), by path.
    pub annotations: Vec<Annotation>,
}

impl Item {
    /// `f` of the item's tree (`None` when it cannot be read faithfully).
    pub(crate) fn with_tree<R>(&self, f: impl FnOnce(Option<&Node>) -> R) -> R {
        match &self.tree {
            Some(t) => f(Some(t)),
            None if self.faithful => f(canon::parse(self.raw.get().as_bytes()).ok().as_ref()),
            None => f(None),
        }
    }

    /// The item as a JSON value, built from its tree (`Null` when it cannot
    /// be read faithfully): only the items a request reads for the first
    /// time become values.
    pub(crate) fn value(&self) -> Value {
        self.with_tree(|t| t.map_or(Value::Null, |t| canon::value(self.raw.get().as_bytes(), t)))
    }
}

/// A parsed request whose conversation the proxy can compact.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub api: Api,
    members: Members,
    at: usize,
    pub items: Vec<Item>,
    /// `keys[0]`: the API and its preamble members; `keys[1 + i]`: item `i`
    /// (content key and occurrence).
    pub keys: Vec<u128>,
}

impl Parsed {
    /// Parse `body`; `None` when it is not an object with a conversation list
    /// (the proxy then forwards it as it came and lets the upstream judge it).
    pub(crate) fn parse(api: Api, body: &[u8]) -> Option<Self> {
        let members = Members::parse(body).ok()?;
        let at = members.position(api.list_field())?;
        let raws: Vec<Box<RawValue>> = serde_json::from_str(members.0[at].1.get()).ok()?;
        let mut items = Vec::with_capacity(raws.len());
        for raw in raws {
            // `raws` are valid JSON (serde_json checked them while slicing);
            // each is read once, into its tree (`Item::tree` says which trees are kept).
            let tree = canon::parse(raw.get().as_bytes()).ok();
            let annotations = tree.as_ref().map(|t| canon::annotations(raw.get().as_bytes(), t)).unwrap_or_default();
            let identity = canon::identity_key(raw.get().as_bytes(), tree.as_ref());
            let faithful = tree.is_some();
            let tree = tree.filter(|t| canon::weight(t) <= raw.get().len());
            items.push(Item { raw, faithful, tree, identity, annotations });
        }
        let keys = keys(api, &members, &items);
        Some(Self { api, members, at, items, keys })
    }

    /// The agent's own id for its run, when the body carries one: Claude
    /// Code's `metadata.user_id` (a JSON object's `session_id`, or the older
    /// `user_..._session_ID` form), else Codex's `prompt_cache_key`.
    pub(crate) fn agent_session(&self) -> Option<String> {
        let text = |raw: &str| serde_json::from_str::<String>(raw).ok();
        let from_user = |u: String| match serde_json::from_str::<Value>(&u) {
            Ok(v) => v.get("session_id").and_then(Value::as_str).map(str::to_string),
            Err(_) => u.rsplit_once("_session_").map(|(_, id)| id.to_string()),
        };
        let user = self.members.raw("metadata").and_then(|m| serde_json::from_str::<Value>(m).ok());
        let user = user.as_ref().and_then(|m| m.get("user_id")).and_then(Value::as_str).map(str::to_string);
        let id = user.and_then(from_user).or_else(|| self.members.raw("prompt_cache_key").and_then(text))?;
        // An id is shown and matched, never trusted: printable, bounded.
        (!id.is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic())).then_some(id)
    }

    /// Its `model`, when a string (the default budget is resolved from it:
    /// [`crate::budget::DefaultBudget`]).
    pub(crate) fn model(&self) -> Option<String> {
        model_in(&self.members)
    }

    /// The raw JSON of its preamble members (`system`, `instructions`) and `tools`.
    pub(crate) fn preamble_raws(&self) -> impl Iterator<Item = &[u8]> {
        self.api.preamble_fields().iter().chain(&["tools"]).filter_map(|f| self.members.raw(f)).map(str::as_bytes)
    }

    /// The body with the conversation replaced by `items` (raw JSON each).
    pub(crate) fn body_with<'a>(&self, items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
        self.members.write_with(self.at, &crate::json::write_array(items))
    }
}

fn keys(api: Api, members: &Members, items: &[Item]) -> Vec<u128> {
    let mut pre = Xxh3::new();
    pre.update(api.name().as_bytes());
    for f in api.preamble_fields() {
        let raw = members.raw(f).unwrap_or("null").as_bytes();
        let tree = canon::parse(raw).ok();
        pre.update(&canon::identity_key(raw, tree.as_ref()).to_le_bytes());
    }
    let mut seen: HashMap<u128, u32> = HashMap::new();
    let mut out = Vec::with_capacity(items.len() + 1);
    out.push(pre.digest128());
    for it in items {
        let k = it.identity;
        let n = seen.entry(k).or_default();
        out.push(occurrence_key(k, *n));
        *n += 1;
    }
    out
}

/// A body's `model`, when it is an object whose `model` is a string.
pub(crate) fn model_of(body: &[u8]) -> Option<String> {
    crate::json::Members::parse(body).ok().as_ref().and_then(model_in)
}

fn model_in(members: &crate::json::Members) -> Option<String> {
    members.raw("model").and_then(|m| serde_json::from_str::<String>(m).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The agent's id for its run, in each form it comes in; anything else
    /// (no metadata, an id with a control character) is none.
    #[test]
    fn the_agent_s_session_id_is_read_from_each_form() {
        let id = |api: Api, extra: &str| {
            let body = format!(r#"{{"model":"m",{extra}"messages":[{{"role":"user","content":"hi"}}],"input":[{{"role":"user","content":"hi"}}]}}"#);
            Parsed::parse(api, body.as_bytes()).and_then(|p| p.agent_session())
        };
        let json = r#""metadata":{"user_id":"{\"device_id\":\"d\",\"session_id\":\"7f0c-uuid\"}"},"#;
        assert_eq!(id(Api::Messages, json).as_deref(), Some("7f0c-uuid"));
        assert_eq!(id(Api::Messages, r#""metadata":{"user_id":"user_ab12_account_cd_session_9e8d"},"#).as_deref(), Some("9e8d"));
        assert_eq!(id(Api::Responses, r#""prompt_cache_key":"019a-thread","#).as_deref(), Some("019a-thread"));
        assert_eq!(id(Api::Messages, ""), None);
        assert_eq!(id(Api::Responses, r#""prompt_cache_key":"a\nb","#), None);
    }

    #[test]
    fn keys_follow_content_and_preamble() {
        let a = Parsed::parse(Api::Messages, br#"{"system":"s","messages":[{"role":"user","content":"t"},{"role":"user","content":"t"}]}"#).unwrap();
        let b =
            Parsed::parse(Api::Messages, br#"{"messages":[{"role" : "user","content":"t","cache_control":{"type":"ephemeral"}}],"system":"s","model":"m"}"#)
                .unwrap();
        let c = Parsed::parse(Api::Messages, br#"{"system":"other","messages":[{"role":"user","content":"t"}]}"#).unwrap();
        assert_eq!(a.keys.len(), 3);
        assert_ne!(a.keys[1], a.keys[2], "a repeated message is a second message");
        assert!(a.keys.starts_with(&b.keys));
        assert_ne!(a.keys[0], c.keys[0]);
        assert!(Parsed::parse(Api::Responses, br#"{"input":"just text"}"#).is_none());
        assert!(Parsed::parse(Api::ChatCompletions, b"not json").is_none());
        let out = b.body_with([&br#"{"x":1}"#[..]]);
        assert_eq!(out, br#"{"messages":[{"x":1}],"system":"s","model":"m"}"#);
    }
}
