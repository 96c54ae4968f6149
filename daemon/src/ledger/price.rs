//! Energy into money: the cost of measured energy, annual running cost of a constant
//! load, comparisons between configurations, and money formatting (small amounts in the
//! currency's minor unit: [`format_money_readable`]).
//!
//! Units: watts (W) for power, watt-hours (Wh) in energy buckets, kilowatt-hours (kWh) in
//! results, UTC milliseconds for timestamps, and the tariff's currency (an ISO 4217 code)
//! for money. A `ci95` is the half-width of a 95 % interval in the unit of its value.
//!
//! The standing charge is a fixed cost of the grid connection, paid whether or not the
//! machine runs, so it is reported beside the energy cost and never added to a machine's
//! running cost or to a saving.

use chrono::{DateTime, NaiveDate};
use serde::Serialize;
use thiserror::Error;

use crate::tariff::{PriceSource, Tariff, TariffError};

/// Why a cost cannot be computed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CostError {
    /// The tariff could not price an instant.
    #[error(transparent)]
    Tariff(#[from] TariffError),
    /// An energy bucket ends before it starts or holds a non-finite energy.
    #[error(
        "energy bucket {index} ({start_ms}..{end_ms} ms, {wh} Wh) is not a valid interval and energy"
    )]
    BadBucket {
        index: usize,
        start_ms: i64,
        end_ms: i64,
        wh: f64,
    },
    /// A power that is NaN or infinite.
    #[error("{watts} W is not a finite power")]
    BadWatts { watts: f64 },
    /// A mode of a schedule that `what` (a configuration) has no watts for.
    #[error(
        "no {mode} measured or entered for {what}: give it in its modes (`[[config]] modes = \
         {{ {mode} = W, ... }}`) to price it on this schedule"
    )]
    NoWatts { mode: String, what: String },
}

/// Hours in the year the reports use: 365 days of 24 hours.
///
/// A running-cost figure should not jump by a day's worth every fourth year, and the
/// reference figure every owner checks (240 W all year = 2102.4 kWh = GBP 189.22 at 0.09
/// per kWh, in DESIGN.md) is a 365-day year. A leap year's figure is available from
/// [`annual_kwh_for_year`] (240 W gives 2108.16 kWh in 2028).
pub const HOURS_PER_YEAR: f64 = 8760.0;

/// kWh used in a 365-day year by a constant load of `watts`.
pub fn annual_kwh(watts: f64) -> f64 {
    watts * HOURS_PER_YEAR / 1000.0
}

/// kWh used in calendar year `year` (366 days in a leap year) by a constant load of `watts`.
pub fn annual_kwh_for_year(watts: f64, year: i32) -> f64 {
    let leap = NaiveDate::from_ymd_opt(year, 2, 29).is_some();
    let days = if leap { 366.0 } else { 365.0 };
    watts * days * 24.0 / 1000.0
}

/// Energy and cost at one price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriceBand {
    /// Currency per kWh.
    pub price_per_kwh: f64,
    /// kWh charged at this price.
    pub kwh: f64,
    /// Cost of that energy, in the tariff's currency.
    pub cost: f64,
}

/// The cost of a run of measured energy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostBreakdown {
    /// ISO 4217 code.
    pub currency: String,
    /// Total energy, kWh.
    pub kwh: f64,
    /// Cost of that energy, currency; excludes the standing charge.
    pub energy_cost: f64,
    /// Energy and cost per price, cheapest first.
    pub bands: Vec<PriceBand>,
    /// Local calendar days the buckets touch, first to last inclusive.
    pub days: u32,
    /// `days` times the standing charge per day, currency; reported separately.
    pub standing_charge: f64,
    /// Energy and cost by where the price came from: each price series by name, and
    /// `tariff` for the configured prices. Series first, in the tariff's order.
    pub sources: Vec<SourceShare>,
    /// kWh priced at the configured prices although the tariff has price series: energy in
    /// slots no series has a price for (the fallback).
    pub fallback_kwh: f64,
}

