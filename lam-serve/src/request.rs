//! One request to a compacted route, parsed once: its members as received,
//! its conversation items (raw bytes and parsed value) and the content keys
//! that session matching compares.

use crate::api::Api;
use crate::json::{Members, content_key, occurrence_key};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;
use xxhash_rust::xxh3::Xxh3;

/// One conversation item: the bytes the client sent and their value.
#[derive(Debug)]
pub(crate) struct Item {
    pub raw: Box<RawValue>,
    pub value: Value,
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
            let value = serde_json::from_str(raw.get()).ok()?;
            items.push(Item { raw, value });
        }
        let keys = keys(api, &members, &items);
        Some(Self {
            api,
            members,
            at,
            items,
            keys,
        })
    }

    /// The body with the conversation replaced by `items` (raw JSON each).
    pub(crate) fn body_with<'a>(&self, items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
        self.members
            .write_with(self.at, &crate::json::write_array(items))
    }
}

fn keys(api: Api, members: &Members, items: &[Item]) -> Vec<u128> {
    let mut pre = Xxh3::new();
    pre.update(api.name().as_bytes());
    for f in api.preamble_fields() {
        let v = members.value(f).unwrap_or(Value::Null);
        pre.update(&content_key(&v).to_le_bytes());
    }
    let mut seen: HashMap<u128, u32> = HashMap::new();
    let mut out = Vec::with_capacity(items.len() + 1);
    out.push(pre.digest128());
    for it in items {
        let k = content_key(&it.value);
        let n = seen.entry(k).or_default();
        out.push(occurrence_key(k, *n));
        *n += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_content_and_preamble() {
        let a = Parsed::parse(Api::Messages, br#"{"system":"s","messages":[{"role":"user","content":"t"},{"role":"user","content":"t"}]}"#).unwrap();
        let b = Parsed::parse(
            Api::Messages,
            br#"{"messages":[{"content":"t", "role":"user"}],"system":"s","model":"m"}"#,
        )
        .unwrap();
        let c = Parsed::parse(
            Api::Messages,
            br#"{"system":"other","messages":[{"role":"user","content":"t"}]}"#,
        )
        .unwrap();
        assert_eq!(a.keys.len(), 3);
        assert_ne!(
            a.keys[1], a.keys[2],
            "a repeated message is a second message"
        );
        assert!(a.keys.starts_with(&b.keys));
        assert_ne!(a.keys[0], c.keys[0]);
        assert!(Parsed::parse(Api::Responses, br#"{"input":"just text"}"#).is_none());
        assert!(Parsed::parse(Api::ChatCompletions, b"not json").is_none());
        let out = b.body_with([&br#"{"x":1}"#[..]]);
        assert_eq!(out, br#"{"messages":[{"x":1}],"system":"s","model":"m"}"#);
    }
}
