//! The report itself: [`build`] turns a [`ReportInput`] into a [`Report`], the numbers every
//! format renders. `Report` serialises to the `wattson report --format json` contract of
//! DESIGN.md (`currency`, `price_per_kwh`, `configs[].name/modes/fit`,
//! `comparisons[].from/to/annual_saving/payback_years`), extended with more fields.
//!
//! Units: watts (W), kWh per 365-day year ([`HOURS_PER_YEAR`] hours), the tariff's currency
//! per year, UTC milliseconds for instants, kg CO2 per year. A `ci95` is the half-width of a
//! 95 % interval in its value's unit.
//!
//! Comparisons run from the baseline (the configuration that costs most at the headline, or
//! the first one `--configs` names) to each other one (the candidates), so N configurations
//! give N-1 comparisons; a candidate's `upgrade_cost` (or `--upgrade-cost`) is what moving
//! to it costs.
//! Their headline is at `--mode` when given, else at this machine's measured duty cycle
//! when the database has a utilisation history, else at idle (a home server spends most of
//! its time idle); the saving in every mode both share is listed beside it.
//!
//! Here: the report, its configurations and their modes, and [`build`]; `select` picks the
//! configurations, `configs` builds each one's figures, `sections` the regression, fit and
//! GPU idle sections, `compare` the headline, the baseline and the comparisons; `summary`
//! restates the answers for the table that leads every text format.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use thiserror::Error;

use super::input::{ConfigInput, ConfigKind, ConfigStatus, Paired, ReportInput};
pub use super::measured::{DayFigure, GapReport, MeasuredReport, ModelledReport};
use super::measured::{measured_report, why_not_modelled};
use crate::ledger::price::{AnnualFigure, CostError, HOURS_PER_YEAR, annual_cost, annual_kwh};
use crate::tariff::Tariff;

mod candidates;
mod compare;
mod configs;
mod schedule;
mod sections;
mod select;
pub mod summary;
#[cfg(test)]
#[allow(clippy::many_single_char_names)]
mod tests;

pub use candidates::{
    CandidateReport, CandidatesReport, DEFAULT_TOP as DEFAULT_TOP_CANDIDATES, KeepFigure,
};
pub use compare::{ComparisonReport, ModeSaving};
use compare::{comparisons, headline_mode, order_by_cost};
use configs::config_report;
pub(super) use configs::over_history;
pub use sections::{
    FitReport, GpuIdleReport, LevelReport, RegressionCheckReport, RegressionReport,
    RegressionStatus,
};
use sections::{fit_report, gpu_idle_report, regression_report};
pub use select::{resolve_config_list, select_configs};
pub use summary::{Summary, summary};

/// The headline basis when a measured duty cycle decides it.
pub const DUTY_CYCLE: &str = "duty cycle";

const MS_PER_HOUR: f64 = 3_600_000.0;

/// Why a report cannot be built.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ReportError {
    /// A figure could not be priced.
    #[error("pricing {what}")]
    Cost {
        what: String,
        #[source]
        source: CostError,
    },
    /// `--mode` names a mode no configuration has.
    #[error("no configuration has a mode named {mode:?}; modes present: {known}")]
    UnknownMode { mode: String, known: String },
    /// `--candidates` names a candidate that is not stored.
    #[error("no candidate named {name:?}; known: {known} (`wattson candidate list`)")]
    UnknownCandidate { name: String, known: String },
    /// `--configs` names a configuration that does not exist.
    #[error("no configuration named {name:?}; known: {known}")]
    UnknownConfig { name: String, known: String },
}

