//! Stage four: every observation of an item seen for the first time is
//! archived verbatim and admitted once by the LAM operator; its residual
//! (what the model is shown in its place) comes back as an edit of the
//! item's bytes for the rewrite stage. An observation whose admission fails
//! is forwarded verbatim; a kept tool's result is admitted (so later
//! observations may cite it) but forwarded whole.

use crate::api::Slot;
use crate::budget::{Admitted, Archived, Citable, Place};
use crate::canon::{self, Node};
use crate::engine::{Engine, Loan};
use crate::report::{Report, Unarchived};
use crate::rewrite::{Edit, json_string};
use lam_core::wire::{Path, Seg};
use lam_core::{Record, SessionId};
use lam_operator::Admission;
use serde_json::Value;

/// One conversation's admission state: its operator and its store session.
#[derive(Debug, Clone)]
pub(crate) struct Admitter {
    /// The store session: proposed until the first observation claims it.
    pub store_session: SessionId,
    claimed: bool,
    pub op: lam_operator::Session,
}

impl Admitter {
    /// A conversation the client named: it archives in `name` (or the
    /// session [`arc_store::claim_session`] gives it: `name@2`, ... when
    /// another conversation's archive holds that name).
    pub(crate) fn named(name: SessionId, op: lam_operator::Session) -> Self {
        Self { store_session: name, claimed: false, op }
    }

    /// A conversation of run `run` the client did not name: it archives in
    /// the run's store session, `run`, with every other such conversation
    /// of the run (forks, subagents, other agents served by any replica of
    /// the run): its `§id`s are unique in the run, so a recall tool that
    /// serves the run (`lam mcp --run RUN`) finds each by its id alone.
    pub(crate) fn of_run(run: &str, op: lam_operator::Session) -> Self {
        Self { store_session: SessionId::new(run), claimed: true, op }
    }

    /// Claim the store session with the conversation's first observation
    /// (the one rule of `lam compact` and the Python package: the same
    /// conversation archived again keeps its session and ids; another one
    /// never appends to it). Returns the session the first time it is claimed.
    fn claim(&mut self, engine: &Engine, rec: &Record) -> Result<Option<String>, arc_store::StoreError> {
        if self.claimed {
            return Ok(None);
        }
        let tokens = u32::try_from(lam_tokens::count(&rec.observation)).unwrap_or(u32::MAX);
        self.store_session = arc_store::claim_session(&mut &engine.store, &self.store_session, rec, tokens)?;
        self.claimed = true;
        Ok(Some(self.store_session.0.clone()))
    }

