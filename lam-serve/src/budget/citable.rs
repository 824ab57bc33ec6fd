//! What a cut may cite: one entry per tool result the operator admitted
//! and per large tool-call input archived ([`crate::api::citable_inputs`]),
//! built in one place ([`Citable::new`]) with the two forms of its
//! citation (`lam_core::cite`: the full one, and the one line it shrinks to
//! at the next cut) and the form it is forwarded in now.

use lam_core::cite;
use lam_core::cite::PART_TOKENS;
use lam_core::stub::Recall;
use lam_core::wire::Path;
use lam_core::{ObsId, ObsMeta};

/// What every citation a cut writes begins with (its full form and its
/// line): how `lam replay` tells a cited result in a forwarded body.
pub const CITED_LEAD: &str = "[lam: cited to keep the context within its budget]";

/// Longest head (and tail) preview of a citation, in characters: enough to
/// recognise the output, small next to what it stands for.
pub(crate) const PREVIEW_CHARS: usize = 100;

/// One observation a cut may cite.
#[derive(Debug, Clone)]
pub(crate) struct Citable {
    /// The item's position in the conversation and the string's path there.
    pub item: usize,
    pub path: Path,
    /// Inside JSON-string arguments: the path within them.
    pub inner: Option<Path>,
    /// The operator's record (none: a tool-call input, which it never
    /// admits) and the earlier records its residual names.
    pub record: Option<u32>,
    pub refs: Vec<u32>,
    /// The citation that stands for it once cited, and the one line it
    /// shrinks to at the next cut.
    pub text: Cited,
    /// A kept tool's result (recall results among them): never cited.
    pub kept: bool,
    /// Which form is forwarded now.
    pub form: Form,
    /// Tokens it was forwarded as before it was cited, and its original's.
    pub shown_tokens: u64,
    pub whole_tokens: u64,
    /// Its archive id (`§id`).
    pub id: Box<str>,
    /// A large tool-call input ([`crate::api::citable_inputs`]), not a result.
    pub input: bool,
}

/// The two forms of a citation and their tokens.
#[derive(Debug, Clone)]
pub(crate) struct Cited {
    pub full: Box<str>,
    pub line: Box<str>,
    pub full_tokens: u64,
    pub line_tokens: u64,
}

/// What a citable observation is forwarded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// As admitted (its residual, or the input as the agent wrote it).
    Shown,
    /// Whole (the archived original): a cut cited a record its residual named.
    Whole,
    /// Its citation, from cut `n`.
    Full(u64),
    /// The citation's one line (a later cut shrank it).
    Line,
}

/// Where a citable string sits: its item's position, its path there, and
/// (JSON-string arguments) the path within them.
pub(crate) struct Place {
    pub item: usize,
    pub path: Path,
    pub inner: Option<Path>,
}

/// What was archived for it: the record's action and bytes, its archive
/// id, and the original's tokens.
pub(crate) struct Archived<'a> {
    pub action: &'a str,
    pub observation: &'a [u8],
    pub id: &'a str,
    pub tokens: usize,
}

/// What the operator made of an admitted result: its record, the earlier
/// records its residual names, the tokens it is forwarded as, and whether
/// it is a kept tool's (never cited).
pub(crate) struct Admitted {
    pub record: u32,
    pub refs: Vec<u32>,
    pub shown_tokens: u64,
    pub kept: bool,
}

impl Citable {
    /// The one constructor: a result the operator admitted (`admitted`), or
    /// a large tool-call input (`None`: forwarded as the agent wrote it),
    /// at `place`, archived as `archived`, its citation naming the recall
    /// handle `how`.
    pub(crate) fn new(place: Place, archived: Archived<'_>, admitted: Option<Admitted>, how: Recall<'_>) -> Self {
        let text = citation(archived.action, archived.observation, archived.id, archived.tokens, how);
        let whole_tokens = archived.tokens as u64;
        let input = admitted.is_none();
        let a = admitted.unwrap_or(Admitted { record: 0, refs: Vec::new(), shown_tokens: whole_tokens, kept: false });
        Citable {
            item: place.item,
            path: place.path,
            inner: place.inner,
            record: (!input).then_some(a.record),
            refs: a.refs,
            text,
            kept: a.kept,
            form: Form::Shown,
            shown_tokens: a.shown_tokens,
            whole_tokens,
            id: archived.id.into(),
            input,
        }
    }

    /// Whether a cut has replaced it by a citation.
    pub(crate) fn cited(&self) -> bool {
        matches!(self.form, Form::Full(_) | Form::Line)
    }

    /// The tokens citing it would save (an estimate: the string's JSON escaping aside).
    pub(crate) fn saving(&self) -> u64 {
        self.shown_tokens.saturating_sub(self.text.full_tokens)
    }

    /// The citation forwarded in its place (`None`: it goes whole, or as admitted).
    pub(crate) fn citation(&self) -> Option<&str> {
        match self.form {
            Form::Line => Some(&self.text.line),
            Form::Full(_) => Some(&self.text.full),
            Form::Shown | Form::Whole => None,
        }
    }

    /// Bytes it holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Citable>()
            + self.path.heap_bytes()
            + self.inner.as_ref().map_or(0, Path::heap_bytes)
            + self.refs.len() * 4
            + self.text.full.len()
            + self.text.line.len()
    }
}

/// The citation of an archived observation: its call as the model saw
/// it, its id, size, previews and the recall handle.
fn citation(action: &str, observation: &[u8], shown: &str, tokens: usize, how: Recall<'_>) -> Cited {
    let (head, tail) = lam_core::previews(observation);
    let m = ObsMeta {
        id: ObsId::of(action.as_bytes(), observation),
        shown: shown.to_string(),
        action: action.to_string(),
        returncode: None,
        step: 0,
        bytes: observation.len() as u64,
        tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
        head: observation[head].to_vec(),
        tail: observation[tail].to_vec(),
    };
    let lead = format!("{CITED_LEAD} `{}`", cite::one_line(&lam_core::action::referent(action), 120));
    let (full, line) = (cite::citation(&m, &lead, how, PART_TOKENS, PREVIEW_CHARS), cite::line(&m, &lead, how));
    let count = |s: &str| lam_tokens::count(s.as_bytes()) as u64;
    Cited { full_tokens: count(&full), line_tokens: count(&line), full: full.into(), line: line.into() }
}
