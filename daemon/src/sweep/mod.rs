//! Workload sweeps: run levels of busy loops (idle, 1, 2, ... N) and measure, per level,
//! what the wall draws; fit watts against loops (idle floor, watts per loop, r2) and against
//! utilisation (linear and Fan et al. 2007), with 95 % confidence intervals.
//!
//! Each level runs in two phases: (1) for the idle level, an idle guard that waits for
//! other load to go away; (2) reading the meter from the loops' start, looking at all the
//! readings after each one ([`stopping`]): the first readings, while the power still moves,
//! are dropped as settling (the MSER warm-up cut, never a fixed sleep), and the level stops
//! once the 95 % interval of the rest is within the target (the larger of 0.5 W and 1 %) by a
//! sequential rule kept honest for its repeated looks, or at the time cap. Consecutive 1 Hz
//! meter readings are autocorrelated (the meter averages, supplies ramp), so the interval
//! comes from batch means (see [`crate::analysis::stats::batch_means_ci`]), not the naive
//! `t * sd / sqrt(n)`.
//!
//! With `--regression-check`, the new idle level is compared with the configuration's
//! baseline and the outcome stored ([`regression`]).

pub mod engine;
pub mod error;
pub mod fingerprint;
pub mod governor;
pub mod outcome;
pub mod persist;
pub mod record;
pub mod regression;
pub mod stopping;
pub mod vouch;
pub mod workload;

pub use engine::{SweepPlan, run_sweep};
pub use error::SweepError;
pub use outcome::{LevelResult, SweepOutcome};
