//! `/history.json`: what the live page's charts draw. The host's power over the last 24 h
//! minute by minute ([`crate::ledger::power_line::by_minute`]) and over the last hour in
//! [`HOUR_STEP_MS`] steps ([`crate::ledger::power_line::by_step`]), for the wall meter and,
//! where one is stored, the calibration's estimate; the power levels known for this host's
//! modes; and the wall meter's energy and cost on each of the last [`DAYS`] local days
//! ([`crate::ledger::costs::daily`], the figures `wattson report` gives for those days).
//!
//! Made when asked and only then, over a read-only connection of its own on a blocking
//! thread, one at a time: at most 1440 + 720 points per source and [`DAYS`] days. The page
//! asks every [`super::page::HISTORY_REFRESH_MS`] and draws the readings of `/live.json` onto
//! the lines in between.
//!
//! Units: W, kWh, the tariff's currency, UTC ms. A point is `[bucket start, W]`, `W` the
//! bucket's energy over the time it covers; `[start, null]` where a run of buckets with no
//! covered time begins: the line breaks there.

use serde::Serialize;
use wattson_collectors::SourceId;

use crate::config::Config;
use crate::ledger::PrimaryPower;
use crate::ledger::energy::{power_series, wall_power_source};
use crate::ledger::power_line::{self, Point};
use crate::ledger::price::{MinorUnit, format_money_readable, minor_unit};
use crate::store::{HOUR_MS, Store};

/// The last hour's step, ms: 720 points.
pub const HOUR_STEP_MS: i64 = 5_000;
/// Local days of energy and cost, today included.
pub const DAYS: u32 = 30;

/// What `/history.json` says.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub host: String,
    /// When this was made, UTC ms.
    pub ts_ms: i64,
    /// ISO 4217.
    pub currency: String,
    /// How amounts below one unit are written (`p`, `¢`); `null` for a currency without one.
    pub minor_unit: Option<MinorUnit>,
    /// The last 24 hours, a point a minute.
    pub day: PowerWindow,
    /// The last hour, a point every [`HOUR_STEP_MS`].
    pub hour: PowerWindow,
    /// Power levels known for this host's modes (reference lines).
    pub levels: Vec<Level>,
    /// The wall meter's energy and cost per local day of the tariff's zone, oldest first,
    /// from the first day with anything stored (at most [`DAYS`] ago) to today so far.
    pub days: Vec<Day>,
    /// Which source the days are of; `null` without a wall meter's history.
    pub days_source: Option<SourceId>,
}

/// One window of power lines.
#[derive(Debug, Clone, Serialize)]
pub struct PowerWindow {
    /// UTC ms, `[from_ms, to_ms)`.
    pub from_ms: i64,
    pub to_ms: i64,
    /// The buckets' length, ms.
    pub step_ms: i64,
    pub series: Vec<PowerSeries>,
}

/// One source's power line.
#[derive(Debug, Clone, Serialize)]
pub struct PowerSeries {
    /// `meter:wall`, `estimate:wall`, `rapl`.
    pub source: SourceId,
    /// What its watts stand for ([`crate::ledger::scope_label`]).
    pub scope: String,
    pub points: Vec<Point>,
}

/// A mode's power level.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Level {
    /// `idle`, `standby`, `2 loops`.
    pub name: String,
    pub watts: f64,
    /// Where it comes from: `[[config]] NAME` (entered by hand) or `sweep NAME` (measured).
    pub from: String,
}

/// One local day's energy and cost.
#[derive(Debug, Clone, Serialize)]
pub struct Day {
    /// YYYY-MM-DD in the tariff's zone.
    pub date: String,
    /// Local midnight, UTC ms.
    pub from_ms: i64,
    pub kwh: f64,
    /// Currency, priced by the ledger; no standing charge.
    pub cost: f64,
    pub covered_hours: f64,
    /// `1.571 kWh`, `412.0 Wh`.
    pub energy_text: String,
    /// `47.1 ¢`, `EUR 1.23`.
    pub cost_text: String,
    /// Today, so far.
    pub today: bool,
}