/// The energy and cost one price source priced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceShare {
    /// A price series' name, or `tariff` (the configured prices).
    pub source: String,
    pub kwh: f64,
    pub cost: f64,
}

/// Prices measured energy. Each bucket is `(start UTC ms, end UTC ms, Wh)`, its energy
/// assumed spread evenly over its interval; a bucket straddling a price boundary (a
/// time-of-use window, local midnight before a tariff change, a clock change) is split pro
/// rata and each part priced by its local time and the tariff of its local day. A bucket
/// with no duration is priced at its start. Buckets may come in any order.
pub fn cost_of_energy(
    tariff: &Tariff,
    buckets: &[(i64, i64, f64)],
) -> Result<CostBreakdown, CostError> {
    let mut bands: Vec<PriceBand> = Vec::new();
    // kWh and cost per price source: `None` the configured prices, `Some(i)` series i.
    let mut by_source: Vec<(Option<usize>, f64, f64)> = Vec::new();
    let mut add = |price: f64, wh: f64, from: PriceSource| {
        let kwh = wh / 1000.0;
        let key = match from {
            PriceSource::Configured => None,
            PriceSource::Series(i) => Some(i),
        };
        match by_source.iter_mut().find(|s| s.0 == key) {
            Some(s) => {
                s.1 += kwh;
                s.2 += kwh * price;
            }
            None => by_source.push((key, kwh, kwh * price)),
        }
        match bands.iter_mut().find(|b| b.price_per_kwh == price) {
            Some(b) => {
                b.kwh += kwh;
                b.cost += kwh * price;
            }
            None => bands.push(PriceBand {
                price_per_kwh: price,
                kwh,
                cost: kwh * price,
            }),
        }
    };
    // The current constant-price segment, reused while buckets fall inside it (a year of
    // minute buckets crosses only a few thousand boundaries).
    let mut seg: Option<(i64, i64, f64, PriceSource)> = None;
    let mut segment = |t: i64| -> Result<(f64, i64, PriceSource), CostError> {
        if let Some((s, e, p, from)) = seg
            && s <= t
            && t < e
        {
            return Ok((p, e, from));
        }
        let (p, e, from) = tariff.priced_segment(t)?;
        seg = Some((t, e, p, from));
        Ok((p, e, from))
    };
    let mut first: Option<i64> = None;
    let mut last: Option<i64> = None;
    for (index, &(start_ms, end_ms, wh)) in buckets.iter().enumerate() {
        if end_ms < start_ms || !wh.is_finite() {
            return Err(CostError::BadBucket {
                index,
                start_ms,
                end_ms,
                wh,
            });
        }
        first = Some(first.map_or(start_ms, |f| f.min(start_ms)));
        last = Some(last.map_or(end_ms, |l| l.max(end_ms)));
        if end_ms == start_ms {
            let (price, _, from) = segment(start_ms)?;
            add(price, wh, from);
            continue;
        }
        let span = (end_ms - start_ms) as f64;
        let mut t = start_ms;
        while t < end_ms {
            let (price, next, from) = segment(t)?;
            let until = next.min(end_ms);
            add(price, wh * (until - t) as f64 / span, from);
            t = until;
        }
    }
    by_source.sort_by_key(|s| s.0.unwrap_or(usize::MAX));
    let fallback_kwh = if tariff.series().is_some() {
        by_source
            .iter()
            .filter(|s| s.0.is_none())
            .map(|s| s.1)
            .sum()
    } else {
        0.0
    };
    let sources = by_source
        .iter()
        .map(|&(key, kwh, cost)| SourceShare {
            source: tariff.source_name(key.map_or(PriceSource::Configured, PriceSource::Series)),
            kwh,
            cost,
        })
        .collect();
    bands.sort_by(|a, b| a.price_per_kwh.total_cmp(&b.price_per_kwh));
    let days = match (first, last) {
        (Some(f), Some(l)) => {
            let day = |ms: i64| -> Result<NaiveDate, CostError> {
                let t = DateTime::from_timestamp_millis(ms).ok_or(TariffError::Timestamp(ms))?;
                Ok(t.with_timezone(&tariff.tz()).date_naive())
            };
            let last_day = day(if l > f { l - 1 } else { l })?;
            (last_day - day(f)?).num_days() as u32 + 1
        }
        _ => 0,
    };
    Ok(CostBreakdown {
        currency: tariff.currency().to_string(),
        kwh: bands.iter().map(|b| b.kwh).sum(),
        energy_cost: bands.iter().map(|b| b.cost).sum(),
        bands,
        days,
        standing_charge: f64::from(days) * tariff.standing_charge_per_day(),
        sources,
        fallback_kwh,
    })
}

