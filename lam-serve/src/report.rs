//! What one request did, stage by stage: the report the proxy counts
//! ([`crate::stats`]) and logs. Each stage writes its own part: admission
//! its admissions and what the store was out of reach for, the budget its
//! cuts ([`crate::budget::Report`]), the bill its receipt
//! ([`crate::bill::Receipt`]).

use crate::api::Slot;
use lam_core::wire::Path;
use lam_operator::{Admission, SessionTotals};

/// One request's report.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// What admission did.
    pub admission: Admissions,
    /// With a budget: what its cuts did.
    pub budget: crate::budget::Report,
    /// What the store was out of reach for.
    pub outage: Outage,
    /// What the request costs direct and as forwarded (prompt-cache pricing).
    pub receipt: Option<crate::bill::Receipt>,
}

impl Report {
    /// Errors of every stage (each forwarded its part whole).
    pub(crate) fn errors(&self) -> u64 {
        self.admission.errors + self.budget.errors
    }

    /// The last error of any stage, the budget's first.
    pub(crate) fn last_error(&self) -> Option<&String> {
        self.budget.last_error.as_ref().or(self.admission.last_error.as_ref())
    }
}

/// What admitting one request's new observations did.
#[derive(Debug, Default)]
pub(crate) struct Admissions {
    /// Items not forwarded before in this session (each is looked at once).
    pub new_items: u64,
    /// Items forwarded before, sent again as they were.
    pub reused: u64,
    /// The admissions (a kept tool's result counted as forwarded whole).
    pub totals: SessionTotals,
    /// Observations forwarded verbatim because their admission failed, and the last reason.
    pub errors: u64,
    /// See `errors`.
    pub last_error: Option<String>,
    /// The store session the conversation's first observation claimed,
    /// in the request that claimed it.
    pub store_session: Option<String>,
    /// Results of the recall tool among the new observations.
    pub recalls: u64,
}

impl Admissions {
    /// Count one admission; a kept one was forwarded whole.
    pub(crate) fn add(&mut self, a: &Admission, kept: bool) {
        if kept { self.totals.add_whole(a) } else { self.totals.add(a) }
    }

    /// One observation forwarded verbatim because of `why`.
    pub(crate) fn error(&mut self, why: String) {
        self.errors += 1;
        self.last_error = Some(why);
    }
}

/// What could not be archived because the store was out of reach
/// ([`crate::store`]): forwarded whole, archived when a later request
/// carries its item again (taken by the conversation after each item).
#[derive(Debug, Default)]
pub(crate) struct Outage {
    /// What is held back, to archive later.
    pub unarchived: Vec<Unarchived>,
    /// How many observations and inputs that was in this request, and how
    /// many of those held back earlier were archived in it.
    pub unavailable: u64,
    /// See `unavailable`.
    pub archived_late: u64,
}

/// An observation (`Output`) or a large tool-call input (`Input`, with its
/// path inside JSON-string arguments) that the store was out of reach
/// for: what it takes to archive it later.
#[derive(Debug, Clone)]
pub(crate) enum Unarchived {
    Output(Slot),
    Input(Slot, Option<Path>),
}
