//! Gold-patch evidence (SYSTEM.md "Evidence"), resolved outcomes, and the
//! LoCoMo reader used for the conversational control.

use crate::error::{Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Minimum length of an evidence line after trimming (characters).
pub const MIN_EVIDENCE_CHARS: usize = 12;

/// Gold fix patches by instance id.
#[derive(Debug, Default)]
pub struct GoldPatches {
    patches: HashMap<String, String>,
    /// Files read.
    pub sources: Vec<PathBuf>,
}

impl GoldPatches {
    /// Read a JSON array of `{instance_id, golden_patch}` objects, or every
    /// `*.json` file of a folder (the first file naming an id wins).
    pub fn load(path: &Path) -> Result<Self> {
        let mut files = Vec::new();
        if path.is_dir() {
            for e in std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))? {
                let p = e?.path();
                if p.extension().is_some_and(|x| x == "json") {
                    files.push(p);
                }
            }
            files.sort();
        } else {
            files.push(path.to_path_buf());
        }
        let mut g = GoldPatches::default();
        for f in files {
            let bytes = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
            let v: Value = serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", f.display()))?;
            let Value::Array(items) = v else { continue };
            for it in items {
                let (Some(id), Some(p)) = (it.get("instance_id").and_then(Value::as_str), it.get("golden_patch").and_then(Value::as_str)) else { continue };
                g.patches.entry(id.to_string()).or_insert_with(|| p.to_string());
            }
            g.sources.push(f);
        }
        Ok(g)
    }

    /// Number of instances with a patch.
    pub fn len(&self) -> usize {
        self.patches.len()
    }

    /// True when no patch was loaded.
    pub fn is_empty(&self) -> bool {
        self.patches.is_empty()
    }

    /// The gold patch of `id`.
    pub fn get(&self, id: &str) -> Option<&str> {
        self.patches.get(id).map(String::as_str)
    }
}

/// Candidate evidence lines of a unified diff: inside hunks, the lines the
/// fix removes (`-`) or keeps as context (` `), trimmed, at least
/// [`MIN_EVIDENCE_CHARS`] characters, distinct, in patch order.
pub fn evidence_lines(patch: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut in_hunk = false;
    for line in patch.lines() {
        if line.starts_with("@@") {
            in_hunk = true;
            continue;
        }
        if line.starts_with("diff --git") {
            in_hunk = false;
            continue;
        }
        if !in_hunk {
            continue;
        }
        let body = match line.as_bytes().first() {
            Some(b'-') | Some(b' ') => &line[1..],
            _ => continue,
        };
        let t = body.trim();
        if t.chars().count() >= MIN_EVIDENCE_CHARS && seen.insert(t.to_string()) {
            out.push(t.to_string());
        }
    }
    out
}

/// Resolved outcomes found in `meta/` folders beside trajectory folders.
#[derive(Debug, Default)]
pub struct Outcomes {
    by_dir: BTreeMap<PathBuf, Option<DirOutcomes>>,
}

#[derive(Debug, Clone)]
struct DirOutcomes {
    resolved: HashSet<String>,
    /// Ids with a known outcome; `None` means every trajectory under the folder.
    known: Option<HashSet<String>>,
}

impl Outcomes {
    /// The recorded outcome of `id` for a trajectory read from `file`: the
    /// nearest ancestor (up to three levels) holding a `meta/` folder whose
    /// JSON reports resolved instances.
    pub fn outcome(&mut self, file: &Path, id: &str) -> Option<bool> {
        let mut dir = file.parent();
        for _ in 0..3 {
            let d = dir?;
            let meta = d.join("meta");
            if meta.is_dir() {
                let o = self.by_dir.entry(meta.clone()).or_insert_with(|| read_meta(&meta)).as_ref()?;
                return match &o.known {
                    Some(k) if !k.contains(id) => None,
                    _ => Some(o.resolved.contains(id)),
                };
            }
            dir = d.parent();
        }
        None
    }
}

fn str_set(v: &Value) -> HashSet<String> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

/// Read resolved outcomes from a `meta/` folder: `{instances: [{instance_id,
/// resolved}]}`, an sb-cli report (`resolved_ids`, `completed_ids`), or a
/// `"resolved": [ids]` array found textually in a file that is not strict JSON.
fn read_meta(dir: &Path) -> Option<DirOutcomes> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).ok()?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    for f in &files {
        let Ok(bytes) = std::fs::read(f) else { continue };
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            if let Some(Value::Array(items)) = v.get("instances") {
                let mut resolved = HashSet::new();
                let mut known = HashSet::new();
                for it in items {
                    if let (Some(id), Some(r)) = (it.get("instance_id").and_then(Value::as_str), it.get("resolved").and_then(Value::as_bool)) {
                        known.insert(id.to_string());
                        if r {
                            resolved.insert(id.to_string());
                        }
                    }
                }
                if !known.is_empty() {
                    return Some(DirOutcomes { resolved, known: Some(known) });
                }
            }
            if let (Some(r), Some(c)) = (v.get("resolved_ids"), v.get("completed_ids")) {
                return Some(DirOutcomes { resolved: str_set(r), known: Some(str_set(c)) });
            }
        }
    }
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        if let Some(at) = text.find("\"resolved\": [").or_else(|| text.find("\"resolved\":[")) {
            let start = at + text[at..].find('[')?;
            let end = start + text[start..].find(']')?;
            if let Ok(v) = serde_json::from_str::<Value>(&text[start..=end]) {
                return Some(DirOutcomes { resolved: str_set(&v), known: None });
            }
        }
    }
    None
}

/// One LoCoMo dialogue turn.
#[derive(Debug, Clone)]
pub struct LocomoTurn {
    /// Conversation sample id.
    pub sample: String,
    /// Dialogue id (`D1:3`).
    pub dia_id: String,
    /// The utterance.
    pub text: String,
}

/// Read every dialogue turn of `locomo10.json` (all conversations, sessions
/// in numeric order).
pub fn read_locomo(path: &Path) -> Result<Vec<LocomoTurn>> {
    let v: Value = serde_json::from_slice(&std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        .with_context(|| format!("parsing {}", path.display()))?;
    let mut out = Vec::new();
    for conv in v.as_array().context("LoCoMo: expected an array of conversations")? {
        let sample = conv.get("sample_id").and_then(Value::as_str).unwrap_or("").to_string();
        let Some(Value::Object(c)) = conv.get("conversation") else { continue };
        let mut sessions: Vec<(u32, &Vec<Value>)> = c
            .iter()
            .filter_map(|(k, v)| {
                let n: u32 = k.strip_prefix("session_")?.parse().ok()?;
                Some((n, v.as_array()?))
            })
            .collect();
        sessions.sort_by_key(|s| s.0);
        for (_, turns) in sessions {
            for t in turns {
                if let Some(text) = t.get("text").and_then(Value::as_str) {
                    out.push(LocomoTurn {
                        sample: sample.clone(),
                        dia_id: t.get("dia_id").and_then(Value::as_str).unwrap_or("").to_string(),
                        text: text.to_string(),
                    });
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_lines_take_removed_and_context_lines_of_hunks_only() {
        let p = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,4 +1,4 @@\n def function_name(arg):\n-    return arg + 1  # old\n+    return arg + 2  # new\n     else:\n-    return arg + 1  # old\n";
        assert_eq!(evidence_lines(p), vec!["def function_name(arg):".to_string(), "return arg + 1  # old".to_string()]);
    }
}