/// A whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// RFC 3339, UTC.
    pub generated_at: String,
    pub host: Option<String>,
    /// ISO 4217 code.
    pub currency: String,
    /// The base price in force on `reference_date`, currency per kWh.
    pub price_per_kwh: f64,
    /// The time-weighted mean price over the report year, currency per kWh: what a constant
    /// load pays (differs from `price_per_kwh` with time-of-use periods or dated changes).
    pub mean_price_per_kwh: f64,
    /// Where that mean comes from, in words: "over the year from 2026-01-15", or "the
    /// price series' mean over 72.0 h".
    pub mean_price_from: String,
    /// Currency per day; never part of a running cost or a saving.
    pub standing_charge_per_day: f64,
    /// `standing_charge_per_day` x 365, currency.
    pub standing_charge_per_year: f64,
    /// Hours in the report's year: 8760.
    pub year_hours: f64,
    /// Why a year is 8760 hours and what the annual figures mean.
    pub year_explanation: String,
    /// Local date the priced year starts (YYYY-MM-DD).
    pub reference_date: String,
    /// g CO2 per kWh when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub co2_g_per_kwh: Option<f64>,
    /// What the comparisons' headline is at: a mode name or [`DUTY_CYCLE`].
    pub headline_mode: String,
    /// Which configuration the comparisons start from: `costliest` (at the headline mode,
    /// the default) or `first` (the first of `--configs`).
    pub baseline: Baseline,
    pub configs: Vec<ConfigReport>,
    pub comparisons: Vec<ComparisonReport>,
    /// This machine's recorded energy, when a database had any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredReport>,
    /// Idle-power regression checks (`wattson sweep --regression-check`).
    pub regression: RegressionReport,
    /// Per GPU: busy / idle with a resident process / idle bare, and what the resident
    /// process's idle draw costs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuIdleReport>,
    /// What each service costs (estimates), where the database has CPU time per service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<crate::services::ServicesEstimate>,
    /// With no wall meter's energy in the window: the energy and money estimated from the
    /// host's newest calibration (`wattson calibration`), priced as `calibration estimate`
    /// prices it, always labelled an estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated: Option<crate::calibration::priced::Priced>,
    /// With the wall meter's energy in the window: the stretches it was away and a
    /// calibration stood in, estimated, and checked against the wall on its return.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stood_in: Vec<crate::calibration::stand_in::StoodIn>,
    /// Real tariffs: pricing per slot, the fallback, the tariff comparison, CO2 per slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tariffs: Option<super::real_tariffs::TariffReport>,
    /// "Idle: where the watts go": package C-states and the measured idle settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<super::idle::IdleReport>,
    /// "Keep this box or buy another": candidate machines on this machine's load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<CandidatesReport>,
    /// Each configuration on a week's schedule of modes (its own `[[config]] schedule`, else
    /// `--schedule`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<schedule::ScheduleReport>,
    /// What sleeping when idle would save, from this machine's stored week.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sleep: Option<crate::report::sleep::SleepReport>,
    /// Plain-words caveats.
    pub notes: Vec<String>,
}

pub use schedule::{ScheduleReport, lines as schedule_lines};

/// How the comparisons' baseline was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Baseline {
    /// The configuration that costs most at the headline: every comparison is a saving.
    Costliest,
    /// The first configuration `--configs` named.
    First,
}

/// One configuration's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigReport {
    pub name: String,
    pub kind: ConfigKind,
    pub status: ConfigStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<serde_json::Value>,
    /// Currency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_cost: Option<f64>,
    /// standby, idle, 1 loop, ... in that order.
    pub modes: Vec<ModeReport>,
    /// The sweep's fit, where a sweep exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelReport>,
    /// Average watts under this machine's measured utilisation history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duty_cycle: Option<ModeReport>,
    /// Measured against another configuration in alternating phases (`wattson idle
    /// --measure`); its comparison is with that one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
}

/// One mode's annual figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeReport {
    pub name: String,
    /// W.
    pub watts: f64,
    /// W, where measured; `null` where not (a mode typed in by hand).
    pub ci95_watts: Option<f64>,
    /// kWh per year.
    pub annual_kwh: f64,
    pub annual_kwh_ci95: Option<f64>,
    /// Currency per year, energy only.
    pub annual_cost: f64,
    pub annual_cost_ci95: Option<f64>,
    /// kg CO2 per year, when a carbon intensity was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_co2_kg: Option<f64>,
    /// What weakens this figure (the sweep level's warnings), in words; also in `notes`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Annual figures priced at one mean price (the year's price does not depend on watts, so
/// it is computed once).
struct Pricer {
    unit: AnnualFigure,
    co2: Option<f64>,
}

impl Pricer {
    fn new(tariff: &Tariff, reference: NaiveDate, co2: Option<f64>) -> Result<Self, ReportError> {
        let unit =
            annual_cost(1.0, None, tariff, reference).map_err(|source| ReportError::Cost {
                what: format!("the year from {reference}"),
                source,
            })?;
        Ok(Pricer { unit, co2 })
    }

    fn figure(&self, watts: f64, ci95: Option<f64>) -> AnnualFigure {
        let kwh = annual_kwh(watts);
        let kwh_ci95 = ci95.map(|c| annual_kwh(c.abs()));
        let p = self.unit.mean_price_per_kwh;
        AnnualFigure {
            watts,
            watts_ci95: ci95,
            kwh,
            kwh_ci95,
            cost: kwh * p,
            cost_ci95: kwh_ci95.map(|c| c * p),
            mean_price_per_kwh: p,
            currency: self.unit.currency.clone(),
            price_basis: self.unit.price_basis.clone(),
        }
    }

