//! Who woke the CPUs, stored per hour (`schema/0013-wakeup-hours.sql`): each window that
//! `wattson run` samples ([`crate::runtime::wakeups`]) adds its ranked wake-ups to the hours
//! it covers, and the report, `/metrics` and `wattson idle` read them back as rates over the
//! covered time.
//!
//! A window's groups beyond its top are summed as `(other)`, so an hour holds at most a few
//! times `top` names even when the services change. Task wake-ups and interrupts are kept
//! apart (see [`super::wakeups`]). Units: wake-ups, seconds, per second, UTC ms.

use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;

use super::wakeups::WakeupsView;
use crate::store::{HOUR_MS, Store, StoreError};

/// The name of what lies beyond a window's top.
pub const OTHER: &str = "(other)";

fn sql(store: &Store) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    |source| StoreError::Sqlite {
        path: store.path().to_owned(),
        source,
    }
}

/// The hours `[start, end)` covers, each with the share of the window that falls in it.
fn hour_shares(start_ms: i64, end_ms: i64) -> Vec<(i64, f64)> {
    let len = (end_ms - start_ms) as f64;
    if len <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut h = start_ms.div_euclid(HOUR_MS) * HOUR_MS;
    while h < end_ms {
        let part = (end_ms.min(h + HOUR_MS) - start_ms.max(h)) as f64;
        out.push((h, part / len));
        h += HOUR_MS;
    }
    out
}

/// Adds the window `view` that ended at `end_ms` to its hours, and deletes hours older than
/// `retention_ms`, in one transaction.
pub fn record(
    store: &Store,
    host: &str,
    end_ms: i64,
    view: &WakeupsView,
    retention_ms: i64,
) -> Result<(), StoreError> {
    if view.unavailable.is_some() || view.seconds <= 0.0 {
        return Ok(());
    }
    let s = view.seconds;
    let start_ms = end_ms - (s * 1000.0).round() as i64;
    let mut rows: Vec<(&str, String, f64)> = Vec::new();
    let listed_tasks: f64 = view.by_service.iter().map(|g| g.per_s).sum();
    for g in &view.by_service {
        rows.push(("task", g.group.clone(), g.per_s * s));
    }
    rows.push((
        "task",
        OTHER.to_owned(),
        (view.task_wakeups_per_s - listed_tasks).max(0.0) * s,
    ));
    let listed_irqs: f64 = view.interrupts.iter().map(|i| i.per_s).sum();
    for i in &view.interrupts {
        rows.push(("interrupt", i.label(), i.per_s * s));
    }
    rows.push((
        "interrupt",
        OTHER.to_owned(),
        (view.interrupts_per_s - listed_irqs).max(0.0) * s,
    ));
    let tx = store.conn().unchecked_transaction().map_err(sql(store))?;
    for (hour, share) in hour_shares(start_ms, end_ms) {
        tx.execute(
            "INSERT INTO wakeup_host_hour (host, hour_ms, seconds, task_wakeups, interrupts)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (host, hour_ms) DO UPDATE SET seconds = seconds + excluded.seconds,
                 task_wakeups = task_wakeups + excluded.task_wakeups,
                 interrupts = interrupts + excluded.interrupts",
            params![
                host,
                hour,
                s * share,
                view.task_wakeups_per_s * s * share,
                view.interrupts_per_s * s * share
            ],
        )
        .map_err(sql(store))?;
        for (kind, name, n) in rows.iter().filter(|r| r.2 > 0.0) {
            tx.execute(
                "INSERT INTO wakeup_hour (host, hour_ms, kind, name, wakeups)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (host, hour_ms, kind, name)
                 DO UPDATE SET wakeups = wakeups + excluded.wakeups",
                params![host, hour, kind, name, n * share],
            )
            .map_err(sql(store))?;
        }
    }
    let cutoff = end_ms.saturating_sub(retention_ms);
    tx.execute("DELETE FROM wakeup_hour WHERE hour_ms < ?1", [cutoff])
        .map_err(sql(store))?;
    tx.execute("DELETE FROM wakeup_host_hour WHERE hour_ms < ?1", [cutoff])
        .map_err(sql(store))?;
    tx.commit().map_err(sql(store))
}

/// One name's rate over the hours read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rate {
    /// A group label (`service:sshd.service`), an interrupt line's label, or `(other)`.
    pub name: String,
    pub per_s: f64,
    /// Of every task's wake-ups (or every interrupt), 0..1.
    pub share: f64,
}

/// Who woke the CPUs over the stored hours of a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredWakeups {
    /// Seconds the sampled windows covered.
    pub seconds: f64,
    /// Hours with any.
    pub hours: usize,
    pub task_wakeups_per_s: f64,
    pub interrupts_per_s: f64,
    /// The groups that woke most, most first (`(other)` last where it is among them).
    pub by_service: Vec<Rate>,
    pub interrupts: Vec<Rate>,
}

