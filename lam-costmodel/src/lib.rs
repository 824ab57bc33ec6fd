//! Performance models of the LAM and ARC papers, calibrated on the machine it runs on.
//!
//! - [`serving`]: LAM eq. 2's serving terms — prefill from FLOPs, decode from
//!   bandwidth — and the context-scaling share `phi` with its Amdahl ceiling
//!   `1 / (1 - phi)` (LAM 2.6, E.1, Table 7).
//! - [`schedule`]: the compaction and re-prefill terms of eq. 2 under the
//!   schedules `admit`, `delete-in-place` and `defer-to-wall`, growth regime
//!   `C <- C + Delta (1 - r)` or a hard budget with eviction (E.2, M.3, Table 27).
//! - [`classes`]: the three cost classes of M.1 (eq. 11, class 2, eq. 12).
//! - [`roofline`]: ARC's roofline, bytes per decoded token `M_w / B + L_k kv_b`,
//!   batch from HBM capacity, per call and per trajectory.
//! - [`replay`](mod@replay): several policies' calls through the roofline, with ratios.
//! - [`preset`]: devices and models with their sources; [`profile`]: the
//!   compaction rates and the calibrated device profile JSON.
//! - [`paper`]: our values beside the papers' (snapshot-tested).
//!
//! Units are SI throughout: bytes, bytes/s, FLOP/s, seconds, tokens.
//!
//! ```
//! use lam_costmodel::{Deployment, Efficiency, phi_table};
//!
//! // LAM Table 7: phi, the context-scaling share of a turn, and its Amdahl ceiling.
//! let dep = Deployment::preset("gb10", "qwen3-8b")?;
//! let rows = phi_table(&dep, Efficiency::MEASURED, 1024.0, 256.0, &[1.0], &[32_768.0, 131_072.0])?;
//! assert!(rows[1].phi > rows[0].phi && rows[1].ceiling >= 1.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

// The README's example runs as a doc test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod classes;
pub mod error;
pub mod paper;
pub mod preset;
pub mod profile;
pub mod replay;
pub mod roofline;
pub mod schedule;
pub mod serving;

pub use error::{Error, Result};
pub use preset::{DEVICE_NAMES, Deployment, Device, MODEL_NAMES, Model};
pub use profile::{CompactionRates, DeviceProfile, PROFILE_FORMAT};
pub use replay::{PolicyCalls, ReplayRow, replay};
pub use roofline::{BatchRule, Call, KvLength, Roofline};
pub use schedule::{Arrival, Limit, Schedule, ScheduleConfig, ScheduleCost, run_schedule};
pub use serving::{Efficiency, PhiRow, Serving, amdahl_ceiling, phi_table};
