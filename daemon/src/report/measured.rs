//! This machine's measured energy in a report: priced by time of day, annualised by the
//! time the ledger says it covers, with its interval and the warnings that weaken it, beside
//! what the sweep's fit predicts from the same utilisation history.
//!
//! Units: kWh, W, the tariff's currency, UTC ms; a `ci95` is a 95 % half-width.

use wattson_collectors::SourceId;

use serde::Serialize;

use super::input::{ConfigInput, FitInput, MeasuredInput};
use super::model::{ReportError, over_history, rfc3339_in};
use crate::ledger::price::{CostError, HOURS_PER_YEAR, PriceBand, cost_of_energy};
use crate::tariff::Tariff;

const MS_PER_HOUR: f64 = 3_600_000.0;

/// This machine's recorded energy, priced, and what its sweep model says it should be.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredReport {
    /// The source measured (`meter:wall`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceId>,
    /// RFC 3339.
    pub from: String,
    pub to: String,
    pub from_ms: i64,
    pub to_ms: i64,
    /// Hours in the window.
    pub window_hours: f64,
    /// Hours the meter covered.
    pub covered_hours: f64,
    /// `covered_hours / window_hours` x 100.
    pub coverage_percent: f64,
    /// kWh recorded.
    pub kwh: f64,
    /// Currency, priced by time of day.
    pub energy_cost: f64,
    /// Mean W over covered time.
    pub mean_watts: f64,
    /// Its 95 % half-width, W: the meter's accuracy plus the sampling uncertainty (see
    /// `accuracy_watts`, `sampling_watts`). Each interval field is `null` where not known
    /// (no meter accuracy, too little covered time), never left out.
    pub mean_watts_ci95: Option<f64>,
    /// The meter's stated accuracy at `mean_watts`, W, and where the figure comes from.
    pub accuracy_watts: Option<f64>,
    pub accuracy_source: Option<String>,
    /// The sampling part of the interval, W.
    pub sampling_watts: Option<f64>,
    /// kWh and cost per price.
    pub bands: Vec<PriceBand>,
    /// Currency, for the days the window touches; not in any running cost.
    pub standing_charge: f64,
    /// kWh per year: `kwh` x 8760 / `covered_hours`.
    pub annual_kwh: f64,
    /// Its 95 % half-width (`mean_watts_ci95` scaled the same way).
    pub annual_kwh_ci95: Option<f64>,
    /// Currency per year: `energy_cost` x 8760 / `covered_hours` (projected as measured,
    /// [`crate::ledger::annual::projected`]).
    pub annual_cost: f64,
    /// What the annual figure is and its price basis, as every surface words it.
    pub annual_basis: String,
    pub annual_cost_ci95: Option<f64>,
    /// The meter's own energy counter over the window against the integral (the energy of
    /// record), where the meter has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter: Option<crate::ledger::counter_check::CounterCheck>,
    /// Hours whose energy and covered time are estimates (rollups stored before covered
    /// time was, whose raw samples are gone).
    pub approximate_hours: u64,
    /// What weakens these figures, in words (also in the report's `notes`).
    pub warnings: Vec<String>,
    pub gaps: Vec<GapReport>,
    /// Standby (the host asleep) and off, measured at the wall: the meter's counter over
    /// the gaps the kernel says the host was away in ([`crate::ledger::standby`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub away: Vec<crate::ledger::standby::AwayFigure>,
    /// Hours of gaps.
    pub gap_hours: f64,
    /// Per local day of the tariff's zone.
    pub daily: Vec<DayFigure>,
    /// The sweep fit applied to the utilisation history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modelled: Option<ModelledReport>,
    /// (modelled - measured) / measured x 100, of annual kWh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference_kwh_percent: Option<f64>,
    /// (modelled - measured) / measured x 100, of annual cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference_cost_percent: Option<f64>,
}

