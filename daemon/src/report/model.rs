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

use std::collections::BTreeMap;
use wattson_collectors::SourceId;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use thiserror::Error;

use super::input::{
    ConfigInput, ConfigKind, ConfigStatus, FitInput, GpuInput, LevelInput, ModeInput, ReportInput,
};
use super::measured::measured_report;
pub use super::measured::{DayFigure, GapReport, MeasuredReport, ModelledReport};
use crate::analysis::cost::{
    AnnualFigure, CostError, HOURS_PER_YEAR, annual_cost, annual_kwh, compare,
};
use crate::analysis::gpu_idle::{self, Rule};
use crate::analysis::modes::{level_loops, level_name};
use crate::analysis::tariff::Tariff;

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
    /// Real tariffs: pricing per slot, the fallback, the tariff comparison, CO2 per slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tariffs: Option<super::tariffs::TariffReport>,
    /// "Idle: where the watts go": package C-states and the measured idle settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<super::idle::IdleReport>,
    /// Plain-words caveats.
    pub notes: Vec<String>,
}

/// How the comparisons' baseline was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Baseline {
    /// The configuration that costs most at the headline: every comparison is a saving.
    Costliest,
    /// The first configuration `--configs` named.
    First,
}

/// Whether idle power rose against a configuration's baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegressionStatus {
    /// No check is stored.
    NotChecked,
    /// Checked; no configuration's idle rose.
    None,
    /// The newest check of at least one configuration found idle risen.
    Detected,
}

impl RegressionStatus {
    /// `not checked`, `none`, `detected`.
    pub fn as_str(self) -> &'static str {
        match self {
            RegressionStatus::NotChecked => "not checked",
            RegressionStatus::None => "none",
            RegressionStatus::Detected => "detected",
        }
    }
}

/// The idle-power regression checks in a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegressionReport {
    pub status: RegressionStatus,
    /// The newest check of each configuration, newest first.
    pub checks: Vec<RegressionCheckReport>,
}

/// One configuration's newest check. Watts in W; `*_ci95_watts` are 95 % half-widths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegressionCheckReport {
    pub config: String,
    pub detected: bool,
    /// RFC 3339, UTC.
    pub checked_at: String,
    pub checked_ms: i64,
    pub baseline_idle_watts: f64,
    pub baseline_ci95_watts: f64,
    pub latest_idle_watts: f64,
    pub latest_ci95_watts: f64,
    /// Latest minus baseline.
    pub delta_watts: f64,
    pub delta_ci95_watts: f64,
    /// The rise that counts as a regression.
    pub threshold_watts: f64,
    /// What the rise costs per year at the report's mean price, currency (negative: saves).
    pub delta_annual_cost: f64,
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
}

/// One mode's annual figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeReport {
    pub name: String,
    /// W.
    pub watts: f64,
    /// W, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95_watts: Option<f64>,
    /// kWh per year.
    pub annual_kwh: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_kwh_ci95: Option<f64>,
    /// Currency per year, energy only.
    pub annual_cost: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_cost_ci95: Option<f64>,
    /// kg CO2 per year, when a carbon intensity was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_co2_kg: Option<f64>,
    /// What weakens this figure (the sweep level's warnings), in words; also in `notes`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A sweep's fit with what idle and each loop cost per year.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitReport {
    /// W.
    pub idle_watts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ci95: Option<f64>,
    /// W per loop.
    pub watts_per_loop: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watts_per_loop_ci95: Option<f64>,
    pub r2: f64,
    /// Loop kind.
    pub kind: String,
    pub notes: Vec<String>,
    /// Currency per year at idle.
    pub idle_annual_cost: f64,
    /// Currency per year for each loop kept busy all year.
    pub per_loop_annual_cost: f64,
}

/// One sweep level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelReport {
    pub kind: String,
    pub loops: u32,
    /// W.
    pub mean_w: f64,
    /// W.
    pub ci95_w: f64,
    /// C-state -> share of time (`0..=1`).
    pub residency: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_mhz: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joules_per_op: Option<f64>,
    /// Currency per year at this level.
    pub annual_cost: f64,
}

