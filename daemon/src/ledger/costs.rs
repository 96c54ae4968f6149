//! Money from the ledger's energy: the configured tariff (with the stored price series
//! applied: [`tariff_with_series`]), the wall source, today's / this month's / all-time
//! energy and cost, and the annual projection from the last 7 days with its interval. `wattson status` and the MQTT state show these ([`super::energy::Energy::cost_in`]);
//! `wattson report` prices its window the same way (the ledger's buckets, by their minutes in
//! the hours a price may change, through `cost_of_energy`), so the two agree to the cent on
//! the same window.
//!
//! Units: kWh, the tariff's currency, W, UTC ms; a `ci95` is a 95 % half-width.

use crate::zone::Zone;
use chrono::{DateTime, Datelike, Utc};
use serde::Serialize;
use wattson_collectors::SourceId;
use wattson_collectors::meter::{Accuracy, Protocol};

use super::LedgerError;
use super::annual::PROJECTION_WINDOW_MS;
use super::energy::{self, Energy};
use super::interval::{self, PowerInterval};
use crate::config::{Config, TariffConfig};
use crate::ledger::price::{HOURS_PER_YEAR, cost_of_energy};
use crate::store::Store;
use crate::tariff::{Tariff, TariffError};

pub use super::running::{RunningPeriods, RunningTotal, TotalFigures};

/// Less covered time than this gives no projection, ms (ten samples of a 1 s meter).
const MIN_PROJECTION_MS: i64 = 10_000;

/// The tariff of the config as the analysis type (one conversion, shared with reports); a
/// `[tariff]` that makes none is a configuration error ([`LedgerError::Tariff`]).
pub fn tariff(cfg: &TariffConfig) -> Result<Tariff, LedgerError> {
    tariff_from_config(cfg).map_err(LedgerError::Tariff)
}

/// The configured tariff with the applied price series of the database taking precedence
/// per slot.
pub fn tariff_with_series(
    cfg: &TariffConfig,
    store: &Store,
    now_ms: i64,
) -> Result<Tariff, LedgerError> {
    let base = tariff(cfg)?;
    let set = crate::tariff::store::applied(
        store,
        crate::tariff::store::Kind::Price,
        &cfg.currency,
        now_ms,
    )?;
    Ok(base.with_series(set))
}

/// The tariff the config's `[tariff]` section describes ([`TariffConfig::build`]).
pub fn tariff_from_config(t: &TariffConfig) -> Result<Tariff, TariffError> {
    t.build()
}

/// The source that measures the whole machine at the wall: the first configured meter, else
/// the first smart plug ([`super::PrimaryPower::wall`]).
pub fn wall_source(config: &Config) -> Option<SourceId> {
    super::PrimaryPower::from_config(config).wall().cloned()
}

/// The stated accuracy of the meter behind `source` (a configured meter), where its
/// datasheet gives one.
pub fn accuracy_of(config: &Config, source: &SourceId) -> Option<Accuracy> {
    let id = source.meter_id()?;
    let m = config.meters.iter().find(|m| m.id == id)?;
    // `as_str` reads the same whether the config keeps the protocol as text or typed.
    m.protocol.as_str().parse::<Protocol>().ok()?.accuracy()
}

/// Energy and cost over a period so far.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PeriodCost {
    pub from_ms: i64,
    pub to_ms: i64,
    pub kwh: f64,
    /// Currency; the standing charge is not in it.
    pub cost: f64,
    /// Hours the energy covers.
    pub covered_hours: f64,
    /// Mean W over the covered time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_watts: Option<f64>,
    /// Recorded gaps in the period.
    pub gaps: usize,
    /// kWh over gaps that the meter's own counter counted, not sampled (in `kwh`).
    #[serde(skip_serializing_if = "is_zero_kwh")]
    pub counted_kwh: f64,
    /// Hours whose figures are estimates (rollups from before covered time was stored).
    #[serde(skip_serializing_if = "is_zero")]
    pub approximate_hours: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero_kwh(k: &f64) -> bool {
    *k == 0.0
}

impl PeriodCost {
    /// The period's figures from the ledger's energy, priced by `tariff` (minute by minute
    /// where it has price series).
    pub fn of(store: &Store, e: &Energy, tariff: &Tariff) -> Result<PeriodCost, LedgerError> {
        let c = e.cost_in(store, tariff)?;
        Ok(PeriodCost {
            from_ms: e.from_ms,
            to_ms: e.to_ms,
            // `+ 0.0` turns a -0.0 from rounding into 0.0.
            kwh: c.kwh + 0.0,
            cost: c.energy_cost + 0.0,
            covered_hours: e.covered_hours(),
            mean_watts: e.mean_watts(),
            gaps: e.gaps.len(),
            counted_kwh: e.counted_wh / 1000.0,
            approximate_hours: e.approximate_hours,
        })
    }
}