    fn mode(&self, name: &str, watts: f64, ci95: Option<f64>) -> ModeReport {
        let f = self.figure(watts, ci95);
        ModeReport {
            name: name.to_string(),
            watts,
            ci95_watts: ci95,
            annual_kwh: f.kwh,
            annual_kwh_ci95: f.kwh_ci95,
            annual_cost: f.cost,
            annual_cost_ci95: f.cost_ci95,
            annual_co2_kg: self.co2.map(|g| f.kwh * g / 1000.0),
            warnings: Vec::new(),
        }
    }
}

pub(crate) fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map_or_else(|| format!("{ms} ms"), |t| t.to_rfc3339())
}

/// `ms` in RFC 3339 with the offset `zone` has then (the tariff's zone: the one "today" and
/// the report's dates are in), so a reader in London sees `+01:00` in summer.
pub(crate) fn rfc3339_in(ms: i64, zone: crate::zone::Zone) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.with_timezone(&zone).fixed_offset().to_rfc3339(),
    )
}

/// `ms` as a local time of the tariff's zone to the minute (`2026-12-04 13:05`).
pub(crate) fn local_day(ms: i64, tariff: &Tariff) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| {
            t.with_timezone(&tariff.tz())
                .format("%Y-%m-%d %H:%M")
                .to_string()
        },
    )
}

/// Builds the report. Pure: the same input gives the same report.
pub fn build(input: &ReportInput) -> Result<Report, ReportError> {
    let opts = &input.options;
    let tariff = &input.tariff;
    let pricer = Pricer::new(tariff, opts.reference_date, opts.co2_g_per_kwh)?;
    let configs = select_configs(&input.configs, &opts.configs)?;
    let mut notes = Vec::new();
    let utilisation = input
        .measured
        .as_ref()
        .map_or(&[][..], |m| m.utilisation.as_slice());

    let mut reports: Vec<ConfigReport> = configs
        .iter()
        .map(|c| config_report(c, &pricer, utilisation, &mut notes))
        .collect();
    measured_standby(input, &pricer, &mut reports, &mut notes)?;
    let headline = headline_mode(&reports, opts.mode.as_ref())?;
    let baseline = order_by_cost(&mut reports, &headline, opts);
    let comparisons = comparisons(&reports, &headline, &pricer, opts, &mut notes);

    let mean_price_from = mean_price_from(&pricer, opts.reference_date);
    let year = super::measured::YearPrice {
        per_kwh: pricer.unit.mean_price_per_kwh,
        from: &mean_price_from,
    };
    let measured = measured(input, year, &configs, &mut notes)?;
    basis_notes(&headline, tariff, &mut notes);

    let regression = regression_report(&input.regression, &pricer);
    if regression.status == RegressionStatus::Detected {
        notes.push(
            "idle power has risen since the baseline sweep (see Idle-power regression): \
             check C-states, disk spin-down and newly added devices"
                .to_string(),
        );
    }
    let gpus: Vec<GpuIdleReport> = input
        .gpus
        .iter()
        .map(|g| gpu_idle_report(g, &pricer))
        .collect();

    let tariffs = super::real_tariffs::tariff_report(
        tariff,
        input.measured.as_ref(),
        &opts.tariffs,
        opts.carbon.as_ref(),
        opts.co2_g_per_kwh,
    )?;
    if let Some(b) = &pricer.unit.price_basis {
        notes.push(format!("annual costs are at {}", b.text));
    }
    notes.extend(crate::ledger::price::series_too_short(tariff));
    let candidates = candidates::candidates_report(
        &input.candidates,
        opts,
        tariff,
        input.measured.as_ref(),
        measured.as_ref(),
        reports.first(),
        pricer.unit.mean_price_per_kwh,
        &mean_price_from,
    )?;
    if let Some(c) = &candidates {
        for n in &c.notes {
            notes.push(format!("candidates: {n}"));
        }
    }
    let own = |name: &str| {
        input
            .configs
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.schedule.clone())
    };
    let schedule = schedule::schedule_report(
        opts.schedule.as_ref(),
        &own,
        &reports,
        tariff,
        tariff
            .tz()
            .start_of_day(opts.reference_date)
            .timestamp_millis(),
    )?;
    let base = tariff.change_for(opts.reference_date);
    Ok(Report {
        generated_at: input.generated_at.to_rfc3339(),
        host: input.host.clone(),
        currency: tariff.currency().to_string(),
        price_per_kwh: base.price_per_kwh,
        mean_price_per_kwh: pricer.unit.mean_price_per_kwh,
        mean_price_from: mean_price_from.clone(),
        standing_charge_per_day: tariff.standing_charge_per_day(),
        standing_charge_per_year: tariff.standing_charge_per_day() * HOURS_PER_YEAR / 24.0,
        year_hours: HOURS_PER_YEAR,
        year_explanation: year_explanation(&pricer, tariff, &mean_price_from),
        reference_date: opts.reference_date.to_string(),
        co2_g_per_kwh: opts.co2_g_per_kwh,
        headline_mode: headline,
        baseline,
        configs: reports,
        comparisons,
        measured,
        regression,
        gpus,
        services: None,
        estimated: None,
        stood_in: Vec::new(),
        tariffs,
        idle: super::idle::build(&input.idle, tariff, opts.reference_date),
        candidates,
        schedule,
        sleep: None,
        notes,
    })
}

