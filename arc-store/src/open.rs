//! The store opener: every command and binding turns a `--store` argument
//! into an [`ObsStore`] here, one way.
//!
//! A spec is a directory ([`FileStore`]), `mem:` (a [`MemStore`], for tests
//! and throwaway runs) or a URL whose scheme a backend registers
//! (`postgres://` and `postgresql://`, feature `postgres`). A URL spec is never
//! mistaken for a directory: a spec with a `scheme://` prefix that no backend
//! claims is an error, not a relative path.

use crate::{FileStore, MemStore, Recovery, StoreError};
use lam_core::{ObsStore, SessionId};
use std::path::PathBuf;

/// Where a store lives, parsed from a `--store` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// A [`FileStore`] directory.
    Dir(PathBuf),
    /// A fresh in-memory store (`mem:`).
    Memory,
    /// A PostgreSQL database (`postgres://...` or `postgresql://...`).
    Postgres(String),
}

impl StoreSpec {
    /// Parse a spec. Fails on an empty spec and on a URL scheme no backend claims.
    pub fn parse(spec: &str) -> Result<Self, StoreError> {
        if spec.is_empty() {
            return Err(StoreError::Spec { spec: spec.into(), reason: "empty store spec".into() });
        }
        if spec == "mem:" {
            return Ok(StoreSpec::Memory);
        }
        if let Some(scheme) = lam_core::redact::url_scheme(spec) {
            return match scheme.to_ascii_lowercase().as_str() {
                "postgres" | "postgresql" => Ok(StoreSpec::Postgres(spec.to_string())),
                "file" => Ok(StoreSpec::Dir(PathBuf::from(&spec["file://".len()..]))),
                other => Err(StoreError::Spec {
                    spec: redact(spec),
                    reason: format!("unknown store scheme `{other}://` (expected a directory, mem:, or postgres://)"),
                }),
            };
        }
        // `user:password@host/db` without its scheme: a mistyped URL, not a
        // directory (unless one by that name exists); refused without echoing the password.
        if redact(spec) != spec && !std::path::Path::new(spec).exists() {
            return Err(StoreError::Spec {
                spec: redact(spec),
                reason: "looks like a database URL without its scheme (user:password@host); write postgres://... or name an existing directory".into(),
            });
        }
        Ok(StoreSpec::Dir(PathBuf::from(spec)))
    }

    /// The spec for display: a URL's password is replaced by `***`
    /// ([`lam_core::redact::url`], applied to every kind of spec).
    pub fn display(&self) -> String {
        match self {
            StoreSpec::Dir(d) => redact(&d.display().to_string()),
            StoreSpec::Memory => "mem:".into(),
            StoreSpec::Postgres(u) => redact(u),
        }
    }
}

impl std::str::FromStr for StoreSpec {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        StoreSpec::parse(s)
    }
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The one writer (a [`FileStore`] takes its directory's lock).
    ReadWrite,
    /// Reading only (no lock; any number of readers).
    ReadOnly,
}

/// A store of any backend, as the opener returns it.
pub type AnyStore = Box<dyn ObsStore + Send>;

/// Open the store `spec` names.
pub fn open(spec: &StoreSpec, access: Access) -> Result<AnyStore, StoreError> {
    open_reported(spec, access).map(|(store, _)| store)
}

/// Open like [`open`], with `reconnect_for` as how long a lost PostgreSQL
/// connection is retried before a call fails with
/// [`StoreError::Unavailable`] ([`crate::PgOptions::reconnect_for`]; the
/// other backends hold no connection and ignore it). A proxy that must not
/// hold its requests through an outage passes about a second.
pub fn open_with_reconnect(spec: &StoreSpec, access: Access, reconnect_for: std::time::Duration) -> Result<AnyStore, StoreError> {
    match spec {
        StoreSpec::Postgres(url) => open_postgres_with(url, access, reconnect_for),
        _ => open(spec, access),
    }
}

/// Open like [`open`], and say what opening found and did: a [`FileStore`]'s
/// [`Recovery`] (torn tail cut, damage skipped, quarantine copies made);
/// an empty report for the other backends. Commands print it, so a user
/// learns of damage when it is found, not when a recall fails.
pub fn open_reported(spec: &StoreSpec, access: Access) -> Result<(AnyStore, Recovery), StoreError> {
    match spec {
        StoreSpec::Dir(d) => {
            let s = match access {
                Access::ReadWrite => FileStore::open(d)?,
                Access::ReadOnly => FileStore::open_read_only(d)?,
            };
            let r = s.recovery().clone();
            Ok((Box::new(s), r))
        }
        StoreSpec::Memory => Ok((Box::new(MemStore::new()), Recovery::default())),
        StoreSpec::Postgres(url) => Ok((open_postgres(url, access)?, Recovery::default())),
    }
}