/// A meter outage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapReport {
    pub from: String,
    pub to: String,
    pub from_ms: i64,
    pub to_ms: i64,
    pub hours: f64,
    pub reason: String,
    /// The energy the meter's own counter counted over the gap within the window, Wh:
    /// priced with the rest, not sampled; absent where it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted_wh: Option<f64>,
    /// Its 95 % half-width: the counter's resolution at each end of the gap, Wh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted_ci95_wh: Option<f64>,
    /// "counted by the meter, not sampled", or why the gap's energy is not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted: Option<String>,
}

/// Energy and cost on one local day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayFigure {
    /// YYYY-MM-DD.
    pub date: String,
    pub kwh: f64,
    /// Currency.
    pub cost: f64,
}

/// `watts = idle + watts_per_loop x busy CPUs` over the utilisation history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelledReport {
    /// The configuration whose fit was used.
    pub config: String,
    pub idle_watts: f64,
    pub watts_per_loop: f64,
    pub cpus: u32,
    /// Time-weighted.
    pub mean_busy_cpus: f64,
    /// W.
    pub mean_watts: f64,
    /// Hours of utilisation history.
    pub hours: f64,
    pub kwh: f64,
    /// Currency.
    pub energy_cost: f64,
    pub annual_kwh: f64,
    /// `annual_kwh` at the year's mean price ([`crate::ledger::annual::modelled`]).
    pub annual_cost: f64,
    /// What the annual figure is and its price basis, as every surface words it.
    pub annual_basis: String,
}

/// The year's price a modelled figure is priced at, and where it comes from.
#[derive(Debug, Clone, Copy)]
pub(super) struct YearPrice<'a> {
    pub per_kwh: f64,
    pub from: &'a str,
}

/// The sweep configuration that models this machine (see [`MeasuredInput::config`]).
fn model_config<'a>(
    m: &MeasuredInput,
    configs: &'a [ConfigInput],
    host: Option<&str>,
) -> Option<(&'a ConfigInput, &'a FitInput)> {
    let with_fit = || {
        configs
            .iter()
            .filter_map(|c| c.fit.as_ref().map(|f| (c, f)))
    };
    match &m.config {
        Some(name) => with_fit().find(|(c, _)| &c.name == name),
        None => with_fit()
            .find(|(c, _)| host.is_some() && c.host.as_deref() == host)
            .or_else(|| with_fit().next()),
    }
}

/// Why the measured history has no modelled cost beside it: which of the two it needs is
/// missing (the sweep fit [`model_config`] would pick, the utilisation history), and how to
/// get it.
pub(super) fn why_not_modelled(
    m: &MeasuredInput,
    configs: &[ConfigInput],
    host: Option<&str>,
) -> String {
    let fit = model_config(m, configs, host).is_some();
    match (fit, m.utilisation.is_empty(), &m.config) {
        (false, _, Some(name)) => format!(
            "no modelled cost: the configuration named to model this machine ({name}) has no \
             sweep fit"
        ),
        (false, false, None) => "no modelled cost: no sweep fit to model the recorded \
                                 utilisation with (`wattson sweep --name NAME` on this machine \
                                 makes one)"
            .to_string(),
        (false, true, None) => "no modelled cost: no sweep fit and no utilisation history \
                                (`wattson sweep` makes the fit, `wattson run` records the history)"
            .to_string(),
        (true, true, _) => "no modelled cost: no utilisation history to apply the sweep fit to \
                            (`wattson run` records it)"
            .to_string(),
        (true, false, _) => "no modelled cost: the utilisation history has no hour the sweep \
                             fit could be applied to"
            .to_string(),
    }
}