/// Annual energy and running cost of a constant load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnnualFigure {
    /// The load, W.
    pub watts: f64,
    /// Half-width of the load's 95 % interval, W, where measured.
    pub watts_ci95: Option<f64>,
    /// kWh per 365-day year.
    pub kwh: f64,
    /// Half-width of the kWh's 95 % interval.
    pub kwh_ci95: Option<f64>,
    /// Energy cost per year, currency (no standing charge).
    pub cost: f64,
    /// Half-width of the cost's 95 % interval, currency.
    pub cost_ci95: Option<f64>,
    /// The time-weighted mean price the load pays, currency per kWh.
    pub mean_price_per_kwh: f64,
    /// ISO 4217 code.
    pub currency: String,
    /// Where the mean price came from when the tariff has price series: their window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_basis: Option<PriceBasis>,
}

/// The window of price series a mean price was taken over.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriceBasis {
    /// UTC ms.
    pub from_ms: i64,
    pub to_ms: i64,
    /// The series, in precedence order.
    pub sources: Vec<String>,
    /// Hours of the window no series priced (the configured price filled them).
    pub fallback_hours: f64,
    /// In words: "the time-weighted mean of agile from ... to ...".
    pub text: String,
}

/// Where `tariff`'s price series span less than a day: in words, for a note beside the
/// annual figures, which are then priced by the configured prices.
pub fn series_too_short(tariff: &Tariff) -> Option<String> {
    let set = tariff.series()?;
    let (from_ms, to_ms) = set.window()?;
    (to_ms - from_ms < MIN_SERIES_WINDOW_MS).then(|| {
        format!(
            "the price series ({}) span {}, less than a day: annual figures are at the \
             configured prices' mean over the year, not the series'",
            set.sources().join(", "),
            super::interval::hours_text((to_ms - from_ms) as f64 / 3_600_000.0)
        )
    })
}

/// The shortest price series window whose mean prices a year: a whole day, so that every
/// hour of the day is in it. A shorter one (an hour's import) would price the year at the
/// price of its hours.
pub const MIN_SERIES_WINDOW_MS: i64 = 24 * 3_600_000;