/// The stored wake-ups of `host` in the hours starting in `[from_ms, to_ms)`, `top` per
/// kind; `None` where none are stored (or the database predates the table).
pub fn load(
    store: &Store,
    host: &str,
    from_ms: i64,
    to_ms: i64,
    top: usize,
) -> Result<Option<StoredWakeups>, StoreError> {
    let has_table: Option<i64> = store
        .conn()
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'wakeup_hour'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql(store))?;
    if has_table.is_none() {
        return Ok(None);
    }
    let (seconds, hours, tasks, irqs): (f64, i64, f64, f64) = store
        .conn()
        .query_row(
            "SELECT coalesce(sum(seconds), 0), count(*), coalesce(sum(task_wakeups), 0),
                    coalesce(sum(interrupts), 0)
             FROM wakeup_host_hour WHERE host = ?1 AND hour_ms >= ?2 AND hour_ms < ?3",
            params![host, from_ms, to_ms],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .map_err(sql(store))?;
    if seconds <= 0.0 {
        return Ok(None);
    }
    let ranked = |kind: &str, total: f64| -> Result<Vec<Rate>, StoreError> {
        let mut stmt = store
            .conn()
            .prepare_cached(
                "SELECT name, sum(wakeups) AS n FROM wakeup_hour
                 WHERE host = ?1 AND kind = ?2 AND hour_ms >= ?3 AND hour_ms < ?4
                 GROUP BY name ORDER BY (name = ?5), n DESC, name LIMIT ?6",
            )
            .map_err(sql(store))?;
        stmt.query_map(
            params![host, kind, from_ms, to_ms, OTHER, top as i64],
            |r| {
                let n: f64 = r.get(1)?;
                Ok(Rate {
                    name: r.get(0)?,
                    per_s: n / seconds,
                    share: if total > 0.0 { n / total } else { 0.0 },
                })
            },
        )
        .and_then(Iterator::collect)
        .map_err(sql(store))
    };
    Ok(Some(StoredWakeups {
        seconds,
        hours: usize::try_from(hours).unwrap_or(0),
        task_wakeups_per_s: tasks / seconds,
        interrupts_per_s: irqs / seconds,
        by_service: ranked("task", tasks)?,
        interrupts: ranked("interrupt", irqs)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::wakeups::{GroupEntry, InterruptEntry};
    use super::*;

    fn view(seconds: f64) -> WakeupsView {
        WakeupsView {
            seconds,
            tasks_from: String::new(),
            interrupts_from: String::new(),
            task_wakeups_per_s: 1000.0,
            threads: 5,
            truncated: false,
            by_service: vec![
                GroupEntry {
                    group: "service:jellyfin.service".into(),
                    per_s: 800.0,
                    share: 0.8,
                    processes: vec!["jellyfin".into()],
                },
                GroupEntry {
                    group: "service:sshd.service".into(),
                    per_s: 150.0,
                    share: 0.15,
                    processes: vec!["sshd".into()],
                },
            ],
            by_process: Vec::new(),
            interrupts_per_s: 1400.0,
            interrupts: vec![InterruptEntry {
                irq: "LOC".into(),
                kernel: true,
                name: "Local timer interrupts".into(),
                per_s: 1000.0,
                share: 1000.0 / 1400.0,
            }],
            interrupts_unavailable: None,
            unavailable: None,
        }
    }

    #[test]
    fn windows_add_to_the_hours_they_cover_and_read_back_as_rates() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &dir.path().join("w.db"),
            &crate::store::StoreOptions::default(),
        )
        .unwrap();
        let t0 = 1_764_547_200_000; // an hour boundary
        // Two minute-long windows, the second across the hour's end.
        record(&store, "h", t0 + 60_000, &view(60.0), i64::MAX).unwrap();
        record(&store, "h", t0 + HOUR_MS + 30_000, &view(60.0), i64::MAX).unwrap();
        let w = load(&store, "h", t0, t0 + 2 * HOUR_MS, 10)
            .unwrap()
            .unwrap();
        assert_eq!((w.seconds, w.hours), (120.0, 2));
        assert!((w.task_wakeups_per_s - 1000.0).abs() < 1e-9);
        let names: Vec<(&str, f64)> = w
            .by_service
            .iter()
            .map(|r| (r.name.as_str(), (r.share * 1000.0).round() / 1000.0))
            .collect();
        assert_eq!(
            names,
            vec![
                ("service:jellyfin.service", 0.8),
                ("service:sshd.service", 0.15),
                (OTHER, 0.05)
            ]
        );
        assert_eq!(w.interrupts[0].name, "LOC (Local timer interrupts)");
        // The first hour alone: one and a half windows.
        let first = load(&store, "h", t0, t0 + HOUR_MS, 10).unwrap().unwrap();
        assert!((first.seconds - 90.0).abs() < 1e-9, "{first:?}");
        assert_eq!(load(&store, "other", t0, t0 + HOUR_MS, 10).unwrap(), None);
        // Retention: the first hour goes.
        record(&store, "h", t0 + 3 * HOUR_MS, &view(1.0), HOUR_MS + 1).unwrap();
        assert_eq!(load(&store, "h", t0, t0 + HOUR_MS, 10).unwrap(), None);
    }
}
