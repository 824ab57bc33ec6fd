//! The tools' work, without the protocol: recall, metadata and catalog pages
//! over one store, as `lam recall` answers them (ids resolved by
//! [`arc_store::find`], parts cut by [`arc_view::cut_parts`] with cl100k_base
//! and selected by [`arc_view::parse_part`]).

use crate::quote;
use arc_store::{Access, AnyStore, StoreError, StoreSpec};
use arc_view::{Catalog, PartError, cut_parts, parse_part};
use lam_core::{ObsStore, SessionId};
use lam_tokens::Cl100k;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a store stays open before a miss (unknown id or session) reopens
/// it to see appends another process made since (a `lam serve` or `lam
/// compact` writing the same store). Short, because an agent may recall a
/// stub's `§id` the moment the proxy wrote it (`lam run` with a fast model:
/// tens of milliseconds); long enough that a client asking for unknown ids
/// in a loop reopens the store at most 10 times a second.
pub const REOPEN_AFTER: Duration = Duration::from_millis(100);

/// Settings of one server.
#[derive(Debug, Clone)]
pub struct Config {
    /// The store (a directory or `postgres://...` where built), opened read-only.
    pub store: StoreSpec,
    /// Scope every tool to this session (`--session`).
    pub session: Option<SessionId>,
    /// Scope every tool to the sessions one proxy run made (`--run RUN`):
    /// the session `RUN` (`lam run`'s default; every replica of a `lam serve
    /// --run RUN`) and, from proxies before one session per run, `RUN-N`
    /// and `RUN-N@K` (`arc_store::claim_session`). A
    /// session a client named itself (`x-lam-session`) is outside every run;
    /// `NAME@RUN-N`, how proxies before the one claim rule named a client's
    /// name the store already held, is inside.
    pub run: Option<String>,
    /// Payload tokens (cl100k_base) per recall part, as `lam recall --part-tokens` (default 2048).
    pub part_tokens: usize,
    /// Tokens of one catalog page, header included (default 512, ARC's largest default `P`).
    pub page_tokens: usize,
}

impl Config {
    /// Defaults for `store`: no scope, 2048-token parts, 512-token pages.
    pub fn new(store: StoreSpec) -> Self {
        Self { store, session: None, run: None, part_tokens: lam_core::cite::PART_TOKENS, page_tokens: 512 }
    }
}

/// Why a tool call was refused; the message is what the client sees. It
/// quotes what the client sent (an id, a session, a part) by
/// `crate::quote`: a short prefix of a long one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed, or the id is unknown or ambiguous.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A bad part selector.
    #[error("§{}: {reason} (parts of at most {tokens} cl100k tokens)", quote(.shown))]
    Part {
        /// The id asked.
        shown: String,
        /// What is wrong (in the message; deliberately not `source()`).
        reason: PartError,
        /// Part size.
        tokens: usize,
    },
    /// A session other than the one the server is scoped to.
    #[error("this server is scoped to session `{scope}`; session `{}` is not served", quote(.asked))]
    OutOfScope {
        /// The scope.
        scope: String,
        /// The session asked.
        asked: String,
    },
    /// A session another run made, asked of a server scoped to one run.
    #[error(
        "this server serves only the sessions of run `{run}` (lam run's recall scope; `--recall-scope store` serves every session); session `{}` is not one of them",
        quote(.asked)
    )]
    OtherRun {
        /// The run.
        run: String,
        /// The session asked.
        asked: String,
    },
    /// A session that holds no observation.
    #[error("session `{}` holds no observations; sessions in the store: {known}", quote(.asked))]
    UnknownSession {
        /// The session asked.
        asked: String,
        /// The store's sessions (the first few).
        known: String,
    },
    /// A catalog page past the last.
    #[error("catalog page {page} does not exist: session `{session}` has {pages} page{}", if *.pages == 1 { "" } else { "s" })]
    NoPage {
        /// Session.
        session: String,
        /// Page asked (1-based).
        page: usize,
        /// Pages there are.
        pages: usize,
    },
    /// An invalid argument.
    #[error("{0}")]
    Argument(String),
}