/// The mean price of `tariff` over its price series' window, and that window; `None`
/// without series, or when they span less than [`MIN_SERIES_WINDOW_MS`] (the configured
/// prices then price the year; see [`series_too_short`]).
pub fn series_mean_price(tariff: &Tariff) -> Result<Option<(f64, PriceBasis)>, CostError> {
    let Some(set) = tariff.series() else {
        return Ok(None);
    };
    let Some((from_ms, to_ms)) = set.window() else {
        return Ok(None);
    };
    if to_ms - from_ms < MIN_SERIES_WINDOW_MS {
        return Ok(None);
    }
    let mut t = from_ms;
    let (mut sum, mut fallback_ms) = (0.0, 0_i64);
    while t < to_ms {
        let (price, next, from) = tariff.priced_segment(t)?;
        let until = next.min(to_ms);
        sum += price * (until - t) as f64;
        if from == PriceSource::Configured {
            fallback_ms += until - t;
        }
        t = until;
    }
    let mean = sum / (to_ms - from_ms).max(1) as f64;
    let day = |ms: i64| {
        DateTime::from_timestamp_millis(ms).map_or_else(
            || format!("{ms} ms"),
            |d| d.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
    };
    let fallback_hours = fallback_ms as f64 / 3_600_000.0;
    let mut text = format!(
        "the time-weighted mean price of {} from {} to {} ({})",
        set.sources().join(", "),
        day(from_ms),
        day(to_ms),
        super::interval::hours_text((to_ms - from_ms) as f64 / 3_600_000.0)
    );
    if fallback_hours > 0.0 {
        use std::fmt::Write as _;
        let _ = write!(
            text,
            ", {} of it at the configured price (no slot)",
            super::interval::hours_text(fallback_hours)
        );
    }
    Ok(Some((
        mean,
        PriceBasis {
            from_ms,
            to_ms,
            sources: set.sources(),
            fallback_hours,
            text,
        },
    )))
}

/// Annual kWh and cost of a constant load of `watts` (with its 95 % half-width, if
/// measured) over the [`HOURS_PER_YEAR`] hours from local midnight of `reference` (a
/// skipped local midnight falls back to UTC midnight). When the tariff has price series,
/// the price is their time-weighted mean over the window they cover instead (a year
/// ahead has no slots yet), and [`AnnualFigure::price_basis`] states that window.
///
/// The cost integrates the tariff over that span, so time-of-use windows, clock changes and
/// dated tariff changes in the next year weigh in by the hours they cover. Energy and cost
/// are linear in watts, so their intervals are the watts interval scaled by the same
/// factors.
pub fn annual_cost(
    watts: f64,
    watts_ci95: Option<f64>,
    tariff: &Tariff,
    reference: NaiveDate,
) -> Result<AnnualFigure, CostError> {
    if !watts.is_finite() {
        return Err(CostError::BadWatts { watts });
    }
    let start = tariff.tz().start_of_day(reference).timestamp_millis();
    let end = start + (HOURS_PER_YEAR * 3_600_000.0) as i64;
    let (mean_price, price_basis) = match series_mean_price(tariff)? {
        Some((p, basis)) => (p, Some(basis)),
        None => (tariff.mean_price(start, end)?, None),
    };
    let kwh = annual_kwh(watts);
    let kwh_ci95 = watts_ci95.map(|c| annual_kwh(c.abs()));
    Ok(AnnualFigure {
        watts,
        watts_ci95,
        kwh,
        kwh_ci95,
        cost: kwh * mean_price,
        cost_ci95: kwh_ci95.map(|c| c * mean_price),
        mean_price_per_kwh: mean_price,
        currency: tariff.currency().to_string(),
        price_basis,
    })
}

/// What moving from one configuration (or mode) to another saves per year.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The configuration replaced.
    pub from: String,
    /// The configuration replacing it.
    pub to: String,
    /// kWh per year saved (negative when `to` uses more).
    pub annual_kwh_saved: f64,
    /// Money per year saved, currency (negative when `to` costs more).
    pub annual_saving: f64,
    /// Half-width of the saving's 95 % interval, where both figures have one (the two
    /// measurements are independent, so the half-widths add in quadrature).
    pub annual_saving_ci95: Option<f64>,
    /// Years for the saving to repay `upgrade_cost`; `None` without an upgrade cost or
    /// when nothing is saved.
    pub payback_years: Option<f64>,
    /// kg of CO2 a year saved, given the grid's carbon intensity.
    pub co2_kg_saved: Option<f64>,
    /// ISO 4217 code.
    pub currency: String,
}

