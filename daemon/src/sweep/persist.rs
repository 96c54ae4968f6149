//! Sweeps in SQLite: configurations (name, host, fingerprint), runs, per-level statistics
//! and fits; and reading them back for `wattson sweep --list/--show` and reports.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::fingerprint::Fingerprint;
use super::outcome::{LevelResult, SweepOutcome};
use crate::store::Store;
use crate::sweep::SweepError;

/// A stored configuration with its latest sweep run.
#[derive(Debug, Clone, Serialize)]
pub struct StoredSweep {
    pub name: String,
    pub host: Option<String>,
    pub fingerprint: Option<serde_json::Value>,
    pub run_id: i64,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub status: String,
    pub kinds: String,
    pub meter: String,
    /// What the run was told (JSON), e.g. how `wattson idle --measure` paired it.
    pub settings: Option<serde_json::Value>,
    pub fit: Option<serde_json::Value>,
    pub levels: Vec<StoredLevel>,
    /// What was stored for this run but could not be used (a level or fit no sweep could
    /// have written), each with the reason ([`super::vouch`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<String>,
}

/// One stored level.
#[derive(Debug, Clone, Serialize)]
pub struct StoredLevel {
    pub kind: String,
    pub loops: i64,
    pub n: i64,
    pub mean_w: f64,
    pub sd_w: Option<f64>,
    pub ci95_w: Option<f64>,
    pub min_w: Option<f64>,
    pub max_w: Option<f64>,
    pub mean_mhz: Option<f64>,
    pub busy: Option<f64>,
    pub residency: Option<serde_json::Value>,
    pub ops_per_s: Option<f64>,
    pub joules_per_op: Option<f64>,
    pub warnings: Option<String>,
}

/// Store a sweep under configuration `name` (created, or updated with this fingerprint).
/// Returns the run id.
pub fn save(
    store: &Store,
    name: &str,
    fingerprint: &Fingerprint,
    outcome: &SweepOutcome,
    settings: &serde_json::Value,
) -> Result<i64, SweepError> {
    let conn = store.conn();
    let tx = conn.unchecked_transaction()?;
    let fp = serde_json::to_string(fingerprint)?;
    tx.execute(
        "INSERT INTO configuration (name, kind, host, fingerprint, created_ms) VALUES (?1, 'sweep', ?2, ?3, ?4)
         ON CONFLICT (name) DO UPDATE SET host = excluded.host, fingerprint = excluded.fingerprint",
        params![name, fingerprint.host, fp, outcome.started_ms],
    )?;
    let kind: String = tx.query_row(
        "SELECT kind FROM configuration WHERE name = ?1",
        [name],
        |r| r.get(0),
    )?;
    if kind != "sweep" {
        return Err(SweepError::ManualName {
            name: name.to_owned(),
        });
    }
    let config_id: i64 = tx.query_row(
        "SELECT id FROM configuration WHERE name = ?1",
        [name],
        |r| r.get(0),
    )?;
    let kinds: Vec<&str> = {
        let mut k: Vec<&str> = outcome.levels.iter().map(|l| l.kind.as_str()).collect();
        k.dedup();
        k
    };
    let fit = serde_json::to_string(&outcome.fits)?;
    // Each level's settle/measure split rides in the run's free-form settings.
    let mut settings = settings.clone();
    if let Some(obj) = settings.as_object_mut() {
        obj.insert(
            "level_timing".into(),
            outcome.levels.iter().map(LevelResult::timing).collect(),
        );
    }
    tx.execute(
        "INSERT INTO sweep_run (configuration_id, started_ms, ended_ms, status, kinds, meter, settings, fit)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            config_id,
            outcome.started_ms,
            outcome.ended_ms,
            if outcome.complete { "complete" } else { "partial" },
            kinds.join(","),
            fingerprint.meter,
            settings.to_string(),
            fit
        ],
    )?;
    let run_id = tx.last_insert_rowid();
    for l in &outcome.levels {
        insert_level(&tx, run_id, l)?;
    }
    tx.commit()?;
    Ok(run_id)
}

