//! The real-tariff section's time of day: the measured duty cycle's mean watts by local hour
//! of day, each hour priced at the tariff's time-weighted mean price for that hour over its
//! price series' window, as a year (365 of each hour). Hours the meter or the series did not
//! cover take the overall mean, and the basis says how many.
//!
//! Units: W, kWh, the tariff's currency, UTC ms; hours are local to the tariff's zone.

use std::fmt::Write as _;

use chrono::{DateTime, Timelike as _, Utc};
use serde::Serialize;

use super::MS_PER_HOUR;
use crate::report::input::MeasuredInput;
use crate::report::model::ReportError;
use crate::tariff::Tariff;
use crate::tariff::series::SeriesSet;

/// Annual cost of the measured hour-of-day profile at the series' mean price per hour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeOfDayCost {
    /// 24 rows, local hours 0..24 of the tariff's zone.
    pub hours: Vec<HourCost>,
    pub annual_kwh: f64,
    pub annual_cost: f64,
    /// What the figure rests on, in words.
    pub basis: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HourCost {
    pub hour: u32,
    /// Mean W measured in this hour of the day.
    pub mean_watts: f64,
    /// Mean price in this hour of the day over the series' window, per kWh.
    pub mean_price: f64,
    pub annual_kwh: f64,
    pub annual_cost: f64,
}

/// The local hour of day of `ms` in the tariff's zone.
fn local_hour(tariff: &Tariff, ms: i64) -> Option<u32> {
    DateTime::<Utc>::from_timestamp_millis(ms).map(|t| t.with_timezone(&tariff.tz()).hour())
}

/// The measured energy's mean watts per local hour of day against the tariff's mean
/// price per local hour of day over its series' window.
pub(super) fn time_of_day(
    tariff: &Tariff,
    m: &MeasuredInput,
) -> Result<Option<TimeOfDayCost>, ReportError> {
    // Price x ms per local hour, in steps that never cross a price change or a quarter
    // hour (so zones with half-hour offsets split right).
    const STEP: i64 = 15 * 60_000;
    let Some((from, to)) = tariff.series().and_then(SeriesSet::window) else {
        return Ok(None);
    };
    let mut price_ms = [(0.0_f64, 0_i64); 24];
    let mut t = from;
    while t < to {
        let (price, next, _) = tariff.priced_segment(t).map_err(|e| ReportError::Cost {
            what: "the price series by hour of day".into(),
            source: e.into(),
        })?;
        let until = next.min(to).min((t.div_euclid(STEP) + 1) * STEP);
        if let Some(h) = local_hour(tariff, t) {
            price_ms[h as usize].0 += price * (until - t) as f64;
            price_ms[h as usize].1 += until - t;
        }
        t = until;
    }
    // Energy and covered time per local hour: a bucket's spread evenly over its span, so
    // an hour the meter covered for a minute counts a minute, not an hour at a tenth of
    // the power.
    let buckets: Vec<(i64, i64, f64, i64)> = if m.covered.is_empty() {
        m.energy
            .iter()
            .map(|&(s, e, wh)| (s, e, wh, e - s))
            .collect()
    } else {
        m.covered.clone()
    };
    let mut energy = [(0.0_f64, 0.0_f64); 24];
    for (s, e, wh, covered) in buckets {
        let mut t = s;
        while t < e {
            let until = e.min((t.div_euclid(STEP) + 1) * STEP);
            if let Some(h) = local_hour(tariff, t) {
                let share = (until - t) as f64 / (e - s) as f64;
                energy[h as usize].0 += wh * share;
                energy[h as usize].1 += covered as f64 * share;
            }
            t = until;
        }
    }
    let total_wh: f64 = energy.iter().map(|x| x.0).sum();
    let total_ms: f64 = energy.iter().map(|x| x.1).sum();
    if total_ms <= 0.0 {
        return Ok(None);
    }
    let mean_w = total_wh * MS_PER_HOUR / total_ms;
    let overall_price = price_ms.iter().map(|x| x.0).sum::<f64>()
        / price_ms.iter().map(|x| x.1).sum::<i64>().max(1) as f64;
    let mut filled = (0, 0);
    let hours: Vec<HourCost> = (0..24)
        .map(|h| {
            let (wh, ms) = energy[h];
            let w = if ms > 0.0 {
                wh * MS_PER_HOUR / ms
            } else {
                filled.0 += 1;
                mean_w
            };
            let (pm, pms) = price_ms[h];
            let p = if pms > 0 {
                pm / pms as f64
            } else {
                filled.1 += 1;
                overall_price
            };
            let kwh = w * 365.0 / 1000.0;
            HourCost {
                hour: h as u32,
                mean_watts: w,
                mean_price: p,
                annual_kwh: kwh,
                annual_cost: kwh * p,
            }
        })
        .collect();
    let mut basis = format!(
        "each local hour of day's mean measured watts x 365 h, at that hour's time-weighted \
         mean price over {}",
        tariff
            .series()
            .map(|s| s.sources().join(", "))
            .unwrap_or_default()
    );
    if filled.0 > 0 {
        let _ = write!(
            basis,
            "; {} hour(s) of the day were not measured and use the overall mean {mean_w:.1} W",
            filled.0
        );
    }
    if filled.1 > 0 {
        let _ = write!(
            basis,
            "; {} hour(s) of the day have no price and use the mean price",
            filled.1
        );
    }
    Ok(Some(TimeOfDayCost {
        annual_kwh: hours.iter().map(|h| h.annual_kwh).sum(),
        annual_cost: hours.iter().map(|h| h.annual_cost).sum(),
        hours,
        basis,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tariff::series::{Slot, SlotSeries};
    use crate::zone::Zone;

    const H: i64 = 3_600_000;

    /// A constant 100 W whose first hour the meter covered for a minute: the mean by hour
    /// of day is 100 W in every covered hour, not the first hour's 1.67 Wh spread over the
    /// whole hour (which made the year's figure a tenth of the truth on a short history).
    #[test]
    fn the_mean_watts_by_hour_of_day_are_over_covered_time() {
        let t0 = 1_764_633_600_000; // 2025-12-02T00:00Z
        let series = SlotSeries::new(
            "day",
            "GBP",
            vec![Slot {
                start_ms: t0,
                end_ms: t0 + 24 * H,
                value: 0.10,
            }],
        )
        .unwrap();
        let tariff = Tariff::simple("GBP", 0.10, 0.0, Vec::new(), Zone::UTC)
            .unwrap()
            .with_series(SeriesSet::new(vec![series]));
        let covered = vec![
            (t0, t0 + H, 100.0 / 60.0, 60_000),
            (t0 + H, t0 + 2 * H, 100.0, H),
        ];
        let m = MeasuredInput {
            from_ms: t0,
            to_ms: t0 + 2 * H,
            energy: covered.iter().map(|&(s, e, wh, _)| (s, e, wh)).collect(),
            covered_ms: 61 * 60_000,
            covered,
            ..MeasuredInput::default()
        };
        let t = time_of_day(&tariff, &m).unwrap().unwrap();
        for h in &t.hours {
            assert!((h.mean_watts - 100.0).abs() < 1e-9, "{h:?}");
        }
        assert!((t.annual_kwh - 876.0).abs() < 1e-6, "{}", t.annual_kwh);
        assert!((t.annual_cost - 87.6).abs() < 1e-6, "{}", t.annual_cost);
    }
}