/// Energy and cost on one local day of the tariff's zone.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DayCost {
    pub date: chrono::NaiveDate,
    /// The day's start (local midnight), UTC ms.
    pub from_ms: i64,
    pub kwh: f64,
    /// Currency; the standing charge is not in it.
    pub cost: f64,
    /// Hours of the day the energy covers (what the meter's counter counted over gaps is in
    /// `kwh` and covers none).
    pub covered_hours: f64,
}

/// The energy pieces `(start, end, Wh)` by the local day of the tariff's zone each starts
/// in, in date order: each day is priced on its own ([`cost_of_energy`]), as `wattson
/// report`'s daily figures are.
pub fn by_local_day(
    buckets: &[(i64, i64, f64)],
    tz: Zone,
) -> std::collections::BTreeMap<chrono::NaiveDate, Vec<(i64, i64, f64)>> {
    let mut days: std::collections::BTreeMap<chrono::NaiveDate, Vec<(i64, i64, f64)>> =
        std::collections::BTreeMap::new();
    for &b in buckets {
        if let Some(t) = DateTime::<Utc>::from_timestamp_millis(b.0) {
            days.entry(t.with_timezone(&tz).date_naive())
                .or_default()
                .push(b);
        }
    }
    days
}

/// `source`'s energy and cost on each local day from the one holding `from_ms` to the one
/// holding `to_ms` (that one up to `to_ms`), every day listed (one with nothing stored at
/// 0 kWh over 0 hours): the ledger's energy over the whole span, cut into the pieces a
/// price may change within ([`Energy::cost_in`]'s), grouped by day ([`by_local_day`]) and
/// priced by [`cost_of_energy`].
pub fn daily(
    store: &Store,
    host: &str,
    source: &SourceId,
    tariff: &Tariff,
    (from_ms, to_ms): (i64, i64),
) -> Result<Vec<DayCost>, LedgerError> {
    let tz = tariff.tz();
    let day_of = |ms: i64| {
        DateTime::<Utc>::from_timestamp_millis(ms).map(|t| t.with_timezone(&tz).date_naive())
    };
    let (Some(first), Some(last)) = (day_of(from_ms), day_of(to_ms.saturating_sub(1))) else {
        return Ok(Vec::new());
    };
    let start = local_midnight(tz, first);
    let e = energy::energy(store, host, source, start, to_ms)?;
    let buckets =
        e.minute_buckets_where(store, |start, end| tariff.may_change_within(start, end))?;
    let mut priced = by_local_day(&buckets, tz);
    let mut covered: std::collections::BTreeMap<chrono::NaiveDate, i64> =
        std::collections::BTreeMap::new();
    for b in &e.buckets {
        if let Some(d) = day_of(b.start_ms) {
            *covered.entry(d).or_default() += b.covered_ms;
        }
    }
    let mut out = Vec::new();
    for date in first.iter_days().take_while(|d| *d <= last) {
        let (kwh, cost) = match priced.remove(&date) {
            Some(pieces) => {
                let c = cost_of_energy(tariff, &pieces)?;
                (c.kwh + 0.0, c.energy_cost + 0.0)
            }
            None => (0.0, 0.0),
        };
        out.push(DayCost {
            date,
            from_ms: local_midnight(tz, date),
            kwh,
            cost,
            covered_hours: covered.get(&date).copied().unwrap_or(0) as f64 / energy::MS_PER_HOUR,
        });
    }
    Ok(out)
}

/// Today's, this month's and all-time energy and cost, and the annual projection from the
/// mean power over the last 7 days (covered time only: gaps neither count as zero watts
/// nor stretch it).
#[derive(Debug, Clone, Serialize)]
pub struct CostSummary {
    pub source: SourceId,
    pub currency: String,
    pub today: PeriodCost,
    pub month: PeriodCost,
    /// Since the source's first sample: Home Assistant's `energy` and `cost_total`.
    pub total: PeriodCost,
    /// Mean W over the projection window's covered time.
    pub mean_watts: Option<f64>,
    /// Its 95 % interval and what it rests on.
    pub mean_watts_interval: Option<PowerInterval>,
    /// Hours covered in the projection window.
    pub projection_window_hours: f64,
    pub annual_kwh: Option<f64>,
    pub annual_kwh_ci95: Option<f64>,
    pub annual_cost: Option<f64>,
    pub annual_cost_ci95: Option<f64>,
    /// The annual figure's name and price basis ([`super::annual::Annual::basis`]).
    pub annual_basis: Option<String>,
    /// The annual cost with the standing charge: what the bill for this machine's energy
    /// comes to in a year.
    pub annual_cost_all_in: Option<f64>,
    /// Standing charge per year: its own figure, paid whether or not the machine runs.
    pub standing_charge_per_year: f64,
    /// Standby (asleep) and off, measured at the wall over every time the host was away
    /// ([`super::standby`]); empty until the meter's counter has settled one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub away: Vec<super::standby::AwayFigure>,
    /// What weakens these figures, in words.
    pub warnings: Vec<String>,
}