pub(super) fn measured_report(
    m: &MeasuredInput,
    tariff: &Tariff,
    year: YearPrice<'_>,
    configs: &[ConfigInput],
    host: Option<&str>,
) -> Result<MeasuredReport, ReportError> {
    let priced = cost_of_energy(tariff, &m.energy).map_err(cost_err("the measured energy"))?;
    // The ledger's covered time: never derived from bucket lengths or sample counts.
    let covered_ms = m.covered_ms.max(0);
    let covered_hours = covered_ms as f64 / MS_PER_HOUR;
    let window_hours = (m.to_ms - m.from_ms).max(0) as f64 / MS_PER_HOUR;
    let gaps = gaps(m, tariff);
    let daily = daily(&m.energy, tariff)?;

    let modelled = modelled(m, tariff, year, configs, host)?;
    // Over the covered time: the energy the counter counted over gaps is not in it.
    let counted_kwh: f64 = m.counted.iter().filter_map(|c| c.2.wh).sum::<f64>() / 1000.0;
    let mean_watts = if covered_hours > 0.0 {
        (priced.kwh - counted_kwh) * 1000.0 / covered_hours
    } else {
        0.0
    };
    let ci = m.power.as_ref().and_then(|p| p.ci95_watts);
    // A year on the tariff, by the one function every surface's annual figure uses.
    let year = crate::ledger::annual::on_tariff(
        &m.load_shape(tariff),
        tariff,
        m.to_ms,
        ci.filter(|_| mean_watts > 0.0).map(|c| c / mean_watts),
        &m.window_words(tariff),
    )
    .map_err(cost_err("a year of the measured load"))?;
    let (annual_kwh, annual_cost, annual_basis) = year.as_ref().map_or_else(
        || (0.0, 0.0, "nothing measured to project".to_owned()),
        |a| (a.kwh, a.cost, a.basis.clone()),
    );
    let pct = |modelled: f64, measured: f64| {
        (measured > 0.0).then(|| (modelled - measured) / measured * 100.0)
    };
    let warnings = warnings(m);
    let away = crate::ledger::standby::figures(&m.away, tariff)
        .map_err(|e| cost_err("the time away")(e.into()))?;
    Ok(MeasuredReport {
        away,
        source: m.source.clone(),
        mean_watts_ci95: ci,
        accuracy_watts: m.power.as_ref().and_then(|p| p.accuracy_watts),
        accuracy_source: m
            .power
            .as_ref()
            .and_then(|p| p.accuracy_source.map(str::to_owned)),
        sampling_watts: m.power.as_ref().and_then(|p| p.sampling_watts),
        annual_kwh_ci95: year.as_ref().and_then(|a| a.kwh_ci95),
        annual_cost_ci95: year.as_ref().and_then(|a| a.cost_ci95),
        annual_basis,
        counter: m.counter.clone(),
        approximate_hours: m.approximate_hours,
        warnings,
        from: rfc3339_in(m.from_ms, tariff.tz()),
        to: rfc3339_in(m.to_ms, tariff.tz()),
        from_ms: m.from_ms,
        to_ms: m.to_ms,
        window_hours,
        covered_hours,
        coverage_percent: if window_hours > 0.0 {
            covered_hours / window_hours * 100.0
        } else {
            0.0
        },
        kwh: priced.kwh,
        energy_cost: priced.energy_cost,
        mean_watts,
        bands: priced.bands,
        standing_charge: priced.standing_charge,
        annual_kwh,
        annual_cost,
        // Folded from +0: an empty sum of f64 is -0, which JSON would print as -0.0.
        gap_hours: gaps.iter().map(|g| g.hours).fold(0.0, |a, b| a + b),
        gaps,
        daily,
        difference_kwh_percent: modelled
            .as_ref()
            .and_then(|x| pct(x.annual_kwh, annual_kwh)),
        difference_cost_percent: modelled
            .as_ref()
            .and_then(|x| pct(x.annual_cost, annual_cost)),
        modelled,
    })
}

/// The meter's gaps in the window, in the tariff's zone.
fn gaps(m: &MeasuredInput, tariff: &Tariff) -> Vec<GapReport> {
    m.gaps
        .iter()
        .map(|(s, e, reason)| {
            let counted = m
                .counted
                .iter()
                .find(|c| (c.0, c.1) == (*s, *e))
                .map(|c| &c.2);
            GapReport {
                from: rfc3339_in(*s, tariff.tz()),
                to: rfc3339_in(*e, tariff.tz()),
                from_ms: *s,
                to_ms: *e,
                hours: (e - s).max(0) as f64 / MS_PER_HOUR,
                reason: reason.clone(),
                counted_wh: counted.and_then(|c| c.wh),
                counted_ci95_wh: counted
                    .and_then(|c| c.wh.and(c.step_wh))
                    .map(|step| 2.0 * step),
                counted: counted.map(|c| c.note.clone()),
            }
        })
        .collect()
}

