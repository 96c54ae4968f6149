//! What a candidate machine would cost a year on this machine's own measured load.
//!
//! The mapping: each hour of this machine's utilisation history is a share `u` of its
//! maximum throughput (busy CPUs / CPUs). A candidate serving the same work runs at
//! `u / perf_ratio` of its own maximum (`perf_ratio`: its throughput over this machine's),
//! capped at 100 %: an hour that would need more is an hour the candidate cannot carry,
//! counted and said, and priced at 100 % (so its cost is understated, never overstated).
//! Its watts in that hour come from its curve; those hours, by hour of the week, are a
//! year on this host's tariff and price series exactly as this host's own measured load is
//! ([`super::annual::candidate`] through [`super::annual::on_tariff`]).
//!
//! Without a utilisation history the candidate is priced at a constant load (active idle,
//! where a home server spends most of its time) at the year's mean price, as every modelled
//! mode is ([`super::annual::modelled`]).
//!
//! Units: load as a share of maximum throughput, W, Wh per bucket, kWh, the tariff's
//! currency, UTC ms.

use serde::Serialize;

use super::annual::{self, Annual};
use super::load_shape::LoadShape;
use crate::analysis::candidate::Curve;
use crate::ledger::price::{CostError, HOURS_PER_YEAR};
use crate::tariff::Tariff;

const MS_PER_HOUR: f64 = 3_600_000.0;
/// A required load this far above 100 % is still carried (rounding of busy shares).
const OVER_TOLERANCE: f64 = 1e-9;

/// A candidate's year on one load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateYear {
    pub annual: Annual,
    /// Hours of utilisation history the figure rests on (0: a constant load).
    pub hours: f64,
    /// The candidate's time-weighted mean load, share of its maximum (after the cap).
    pub mean_load: f64,
    /// The most the load asked of it in any hour, share of its maximum (before the cap).
    pub peak_load: f64,
    /// Hours whose load it cannot carry (over 100 % of its maximum).
    pub over_hours: f64,
    /// Energy per hour of history, `(start UTC ms, end UTC ms, Wh)`: for CO2 per slot.
    #[serde(skip)]
    pub energy: Vec<(i64, i64, f64)>,
}

impl CandidateYear {
    /// Whether it carries the load in every hour.
    pub fn carries(&self) -> bool {
        self.over_hours == 0.0
    }
}

/// Candidate `name` (its `curve`, `perf_ratio` times this machine's throughput) over
/// `share`: this machine's utilisation history, `(start UTC ms, end UTC ms, share of its
/// maximum throughput 0..=1)`, priced by `tariff`. `None` when the history holds no hour.
pub fn on_history(
    name: &str,
    curve: &Curve,
    perf_ratio: f64,
    share: &[(i64, i64, f64)],
    tariff: &Tariff,
) -> Result<Option<CandidateYear>, CostError> {
    let ratio = if perf_ratio.is_finite() && perf_ratio > 0.0 {
        perf_ratio
    } else {
        1.0
    };
    let (mut ms, mut load_ms, mut over_ms, mut peak) = (0.0, 0.0, 0.0, 0.0_f64);
    let mut energy = Vec::with_capacity(share.len());
    for &(s, e, u) in share {
        if e <= s || !u.is_finite() {
            continue;
        }
        let d = (e - s) as f64;
        let need = u.max(0.0) / ratio;
        peak = peak.max(need);
        if need > 1.0 + OVER_TOLERANCE {
            over_ms += d;
        }
        let load = need.min(1.0);
        ms += d;
        load_ms += load * d;
        energy.push((s, e, curve.watts_at(load) * d / MS_PER_HOUR));
    }
    if ms <= 0.0 {
        return Ok(None);
    }
    let hours = ms / MS_PER_HOUR;
    let by_hour = LoadShape::new(
        energy.iter().map(|&(s, e, wh)| (s, e, wh, e - s)),
        tariff.tz(),
    );
    let last = energy.iter().map(|b| b.1).max().unwrap_or(0);
    let Some(annual) = annual::candidate(&by_hour, tariff, last, hours, name)? else {
        return Ok(None);
    };
    Ok(Some(CandidateYear {
        annual,
        hours,
        mean_load: load_ms / ms,
        peak_load: peak,
        over_hours: over_ms / MS_PER_HOUR,
        energy,
    }))
}

/// Candidate `name` at a constant `load` (share of its maximum, after `perf_ratio`) all
/// year, at `year_price` (`price_from`: where that price comes from).
pub fn at_constant_load(
    name: &str,
    curve: &Curve,
    load: f64,
    year_price: f64,
    price_from: &str,
    currency: &str,
) -> CandidateYear {
    let over = load > 1.0 + OVER_TOLERANCE;
    let l = load.clamp(0.0, 1.0);
    let watts = curve.watts_at(l);
    let what = if l == 0.0 {
        format!("{name}'s curve at active idle all year ({watts:.1} W)")
    } else {
        format!(
            "{name}'s curve at {:.0} % of its maximum all year ({watts:.1} W)",
            l * 100.0
        )
    };
    CandidateYear {
        annual: annual::modelled(
            watts * HOURS_PER_YEAR / 1000.0,
            None,
            &what,
            year_price,
            price_from,
            currency,
        ),
        hours: 0.0,
        mean_load: l,
        peak_load: load.max(0.0),
        over_hours: if over { HOURS_PER_YEAR } else { 0.0 },
        energy: Vec::new(),
    }
}