// The PostgreSQL backend registers here (feature `postgres`).
#[cfg(feature = "postgres")]
fn open_postgres(url: &str, access: Access) -> Result<AnyStore, StoreError> {
    Ok(Box::new(crate::PgStore::connect(url, access)?))
}

#[cfg(feature = "postgres")]
fn open_postgres_with(url: &str, access: Access, reconnect_for: std::time::Duration) -> Result<AnyStore, StoreError> {
    Ok(Box::new(crate::PgStore::connect_with(url, crate::PgOptions { access, reconnect_for, ..crate::PgOptions::default() })?))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres_with(url: &str, access: Access, _reconnect_for: std::time::Duration) -> Result<AnyStore, StoreError> {
    open_postgres(url, access)
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(url: &str, _access: Access) -> Result<AnyStore, StoreError> {
    Err(StoreError::Spec { spec: redact(url), reason: "this build has no PostgreSQL backend (arc-store feature `postgres`)".into() })
}

/// The shared embedding cache a URL names (`postgres://...`: a
/// [`crate::PgEmbeddings`] in that database, feature `postgres`).
pub fn open_embeddings(url: &str) -> Result<Box<dyn lam_core::EmbeddingStore>, StoreError> {
    match StoreSpec::parse(url)? {
        StoreSpec::Postgres(u) => open_pg_embeddings(&u),
        _ => Err(StoreError::Spec { spec: redact(url), reason: "a shared embedding cache is a postgres:// URL".into() }),
    }
}

#[cfg(feature = "postgres")]
fn open_pg_embeddings(url: &str) -> Result<Box<dyn lam_core::EmbeddingStore>, StoreError> {
    Ok(Box::new(crate::PgEmbeddings::connect(url)?))
}

#[cfg(not(feature = "postgres"))]
fn open_pg_embeddings(url: &str) -> Result<Box<dyn lam_core::EmbeddingStore>, StoreError> {
    Err(StoreError::Spec { spec: redact(url), reason: "this build has no PostgreSQL backend (arc-store feature `postgres`)".into() })
}

/// `user:password@` in a URL becomes `user:***@`, and password-like query
/// parameters `name=***`, so specs can be printed and logged: the one rule,
/// [`lam_core::redact::url`], re-exported here.
pub use lam_core::redact::url as redact;

/// One archived observation found by [`find`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Every session that holds the id (sorted); all hold these same bytes.
    pub sessions: Vec<SessionId>,
    /// The exact observation bytes.
    pub bytes: Vec<u8>,
}

/// Recall `shown` (with or without its `§`) from `store`: in `session` when
/// one is given (a run's settings session too, named so), else in every
/// session that holds observations ([`observation_sessions`]: a run's
/// settings are no observations, and a lookup by id alone never counts
/// them). How an id is resolved across sessions: [`find_in`]. An id whose
/// only copies are damaged is [`StoreError::Damaged`]; an unknown id is an
/// error with the nearest ids.
pub fn find(store: &dyn ObsStore, session: Option<&SessionId>, shown: &str) -> Result<Found, StoreError> {
    let sessions = match session {
        Some(s) => vec![s.clone()],
        None => observation_sessions(store)?,
    };
    find_in(store, &sessions, shown)
}

/// The sessions of `store` that hold observations
/// ([`SessionId::holds_observations`]: all but runs' settings), sorted.
pub fn observation_sessions(store: &dyn ObsStore) -> Result<Vec<SessionId>, StoreError> {
    Ok(store.sessions()?.into_iter().filter(SessionId::holds_observations).collect())
}

/// [`find`] among `sessions` only (a server scoped to some sessions).
///
/// A citation is the id its session shows, so the sessions that show an
/// observation *exactly* as `shown` answer first: in a store whose
/// observations share one id space (`lam_core::id`) that is one
/// observation, wherever it is archived. Only where none shows it exactly
/// is `shown` read as a longer prefix of an id someone typed (the full hex):
/// each session resolves it by its own rule (the earliest observation whose
/// id begins with it), and its answer counts when that observation's own id
/// is a prefix of `shown` (a shorter `shown` begins several observations'
/// ids, and may be the citation of one not searched). Sessions that answer
/// with different bytes are [`StoreError::Ambiguous`], naming them (two
/// sessions of a store made before that rule showing one id for two
/// observations); a damaged record that may be the one cited is
/// [`StoreError::Damaged`]: never the bytes of another observation.
pub fn find_in(store: &dyn ObsStore, sessions: &[SessionId], shown: &str) -> Result<Found, StoreError> {
    let shown = shown.trim_start_matches('§').to_ascii_lowercase();
    let (mut exact, mut longer) = (Vec::new(), Vec::new());
    let mut damaged = None;
    for s in sessions {
        match store.meta(s, &shown).map_err(StoreError::from) {
            Ok(Some(m)) if m.shown == shown => exact.push(s.clone()),
            Ok(Some(m)) if shown.starts_with(&m.shown) => longer.push(s.clone()),
            Ok(_) => {}
            Err(e @ StoreError::Damaged { .. }) => damaged = damaged.or(Some(e)),
            Err(e) => return Err(e),
        }
    }
    let named = match (exact.is_empty(), damaged) {
        (false, _) => exact,
        // A damaged record may be the one shown so: no other answers for it.
        (true, Some(e)) => return Err(e),
        (true, None) if longer.is_empty() => return Err(not_found(store, sessions, &shown)?),
        (true, None) => longer,
    };
    same_bytes(store, named, shown)
}

/// The bytes every session of `named` gives for `shown`, when they agree.
/// A damaged copy in one session does not hide an intact one in another.
fn same_bytes(store: &dyn ObsStore, named: Vec<SessionId>, shown: String) -> Result<Found, StoreError> {
    let mut hits: Vec<(SessionId, Vec<u8>)> = Vec::new();
    let mut damaged = None;
    for s in named {
        match store.get(&s, &shown).map_err(StoreError::from) {
            Ok(Some(b)) => hits.push((s, b)),
            Ok(None) => {}
            Err(e @ StoreError::Damaged { .. }) => damaged = damaged.or(Some(e)),
            Err(e) => return Err(e),
        }
    }
    let Some((_, first)) = hits.first() else {
        return Err(damaged.unwrap_or(StoreError::NotFound { shown, nearest: Vec::new() }));
    };
    if hits.iter().any(|(_, b)| b != first) {
        return Err(StoreError::Ambiguous { shown, sessions: hits.into_iter().map(|(s, _)| s).collect() });
    }
    let bytes = first.clone();
    Ok(Found { sessions: hits.into_iter().map(|(s, _)| s).collect(), bytes })
}

/// An id no session answers for: the error, naming the three nearest ids
/// of all `sessions`.
fn not_found(store: &dyn ObsStore, sessions: &[SessionId], shown: &str) -> Result<StoreError, StoreError> {
    let mut all: Vec<(String, SessionId)> = Vec::new();
    for s in sessions {
        all.extend(store.ids(s)?.into_iter().map(|id| (id, s.clone())));
    }
    let ids: Vec<String> = all.iter().map(|(id, _)| id.clone()).collect();
    let mut used = vec![false; all.len()];
    let mut nearest: Vec<String> = Vec::new();
    for id in lam_core::id::nearest(&ids, shown, 3) {
        let Some(k) = (0..all.len()).find(|&k| !used[k] && all[k].0 == id) else { continue };
        used[k] = true;
        nearest.push(format!("§{id} ({})", all[k].1));
    }
    Ok(StoreError::NotFound { shown: shown.to_string(), nearest })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lam_core::Record;

    #[test]
    fn specs() {
        assert_eq!(StoreSpec::parse("some/dir").unwrap(), StoreSpec::Dir("some/dir".into()));
        assert_eq!(StoreSpec::parse("mem:").unwrap(), StoreSpec::Memory);
        assert_eq!(StoreSpec::parse("file:///tmp/x").unwrap(), StoreSpec::Dir("/tmp/x".into()));
        assert!(matches!(StoreSpec::parse("postgres://u:pw@h/db").unwrap(), StoreSpec::Postgres(_)));
        assert!(matches!(StoreSpec::parse("PostgreSQL://h/db").unwrap(), StoreSpec::Postgres(_)));
        let e = StoreSpec::parse("redis://u:secret@h").unwrap_err().to_string();
        assert!(e.contains("redis://") && !e.contains("secret"), "{e}");
        assert!(StoreSpec::parse("").is_err());
        // Not a scheme: a directory whose name holds "://" after a slash.
        assert_eq!(StoreSpec::parse("a/b://c").unwrap(), StoreSpec::Dir("a/b://c".into()));
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:pw@h:5432/db?x=1"), "postgres://u:***@h:5432/db?x=1");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db?sslmode=require&password=x"), "postgres://h/db?sslmode=require&password=***");
        assert_eq!(StoreSpec::parse("postgres://a:b@c/d").unwrap().display(), "postgres://a:***@c/d");
        assert_eq!(StoreSpec::parse("postgres://h/d?Token=t&key=k").unwrap().display(), "postgres://h/d?Token=***&key=***");
        let e = StoreSpec::parse("lam:secret@db.example/lam").unwrap_err().to_string();
        assert!(e.contains("lam:***@") && !e.contains("secret"), "{e}");
    }

    fn rec(i: u32, obs: &[u8]) -> Record {
        Record { index: i, action: "cat x".into(), observation: obs.to_vec(), returncode: Some(0) }
    }

    #[test]
    fn find_across_sessions() {
        let mut st = MemStore::new();
        let (a, b) = (SessionId("a".into()), SessionId("b".into()));
        let m = st.append(&a, &rec(0, b"same"), 1).unwrap();
        st.append(&b, &rec(0, b"same"), 1).unwrap();
        st.append(&b, &rec(1, b"other"), 1).unwrap();
        let f = find(&st, None, &format!("§{}", m.shown)).unwrap();
        assert_eq!(f.bytes, b"same");
        assert_eq!(f.sessions, vec![a.clone(), b.clone()]);
        assert_eq!(find(&st, Some(&b), &m.shown).unwrap().sessions, vec![b.clone()]);
        let e = find(&st, None, "0000ffff").unwrap_err();
        assert!(matches!(e, StoreError::NotFound { ref nearest, .. } if nearest.len() == 3), "{e}");
        assert!(open(&StoreSpec::Memory, Access::ReadWrite).is_ok());
    }

    /// Issue 68: a run's settings record and an observation showing one id
    /// (each in its own id space) made `lam recall §id` ambiguous.
    #[test]
    fn a_run_s_settings_are_never_counted() {
        let (x, y) = lam_core::testsuite::colliding_pair();
        let mut st = MemStore::new();
        let (run, settings) = (SessionId::new("serve-1"), SessionId::settings_of("serve-1"));
        let cat = |o: &[u8]| lam_core::testsuite::rec(0, "cat", o, None);
        let w = st.append(&settings, &cat(&x), 0).unwrap();
        let o = st.append(&run, &cat(&y), 1).unwrap();
        assert_eq!(w.shown, o.shown, "two spaces: the same 4 hex");
        let f = find(&st, None, &o.shown).unwrap();
        assert_eq!((f.bytes.as_slice(), f.sessions.as_slice()), (&y[..], std::slice::from_ref(&run)));
        assert_eq!(find(&st, Some(&settings), &w.shown).unwrap().bytes, x, "named, it is found");
        assert_eq!(observation_sessions(&st).unwrap(), vec![run]);
    }

    #[test]
    fn unique_prefixes_resolve_and_unknown_ids_name_three() {
        let mut st = MemStore::new();
        let mut shown = Vec::new();
        for k in 0..6 {
            let s = SessionId(format!("s{k}"));
            shown.push(st.append(&s, &rec(0, format!("obs {k}").as_bytes()), 1).unwrap().shown);
            st.append(&s, &rec(1, b"shared"), 1).unwrap();
        }
        let full = lam_core::ObsId::of(b"cat x", b"obs 2").hex();
        let f = find(&st, None, &full[..10]).unwrap();
        assert_eq!((f.bytes.as_slice(), f.sessions.len()), (&b"obs 2"[..], 1), "a longer prefix of a shown id");
        assert_eq!(find(&st, None, &shown[2]).unwrap().bytes, b"obs 2");
        let e = find(&st, None, "0000ffff").unwrap_err();
        assert!(matches!(e, StoreError::NotFound { ref nearest, .. } if nearest.len() == 3), "three in all, not per session: {e}");
        assert!(find(&st, None, &shown[2][..3]).is_err(), "prefixes need 4 hex");
    }
}
