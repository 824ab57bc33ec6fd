//! Trajectory readers: mini-swe-agent `.traj.json(.gz)`, SWE-agent `.traj(.gz)`,
//! OpenAI chat-completions message lists, lam's canonical JSON Lines
//! (`docs/trajectory-format.md`), and the coding agents' session logs
//! ([`crate::agents`]). Every error names the file and the record.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use lam_core::{Record, SessionId};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::trajectory::kind;
pub use crate::trajectory::{Format, ReadError, Trajectory};

/// What a reader extracts from one session.
struct Parsed {
    records: Vec<Record>,
    thoughts: Vec<String>,
    task: String,
}

fn is_trajectory_file(p: &Path) -> bool {
    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let n = n.strip_suffix(".gz").unwrap_or(n);
    n.ends_with(".traj") || n.ends_with(".traj.json") || n.ends_with(".jsonl") || n.ends_with(".json") || crate::agents::is_database(p)
}

/// Expand files and folders (recursively, sorted) into trajectory files.
/// Folders contribute `*.traj`, `*.traj.json`, `*.json`, `*.jsonl` (optionally `.gz`),
/// and the agents' session databases ([`crate::agents::is_database`]).
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ReadError> {
    Ok(expand_inputs(paths)?.into_iter().map(|i| i.path).collect())
}

/// A file to read, and whether it was named explicitly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// The file.
    pub path: PathBuf,
    /// Found by scanning a folder for a plain `.json` or a `.jsonl` name: such
    /// a file may be metadata rather than a trajectory, and is skipped (with
    /// a warning) when it is not one (a `.jsonl` one when its first line is
    /// neither lam JSONL nor an agent's transcript; once
    /// recognised it is strict). Named files and trajectory names are strict.
    pub optional: bool,
}

fn is_plain_json(p: &Path) -> bool {
    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let n = n.strip_suffix(".gz").unwrap_or(n);
    (n.ends_with(".json") && !n.ends_with(".traj.json")) || is_jsonl(p)
}

fn is_jsonl(p: &Path) -> bool {
    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    n.strip_suffix(".gz").unwrap_or(n).ends_with(".jsonl")
}

/// Like [`expand`], marking plain `.json` and `.jsonl` files found in folders as optional.
///
/// The folder walk reads regular files and descends into directories only:
/// a FIFO, socket or device in a folder (reading a FIFO would block
/// forever) is skipped with a note on standard error naming it. A symlink
/// is followed when it points to a regular file or a directory (each
/// directory is walked once, so a symlink loop ends); a dangling one is
/// skipped with a note.
pub fn expand_inputs(paths: &[PathBuf]) -> Result<Vec<Input>, ReadError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = walk(p)?;
            found.sort();
            out.extend(found.into_iter().map(|path| Input { optional: is_plain_json(&path), path }));
        } else {
            out.push(Input { path: p.clone(), optional: false });
        }
    }
    Ok(out)
}

/// The trajectory files under directory `root` (regular files, symlinks followed to regular files).
fn walk(root: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let io = |d: &Path| {
        let path = d.display().to_string();
        move |source| ReadError::Io { path, source }
    };
    let mut stack = vec![root.to_path_buf()];
    let mut seen = std::collections::HashSet::new();
    let mut found = Vec::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(std::fs::canonicalize(&d).map_err(io(&d))?) {
            continue;
        }
        for e in std::fs::read_dir(&d).map_err(io(&d))? {
            let path = e.map_err(io(&d))?.path();
            match entry_kind(&path) {
                Ok(true) => stack.push(path),
                Ok(false) if is_trajectory_file(&path) => found.push(path),
                Ok(false) => {}
                Err(what) => eprintln!("lam: skipping {}: {what}", path.display()),
            }
        }
    }
    Ok(found)
}

/// `Ok(true)` for a directory, `Ok(false)` for a regular file (a symlink
/// judged by its target), `Err(why)` for anything else.
fn entry_kind(path: &Path) -> Result<bool, String> {
    let lmeta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot stat it ({e})"))?;
    let meta =
        if lmeta.file_type().is_symlink() { std::fs::metadata(path).map_err(|e| format!("a symlink whose target cannot be read ({e})"))? } else { lmeta };
    let ft = meta.file_type();
    if ft.is_dir() || ft.is_file() {
        return Ok(ft.is_dir());
    }
    Err(format!("{}, not a regular file or directory", special_kind(&ft)))
}

