//! Idle-power regression: is the idle floor of a new sweep worse than its configuration's
//! baseline? [`decide`] says; each check is stored in the `idle_regression` table
//! (`schema/0004-idle-regression.sql`) and read back by the daemon (a Home Assistant
//! `problem` binary sensor over MQTT) and by `wattson report`.
//!
//! Units: watts (W); a `ci95` is the half-width of a 95 % interval in W; instants are UTC ms.
//!
//! The rule: idle rose by more than the 95 % interval of the rise, `sqrt(ci_a^2 + ci_b^2)`
//! (the two means are independent), and by at least the larger of [`MIN_RISE_W`] and
//! [`MIN_RISE_FRACTION`] of the baseline. The first keeps noise from raising alarms, the
//! second keeps a statistically real but harmless rise (a warmer room, a fan step) from
//! doing so: 2 W all year is about 17.5 kWh.
//!
//! The baseline is the newest complete sweep of the configuration that was not itself found
//! to be a regression: a regression stays reported, month after month, until idle comes back
//! down, or until a sweep of the same name run without `--regression-check` accepts the new
//! level as the baseline.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::store::Store;

/// Smallest rise of idle power that counts as a regression, W.
pub const MIN_RISE_W: f64 = 2.0;
/// Smallest rise of idle power that counts, as a share of the baseline (0.05 = 5 %).
pub const MIN_RISE_FRACTION: f64 = 0.05;

/// Why a regression check could not be stored or read. Names the database file.
#[derive(Debug, thiserror::Error)]
pub enum RegressionError {
    #[error("database {path}: idle regression checks")]
    Sqlite {
        path: std::path::PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database {path}: no sweep configuration named {name:?}")]
    NoConfiguration {
        path: std::path::PathBuf,
        name: String,
    },
}

/// A measured idle level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IdleFigure {
    /// Mean, W.
    pub watts: f64,
    /// Half-width of the mean's 95 % interval, W (0 when unknown).
    pub ci95_w: f64,
}

/// The outcome of comparing a new idle level with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Verdict {
    /// Latest minus baseline, W (negative: idle fell).
    pub delta_w: f64,
    /// Half-width of the rise's 95 % interval, W.
    pub delta_ci95_w: f64,
    /// The rise that counts as a regression, W: the larger of the interval and the minimum
    /// rise.
    pub threshold_w: f64,
    /// Idle rose by at least `threshold_w` (and by more than the interval).
    pub detected: bool,
}

/// Compares `latest` with `baseline`; see the module documentation for the rule.
pub fn decide(baseline: IdleFigure, latest: IdleFigure) -> Verdict {
    let ci = |c: f64| if c.is_finite() { c.abs() } else { 0.0 };
    let delta_w = latest.watts - baseline.watts;
    let delta_ci95_w = ci(baseline.ci95_w).hypot(ci(latest.ci95_w));
    let material = (MIN_RISE_FRACTION * baseline.watts.abs()).max(MIN_RISE_W);
    Verdict {
        delta_w,
        delta_ci95_w,
        threshold_w: material.max(delta_ci95_w),
        detected: delta_w.is_finite() && delta_w > delta_ci95_w && delta_w >= material,
    }
}

/// One stored check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// The sweep configuration's name.
    pub config: String,
    /// The host it was measured on.
    pub host: Option<String>,
    /// When the check ran, UTC ms.
    pub checked_ms: i64,
    /// The sweep run the baseline came from (gone if that run was deleted).
    pub baseline_run_id: Option<i64>,
    /// The sweep run checked.
    pub latest_run_id: Option<i64>,
    pub baseline: IdleFigure,
    pub latest: IdleFigure,
    pub verdict: Verdict,
}

fn sql(store: &Store) -> impl Fn(rusqlite::Error) -> RegressionError + '_ {
    |source| RegressionError::Sqlite {
        path: store.path().to_owned(),
        source,
    }
}

