//! Session names for one run over many inputs: the one rule by which
//! `lam compact` and `lam view` name sessions, so two inputs never share a
//! session (in a store) or an output file (`--out`) unless the user says so.
//!
//! A trajectory's own name is its instance id, its file stem, or (lam JSONL)
//! the session the file names. Names are compared as they would be written
//! to a file ([`lam_core::file_stem`]), so `x/y` and `x_y` count as the same.
//! In input order (inputs are sorted by path within a folder):
//!
//! 1. the first trajectory to claim a name keeps it;
//! 2. a later one is qualified by its folder relative to the inputs' common
//!    folder: `NAME@REL` (`fasterxml__jackson-core-370@gpt-4o/trajs`);
//! 3. when that is taken too (or the folder is the common one), by a short
//!    hash of its file's name and its own name: `NAME~1a2b3c4d`;
//! 4. the same file given twice gets `~HASH-2`, `~HASH-3`, ...
//!
//! The same inputs give the same names on every run. A different set of
//! inputs can name a trajectory differently (a name is qualified only when
//! it would collide within the run).

use crate::Trajectory;
use lam_core::{ObsId, SessionId, file_stem};
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

/// The session names given out in one run.
#[derive(Debug, Clone)]
pub struct SessionNames {
    root: PathBuf,
    taken: HashSet<String>,
}

fn folder_of(p: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    abs.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn common_prefix(a: &Path, b: &Path) -> PathBuf {
    a.components().zip(b.components()).take_while(|(x, y)| x == y).map(|(x, _)| x).collect()
}

fn slash_path(p: &Path) -> String {
    p.components().filter_map(|c| if let Component::Normal(s) = c { Some(s.to_string_lossy().into_owned()) } else { None }).collect::<Vec<_>>().join("/")
}

impl SessionNames {
    /// Names for a run over these input files (as expanded: `read::expand`);
    /// qualifiers are relative to their common folder.
    pub fn new<'a>(files: impl IntoIterator<Item = &'a Path>) -> Self {
        let mut root: Option<PathBuf> = None;
        for f in files {
            let d = folder_of(f);
            root = Some(match root {
                None => d,
                Some(r) => common_prefix(&r, &d),
            });
        }
        Self { root: root.unwrap_or_default(), taken: HashSet::new() }
    }

    /// Give `t` a session name no earlier trajectory of this run holds;
    /// returns its own name when it had to be qualified.
    pub fn assign(&mut self, t: &mut Trajectory) -> Option<String> {
        let name = t.session.0.clone();
        if self.taken.insert(file_stem(&name)) {
            return None;
        }
        let file_name = t.source.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let rel_dir = slash_path(folder_of(&t.source).strip_prefix(&self.root).unwrap_or(Path::new("")));
        // The file's name, not its path, so `lam view FILE` and `lam compact DIR` agree.
        let hash = ObsId::of(file_name.as_bytes(), name.as_bytes()).hex()[..8].to_string();
        let mut candidates = Vec::new();
        if !rel_dir.is_empty() {
            candidates.push(format!("{name}@{rel_dir}"));
        }
        candidates.push(format!("{name}~{hash}"));
        let chosen = candidates.into_iter().chain((2..).map(|k| format!("{name}~{hash}-{k}"))).find(|c| self.taken.insert(file_stem(c)));
        t.session = SessionId(chosen.unwrap_or_default());
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    fn traj(session: &str, source: &str) -> Trajectory {
        Trajectory {
            session: SessionId(session.into()),
            source: source.into(),
            format: Format::LamJsonl,
            records: vec![],
            thoughts: vec![],
            task: String::new(),
            times: vec![],
            models: vec![],
            cache_ttl: None,
        }
    }

    #[test]
    fn names_never_collide_and_are_stable() {
        let files = ["/c/a/trajs/x.traj", "/c/b/trajs/x.traj", "/c/b/trajs/s.jsonl"];
        let run = || {
            let mut n = SessionNames::new(files.iter().map(Path::new));
            let mut ts = vec![traj("x", files[0]), traj("x", files[1]), traj("x/y", files[2]), traj("x_y", files[2]), traj("x", files[1]), traj("x", files[1])];
            let renamed: Vec<Option<String>> = ts.iter_mut().map(|t| n.assign(t)).collect();
            (ts.into_iter().map(|t| t.session.0).collect::<Vec<_>>(), renamed)
        };
        let (names, renamed) = run();
        assert_eq!(names[0], "x");
        assert_eq!(names[1], "x@b/trajs");
        assert_eq!(names[2], "x/y");
        assert_eq!(names[3], "x_y@b/trajs", "sanitises like `x/y`");
        assert!(names[4].starts_with("x~") && names[4].len() == "x~".len() + 8, "{}", names[4]);
        assert_eq!(names[5], format!("{}-2", names[4]), "the same file given twice");
        let stems: HashSet<String> = names.iter().map(|n| file_stem(n)).collect();
        assert_eq!(stems.len(), names.len(), "{names:?}");
        assert_eq!(renamed[0], None);
        assert_eq!(renamed[1].as_deref(), Some("x"));
        assert_eq!(run().0, names, "the same inputs give the same names");
    }
}