/// One recalled observation or part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recalled {
    /// The visible id, without `§`.
    pub shown: String,
    /// The sessions that hold it (all with these bytes).
    pub sessions: Vec<SessionId>,
    /// `(k, m)` when a part was asked.
    pub part: Option<(usize, usize)>,
    /// Where the returned bytes lie in the observation.
    pub range: Range<usize>,
    /// The observation's length in bytes.
    pub total: usize,
    /// The exact bytes (the whole observation, or the part).
    pub bytes: Vec<u8>,
}

/// What `recall_meta` answers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Meta {
    /// `§` and the visible id.
    pub id: String,
    /// Full content id (SHA-1 hex over action, 0x1F, observation).
    pub sha1: String,
    /// Sessions holding it.
    pub sessions: Vec<String>,
    /// Length in bytes.
    pub bytes: usize,
    /// Length in tokens as counted when it was archived.
    pub tokens: u32,
    /// Parts at this server's part size.
    pub parts: usize,
    /// The part size (cl100k tokens).
    pub part_tokens: usize,
    /// Whether the bytes are valid UTF-8 (else `recall` adds the exact bytes as base64).
    pub utf8: bool,
    /// The action that produced it.
    pub action: String,
    /// Record index of its first occurrence in the first session.
    pub step: u32,
    /// Return code, when recorded.
    pub returncode: Option<i32>,
    /// Its first line (lossy UTF-8, at most 200 characters).
    pub first_line: String,
}

struct Opened {
    store: AnyStore,
    at: Instant,
}

/// One store served read-only. Calls are serialised on the store (stores are
/// `Send`, not `Sync`); run them off the async executor.
pub struct Archive {
    cfg: Config,
    reopen: bool,
    open: Mutex<Opened>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

fn is_miss(e: &Error) -> bool {
    matches!(e, Error::Store(StoreError::NotFound { .. }) | Error::UnknownSession { .. })
}

impl Archive {
    /// Open `cfg.store` read-only.
    pub fn open(cfg: Config) -> Result<Self, Error> {
        check(&cfg)?;
        let store = arc_store::open(&cfg.store, Access::ReadOnly)?;
        let reopen = cfg.store != StoreSpec::Memory;
        Ok(Self { cfg, reopen, open: Mutex::new(Opened { store, at: Instant::now() }) })
    }

