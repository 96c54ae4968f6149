//! Storing a finished (or interrupted) sweep: its run, levels and fit ([`super::persist`]),
//! the idle-regression verdict ([`super::regression`]) and the calibrations of the
//! software-visible sources. One function for both paths: `wattson sweep` with no daemon
//! running calls it on its own connection, and the daemon calls it on its writer's when a
//! sweep sends its levels over the control socket.

use super::fingerprint::Fingerprint;
use super::outcome::SweepOutcome;
use super::persist::{self, Calibration};
use super::regression::{self, Check};
use super::workload::LoopKind;
use crate::config::MeterConfig;
use crate::store::Store;
use crate::sweep::SweepError;

/// How a sweep was asked to measure, stored with its run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSettings {
    pub levels: Vec<usize>,
    pub kinds: Vec<LoopKind>,
    pub ci_watts: f64,
    pub ci_percent: f64,
    pub min_samples: usize,
    pub max_level_s: f64,
    pub governor: Option<String>,
    pub ci_method: String,
}

/// What the daemon stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stored {
    pub run_id: i64,
    pub database: std::path::PathBuf,
    pub calibrations: Vec<Calibration>,
    /// The regression check's one line, when one was made.
    pub regression: Option<String>,
    /// Whether it found a regression.
    pub regression_detected: bool,
}

/// A sweep to store under configuration `name`.
pub struct Finished<'a> {
    pub name: &'a str,
    pub fingerprint: &'a Fingerprint,
    pub settings: &'a SweepSettings,
    pub outcome: &'a SweepOutcome,
    /// Compare idle with the configuration's baseline and store the verdict.
    pub regression_check: bool,
}

/// What was stored.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub run_id: i64,
    pub calibrations: Vec<Calibration>,
    /// The verdict, when a check was made (it needs an idle level and a baseline).
    pub check: Option<Check>,
}

impl Recorded {
    /// As the control protocol's reply (and the command's output) says it.
    pub fn into_stored(self, database: std::path::PathBuf) -> Stored {
        Stored {
            run_id: self.run_id,
            database,
            calibrations: self.calibrations,
            regression_detected: self.check.as_ref().is_some_and(|c| c.verdict.detected),
            regression: self.check.as_ref().map(regression::describe),
        }
    }
}

/// Store `f` into `store` for `host`. The regression baseline is read before the run is
/// stored, so a run is never its own baseline.
pub fn record(store: &Store, host: &str, f: &Finished<'_>) -> Result<Recorded, SweepError> {
    let baseline = if f.regression_check {
        regression::baseline(store, f.name)?
    } else {
        None
    };
    let settings = serde_json::to_value(f.settings)?;
    let run_id = persist::save(store, f.name, f.fingerprint, f.outcome, &settings)?;
    let check = if f.regression_check {
        check_regression(store, f, baseline, run_id)?
    } else {
        None
    };
    let calibrations = persist::save_calibrations(store, host, f.outcome)?;
    Ok(Recorded {
        run_id,
        calibrations,
        check,
    })
}

/// Compare the idle level of `f` (stored as `run_id`) with the baseline and store the
/// verdict.
fn check_regression(
    store: &Store,
    f: &Finished<'_>,
    baseline: Option<(i64, regression::IdleFigure)>,
    run_id: i64,
) -> Result<Option<Check>, SweepError> {
    let name = f.name;
    let Some(idle) = f.outcome.levels.iter().find(|l| l.loops == 0) else {
        tracing::warn!(
            "regression check of {name:?}: this sweep has no idle level (add 0 to --levels)"
        );
        return Ok(None);
    };
    let Some((baseline_run, base)) = baseline else {
        tracing::info!(
            "regression check of {name:?}: no earlier complete sweep, so this one ({:.1} W idle) is the baseline",
            idle.mean_w
        );
        return Ok(None);
    };
    let latest = regression::IdleFigure {
        watts: idle.mean_w,
        ci95_w: idle.ci95_w,
    };
    let check = Check {
        config: name.to_owned(),
        host: Some(f.fingerprint.host.clone()),
        checked_ms: f.outcome.ended_ms,
        baseline_run_id: Some(baseline_run),
        latest_run_id: Some(run_id),
        baseline: base,
        latest,
        verdict: regression::decide(base, latest),
    };
    regression::save(store, &check)?;
    Ok(Some(check))
}

/// How a sweep names its meter in the fingerprint: "pzem004t wall on /dev/ttyUSB0".
pub fn meter_description(m: &MeterConfig) -> String {
    format!("{} {} on {}", m.protocol, m.id, m.port.display())
}