/// A name for a special file type.
fn special_kind(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_block_device() || ft.is_char_device() {
            return "a device";
        }
    }
    let _ = ft;
    "a special file"
}

/// Read an input; an optional one that is not a trajectory yields `Ok(None)`.
/// An agent's transcript is strict once recognised: a `.jsonl` by its first
/// line, a `.json` as a document its agent reads ([`crate::agents::detect_document`]).
pub fn read_input(input: &Input) -> Result<Option<Vec<Trajectory>>, ReadError> {
    if !input.optional {
        return read_path(&input.path).map(Some);
    }
    let bytes = read_file(&input.path)?;
    if is_jsonl(&input.path) {
        return if crate::agents::detect(&bytes).is_none() { Ok(None) } else { read_bytes(&bytes, &input.path).map(Some) };
    }
    match read_bytes(&bytes, &input.path) {
        Ok(t) => Ok(Some(t)),
        Err(e @ (ReadError::Unknown { .. } | ReadError::Json { .. } | ReadError::Record { .. })) => {
            let agent_s = serde_json::from_slice::<Value>(&bytes).ok().as_ref().and_then(crate::agents::detect_document);
            if agent_s.is_some() { Err(e) } else { Ok(None) }
        }
        Err(e) => Err(e),
    }
}

/// Read a file (gzip by `.gz` suffix) into trajectories; JSONL files and
/// an agent's session database may hold several sessions.
pub fn read_path(path: &Path) -> Result<Vec<Trajectory>, ReadError> {
    if let Some(agent) = crate::agents::database_of(path) {
        return agent.read(&[], path);
    }
    read_bytes(&read_file(path)?, path)
}

/// The file's bytes, decompressed when its name ends in `.gz`.
fn read_file(path: &Path) -> Result<Vec<u8>, ReadError> {
    let name = path.display().to_string();
    let raw = std::fs::read(path).map_err(|source| ReadError::Io { path: name.clone(), source })?;
    let bytes = if name.ends_with(".gz") {
        let mut v = Vec::new();
        flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut v).map_err(|source| ReadError::Io { path: name.clone(), source })?;
        v
    } else {
        raw
    };
    Ok(bytes)
}

/// Read the (decompressed) contents of the file `path` names: JSON Lines when
/// the name ends in `.jsonl` (or `.jsonl.gz`), read as an agent's
/// transcript when its first non-blank line is one
/// ([`crate::agents::detect`]), else as lam JSONL; otherwise one JSON document
/// whose format is recognised by its content (an agent's transcript,
/// [`crate::agents::detect_document`], read by its room). `path` names the input in errors and
/// gives the default session name; nothing is read from it.
pub fn read_bytes(bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
    let name = path.display().to_string();
    let stem = name.trim_end_matches(".gz");
    if stem.ends_with(".jsonl") {
        return match crate::agents::detect(bytes) {
            Some(Format::Agent(agent)) => agent.read(bytes, path),
            _ => read_jsonl(bytes, path),
        };
    }
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| ReadError::Json { path: name.clone(), line: e.line(), column: e.column(), message: e.to_string() })?;
    if let Some(agent) = crate::agents::detect_document(&v) {
        return agent.read(bytes, path);
    }
    let session = default_session(path);
    read_value(&v, path, session).map(|t| vec![t])
}

fn default_session(path: &Path) -> String {
    let n = path.file_name().and_then(|n| n.to_str()).unwrap_or("session");
    let mut s = n;
    for suf in [".gz", ".json", ".traj", ".jsonl"] {
        s = s.strip_suffix(suf).unwrap_or(s);
    }
    s.to_string()
}

