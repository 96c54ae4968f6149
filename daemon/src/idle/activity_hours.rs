//! What kept the machine awake, hour by hour, as `wattson run` stored it: each service's
//! wake-ups per stored hour (`schema/0013-wakeup-hours.sql`, as rates over the seconds the
//! windows covered) and each disk spin-up with who woke it (`schema/0015-disks.sql`), for
//! the hours of the week idle enough to sleep ([`crate::analysis::sleep`]).
//!
//! Units: UTC ms, wake-ups per second.

use rusqlite::{OptionalExtension as _, params};

use super::wakeup_hours::OTHER;
use crate::store::{Store, StoreError};

fn sql(store: &Store) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    |source| StoreError::Sqlite {
        path: store.path().to_owned(),
        source,
    }
}

fn has_table(store: &Store, name: &str) -> Result<bool, StoreError> {
    let one: Option<i64> = store
        .conn()
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql(store))?;
    Ok(one.is_some())
}

/// A stored hour's start (UTC ms) and each service's wake-ups per second in it.
pub type HourRates = (i64, Vec<(String, f64)>);

/// Each stored hour of `host` starting in `[from_ms, to_ms)`: its start and each service's
/// wake-ups per second of the seconds its windows covered (`(other)` left out: it names
/// no one). Hours without covered seconds are left out.
pub fn wakeups_by_hour(
    store: &Store,
    host: &str,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<HourRates>, StoreError> {
    if !has_table(store, "wakeup_hour")? {
        return Ok(Vec::new());
    }
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT h.hour_ms, w.name, w.wakeups / h.seconds FROM wakeup_host_hour h
             JOIN wakeup_hour w ON w.host = h.host AND w.hour_ms = h.hour_ms
             WHERE h.host = ?1 AND h.hour_ms >= ?2 AND h.hour_ms < ?3 AND h.seconds > 0
               AND w.kind = 'task' AND w.name != ?4
             ORDER BY h.hour_ms, w.name",
        )
        .map_err(sql(store))?;
    let rows = stmt
        .query_map(params![host, from_ms, to_ms, OTHER], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, f64>(2)?,
            ))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(sql(store))?;
    let mut out: Vec<HourRates> = Vec::new();
    for (hour, name, rate) in rows {
        match out.last_mut() {
            Some((h, list)) if *h == hour => list.push((name, rate)),
            _ => out.push((hour, vec![(name, rate)])),
        }
    }
    Ok(out)
}

/// Each disk spin-up of `host` in `[from_ms, to_ms)`: (when, disk, who woke it).
pub fn spinups(
    store: &Store,
    host: &str,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<(i64, String, String)>, StoreError> {
    if !has_table(store, "disk_spinup")? {
        return Ok(Vec::new());
    }
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT ts_ms, disk, culprit FROM disk_spinup
             WHERE host = ?1 AND ts_ms >= ?2 AND ts_ms < ?3 ORDER BY ts_ms",
        )
        .map_err(sql(store))?;
    stmt.query_map(params![host, from_ms, to_ms], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
    .and_then(Iterator::collect)
    .map_err(sql(store))
}