    /// Serve a store opened by the caller (never reopened on a miss).
    pub fn with_store(cfg: Config, store: AnyStore) -> Result<Self, Error> {
        check(&cfg)?;
        Ok(Self { cfg, reopen: false, open: Mutex::new(Opened { store, at: Instant::now() }) })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Run `f` on the store; on a miss, reopen a store opened more than
    /// [`REOPEN_AFTER`] ago and run it once more.
    fn with<R>(&self, f: impl Fn(&dyn ObsStore) -> Result<R, Error>) -> Result<R, Error> {
        let mut o = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let r = f(o.store.as_ref());
        match r {
            Err(e) if is_miss(&e) && self.reopen && o.at.elapsed() >= REOPEN_AFTER => {
                o.store = arc_store::open(&self.cfg.store, Access::ReadOnly)?;
                o.at = Instant::now();
                f(o.store.as_ref())
            }
            r => r,
        }
    }

    /// The session a call works in: the one asked, else the server's scope.
    fn session(&self, asked: Option<&str>) -> Result<Option<SessionId>, Error> {
        match (asked, &self.cfg.session) {
            (Some(a), Some(s)) if a != s.as_str() => Err(Error::OutOfScope { scope: s.to_string(), asked: a.to_string() }),
            (Some(""), _) => Err(Error::Argument("session: empty name".into())),
            (Some(a), _) if !self.in_run(a) => Err(Error::OtherRun { run: self.cfg.run.clone().unwrap_or_default(), asked: a.to_string() }),
            (Some(a), _) => Ok(Some(SessionId::from(a))),
            (None, s) => Ok(s.clone()),
        }
    }

    /// Whether session `s` is one the server's run made: `RUN` (where a
    /// proxy archives every conversation a client does not name) or, from
    /// proxies before it, `RUN-N`, `RUN-N@K` or `NAME@RUN-N`; always,
    /// without a run scope.
    fn in_run(&self, s: &str) -> bool {
        let Some(run) = self.cfg.run.as_deref() else { return true };
        let number = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
        let numbered = |x: &str| x.strip_prefix(run).and_then(|n| n.strip_prefix('-')).is_some_and(number);
        match s.split_once('@') {
            None => s == run || numbered(s),
            Some((n, k)) => (numbered(n) && number(k)) || s.rsplit_once('@').is_some_and(|(_, r)| numbered(r)),
        }
    }

    /// The sessions a call without a session searches: `session`, or every
    /// session of the store in the server's scope that holds observations
    /// (`arc_store::observation_sessions`: a run's settings are none).
    fn sessions(&self, st: &dyn ObsStore, session: Option<&SessionId>) -> Result<Vec<SessionId>, Error> {
        match session {
            Some(s) => Ok(vec![s.clone()]),
            None => Ok(arc_store::observation_sessions(st)?.into_iter().filter(|s| self.in_run(s.as_str())).collect()),
        }
    }

    fn parts(&self, body: &[u8]) -> Vec<Range<usize>> {
        cut_parts(&Cl100k, body, self.cfg.part_tokens)
    }

    /// The exact bytes of `id` (with or without `§`), or of its part `part`
    /// (`K` or `K/N`), found as `lam recall` finds them.
    pub fn recall(&self, id: &str, session: Option<&str>, part: Option<&str>) -> Result<Recalled, Error> {
        let session = self.session(session)?;
        let found = self.with(|st| find(st, &self.sessions(st, session.as_ref())?, id))?;
        let shown = id.trim_start_matches('§').to_ascii_lowercase();
        let total = found.bytes.len();
        let (part, range) = match part {
            None => (None, 0..total),
            Some(p) => {
                let parts = self.parts(&found.bytes);
                let k = parse_part(p.trim(), parts.len()).map_err(|reason| Error::Part {
                    shown: shown.clone(),
                    reason: quoted(reason),
                    tokens: self.cfg.part_tokens,
                })?;
                (Some((k, parts.len())), parts[k - 1].clone())
            }
        };
        let bytes = if range == (0..total) { found.bytes } else { found.bytes[range.clone()].to_vec() };
        Ok(Recalled { shown, sessions: found.sessions, part, range, total, bytes })
    }

    /// Size, parts, sessions and first line of `id`.
    pub fn meta(&self, id: &str, session: Option<&str>) -> Result<Meta, Error> {
        let session = self.session(session)?;
        let (found, m) = self.with(|st| {
            let found = find(st, &self.sessions(st, session.as_ref())?, id)?;
            let shown = id.trim_start_matches('§').to_ascii_lowercase();
            let m = st.meta(&found.sessions[0], &shown).map_err(StoreError::Store)?;
            Ok((found, m))
        })?;
        let m = m.ok_or_else(|| Error::Argument(format!("§{}: the store returned bytes but no metadata", quote(id))))?;
        let first = found.bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        Ok(Meta {
            id: format!("§{}", m.shown),
            sha1: m.id.hex(),
            sessions: found.sessions.iter().map(|s| s.to_string()).collect(),
            bytes: found.bytes.len(),
            tokens: m.tokens,
            parts: self.parts(&found.bytes).len(),
            part_tokens: self.cfg.part_tokens,
            utf8: std::str::from_utf8(&found.bytes).is_ok(),
            action: m.action,
            step: m.step,
            returncode: m.returncode,
            first_line: String::from_utf8_lossy(first).chars().take(200).collect(),
        })
    }

    /// Catalog page `page` (1-based, default 1) of `session`, as ARC renders
    /// it; without a session (and no scope), the list of sessions.
    pub fn catalog(&self, session: Option<&str>, page: Option<usize>) -> Result<String, Error> {
        let Some(session) = self.session(session)? else {
            return self.with(|st| session_list(st, &self.sessions(st, None)?));
        };
        let tok = Cl100k;
        let catalog = self.with(|st| {
            let ids = st.ids(&session).map_err(StoreError::Store)?;
            if ids.is_empty() {
                let known = self.sessions(st, None)?;
                return Err(Error::UnknownSession { asked: session.to_string(), known: first_names(&known) });
            }
            let mut c = Catalog::new(&tok, self.cfg.page_tokens);
            for id in &ids {
                if let Some(m) = st.meta(&session, id).map_err(StoreError::Store)? {
                    c.push(&tok, &m);
                }
            }
            Ok(c)
        })?;
        let k = page.unwrap_or(1);
        let none = || Error::NoPage { session: session.to_string(), page: k, pages: catalog.pages() };
        let (text, _) = catalog.page(&tok, k.checked_sub(1).ok_or_else(none)?).ok_or_else(none)?;
        // ARC's header names the agent's typed commands; an MCP client calls tools.
        Ok(text.replacen("catalog next | catalog prev | catalog page N; _recall §id]", "call `catalog` with page=N; `recall` with id=§id]", 1))
    }
}

fn check(cfg: &Config) -> Result<(), Error> {
    if cfg.part_tokens == 0 {
        return Err(Error::Argument("part tokens must be at least 1".into()));
    }
    let least = Catalog::header_reserve(&Cl100k) + 16;
    if cfg.page_tokens < least {
        return Err(Error::Argument(format!("page tokens must be at least {least} (the page header takes {})", least - 16)));
    }
    Ok(())
}

fn find(st: &dyn ObsStore, sessions: &[SessionId], id: &str) -> Result<arc_store::Found, Error> {
    let shown = id.trim_start_matches('§');
    if shown.is_empty() || !shown.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Argument(format!("id `{}`: expected §hex as cited (e.g. §a1b2c3d4)", quote(id))));
    }
    arc_store::find_in(st, sessions, id).map_err(|e| {
        Error::Store(match e {
            StoreError::NotFound { shown, nearest } => StoreError::NotFound { shown: quote(&shown).into_owned(), nearest },
            StoreError::Ambiguous { shown, sessions } => StoreError::Ambiguous { shown: quote(&shown).into_owned(), sessions },
            e => e,
        })
    })
}

/// `reason` quoting the selector as [`quote`] does.
fn quoted(reason: PartError) -> PartError {
    match reason {
        PartError::Syntax(spec) => PartError::Syntax(quote(&spec).into_owned()),
        PartError::Count { spec, parts, given } => PartError::Count { spec: quote(&spec).into_owned(), parts, given },
        r => r,
    }
}

fn first_names(sessions: &[SessionId]) -> String {
    let mut s: Vec<String> = sessions.iter().take(20).map(|s| format!("`{s}`")).collect();
    if sessions.len() > 20 {
        s.push(format!("... ({} in all)", sessions.len()));
    }
    if s.is_empty() { "none".into() } else { s.join(", ") }
}

fn session_list(st: &dyn ObsStore, sessions: &[SessionId]) -> Result<String, Error> {
    let mut out =
        format!("[{} session{} in the archive; catalog with a session lists its observations]\n", sessions.len(), if sessions.len() == 1 { "" } else { "s" });
    for s in sessions {
        let n = st.ids(s).map_err(StoreError::Store)?.len();
        out.push_str(&format!("{s} ({n} observation{})\n", if n == 1 { "" } else { "s" }));
    }
    Ok(out)
}
