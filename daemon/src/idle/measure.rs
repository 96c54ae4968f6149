//! What one setting saves at the wall: idle with it changed (B) against idle as it was (A),
//! in the sequence A B A B A B A (any odd number of phases from 3).
//!
//! Each phase changes the setting (or puts it back), waits until the wall power stops
//! trending (the sweep's slope test, [`stats::is_settled`], at most [`Plan::max_settle`]),
//! then reads the meter for [`Plan::phase`] and takes the mean with its batch-means interval
//! ([`stats::batch_means_ci`]), as a sweep level does.
//!
//! The phases combine as `delta = mean_j (B_j - (A_j + A_{j+1}) / 2)`: each B against the
//! A on either side, so a linear drift of the idle draw (a room warming, a fan slowing)
//! cancels. Its variance is the weighted sum of the phases' variances (the phases do not
//! overlap, so their means are independent); its interval uses the Welch-Satterthwaite
//! degrees of freedom. When that interval covers zero, the meter cannot tell the
//! difference, and the result says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use wattson_collectors::Collector;
use wattson_collectors::idle::settings::SettingKind;

use super::IdleError;
use super::journal::Journal;
use super::trials::Trial;
use crate::analysis::stats::{self, CiMethod, MeanCi};
use crate::store::Store;
use crate::sweep::engine::{sleep_until, wall_watts};

/// How each setting is measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Phases per setting, odd and at least 3 (A B A ...).
    pub phases: usize,
    /// Measuring time of each phase, after settling.
    pub phase: Duration,
    /// Time cap of each phase's settling.
    pub max_settle: Duration,
    /// Readings in the settling window.
    pub settle_window: usize,
    /// Meter reading interval.
    pub interval: Duration,
}

impl Plan {
    /// The documented defaults: 7 phases (A B A B A B A) of 20 s, each after at most 5 s of
    /// settling, so a setting takes at most 175 s, inside the 3-minute budget. At 1 Hz a
    /// 20 s phase is exactly the 20 batches [`stats::batch_means_ci`] uses, so no reading is
    /// dropped, and seven phases weigh the noise less than five longer ones would
    /// (sum of squared weights 0.61 against 0.875).
    pub fn new(interval: Duration) -> Plan {
        Plan {
            phases: 7,
            phase: Duration::from_secs(20),
            max_settle: Duration::from_secs(5),
            settle_window: 5,
            interval,
        }
    }

    /// The longest one setting can take.
    pub fn max_per_setting(&self) -> Duration {
        (self.phase + self.max_settle) * self.phases as u32
    }

    /// This plan for trial `c`: a disk's standby phases may settle for up to
    /// [`DISK_SETTLE`].
    #[must_use]
    pub fn for_trial(&self, c: &Trial) -> Plan {
        let mut p = self.clone();
        if c.kind == SettingKind::DiskStandby {
            p.max_settle = p.max_settle.max(DISK_SETTLE);
        }
        p
    }
}

/// A drive takes seconds to stop, and to spin up again with a surge of current: a disk's
/// standby phase may settle this long before it is measured.
pub const DISK_SETTLE: Duration = Duration::from_secs(20);

/// One phase's statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    /// `A` (as found) or `B` (changed).
    pub phase: &'static str,
    pub mean_w: f64,
    pub ci95_w: f64,
    /// Degrees of freedom of the interval.
    pub df: f64,
    pub n: usize,
    /// Standard deviation, lowest and highest of the phase's readings, W.
    pub sd_w: f64,
    pub min_w: f64,
    pub max_w: f64,
    /// Seconds until the power stopped trending (or the settling cap).
    pub settle_s: f64,
    /// Settling hit its cap with the power still changing.
    pub unsettled: bool,
}

/// One setting's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub phases: Vec<Phase>,
    /// The phases combined: idle as found, changed, and the difference.
    #[serde(flatten)]
    pub figures: Combined,
    /// Readings used, all phases.
    pub n: usize,
    pub started_ms: i64,
    pub ended_ms: i64,
}

impl Outcome {
    /// The interval excludes zero: the meter can tell the difference.
    pub fn has_effect(&self) -> bool {
        self.figures.delta_w.abs() > self.figures.delta_ci95_w
    }
}

/// Progress for the command's progress line.
#[derive(Debug, Clone)]
pub enum Progress {
    Phase {
        index: usize,
        total: usize,
        changed: bool,
    },
    Settling {
        last_w: f64,
    },
    Measuring {
        elapsed_s: f64,
        mean_w: f64,
        n: usize,
    },
}

fn degrees_of_freedom(ci: &MeanCi) -> f64 {
    match ci.method {
        CiMethod::BatchMeans { batches, .. } => batches.saturating_sub(1).max(1) as f64,
        CiMethod::Ar1Adjusted { effective_n } => (effective_n - 1.0).max(1.0),
    }
}