/// Read an already parsed JSON document.
pub fn read_value(v: &Value, path: &Path, default_session: String) -> Result<Trajectory, ReadError> {
    let name = path.display().to_string();
    let session = v.get("instance_id").and_then(Value::as_str).map(str::to_string).unwrap_or(default_session);
    let mk = |format, p: Parsed| Trajectory {
        session: SessionId(session.clone()),
        source: path.to_path_buf(),
        format,
        records: p.records,
        thoughts: p.thoughts,
        task: p.task,
        times: Vec::new(),
        models: Vec::new(),
        cache_ttl: None,
    };
    match v {
        Value::Array(msgs) => Ok(mk(Format::OpenAiChat, from_messages(msgs, &name, "messages")?)),
        Value::Object(o) => {
            if let Some(Value::Array(steps)) = o.get("trajectory").filter(|t| t.as_array().is_some_and(|a| !a.is_empty())) {
                let mut p = from_swe_steps(steps, &name)?;
                if let Some(Value::Array(h)) = o.get("history") {
                    p.task = from_messages(h, &name, "history").map(|m| m.task).unwrap_or_default();
                }
                return Ok(mk(Format::SweAgent, p));
            }
            if let Some(Value::Array(msgs)) = o.get("messages") {
                let f = if o.get("trajectory_format").and_then(Value::as_str).is_some_and(|s| s.starts_with("mini-swe-agent")) {
                    Format::MiniSweAgent
                } else {
                    Format::OpenAiChat
                };
                return Ok(mk(f, from_messages(msgs, &name, "messages")?));
            }
            if let Some(Value::Array(msgs)) = o.get("history") {
                return Ok(mk(Format::SweAgent, from_messages(msgs, &name, "history")?));
            }
            Err(ReadError::Unknown { path: name, message: "expected `messages`, `trajectory` or `history`, or a message array".into() })
        }
        _ => Err(ReadError::Unknown { path: name, message: "top level is neither an object nor an array".into() }),
    }
}

fn from_swe_steps(steps: &[Value], name: &str) -> Result<Parsed, ReadError> {
    let mut out = Vec::with_capacity(steps.len());
    let mut thoughts = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        let rec = |message: String| ReadError::Record { path: name.to_string(), record: format!("trajectory[{i}]"), line: None, message };
        let obs = match s.get("observation") {
            Some(Value::String(x)) => x.as_bytes().to_vec(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => return Err(rec(format!("observation is {}, not a string", kind(other)))),
        };
        let action = match s.get("action") {
            Some(Value::String(x)) => x.trim().to_string(),
            Some(Value::Null) | None => String::new(),
            Some(other) => return Err(rec(format!("action is {}, not a string", kind(other)))),
        };
        thoughts.push(s.get("thought").and_then(Value::as_str).unwrap_or("").trim().to_string());
        out.push(Record { index: out.len() as u32, action, observation: obs, returncode: None });
    }
    Ok(Parsed { records: out, thoughts, task: String::new() })
}

/// Text of a message `content`: a string, or a list of parts with `text`.
fn content_text(c: Option<&Value>) -> Result<String, String> {
    match c {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut s = String::new();
            for p in parts {
                match p {
                    Value::String(t) => s.push_str(t),
                    Value::Object(o) => {
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            s.push_str(t);
                        }
                    }
                    other => return Err(format!("content part is {}", kind(other))),
                }
            }
            Ok(s)
        }
        Some(other) => Err(format!("content is {}, not text", kind(other))),
    }
}

/// The assistant text around its action: the content without the fenced action block.
fn thought_of(content: &str, action: &str) -> String {
    if !action.is_empty()
        && let Some(end) = content.rfind("```")
        && let Some(start) = content[..end].rfind("```")
        && content[start + 3..end].contains(action)
    {
        return format!("{}{}", &content[..start], &content[end + 3..]).trim().to_string();
    }
    content.trim().to_string()
}