/// Moving from one configuration to another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonReport {
    pub from: String,
    pub to: String,
    /// The mode the headline is at, or [`DUTY_CYCLE`].
    pub mode: String,
    /// W.
    pub from_watts: f64,
    /// W.
    pub to_watts: f64,
    /// kWh per year (negative when `to` uses more).
    pub annual_kwh_saved: f64,
    /// Currency per year (negative when `to` costs more).
    pub annual_saving: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annual_saving_ci95: Option<f64>,
    /// Currency: `--upgrade-cost`, else the target's `upgrade_cost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_cost: Option<f64>,
    /// Years; present when an upgrade cost is known and something is saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years: Option<f64>,
    /// The payback's 95 % range from the saving's interval: the shortest (at the largest
    /// saving) and the longest (absent when the smallest saving in the interval is none, so
    /// the upgrade may never pay for itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payback_years_high: Option<f64>,
    /// kg CO2 per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub co2_kg_saved: Option<f64>,
    /// The saving in every mode both configurations have.
    pub per_mode: Vec<ModeSaving>,
}

/// The saving in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeSaving {
    pub mode: String,
    /// kWh per year.
    pub annual_kwh_saved: f64,
    /// Currency per year.
    pub annual_saving: f64,
}

/// One GPU's time in each state and the cost of a process resident while it idles.
/// Shares are of `covered_hours`, `0..=1`; watts are settled means (see
/// [`crate::analysis::gpu_idle::SETTLE_MS`]), absent where the state was never seen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuIdleReport {
    /// `gpuN`.
    pub channel: String,
    pub source: SourceId,
    /// Which evidence told resident from bare idle.
    pub rule: Rule,
    /// `rule` in words.
    pub rule_explanation: String,
    /// Hours the samples cover.
    pub covered_hours: f64,
    /// W at utilisation above 0 %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_watts: Option<f64>,
    pub busy_share: f64,
    /// W at 0 % with a process holding a context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_resident_watts: Option<f64>,
    pub idle_resident_share: f64,
    /// W at 0 % with no process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_bare_watts: Option<f64>,
    pub idle_bare_share: f64,
    /// Samples that could not be classified (no utilisation, or an undecidable clock).
    pub unclassified_share: f64,
    /// `idle_resident_watts - idle_bare_watts`, W; absent without both.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_extra_watts: Option<f64>,
    /// `resident_extra_watts` x `idle_resident_share` x 8760 h / 1000, kWh per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_annual_kwh: Option<f64>,
    /// `resident_annual_kwh` priced at the year's mean price, currency per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_annual_cost: Option<f64>,
    /// The extra draw resident all year, kWh per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_all_year_kwh: Option<f64>,
    /// The extra draw resident all year, currency per year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_all_year_cost: Option<f64>,
    /// Plain-words caveats about this GPU's figures.
    pub notes: Vec<String>,
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

pub(super) fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map_or_else(|| format!("{ms} ms"), |t| t.to_rfc3339())
}

/// Selects `wanted` (exact names, in that order) from `configs`; empty keeps all.
pub fn select_configs(
    configs: &[ConfigInput],
    wanted: &[String],
) -> Result<Vec<ConfigInput>, ReportError> {
    if wanted.is_empty() {
        return Ok(configs.to_vec());
    }
    wanted
        .iter()
        .map(|w| {
            configs
                .iter()
                .find(|c| &c.name == w)
                .cloned()
                .ok_or_else(|| ReportError::UnknownConfig {
                    name: w.clone(),
                    known: known_names(configs),
                })
        })
        .collect()
}