/// What the sweep fit of the configuration that models this machine says the measured
/// window's utilisation history should have cost, projected to a year; `None` without such a
/// fit or history.
fn modelled(
    m: &MeasuredInput,
    tariff: &Tariff,
    year: YearPrice<'_>,
    configs: &[ConfigInput],
    host: Option<&str>,
) -> Result<Option<ModelledReport>, ReportError> {
    let Some((c, f)) = model_config(m, configs, host) else {
        return Ok(None);
    };
    if m.utilisation.is_empty() {
        return Ok(None);
    }
    let model: Vec<(i64, i64, f64)> = m
        .utilisation
        .iter()
        .filter(|(s, e, b)| e > s && b.is_finite())
        .map(|&(s, e, busy)| {
            let w = f.idle_watts + f.watts_per_loop * busy.max(0.0);
            (s, e, w * (e - s) as f64 / MS_PER_HOUR)
        })
        .collect();
    let p = cost_of_energy(tariff, &model).map_err(cost_err("the modelled energy"))?;
    Ok(over_history(&m.utilisation, |b| b).map(|(busy, hours)| {
        let scale = HOURS_PER_YEAR / hours;
        let annual = crate::ledger::annual::modelled(
            p.kwh * scale,
            None,
            &format!(
                "the sweep fit of {} over {} of utilisation",
                c.name,
                crate::ledger::interval::hours_text(hours)
            ),
            year.per_kwh,
            year.from,
            tariff.currency(),
        );
        ModelledReport {
            config: c.name.clone(),
            idle_watts: f.idle_watts,
            watts_per_loop: f.watts_per_loop,
            cpus: m.cpus,
            mean_busy_cpus: busy,
            mean_watts: f.idle_watts + f.watts_per_loop * busy,
            hours,
            kwh: p.kwh,
            energy_cost: p.energy_cost,
            annual_kwh: annual.kwh,
            annual_cost: annual.cost,
            annual_basis: annual.basis,
        }
    }))
}

/// What weakens the measured figure: the power's own warnings, hours whose raw samples
/// are gone, the meter's counter disagreeing with the integral.
fn warnings(m: &MeasuredInput) -> Vec<String> {
    let mut warnings: Vec<String> = m
        .power
        .as_ref()
        .map(|p| p.warnings.clone())
        .unwrap_or_default();
    if m.approximate_hours > 0 {
        warnings.push(format!(
            "{} hour(s) of the window were stored before covered time was and their raw \
             samples are gone: their energy and covered time are estimates",
            m.approximate_hours
        ));
    }
    if let Some(c) = &m.counter
        && c.difference_percent.is_some_and(|p| p.abs() > 5.0)
        && c.beyond_its_steps()
    {
        warnings.push(format!(
            "the meter's own counter ({}) and the integral of its power ({}) disagree: {}",
            crate::report::render::energy(c.counter_wh / 1000.0),
            crate::report::render::energy(c.integral_wh / 1000.0),
            c.describe()
        ));
    }
    warnings
}

/// A [`ReportError::Cost`] for pricing `what`.
fn cost_err(what: &str) -> impl FnOnce(CostError) -> ReportError {
    let what = what.to_string();
    move |source| ReportError::Cost { what, source }
}

/// Energy and cost per local day (by each bucket's start), each day priced on its own
/// ([`crate::ledger::costs::by_local_day`], as the live page's daily bars are).
fn daily(buckets: &[(i64, i64, f64)], tariff: &Tariff) -> Result<Vec<DayFigure>, ReportError> {
    crate::ledger::costs::by_local_day(buckets, tariff.tz())
        .into_iter()
        .map(|(date, bs)| {
            let p = cost_of_energy(tariff, &bs).map_err(|source| ReportError::Cost {
                what: format!("the energy on {date}"),
                source,
            })?;
            Ok(DayFigure {
                date: date.to_string(),
                kwh: p.kwh,
                cost: p.energy_cost,
            })
        })
        .collect()
}
