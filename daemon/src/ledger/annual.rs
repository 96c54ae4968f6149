//! The annual figures, named once. Every surface (`wattson status`, the MQTT state,
//! `/metrics`, the live page, every report format) shows one of these and words its basis
//! with [`Annual::basis`], so "what does this box cost a year" has one answer per name:
//!
//! - **a year on your tariff** ([`on_tariff`]): this machine's measured load by hour of the
//!   week ([`super::load_shape`]; the measured mean in hours not measured, said so) priced
//!   over the 365 days from today at the tariff in force each hour (its periods, changes
//!   and price series; where a series ends, a stated assumption). The live outputs shape
//!   the load from the last 7 days ([`PROJECTION_DAYS`]); a report from its window;
//!   `report --tariffs` prices the same shape under each tariff. The standing charge is
//!   its own figure beside it, and the all-in figure adds it.
//! - **modelled** ([`modelled`]): kWh from modes times hours (a sweep fit over the
//!   utilisation history, a configuration's modes and duty cycle), at the year's mean price
//!   of the tariff (a modelled load has no hours of its own to price).
//! - **a candidate on this load** ([`candidate`]): another machine's power curve at the
//!   load this machine's utilisation history asks of it, hour by hour, shaped by hour of
//!   the week as this machine's own is, a year on the tariff (see [`super::candidate`]).
//!
//! Units: kWh, the tariff's currency, hours.

use std::fmt::Write as _;

use chrono::{DateTime, Datelike, TimeZone, Timelike};
use serde::Serialize;

use super::load_shape::{LoadShape, WEEK_HOURS, hour_of_week};
use crate::analysis::schedule::Schedule;
use crate::ledger::price::{CostError, MIN_SERIES_WINDOW_MS, cost_of_energy};
use crate::store::HOUR_MS;
use crate::tariff::{Tariff, TariffError};

/// How far back the live outputs' projection looks, days.
pub const PROJECTION_DAYS: f64 = 7.0;
/// The same, ms: the window `status` and the live outputs project a year from.
pub const PROJECTION_WINDOW_MS: i64 = PROJECTION_DAYS as i64 * 24 * crate::store::HOUR_MS;

/// One annual figure and what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Annual {
    pub kwh: f64,
    /// 95 % half-width, where the power's is known.
    pub kwh_ci95: Option<f64>,
    /// Currency; the standing charge is not in it.
    pub cost: f64,
    pub cost_ci95: Option<f64>,
    /// The price it works out at, currency per kWh (`cost / kwh`).
    pub price_per_kwh: f64,
    /// The figure's name and price basis in one phrase, the same on every surface.
    pub basis: String,
}

/// A price per kWh as every basis phrase prints it: four decimals (0.1633), so a price of
/// a quarter is never shown as 0.25 when it is 0.245.
pub fn price_text(price: f64, currency: &str) -> String {
    format!("{price:.4} {currency}/kWh")
}

/// `kwh` a year (its half-width `kwh_ci95`) modelled from `what` ("the sweep fit of
/// basket over the utilisation history"), at `year_price` (`price_from`: where it comes
/// from, "the configured prices over the year from 2026-12-04").
pub fn modelled(
    kwh: f64,
    kwh_ci95: Option<f64>,
    what: &str,
    year_price: f64,
    price_from: &str,
    currency: &str,
) -> Annual {
    Annual {
        kwh,
        kwh_ci95,
        cost: kwh * year_price,
        cost_ci95: kwh_ci95.map(|c| c * year_price),
        price_per_kwh: year_price,
        basis: format!(
            "modelled from {what}, at the year's mean price ({}, {price_from})",
            price_text(year_price, currency)
        ),
    }
}

