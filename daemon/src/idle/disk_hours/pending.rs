//! What `wattson run` stores of a disk's spin state: each reading's spans added to the hours
//! they cover (seconds spun up, seconds covered, spin-ups) and each spin-up with who woke it,
//! kept until they are stored in one transaction that also deletes what is past retention.
//! Reading them back is the parent module's.
//!
//! Units: seconds, UTC ms.

use std::collections::BTreeMap;

use rusqlite::params;
use wattson_collectors::idle::disks::SpinSource;
use wattson_collectors::idle::disks::tracker::Step;

use super::sql;
use crate::store::{HOUR_MS, Store, StoreError};

/// What a disk's readings added since they were last stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pending {
    /// Per hour: seconds spun up, seconds covered, spin-ups.
    pub hours: BTreeMap<i64, (f64, f64, i64)>,
    /// Each spin-up: when, who woke it, and their reads and writes.
    pub spinups: Vec<(i64, String, u64)>,
}

impl Pending {
    /// Adds one reading's step, and its spin-up (when, who, how many I/Os) if it saw one.
    pub fn add(&mut self, step: &Step, spinup: Option<(i64, String, u64)>) {
        for s in &step.spans {
            let mut h = s.from_ms.div_euclid(HOUR_MS) * HOUR_MS;
            while h < s.to_ms {
                let part = (s.to_ms.min(h + HOUR_MS) - s.from_ms.max(h)) as f64 / 1000.0;
                let e = self.hours.entry(h).or_default();
                e.1 += part;
                if s.up {
                    e.0 += part;
                }
                h += HOUR_MS;
            }
        }
        if let Some((ts, who, ios)) = spinup {
            self.hours
                .entry(ts.div_euclid(HOUR_MS) * HOUR_MS)
                .or_default()
                .2 += 1;
            self.spinups.push((ts, who, ios));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hours.is_empty() && self.spinups.is_empty()
    }
}

/// Where a disk's figures come from and what it is.
#[derive(Debug, Clone, Copy)]
pub struct DiskKey<'a> {
    pub host: &'a str,
    pub disk: &'a str,
    pub source: SpinSource,
    pub spun_up_watts: Option<f64>,
}

/// Adds `pending` to the disk's hours and spin-ups, and deletes both older than
/// `retention_ms` before `now_ms`, in one transaction.
pub fn record(
    store: &Store,
    key: DiskKey<'_>,
    pending: &Pending,
    now_ms: i64,
    retention_ms: i64,
) -> Result<(), StoreError> {
    let tx = store.conn().unchecked_transaction().map_err(sql(store))?;
    for (hour, (up, covered, spinups)) in &pending.hours {
        tx.execute(
            "INSERT INTO disk_hour (host, disk, hour_ms, up_s, covered_s, spinups, source,
                                    spun_up_watts)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (host, disk, hour_ms) DO UPDATE SET up_s = up_s + excluded.up_s,
                 covered_s = covered_s + excluded.covered_s,
                 spinups = spinups + excluded.spinups, source = excluded.source,
                 spun_up_watts = excluded.spun_up_watts",
            params![
                key.host,
                key.disk,
                hour,
                up,
                covered,
                spinups,
                key.source.as_str(),
                key.spun_up_watts
            ],
        )
        .map_err(sql(store))?;
    }
    for (ts, who, ios) in &pending.spinups {
        tx.execute(
            "INSERT OR REPLACE INTO disk_spinup (host, disk, ts_ms, culprit, ios)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                key.host,
                key.disk,
                ts,
                who,
                i64::try_from(*ios).unwrap_or(i64::MAX)
            ],
        )
        .map_err(sql(store))?;
    }
    let cutoff = now_ms.saturating_sub(retention_ms);
    tx.execute("DELETE FROM disk_hour WHERE hour_ms < ?1", [cutoff])
        .map_err(sql(store))?;
    tx.execute("DELETE FROM disk_spinup WHERE ts_ms < ?1", [cutoff])
        .map_err(sql(store))?;
    tx.commit().map_err(sql(store))
}