/// The baseline of configuration `name`: the idle level of its newest complete run that was
/// not itself a detected regression, with that run's id.
pub fn baseline(store: &Store, name: &str) -> Result<Option<(i64, IdleFigure)>, RegressionError> {
    store
        .conn()
        .query_row(
            "SELECT r.id, l.mean_w, l.ci95_w
             FROM configuration c
             JOIN sweep_run r ON r.configuration_id = c.id
             JOIN sweep_level l ON l.run_id = r.id AND l.loops = 0
             WHERE c.name = ?1 AND r.status = 'complete'
               AND r.id NOT IN (SELECT latest_run_id FROM idle_regression
                                WHERE detected = 1 AND latest_run_id IS NOT NULL)
             ORDER BY r.started_ms DESC, r.id DESC, l.kind LIMIT 1",
            [name],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    IdleFigure {
                        watts: r.get(1)?,
                        ci95_w: r.get::<_, Option<f64>>(2)?.unwrap_or(0.0),
                    },
                ))
            },
        )
        .optional()
        .map_err(sql(store))
}

/// Stores `check` under its configuration. Returns the row id.
pub fn save(store: &Store, check: &Check) -> Result<i64, RegressionError> {
    let conn = store.conn();
    let config_id: i64 = conn
        .query_row(
            "SELECT id FROM configuration WHERE name = ?1",
            [&check.config],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql(store))?
        .ok_or_else(|| RegressionError::NoConfiguration {
            path: store.path().to_owned(),
            name: check.config.clone(),
        })?;
    conn.execute(
        "INSERT INTO idle_regression (configuration_id, host, checked_ms, baseline_run_id,
             latest_run_id, baseline_w, baseline_ci95_w, latest_w, latest_ci95_w, delta_w,
             delta_ci95_w, threshold_w, detected)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            config_id,
            check.host,
            check.checked_ms,
            check.baseline_run_id,
            check.latest_run_id,
            check.baseline.watts,
            check.baseline.ci95_w,
            check.latest.watts,
            check.latest.ci95_w,
            check.verdict.delta_w,
            check.verdict.delta_ci95_w,
            check.verdict.threshold_w,
            check.verdict.detected,
        ],
    )
    .map_err(sql(store))?;
    Ok(conn.last_insert_rowid())
}

/// The newest check of each configuration (of `host` when given), newest first.
pub fn latest(store: &Store, host: Option<&str>) -> Result<Vec<Check>, RegressionError> {
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT c.name, g.host, g.checked_ms, g.baseline_run_id, g.latest_run_id,
                    g.baseline_w, g.baseline_ci95_w, g.latest_w, g.latest_ci95_w,
                    g.delta_w, g.delta_ci95_w, g.threshold_w, g.detected
             FROM idle_regression g JOIN configuration c ON c.id = g.configuration_id
             WHERE (?1 IS NULL OR g.host = ?1)
               AND g.id = (SELECT h.id FROM idle_regression h
                           WHERE h.configuration_id = g.configuration_id
                             AND (?1 IS NULL OR h.host = ?1)
                           ORDER BY h.checked_ms DESC, h.id DESC LIMIT 1)
             ORDER BY g.checked_ms DESC, g.id DESC",
        )
        .map_err(sql(store))?;
    let rows = stmt.query_map([host], |r| {
        Ok(Check {
            config: r.get(0)?,
            host: r.get(1)?,
            checked_ms: r.get(2)?,
            baseline_run_id: r.get(3)?,
            latest_run_id: r.get(4)?,
            baseline: IdleFigure {
                watts: r.get(5)?,
                ci95_w: r.get(6)?,
            },
            latest: IdleFigure {
                watts: r.get(7)?,
                ci95_w: r.get(8)?,
            },
            verdict: Verdict {
                delta_w: r.get(9)?,
                delta_ci95_w: r.get(10)?,
                threshold_w: r.get(11)?,
                detected: r.get(12)?,
            },
        })
    });
    rows.and_then(Iterator::collect).map_err(sql(store))
}

