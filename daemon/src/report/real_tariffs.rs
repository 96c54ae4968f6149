//! The report's real-tariff section: how the measured energy was priced (per price series
//! slot, and how much fell back to the configured price), the annual cost of the measured
//! duty cycle by time of day against the series' price by time of day, the measured energy
//! and a year of the measured load ([`crate::ledger::annual::on_tariff`], as the measured
//! section's) under each tariff `--tariffs` names, with the cheapest named only where its
//! saving is larger than its interval and a day or more was measured, and CO2 per
//! carbon-intensity slot.
//!
//! Units: kWh, W, the tariff's currency, kg CO2; the CO2 and time-of-day figures scale the
//! measured window's covered time to [`HOURS_PER_YEAR`] hours.

use std::fmt::Write as _;

use chrono::{DateTime, Timelike as _, Utc};
use serde::Serialize;

use super::input::MeasuredInput;
use super::model::ReportError;
use crate::ledger::price::{
    HOURS_PER_YEAR, PriceBasis, SourceShare, cost_of_energy, series_mean_price,
};
use crate::tariff::Tariff;
use crate::tariff::series::{CarbonFigure, SeriesSet, carbon_of_energy};

const MS_PER_HOUR: f64 = 3_600_000.0;

/// A tariff to price the measured energy under (`--tariffs`).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTariff {
    /// `current`, `tariff`, an `[[tariff.alternative]]`'s name, or a series' name.
    pub name: String,
    /// Where it comes from, in words.
    pub origin: String,
    pub tariff: Tariff,
}

/// The section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TariffReport {
    /// The measured energy by what priced it (series by name, `tariff` for the configured
    /// prices).
    pub priced_by: Vec<SourceShare>,
    /// kWh priced at the configured price because no series slot covered them.
    pub fallback_kwh: f64,
    /// The window of price series the annual figures' mean price comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_basis: Option<PriceBasis>,
    /// The measured duty cycle by local hour of day against the price by hour of day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_of_day: Option<TimeOfDayCost>,
    /// The measured energy under each tariff asked for, in the order asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comparison: Vec<TariffRow>,
    /// The cheapest of `comparison` and what moving to it from the first saves per year,
    /// only where the saving is larger than its interval and a day or more was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cheapest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cheapest_saving_per_year: Option<f64>,
    /// Its 95 % half-width.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cheapest_saving_ci95: Option<f64>,
    /// Why no tariff is named cheapest, where none is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_verdict: Option<String>,
    /// CO2 per carbon-intensity slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carbon: Option<CarbonReport>,
    pub notes: Vec<String>,
}

/// The measured energy under one tariff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TariffRow {
    pub name: String,
    pub origin: String,
    pub kwh: f64,
    /// Currency over the measured window (no standing charge).
    pub cost: f64,
    /// kWh the tariff's series had no slot for, priced at its configured price.
    pub fallback_kwh: f64,
    /// A year under this tariff at the measured load by hour of the week
    /// ([`crate::ledger::annual::on_tariff`]), the standing charge apart.
    pub annual_cost: f64,
    /// Its 95 % half-width, where the measured power's is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_cost_ci95: Option<f64>,
    /// `annual_cost` with this tariff's standing charge.
    pub annual_cost_all_in: f64,
    /// The first tariff's annual cost minus this one's (positive: this one is cheaper).
    pub annual_saving_vs_first: f64,
    /// Reported apart, never in a cost or saving.
    pub standing_charge_per_year: f64,
}

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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CarbonReport {
    #[serde(flatten)]
    pub figure: CarbonFigure,
    /// `co2_kg` x 8760 / covered hours.
    pub annual_co2_kg: f64,
}