/// What candidate `name` would cost a year on this machine's load: its power by hour of
/// the week over `hours` of this machine's utilisation history (`shape`), a year on the
/// tariff from the day of `day_ms` ([`on_tariff`]). `None` without hours.
pub fn candidate(
    shape: &LoadShape,
    tariff: &Tariff,
    day_ms: i64,
    hours: f64,
    name: &str,
) -> Result<Option<Annual>, CostError> {
    let Some(mut a) = on_tariff(shape, tariff, day_ms, None, "")? else {
        return Ok(None);
    };
    let priced = a.basis.find(", priced over").map_or("", |i| &a.basis[i..]);
    a.basis = format!(
        "a candidate on this load: {name}'s curve at the load this machine's utilisation \
         asked for over {}, in each hour of the week{priced}",
        super::interval::hours_text(hours)
    );
    Ok(Some(a))
}

/// The days a year on the tariff spans.
pub const YEAR_DAYS: i64 = 365;

/// What a year on the tariff costs this machine: its load `shape` (mean power by hour of
/// the week where measured, the measured mean elsewhere) over the 365 days from the local
/// day of `day_ms`, each hour priced by the tariff in force then (its periods, its changes,
/// its price series; where a series ends, each hour at the series' mean price for its hour
/// of day, or the configured prices when the series holds under a day). `power_ci_ratio`
/// is the relative 95 % half-width of the measured mean power; the interval adds the
/// spread of the measured hours for the share of the week not measured (no interval
/// without the power's). `window` names
/// what was measured ("the last 7 days"). `None` with nothing measured.
pub fn on_tariff(
    shape: &LoadShape,
    tariff: &Tariff,
    day_ms: i64,
    power_ci_ratio: Option<f64>,
    window: &str,
) -> Result<Option<Annual>, CostError> {
    let Some(mean) = shape.mean_watts() else {
        return Ok(None);
    };
    let date = DateTime::from_timestamp_millis(day_ms)
        .ok_or(TariffError::Timestamp(day_ms))?
        .with_timezone(&tariff.tz())
        .date_naive();
    let unit = UnitYear::cached(tariff, date)?;
    let (kwh, cost) = unit.price(|h| shape.assumed_watts(h).unwrap_or(mean));
    let assumption = unit.assumption;
    let measured = shape.measured_hours();
    let unmeasured = 1.0 - measured as f64 / WEEK_HOURS as f64;
    let shape_ratio = shape.spread_ratio().map(|r| r * unmeasured);
    // Without the power's interval there is none to give (the shape's alone would claim
    // a certainty the meter never stated).
    let ci_ratio = power_ci_ratio
        .filter(|r| r.is_finite())
        .map(|a| a.abs().hypot(shape_ratio.unwrap_or(0.0)));
    let price = if kwh > 0.0 { cost / kwh } else { 0.0 };
    let covered = shape.covered_hours();
    let mut basis = String::new();
    if covered < 24.0 {
        basis.push_str("under a day measured: ");
    }
    let _ = write!(
        basis,
        "a year on your tariff: this machine's load in each hour of the week, from {} measured \
         in {window}",
        super::interval::hours_text(covered)
    );
    if measured < WEEK_HOURS {
        let _ = write!(
            basis,
            " ({measured} of the week's {WEEK_HOURS} hours; the others at its mean, {mean:.1} W)"
        );
    }
    let _ = write!(
        basis,
        ", priced over the {YEAR_DAYS} days from {date} ({} on average{})",
        price_text(price, tariff.currency()),
        assumption.map(|a| format!("; {a}")).unwrap_or_default()
    );
    Ok(Some(Annual {
        kwh,
        kwh_ci95: ci_ratio.map(|r| kwh * r),
        cost,
        cost_ci95: ci_ratio.map(|r| cost * r),
        price_per_kwh: price,
        basis,
    }))
}

