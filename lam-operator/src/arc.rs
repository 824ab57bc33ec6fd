//! LAM residuals inside ARC's bounded view (feature `arc`).

use crate::{Admission, Error, Session};
use arc_view::{ArcConfig, ArcView};
use lam_core::{CandidateIndex, Encoder, ObsStore, Record, Rendered, SessionId, TokenCounter, Turn, ViewPolicy};
use lam_lsh::L1Index;

/// The LAM-over-ARC view of one session: every observation is archived once,
/// admitted by LAM (near-duplicate chunks and repeated lines become stubs that
/// cite the archive), and shown as its residual in ARC's bounded view, whose
/// older turns become citations. `_recall §id [k/m]` actions are answered from
/// the archive with exact bytes; the rendered prompt never exceeds
/// `L = L_ctx - G_max` tokens.
#[derive(Debug)]
pub struct LamArcView<S, T, E, I = L1Index> {
    view: ArcView<S, T>,
    lam: Session<I>,
    enc: E,
}

impl<S: ObsStore, T: TokenCounter, E: Encoder> LamArcView<S, T, E, L1Index> {
    /// A view of session `session` with task prefix `task` over `store`,
    /// counting tokens with `counter` and admitting with `lam` settings and `enc`.
    pub fn new(arc: ArcConfig, lam: crate::Config, session: SessionId, task: &str, store: S, counter: T, enc: E) -> Result<Self, Error> {
        let dim = enc.info().dim;
        let view = ArcView::new(arc, session, task, store, counter)?;
        Ok(Self { view, lam: Session::new(lam, dim)?, enc })
    }
}

impl<S: ObsStore, T: TokenCounter, E: Encoder, I: CandidateIndex> LamArcView<S, T, E, I> {
    /// Compose an ARC view and a LAM session you built yourself (empty both).
    pub fn from_parts(view: ArcView<S, T>, lam: Session<I>, enc: E) -> Self {
        Self { view, lam, enc }
    }

    /// Intercept an action before it runs: `_recall §id [k/m]`,
    /// `_recall_meta §id` and `catalog next|prev|page N` are answered (and
    /// recorded) by the view; `None` leaves the action to the environment.
    pub fn act(&mut self, thought: &str, action: &str) -> Result<Option<String>, Error> {
        Ok(self.view.act(thought, action)?)
    }

    /// Record a completed turn: archive its observation once, admit it, and
    /// show its residual. Returns the admission (residual, stubs, ids).
    pub fn push_turn(&mut self, thought: &str, record: &Record) -> Result<Admission, Error> {
        let tokens = self.view.counter().count(&record.observation);
        let session = self.view.session().clone();
        let (a, meta) = self.lam.archive_then_admit(self.view.store_mut(), &session, &mut self.enc, record, tokens)?;
        self.view.push_archived(thought, record, meta, &a.residual);
        Ok(a)
    }

    /// The prompt for the next model call (ARC compacts first when it would exceed `L`).
    pub fn render(&mut self) -> Result<Rendered, Error> {
        Ok(ViewPolicy::render(&mut self.view)?)
    }

    /// The ARC view.
    pub fn view(&self) -> &ArcView<S, T> {
        &self.view
    }

    /// The ARC view, mutably (forced compaction, overflow reports).
    pub fn view_mut(&mut self) -> &mut ArcView<S, T> {
        &mut self.view
    }

    /// The LAM session.
    pub fn operator(&self) -> &Session<I> {
        &self.lam
    }

    /// The encoder (to save its embedding cache, for one).
    pub fn encoder_mut(&mut self) -> &mut E {
        &mut self.enc
    }

    /// The view, the session and the encoder.
    pub fn into_parts(self) -> (ArcView<S, T>, Session<I>, E) {
        (self.view, self.lam, self.enc)
    }
}

impl<S: ObsStore, T: TokenCounter, E: Encoder, I: CandidateIndex> ViewPolicy for LamArcView<S, T, E, I> {
    fn name(&self) -> String {
        "lam".into()
    }

    fn act(&mut self, thought: &str, action: &str) -> Result<Option<String>, lam_core::Error> {
        Ok(LamArcView::act(self, thought, action)?)
    }

    fn push(&mut self, turn: &Turn) -> Result<(), lam_core::Error> {
        if LamArcView::act(self, &turn.thought, &turn.record.action)?.is_none() {
            self.push_turn(&turn.thought, &turn.record)?;
        }
        Ok(())
    }

    fn render(&mut self) -> Result<Rendered, lam_core::Error> {
        ViewPolicy::render(&mut self.view)
    }

    fn recall(&self, id: &str) -> Result<Option<Vec<u8>>, lam_core::Error> {
        ViewPolicy::recall(&self.view, id)
    }
}
