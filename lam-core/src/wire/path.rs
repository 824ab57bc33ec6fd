//! A position inside a JSON value: the one way lam names where a string
//! sits in a conversation item (a tool result's text, a large tool-call
//! input, an annotation's object), resolved in a `serde_json::Value` here
//! and in the proxy's byte tree (`lam-serve`'s `canon::find`) alike.
//! It prints as the JSON pointer (RFC 6901) it stands for, for logs, tests
//! and error messages; it is never parsed back.
//!
//! ```
//! use lam_core::wire::Path;
//! let item = serde_json::json!({"content": [{"type": "text", "text": "ok"}]});
//! let at = Path::new().key("content").index(0).key("text");
//! assert_eq!(at.get(&item).and_then(|v| v.as_str()), Some("ok"));
//! assert_eq!(at.to_string(), "/content/0/text");
//! ```

use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// One step from a JSON value to one of its children.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seg {
    /// An object's member (mostly a key of the wire, `'static`; a key
    /// read from the data is owned).
    Key(Cow<'static, str>),
    /// An array's element.
    Index(usize),
}

/// Steps from a value down to one inside it (none: the value itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path(Vec<Seg>);

impl Path {
    /// The value itself.
    pub const fn new() -> Self {
        Path(Vec::new())
    }

    /// This path, then the member `k`.
    pub fn key(mut self, k: impl Into<Cow<'static, str>>) -> Self {
        self.0.push(Seg::Key(k.into()));
        self
    }

    /// This path, then element `i`.
    pub fn index(mut self, i: usize) -> Self {
        self.0.push(Seg::Index(i));
        self
    }

    /// This path, then `rest`.
    pub fn join(&self, rest: &Path) -> Self {
        Path(self.0.iter().chain(&rest.0).cloned().collect())
    }

    /// Add a step at the end.
    pub fn push(&mut self, s: Seg) {
        self.0.push(s);
    }

    /// Take the last step off.
    pub fn pop(&mut self) -> Option<Seg> {
        self.0.pop()
    }

    /// Its steps, outermost first.
    pub fn segs(&self) -> &[Seg] {
        &self.0
    }

    /// Whether it leads through `prefix`.
    pub fn starts_with(&self, prefix: &Path) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// The steps after the first `n`.
    pub fn suffix(&self, n: usize) -> Path {
        Path(self.0.get(n..).unwrap_or_default().to_vec())
    }

    /// Bytes it holds on the heap (its steps and the keys it owns).
    pub fn heap_bytes(&self) -> usize {
        let owned = |s: &Seg| match s {
            Seg::Key(Cow::Owned(k)) => k.capacity(),
            _ => 0,
        };
        self.0.capacity() * std::mem::size_of::<Seg>() + self.0.iter().map(owned).sum::<usize>()
    }

    /// The value it names in `v`.
    pub fn get<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        self.0.iter().try_fold(v, |v, s| match (s, v) {
            (Seg::Key(k), Value::Object(m)) => m.get(k.as_ref()),
            (Seg::Index(i), Value::Array(a)) => a.get(*i),
            _ => None,
        })
    }

    /// The value it names in `v`, to change.
    pub fn get_mut<'v>(&self, v: &'v mut Value) -> Option<&'v mut Value> {
        self.0.iter().try_fold(v, |v, s| match (s, v) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k.as_ref()),
            (Seg::Index(i), Value::Array(a)) => a.get_mut(*i),
            _ => None,
        })
    }

    /// The string it names in `v`.
    pub fn str_in<'v>(&self, v: &'v Value) -> Option<&'v str> {
        self.get(v).and_then(Value::as_str)
    }
}

impl FromIterator<Seg> for Path {
    fn from_iter<I: IntoIterator<Item = Seg>>(it: I) -> Self {
        Path(it.into_iter().collect())
    }
}

/// The JSON pointer: `/content/0/text`, `~` and `/` in keys escaped.
impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.0 {
            match s {
                Seg::Key(k) => write!(f, "/{}", k.replace('~', "~0").replace('/', "~1"))?,
                Seg::Index(i) => write!(f, "/{i}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolves_prints_and_changes() {
        let mut v = json!({"a/b": [{"~x": "s"}, 1], "n": {"0": "key, not index"}});
        let p = Path::new().key("a/b").index(0).key(String::from("~x"));
        assert_eq!(p.str_in(&v), Some("s"));
        assert_eq!(p.to_string(), "/a~1b/0/~0x");
        assert_eq!(v.pointer(&p.to_string()), p.get(&v), "prints the pointer serde_json resolves the same");
        *p.get_mut(&mut v).unwrap() = json!("t");
        assert_eq!(v["a/b"][0]["~x"], "t");
        assert_eq!(Path::new().key("n").index(0).get(&v), None, "an index steps into arrays only");
        assert_eq!(Path::new().key("a/b").index(2).get(&v), None);
        assert_eq!(Path::new().get(&v), Some(&v));
        assert_eq!(Path::new().to_string(), "");
    }

    #[test]
    fn joins_and_prefixes() {
        let base = Path::new().key("parts").index(1);
        let p = base.join(&Path::new().key("text"));
        assert!(p.starts_with(&base) && !base.starts_with(&p));
        assert_eq!(p.suffix(2), Path::new().key("text"));
        assert_eq!(p.suffix(9), Path::new());
        let mut q = p.clone();
        assert_eq!(q.pop(), Some(Seg::Key("text".into())));
        assert_eq!(q, base);
    }
}