fn from_messages(msgs: &[Value], name: &str, field: &str) -> Result<Parsed, ReadError> {
    let has_tool = msgs.iter().any(|m| m.get("role").and_then(Value::as_str) == Some("tool"));
    let mut out = Vec::new();
    let mut thoughts = Vec::new();
    let mut task = String::new();
    let mut last_thought = String::new();
    let mut last_action: Option<String> = None;
    let mut last_assistant: Option<&Value> = None;
    for (i, m) in msgs.iter().enumerate() {
        let rec = |message: String| ReadError::Record { path: name.to_string(), record: format!("{field}[{i}]"), line: None, message };
        let Value::Object(_) = m else {
            return Err(rec(format!("message is {}, not an object", kind(m))));
        };
        let role = match m.get("role") {
            Some(Value::String(r)) => r.as_str(),
            _ => return Err(rec("message has no string `role`".into())),
        };
        let content = content_text(m.get("content")).map_err(rec)?;
        match role {
            "assistant" => {
                let a = lam_core::action::of_message(m);
                last_thought = thought_of(&content, &a);
                last_action = Some(a);
                last_assistant = Some(m);
            }
            "system" | "user" if last_action.is_none() => {
                if !task.is_empty() {
                    task.push_str("\n\n");
                }
                task.push_str(content.trim_end());
            }
            "tool" => {
                thoughts.push(std::mem::take(&mut last_thought));
                let call_id = m.get("tool_call_id").and_then(Value::as_str);
                out.push(Record {
                    index: out.len() as u32,
                    action: last_assistant.map(|a| lam_core::action::answered(a, call_id)).unwrap_or_default(),
                    observation: content.into_bytes(),
                    returncode: None,
                })
            }
            "user" if !has_tool && last_action.is_some() => {
                let rc = returncode(&content);
                thoughts.push(std::mem::take(&mut last_thought));
                out.push(Record {
                    index: out.len() as u32,
                    action: last_action.clone().unwrap_or_default(),
                    observation: content.into_bytes(),
                    returncode: rc,
                });
            }
            _ => {}
        }
    }
    Ok(Parsed { records: out, thoughts, task })
}

/// mini-swe-agent wraps outputs as `<returncode>N</returncode>`.
fn returncode(content: &str) -> Option<i32> {
    let s = content.strip_prefix("<returncode>")?;
    let (n, _) = s.split_once("</returncode>")?;
    n.trim().parse().ok()
}

/// lam trajectory JSON Lines v1: one record per line.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct JsonlRecord {
    /// Session name.
    pub session: String,
    /// 0-based index within the session; must be consecutive.
    pub index: u32,
    /// Action signature.
    #[serde(default)]
    pub action: String,
    /// Observation text (valid UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<String>,
    /// Observation bytes in standard base64 (when not valid UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation_b64: Option<String>,
    /// Return code, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returncode: Option<i32>,
    /// The model's text before the action, if recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
}

impl JsonlRecord {
    /// The canonical line for a record (`observation` when UTF-8, else `observation_b64`).
    pub fn from_record(session: &str, r: &Record) -> Self {
        let (observation, observation_b64) = match std::str::from_utf8(&r.observation) {
            Ok(s) => (Some(s.to_string()), None),
            Err(_) => (None, Some(B64.encode(&r.observation))),
        };
        Self { session: session.to_string(), index: r.index, action: r.action.clone(), observation, observation_b64, returncode: r.returncode, thought: None }
    }
}