fn known_names(configs: &[ConfigInput]) -> String {
    if configs.is_empty() {
        return "none".to_string();
    }
    configs
        .iter()
        .map(|c| format!("{:?}", c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves a `--configs` list typed by a user into exact names. Names may themselves hold
/// commas ("2x Opteron 2.2 GHz, 6 disks"), so the pieces between commas are joined back
/// greedily: the longest run of pieces that names a configuration (exactly, else as a
/// case-insensitive prefix of exactly one name) wins.
pub fn resolve_config_list(list: &str, names: &[String]) -> Result<Vec<String>, ReportError> {
    let pieces: Vec<&str> = list.split(',').collect();
    let find = |text: &str| -> Option<String> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        if let Some(n) = names.iter().find(|n| n.as_str() == t) {
            return Some(n.clone());
        }
        let lower = t.to_lowercase();
        let mut hits = names
            .iter()
            .filter(|n| n.to_lowercase().starts_with(&lower));
        match (hits.next(), hits.next()) {
            (Some(n), None) => Some(n.clone()),
            _ => None,
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        if pieces[i].trim().is_empty() {
            i += 1;
            continue;
        }
        let hit = (i + 1..=pieces.len())
            .rev()
            .find_map(|j| find(&pieces[i..j].join(",")).map(|n| (j, n)));
        match hit {
            Some((j, n)) => {
                if !out.contains(&n) {
                    out.push(n);
                }
                i = j;
            }
            None => {
                return Err(ReportError::UnknownConfig {
                    name: pieces[i].trim().to_string(),
                    known: if names.is_empty() {
                        "none".to_string()
                    } else {
                        names
                            .iter()
                            .map(|n| format!("{n:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                });
            }
        }
    }
    Ok(out)
}

/// A sweep's modes from its levels of the fit's kind (else the first kind).
fn modes_of(c: &ConfigInput) -> Vec<ModeInput> {
    if !c.modes.is_empty() || c.levels.is_empty() {
        return c.modes.clone();
    }
    let kind = c
        .fit
        .as_ref()
        .map_or_else(|| c.levels[0].kind.clone(), |f| f.kind.clone());
    let mut levels: Vec<&LevelInput> = c.levels.iter().filter(|l| l.kind == kind).collect();
    levels.sort_by_key(|l| l.loops);
    levels
        .iter()
        .map(|l| ModeInput {
            name: level_name(l.loops),
            watts: l.mean_w,
            ci95_watts: Some(l.ci95_w),
            warnings: l.warnings.clone(),
        })
        .collect()
}

/// Time-weighted mean of `f(busy)` over the utilisation history, and the hours it covers.
pub(super) fn over_history(util: &[(i64, i64, f64)], f: impl Fn(f64) -> f64) -> Option<(f64, f64)> {
    let mut sum = 0.0;
    let mut ms = 0.0;
    for &(s, e, busy) in util {
        if e > s && busy.is_finite() {
            let d = (e - s) as f64;
            sum += f(busy.max(0.0)) * d;
            ms += d;
        }
    }
    (ms > 0.0).then(|| (sum / ms, ms / MS_PER_HOUR))
}

/// Watts as a function of busy CPUs: the fit where there is one, else straight lines
/// between the level modes (idle, 1 loop, ...), held at the top level beyond it.
fn watts_at(c: &ConfigInput, modes: &[ModeInput]) -> Option<Box<dyn Fn(f64) -> f64>> {
    if let Some(f) = &c.fit {
        let (a, b) = (f.idle_watts, f.watts_per_loop);
        return Some(Box::new(move |u| a + b * u));
    }
    let mut pts: Vec<(f64, f64)> = modes
        .iter()
        .filter_map(|m| level_loops(&m.name).map(|n| (f64::from(n), m.watts)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    if pts.first().is_none_or(|p| p.0 != 0.0) {
        return None;
    }
    Some(Box::new(move |u| {
        let i = pts.partition_point(|p| p.0 <= u);
        if i >= pts.len() {
            return pts[pts.len() - 1].1;
        }
        let (x0, y0) = pts[i - 1];
        let (x1, y1) = pts[i];
        y0 + (y1 - y0) * (u - x0) / (x1 - x0)
    }))
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

    let mut reports = Vec::with_capacity(configs.len());
    for c in &configs {
        let modes = modes_of(c);
        let duty_cycle = watts_at(c, &modes)
            .and_then(|f| over_history(utilisation, f))
            .map(|(w, _)| pricer.mode(DUTY_CYCLE, w, None));
        if c.status == ConfigStatus::Partial {
            notes.push(format!(
                "{:?}: the sweep was interrupted; only the levels shown were measured",
                c.name
            ));
        }
        reports.push(ConfigReport {
            name: c.name.clone(),
            kind: c.kind,
            status: c.status,
            host: c.host.clone(),
            description: c.description.clone(),
            fingerprint: c.fingerprint.clone(),
            upgrade_cost: c.upgrade_cost,
            modes: modes
                .iter()
                .map(|m| {
                    for w in &m.warnings {
                        notes.push(format!("{:?} {}: {w}", c.name, m.name));
                    }
                    ModeReport {
                        warnings: m.warnings.clone(),
                        ..pricer.mode(&m.name, m.watts, m.ci95_watts)
                    }
                })
                .collect(),
            fit: c.fit.as_ref().map(|f| {
                let mut fit = fit_report(f, &pricer);
                let levels = c.levels.iter().filter(|l| l.kind == f.kind).count();
                if levels == 2 {
                    let w = "the fit rests on two levels: a line through two points always \
                             fits, so its r2 says nothing and watts per loop is unchecked"
                        .to_owned();
                    notes.push(format!("{:?} fit: {w}", c.name));
                    fit.notes.push(w);
                }
                fit
            }),
            levels: c
                .levels
                .iter()
                .map(|l| LevelReport {
                    kind: l.kind.clone(),
                    loops: l.loops,
                    mean_w: l.mean_w,
                    ci95_w: l.ci95_w,
                    residency: l.residency.clone(),
                    mean_mhz: l.mean_mhz,
                    ops_per_s: l.ops_per_s,
                    joules_per_op: l.joules_per_op,
                    annual_cost: pricer.figure(l.mean_w, None).cost,
                })
                .collect(),
            duty_cycle,
        });
    }

    let headline = match &opts.mode {
        Some(m) => {
            if !reports.iter().any(|r| r.modes.iter().any(|x| &x.name == m)) {
                let mut known: Vec<&str> = reports
                    .iter()
                    .flat_map(|r| r.modes.iter().map(|x| x.name.as_str()))
                    .collect();
                known.sort_by_key(|k| crate::analysis::modes::mode_rank(k));
                known.dedup();
                return Err(ReportError::UnknownMode {
                    mode: m.clone(),
                    known: if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    },
                });
            }
            m.clone()
        }
        None if reports.len() > 1 && reports.iter().all(|r| r.duty_cycle.is_some()) => {
            DUTY_CYCLE.to_string()
        }
        None => "idle".to_string(),
    };

    // Unless --configs gave an order, the costliest configuration at the headline comes
    // first and is the baseline, so comparisons read as what moving to each cheaper one
    // saves (configurations without the headline mode keep their order, last).
    let baseline = if opts.configs.is_empty() {
        let at = |r: &ConfigReport| headline_watts(r, &headline);
        reports.sort_by(|a, b| match (at(a), at(b)) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        Baseline::Costliest
    } else {
        Baseline::First
    };
    let comparisons = comparisons(&reports, &headline, &pricer, opts, &mut notes);

    let measured = match &input.measured {
        Some(m) => Some(measured_report(m, tariff, &configs, input.host.as_deref())?),
        None => None,
    };
    if let Some(m) = &measured {
        for w in &m.warnings {
            notes.push(format!("measured: {w}"));
        }
        if !m.gaps.is_empty() {
            notes.push(format!(
                "{} meter gap(s) totalling {:.1} h are not interpolated; measured figures are \
                 annualised over the {:.1} h covered",
                m.gaps.len(),
                m.gap_hours,
                m.covered_hours
            ));
        }
        if m.modelled.is_none() {
            notes.push(
                "no sweep fit and utilisation history to model this machine's cost from"
                    .to_string(),
            );
        }
    }
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

    let tariffs = super::tariffs::tariff_report(
        tariff,
        input.measured.as_ref(),
        &opts.tariffs,
        opts.carbon.as_ref(),
        opts.co2_g_per_kwh,
    )?;
    if let Some(b) = &pricer.unit.price_basis {
        notes.push(format!("annual costs are at {}", b.text));
    }
    let base = tariff.change_for(opts.reference_date);
    Ok(Report {
        generated_at: input.generated_at.to_rfc3339(),
        host: input.host.clone(),
        currency: tariff.currency().to_string(),
        price_per_kwh: base.price_per_kwh,
        mean_price_per_kwh: pricer.unit.mean_price_per_kwh,
        standing_charge_per_day: tariff.standing_charge_per_day(),
        standing_charge_per_year: tariff.standing_charge_per_day() * HOURS_PER_YEAR / 24.0,
        year_hours: HOURS_PER_YEAR,
        year_explanation: format!(
            "a year is 365 days x 24 h = {HOURS_PER_YEAR} h; annual kWh = watts x {HOURS_PER_YEAR} / 1000, \
             annual cost = annual kWh x the mean price per kWh over the year from {}",
            opts.reference_date
        ),
        reference_date: opts.reference_date.to_string(),
        co2_g_per_kwh: opts.co2_g_per_kwh,
        headline_mode: headline,
        baseline,
        configs: reports,
        comparisons,
        measured,
        regression,
        gpus,
        tariffs,
        idle: super::idle::build(&input.idle, tariff, opts.reference_date),
        notes,
    })
}

fn regression_report(
    checks: &[crate::sweep::regression::Check],
    pricer: &Pricer,
) -> RegressionReport {
    let status = if checks.is_empty() {
        RegressionStatus::NotChecked
    } else if checks.iter().any(|c| c.verdict.detected) {
        RegressionStatus::Detected
    } else {
        RegressionStatus::None
    };
    RegressionReport {
        status,
        checks: checks
            .iter()
            .map(|c| RegressionCheckReport {
                config: c.config.clone(),
                detected: c.verdict.detected,
                checked_at: rfc3339(c.checked_ms),
                checked_ms: c.checked_ms,
                baseline_idle_watts: c.baseline.watts,
                baseline_ci95_watts: c.baseline.ci95_w,
                latest_idle_watts: c.latest.watts,
                latest_ci95_watts: c.latest.ci95_w,
                delta_watts: c.verdict.delta_w,
                delta_ci95_watts: c.verdict.delta_ci95_w,
                threshold_watts: c.verdict.threshold_w,
                delta_annual_cost: pricer.figure(c.verdict.delta_w, None).cost,
            })
            .collect(),
    }
}

fn gpu_idle_report(g: &GpuInput, pricer: &Pricer) -> GpuIdleReport {
    let s = gpu_idle::summarise(&g.points);
    let rule = s.rule();
    let extra = s
        .idle_resident
        .mean_watts
        .zip(s.idle_bare.mean_watts)
        .map(|(r, b)| r - b);
    let resident_share = s.share(&s.idle_resident);
    let mut notes = Vec::new();
    match (s.idle_resident.samples, s.idle_bare.samples) {
        (0, _) => notes.push(
            "no idle time with a resident process was observed: nothing to price".to_string(),
        ),
        (_, 0) => notes.push(
            "no bare idle (no process) was observed, so there is no baseline to price the \
             resident process against; stop it once while wattson runs to measure one"
                .to_string(),
        ),
        _ => {}
    }
    if s.unclassified.samples > 0 {
        notes.push(format!(
            "{} sample(s) ({:.1}% of the time) could not be classified: {}",
            s.unclassified.samples,
            s.share(&s.unclassified) * 100.0,
            if rule == Rule::None {
                Rule::None.explain()
            } else {
                "no utilisation recorded, or an SM clock between idle and held"
            }
        ));
    }
    let at = |w: f64| pricer.figure(w, None);
    GpuIdleReport {
        channel: g.channel.clone(),
        source: g.source.clone(),
        rule,
        rule_explanation: rule.explain().to_string(),
        covered_hours: s.covered_ms as f64 / MS_PER_HOUR,
        busy_watts: s.busy.mean_watts,
        busy_share: s.share(&s.busy),
        idle_resident_watts: s.idle_resident.mean_watts,
        idle_resident_share: resident_share,
        idle_bare_watts: s.idle_bare.mean_watts,
        idle_bare_share: s.share(&s.idle_bare),
        unclassified_share: s.share(&s.unclassified),
        resident_extra_watts: extra,
        resident_annual_kwh: extra.map(|w| at(w * resident_share).kwh),
        resident_annual_cost: extra.map(|w| at(w * resident_share).cost),
        resident_all_year_kwh: extra.map(|w| at(w).kwh),
        resident_all_year_cost: extra.map(|w| at(w).cost),
        notes,
    }
}

fn fit_report(f: &FitInput, pricer: &Pricer) -> FitReport {
    FitReport {
        idle_watts: f.idle_watts,
        idle_ci95: f.idle_ci95,
        watts_per_loop: f.watts_per_loop,
        watts_per_loop_ci95: f.watts_per_loop_ci95,
        r2: f.r2,
        kind: f.kind.clone(),
        notes: f.notes.clone(),
        idle_annual_cost: pricer.figure(f.idle_watts, None).cost,
        per_loop_annual_cost: pricer.figure(f.watts_per_loop, None).cost,
    }
}

/// A configuration's watts at the headline: a mode, or [`DUTY_CYCLE`].
fn headline_watts(r: &ConfigReport, headline: &str) -> Option<f64> {
    if headline == DUTY_CYCLE {
        r.duty_cycle.as_ref().map(|m| m.watts)
    } else {
        r.modes.iter().find(|m| m.name == headline).map(|m| m.watts)
    }
}

fn comparisons(
    reports: &[ConfigReport],
    headline: &str,
    pricer: &Pricer,
    opts: &super::input::ReportOptions,
    notes: &mut Vec<String>,
) -> Vec<ComparisonReport> {
    let Some((base, rest)) = reports.split_first() else {
        return Vec::new();
    };
    let at = |r: &ConfigReport| -> Option<ModeReport> {
        if headline == DUTY_CYCLE {
            r.duty_cycle.clone()
        } else {
            r.modes.iter().find(|m| m.name == headline).cloned()
        }
    };
    let figure = |m: &ModeReport| pricer.figure(m.watts, m.ci95_watts);
    let mut out = Vec::new();
    for to in rest {
        let (Some(a), Some(b)) = (at(base), at(to)) else {
            notes.push(format!(
                "{:?} -> {:?}: not compared at {headline}, which one of them lacks",
                base.name, to.name
            ));
            continue;
        };
        let upgrade = opts.upgrade_cost.or(to.upgrade_cost);
        let c = compare(
            &base.name,
            &figure(&a),
            &to.name,
            &figure(&b),
            upgrade,
            opts.co2_g_per_kwh,
        );
        let per_mode = base
            .modes
            .iter()
            .filter_map(|m| {
                let n = to.modes.iter().find(|x| x.name == m.name)?;
                Some(ModeSaving {
                    mode: m.name.clone(),
                    annual_kwh_saved: m.annual_kwh - n.annual_kwh,
                    annual_saving: m.annual_cost - n.annual_cost,
                })
            })
            .collect();
        out.push(ComparisonReport {
            from: c.from,
            to: c.to,
            mode: headline.to_string(),
            from_watts: a.watts,
            to_watts: b.watts,
            annual_kwh_saved: c.annual_kwh_saved,
            annual_saving: c.annual_saving,
            annual_saving_ci95: c.annual_saving_ci95,
            upgrade_cost: upgrade,
            payback_years: c.payback_years,
            payback_years_low: c
                .payback_years
                .zip(upgrade)
                .zip(c.annual_saving_ci95)
                .map(|((_, u), ci)| u / (c.annual_saving + ci)),
            payback_years_high: c
                .payback_years
                .zip(upgrade)
                .zip(c.annual_saving_ci95)
                .filter(|_| {
                    c.annual_saving_ci95
                        .is_some_and(|ci| c.annual_saving - ci > 0.0)
                })
                .map(|((_, u), ci)| u / (c.annual_saving - ci)),
            co2_kg_saved: c.co2_kg_saved,
            per_mode,
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::many_single_char_names)]
mod tests {
    use super::*;
    use crate::analysis::tariff::Period;
    use crate::report::input::{MeasuredInput, ReportOptions};
    use chrono::NaiveTime;

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    fn ms(s: &str) -> i64 {
        s.parse::<DateTime<Utc>>().unwrap().timestamp_millis()
    }

    fn manual(name: &str, modes: &[(&str, f64)]) -> ConfigInput {
        ConfigInput {
            name: name.into(),
            kind: ConfigKind::Manual,
            host: None,
            fingerprint: None,
            description: None,
            modes: modes
                .iter()
                .map(|(n, w)| ModeInput {
                    name: (*n).into(),
                    watts: *w,
                    ci95_watts: None,
                    warnings: vec![],
                })
                .collect(),
            fit: None,
            levels: vec![],
            upgrade_cost: None,
            status: ConfigStatus::Complete,
        }
    }

    fn swept(name: &str, idle: f64, slope: f64) -> ConfigInput {
        ConfigInput {
            kind: ConfigKind::Sweep,
            host: Some("basket".into()),
            fit: Some(FitInput {
                idle_watts: idle,
                idle_ci95: Some(0.5),
                watts_per_loop: slope,
                watts_per_loop_ci95: Some(0.3),
                r2: 0.999,
                notes: vec![],
                kind: "spin".into(),
            }),
            levels: (0..3)
                .map(|n| LevelInput {
                    kind: "spin".into(),
                    loops: n,
                    mean_w: idle + slope * f64::from(n),
                    ci95_w: 0.5,
                    residency: BTreeMap::new(),
                    mean_mhz: None,
                    ops_per_s: None,
                    joules_per_op: None,
                    warnings: vec![],
                })
                .collect(),
            ..manual(name, &[])
        }
    }

    fn input(
        tariff: Tariff,
        configs: Vec<ConfigInput>,
        measured: Option<MeasuredInput>,
    ) -> ReportInput {
        ReportInput {
            generated_at: DateTime::from_timestamp_millis(ms("2026-01-02T00:00:00Z")).unwrap(),
            host: Some("basket".into()),
            tariff,
            configs,
            measured,
            regression: Vec::new(),
            gpus: vec![],
            idle: crate::report::idle::IdleInput::default(),
            options: ReportOptions::new(date(2026, 1, 1)),
        }
    }

    fn flat(price: f64) -> Tariff {
        Tariff::simple("GBP", price, 0.0, vec![], chrono_tz::UTC).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn measured_and_modelled_by_hand() {
        let h = 3_600_000;
        let t0 = ms("2026-03-01T00:00:00Z");
        // 10 h window; the meter covered hours 0-3 and 5-10 (8 h at 100 W); hours 3-5 are
        // a gap, and must not be filled in.
        let energy: Vec<(i64, i64, f64)> = (0..10)
            .filter(|i| !(3..5).contains(i))
            .map(|i| (t0 + i * h, t0 + (i + 1) * h, 100.0))
            .collect();
        // Half a CPU busy all along: the fit says 80 + 30 x 0.5 = 95 W.
        let utilisation = (0..10)
            .map(|i| (t0 + i * h, t0 + (i + 1) * h, 0.5))
            .collect();
        let m = MeasuredInput {
            from_ms: t0,
            to_ms: t0 + 10 * h,
            energy,
            covered_ms: 8 * h,
            gaps: vec![(t0 + 3 * h, t0 + 5 * h, "meter unplugged".into())],
            utilisation,
            cpus: 4,
            config: None,
            ..MeasuredInput::default()
        };
        let r = build(&input(
            flat(0.10),
            vec![swept("this box", 80.0, 30.0)],
            Some(m),
        ))
        .unwrap();
        let mr = r.measured.unwrap();
        assert!(close(mr.kwh, 0.8) && close(mr.energy_cost, 0.08));
        assert!(close(mr.covered_hours, 8.0) && close(mr.window_hours, 10.0));
        assert!(close(mr.coverage_percent, 80.0));
        assert!(close(mr.mean_watts, 100.0));
        // Annualised by the 8 covered hours, not the 10-hour window: 100 W all year.
        assert!(close(mr.annual_kwh, 876.0), "{}", mr.annual_kwh);
        assert!(close(mr.annual_cost, 87.6));
        assert!(close(mr.gap_hours, 2.0));
        assert_eq!(mr.gaps[0].reason, "meter unplugged");
        let md = mr.modelled.unwrap();
        assert_eq!(md.config, "this box");
        assert!(close(md.mean_busy_cpus, 0.5) && close(md.mean_watts, 95.0));
        assert!(close(md.kwh, 0.95) && close(md.hours, 10.0));
        assert!(close(md.annual_kwh, 832.2) && close(md.annual_cost, 83.22));
        // (832.2 - 876) / 876 = -5 %.
        assert!(close(mr.difference_kwh_percent.unwrap(), -5.0));
        assert!(close(mr.difference_cost_percent.unwrap(), -5.0));
        assert!(r.notes.iter().any(|n| n.contains("gap")), "{:?}", r.notes);
        assert_eq!(mr.daily.len(), 1);
        assert!(close(mr.daily[0].kwh, 0.8));
    }

    #[test]
    fn measured_energy_is_priced_by_time_of_day() {
        // Night 00:00-06:00 at 0.05, else 0.20: one kWh in each, over 2 covered hours.
        let night = Period {
            start: NaiveTime::MIN,
            end: NaiveTime::from_hms_opt(6, 0, 0).unwrap(),
            price_per_kwh: 0.05,
        };
        let t = Tariff::simple("GBP", 0.20, 0.0, vec![night], chrono_tz::UTC).unwrap();
        let h = 3_600_000;
        let d = ms("2026-03-01T00:00:00Z");
        let m = MeasuredInput {
            from_ms: d,
            to_ms: d + 24 * h,
            energy: vec![(d + h, d + 2 * h, 1000.0), (d + 12 * h, d + 13 * h, 1000.0)],
            covered_ms: 2 * h,
            ..MeasuredInput::default()
        };
        let r = build(&input(t, vec![], Some(m))).unwrap();
        let mr = r.measured.unwrap();
        assert!(close(mr.energy_cost, 0.25));
        assert_eq!(mr.bands.len(), 2);
        assert!(close(mr.annual_cost, 0.25 * 4380.0));
        assert!(mr.modelled.is_none());
    }

    #[test]
    fn duty_cycle_decides_the_headline_when_measured() {
        // A machine 1 CPU busy on average: the manual box interpolates 78 + 33 = 111 W,
        // the swept one 40 + 15 = 55 W.
        let h = 3_600_000;
        let m = MeasuredInput {
            utilisation: vec![(0, h, 0.0), (h, 2 * h, 2.0)],
            cpus: 2,
            ..MeasuredInput::default()
        };
        let a = manual(
            "athlon",
            &[("idle", 78.0), ("1 loop", 111.0), ("2 loops", 111.0)],
        );
        let r = build(&input(
            flat(0.09),
            vec![a, swept("new", 40.0, 15.0)],
            Some(m),
        ))
        .unwrap();
        assert_eq!(r.headline_mode, DUTY_CYCLE);
        // athlon: (78 + 111) / 2 = 94.5 W; new: (40 + 70) / 2 = 55 W.
        assert!(close(r.configs[0].duty_cycle.as_ref().unwrap().watts, 94.5));
        let c = &r.comparisons[0];
        assert!(close(c.from_watts, 94.5) && close(c.to_watts, 55.0));
        assert!(close(c.annual_kwh_saved, 39.5 * 8.76));
    }

    #[test]
    fn mode_option_overrides_and_unknown_modes_are_named() {
        let a = manual("a", &[("idle", 100.0), ("1 loop", 150.0)]);
        let b = manual("b", &[("idle", 50.0), ("1 loop", 60.0)]);
        let mut i = input(flat(0.10), vec![a, b], None);
        i.options.mode = Some("1 loop".into());
        let r = build(&i).unwrap();
        assert_eq!(r.comparisons[0].mode, "1 loop");
        assert!(close(r.comparisons[0].annual_kwh_saved, 90.0 * 8.76));
        i.options.mode = Some("turbo".into());
        let e = build(&i).unwrap_err().to_string();
        assert!(e.contains("turbo") && e.contains("idle, 1 loop"), "{e}");
    }

    #[test]
    fn sweep_modes_come_from_levels_with_their_intervals() {
        let r = build(&input(flat(0.09), vec![swept("s", 40.0, 15.0)], None)).unwrap();
        let names: Vec<&str> = r.configs[0].modes.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["idle", "1 loop", "2 loops"]);
        assert_eq!(r.configs[0].modes[1].ci95_watts, Some(0.5));
        assert!(close(
            r.configs[0].modes[1].annual_cost_ci95.unwrap(),
            0.5 * 8.76 * 0.09
        ));
        let fit = r.configs[0].fit.as_ref().unwrap();
        assert!(close(fit.per_loop_annual_cost, 15.0 * 8.76 * 0.09));
    }

    #[test]
    fn config_lists_with_commas_in_names_resolve() {
        let names = vec![
            "2x Opteron 2.2 GHz, 6 disks".to_string(),
            "Athlon 64 1.8 GHz, 3 disks".to_string(),
        ];
        let got = resolve_config_list("athlon,2x Opteron 2.2 GHz, 6 disks", &names).unwrap();
        assert_eq!(got, [names[1].clone(), names[0].clone()]);
        let e = resolve_config_list("pentium", &names)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pentium") && e.contains("Athlon"), "{e}");
    }
}