/// Compares two annual figures priced by the same tariff. `upgrade_cost` is what moving to
/// `to` costs (currency); `grid_g_per_kwh` is the grid's carbon intensity (g CO2 per kWh).
pub fn compare(
    from: &str,
    from_figure: &AnnualFigure,
    to: &str,
    to_figure: &AnnualFigure,
    upgrade_cost: Option<f64>,
    grid_g_per_kwh: Option<f64>,
) -> Comparison {
    let annual_kwh_saved = from_figure.kwh - to_figure.kwh;
    let annual_saving = from_figure.cost - to_figure.cost;
    let annual_saving_ci95 = match (from_figure.cost_ci95, to_figure.cost_ci95) {
        (Some(a), Some(b)) => Some(a.hypot(b)),
        _ => None,
    };
    let payback_years = upgrade_cost
        .filter(|c| c.is_finite() && *c >= 0.0)
        .filter(|_| annual_saving > 0.0)
        .map(|c| c / annual_saving);
    Comparison {
        from: from.to_string(),
        to: to.to_string(),
        annual_kwh_saved,
        annual_saving,
        annual_saving_ci95,
        payback_years,
        co2_kg_saved: grid_g_per_kwh.map(|g| annual_kwh_saved * g / 1000.0),
        currency: from_figure.currency.clone(),
    }
}

/// `amount` rounded to 2 decimals, half away from zero, as the decimal it prints as:
/// 189.216 -> "189.22", 1.005 -> "1.01", -2.675 -> "-2.68". Rounding the shortest decimal
/// that round-trips the `f64`, not its binary value, is what makes 1.005 round up the way
/// a person would. Never prints "-0.00".
fn round_2dp(amount: f64) -> String {
    let digits = format!("{}", amount.abs());
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((&digits, ""));
    let mut frac: Vec<u8> = frac_part
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .collect();
    let round_up = frac[2] >= b'5';
    frac.truncate(2);
    let mut all: Vec<u8> = int_part.bytes().chain(frac).collect();
    if round_up {
        let mut i = all.len();
        loop {
            if i == 0 {
                all.insert(0, b'1');
                break;
            }
            i -= 1;
            if all[i] == b'9' {
                all[i] = b'0';
            } else {
                all[i] += 1;
                break;
            }
        }
    }
    let split = all.len() - 2;
    let text = format!(
        "{}.{}",
        String::from_utf8_lossy(&all[..split]),
        String::from_utf8_lossy(&all[split..])
    );
    let zero = all.iter().all(|d| *d == b'0');
    if amount < 0.0 && !zero {
        format!("-{text}")
    } else {
        text
    }
}

/// `amount` rounded to 2 decimals, half away from zero (see [`format_money`]). Non-finite
/// amounts are returned unchanged.
pub fn round_money(amount: f64) -> f64 {
    if !amount.is_finite() {
        return amount;
    }
    round_2dp(amount).parse().unwrap_or(amount)
}

/// Money as "GBP 189.22": the ISO 4217 code, a space, the amount rounded to 2 decimals
/// half away from zero. A non-finite amount prints as "GBP n/a".
pub fn format_money(amount: f64, currency: &str) -> String {
    if amount.is_finite() {
        format!("{currency} {}", round_2dp(amount))
    } else {
        format!("{currency} n/a")
    }
}

/// Money with the currency's symbol where it has a common one ("£189.22", "-€3.50",
/// "$0.10"), else as [`format_money`].
pub fn format_money_symbol(amount: f64, currency: &str) -> String {
    let symbol = match currency {
        "GBP" => "£",
        "EUR" => "€",
        "USD" => "$",
        "JPY" => "¥",
        _ => return format_money(amount, currency),
    };
    if !amount.is_finite() {
        return format!("{symbol}n/a");
    }
    let text = round_2dp(amount);
    match text.strip_prefix('-') {
        Some(rest) => format!("-{symbol}{rest}"),
        None => format!("{symbol}{text}"),
    }
}

mod minor;
pub use minor::{MinorUnit, format_money_readable, minor_unit};

#[cfg(test)]
mod tests;
