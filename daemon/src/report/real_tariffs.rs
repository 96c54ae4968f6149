//! The report's real-tariff section: how the measured energy was priced (per price series
//! slot, and how much fell back to the configured price), the annual cost of the measured
//! duty cycle by time of day against the series' price by time of day, the measured energy
//! and a year of the measured load ([`crate::ledger::annual::on_tariff`], as the measured
//! section's) under each tariff `--tariffs` names, with the cheapest named only where its
//! saving is larger than its interval and a day or more was measured, and CO2 per
//! carbon-intensity slot.
//!
//! The duty cycle by time of day against the price by time of day is `time_of_day`'s.
//!
//! Units: kWh, W, the tariff's currency, kg CO2; the CO2 and time-of-day figures scale the
//! measured window's covered time to [`HOURS_PER_YEAR`] hours.

use std::fmt::Write as _;

use serde::Serialize;

use super::input::MeasuredInput;
use super::model::ReportError;
use crate::ledger::price::{
    HOURS_PER_YEAR, PriceBasis, SourceShare, cost_of_energy, series_mean_price,
};
use crate::tariff::Tariff;
use crate::tariff::series::{CarbonFigure, SeriesSet, carbon_of_energy};

mod time_of_day;

pub use time_of_day::{HourCost, TimeOfDayCost};

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
        out.time_of_day = time_of_day::time_of_day(tariff, m)?;
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