    /// Archive and admit every observation (`slots`) of `item` (`value` is
    /// its value, `tree` its faithful reading); the edits that put each
    /// residual in place of its original. `late`: the item went upstream
    /// whole before (the store was out of reach), so it goes whole again:
    /// archived and admitted, no edit.
    /// With `--budget`, each archived one joins `citable` (item `item`).
    pub(crate) fn admit(
        &mut self,
        (value, tree): (&Value, &Node),
        slots: &[Slot],
        engine: &Engine,
        loan: &mut Loan<'_>,
        d: &mut Report,
        (citable, late): (Cite<'_>, bool),
    ) -> Vec<Edit> {
        let (item, mut citable) = citable;
        let mut edits = Vec::new();
        for s in slots {
            let (Some(text), Some(node)) = (s.path.str_in(value), canon::find(tree, &s.path)) else {
                continue;
            };
            #[cfg(test)]
            fault::check(text);
            let rec = Record { index: self.op.records(), action: s.action.clone(), observation: text.as_bytes().to_vec(), returncode: None };
            match self.claim(engine, &rec) {
                Ok(Some(name)) => d.admission.store_session = Some(name),
                Ok(None) => {}
                Err(e) if e.is_unavailable() => {
                    d.outage.unarchived.push(Unarchived::Output(s.clone()));
                    continue;
                }
                Err(e) => {
                    d.admission.error(format!("record {}: claiming store session {}: {e}", rec.index, self.store_session.0));
                    continue;
                }
            }
            match self.op.admit_archived(&mut &engine.store, &self.store_session, loan.encoder(), &rec) {
                Ok(a) => {
                    let whole = s.keep || late;
                    d.admission.add(&a, whole);
                    d.admission.recalls += u64::from(s.recall);
                    if let Some(list) = citable.as_deref_mut() {
                        list.push(self.citable(item, s, &rec, &a, engine, whole));
                    }
                    if !whole && a.residual != rec.observation {
                        edits.push((node.span.clone(), json_string(a.residual)));
                    }
                }
                Err(lam_operator::Error::Core(e)) if arc_store::is_unavailable(&e) => d.outage.unarchived.push(Unarchived::Output(s.clone())),
                Err(e) => {
                    d.admission.error(format!("record {}: {e}", rec.index));
                }
            }
        }
        edits
    }
}

impl Admitter {
    /// Archive the large tool-call inputs `slots` of item `value` (at
    /// position `item`) verbatim, each a citable entry a budget may cite
    /// (the operator never admits them: they are the agent's, not observations).
    pub(crate) fn archive_inputs(
        &mut self,
        value: &Value,
        slots: &[(Slot, Option<Path>)],
        engine: &Engine,
        d: &mut Report,
        item: usize,
        citable: &mut Vec<Citable>,
    ) {
        for (s, inner) in slots {
            let Some(text) = input_text(value, &s.path, inner.as_ref()) else { continue };
            let action = input_action(&s.action, &s.path, inner.as_ref());
            let rec = Record { index: self.op.records(), action: action.clone(), observation: text.into_bytes(), returncode: None };
            let tokens = lam_tokens::count(&rec.observation);
            let archived = self.claim(engine, &rec).and_then(|claimed| {
                d.admission.store_session = claimed.or(d.admission.store_session.take());
                lam_core::ObsStore::append(&mut &engine.store, &self.store_session, &rec, u32::try_from(tokens).unwrap_or(u32::MAX)).map_err(Into::into)
            });
            match archived {
                Ok(meta) => {
                    let place = Place { item, path: s.path.clone(), inner: inner.clone() };
                    let archived = Archived { action: &action, observation: &rec.observation, id: &meta.shown, tokens };
                    citable.push(Citable::new(place, archived, None, engine.operator.recall));
                }
                Err(e) if e.is_unavailable() => d.outage.unarchived.push(Unarchived::Input(s.clone(), inner.clone())),
                Err(e) => {
                    d.admission.error(format!("archiving a tool input ({}): {e}", s.action));
                }
            }
        }
    }
}

/// How an archived tool-call input is named (its record's action and its
/// citation's lead): the field, the tool, and how stubs name the call
/// (`content of Write /repo/a.py`), never the arguments themselves, which
/// hold the input again.
fn input_action(call: &str, path: &Path, inner: Option<&Path>) -> String {
    let field = inner.map_or_else(|| in_arguments(path), Path::to_string);
    let field = field.trim_start_matches('/');
    let field = if field.is_empty() { "input" } else { field };
    match lam_core::action::parse(call) {
        // JSON arguments: the call as stubs name it (its main argument).
        Some((tool, _)) => format!("{field} of {tool} {}", lam_core::action::referent(call)),
        // A free-form input (Codex's `apply_patch`, code-mode `exec`) is the text archived.
        None => format!("{field} of {}", lam_core::action::split(call).map_or("a tool call", |(tool, _)| tool)),
    }
}

/// The part of `path` inside the tool call's arguments (after its last
/// `input` or `functionCall/args`), as a JSON pointer; the whole path
/// where it has neither.
fn in_arguments(path: &Path) -> String {
    let s = path.segs();
    let key = |i: usize, k: &str| matches!(s.get(i), Some(Seg::Key(x)) if x == k);
    let input = (0..s.len()).rev().find(|&i| key(i, "input"));
    let args = || (1..s.len()).rev().find(|&i| key(i - 1, "functionCall") && key(i, "args"));
    input.or_else(args).map_or_else(|| path.to_string(), |i| path.suffix(i + 1).to_string())
}

/// The string at `path` in `value`, or at `inner` within the JSON it holds.
fn input_text(value: &Value, path: &Path, inner: Option<&Path>) -> Option<String> {
    let s = path.str_in(value)?;
    match inner {
        None => Some(s.to_string()),
        Some(p) => p.str_in(&serde_json::from_str::<Value>(s).ok()?).map(str::to_string),
    }
}

/// Where an item's admitted observations go for a budget's cuts: the
/// item's position and the list (`None`: no budget).
pub(crate) type Cite<'a> = (usize, Option<&'a mut Vec<Citable>>);

