//! Money for estimated energy (what each service costs, [`crate::services`]): an estimate's
//! hourly energy priced by the tariff at each hour's own prices, then projected from the
//! hours it covers to a day, a month and a year. Kept apart from measured energy: these
//! figures are always estimates, with their interval.
//!
//! Units: Wh in, kWh and the tariff's currency out; a `ci95` is a 95 % half-width.

use serde::Serialize;

use super::LedgerError;
use crate::ledger::price::{HOURS_PER_YEAR, cost_of_energy};
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
    /// The same share of the interval as `watts_ci95` is of `watts`.
    pub cost_per_year_ci95: Option<f64>,
}

/// Prices `hours` (`(hour start UTC ms, Wh)`) that cover `covered_hours` of time, with
/// `ci95_wh` the half-width of their total, and projects them from that time.
pub fn project(
    tariff: &Tariff,
    hours: &[(i64, f64)],
    covered_hours: f64,
    ci95_wh: Option<f64>,
) -> Result<Option<EstimatedCost>, LedgerError> {
    if covered_hours <= 0.0 {
        return Ok(None);
    }
    let buckets: Vec<(i64, i64, f64)> = hours
        .iter()
        .map(|&(h, wh)| (h, h + HOUR_MS, wh.max(0.0)))
        .collect();
    let priced = cost_of_energy(tariff, &buckets)?;
    let watts = priced.kwh * 1000.0 / covered_hours;
    let cost_per_hour = priced.energy_cost / covered_hours;
    let cost_per_year = cost_per_hour * HOURS_PER_YEAR;
    let watts_ci95 = ci95_wh.map(|ci| ci / covered_hours);
    Ok(Some(EstimatedCost {
        watts,
        watts_ci95,
        kwh_per_day: watts * 24.0 / 1000.0,
        cost_per_day: cost_per_hour * 24.0,
        cost_per_month: cost_per_year / 12.0,
        cost_per_year,
        kwh_per_year: watts * HOURS_PER_YEAR / 1000.0,
        cost_per_year_ci95: watts_ci95
            .filter(|_| watts > 0.0)
            .map(|ci| cost_per_year * ci / watts),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_a_cpu_at_fifteen_watts_a_cpu_costs_by_hand_arithmetic() {
        let tariff = Tariff::simple("GBP", 0.30, 0.0, vec![], crate::zone::Zone::UTC).unwrap();
        // Two hours at 7.5 W.
        let got = project(&tariff, &[(0, 7.5), (HOUR_MS, 7.5)], 2.0, Some(1.0))
            .unwrap()
            .unwrap();
        assert!((got.watts - 7.5).abs() < 1e-9);
        assert!((got.kwh_per_year - 65.7).abs() < 1e-9);
        assert!((got.cost_per_year - 19.71).abs() < 1e-9);
        assert!((got.cost_per_day - 0.054).abs() < 1e-9);
        assert_eq!(got.watts_ci95, Some(0.5));
        assert!(project(&tariff, &[], 0.0, None).unwrap().is_none());
    }
}
