//! Series: the quantisation of each unit's values, which series are rolled up (hourly,
//! per minute) and which are detail, and the `series` table's rows.

use rusqlite::params;
use wattson_collectors::source::channel;
use wattson_collectors::{Metric, SourceId, Unit};

use super::integrate::{Readings, Rule};
use super::{Store, StoreError};

/// Values per unit stored: a value `v` is kept as `round(v * resolution(unit))`.
///
/// W 0.01, V 0.01, A 0.001, ratio 0.001, Hz 0.01, Wh 0.001, share 1e-4, MHz 1, count 1,
/// s 0.001.
pub fn resolution(unit: Unit) -> f64 {
    match unit {
        Unit::Watt | Unit::Volt | Unit::Hertz => 100.0,
        Unit::Ampere | Unit::Ratio | Unit::WattHour | Unit::Second => 1000.0,
        Unit::Share => 10_000.0,
        Unit::Megahertz | Unit::Count => 1.0,
    }
}

/// Quantises `value` to steps of `1 / scale` (saturating at the `i64` range).
pub fn quantise(value: f64, scale: f64) -> i64 {
    (value * scale).round() as i64
}

/// Inverse of [`quantise`].
pub fn dequantise(q: i64, scale: f64) -> f64 {
    q as f64 / scale
}

/// Which rollups a series gets: `(hourly, per_minute)`.
///
/// Every meter metric and every power source is rolled up hourly; power also per minute.
/// CPU metrics are rolled up for their aggregate channels only (`all`, `all/<x>`, `interval_mean`).
pub fn rollup_kind(metric: Metric, channel: &str) -> (bool, bool) {
    match metric {
        Metric::Power => (true, true),
        Metric::Voltage
        | Metric::Current
        | Metric::PowerFactor
        | Metric::Frequency
        | Metric::EnergyCounter
        | Metric::EnergyTotal
        | Metric::GpuUtilisation
        | Metric::GpuClock
        | Metric::PState
        | Metric::GpuProcesses
        | Metric::DiskSpunUp
        | Metric::Rejected => (true, false),
        Metric::CpuBusy => (channel == channel::ALL, false),
        Metric::CoreFrequency => (channel == channel::MEAN, false),
        Metric::CpuTime | Metric::IdleResidency | Metric::PackageResidency => {
            (channel::all_part(channel).is_some(), false)
        }
        // Accounted per service (`crate::services`), never a series of its own.
        Metric::CgroupCpu => (false, false),
    }
}

/// Whether a series' raw samples are detail, kept for the detail retention in their own
/// table: per-core CPU series ([`is_per_core`]) and package C-state residency (its hourly
/// rollups are kept forever).
pub fn is_detail(metric: Metric, channel: &str) -> bool {
    is_per_core(metric, channel) || metric == Metric::PackageResidency
}

/// Whether a series is per-core CPU detail: a CPU metric on channel `cpuN` or `cpuN/<x>`
/// (the CPU collector's per-CPU channels). Aggregate channels (`all`, `all/<x>`, `interval_mean`),
/// meters and power sources are not.
pub fn is_per_core(metric: Metric, channel: &str) -> bool {
    let cpu_metric = matches!(
        metric,
        Metric::CpuBusy | Metric::CpuTime | Metric::CoreFrequency | Metric::IdleResidency
    );
    cpu_metric && channel::is_per_core(channel)
}

/// One stored series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub id: i64,
    pub host: String,
    pub source: SourceId,
    pub metric: Metric,
    pub channel: String,
    pub unit: Unit,
    /// The series' own sample spacing, ms, as the writer last judged pairs by it; `None`
    /// until known.
    pub spacing_ms: Option<i64>,
    /// How its readings stand between them (power series; `sampled` for every other).
    pub readings: Readings,
    /// The longest a `hold` reading stands, or a `interval_mean` value covers, ms.
    pub max_hold_ms: Option<i64>,
}

impl Series {
    /// The rule its pairs of readings are integrated by ([`Rule::of`]).
    pub fn rule(&self) -> Rule {
        Rule::of(self.readings, self.max_hold_ms, self.spacing_ms)
    }
}

impl Store {
    /// The series `(host, source, metric, channel)`, created if new.
    pub fn ensure_series(
        &self,
        host: &str,
        source: &SourceId,
        metric: Metric,
        channel: &str,
    ) -> Result<Series, StoreError> {
        let unit = metric.unit();
        let (hourly, minute) = rollup_kind(metric, channel);
        self.conn
            .prepare_cached(
                "INSERT INTO series (host, source, metric, channel, unit, rollup, minute_rollup)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    host,
                    source.to_string(),
                    metric.as_str(),
                    channel,
                    unit.symbol(),
                    hourly,
                    minute
                ])
            })
            .map_err(|e| self.sql(e))?;
        let id: i64 = self
            .conn
            .prepare_cached(
                "SELECT id FROM series
                 WHERE host = ?1 AND source = ?2 AND metric = ?3 AND channel = ?4 AND unit = ?5",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        host,
                        source.to_string(),
                        metric.as_str(),
                        channel,
                        unit.symbol()
                    ],
                    |r| r.get(0),
                )
            })
            .map_err(|e| self.sql(e))?;
        let (spacing_ms, readings, max_hold_ms): (Option<i64>, String, Option<i64>) = self
            .conn
            .prepare_cached("SELECT spacing_ms, readings, max_hold_ms FROM series WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
            .map_err(|e| self.sql(e))?;
        Ok(Series {
            id,
            host: host.to_owned(),
            source: source.clone(),
            metric,
            channel: channel.to_owned(),
            unit,
            spacing_ms,
            readings: Readings::parse(&readings).unwrap_or_default(),
            max_hold_ms,
        })
    }

    /// Records how the series' readings stand ([`Readings`]) and, for `hold` and `interval_mean`,
    /// for how long at most, ms.
    pub fn set_readings(
        &self,
        series_id: i64,
        readings: Readings,
        max_hold_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        let max = max_hold_ms
            .filter(|_| readings != Readings::Sampled)
            .map(|m| m.max(1));
        self.conn
            .prepare_cached("UPDATE series SET readings = ?2, max_hold_ms = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![series_id, readings.as_str(), max]))
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records the spacing the writer judges the series' pairs by, ms.
    pub fn set_spacing(&self, series_id: i64, spacing_ms: i64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE series SET spacing_ms = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![series_id, spacing_ms.max(1)]))
            .map_err(|e| self.sql(e))?;
        Ok(())
    }
}