/// What the year's mean price is the mean of: the configured prices over the year from
/// `reference`, or the price series over its hours.
fn mean_price_from(pricer: &Pricer, reference: NaiveDate) -> String {
    pricer.unit.price_basis.as_ref().map_or_else(
        || format!("the configured prices over the year from {reference}"),
        |b| {
            format!(
                "the price series over {:.1} h",
                (b.to_ms - b.from_ms) as f64 / 3_600_000.0
            )
        },
    )
}

/// How a year's figures are worked out, modelled and measured.
fn year_explanation(pricer: &Pricer, tariff: &Tariff, mean_price_from: &str) -> String {
    format!(
        "a year is 365 days x 24 h = {HOURS_PER_YEAR} h; modelled: annual kWh = watts x \
         {HOURS_PER_YEAR} / 1000, annual cost = annual kWh x the year's mean price ({}, \
         {mean_price_from}); measured: the window's energy at the prices of its own hours, \
         x {HOURS_PER_YEAR} / the hours the meter covered",
        crate::ledger::annual::price_text(pricer.unit.mean_price_per_kwh, tariff.currency())
    )
}

/// A warning on the measured figure as the report's notes say it (the JSON's `notes`; the
/// text formats show it under the figure instead).
pub fn measured_note(warning: &str) -> String {
    format!("measured: {warning}")
}

/// This machine's measured figures, where the input has a measured window; their warnings,
/// gaps and why nothing was modelled (where it was not) added to `notes`.
fn measured(
    input: &ReportInput,
    year: super::measured::YearPrice,
    configs: &[ConfigInput],
    notes: &mut Vec<String>,
) -> Result<Option<MeasuredReport>, ReportError> {
    let Some(mi) = &input.measured else {
        return Ok(None);
    };
    let m = measured_report(mi, &input.tariff, year, configs, input.host.as_deref())?;
    notes.extend(m.warnings.iter().map(|w| measured_note(w)));
    if !m.gaps.is_empty() {
        notes.push(format!(
            "{} meter gap(s) totalling {} are not interpolated; measured figures are \
             annualised over the {} covered",
            m.gaps.len(),
            crate::ledger::interval::hours_text(m.gap_hours),
            crate::ledger::interval::hours_text(m.covered_hours)
        ));
    }
    if m.modelled.is_none() {
        notes.push(why_not_modelled(mi, configs, input.host.as_deref()));
    }
    Ok(Some(m))
}

/// This machine's standby measured at the wall as the `standby` mode of its configurations
/// (those measured on this host) that have none: the seed's first row, beside idle and the
/// loops.
fn measured_standby(
    input: &ReportInput,
    pricer: &Pricer,
    reports: &mut [ConfigReport],
    notes: &mut Vec<String>,
) -> Result<(), ReportError> {
    let (Some(m), Some(host)) = (&input.measured, input.host.as_deref()) else {
        return Ok(());
    };
    let figures =
        crate::ledger::standby::figures(&m.away, &input.tariff).map_err(|e| ReportError::Cost {
            what: "the time away".to_owned(),
            source: e.into(),
        })?;
    let Some(f) = figures.iter().find(|f| f.mode == "standby") else {
        return Ok(());
    };
    for r in reports
        .iter_mut()
        .filter(|r| r.host.as_deref() == Some(host) && !r.modes.iter().any(|m| m.name == "standby"))
    {
        r.modes
            .insert(0, pricer.mode("standby", f.watts, f.ci95_watts));
        notes.push(format!(
            "{}'s standby is {}",
            r.name,
            crate::ledger::standby::phrase(f)
        ));
    }
    Ok(())
}

/// What every figure rests on: comparisons at the measured duty cycle, a standing charge
/// outside every running cost.
fn basis_notes(headline: &str, tariff: &Tariff, notes: &mut Vec<String>) {
    if headline == DUTY_CYCLE {
        notes.push(
            "comparisons are at this machine's measured duty cycle: each configuration's watts \
             at the same busy CPUs over the recorded utilisation history"
                .to_string(),
        );
    }
    if tariff.standing_charge_per_day() > 0.0 {
        notes.push(
            "the standing charge is paid whether or not a machine runs, so it is shown \
             separately and never counted in a running cost or a saving"
                .to_string(),
        );
    }
}
