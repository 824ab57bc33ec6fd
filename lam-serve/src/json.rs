//! Request bodies as the proxy handles them: the top-level members in their
//! order with each value's bytes as received, so everything the proxy does not
//! rewrite is forwarded as it came.

use serde::de::{Deserialize, Deserializer, Error as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use xxhash_rust::xxh3::Xxh3;

/// A JSON object's members in their original order, values as raw bytes.
#[derive(Debug)]
pub(crate) struct Members(pub Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut out: Vec<(String, Box<RawValue>)> = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    if let Some(g) = guarded(&k).filter(|&g| out.iter().any(|(o, _)| guarded(o) == Some(g))) {
                        return Err(A::Error::custom(format!("member `{}` twice", GUARDED[g][0])));
                    }
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Top-level members that hold the conversation or its preamble, each with
/// the other names the upstream reads it by (the Gemini API takes a
/// protobuf field by its JSON name and by its own, `systemInstruction` and
/// `system_instruction`): a body holding one twice, under any of its names,
/// is ambiguous (which one does the upstream read?).
pub(crate) const GUARDED: [&[&str]; 6] =
    [&["messages"], &["input"], &["system"], &["instructions"], &["contents"], &["systemInstruction", "system_instruction"]];

/// Which [`GUARDED`] member `key` names.
fn guarded(key: &str) -> Option<usize> {
    GUARDED.iter().position(|names| names.contains(&key))
}

/// The first [`GUARDED`] member that `body` (a JSON object) holds twice,
/// names compared after unescaping.
pub(crate) fn duplicate_key(body: &[u8]) -> Option<&'static str> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<&'static str>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let (mut seen, mut twice) = ([false; GUARDED.len()], None);
            // Read to the end even after a find: serde_json refuses a map
            // whose visitor stops early, which would hide the find.
            while let Some((k, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                if let Some(i) = guarded(&k) {
                    if seen[i] {
                        twice = twice.or(Some(GUARDED[i][0]));
                    }
                    seen[i] = true;
                }
            }
            Ok(twice)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    serde::Deserializer::deserialize_map(&mut de, V).ok().flatten()
}

impl Members {
    /// Parse a request body that must be one JSON object.
    pub(crate) fn parse(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }

    /// Position of the first member named `name`.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k == name)
    }

    /// The raw value of the first member named `name`.
    pub(crate) fn raw(&self, name: &str) -> Option<&str> {
        self.position(name).map(|i| self.0[i].1.get())
    }

    /// The object again, member `at` replaced by `replacement` (raw JSON):
    /// every other member's value byte for byte as received.
    pub(crate) fn write_with(&self, at: usize, replacement: &[u8]) -> Vec<u8> {
        let len: usize = self.0.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum();
        let mut out = Vec::with_capacity(len + replacement.len());
        out.push(b'{');
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            // Writing a String to a Vec cannot fail.
            serde_json::to_writer(&mut out, k).expect("string to vec");
            out.push(b':');
            out.extend_from_slice(if i == at { replacement } else { v.get().as_bytes() });
        }
        out.push(b'}');
        out
    }
}

/// A JSON array of raw items, without whitespace.
pub(crate) fn write_array<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, it) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(it);
    }
    out.push(b']');
    out
}

/// Key of the `occurrence`-th (0-based) appearance of content `key` in one
/// request: identical messages at two places are two messages.
pub(crate) fn occurrence_key(key: u128, occurrence: u32) -> u128 {
    let mut h = Xxh3::new();
    h.update(&key.to_le_bytes());
    h.update(&occurrence.to_le_bytes());
    h.digest128()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_keep_order_and_bytes() {
        let body = br#"{"z": 1, "messages" : [ {"a":1} ], "a":{"k" : "v"}}"#;
        let m = Members::parse(body).unwrap();
        assert_eq!(m.0.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["z", "messages", "a"]);
        let at = m.position("messages").unwrap();
        let out = m.write_with(at, b"[]");
        assert_eq!(out, br#"{"z":1,"messages":[],"a":{"k" : "v"}}"#);
        assert!(Members::parse(b"[1]").is_err());
        assert!(Members::parse(b"{\"a\":").is_err());
    }

    #[test]
    fn duplicate_conversation_members_are_seen() {
        let body = br#"{"messages":[],"model":"m","m\u0065ssages":[{"role":"user"}]}"#;
        assert!(Members::parse(body).is_err());
        assert_eq!(duplicate_key(body), Some("messages"));
        assert_eq!(duplicate_key(br#"{"system":"a","input":[],"system":"b"}"#), Some("system"));
        assert_eq!(duplicate_key(br#"{"model":"a","model":"b","messages":[]}"#), None);
        assert!(Members::parse(br#"{"model":"a","model":"b","messages":[]}"#).is_ok());
        assert_eq!(duplicate_key(b"not json"), None);
        // The Gemini API's conversation and its preamble, under either name (escaped too).
        assert_eq!(duplicate_key(br#"{"contents":[],"c\u006fntents":[]}"#), Some("contents"));
        assert_eq!(duplicate_key(br#"{"systemInstruction":{},"contents":[],"system_instruction":{}}"#), Some("systemInstruction"));
        assert!(Members::parse(br#"{"contents":[],"c\u006fntents":[{"role":"user"}]}"#).is_err());
        assert!(Members::parse(br#"{"system_instruction":{},"systemInstruction":{}}"#).is_err());
    }

    #[test]
    fn occurrences_differ() {
        assert_ne!(occurrence_key(7, 0), occurrence_key(7, 1));
        assert_eq!(write_array([&b"1"[..], b"{}"]), b"[1,{}]");
    }
}
