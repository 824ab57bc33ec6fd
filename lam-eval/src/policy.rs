//! The view policies the ARC paper compares, built one way for `lam view`
//! and for the cost-model replay.

use crate::Result;
use arc_view::{ArcConfig, ArcView, FullContext, ObservationMasking, SlidingWindow};
use lam_core::{Encoder, ObsStore, Threshold, ViewPolicy};
use lam_operator::LamArcView;
use lam_trajectory::{Cl100k, Trajectory};

/// Which policy builds the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// ARC: summary with citations, catalog page, exact recall.
    Arc,
    /// ARC over LAM residuals.
    Lam,
    /// The last N turns.
    Window,
    /// Every action, the last K observations.
    Masking,
    /// Everything verbatim (overflows).
    Full,
}

impl PolicyKind {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Arc => "arc",
            PolicyKind::Lam => "lam",
            PolicyKind::Window => "window",
            PolicyKind::Masking => "masking",
            PolicyKind::Full => "full",
        }
    }
}

/// The budget and parameters every policy reads (cl100k tokens).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicySettings {
    /// Context window `L_ctx`.
    pub budget: usize,
    /// Completion reserve `G_max`; the view limit is `L = budget - completion`.
    pub completion: usize,
    /// Turns kept by `window`.
    pub window: usize,
    /// Observations kept by `masking`.
    pub mask: usize,
    /// Merge threshold of `lam`.
    pub threshold: f64,
    /// Chunks per encoder call of `lam`.
    pub encode_batch: usize,
}

impl PolicySettings {
    /// The view limit `L = budget - completion`.
    pub fn limit(&self) -> Result<usize> {
        self.budget
            .checked_sub(self.completion)
            .ok_or_else(|| crate::Error::Input(format!("completion reserve {} exceeds the budget {}", self.completion, self.budget)))
    }
}

/// The smallest budget (context window, the completion reserve included)
/// policy `kind` accepts for `traj`'s task: ARC's and LAM's views need room
/// for the task and the smallest summary, recent-turn, catalog and recall
/// sections; `None` for the baselines.
pub fn min_budget(kind: PolicyKind, s: &PolicySettings, traj: &Trajectory) -> Option<usize> {
    let cfg = ArcConfig { completion: s.completion, ..ArcConfig::with_limit(s.budget) };
    match kind {
        PolicyKind::Arc | PolicyKind::Lam => Some(ArcView::<arc_store::MemStore, Cl100k>::min_context(&cfg, &traj.task, &Cl100k)),
        PolicyKind::Window | PolicyKind::Masking | PolicyKind::Full => None,
    }
}

/// Build policy `kind` over `traj`'s task prefix, archiving into `store`;
/// `encoder` is called only for `lam`.
pub fn build(
    kind: PolicyKind,
    s: &PolicySettings,
    traj: &Trajectory,
    store: Box<dyn ObsStore>,
    encoder: impl FnOnce() -> Result<Box<dyn Encoder>>,
) -> Result<Box<dyn ViewPolicy>> {
    let limit = s.limit()?;
    let arc = || ArcConfig { completion: s.completion, ..ArcConfig::with_limit(s.budget) };
    Ok(match kind {
        PolicyKind::Arc => Box::new(ArcView::new(arc(), traj.session.clone(), &traj.task, store, Cl100k)?),
        PolicyKind::Lam => {
            let mut c = lam_operator::Config::new(Threshold::from_cosine(s.threshold)?).with_counter(&Cl100k);
            c.encode_batch = s.encode_batch;
            Box::new(LamArcView::new(arc(), c, traj.session.clone(), &traj.task, store, Cl100k, encoder()?)?)
        }
        PolicyKind::Window => Box::new(SlidingWindow::new(&traj.task, Cl100k, s.window, limit)),
        PolicyKind::Masking => Box::new(ObservationMasking::new(&traj.task, Cl100k, s.mask, limit)),
        PolicyKind::Full => Box::new(FullContext::new(&traj.task, Cl100k)),
    })
}
