//! What the JSON Lines transcript readers share: lines as objects with
//! their numbers, errors naming the line, timestamps, and the records of a
//! session being assembled from calls and results.

use crate::trajectory::{Format, ReadError, Trajectory, kind};
use lam_core::{Record, SessionId};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// The non-blank lines of a JSONL file as JSON objects, with 1-based line numbers.
pub(crate) fn objects<'a>(bytes: &'a [u8], name: &'a str) -> impl Iterator<Item = Result<(usize, Map<String, Value>), ReadError>> + 'a {
    bytes.split(|&b| b == b'\n').enumerate().filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace)).map(move |(i, line)| {
        let n = i + 1;
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(o)) => Ok((n, o)),
            Ok(other) => Err(line_error(name, n, format!("line is {}, not an object", kind(&other)))),
            Err(e) => Err(line_error(name, n, format!("malformed JSON at column {}: {e}", e.column()))),
        }
    })
}

pub(crate) fn line_error(name: &str, n: usize, message: String) -> ReadError {
    ReadError::Record { path: name.to_string(), record: format!("line {n}"), line: Some(n), message }
}

/// A line's `timestamp` (ISO 8601 / RFC 3339), in Unix milliseconds;
/// `None` when absent or unreadable.
pub fn timestamp(o: &Map<String, Value>) -> Option<i64> {
    let t = o.get("timestamp")?.as_str()?;
    chrono::DateTime::parse_from_rfc3339(t).ok().map(|d| d.timestamp_millis())
}

/// A transcript file's name without `.jsonl` / `.json` (and `.gz`).
pub(crate) fn stem(path: &Path) -> String {
    let n = path.file_name().and_then(|n| n.to_str()).unwrap_or("session");
    let n = n.strip_suffix(".gz").unwrap_or(n);
    n.strip_suffix(".jsonl").or_else(|| n.strip_suffix(".json")).unwrap_or(n).to_string()
}

/// The objects of a content array (none for a string).
pub(crate) fn blocks(content: &Value) -> Result<Vec<&Map<String, Value>>, String> {
    let Value::Array(bs) = content else { return Ok(Vec::new()) };
    bs.iter().map(|b| b.as_object().ok_or_else(|| format!("content block is {}, not an object", kind(b)))).collect()
}

pub(crate) fn str_field<'a>(b: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str, String> {
    b.get(key).and_then(Value::as_str).ok_or_else(|| format!("{what} has no string `{key}`"))
}

/// The texts at `paths` in `v`; one empty text when there is none.
pub(crate) fn texts_at(v: &Value, paths: &[lam_core::wire::Path]) -> Vec<String> {
    let texts: Vec<String> = paths.iter().filter_map(|p| p.str_in(v).map(str::to_string)).collect();
    if texts.is_empty() { vec![String::new()] } else { texts }
}

/// Records being assembled: calls waiting for their results, the model's text
/// since the last call, and what has been read so far.
#[derive(Default)]
pub(crate) struct Session {
    pub(crate) name: Option<String>,
    task: String,
    pending_thought: String,
    calls: HashMap<String, (String, String)>,
    pub(crate) records: Vec<Record>,
    thoughts: Vec<String>,
    /// The current line's `timestamp` (Unix ms), and each record's.
    pub(crate) time: Option<i64>,
    times: Vec<Option<i64>>,
    /// The model of the latest assistant turn read, and each record's.
    pub(crate) model: Option<String>,
    models: Vec<Option<String>>,
}

impl Session {
    pub(crate) fn think(&mut self, text: &str) {
        let t = text.trim();
        if !t.is_empty() {
            if !self.pending_thought.is_empty() {
                self.pending_thought.push('\n');
            }
            self.pending_thought.push_str(t);
        }
    }

    /// A call: it takes the text said before it (a later call of the same turn gets none).
    pub(crate) fn call(&mut self, id: &str, action: String) {
        let thought = std::mem::take(&mut self.pending_thought);
        self.calls.insert(id.to_string(), (action, thought));
    }

    /// A result: one record, with the action of its call (empty when the
    /// call was not seen). A result in several texts is a record each: all
    /// name the call; the first takes the text said before it.
    pub(crate) fn result(&mut self, id: &str, observation: String, returncode: Option<i32>) {
        let (action, thought) = match self.calls.get_mut(id) {
            Some((action, thought)) => (action.clone(), std::mem::take(thought)),
            None => Default::default(),
        };
        self.thoughts.push(thought);
        self.times.push(self.time);
        self.models.push(self.model.clone());
        self.records.push(Record { index: self.records.len() as u32, action, observation: observation.into_bytes(), returncode });
    }

    pub(crate) fn task(&mut self, text: &str) {
        if self.task.is_empty() {
            self.task = text.trim_end().to_string();
        }
    }

    pub(crate) fn finish(self, path: &Path, format: Format, default_name: String) -> Trajectory {
        Trajectory {
            session: SessionId(self.name.unwrap_or(default_name)),
            source: path.to_path_buf(),
            format,
            records: self.records,
            thoughts: self.thoughts,
            task: self.task,
            times: self.times,
            models: self.models,
            cache_ttl: None,
        }
    }
}
