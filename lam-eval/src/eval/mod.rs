//! `lam eval`: the papers' measurements over trajectory corpora, with the
//! baselines in the same run and the same tables (definitions: `docs/eval.md`).
//!
//! One run reads the trajectories, chunks and embeds every observation once
//! (the encoder's memo serves every threshold and baseline), then for each
//! threshold runs the online and batch operators in both layer orders and
//! scores removal, the substitution bound, the metric-entropy bracket,
//! gold-patch evidence, retrieval and determinism; observation masking,
//! SemDeDup and L0 alone are scored on the same texts; LoCoMo gives the
//! conversational control.
//!
//! Where things are: `options` (settings, progress), `prep` (reading,
//! embedding and counting each trajectory once), `score` (one setting's
//! measurement of one trajectory, and their aggregate), `sweep` (the
//! threshold sweep and `evaluate`), `baseline_rows` (masking, SemDeDup),
//! `controls` (specificity, ECR, LoCoMo), `split` (per-input rows), `rows`
//! (the report's types), `output` (report files and plots).

mod baseline_rows;
mod controls;
mod options;
mod output;
mod prep;
mod rows;
mod score;
mod split;
mod sweep;

use crate::error::{Context, Result, bail};
use crate::evidence::{self, GoldPatches, evidence_lines};
use crate::markdown::markdown;
use crate::{report, svg};
use lam_core::{Decision, DeletionDigest, Encoder, ObsStore, Stub, Threshold};
use lam_encode::CachedEncoder;
use lam_hash::{LineDedup, Segment};
use lam_lsh::{Greedy, L1Index};
use lam_operator::{Config, Order, Residual, without_stubs};
use lam_trajectory::read::{self, Trajectory};
use lam_trajectory::tokens;
use serde::Serialize;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;
use xxhash_rust::xxh3::xxh3_64;

use baseline_rows::*;
use controls::*;
use prep::*;
use score::*;
use split::*;

pub use options::{DEFAULT_BUDGETS, DEFAULT_MASKING, DEFAULT_SIZES, DEFAULT_THRESHOLDS, NoProgress, Options, Progress, SEMDEDUP_EXTRA};
pub use output::{plot_removal_evidence, plot_removal_size, write_report};
pub use prep::find_beside;
pub use rows::*;
pub use sweep::evaluate;