/// A year on the tariff of a machine that follows `schedule`, drawing `watts(mode)` in each
/// mode: each run of a mode on each of the 365 local days from the day of `day_ms`, priced at
/// the tariff in force then ([`price_year`], as [`on_tariff`] prices a measured load). `what`
/// names whose modes they are. A mode of the schedule that has no watts is
/// [`CostError::NoWatts`].
pub fn on_schedule(
    schedule: &Schedule,
    watts: &dyn Fn(&str) -> Option<f64>,
    tariff: &Tariff,
    day_ms: i64,
    what: &str,
) -> Result<Annual, CostError> {
    if let Some(m) = schedule.modes().iter().find(|m| watts(m).is_none()) {
        return Err(CostError::NoWatts {
            mode: m.clone(),
            what: what.to_owned(),
        });
    }
    let runs: Vec<(usize, usize, f64)> = schedule
        .runs()
        .into_iter()
        .map(|(start, len, mode)| (start, len, watts(mode).unwrap_or(0.0)))
        .collect();
    let (year, first) = year_of_runs(&runs, tariff, day_ms)?;
    let (kwh, cost, assumption) = price_year(tariff, &year)?;
    let price = if kwh > 0.0 { cost / kwh } else { 0.0 };
    let hours = schedule
        .hours_a_week()
        .iter()
        .map(|(m, h)| format!("{m} {h:.0} h"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Annual {
        kwh,
        kwh_ci95: None,
        cost,
        cost_ci95: None,
        price_per_kwh: price,
        basis: format!(
            "a year on your tariff on the schedule \"{schedule}\" ({hours} a week) of {what}'s \
             modes, priced over the {YEAR_DAYS} days from {first} ({} on average{})",
            price_text(price, tariff.currency()),
            assumption.map(|a| format!("; {a}")).unwrap_or_default()
        ),
    })
}

/// Pieces of a year's load: `(start, end, W)`, UTC ms.
type Year = Vec<(i64, i64, f64)>;

/// A week of runs `(first local minute of the week, minutes, W)` as the 365 local days from
/// the day of `day_ms` hold them: `(start, end, W)` UTC ms, and that first day.
fn year_of_runs(
    runs: &[(usize, usize, f64)],
    tariff: &Tariff,
    day_ms: i64,
) -> Result<(Year, chrono::NaiveDate), CostError> {
    let tz = tariff.tz();
    let first = DateTime::from_timestamp_millis(day_ms)
        .ok_or(TariffError::Timestamp(day_ms))?
        .with_timezone(&tz)
        .date_naive();
    let mut year: Year = Vec::with_capacity(runs.len() * 53);
    for date in first.iter_days().take(YEAR_DAYS as usize) {
        let midnight = tz.start_of_day(date).timestamp_millis();
        let utc = |minute: usize| -> i64 {
            let local =
                date.and_time(chrono::NaiveTime::MIN) + chrono::Duration::minutes(minute as i64);
            tz.from_local_datetime(&local)
                .earliest()
                .map_or(midnight + minute as i64 * 60_000, |t| t.timestamp_millis())
        };
        let day0 = date.weekday().num_days_from_monday() as usize * 24 * 60;
        for &(start, len, w) in runs {
            let (a, b) = (start.max(day0), (start + len).min(day0 + 24 * 60));
            if a < b {
                year.push((utc(a - day0), utc(b - day0), w));
            }
        }
    }
    Ok((year, first))
}

/// A year on the tariff of a week's runs of power `(first local minute of the week,
/// minutes, W)`, over the 365 local days from the day of `day_ms`, each run priced at the
/// tariff in force then, by the same year pricing as [`on_schedule`] and [`on_tariff`]
/// (what sleeping would not draw, [`crate::analysis::sleep`]; the energy of each resume).
/// `what` is the basis's opening words. Runs may not overlap or cross a day's end.
pub fn on_week(
    runs: &[(usize, usize, f64)],
    tariff: &Tariff,
    day_ms: i64,
    what: &str,
) -> Result<Annual, CostError> {
    let (year, first) = year_of_runs(runs, tariff, day_ms)?;
    let (kwh, cost, assumption) = price_year(tariff, &year)?;
    let price = if kwh.abs() > 0.0 { cost / kwh } else { 0.0 };
    Ok(Annual {
        kwh,
        kwh_ci95: None,
        cost,
        cost_ci95: None,
        price_per_kwh: price,
        basis: format!(
            "{what}, priced over the {YEAR_DAYS} days from {first} ({} on average{})",
            price_text(price, tariff.currency()),
            assumption.map(|a| format!("; {a}")).unwrap_or_default()
        ),
    })
}

/// A year on the tariff of one watt in each hour of the week: the kWh and the cost of 1 W
/// drawn in every hour of the 365 local days from a day that falls in hour of the week `h`
/// ([`hour_of_week`]), and what was assumed where the price series ends. A year's cost is
/// linear in the watts of each hour, so a load shape's is `sum(W[h] * cost[h])`: the same
/// figure as pricing its 8,760 hours one by one (to rounding), in 168 products. The live
/// outputs price a year at every refresh, so the last one is kept ([`UnitYear::cached`])
/// until the day or the tariff changes.
#[derive(Debug, Clone, PartialEq)]
struct UnitYear {
    kwh: [f64; WEEK_HOURS],
    cost: [f64; WEEK_HOURS],
    assumption: Option<String>,
}

/// The last [`UnitYear`] priced: its first day and tariff, and it.
type LastUnitYear = Option<(chrono::NaiveDate, Tariff, UnitYear)>;
static LAST_UNIT_YEAR: std::sync::Mutex<LastUnitYear> = std::sync::Mutex::new(None);

impl UnitYear {
    /// The unit year of `tariff` from local day `date`, priced again only when either
    /// differs from the last one asked for.
    fn cached(tariff: &Tariff, date: chrono::NaiveDate) -> Result<Self, CostError> {
        // A poisoned memo is only a memo: price again.
        let mut last = LAST_UNIT_YEAR
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((d, t, unit)) = last.as_ref()
            && *d == date
            && t == tariff
        {
            return Ok(unit.clone());
        }
        let unit = Self::price_from(tariff, date)?;
        *last = Some((date, tariff.clone(), unit.clone()));
        Ok(unit)
    }

    /// Prices 1 W over each hour of the 365 days from `date`, grouped by hour of the week.
    fn price_from(tariff: &Tariff, date: chrono::NaiveDate) -> Result<Self, CostError> {
        let tz = tariff.tz();
        let start = tz.start_of_day(date).timestamp_millis();
        let mut groups: Vec<Year> = (0..WEEK_HOURS).map(|_| Vec::with_capacity(53)).collect();
        for i in 0..YEAR_DAYS * 24 {
            let t = start + i * HOUR_MS;
            groups[hour_of_week(t, tz).unwrap_or(0)].push((t, t + HOUR_MS, 1.0));
        }
        let end = start + YEAR_DAYS * 24 * HOUR_MS;
        let mut unit = Self {
            kwh: [0.0; WEEK_HOURS],
            cost: [0.0; WEEK_HOURS],
            assumption: None,
        };
        let mut profile = None;
        for (h, group) in groups.iter().enumerate() {
            let (kwh, cost, assumption) = price_year_to(tariff, group, end, &mut profile)?;
            unit.kwh[h] = kwh;
            unit.cost[h] = cost;
            unit.assumption = unit.assumption.or(assumption);
        }
        Ok(unit)
    }

    /// kWh and cost of a year drawing `watts(h)` in each hour of the week `h`.
    fn price(&self, watts: impl Fn(usize) -> f64) -> (f64, f64) {
        (0..WEEK_HOURS).fold((0.0, 0.0), |(kwh, cost), h| {
            let w = watts(h);
            (kwh + w * self.kwh[h], cost + w * self.cost[h])
        })
    }
}

/// kWh and cost of a year of `(start, end, W)` (runs of a schedule, hours of a week),
/// and what was assumed where the tariff's price series ends within it.
fn price_year(
    tariff: &Tariff,
    year: &[(i64, i64, f64)],
) -> Result<(f64, f64, Option<String>), CostError> {
    price_year_to(tariff, year, year.last().map_or(0, |b| b.1), &mut None)
}

/// [`price_year`] of pieces of a year that ends at `end` (the pieces may be a part of it),
/// the hour-of-day prices after the series ends kept in `profile` once found.
fn price_year_to(
    tariff: &Tariff,
    year: &[(i64, i64, f64)],
    end: i64,
    profile: &mut Option<[f64; 24]>,
) -> Result<(f64, f64, Option<String>), CostError> {
    let wh = |&(a, b, w): &(i64, i64, f64)| (a, b, w * (b - a) as f64 / 3_600_000.0);
    let series = tariff
        .series()
        .and_then(|s| s.window().map(|w| (s.sources().join(", "), w)));
    let Some((names, (from, to))) = series.filter(|(_, (_, to))| *to < end) else {
        let buckets: Vec<_> = year.iter().map(wh).collect();
        let c = cost_of_energy(tariff, &buckets)?;
        return Ok((c.kwh, c.energy_cost, None));
    };
    let day = |ms: i64| {
        DateTime::from_timestamp_millis(ms)
            .map(|d| {
                d.with_timezone(&tariff.tz())
                    .format("%Y-%m-%d %H:%M")
                    .to_string()
            })
            .unwrap_or_default()
    };
    // Before the series ends, the tariff as it is; after, a price per hour of the day.
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for &(a, b, w) in year {
        if a < to {
            before.push(wh(&(a, b.min(to), w)));
        }
        if b > to {
            after.push((a.max(to), b, w));
        }
    }
    let c = cost_of_energy(tariff, &before)?;
    let (mut kwh, mut cost) = (c.kwh, c.energy_cost);
    if to - from < MIN_SERIES_WINDOW_MS {
        let c = cost_of_energy(tariff, &after.iter().map(wh).collect::<Vec<_>>())?;
        return Ok((
            kwh + c.kwh,
            cost + c.energy_cost,
            Some(format!(
                "after the price series ({names}) ends at {}, under a day long, the configured \
                 prices",
                day(to)
            )),
        ));
    }
    let profile = match profile {
        Some(p) => *p,
        None => *profile.insert(hour_of_day_prices(tariff, from, to)?),
    };
    for piece in &after {
        let (a, _, e) = wh(piece);
        let local = DateTime::from_timestamp_millis(a)
            .ok_or(TariffError::Timestamp(a))?
            .with_timezone(&tariff.tz());
        kwh += e / 1000.0;
        cost += e / 1000.0 * profile[local.hour() as usize];
    }
    Ok((
        kwh,
        cost,
        Some(format!(
            "after the price series ({names}) ends at {}, each hour at its hour of the day's \
             mean price in the series",
            day(to)
        )),
    ))
}

/// The time-weighted mean price of each local hour of the day over `[from, to)`.
fn hour_of_day_prices(tariff: &Tariff, from: i64, to: i64) -> Result<[f64; 24], CostError> {
    let mut sum = [(0.0, 0_i64); 24];
    let mut t = from;
    while t < to {
        let (price, next) = tariff.segment(t)?;
        let until = next
            .min(to)
            .min(crate::store::floor_to(t, HOUR_MS) + HOUR_MS);
        let local = DateTime::from_timestamp_millis(t)
            .ok_or(TariffError::Timestamp(t))?
            .with_timezone(&tariff.tz());
        let bin = &mut sum[local.hour() as usize];
        bin.0 += price * (until - t) as f64;
        bin.1 += until - t;
        t = until;
    }
    let overall = tariff.mean_price(from, to)?;
    Ok(sum.map(|(p, ms)| if ms > 0 { p / ms as f64 } else { overall }))
}

#[cfg(test)]
mod tests;
