//! Each disk's spin state, stored per hour (`schema/0015-disks.sql`) by `wattson run`
//! ([`crate::runtime::disks`]), and read back for `wattson idle`, the report and `/metrics`:
//! spin-ups per day, spun-up hours per day, who woke it, and what its spun-up time costs a
//! year at the configured datasheet watts. What `wattson run` adds each hour, and the
//! retention, are `pending`'s.
//!
//! Units: seconds, W, kWh, the tariff's currency, UTC ms.

use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;
use wattson_collectors::idle::disks::SpinSource;

use crate::ledger::price::{annual_cost, format_money};
use crate::store::{HOUR_MS, Store, StoreError};
use crate::tariff::Tariff;

mod pending;

pub use pending::{DiskKey, Pending, record};

fn sql(store: &Store) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    |source| StoreError::Sqlite {
        path: store.path().to_owned(),
        source,
    }
}

/// Who woke a disk: a group's spin-ups and their share of all of the disk's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Woke {
    /// `service:backup.service`, `process:rsync` (without cgroup v2), `(tie: ...)`,
    /// `(none seen)`.
    pub name: String,
    pub spinups: u64,
    /// 0..1.
    pub share: f64,
}

/// One disk's stored spin state over a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredDisk {
    pub disk: String,
    /// `sysfs` or `inferred` (the newest hour's).
    pub source: String,
    /// In words: `sysfs runtime PM status`, `inferred from I/O and standby_after`.
    pub source_words: String,
    /// Seconds the spin state was known, and spun up.
    pub covered_s: f64,
    pub up_s: f64,
    /// Spun-up share of the covered time, 0..1.
    pub up_share: f64,
    pub spinups: u64,
    pub spinups_per_day: f64,
    pub up_hours_per_day: f64,
    /// Who woke it, most first.
    pub woke_by: Vec<Woke>,
    /// The disk's watts spun up above standby: measured at the wall by `wattson idle
    /// --measure --only disk_standby:DISK` where it was (the newest measurement), else the
    /// datasheet's (the newest hour's `[[disk]] spun_up_watts`).
    pub spun_up_watts: Option<f64>,
    /// The measured watts' 95 % half-width (`None` for a datasheet figure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spun_up_watts_ci95: Option<f64>,
    /// `measured` or `datasheet`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watts_source: Option<&'static str>,
    /// Where those watts come from, in words.
    pub watts_from: Option<String>,
    /// Spun-up watts times the spun-up share, averaged over the hours with watts, W.
    pub mean_watts: Option<f64>,
    /// A year of that, and its cost at the tariff (no standing charge).
    pub annual_kwh: Option<f64>,
    pub annual_cost: Option<f64>,
}

fn has_table(store: &Store) -> Result<bool, StoreError> {
    let one: Option<i64> = store
        .conn()
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'disk_hour'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql(store))?;
    Ok(one.is_some())
}