/// Phases A B A ... combined: each side's mean and the drift-cancelling difference, W, each
/// with its 95 % half-width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Combined {
    /// Drift-cancelling mean of the A phases (idle as found).
    pub baseline_w: f64,
    pub baseline_ci95_w: f64,
    /// Mean of the B phases (the setting changed).
    pub changed_w: f64,
    pub changed_ci95_w: f64,
    /// `changed_w - baseline_w`.
    pub delta_w: f64,
    pub delta_ci95_w: f64,
}

/// Combine phases A B A ... into the drift-cancelling difference and its interval.
pub fn combine(phases: &[Phase]) -> Option<Combined> {
    let k = phases.iter().filter(|p| p.phase == "B").count();
    if k == 0 || phases.len() != 2 * k + 1 {
        return None;
    }
    let kf = k as f64;
    // B_j: 1/k; A_0 and A_k: 1/(2k); inner A's: 1/k (A weights sum to 1, subtracted).
    let weight = |i: usize| -> f64 {
        if i % 2 == 1 {
            1.0 / kf
        } else if i == 0 || i == 2 * k {
            -0.5 / kf
        } else {
            -1.0 / kf
        }
    };
    let side = |keep: &dyn Fn(f64) -> bool, sign: f64| {
        interval(
            phases
                .iter()
                .enumerate()
                .map(|(i, p)| (weight(i), p))
                .filter(|(w, _)| keep(*w))
                .map(|(w, p)| (sign * w, p)),
        )
    };
    let (delta_w, delta_ci95_w) = side(&|_| true, 1.0);
    let (baseline_w, baseline_ci95_w) = side(&|w| w < 0.0, -1.0);
    let (changed_w, changed_ci95_w) = side(&|w| w > 0.0, 1.0);
    Some(Combined {
        baseline_w,
        baseline_ci95_w,
        changed_w,
        changed_ci95_w,
        delta_w,
        delta_ci95_w,
    })
}

/// `sum w x mean` over the weighted phases, with its 95 % half-width: the phases do not
/// overlap, so their means are independent and the variances add; Welch-Satterthwaite
/// degrees of freedom.
fn interval<'a>(terms: impl Iterator<Item = (f64, &'a Phase)>) -> (f64, f64) {
    let mut value = 0.0;
    let mut var = 0.0;
    let mut ws_den = 0.0;
    for (w, p) in terms {
        value += w * p.mean_w;
        let se = p.ci95_w / stats::t_975(p.df.floor().max(1.0) as usize);
        let term = w * w * se * se;
        var += term;
        ws_den += term * term / p.df.max(1.0);
    }
    let df = if ws_den > 0.0 {
        var * var / ws_den
    } else {
        1e6
    };
    (
        value,
        stats::t_975(df.floor().max(1.0) as usize) * var.sqrt(),
    )
}