/// A hand table's stated figures against the arithmetic: `watts` all year stated to cost
/// `stated_cost` at `stated_price` per kWh.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatedCheck {
    pub watts: f64,
    /// kWh a year at `watts` (8760 h).
    pub annual_kwh: f64,
    pub stated_annual_cost: f64,
    pub stated_price_per_kwh: Option<f64>,
    /// `annual_kwh` x the stated price: what the stated price really gives.
    pub cost_at_stated_price: Option<f64>,
    /// `stated_annual_cost / annual_kwh`: the price the stated cost implies.
    pub implied_price_per_kwh: f64,
}

/// The arithmetic of a stated annual cost of a constant `watts`.
pub fn stated_check(watts: f64, stated_cost: f64, stated_price: Option<f64>) -> StatedCheck {
    let annual_kwh = watts * HOURS_PER_YEAR / 1000.0;
    StatedCheck {
        watts,
        annual_kwh,
        stated_annual_cost: stated_cost,
        stated_price_per_kwh: stated_price,
        cost_at_stated_price: stated_price.map(|p| annual_kwh * p),
        implied_price_per_kwh: if annual_kwh > 0.0 {
            stated_cost / annual_kwh
        } else {
            f64::NAN
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::candidate::{CurveKind, CurvePoint};
    use crate::ledger::price::{format_money, round_money};

    fn curve(points: &[(f64, f64)], kind: CurveKind) -> Curve {
        Curve::new(
            points
                .iter()
                .map(|&(load, watts)| CurvePoint {
                    load,
                    watts,
                    ssj_ops: None,
                })
                .collect(),
            kind,
        )
        .unwrap()
    }

    fn flat(price: f64) -> Tariff {
        Tariff::simple("GBP", price, 0.0, Vec::new(), crate::zone::Zone::UTC).unwrap()
    }

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    #[test]
    fn a_known_profile_costs_the_hand_integral_of_the_curve() {
        let c = curve(&[(0.0, 62.0), (0.5, 110.0), (1.0, 180.0)], CurveKind::Hand);
        // 48 hours: 24 h at 10 %, 12 h at 50 %, 12 h at 80 %, of this machine's maximum.
        let h = 3_600_000;
        let mut share = Vec::new();
        for i in 0..48 {
            let u = match i {
                0..24 => 0.1,
                24..36 => 0.5,
                _ => 0.8,
            };
            share.push((T0 + i * h, T0 + (i + 1) * h, u));
        }
        // perf_ratio 2: the candidate runs at 5 %, 25 %, 40 %.
        let y = on_history("c", &c, 2.0, &share, &flat(0.09))
            .unwrap()
            .unwrap();
        let w = |l: f64| {
            if l <= 0.5 {
                62.0 + (110.0 - 62.0) * l / 0.5
            } else {
                110.0 + (180.0 - 110.0) * (l - 0.5) / 0.5
            }
        };
        let wh = 24.0 * w(0.05) + 12.0 * w(0.25) + 12.0 * w(0.40);
        let annual_kwh = wh / 1000.0 * 8760.0 / 48.0;
        assert!((y.annual.kwh - annual_kwh).abs() / annual_kwh < 1e-12);
        assert_eq!(round_money(y.annual.cost), round_money(annual_kwh * 0.09));
        assert!(y.carries());
        assert!((y.peak_load - 0.4).abs() < 1e-12);
        assert!(
            y.annual.basis.contains("a candidate on this load"),
            "{}",
            y.annual.basis
        );
    }

    #[test]
    fn an_hour_beyond_the_candidates_maximum_is_capped_and_counted() {
        let c = curve(&[(0.0, 20.0), (1.0, 100.0)], CurveKind::SpecTwoPoint);
        let h = 3_600_000;
        let share = vec![(T0, T0 + h, 0.9), (T0 + h, T0 + 2 * h, 0.3)];
        let y = on_history("small", &c, 0.5, &share, &flat(0.1))
            .unwrap()
            .unwrap();
        assert!(!y.carries());
        assert_eq!(y.over_hours, 1.0);
        assert!((y.peak_load - 1.8).abs() < 1e-12);
        // 1 h at 100 % (capped) + 1 h at 60 %: 100 + 68 Wh.
        assert!((y.annual.kwh - 0.168 * 8760.0 / 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_seeds_example_saves_141_91_and_pays_back_in_2_8_years() {
        // DESIGN's table: the old box idles at 240 W; a candidate at 60 W costs GBP 400;
        // 0.09 per kWh.
        let c = curve(&[(0.0, 60.0), (1.0, 60.0)], CurveKind::Hand);
        let new = at_constant_load("new", &c, 0.0, 0.09, "the configured price", "GBP");
        let old_cost = 240.0 * 8760.0 / 1000.0 * 0.09;
        assert_eq!(format_money(old_cost, "GBP"), "GBP 189.22");
        let saving = old_cost - new.annual.cost;
        assert_eq!(format_money(saving, "GBP"), "GBP 141.91");
        assert_eq!(format!("{:.1}", 400.0 / saving), "2.8");
    }

    #[test]
    fn a_stated_table_shows_its_arithmetic_and_the_price_it_implies() {
        let s = stated_check(240.0, 137.0, Some(0.09));
        assert_eq!(s.annual_kwh, 2102.4);
        assert_eq!(
            format_money(s.cost_at_stated_price.unwrap(), "GBP"),
            "GBP 189.22"
        );
        assert_eq!(format!("{:.3}", s.implied_price_per_kwh), "0.065");
    }
}