/// Each disk of `host` with hours starting in `[from_ms, to_ms)`, by name; unpriced
/// ([`price`] adds the money). Empty where none are stored or the table predates them.
pub fn load(
    store: &Store,
    host: &str,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<StoredDisk>, StoreError> {
    if !has_table(store)? {
        return Ok(Vec::new());
    }
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT disk, sum(covered_s), sum(up_s), sum(spinups),
                    sum(CASE WHEN spun_up_watts IS NULL THEN 0 ELSE up_s * spun_up_watts END),
                    sum(CASE WHEN spun_up_watts IS NULL THEN 0 ELSE covered_s END),
                    (SELECT source FROM disk_hour n WHERE n.host = h.host AND n.disk = h.disk
                     ORDER BY hour_ms DESC LIMIT 1),
                    (SELECT spun_up_watts FROM disk_hour n WHERE n.host = h.host
                     AND n.disk = h.disk ORDER BY hour_ms DESC LIMIT 1)
             FROM disk_hour h WHERE host = ?1 AND hour_ms >= ?2 AND hour_ms < ?3
             GROUP BY disk ORDER BY disk",
        )
        .map_err(sql(store))?;
    let rows = stmt
        .query_map(params![host, from_ms, to_ms], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, f64>(1)?,
                r.get::<_, f64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, f64>(4)?,
                r.get::<_, f64>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, Option<f64>>(7)?,
            ))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(sql(store))?;
    let measured = measured_watts(store, host)?;
    let mut out = Vec::new();
    for (disk, covered, up, spinups, watt_s, watt_covered, source, watts) in rows {
        if covered <= 0.0 {
            continue;
        }
        let (watts, ci95, watts_source, watts_from, mean_watts) = match measured.get(&disk) {
            Some(m) => (
                Some(m.watts),
                Some(m.ci95),
                Some("measured"),
                Some(format!(
                    "measured at the wall by `wattson idle --measure` on {}, +/- {:.1} W",
                    m.on, m.ci95
                )),
                Some(m.watts * up / covered),
            ),
            None => (
                watts,
                None,
                watts.map(|_| "datasheet"),
                watts.map(|_| {
                    "the datasheet figure in [[disk]] spun_up_watts, not measured".to_owned()
                }),
                (watt_covered > 0.0).then(|| watt_s / watt_covered),
            ),
        };
        let spinups = u64::try_from(spinups).unwrap_or(0);
        let woke_by = woke_by(store, host, &disk, (from_ms, to_ms + HOUR_MS), spinups)?;
        let source_words =
            SpinSource::parse(&source).map_or_else(|| source.clone(), |s| s.describe().to_owned());
        out.push(StoredDisk {
            up_share: up / covered,
            spinups_per_day: spinups as f64 / covered * 86_400.0,
            up_hours_per_day: up / covered * 24.0,
            woke_by,
            watts_from,
            mean_watts,
            spun_up_watts: watts,
            spun_up_watts_ci95: ci95,
            watts_source,
            disk,
            source,
            source_words,
            covered_s: covered,
            up_s: up,
            spinups,
            annual_kwh: None,
            annual_cost: None,
        });
    }
    Ok(out)
}

/// A disk's watts spun up above standby, measured at the wall.
struct Measured {
    watts: f64,
    ci95: f64,
    /// The day it was measured (UTC).
    on: String,
}

/// The newest standby measurement of each disk of `host` that the meter could tell from
/// zero (its interval excludes it) and that saved: what spinning costs.
fn measured_watts(
    store: &Store,
    host: &str,
) -> Result<std::collections::BTreeMap<String, Measured>, StoreError> {
    Ok(super::store::latest_effects(store, host)?
        .into_iter()
        .filter(|e| e.effect && e.delta_w < 0.0)
        .filter_map(|e| {
            let disk = super::trials::standby_disk(&e.trial)?.to_owned();
            let on = chrono::DateTime::from_timestamp_millis(e.ended_ms)?
                .format("%Y-%m-%d")
                .to_string();
            Some((
                disk,
                Measured {
                    watts: -e.delta_w,
                    ci95: e.delta_ci95_w,
                    on,
                },
            ))
        })
        .collect())
}

/// The disk's spin-ups in the window by who woke it, most first.
fn woke_by(
    store: &Store,
    host: &str,
    disk: &str,
    (from_ms, to_ms): (i64, i64),
    total: u64,
) -> Result<Vec<Woke>, StoreError> {
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT culprit, count(*) AS n FROM disk_spinup
             WHERE host = ?1 AND disk = ?2 AND ts_ms >= ?3 AND ts_ms < ?4
             GROUP BY culprit ORDER BY n DESC, culprit",
        )
        .map_err(sql(store))?;
    let rows = stmt
        .query_map(params![host, disk, from_ms, to_ms], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(sql(store))?;
    let all: u64 = rows
        .iter()
        .map(|r| u64::try_from(r.1).unwrap_or(0))
        .sum::<u64>()
        .max(total);
    Ok(rows
        .into_iter()
        .map(|(name, n)| {
            let n = u64::try_from(n).unwrap_or(0);
            Woke {
                name,
                spinups: n,
                share: if all > 0 { n as f64 / all as f64 } else { 0.0 },
            }
        })
        .collect())
}

