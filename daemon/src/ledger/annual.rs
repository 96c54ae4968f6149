//! The annual figures, named once. Every surface (`wattson status`, the MQTT state,
//! `/metrics`, the live page, every report format) shows one of these two and words its
//! basis with [`Annual::basis`], so "what does this box cost a year" has one answer per
//! name:
//!
//! - **projected as measured** ([`projected`]): a window's energy priced at the prices of
//!   its own hours (its duty cycle by time of day, the price series' slots it holds), scaled
//!   to a year by the time the meter covered: what a year costs if it goes on as that window
//!   did. The live outputs use the last 7 days ([`PROJECTION_DAYS`]); a report uses its
//!   window.
//! - **modelled** ([`modelled`]): kWh from modes times hours (a sweep fit over the
//!   utilisation history, a configuration's modes and duty cycle), at the year's mean price
//!   of the tariff (a modelled load has no hours of its own to price).
//! - **a candidate on this load** ([`candidate`]): another machine's power curve at the
//!   load this machine's utilisation history asks of it, hour by hour, priced at the prices
//!   of those hours and scaled to a year by the hours of history, exactly as the projection
//!   is (see [`super::candidate`]).
//!
//! Units: kWh, the tariff's currency, hours.

use serde::Serialize;

use crate::analysis::cost::HOURS_PER_YEAR;

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

/// `window_kwh` costing `window_cost` over `covered_hours` of `window` (words: "the last
/// 7 days", "2026-11-01 to 2026-12-01"), projected to a year; `ci_ratio` is the relative
/// 95 % half-width of its mean power. `None` without covered time.
pub fn projected(
    window_kwh: f64,
    window_cost: f64,
    covered_hours: f64,
    ci_ratio: Option<f64>,
    window: &str,
    currency: &str,
) -> Option<Annual> {
    if covered_hours.is_nan() || covered_hours <= 0.0 {
        return None;
    }
    let scale = HOURS_PER_YEAR / covered_hours;
    let (kwh, cost) = (window_kwh * scale, window_cost * scale);
    let price = if kwh > 0.0 { cost / kwh } else { 0.0 };
    Some(Annual {
        kwh,
        kwh_ci95: ci_ratio.map(|r| kwh * r.abs()),
        cost,
        cost_ci95: ci_ratio.map(|r| cost * r.abs()),
        price_per_kwh: price,
        basis: format!(
            "projected from {} measured in {window}, at the prices of those hours ({})",
            super::interval::hours_text(covered_hours),
            price_text(price, currency)
        ),
    })
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

/// What candidate `name` would use (`window_kwh`) and cost (`window_cost`) over `hours` of
/// this machine's utilisation history, projected to a year. `None` without hours.
pub fn candidate(
    window_kwh: f64,
    window_cost: f64,
    hours: f64,
    name: &str,
    currency: &str,
) -> Option<Annual> {
    let mut a = projected(window_kwh, window_cost, hours, None, "", currency)?;
    a.basis = format!(
        "a candidate on this load: {name}'s curve at the load this machine's utilisation \
         asked for over {hours:.1} h, at the prices of those hours ({})",
        price_text(a.price_per_kwh, currency)
    );
    Some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projection_scales_energy_and_its_own_prices_to_a_year() {
        let a = projected(2.4, 0.48, 24.0, Some(0.1), "the last 7 days", "GBP").unwrap();
        assert!((a.kwh - 876.0).abs() < 1e-9);
        assert!((a.cost - 175.2).abs() < 1e-9);
        assert!((a.price_per_kwh - 0.2).abs() < 1e-12);
        assert_eq!(a.cost_ci95.map(|c| (c * 100.0).round()), Some(1752.0));
        assert_eq!(
            a.basis,
            "projected from 24.0 h measured in the last 7 days, at the prices of those hours \
             (0.2000 GBP/kWh)"
        );
        assert!(projected(1.0, 1.0, 0.0, None, "x", "GBP").is_none());
        let m = modelled(
            100.0,
            None,
            "its modes",
            0.245,
            "the configured prices",
            "GBP",
        );
        assert!((m.cost - 24.5).abs() < 1e-9);
        assert!(m.basis.contains("0.2450 GBP/kWh"), "{}", m.basis);
    }
}
