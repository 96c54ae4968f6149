//! The services tables (`schema/0009-services.sql`): each [`Interval`] added to its UTC hour
//! (at most [`max_groups_per_hour`] groups an hour by name, the rest in `other`), the newest
//! interval kept as "now", and hours older than the retention dropped with the groups no
//! hour names any more. Reading them back for [`super::estimate`].

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};

use super::account::{GroupKey, Interval};
use crate::store::{HOUR_MS, Store, StoreError, floor_to};

/// Groups stored by name per host-hour: twice the per-interval top (the top changes within
/// an hour), plus `other`, `rest` and `self`.
pub fn max_groups_per_hour(top: usize) -> usize {
    2 * top + 3
}

fn sql(store: &Store) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        path: store.path().to_owned(),
        source,
    }
}

/// Adds `interval` to its hour for `host`, replaces the host's "now", and, at the first
/// interval of an hour, drops hours older than `retention_ms` before it (with the groups no
/// hour names any more).
pub fn record(
    store: &Store,
    host: &str,
    interval: &Interval,
    top: usize,
    retention_ms: i64,
) -> Result<(), StoreError> {
    let err = sql(store);
    let tx = store.conn().unchecked_transaction().map_err(&err)?;
    let hour = floor_to(interval.ts_ms, HOUR_MS);
    let metered = interval.wall_w.is_some();
    let wall = interval.wall_w.unwrap_or(0.0);
    let metered_s = if metered { interval.elapsed_s } else { 0.0 };
    // The first interval of an hour prunes: once an hour, not at every poll.
    let new_hour = !exists(
        &tx,
        "SELECT 1 FROM service_host_hour WHERE host = ?1 AND hour_ms = ?2",
        params![host, hour],
    )
    .map_err(&err)?;
    exec(&tx,
        "INSERT INTO service_host_hour (host, hour_ms, elapsed_s, busy_cpu_s, metered_s, wall_ws)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (host, hour_ms) DO UPDATE SET
           elapsed_s = elapsed_s + excluded.elapsed_s, busy_cpu_s = busy_cpu_s + excluded.busy_cpu_s,
           metered_s = metered_s + excluded.metered_s, wall_ws = wall_ws + excluded.wall_ws",
        params![host, hour, interval.elapsed_s, interval.busy_cpu_s, metered_s, wall * metered_s],
    )
    .map_err(&err)?;
    let mut in_hour: i64 = row(
        &tx,
        "SELECT count(*) FROM service_hour h JOIN service_group g ON g.id = h.group_id
         WHERE g.host = ?1 AND h.hour_ms = ?2",
        params![host, hour],
        |r| r.get(0),
    )
    .map_err(&err)?;
    let cap = i64::try_from(max_groups_per_hour(top)).unwrap_or(i64::MAX);
    let other = GroupKey::new("other", "");
    // Past the hour's cap, a group not yet in the hour is added to `other`.
    let mut rows: BTreeMap<GroupKey, f64> = BTreeMap::new();
    for (key, cpu_s) in &interval.groups {
        *rows.entry(key.clone()).or_default() += cpu_s;
    }
    for (key, cpu_s) in rows.clone() {
        let special = matches!(key.kind.as_str(), "other" | "rest" | "self");
        let id = group_id(&tx, host, &key).map_err(&err)?;
        let present = match id {
            Some(id) => exists(
                &tx,
                "SELECT 1 FROM service_hour WHERE group_id = ?1 AND hour_ms = ?2",
                params![id, hour],
            )
            .map_err(&err)?,
            None => false,
        };
        if !special && !present && in_hour >= cap - 3 {
            rows.remove(&key);
            *rows.entry(other.clone()).or_default() += cpu_s;
        } else if !present {
            in_hour += i64::from(!special);
        }
    }
    exec(&tx, "DELETE FROM service_latest WHERE host = ?1", [host]).map_err(&err)?;
    for (key, cpu_s) in &rows {
        let share_s = if metered {
            interval.share(key, *cpu_s) * interval.elapsed_s
        } else {
            0.0
        };
        exec(
            &tx,
            "INSERT INTO service_group (host, kind, name) VALUES (?1, ?2, ?3)
             ON CONFLICT (host, kind, name) DO NOTHING",
            params![host, key.kind, key.name],
        )
        .map_err(&err)?;
        exec(&tx,
            "INSERT INTO service_hour (group_id, hour_ms, cpu_s, metered_share_s, metered_share_ws)
             SELECT id, ?4, ?5, ?6, ?7 FROM service_group WHERE host = ?1 AND kind = ?2 AND name = ?3
             ON CONFLICT (group_id, hour_ms) DO UPDATE SET
               cpu_s = cpu_s + excluded.cpu_s,
               metered_share_s = metered_share_s + excluded.metered_share_s,
               metered_share_ws = metered_share_ws + excluded.metered_share_ws",
            params![host, key.kind, key.name, hour, cpu_s, share_s, share_s * wall],
        )
        .map_err(&err)?;
        exec(&tx,
            "INSERT INTO service_latest (host, kind, name, ts_ms, elapsed_s, cpu_s, busy_cpu_s, wall_w)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                host,
                key.kind,
                key.name,
                interval.ts_ms,
                interval.elapsed_s,
                cpu_s,
                interval.busy_cpu_s,
                interval.wall_w
            ],
        )
        .map_err(&err)?;
    }
    if new_hour {
        prune(&tx, host, interval.ts_ms - retention_ms).map_err(&err)?;
    }
    tx.commit().map_err(&err)
}