/// The section, when there is anything for it: price series on the tariff, tariffs to
/// compare, or a carbon series.
pub fn tariff_report(
    tariff: &Tariff,
    measured: Option<&MeasuredInput>,
    compare: &[NamedTariff],
    carbon: Option<&SeriesSet>,
    co2_fallback: Option<f64>,
) -> Result<Option<TariffReport>, ReportError> {
    let carbon = carbon.filter(|c| !c.is_empty());
    if tariff.series().is_none() && compare.is_empty() && carbon.is_none() {
        return Ok(None);
    }
    let cost_err = |what: String| move |source| ReportError::Cost { what, source };
    let mut out = TariffReport {
        priced_by: Vec::new(),
        fallback_kwh: 0.0,
        price_basis: series_mean_price(tariff)
            .map_err(cost_err("the price series".into()))?
            .map(|(_, b)| b),
        time_of_day: None,
        comparison: Vec::new(),
        cheapest: None,
        cheapest_saving_per_year: None,
        cheapest_saving_ci95: None,
        no_verdict: None,
        carbon: None,
        notes: Vec::new(),
    };
    let Some(m) = measured else {
        if !compare.is_empty() {
            out.notes.push(
                "no measured energy in the window: tariffs are compared on this machine's \
                 measured consumption"
                    .to_owned(),
            );
        }
        return Ok(Some(out));
    };
    let covered_hours = m.covered_ms.max(0) as f64 / MS_PER_HOUR;
    let per_year = if covered_hours > 0.0 {
        HOURS_PER_YEAR / covered_hours
    } else {
        0.0
    };
    let priced =
        cost_of_energy(tariff, &m.energy).map_err(cost_err("the measured energy".into()))?;
    out.priced_by = priced.sources;
    out.fallback_kwh = priced.fallback_kwh;
    if tariff.series().is_some() && priced.fallback_kwh > 0.0 {
        out.notes.push(format!(
            "{:.3} kWh of the measured {:.3} kWh fell in slots no price series covers and is \
             priced at the configured [tariff] price",
            priced.fallback_kwh, priced.kwh
        ));
    }
    if tariff.series().is_some() {
        out.time_of_day = time_of_day(tariff, m)?;
    }
    compare_tariffs(&mut out, tariff, m, compare, covered_hours)?;
    if let Some(set) = carbon {
        let f = carbon_of_energy(set, co2_fallback, &m.energy);
        if f.fallback_kwh > 0.0 {
            out.notes.push(match co2_fallback {
                Some(g) => format!(
                    "{:.3} kWh had no carbon-intensity slot and count at the constant {g} g CO2/kWh",
                    f.fallback_kwh
                ),
                None => format!(
                    "{:.3} kWh had no carbon-intensity slot and are left out of the CO2 \
                     figure (give --co2 for a constant to fill them)",
                    f.fallback_kwh
                ),
            });
        }
        out.carbon = Some(CarbonReport {
            annual_co2_kg: f.co2_kg * per_year,
            figure: f,
        });
    }
    Ok(Some(out))
}

/// Each tariff of `compare` on the measured energy and a year of the measured load, and
/// the cheapest where the measurements can name one.
fn compare_tariffs(
    out: &mut TariffReport,
    tariff: &Tariff,
    m: &MeasuredInput,
    compare: &[NamedTariff],
    covered_hours: f64,
) -> Result<(), ReportError> {
    let cost_err = |what: String| move |source| ReportError::Cost { what, source };
    let shape = m.load_shape(tariff);
    let ci_ratio = m
        .power
        .as_ref()
        .and_then(|p| p.ci95_watts.map(|c| c / p.mean_watts));
    for t in compare {
        let what = || format!("the measured energy under {}", t.name);
        let c = cost_of_energy(&t.tariff, &m.energy).map_err(cost_err(what()))?;
        let year = crate::ledger::annual::on_tariff(&shape, &t.tariff, m.to_ms, ci_ratio, "")
            .map_err(cost_err(what()))?;
        let standing = t.tariff.standing_charge_per_day() * HOURS_PER_YEAR / 24.0;
        let annual = year.as_ref().map_or(0.0, |y| y.cost);
        out.comparison.push(TariffRow {
            name: t.name.clone(),
            origin: t.origin.clone(),
            kwh: c.kwh,
            cost: c.energy_cost,
            fallback_kwh: c.fallback_kwh,
            annual_cost: annual,
            annual_cost_ci95: year.and_then(|y| y.cost_ci95),
            annual_cost_all_in: annual + standing,
            annual_saving_vs_first: 0.0,
            standing_charge_per_year: standing,
        });
    }
    if let Some(first) = out.comparison.first().cloned() {
        for r in &mut out.comparison {
            r.annual_saving_vs_first = first.annual_cost - r.annual_cost;
        }
        if let Some(best) = out
            .comparison
            .iter()
            .min_by(|a, b| a.annual_cost.total_cmp(&b.annual_cost))
        {
            let saving = first.annual_cost - best.annual_cost;
            // Both rows rest on the same measured load, taken as independent: wider than
            // it is, never narrower.
            let ci = first
                .annual_cost_ci95
                .unwrap_or(0.0)
                .hypot(best.annual_cost_ci95.unwrap_or(0.0));
            if covered_hours < 24.0 {
                out.no_verdict = Some(format!(
                    "under a day measured ({}): which tariff is cheapest for this machine \
                     turns on the hours not yet measured",
                    crate::ledger::interval::hours_text(covered_hours)
                ));
            } else if saving > 0.0 && saving <= ci {
                out.no_verdict = Some(format!(
                    "{} would save {saving:.2} ± {ci:.2} a year against {}: within the \
                     interval, so no tariff is named cheapest",
                    best.name, first.name
                ));
            } else {
                out.cheapest = Some(best.name.clone());
                out.cheapest_saving_per_year = Some(saving);
                out.cheapest_saving_ci95 = (ci > 0.0).then_some(ci);
            }
        }
        if out.comparison.iter().any(|r| r.fallback_kwh > 0.0) {
            out.notes.push(
                "a tariff's fallback kWh had no slot of its series and are priced at the \
                 configured price: import more of that series to compare it fully"
                    .to_owned(),
            );
        }
        let measured = shape.measured_hours();
        if measured < crate::ledger::load_shape::WEEK_HOURS {
            out.notes.push(format!(
                "each tariff prices a year of this machine's load in each hour of the week \
                 from {} measured: {measured} of the week's 168 hours, the others at the \
                 measured mean",
                crate::ledger::interval::hours_text(covered_hours)
            ));
        }
    }
    Ok(())
}

