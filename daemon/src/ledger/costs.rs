//! Money from the store: the configured tariff, the wall meter's energy as hourly buckets,
//! and today's / this month's cost with an annual projection.

use chrono::{DateTime, Datelike, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use crate::analysis::cost::{self, HOURS_PER_YEAR};
use crate::analysis::tariff::Tariff;
use crate::config::{Config, TariffConfig};
use crate::store::{Resolution, SeriesFilter, Store, StoreError};
use wattson_collectors::Metric;

const HOUR_MS: i64 = 3_600_000;

/// The tariff of the config as the analysis type (one conversion, shared with reports).
pub fn tariff(cfg: &TariffConfig) -> anyhow::Result<Tariff> {
    crate::report::input::tariff_from_config(cfg).map_err(|e| anyhow::anyhow!("[tariff]: {e}"))
}

/// The source that measures the whole machine at the wall: the first configured meter.
pub fn wall_source(config: &Config) -> Option<String> {
    config.meters.first().map(|m| format!("meter:{}", m.id))
}

/// Energy of `source` as buckets `(start_ms, end_ms, wh)`: whole hours from rollups, the
/// ragged ends from raw samples.
pub fn energy_buckets(
    store: &Store,
    host: &str,
    source: &str,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<(i64, i64, f64)>, StoreError> {
    store.hourly_energy_wh(host, source, from_ms, to_ms)
}

/// Energy and cost over a calendar period so far.
#[derive(Debug, Clone, Serialize)]
pub struct PeriodCost {
    pub from_ms: i64,
    pub to_ms: i64,
    pub kwh: f64,
    pub cost: f64,
}

/// Today's and this month's energy and cost, and the annual projection from the mean power
/// over the last 7 days.
#[derive(Debug, Clone, Serialize)]
pub struct CostSummary {
    pub source: String,
    pub currency: String,
    pub today: PeriodCost,
    pub month: PeriodCost,
    /// Mean watts over the projection window.
    pub mean_watts: Option<f64>,
    pub projection_window_hours: f64,
    pub annual_kwh: Option<f64>,
    pub annual_cost: Option<f64>,
    /// Standing charge per year: reported apart, it is not a running cost of the machine.
    pub standing_charge_per_year: f64,
}

fn local_midnight(tz: Tz, date: chrono::NaiveDate) -> i64 {
    tz.from_local_datetime(&date.and_time(NaiveTime::MIN))
        .earliest()
        .map_or_else(
            || date.and_time(NaiveTime::MIN).and_utc().timestamp_millis(),
            |d| d.timestamp_millis(),
        )
}

/// Cost summary of `source` at `now`.
pub fn summary(
    store: &Store,
    host: &str,
    source: &str,
    sample_interval_ms: i64,
    tariff: &Tariff,
    now: DateTime<Utc>,
) -> anyhow::Result<CostSummary> {
    let tz = tariff.tz();
    let local = now.with_timezone(&tz);
    let now_ms = now.timestamp_millis();
    let day_start = local_midnight(tz, local.date_naive());
    let month_start = local_midnight(
        tz,
        local.date_naive().with_day(1).unwrap_or(local.date_naive()),
    );
    let period = |from_ms: i64| -> anyhow::Result<PeriodCost> {
        let buckets = energy_buckets(store, host, source, from_ms, now_ms)?;
        let c = cost::cost_of_energy(tariff, &buckets)?;
        Ok(PeriodCost {
            from_ms,
            to_ms: now_ms,
            kwh: c.kwh,
            cost: c.energy_cost,
        })
    };
    let today = period(day_start)?;
    let month = period(month_start)?;
    // Mean power over the last 7 days: the sample-weighted mean of the hourly rollups, so
    // gaps neither count as zero watts nor stretch the covered time.
    let window_from = now_ms - 7 * 24 * HOUR_MS;
    let filter = SeriesFilter::all()
        .host(host)
        .source(source)
        .metric(Metric::Power)
        .channel("");
    let (mut n, mut sum) = (0u64, 0.0);
    for (_, rollups) in store.rollups(&filter, Resolution::Hour, window_from - HOUR_MS, now_ms)? {
        for r in rollups
            .iter()
            .filter(|r| r.bucket_ms + HOUR_MS > window_from)
        {
            n += r.n;
            sum += r.mean * r.n as f64;
        }
    }
    let covered_ms = (n as i64).saturating_mul(sample_interval_ms.max(1));
    let (mean_watts, annual_kwh, annual_cost) = if n >= 10 {
        let w = sum / n as f64;
        let fig = cost::annual_cost(w, None, tariff, local.date_naive())?;
        (Some(w), Some(fig.kwh), Some(fig.cost))
    } else {
        (None, None, None)
    };
    Ok(CostSummary {
        source: source.to_owned(),
        currency: tariff.currency().to_owned(),
        today,
        month,
        mean_watts,
        projection_window_hours: covered_ms as f64 / HOUR_MS as f64,
        annual_kwh,
        annual_cost,
        standing_charge_per_year: tariff.standing_charge_per_day() * HOURS_PER_YEAR / 24.0,
    })
}