/// `execute` through the connection's statement cache: `record` runs every services poll.
fn exec(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// `query_row` through the connection's statement cache.
fn row<T>(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

/// Whether `sql` finds a row (through the statement cache).
fn exists(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<bool> {
    row(conn, sql, params, |_| Ok(()))
        .optional()
        .map(|found| found.is_some())
}

fn group_id(
    tx: &rusqlite::Transaction<'_>,
    host: &str,
    key: &GroupKey,
) -> rusqlite::Result<Option<i64>> {
    row(
        tx,
        "SELECT id FROM service_group WHERE host = ?1 AND kind = ?2 AND name = ?3",
        params![host, key.kind, key.name],
        |r| r.get(0),
    )
    .optional()
}

/// Drops `host`'s hours that end before `before_ms`, and groups no hour names any more.
fn prune(tx: &rusqlite::Transaction<'_>, host: &str, before_ms: i64) -> rusqlite::Result<()> {
    let cutoff = floor_to(before_ms, HOUR_MS);
    exec(
        tx,
        "DELETE FROM service_host_hour WHERE host = ?1 AND hour_ms < ?2",
        params![host, cutoff],
    )?;
    exec(
        tx,
        "DELETE FROM service_hour WHERE hour_ms < ?2
           AND group_id IN (SELECT id FROM service_group WHERE host = ?1)",
        params![host, cutoff],
    )?;
    exec(
        tx,
        "DELETE FROM service_group WHERE host = ?1
           AND NOT EXISTS (SELECT 1 FROM service_hour h WHERE h.group_id = service_group.id)",
        [host],
    )?;
    Ok(())
}

/// One group's sums over a window of hours.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupSums {
    pub cpu_s: f64,
    pub metered_share_s: f64,
    pub metered_share_ws: f64,
    /// Per hour: (hour, metered_share_s, metered_share_ws), for pricing each at its time.
    pub hours: Vec<(i64, f64, f64)>,
}

/// The host's sums over a window of hours.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostSums {
    pub elapsed_s: f64,
    pub busy_cpu_s: f64,
    pub metered_s: f64,
    pub wall_ws: f64,
    /// Per hour: (hour, metered_s, wall_ws).
    pub hours: Vec<(i64, f64, f64)>,
}

/// The host's and each group's sums over the hours starting in `[from_ms, to_ms)`.
pub fn window(
    store: &Store,
    host: &str,
    from_ms: i64,
    to_ms: i64,
) -> Result<(HostSums, BTreeMap<GroupKey, GroupSums>), StoreError> {
    let err = sql(store);
    let conn = store.conn();
    let mut host_sums = HostSums::default();
    let mut stmt = conn
        .prepare_cached(
            "SELECT hour_ms, elapsed_s, busy_cpu_s, metered_s, wall_ws FROM service_host_hour
             WHERE host = ?1 AND hour_ms >= ?2 AND hour_ms < ?3 ORDER BY hour_ms",
        )
        .map_err(&err)?;
    let rows = stmt
        .query_map(params![host, from_ms, to_ms], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, f64>(1)?,
                r.get::<_, f64>(2)?,
                r.get::<_, f64>(3)?,
                r.get::<_, f64>(4)?,
            ))
        })
        .map_err(&err)?;
    for row in rows {
        let (hour, elapsed, busy, metered, wall) = row.map_err(&err)?;
        host_sums.elapsed_s += elapsed;
        host_sums.busy_cpu_s += busy;
        host_sums.metered_s += metered;
        host_sums.wall_ws += wall;
        host_sums.hours.push((hour, metered, wall));
    }
    let mut groups: BTreeMap<GroupKey, GroupSums> = BTreeMap::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT g.kind, g.name, h.hour_ms, h.cpu_s, h.metered_share_s, h.metered_share_ws
             FROM service_hour h JOIN service_group g ON g.id = h.group_id
             WHERE g.host = ?1 AND h.hour_ms >= ?2 AND h.hour_ms < ?3 ORDER BY h.hour_ms",
        )
        .map_err(&err)?;
    let rows = stmt
        .query_map(params![host, from_ms, to_ms], |r| {
            Ok((
                GroupKey {
                    kind: r.get(0)?,
                    name: r.get(1)?,
                },
                r.get::<_, i64>(2)?,
                r.get::<_, f64>(3)?,
                r.get::<_, f64>(4)?,
                r.get::<_, f64>(5)?,
            ))
        })
        .map_err(&err)?;
    for row in rows {
        let (key, hour, cpu, seconds, watt_seconds) = row.map_err(&err)?;
        let g = groups.entry(key).or_default();
        g.cpu_s += cpu;
        g.metered_share_s += seconds;
        g.metered_share_ws += watt_seconds;
        g.hours.push((hour, seconds, watt_seconds));
    }
    Ok((host_sums, groups))
}