fn read_jsonl(bytes: &[u8], path: &Path) -> Result<Vec<Trajectory>, ReadError> {
    let name = path.display().to_string();
    let mut out: Vec<Trajectory> = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let rec = |message: String| ReadError::Record { path: name.clone(), record: format!("line {n}"), line: Some(n), message };
        let r: JsonlRecord = serde_json::from_slice(line).map_err(|e| rec(format!("malformed JSON at column {}: {e}", e.column())))?;
        let observation = match (r.observation, r.observation_b64) {
            (Some(s), None) => s.into_bytes(),
            (None, Some(b)) => B64.decode(b.as_bytes()).map_err(|e| rec(format!("observation_b64: {e}")))?,
            (None, None) => return Err(rec("needs `observation` or `observation_b64`".into())),
            (Some(_), Some(_)) => return Err(rec("has both `observation` and `observation_b64`".into())),
        };
        let t = match out.iter_mut().find(|t| t.session.0 == r.session) {
            Some(t) => t,
            None => {
                out.push(Trajectory {
                    session: SessionId(r.session.clone()),
                    source: path.to_path_buf(),
                    format: Format::LamJsonl,
                    records: Vec::new(),
                    thoughts: Vec::new(),
                    task: String::new(),
                    times: Vec::new(),
                    models: Vec::new(),
                    cache_ttl: None,
                });
                out.last_mut().expect("just pushed")
            }
        };
        if r.index as usize != t.records.len() {
            return Err(rec(format!("session `{}` expects index {}, found {}", r.session, t.records.len(), r.index)));
        }
        t.thoughts.push(r.thought.unwrap_or_default());
        t.records.push(Record { index: r.index, action: r.action, observation, returncode: r.returncode });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, body: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lam-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn malformed_json_names_file_and_position() {
        let p = write("bad.traj", b"{\"trajectory\": [ {\"action\": \"ls\",, } ]}");
        let e = read_path(&p).unwrap_err().to_string();
        assert!(e.contains("bad.traj: malformed JSON at line 1, column"), "{e}");
    }

    #[test]
    fn wrong_shape_names_the_record() {
        let p = write("shape.traj", br#"{"trajectory": [{"action": "ls", "observation": "a"}, {"action": "cat", "observation": 5}]}"#);
        let e = read_path(&p).unwrap_err().to_string();
        assert!(e.ends_with("shape.traj: trajectory[1]: observation is a number, not a string"), "{e}");
        let p = write("bad.jsonl", b"{\"session\":\"s\",\"index\":0,\"observation\":\"x\"}\n{\"session\":\"s\",\"index\":0,\"observation\":\"y\"}\n");
        let e = read_path(&p).unwrap_err().to_string();
        assert!(e.contains("bad.jsonl: line 2: session `s` expects index 1, found 0"), "{e}");
        let p = write("bad2.jsonl", b"{\"session\":\"s\",\"index\":0,\"observation\":\"x\"}\n{not json\n");
        let e = read_path(&p).unwrap_err().to_string();
        assert!(e.contains("bad2.jsonl: line 2: malformed JSON"), "{e}");
    }

    #[test]
    fn jsonl_keeps_invalid_utf8_exactly() {
        let bytes: Vec<u8> = b"caf\xe9 \xff\x00 end\n".to_vec();
        let r = Record { index: 0, action: "head -c 9 f".into(), observation: bytes.clone(), returncode: Some(0) };
        let line = serde_json::to_string(&JsonlRecord::from_record("s", &r)).unwrap();
        assert!(line.contains("observation_b64"));
        let p = write("bytes.jsonl", format!("{line}\n").as_bytes());
        let t = read_path(&p).unwrap();
        assert_eq!(t[0].records[0].observation, bytes);
    }

    #[test]
    fn openai_messages_take_tool_results() {
        let doc = br#"[{"role":"system","content":"sys"},{"role":"user","content":"fix it"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]},
            {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"a.py\nb.py\n"}]},
            {"role":"user","content":"thanks"}]"#;
        let p = write("chat.json", doc);
        let t = read_path(&p).unwrap();
        assert_eq!(t[0].format, Format::OpenAiChat);
        assert_eq!(t[0].records.len(), 1);
        assert_eq!(t[0].records[0].action, "bash({\"cmd\":\"ls\"})");
        assert_eq!(t[0].records[0].observation, b"a.py\nb.py\n");
    }

    #[test]
    fn mini_swe_agent_messages() {
        let doc = br#"{"instance_id":"x__y-1","trajectory_format":"mini-swe-agent-1","messages":[
            {"role":"system","content":"s"},{"role":"user","content":"task"},
            {"role":"assistant","content":"THOUGHT: look\n\n```bash\nls -la\n```"},
            {"role":"user","content":"<returncode>0</returncode>\n<output>\na\n</output>"}]}"#;
        let p = write("m.traj.json", doc);
        let t = read_path(&p).unwrap();
        assert_eq!(t[0].session.0, "x__y-1");
        assert_eq!(t[0].format, Format::MiniSweAgent);
        assert_eq!(t[0].records[0].action, "ls -la");
        assert_eq!(t[0].records[0].returncode, Some(0));
    }
}