/// The start of the local `date` in `tz`, UTC ms ([`Zone::start_of_day`]).
pub fn local_midnight(tz: Zone, date: chrono::NaiveDate) -> i64 {
    tz.start_of_day(date).timestamp_millis()
}

/// Cost summary of `source` on `host` at `now`; `accuracy` is its meter's, where known.
pub fn summary(
    store: &Store,
    host: &str,
    source: &SourceId,
    accuracy: Option<Accuracy>,
    tariff: &Tariff,
    now: DateTime<Utc>,
) -> Result<CostSummary, LedgerError> {
    summary_with_total(store, host, source, accuracy, tariff, now, None)
}

/// [`summary`] with the all-time figures already known (a [`RunningTotal`]'s), so they are
/// not priced again.
pub fn summary_with_total(
    store: &Store,
    host: &str,
    source: &SourceId,
    accuracy: Option<Accuracy>,
    tariff: &Tariff,
    now: DateTime<Utc>,
    total: Option<PeriodCost>,
) -> Result<CostSummary, LedgerError> {
    let tz = tariff.tz();
    let local = now.with_timezone(&tz);
    let now_ms = now.timestamp_millis();
    let day_start = local_midnight(tz, local.date_naive());
    let month_start = local_midnight(
        tz,
        local.date_naive().with_day(1).unwrap_or(local.date_naive()),
    );
    let period = |from_ms: i64| -> Result<PeriodCost, LedgerError> {
        PeriodCost::of(
            store,
            &energy::energy(store, host, source, from_ms, now_ms)?,
            tariff,
        )
    };
    let today = period(day_start)?;
    let month = period(month_start)?;
    let total = match total {
        Some(t) => t,
        None => period(
            energy::total(store, host, source)?
                .since_ms
                .unwrap_or(now_ms)
                .min(month_start),
        )?,
    };
    let recent = energy::energy(store, host, source, now_ms - PROJECTION_WINDOW_MS, now_ms)?;
    let mut warnings = Vec::new();
    if total.approximate_hours > 0 {
        warnings.push(format!(
            "{} hour(s) were stored before covered time was, and their raw samples are gone: \
             their energy and covered time are estimates",
            total.approximate_hours
        ));
    }
    let mut out = CostSummary {
        source: source.to_owned(),
        currency: tariff.currency().to_owned(),
        today,
        month,
        total,
        mean_watts: None,
        mean_watts_interval: None,
        projection_window_hours: recent.covered_hours(),
        annual_kwh: None,
        annual_kwh_ci95: None,
        annual_cost: None,
        annual_cost_ci95: None,
        annual_basis: None,
        annual_cost_all_in: None,
        standing_charge_per_year: tariff.standing_charge_per_day() * HOURS_PER_YEAR / 24.0,
        away: super::standby::measured(store, host, source, (0, now_ms + 1), tariff)?,
        warnings,
    };
    if let Some(w) = recent
        .mean_watts()
        .filter(|_| recent.covered_ms >= MIN_PROJECTION_MS)
    {
        let (blocks, block) = energy::blocks(store, &recent)?;
        let iv = interval::power_interval(w, recent.covered_ms, &blocks, block, accuracy);
        // A year on the tariff: the window's load by hour of the week, priced over a year.
        let fig = super::annual::on_tariff(
            &super::load_shape::LoadShape::of(&recent, tariff.tz()),
            tariff,
            now_ms,
            iv.ci95_watts.map(|c| c / w).filter(|r| r.is_finite()),
            &format!("the last {} days", super::annual::PROJECTION_DAYS),
        )?;
        out.mean_watts = Some(w);
        if let Some(fig) = fig {
            out.annual_kwh = Some(fig.kwh);
            out.annual_kwh_ci95 = fig.kwh_ci95;
            out.annual_cost = Some(fig.cost);
            out.annual_cost_all_in = Some(fig.cost + out.standing_charge_per_year);
            out.annual_cost_ci95 = fig.cost_ci95;
            out.annual_basis = Some(fig.basis);
        }
        out.warnings.extend(iv.warnings.iter().cloned());
        out.mean_watts_interval = Some(iv);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PeriodConfig;
    use chrono::{NaiveDate, NaiveTime};

    /// Three local days, the middle one with nothing stored, on a tariff with a cheap
    /// night: each day listed, the empty one at zero, and each day's figures what the
    /// ledger gives for that day on its own; the days add up to the whole span's.
    #[test]
    fn daily_lists_every_day_each_priced_as_the_ledger_prices_it() {
        use crate::store::{HOUR_MS, StoreOptions, Writer};
        use wattson_collectors::{Metric, Sample};
        let day = 24 * HOUR_MS;
        // 2023-11-14T00:00:00Z.
        let t0 = 1_699_920_000_000;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("d.db");
        let wall = SourceId::meter("wall");
        let mut opts = StoreOptions {
            host: "h".into(),
            ..StoreOptions::default()
        };
        opts.spacing_ms.insert(wall.clone(), 60_000);
        let mut w = Writer::new(Store::open(&db, &opts).unwrap(), opts.clone());
        let samples: Vec<Sample> = (0..3 * 1440_i64)
            .map(|m| t0 + m * 60_000)
            .filter(|t| !(t0 + day..t0 + 2 * day).contains(t))
            .map(|t| {
                let watts = if (t - t0) % day < 6 * HOUR_MS {
                    30.0
                } else {
                    90.0
                };
                Sample::new(t, wall.clone(), Metric::Power, "", watts)
            })
            .collect();
        w.push(None, samples);
        w.flush().unwrap();
        drop(w);
        let store = Store::open_read_only(&db).unwrap();
        let tariff = tariff_from_config(&TariffConfig {
            currency: "GBP".into(),
            price_per_kwh: 0.30,
            timezone: Some(Zone::UTC),
            periods: vec![PeriodConfig {
                start: NaiveTime::from_hms_opt(0, 30, 0).unwrap(),
                end: NaiveTime::from_hms_opt(4, 30, 0).unwrap(),
                price_per_kwh: 0.07,
            }],
            ..TariffConfig::default()
        })
        .unwrap();
        let to = t0 + 3 * day - 1;
        let days = daily(&store, "h", &wall, &tariff, (t0 + 7 * HOUR_MS, to)).unwrap();
        assert_eq!(days.len(), 3);
        assert_eq!(days[0].from_ms, t0);
        assert_eq!(days[1].date.to_string(), "2023-11-15");
        assert_eq!(
            (days[1].kwh, days[1].cost, days[1].covered_hours),
            (0.0, 0.0, 0.0)
        );
        for d in [&days[0], &days[2]] {
            let alone = PeriodCost::of(
                &store,
                &energy::energy(&store, "h", &wall, d.from_ms, (d.from_ms + day).min(to)).unwrap(),
                &tariff,
            )
            .unwrap();
            assert!((d.kwh - alone.kwh).abs() < 1e-12, "{d:?} {alone:?}");
            assert!((d.cost - alone.cost).abs() < 1e-12, "{d:?} {alone:?}");
        }
        // The first day: 6 h at 30 W and 18 h at 90 W (the last minute of the day has no
        // pair after it), 4 h of it at the night's price.
        assert!((days[0].kwh - 1.80).abs() < 0.01, "{:?}", days[0]);
        let whole = PeriodCost::of(
            &store,
            &energy::energy(&store, "h", &wall, t0, to).unwrap(),
            &tariff,
        )
        .unwrap();
        let sum: f64 = days.iter().map(|d| d.cost).sum();
        assert!((sum - whole.cost).abs() < 1e-9, "{sum} {}", whole.cost);
    }

    #[test]
    fn tariff_from_config_keeps_periods_and_changes() {
        let t = TariffConfig {
            currency: "GBP".into(),
            price_per_kwh: 0.30,
            standing_charge_per_day: 0.5,
            timezone: Some(Zone::named("Europe/London").unwrap()),
            periods: vec![PeriodConfig {
                start: NaiveTime::from_hms_opt(0, 30, 0).unwrap(),
                end: NaiveTime::from_hms_opt(7, 30, 0).unwrap(),
                price_per_kwh: 0.07,
            }],
            changes: vec![crate::config::TariffChangeConfig {
                effective_from: NaiveDate::from_ymd_opt(2027, 1, 1).unwrap(),
                price_per_kwh: 0.25,
                periods: vec![],
            }],
            ..TariffConfig::default()
        };
        let tariff = tariff_from_config(&t).unwrap();
        assert_eq!(tariff.tz(), Zone::named("Europe/London").unwrap());
        assert_eq!(tariff.standing_charge_per_day(), 0.5);
        let at = |s: &str| tariff.price_at(s.parse::<DateTime<Utc>>().unwrap());
        assert_eq!(at("2026-01-10T01:00:00Z"), 0.07);
        assert_eq!(at("2026-01-10T12:00:00Z"), 0.30);
        assert_eq!(at("2027-01-10T01:00:00Z"), 0.25);
    }
}
