//! Money for estimated energy (what each service costs, [`crate::services`], and the
//! calibration's estimate of the wall): an estimate's hourly energy as a load by hour of the
//! week, priced over a year of the tariff as a measured load is. Kept apart from measured energy: these
//! figures are always estimates, with their interval.
//!
//! Units: Wh in, kWh and the tariff's currency out; a `ci95` is a 95 % half-width.

use serde::Serialize;

use super::LedgerError;
use super::annual::on_tariff;
use super::load_shape::LoadShape;
use crate::store::HOUR_MS;
use crate::tariff::Tariff;

/// An estimated load's energy and money per day, month and year.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EstimatedCost {
    /// Mean W over the covered hours.
    pub watts: f64,
    pub watts_ci95: Option<f64>,
    pub kwh_per_day: f64,
    pub cost_per_day: f64,
    pub cost_per_month: f64,
    pub cost_per_year: f64,
    pub kwh_per_year: f64,
    /// The year's 95 % half-width: the estimate's share of its energy, widened for the
    /// hours of the week it does not cover.
    pub cost_per_year_ci95: Option<f64>,
}

/// Prices `hours` (`(hour start UTC ms, Wh, ms of it estimated)`), with `ci95_wh` the
/// half-width of their total: its mean watts over the time estimated, and a year on the
/// tariff at its load by hour of the week ([`super::annual::on_tariff`], as every measured
/// year is priced), from the end of its last hour; a day and a month are that year's 365th
/// and 12th.
pub fn project(
    tariff: &Tariff,
    hours: &[(i64, f64, f64)],
    ci95_wh: Option<f64>,
) -> Result<Option<EstimatedCost>, LedgerError> {
    let covered_ms: f64 = hours.iter().map(|h| h.2.max(0.0)).sum();
    if covered_ms <= 0.0 {
        return Ok(None);
    }
    let covered_hours = covered_ms / HOUR_MS as f64;
    let wh: f64 = hours.iter().map(|h| h.1.max(0.0)).sum();
    let watts = wh / covered_hours;
    let shape = LoadShape::of_hours(
        hours.iter().map(|&(h, wh, ms)| (h, wh.max(0.0), ms)),
        tariff.tz(),
    );
    let last = hours.iter().map(|h| h.0 + HOUR_MS).max().unwrap_or(0);
    let ratio = ci95_wh.filter(|_| wh > 0.0).map(|ci| ci / wh);
    let Some(year) = on_tariff(&shape, tariff, last, ratio, "the hours estimated")? else {
        return Ok(None);
    };
    let watts_ci95 = ci95_wh.map(|ci| ci / covered_hours);
    Ok(Some(EstimatedCost {
        watts,
        watts_ci95,
        kwh_per_day: watts * 24.0 / 1000.0,
        cost_per_day: year.cost / super::annual::YEAR_DAYS as f64,
        cost_per_month: year.cost / 12.0,
        cost_per_year: year.cost,
        kwh_per_year: year.kwh,
        cost_per_year_ci95: year.cost_ci95,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_a_cpu_at_fifteen_watts_a_cpu_costs_by_hand_arithmetic() {
        let tariff = Tariff::simple("GBP", 0.30, 0.0, vec![], crate::zone::Zone::UTC).unwrap();
        // Two hours at 7.5 W.
        let got = project(
            &tariff,
            &[(0, 7.5, 3.6e6), (HOUR_MS, 7.5, 3.6e6)],
            Some(1.0),
        )
        .unwrap()
        .unwrap();
        assert!((got.watts - 7.5).abs() < 1e-9);
        assert!((got.kwh_per_year - 65.7).abs() < 1e-9);
        assert!((got.cost_per_year - 19.71).abs() < 1e-9);
        assert!((got.cost_per_day - 0.054).abs() < 1e-9);
        assert_eq!(got.watts_ci95, Some(0.5));
        assert!(project(&tariff, &[], None).unwrap().is_none());
    }
}