/// The host's newest interval: its end (UTC ms), length (s), busy CPU time (s), wall mean
/// (W), and each group's CPU time (s).
#[derive(Debug, Clone, PartialEq)]
pub struct Latest {
    pub ts_ms: i64,
    pub elapsed_s: f64,
    pub busy_cpu_s: f64,
    pub wall_w: Option<f64>,
    pub groups: Vec<(GroupKey, f64)>,
}

/// The host's newest interval, if any was stored.
pub fn latest(store: &Store, host: &str) -> Result<Option<Latest>, StoreError> {
    let err = sql(store);
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT kind, name, ts_ms, elapsed_s, cpu_s, busy_cpu_s, wall_w FROM service_latest
             WHERE host = ?1 ORDER BY cpu_s DESC, kind, name",
        )
        .map_err(&err)?;
    let mut out: Option<Latest> = None;
    let rows = stmt
        .query_map([host], |r| {
            Ok((
                GroupKey {
                    kind: r.get(0)?,
                    name: r.get(1)?,
                },
                r.get::<_, i64>(2)?,
                r.get::<_, f64>(3)?,
                r.get::<_, f64>(4)?,
                r.get::<_, f64>(5)?,
                r.get::<_, Option<f64>>(6)?,
            ))
        })
        .map_err(&err)?;
    for row in rows {
        let (key, ts_ms, elapsed_s, cpu_s, busy_cpu_s, wall_w) = row.map_err(&err)?;
        out.get_or_insert(Latest {
            ts_ms,
            elapsed_s,
            busy_cpu_s,
            wall_w,
            groups: Vec::new(),
        })
        .groups
        .push((key, cpu_s));
    }
    Ok(out)
}

/// Rows in the services tables (all hosts): what the size budget counts.
pub fn row_counts(store: &Store) -> Result<(i64, i64), StoreError> {
    let err = sql(store);
    let count = |table: &str| -> Result<i64, StoreError> {
        store
            .conn()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .map_err(&err)
    };
    Ok((count("service_group")?, count("service_hour")?))
}