/// Read the meter until the last `settle_window` readings show no trend (or the cap).
fn settle(
    plan: &Plan,
    meter: &mut dyn Collector,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> (f64, bool) {
    let t0 = Instant::now();
    let mut window: Vec<f64> = Vec::new();
    let mut next = Instant::now();
    loop {
        if stop.load(Ordering::SeqCst) {
            return (t0.elapsed().as_secs_f64(), false);
        }
        if let Ok(s) = meter.poll(chrono::Utc::now().timestamp_millis())
            && let Some(w) = wall_watts(&s)
        {
            window.push(w);
            if window.len() > plan.settle_window {
                window.remove(0);
            }
            progress(Progress::Settling { last_w: w });
            if window.len() >= plan.settle_window && stats::is_settled(&window, stats::ci_target(w))
            {
                return (t0.elapsed().as_secs_f64(), false);
            }
        }
        if t0.elapsed() >= plan.max_settle {
            return (t0.elapsed().as_secs_f64(), true);
        }
        next += plan.interval;
        sleep_until(next, stop);
    }
}

/// Readings for `plan.phase`; `None` when stopped.
fn read_phase(
    plan: &Plan,
    meter: &mut dyn Collector,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Option<Vec<f64>>, IdleError> {
    let t0 = Instant::now();
    let mut xs = Vec::new();
    let mut next = Instant::now();
    let mut first_error = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        match meter.poll(chrono::Utc::now().timestamp_millis()) {
            Ok(s) => xs.extend(wall_watts(&s)),
            Err(e) => {
                first_error.get_or_insert_with(|| wattson_collectors::ErrorChain(&e).to_string());
            }
        }
        progress(Progress::Measuring {
            elapsed_s: t0.elapsed().as_secs_f64(),
            mean_w: xs.iter().sum::<f64>() / xs.len().max(1) as f64,
            n: xs.len(),
        });
        next += plan.interval;
        if next >= t0 + plan.phase {
            break;
        }
        sleep_until(next, stop);
    }
    if xs.len() < 3 {
        return Err(IdleError::TooFewReadings {
            readings: xs.len(),
            phase_s: plan.phase.as_secs_f64(),
            why: first_error.map_or_else(String::new, |e| format!(" (first failure: {e})")),
        });
    }
    Ok(Some(xs))
}

/// Measure `c`: apply and restore it phase by phase through `journal` (the only writer),
/// restoring it before returning, whatever happens. `Ok(None)` when `stop` was set.
pub fn measure(
    plan: &Plan,
    meter: &mut dyn Collector,
    journal: &Journal,
    store: &Store,
    c: &Trial,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Option<Outcome>, IdleError> {
    let started_ms = chrono::Utc::now().timestamp_millis();
    let files: Vec<std::path::PathBuf> = c.writes.iter().map(|(p, _)| p.clone()).collect();
    let result = run_phases(plan, meter, journal, store, c, &files, stop, progress);
    let failed = journal.restore(store, Some(&files));
    if !failed.is_empty() {
        return Err(IdleError::NotRestored {
            name: c.name.clone(),
            failed,
        });
    }
    let Some(phases) = result? else {
        return Ok(None);
    };
    let figures = combine(&phases).ok_or(IdleError::PhasesOutOfOrder)?;
    Ok(Some(Outcome {
        n: phases.iter().map(|p| p.n).sum(),
        phases,
        figures,
        started_ms,
        ended_ms: chrono::Utc::now().timestamp_millis(),
    }))
}

#[allow(clippy::too_many_arguments)]
fn run_phases(
    plan: &Plan,
    meter: &mut dyn Collector,
    journal: &Journal,
    store: &Store,
    c: &Trial,
    files: &[std::path::PathBuf],
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Option<Vec<Phase>>, IdleError> {
    let mut phases = Vec::new();
    let mut is_changed = false;
    for index in 0..plan.phases {
        let want_changed = index % 2 == 1;
        progress(Progress::Phase {
            index: index + 1,
            total: plan.phases,
            changed: want_changed,
        });
        if want_changed && !is_changed {
            for (path, value) in &c.writes {
                journal.write(path, value)?;
            }
            is_changed = true;
        } else if !want_changed && is_changed {
            let failed = journal.restore(store, Some(files));
            if !failed.is_empty() {
                return Err(IdleError::NotPutBack {
                    name: c.name.clone(),
                    failed,
                });
            }
            is_changed = false;
        }
        let (settle_s, unsettled) = settle(plan, meter, stop, progress);
        let Some(xs) = read_phase(plan, meter, stop, progress)? else {
            return Ok(None);
        };
        let ci = stats::batch_means_ci(&xs)?;
        phases.push(Phase {
            phase: if want_changed { "B" } else { "A" },
            mean_w: ci.mean,
            ci95_w: ci.ci95,
            df: degrees_of_freedom(&ci),
            n: xs.len(),
            sd_w: stats::sample_sd(&xs)?,
            min_w: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max_w: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            settle_s,
            unsettled,
        });
    }
    Ok(Some(phases))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(p: &'static str, mean_w: f64, ci95_w: f64) -> Phase {
        Phase {
            phase: p,
            mean_w,
            ci95_w,
            df: 19.0,
            n: 20,
            sd_w: 1.0,
            min_w: mean_w - 2.0,
            max_w: mean_w + 2.0,
            settle_s: 1.0,
            unsettled: false,
        }
    }

    fn se_of(ci95: f64) -> f64 {
        ci95 / stats::t_975(19)
    }

    #[test]
    fn a_linear_drift_cancels_and_the_interval_adds_up() {
        // Idle drifts +0.5 W per phase; the setting saves 3 W.
        let ps: Vec<Phase> = (0..5)
            .map(|i| {
                let drift = 40.0 + 0.5 * f64::from(i);
                if i % 2 == 1 {
                    phase("B", drift - 3.0, 0.4)
                } else {
                    phase("A", drift, 0.4)
                }
            })
            .collect();
        let c = combine(&ps).unwrap();
        let (base, changed, delta, ci) = (c.baseline_w, c.changed_w, c.delta_w, c.delta_ci95_w);
        assert!((delta + 3.0).abs() < 1e-12, "{delta}");
        assert!((base - 41.0).abs() < 1e-12 && (changed - 38.0).abs() < 1e-12);
        // Each side on its own: B weights 1/2, 1/2 (sum of squares 0.5), A 0.375.
        assert!(
            (c.changed_ci95_w / stats::t_975(38) - se_of(0.4) * 0.5f64.sqrt()).abs() < 1e-9,
            "{c:?}"
        );
        assert!(c.baseline_ci95_w < c.delta_ci95_w && c.changed_ci95_w < c.delta_ci95_w);
        // Weights 1/2, 1/2 (B) and 1/4, 1/2, 1/4 (A): sum of squares 0.875.
        let se = 0.4 / stats::t_975(19);
        // Welch-Satterthwaite: 0.875^2 x 19 / sum(w^4) = 74 degrees of freedom.
        assert!(
            (ci / stats::t_975(74) - se * 0.875f64.sqrt()).abs() < 1e-9,
            "{ci}"
        );
        assert!(combine(&ps[..4]).is_none());
    }

    #[test]
    fn the_default_plan_fits_three_minutes_per_setting() {
        assert!(Plan::new(Duration::from_secs(1)).max_per_setting() <= Duration::from_secs(180));
    }
}
