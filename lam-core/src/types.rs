use std::ops::Range;

/// A session (one agent trajectory): its operator state and its archive.
/// Sessions never see each other's records; a store's observations share
/// one id space (`crate::id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub String);

impl SessionId {
    /// A session named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        SessionId(name.into())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The store session that records the settings of proxy run `run`
    /// (`lam serve --run RUN`): `RUN.settings`. It holds no conversation;
    /// [`SessionId::settings_run`] reads the name back.
    pub fn settings_of(run: &str) -> Self {
        SessionId(format!("{run}{SETTINGS_SUFFIX}"))
    }

    /// The run whose settings this session records ([`SessionId::settings_of`]),
    /// or `None` for a session that holds observations of conversations.
    /// The one rule for "this store session holds a run's settings": the
    /// proxy writes these sessions, and listings of conversations leave them out.
    pub fn settings_run(&self) -> Option<&str> {
        self.0.strip_suffix(SETTINGS_SUFFIX).filter(|run| !run.is_empty())
    }

    /// Whether this session holds observations of conversations (every
    /// session but a run's settings, [`SessionId::settings_run`]): the
    /// sessions whose records share a store's id space (`crate::id`) and
    /// that a lookup by id alone searches.
    pub fn holds_observations(&self) -> bool {
        self.settings_run().is_none()
    }
}

/// What ends the name of a session that holds a run's settings.
const SETTINGS_SUFFIX: &str = ".settings";

/// `name` as a file stem: letters, digits, `-`, `_` and `.` kept, everything
/// else `_`. The one rule for file names made from session names and model ids.
pub fn file_stem(name: &str) -> String {
    name.chars().map(|c| if c.is_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SessionId {
    fn from(s: &str) -> Self {
        SessionId(s.to_string())
    }
}

impl From<String> for SessionId {
    fn from(s: String) -> Self {
        SessionId(s)
    }
}

/// One tool observation as it arrives, with the action that produced it.
///
/// The observation is bytes: invalid UTF-8 is kept exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Position of the record in its session (0-based, arrival order).
    pub index: u32,
    /// The action signature (the command or tool call that produced the observation).
    pub action: String,
    /// The observation, byte for byte.
    pub observation: Vec<u8>,
    /// Return code of the action, when the trajectory recorded one.
    pub returncode: Option<i32>,
}

/// A chunk of one observation: a byte range cut at encoder-token boundaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Index of the chunk in its session, in arrival order (0-based): the id
    /// used by the deletion-set digest.
    pub index: u32,
    /// Record the chunk belongs to.
    pub record: u32,
    /// Position of the chunk within its record (0-based).
    pub ordinal: u32,
    /// Byte range within the record's observation.
    pub range: Range<usize>,
}

/// The L1 decision for one chunk. Decisions are never revised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// The chunk is kept and joins the retained set.
    Retained,
    /// The chunk is replaced by a stub that cites its representative.
    Dropped {
        /// Session chunk index of the retained representative (the lowest such index).
        representative: u32,
        /// Exact L2 distance to the representative, `<= delta`.
        distance: f32,
    },
}

impl Decision {
    /// True for [`Decision::Dropped`].
    pub fn is_dropped(&self) -> bool {
        matches!(self, Decision::Dropped { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_settings_session_reads_back_as_its_run() {
        let s = SessionId::settings_of("team");
        assert_eq!(s.as_str(), "team.settings");
        assert_eq!(s.settings_run(), Some("team"));
        assert_eq!(SessionId::settings_of("a.b").settings_run(), Some("a.b"));
        assert!(!s.holds_observations());
        for conversation in ["team", ".settings", "team.settings@2", "settings", "team-settings"] {
            assert_eq!(SessionId::new(conversation).settings_run(), None, "{conversation}");
            assert!(SessionId::new(conversation).holds_observations(), "{conversation}");
        }
    }
}