/// Each disk of `disks` with watts, with its spun-up share of hour `now_ms` and of hour
/// `best_ms` (0 where the hour has none stored): the disks' part in the gap
/// ([`super::gap::explain`]).
pub fn spins(
    store: &Store,
    host: &str,
    disks: &[StoredDisk],
    (now_ms, best_ms): (i64, i64),
) -> Result<Vec<super::gap::DiskSpin>, StoreError> {
    if !has_table(store)? {
        return Ok(Vec::new());
    }
    let mut stmt = store
        .conn()
        .prepare_cached(
            "SELECT CASE WHEN covered_s > 0 THEN up_s / covered_s ELSE 0 END FROM disk_hour
             WHERE host = ?1 AND disk = ?2 AND hour_ms = ?3",
        )
        .map_err(sql(store))?;
    let mut out = Vec::new();
    for d in disks {
        let Some(watts) = d.spun_up_watts else {
            continue;
        };
        let mut share = |hour: i64| -> Result<f64, StoreError> {
            Ok(stmt
                .query_row(params![host, d.disk, hour], |r| r.get::<_, f64>(0))
                .optional()
                .map_err(sql(store))?
                .unwrap_or(0.0))
        };
        out.push(super::gap::DiskSpin {
            disk: d.disk.clone(),
            watts,
            watts_ci95: d.spun_up_watts_ci95.unwrap_or(0.0),
            watts_from: d.watts_from.clone().unwrap_or_default(),
            now_share: share(now_ms)?,
            best_share: share(best_ms)?,
        });
    }
    Ok(out)
}

/// Prices each disk's spun-up time for a year at `tariff` from `reference`.
pub fn price(disks: &mut [StoredDisk], tariff: &Tariff, reference: chrono::NaiveDate) {
    for d in disks {
        if let Some(y) = d
            .mean_watts
            .and_then(|w| annual_cost(w, None, tariff, reference).ok())
        {
            d.annual_kwh = Some(y.kwh);
            d.annual_cost = Some(y.cost);
        }
    }
}

/// The disks of the last 30 days before `to_ms`, priced at the configured tariff, for
/// `wattson idle`; empty where none are stored (a read error is logged).
pub fn for_idle(
    store: Option<&Store>,
    config: &crate::config::Config,
    to_ms: i64,
) -> Vec<StoredDisk> {
    let Some(store) = store else {
        return Vec::new();
    };
    let from_ms = to_ms - 30 * 24 * HOUR_MS;
    let mut disks = load(store, &config.host.name, from_ms, to_ms + HOUR_MS).unwrap_or_else(|e| {
        tracing::warn!("disks: {}", wattson_collectors::ErrorChain(&e));
        Vec::new()
    });
    if let Ok(tariff) = crate::ledger::costs::tariff(&config.tariff) {
        price(&mut disks, &tariff, chrono::Local::now().date_naive());
    }
    disks
}

/// `40 s`, `25 min`, `3 h 30 min`, `26.5 h` as every span ([`hours_text`]), and
/// `12.0 days` from two days up.
///
/// [`hours_text`]: crate::ledger::interval::hours_text
fn span_words(seconds: f64) -> String {
    if seconds < 172_800.0 {
        crate::ledger::interval::hours_text(seconds / 3600.0)
    } else {
        format!("{:.1} days", seconds / 86_400.0)
    }
}

