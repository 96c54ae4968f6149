//! `wattson idle --measure` runs and their measured effects in SQLite
//! (`schema/0007-idle-measure.sql`): read back by `wattson idle` and `wattson report`.

use rusqlite::{OptionalExtension as _, params};
use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError};

/// One measured setting. Watts are W; the interval a 95 % half-width.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    pub run_id: i64,
    pub host: String,
    /// The trial's id (`pcie_aspm`, `sata_alpm`, ...): `candidate` in the database and the
    /// JSON, as it always was.
    #[serde(rename = "candidate")]
    pub trial: String,
    /// `ASPM powersave`.
    pub name: String,
    pub original: String,
    pub changed: String,
    pub started_ms: i64,
    pub ended_ms: i64,
    /// Mean of the A phases (idle as it was).
    pub baseline_w: f64,
    /// Mean of the B phases (idle with the setting changed).
    pub changed_w: f64,
    /// changed - baseline, drift-cancelling weights (see `measure`); negative saves.
    pub delta_w: f64,
    pub delta_ci95_w: f64,
    /// Meter readings used.
    pub n: usize,
    /// The interval excludes zero: the meter can tell the difference.
    pub effect: bool,
    /// Each phase: `{"phase": "A"|"B", "mean_w", "ci95_w", "n", "settle_s"}`.
    pub phases: serde_json::Value,
}

fn sql(store: &Store, e: rusqlite::Error) -> StoreError {
    StoreError::Sqlite {
        path: store.path().to_owned(),
        source: e,
    }
}

/// Start a run; returns its id.
pub fn begin_run(
    store: &Store,
    host: &str,
    started_ms: i64,
    meter: &str,
    settings: &serde_json::Value,
) -> Result<i64, StoreError> {
    store
        .conn()
        .execute(
            "INSERT INTO idle_run (host, started_ms, status, meter, settings)
             VALUES (?1, ?2, 'running', ?3, ?4)",
            params![host, started_ms, meter, settings.to_string()],
        )
        .map_err(|e| sql(store, e))?;
    Ok(store.conn().last_insert_rowid())
}

/// End a run with `status` (`complete`, `interrupted`, `failed`).
pub fn end_run(store: &Store, run_id: i64, ended_ms: i64, status: &str) -> Result<(), StoreError> {
    store
        .conn()
        .execute(
            "UPDATE idle_run SET ended_ms = ?2, status = ?3 WHERE id = ?1",
            params![run_id, ended_ms, status],
        )
        .map_err(|e| sql(store, e))?;
    Ok(())
}

/// Store one measured effect.
pub fn save_effect(store: &Store, e: &Effect) -> Result<(), StoreError> {
    store
        .conn()
        .execute(
            "INSERT INTO idle_effect (run_id, host, candidate, name, original, changed,
                 started_ms, ended_ms, baseline_w, changed_w, delta_w, delta_ci95_w, n, effect,
                 detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                e.run_id,
                e.host,
                e.trial,
                e.name,
                e.original,
                e.changed,
                e.started_ms,
                e.ended_ms,
                e.baseline_w,
                e.changed_w,
                e.delta_w,
                e.delta_ci95_w,
                e.n as i64,
                i64::from(e.effect),
                e.phases.to_string()
            ],
        )
        .map_err(|e| sql(store, e))?;
    Ok(())
}

/// The newest effect of each candidate measured on `host` (every host when `None`), in
/// the order they were measured. A database older than the idle tables has none.
pub fn latest_effects(store: &Store, host: &str) -> Result<Vec<Effect>, StoreError> {
    let has_table: Option<i64> = store
        .conn()
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'idle_effect'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| sql(store, e))?;
    if has_table.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT run_id, host, candidate, name, original, changed, started_ms, ended_ms,
                    baseline_w, changed_w, delta_w, delta_ci95_w, n, effect, detail
             FROM idle_effect e
             WHERE host = ?1 AND id = (SELECT max(id) FROM idle_effect x
                                       WHERE x.host = e.host AND x.candidate = e.candidate)
             ORDER BY started_ms, id",
        )
        .map_err(|e| sql(store, e))?;
    let rows = stmt
        .query_map(params![host], |r| {
            Ok(Effect {
                run_id: r.get(0)?,
                host: r.get(1)?,
                trial: r.get(2)?,
                name: r.get(3)?,
                original: r.get(4)?,
                changed: r.get(5)?,
                started_ms: r.get(6)?,
                ended_ms: r.get(7)?,
                baseline_w: r.get(8)?,
                changed_w: r.get(9)?,
                delta_w: r.get(10)?,
                delta_ci95_w: r.get(11)?,
                n: r.get::<_, i64>(12)?.max(0) as usize,
                effect: r.get::<_, i64>(13)? != 0,
                phases: r
                    .get::<_, Option<String>>(14)?
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or(serde_json::Value::Null),
            })
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| sql(store, e))?;
    Ok(rows)
}

/// `-3.10 +/- 0.40 W`, or the words for an interval that covers zero.
pub fn describe_delta(e: &Effect) -> String {
    if e.effect {
        format!("{:+.2} +/- {:.2} W", e.delta_w, e.delta_ci95_w)
    } else {
        format!(
            "no effect that this meter can distinguish ({:+.2} +/- {:.2} W)",
            e.delta_w, e.delta_ci95_w
        )
    }
}