fn insert_level(
    tx: &rusqlite::Transaction<'_>,
    run_id: i64,
    l: &LevelResult,
) -> Result<(), SweepError> {
    tx.execute(
        "INSERT INTO sweep_level (run_id, kind, loops, started_ms, ended_ms, n, mean_w, sd_w, ci95_w, min_w, max_w,
                                  mean_mhz, busy, residency, ops_per_s, joules_per_op, warnings)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        params![
            run_id,
            l.kind.as_str(),
            l.loops as i64,
            l.started_ms,
            l.ended_ms,
            l.n as i64,
            l.mean_w,
            l.sd_w,
            l.ci95_w,
            l.min_w,
            l.max_w,
            l.mean_mhz,
            l.busy,
            serde_json::to_string(&l.residency)?,
            l.ops_per_s,
            l.joules_per_op,
            (!l.warnings.is_empty()).then(|| l.warnings.join("; "))
        ],
    )?;
    Ok(())
}

/// Names of the stored sweep configurations, newest run first.
pub fn list(store: &Store) -> Result<Vec<StoredSweep>, SweepError> {
    let names: Vec<String> = {
        let mut stmt = store.conn().prepare_cached(
            "SELECT c.name FROM configuration c JOIN sweep_run r ON r.configuration_id = c.id
             WHERE c.kind = 'sweep' GROUP BY c.id ORDER BY MAX(r.started_ms) DESC",
        )?;
        stmt.query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?
    };
    names
        .iter()
        .filter_map(|n| load(store, n).transpose())
        .collect()
}