impl Admitter {
    /// What a cut needs of an admitted observation: where it is, the
    /// records its residual names, the citation that would stand for it.
    /// `whole`: it is forwarded whole (a kept tool's, or archived late).
    fn citable(&self, item: usize, s: &Slot, rec: &Record, a: &Admission, engine: &Engine, whole: bool) -> Citable {
        let tokens = a.tokens.map_or_else(|| lam_tokens::count(&rec.observation), |t| t.input);
        let shown_tokens = match whole {
            true => tokens,
            false => a.tokens.map_or_else(|| lam_tokens::count(&a.residual), |t| t.output),
        } as u64;
        let place = Place { item, path: s.path.clone(), inner: None };
        let archived = Archived { action: &rec.action, observation: &rec.observation, id: &a.id, tokens };
        let admitted = Admitted { record: a.record, refs: self.op.refers(a), shown_tokens, kept: s.keep };
        Citable::new(place, archived, Some(admitted), engine.operator.recall)
    }
}

/// Tests make admission panic on an observation holding a marker, to check
/// that the proxy fails open.
#[cfg(test)]
mod tests {
    use super::input_action;
    use lam_core::wire::Path;

    #[test]
    fn an_input_is_named_by_field_tool_and_referent_not_its_arguments() {
        let write = r#"Write({"file_path":"/repo/a.py","content":"def f():\n    return 1\n"})"#;
        let at = Path::new().key("content").index(1).key("input");
        assert_eq!(input_action(write, &at.clone().key("content"), None), "content of Write /repo/a.py");
        let shell = r#"shell({"command":["apply_patch","*** Begin Patch\n*** Update File: a.py\n"]})"#;
        let named = input_action(shell, &Path::new().key("arguments"), Some(&Path::new().key("command").index(1)));
        assert!(named.starts_with("command/1 of shell apply_patch") && !named.contains("Update File"), "{named}");
        assert_eq!(input_action("apply_patch(*** Begin Patch)", &Path::new().key("input"), None), "input of apply_patch");
        let gemini = Path::new().key("parts").index(0).key("functionCall").key("args");
        assert_eq!(input_action(write, &gemini.key("edits").index(2).key("new_string"), None), "edits/2/new_string of Write /repo/a.py");
        assert_eq!(input_action(write, &at.key("input").key("a/b"), None), "a~1b of Write /repo/a.py", "after the last `input`");
    }
}

#[cfg(test)]
pub(crate) mod fault {
    use std::cell::RefCell;

    thread_local! {
        static MARKER: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    /// Panic in admission on observations containing `marker` (this thread).
    pub(crate) fn arm(marker: &str) {
        MARKER.with(|m| *m.borrow_mut() = Some(marker.to_string()));
    }

    pub(super) fn check(text: &str) {
        MARKER.with(|m| {
            if let Some(k) = m.borrow().as_deref() {
                assert!(!text.contains(k), "injected fault: observation holds {k}");
            }
        });
    }
}