/// One disk in lines, for `wattson idle` and the report.
pub fn lines(d: &StoredDisk, currency: &str) -> Vec<String> {
    let mut out = vec![format!(
        "{}: {} spin-ups in {} followed, {:.1} a day; spun up {:.1} h a day ({:.1} %; {})",
        d.disk,
        d.spinups,
        span_words(d.covered_s),
        d.spinups_per_day,
        d.up_hours_per_day,
        d.up_share * 100.0,
        d.source_words
    )];
    if !d.woke_by.is_empty() {
        out.push(format!(
            "  woke it: {}",
            d.woke_by
                .iter()
                .map(|w| format!("{} {} ({:.1} %)", w.name, w.spinups, w.share * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    match (d.spun_up_watts, d.mean_watts, d.annual_kwh, d.annual_cost) {
        (Some(w), Some(mean), Some(kwh), Some(cost)) => out.push(format!(
            "  spun up costs {w:.1} W ({}) x {:.1} % spun up = {mean:.2} W: {kwh:.1} kWh, {} a \
             year",
            d.watts_from.as_deref().unwrap_or("configured"),
            d.up_share * 100.0,
            format_money(cost, currency)
        )),
        _ => out.push(format!(
            "  not priced: measure it (`sudo wattson idle --measure --only disk_standby:{}`, where \
             the kernel can put it to standby) or give the datasheet's spinning-idle less \
             standby watts as [[disk]] spun_up_watts",
            d.disk
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use wattson_collectors::idle::disks::tracker::{Span, Step};

    use super::*;

    fn step(spans: &[(i64, i64, bool)]) -> Step {
        Step {
            spans: spans
                .iter()
                .map(|&(from_ms, to_ms, up)| Span { from_ms, to_ms, up })
                .collect(),
            ..Step::default()
        }
    }

    #[test]
    fn spans_add_to_their_hours_and_read_back_per_day_with_who_woke_it_and_the_cost() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &dir.path().join("d.db"),
            &crate::store::StoreOptions::default(),
        )
        .unwrap();
        let t0 = 1_764_547_200_000; // an hour boundary
        let key = DiskKey {
            host: "h",
            disk: "sda",
            source: SpinSource::Inferred,
            spun_up_watts: Some(6.0),
        };
        // Down for half an hour, up for the quarter across the hour's end, down after.
        let mut p = Pending::default();
        p.add(&step(&[(t0, t0 + 1_800_000, false)]), None);
        p.add(
            &step(&[(t0 + 1_800_000, t0 + 2_700_000, false)]),
            Some((t0 + 2_700_000, "service:backup.service".into(), 40)),
        );
        p.add(&step(&[(t0 + 2_700_000, t0 + 4_500_000, true)]), None);
        assert_eq!(p.hours[&t0], (900.0, 3600.0, 1));
        assert_eq!(p.hours[&(t0 + HOUR_MS)], (900.0, 900.0, 0));
        record(&store, key, &p, t0, i64::MAX).unwrap();
        let mut p = Pending::default();
        p.add(
            &step(&[(t0 + 4_500_000, t0 + 2 * HOUR_MS, false)]),
            Some((t0 + 5_000_000, "service:media.service".into(), 1)),
        );
        record(&store, key, &p, t0, i64::MAX).unwrap();
        let mut disks = load(&store, "h", t0, t0 + 2 * HOUR_MS).unwrap();
        assert_eq!(disks.len(), 1);
        let d = &disks[0];
        assert_eq!((d.covered_s, d.up_s, d.spinups), (7200.0, 1800.0, 2));
        assert!((d.up_share - 0.25).abs() < 1e-12);
        assert!((d.spinups_per_day - 24.0).abs() < 1e-9);
        assert!((d.up_hours_per_day - 6.0).abs() < 1e-9);
        assert_eq!(d.source_words, "inferred from I/O and standby_after");
        assert_eq!(
            d.woke_by
                .iter()
                .map(|w| (w.name.as_str(), w.share))
                .collect::<Vec<_>>(),
            vec![
                ("service:backup.service", 0.5),
                ("service:media.service", 0.5)
            ]
        );
        assert!((d.mean_watts.unwrap() - 1.5).abs() < 1e-12);
        let tariff =
            crate::tariff::Tariff::simple("GBP", 0.30, 0.0, Vec::new(), crate::zone::Zone::UTC)
                .unwrap();
        price(
            &mut disks,
            &tariff,
            chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(),
        );
        let cost = disks[0].annual_cost.unwrap();
        assert!((cost - 1.5 * 8.76 * 0.30).abs() < 0.01, "{cost}");
        let text = lines(&disks[0], "GBP").join("\n");
        assert!(
            text.contains("2 spin-ups in 2 h followed, 24.0 a day") && text.contains("6.0 W ("),
            "{text}"
        );
        assert!(load(&store, "other", t0, t0 + HOUR_MS).unwrap().is_empty());
        // Retention: everything before the cutoff goes.
        record(&store, key, &Pending::default(), t0 + 3 * HOUR_MS, HOUR_MS).unwrap();
        assert!(load(&store, "h", t0, t0 + 3 * HOUR_MS).unwrap().is_empty());
    }
}