/// The local hour of day of `ms` in the tariff's zone.
fn local_hour(tariff: &Tariff, ms: i64) -> Option<u32> {
    DateTime::<Utc>::from_timestamp_millis(ms).map(|t| t.with_timezone(&tariff.tz()).hour())
}

/// The measured energy's mean watts per local hour of day against the tariff's mean
/// price per local hour of day over its series' window.
fn time_of_day(tariff: &Tariff, m: &MeasuredInput) -> Result<Option<TimeOfDayCost>, ReportError> {
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

/// The section as prose, for the table, Markdown and HTML formats.
pub fn lines(r: &TariffReport, currency: &str) -> Vec<String> {
    use crate::ledger::price::format_money;
    let money = |x: f64| format_money(x, currency);
    let mut out = Vec::new();
    if !r.priced_by.is_empty() {
        let parts: Vec<String> = r
            .priced_by
            .iter()
            .map(|s| {
                let by = if s.source == "tariff" {
                    "the configured [tariff]".to_owned()
                } else {
                    format!("series {}", s.source)
                };
                format!("{:.3} kWh {} by {by}", s.kwh, money(s.cost))
            })
            .collect();
        out.push(format!(
            "measured energy priced per slot: {}",
            parts.join("; ")
        ));
    }
    if let Some(b) = &r.price_basis {
        out.push(format!("annual figures use {}", b.text));
    }
    if let Some(t) = &r.time_of_day {
        out.push(format!(
            "measured duty cycle by time of day: {:.1} kWh, {} per year ({})",
            t.annual_kwh,
            money(t.annual_cost),
            t.basis
        ));
    }
    for row in &r.comparison {
        let mut l = format!(
            "{:<12} {} over {:.3} kWh measured, {}{} per year",
            row.name,
            money(row.cost),
            row.kwh,
            money(row.annual_cost),
            row.annual_cost_ci95
                .filter(|c| *c >= 0.005)
                .map(|c| format!(" ± {}", money(c)))
                .unwrap_or_default()
        );
        if row.annual_saving_vs_first != 0.0 {
            let _ = write!(
                l,
                ", {} {} per year than {}",
                money(row.annual_saving_vs_first.abs()),
                if row.annual_saving_vs_first > 0.0 {
                    "less"
                } else {
                    "more"
                },
                r.comparison[0].name
            );
        }
        if row.fallback_kwh > 0.0 {
            let _ = write!(
                l,
                " ({:.3} kWh at its configured price: no slot)",
                row.fallback_kwh
            );
        }
        if row.standing_charge_per_year > 0.0 {
            let _ = write!(
                l,
                "; standing charge {} per year, {} with it",
                money(row.standing_charge_per_year),
                money(row.annual_cost_all_in)
            );
        }
        let _ = write!(l, " [{}]", row.origin);
        out.push(l);
    }
    if let Some(why) = &r.no_verdict {
        out.push(format!("no tariff named cheapest: {why}"));
    }
    if let (Some(best), Some(saving), Some(first)) = (
        &r.cheapest,
        r.cheapest_saving_per_year,
        r.comparison.first(),
    ) {
        out.push(if saving > 0.0 {
            format!(
                "cheapest for this machine: {best}, saving {}{} per year against {}",
                money(saving),
                r.cheapest_saving_ci95
                    .filter(|c| *c >= 0.005)
                    .map(|c| format!(" ± {}", money(c)))
                    .unwrap_or_default(),
                first.name
            )
        } else {
            format!("cheapest for this machine: {best} (the first listed)")
        });
    }
    if let Some(c) = &r.carbon {
        out.push(format!(
            "CO2 per slot ({}): {:.3} kg over the window, {:.1} kg per year",
            c.figure.sources.join(", "),
            c.figure.co2_kg,
            c.annual_co2_kg
        ));
    }
    out.extend(r.notes.iter().map(|n| format!("note: {n}")));
    out
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