/// The check a host-wide indicator shows: the newest detected regression, else the newest
/// check. `checks` newest first, as [`latest`] returns them.
pub fn headline(checks: &[Check]) -> Option<&Check> {
    checks
        .iter()
        .find(|c| c.verdict.detected)
        .or_else(|| checks.first())
}

/// One line for the log and the terminal.
pub fn describe(c: &Check) -> String {
    let v = &c.verdict;
    if v.detected {
        format!(
            "idle power regression in {:?}: {:.1} ± {:.1} W now against {:.1} ± {:.1} W at the baseline (+{:.1} ± {:.1} W, threshold {:.1} W): check C-states, disk spin-down and new devices",
            c.config,
            c.latest.watts,
            c.latest.ci95_w,
            c.baseline.watts,
            c.baseline.ci95_w,
            v.delta_w,
            v.delta_ci95_w,
            v.threshold_w
        )
    } else {
        format!(
            "no idle power regression in {:?}: {:.1} ± {:.1} W now, {:.1} ± {:.1} W at the baseline ({:+.1} ± {:.1} W, threshold {:.1} W)",
            c.config,
            c.latest.watts,
            c.latest.ci95_w,
            c.baseline.watts,
            c.baseline.ci95_w,
            v.delta_w,
            v.delta_ci95_w,
            v.threshold_w
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(watts: f64, ci95_w: f64) -> IdleFigure {
        IdleFigure { watts, ci95_w }
    }

    #[test]
    fn a_clear_rise_of_a_small_server_is_a_regression() {
        let v = decide(f(40.0, 0.3), f(47.0, 0.4));
        assert!(v.detected);
        assert!((v.delta_w - 7.0).abs() < 1e-12);
        assert!((v.delta_ci95_w - 0.5).abs() < 1e-12, "{}", v.delta_ci95_w);
        assert!((v.threshold_w - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_rise_inside_the_intervals_is_noise() {
        // +3 W, above the 2 W minimum, but the intervals (±2.5 W each) cover it.
        let v = decide(f(40.0, 2.5), f(43.0, 2.5));
        assert!(!v.detected);
        assert!(v.threshold_w > 3.0);
    }

    #[test]
    fn a_significant_rise_below_the_minimum_is_not_a_regression() {
        // +1.5 W measured tightly: real, but under 2 W.
        assert!(!decide(f(30.0, 0.1), f(31.5, 0.1)).detected);
        // A big machine: +10 W is under 5 % of 240 W.
        let v = decide(f(240.0, 0.5), f(250.0, 0.5));
        assert!(!v.detected);
        assert!((v.threshold_w - 12.0).abs() < 1e-9);
        assert!(decide(f(240.0, 0.5), f(252.5, 0.5)).detected);
    }

    #[test]
    fn idle_falling_is_never_a_regression() {
        assert!(!decide(f(40.0, 0.2), f(30.0, 0.2)).detected);
    }

    #[test]
    fn unknown_or_bad_intervals_do_not_panic_or_alarm_on_nan() {
        let v = decide(f(40.0, f64::NAN), f(45.0, f64::INFINITY));
        assert_eq!(v.delta_ci95_w, 0.0);
        assert!(v.detected);
        assert!(!decide(f(40.0, 0.1), f(f64::NAN, 0.1)).detected);
    }

    #[test]
    fn the_headline_is_the_newest_detected_check() {
        let check = |name: &str, detected: bool| Check {
            config: name.into(),
            host: None,
            checked_ms: 0,
            baseline_run_id: None,
            latest_run_id: None,
            baseline: f(1.0, 0.0),
            latest: f(1.0, 0.0),
            verdict: Verdict {
                delta_w: 0.0,
                delta_ci95_w: 0.0,
                threshold_w: 2.0,
                detected,
            },
        };
        let cs = [check("a", false), check("b", true), check("c", true)];
        assert_eq!(headline(&cs).unwrap().config, "b");
        assert_eq!(headline(&cs[..1]).unwrap().config, "a");
        assert!(headline(&[]).is_none());
    }

    fn idle_only(started_ms: i64, watts: f64, complete: bool) -> crate::sweep::SweepOutcome {
        use crate::sweep::LevelResult;
        crate::sweep::SweepOutcome {
            levels: vec![LevelResult {
                kind: crate::sweep::workload::LoopKind::Spin,
                loops: 0,
                started_ms,
                ended_ms: started_ms + 1,
                settle_s: 1.0,
                n: 30,
                mean_w: watts,
                sd_w: 1.0,
                ci95_w: 0.3,
                ci_method: "test".into(),
                min_w: watts - 1.0,
                max_w: watts + 1.0,
                mean_mhz: None,
                busy: None,
                busy_cpus: None,
                residency: std::collections::BTreeMap::new(),
                ops_per_s: 0.0,
                joules_per_op: None,
                components: std::collections::BTreeMap::new(),
                component_ranges: std::collections::BTreeMap::new(),
                pinned: true,
                smt_siblings: false,
                warnings: Vec::new(),
            }],
            fits: Vec::new(),
            complete,
            started_ms,
            ended_ms: started_ms + 1,
        }
    }

    fn sweep(store: &Store, started_ms: i64, watts: f64, complete: bool) -> i64 {
        let fp = crate::sweep::fingerprint::Fingerprint {
            host: "basket".into(),
            cpu: wattson_collectors::cpu::topology::CpuFacts::default(),
            memory_bytes: None,
            kernel: None,
            meter: "sim".into(),
        };
        crate::sweep::persist::save(
            store,
            "monthly",
            &fp,
            &idle_only(started_ms, watts, complete),
            &serde_json::json!({}),
        )
        .unwrap()
    }

    /// What `wattson sweep --regression-check` does: read the baseline, sweep, store the
    /// verdict.
    fn checked_sweep(store: &Store, started_ms: i64, watts: f64) -> Check {
        let (base_run, base) = baseline(store, "monthly").unwrap().unwrap();
        let run_id = sweep(store, started_ms, watts, true);
        let latest = f(watts, 0.3);
        let c = Check {
            config: "monthly".into(),
            host: Some("basket".into()),
            checked_ms: started_ms + 1,
            baseline_run_id: Some(base_run),
            latest_run_id: Some(run_id),
            baseline: base,
            latest,
            verdict: decide(base, latest),
        };
        save(store, &c).unwrap();
        c
    }

    #[test]
    fn a_regression_stays_reported_until_idle_comes_back_down() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &dir.path().join("w.db"),
            &crate::store::StoreOptions::default(),
        )
        .unwrap();
        assert!(baseline(&store, "monthly").unwrap().is_none());
        let first = sweep(&store, 1_000, 40.0, true);
        // A partial run is never a baseline.
        sweep(&store, 1_500, 20.0, false);
        assert_eq!(baseline(&store, "monthly").unwrap().unwrap().0, first);

        // Month two: idle rose by 8 W.
        let c = checked_sweep(&store, 2_000, 48.0);
        assert!(c.verdict.detected);
        assert_eq!(c.baseline_run_id, Some(first));
        // Month three: still high. The baseline is still month one, so it is still reported.
        let c = checked_sweep(&store, 3_000, 48.5);
        assert_eq!(c.baseline_run_id, Some(first));
        assert!(c.verdict.detected);
        let stored = latest(&store, Some("basket")).unwrap();
        assert_eq!(stored.len(), 1, "one verdict per configuration");
        assert_eq!(stored[0], c);
        assert!(latest(&store, Some("other-host")).unwrap().is_empty());
        // Month four: fixed. No regression, and month four becomes the next baseline.
        let c = checked_sweep(&store, 4_000, 40.2);
        assert!(!c.verdict.detected);
        assert_eq!(latest(&store, None).unwrap()[0].checked_ms, 4_001);
        assert_eq!(
            baseline(&store, "monthly").unwrap().unwrap().0,
            c.latest_run_id.unwrap()
        );
    }
}