/// Why the history could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Database(#[from] crate::store::ExistingError),
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The history of the database `config` names as it stands at `now_ms`; `wall` is the
/// configured wall source. Without a database, empty lines and no days.
pub fn gather(
    config: &Config,
    wall: Option<&SourceId>,
    now_ms: i64,
) -> Result<History, HistoryError> {
    let host = config.host.name.clone();
    let currency = config.tariff.currency.clone();
    let window = |span: i64, step: i64| PowerWindow {
        from_ms: now_ms - span,
        to_ms: now_ms,
        step_ms: step,
        series: Vec::new(),
    };
    let mut out = History {
        ts_ms: now_ms,
        minor_unit: minor_unit(&currency),
        currency,
        day: window(24 * HOUR_MS, crate::store::MINUTE_MS),
        hour: window(HOUR_MS, HOUR_STEP_MS),
        levels: levels(config, None),
        days: Vec::new(),
        days_source: None,
        host,
    };
    let db = &config.storage.path;
    if !crate::store::database_exists(db)? {
        return Ok(out);
    }
    let store = crate::store::open_database(db)?;
    out.levels = levels(config, Some(&store));
    for source in line_sources(&store, &out.host, wall)? {
        let Some(series) = power_series(&store, &out.host, &source)? else {
            continue;
        };
        let scope = crate::ledger::scope_label(&source).unwrap_or("").to_owned();
        let (day, hour) = (&out.day, &out.hour);
        let day_points = power_line::by_minute(&store, &series, day.from_ms, day.to_ms)?;
        let hour_points =
            power_line::by_step(&store, &series, hour.from_ms, hour.to_ms, hour.step_ms)?;
        out.day.series.push(PowerSeries {
            source: source.clone(),
            scope: scope.clone(),
            points: day_points,
        });
        out.hour.series.push(PowerSeries {
            source,
            scope,
            points: hour_points,
        });
    }
    let primary = PrimaryPower::new(wall.cloned());
    if let Some(source) = wall_power_source(&store, &out.host, &primary)? {
        let tariff = crate::ledger::costs::tariff_with_series(&config.tariff, &store, now_ms)?;
        out.days = days(&store, &out.host, &source, &tariff, now_ms)?;
        out.days_source = Some(source);
    }
    Ok(out)
}

/// The sources drawn: the host's power source (the wall meter where one is stored, else
/// what [`PrimaryPower`] ranks first), and the calibration's estimate beside it where it is
/// stored too.
fn line_sources(
    store: &Store,
    host: &str,
    wall: Option<&SourceId>,
) -> Result<Vec<SourceId>, crate::store::StoreError> {
    let stored: Vec<SourceId> = store
        .find_series(
            &crate::store::SeriesFilter::all()
                .host(host)
                .metric(wattson_collectors::Metric::Power)
                .channel(""),
        )?
        .into_iter()
        .map(|s| s.source)
        .collect();
    let mut out: Vec<SourceId> = PrimaryPower::new(wall.cloned())
        .pick(&stored)
        .cloned()
        .into_iter()
        .collect();
    if stored.contains(&SourceId::Estimate) && !out.contains(&SourceId::Estimate) {
        out.push(SourceId::Estimate);
    }
    Ok(out)
}

/// The last [`DAYS`] local days up to `now_ms`, from the first with anything stored.
fn days(
    store: &Store,
    host: &str,
    source: &SourceId,
    tariff: &crate::tariff::Tariff,
    now_ms: i64,
) -> Result<Vec<Day>, HistoryError> {
    let tz = tariff.tz();
    let Some(today) =
        chrono::DateTime::from_timestamp_millis(now_ms).map(|t| t.with_timezone(&tz).date_naive())
    else {
        return Ok(Vec::new());
    };
    let first = today - chrono::Days::new(u64::from(DAYS - 1));
    let from_ms = crate::ledger::costs::local_midnight(tz, first);
    let daily = crate::ledger::costs::daily(store, host, source, tariff, (from_ms, now_ms))?;
    let currency = tariff.currency();
    Ok(daily
        .into_iter()
        .skip_while(|d| d.kwh == 0.0 && d.covered_hours == 0.0)
        .map(|d| Day {
            date: d.date.to_string(),
            from_ms: d.from_ms,
            energy_text: crate::report::render::energy(d.kwh),
            cost_text: format_money_readable(d.cost, currency),
            kwh: d.kwh,
            cost: d.cost,
            covered_hours: d.covered_hours,
            today: d.date == today,
        })
        .collect())
}

/// The power levels known for this host's modes: its `[[config]]` entered by hand (every
/// mode), and the idle level of its newest complete sweep (measured).
fn levels(config: &Config, store: Option<&Store>) -> Vec<Level> {
    let mut out: Vec<Level> = config
        .manual
        .iter()
        .filter(|c| c.name == config.host.name)
        .flat_map(|c| {
            c.modes.iter().map(|(mode, watts)| Level {
                name: mode.clone(),
                watts: *watts,
                from: format!("[[config]] {}", c.name),
            })
        })
        .collect();
    let sweeps = store.map_or_else(|| Ok(Vec::new()), crate::sweep::persist::list);
    match sweeps {
        Ok(sweeps) => {
            let idle = sweeps
                .iter()
                .filter(|s| {
                    s.status == "complete" && s.host.as_deref() == Some(config.host.name.as_str())
                })
                .find_map(|s| {
                    let l = s.levels.iter().find(|l| l.loops == 0)?;
                    Some(Level {
                        name: "idle".to_owned(),
                        watts: l.mean_w,
                        from: format!("sweep {}", s.name),
                    })
                });
            out.extend(idle.filter(|l| l.watts.is_finite()));
        }
        Err(e) => tracing::debug!("http: the sweeps' idle levels: {e}"),
    }
    out
}