/// The latest run of configuration `name`, preferring complete runs.
pub fn load(store: &Store, name: &str) -> Result<Option<StoredSweep>, SweepError> {
    let conn = store.conn();
    let row = conn
        .query_row(
            "SELECT c.name, c.host, c.fingerprint, r.id, r.started_ms, r.ended_ms, r.status, r.kinds, r.meter, r.fit,
                    r.settings
             FROM configuration c JOIN sweep_run r ON r.configuration_id = c.id
             WHERE c.name = ?1 ORDER BY (r.status = 'complete') DESC, r.started_ms DESC LIMIT 1",
            [name],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, String>(8)?,
                    r.get::<_, Option<String>>(9)?,
                    r.get::<_, Option<String>>(10)?,
                ))
            },
        )
        .optional()?;
    let Some((name, host, fp, run_id, started_ms, ended_ms, status, kinds, meter, fit, settings)) =
        row
    else {
        return Ok(None);
    };
    let mut stmt = conn.prepare_cached(
        "SELECT kind, loops, n, mean_w, sd_w, ci95_w, min_w, max_w, mean_mhz, busy, residency, ops_per_s, joules_per_op, warnings
         FROM sweep_level WHERE run_id = ?1 ORDER BY kind, loops",
    )?;
    let read = stmt
        .query_map([run_id], |r| {
            Ok(StoredLevel {
                kind: r.get(0)?,
                loops: r.get::<_, Option<i64>>(1)?.unwrap_or(-1),
                n: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                mean_w: r.get::<_, Option<f64>>(3)?.unwrap_or(f64::NAN),
                sd_w: r.get(4)?,
                ci95_w: r.get(5)?,
                min_w: r.get(6)?,
                max_w: r.get(7)?,
                mean_mhz: r.get(8)?,
                busy: r.get(9)?,
                residency: r
                    .get::<_, Option<String>>(10)?
                    .and_then(|s| serde_json::from_str(&s).ok()),
                ops_per_s: r.get(11)?,
                joules_per_op: r.get(12)?,
                warnings: r.get(13)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut set_aside = Vec::new();
    let mut levels = Vec::with_capacity(read.len());
    for l in read {
        match super::vouch::level(&l) {
            Ok(()) => levels.push(l),
            Err(why) => set_aside.push(format!(
                "its stored {} level {} (run {run_id}) is set aside: {why}",
                l.kind, l.loops
            )),
        }
    }
    let fit = fit
        .map(|text| super::vouch::fits_of(&text))
        .transpose()
        .unwrap_or_else(|why| {
            set_aside.push(format!(
                "its stored fit (run {run_id}) is set aside, and its figures come from its \
                 levels alone: {why}"
            ));
            None
        });
    // A configuration's name is one line of printable text (config::names); one a hand
    // wrote into the database with a line break would forge lines of every text report.
    if name.chars().any(char::is_control) {
        set_aside.push("its stored name holds control characters, shown as ?".to_owned());
    }
    Ok(Some(StoredSweep {
        name: name
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect(),
        host,
        fingerprint: fp.and_then(|s| serde_json::from_str(&s).ok()),
        run_id,
        started_ms,
        ended_ms,
        status,
        kinds,
        meter,
        settings: settings.and_then(|s| serde_json::from_str(&s).ok()),
        fit,
        levels,
        set_aside,
    }))
}

/// A fit of wall watts against one software-visible source (RAPL package, hwmon, GPU), made
/// during a sweep and stored in the `calibration` table: `wall = intercept + slope x
/// source`, with its error and the range of both it saw. It is a record of what the sweep
/// measured; the estimate reads it as a one-signal calibration model
/// (`calibration::swept`), as it reads a model fitted on ordinary running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// `source/channel`, e.g. `rapl/package-0`.
    pub source: String,
    pub intercept_w: f64,
    pub slope: f64,
    pub r2: f64,
    /// Root mean square of the residuals, W: the error of an estimate.
    pub rms_error_w: f64,
    pub levels: usize,
    /// Always true: these figures are estimates, not measurements at the wall.
    pub estimate: bool,
    /// The least and most the source read over the levels fitted, W (every reading, not
    /// the levels' means: a live reading is compared with it). Absent from rows stored
    /// before sweeps recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_range_w: Option<[f64; 2]>,
    /// The least and most the wall read over those levels, W; absent as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_range_w: Option<[f64; 2]>,
}

/// Fit wall watts against each component source seen in at least three levels, and store
/// the fits in the `calibration` table.
pub fn save_calibrations(
    store: &Store,
    host: &str,
    outcome: &SweepOutcome,
) -> Result<Vec<Calibration>, SweepError> {
    use std::collections::BTreeMap;
    /// One source's levels: its mean and the wall's, and the range of each.
    #[derive(Default)]
    struct Levels {
        x: Vec<f64>,
        y: Vec<f64>,
        source: Vec<Option<(f64, f64)>>,
        wall: Vec<(f64, f64)>,
    }
    /// The least and most of `ranges`, `None` where there are none.
    fn widest(ranges: impl Iterator<Item = (f64, f64)>) -> Option<[f64; 2]> {
        ranges.fold(None, |r, (lo, hi)| {
            Some(r.map_or([lo, hi], |[a, b]: [f64; 2]| [a.min(lo), b.max(hi)]))
        })
    }
    let mut by_source: BTreeMap<&str, Levels> = BTreeMap::new();
    for l in &outcome.levels {
        for (src, w) in &l.components {
            let e = by_source.entry(src.as_str()).or_default();
            e.x.push(*w);
            e.y.push(l.mean_w);
            e.source.push(l.component_ranges.get(src).copied());
            e.wall.push((l.min_w, l.max_w));
        }
    }
    let mut out = Vec::new();
    for (src, Levels { x, y, source, wall }) in by_source {
        if x.len() < 3 {
            continue;
        }
        // Only where every level fitted recorded the source's range.
        let source_range_w = source
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .and_then(|r| widest(r.into_iter()));
        let Ok(fit) = crate::analysis::fit::ols(&x, &y) else {
            continue;
        };
        let rms =
            (fit.residuals.iter().map(|r| r * r).sum::<f64>() / fit.residuals.len() as f64).sqrt();
        let cal = Calibration {
            source: src.to_owned(),
            intercept_w: fit.intercept,
            slope: fit.slope,
            r2: fit.r2,
            rms_error_w: rms,
            levels: x.len(),
            estimate: true,
            source_range_w,
            wall_range_w: source_range_w.and(widest(wall.into_iter())),
        };
        store.conn().execute(
            "INSERT OR REPLACE INTO calibration (host, source, fit, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![host, src, serde_json::to_string(&cal)?, outcome.ended_ms],
        )?;
        out.push(cal);
    }
    Ok(out)
}

/// The newest calibration of each source of `host`, with when it was stored (UTC ms, the
/// sweep's end), best first (smallest error).
pub fn latest_calibrations(
    store: &Store,
    host: &str,
) -> Result<Vec<(i64, Calibration)>, SweepError> {
    let mut stmt = store.conn().prepare_cached(
        "SELECT c.created_ms, c.fit FROM calibration c
         WHERE c.host = ?1
           AND c.created_ms = (SELECT MAX(created_ms) FROM calibration d
                               WHERE d.host = c.host AND d.source = c.source)",
    )?;
    let mut out: Vec<(i64, Calibration)> = stmt
        .query_map([host], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?
        .filter_map(Result::ok)
        .filter_map(
            |(at, text)| match serde_json::from_str::<Calibration>(&text) {
                Ok(c) if c.intercept_w.is_finite() && c.slope.is_finite() => Some((at, c)),
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(
                        "calibration of {host} not understood, skipped: {}",
                        wattson_collectors::ErrorChain(&e)
                    );
                    None
                }
            },
        )
        .collect();
    out.sort_by(|a, b| a.1.rms_error_w.total_cmp(&b.1.rms_error_w));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;
    use crate::sweep::outcome::LevelResult;
    use crate::sweep::workload::LoopKind;

    fn level(loops: usize, wall: f64, package: f64) -> LevelResult {
        LevelResult {
            kind: LoopKind::Spin,
            loops,
            started_ms: 0,
            ended_ms: 1,
            settle_s: 1.0,
            n: 30,
            mean_w: wall,
            sd_w: 1.0,
            ci95_w: 0.4,
            ci_method: "test".into(),
            min_w: wall - 1.0,
            max_w: wall + 1.0,
            mean_mhz: None,
            busy: None,
            busy_cpus: None,
            residency: std::collections::BTreeMap::new(),
            ops_per_s: 0.0,
            joules_per_op: None,
            components: [("rapl/package-0".to_owned(), package)]
                .into_iter()
                .collect(),
            component_ranges: [("rapl/package-0".to_owned(), (package - 0.5, package + 0.5))]
                .into_iter()
                .collect(),
            pinned: true,
            smt_siblings: false,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn wall_is_calibrated_against_rapl_and_stored_as_an_estimate() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("w.db"), &StoreOptions::default()).unwrap();
        // The wall reads 30 W more than the package (disks, PSU loss) plus 10 % of it.
        let outcome = SweepOutcome {
            levels: vec![
                level(0, 30.0 + 1.1 * 8.0, 8.0),
                level(1, 30.0 + 1.1 * 20.0, 20.0),
                level(2, 30.0 + 1.1 * 32.0, 32.0),
            ],
            fits: Vec::new(),
            complete: true,
            started_ms: 0,
            ended_ms: 5,
        };
        let cals = save_calibrations(&store, "basket", &outcome).unwrap();
        assert_eq!(cals.len(), 1);
        assert!((cals[0].intercept_w - 30.0).abs() < 1e-9 && (cals[0].slope - 1.1).abs() < 1e-9);
        assert!(cals[0].estimate);
        let stored: String = store
            .conn()
            .query_row(
                "SELECT fit FROM calibration WHERE host = 'basket' AND source = 'rapl/package-0'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(stored.contains("\"estimate\":true"), "{stored}");
        // The range it saw: every reading of the levels, the source's and the wall's.
        assert_eq!(cals[0].source_range_w, Some([7.5, 32.5]));
        let wall = cals[0].wall_range_w.unwrap();
        assert!(
            (wall[0] - 37.8).abs() < 1e-9 && (wall[1] - 66.2).abs() < 1e-9,
            "{wall:?}"
        );
        assert_eq!(
            latest_calibrations(&store, "basket").unwrap(),
            vec![(5, cals[0].clone())]
        );
        assert!(latest_calibrations(&store, "other").unwrap().is_empty());
    }

    #[test]
    fn a_level_without_the_sources_range_leaves_the_fit_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("w.db"), &StoreOptions::default()).unwrap();
        let mut levels = vec![
            level(0, 38.8, 8.0),
            level(1, 52.0, 20.0),
            level(2, 65.2, 32.0),
        ];
        levels[1].component_ranges.clear();
        let outcome = SweepOutcome {
            levels,
            fits: Vec::new(),
            complete: true,
            started_ms: 0,
            ended_ms: 5,
        };
        let cals = save_calibrations(&store, "basket", &outcome).unwrap();
        assert_eq!((cals[0].source_range_w, cals[0].wall_range_w), (None, None));
    }
}
