//! Stage four: every observation of an item seen for the first time is
//! archived verbatim and admitted once by the LAM operator; its residual
//! (what the model is shown in its place) comes back as an edit of the
//! item's bytes for the rewrite stage. An observation whose admission fails
//! is forwarded verbatim; a kept tool's result is admitted (so later
//! observations may cite it) but forwarded whole.

use crate::api::Slot;
use crate::canon::{self, Node};
use crate::engine::{Engine, Loan};
use lam_core::{Record, SessionId};
use lam_operator::{Admission, SessionTotals};
use serde_json::Value;
use std::ops::Range;

/// One string of an item to replace: its span in the item's bytes and the
/// JSON literal to put there.
pub(crate) type Edit = (Range<usize>, Vec<u8>);

/// What admitting one request's new observations changed.
#[derive(Debug, Default)]
pub(crate) struct Delta {
    /// Items not forwarded before in this session (each is looked at once).
    pub new_items: u64,
    /// Items forwarded before, sent again as they were.
    pub reused: u64,
    /// The admissions (a kept tool's result counted as forwarded whole).
    pub totals: SessionTotals,
    pub errors: u64,
    pub last_error: Option<String>,
}

impl Delta {
    /// Count one admission; a kept one was forwarded whole.
    fn add(&mut self, a: &Admission, kept: bool) {
        if kept { self.totals.add_whole(a) } else { self.totals.add(a) }
    }
}

/// One conversation's admission state: its operator and its store session.
#[derive(Debug)]
pub(crate) struct Admitter {
    pub store_session: SessionId,
    pub op: lam_operator::Session,
}

impl Admitter {
    /// Archive and admit every observation (`slots`) of `item` (`value` is
    /// its value, `tree` its faithful reading); the edits that put each
    /// residual in place of its original.
    pub(crate) fn admit(&mut self, value: &Value, tree: &Node, slots: &[Slot], engine: &Engine, loan: &mut Loan<'_>, d: &mut Delta) -> Vec<Edit> {
        let mut edits = Vec::new();
        for s in slots {
            let (Some(text), Some(node)) = (value.pointer(&s.pointer).and_then(Value::as_str), canon::find(tree, &s.pointer)) else {
                continue;
            };
            #[cfg(test)]
            fault::check(text);
            let rec = Record { index: self.op.records(), action: s.action.clone(), observation: text.as_bytes().to_vec(), returncode: None };
            match self.op.admit_archived(&mut &engine.store, &self.store_session, loan.encoder(), &rec) {
                Ok(a) => {
                    d.add(&a, s.keep);
                    if !s.keep && a.residual != rec.observation {
                        edits.push((node.span.clone(), json_string(a.residual)));
                    }
                }
                Err(e) => {
                    d.errors += 1;
                    d.last_error = Some(format!("record {}: {e}", rec.index));
                }
            }
        }
        edits
    }
}

/// A residual as a JSON string literal (bytes that are not UTF-8, which an
/// observation read from a JSON string never holds, replaced).
fn json_string(residual: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(residual).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    serde_json::to_vec(&text).expect("a string serialises")
}

/// Tests make admission panic on an observation holding a marker, to check
/// that the proxy fails open.
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
