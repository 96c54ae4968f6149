//! What a report is built from: plain data, filled from the config file's `[[config]]` and
//! `[tariff]` sections and (by the store) from SQLite. No I/O here beyond finding the
//! machine's time zone for a tariff that names none.
//!
//! Units: watts (W), watt-hours (Wh) in energy buckets, UTC milliseconds for instants,
//! megahertz for frequencies, the tariff's currency for money, busy CPUs (a count, `0..=cpus`)
//! for utilisation. A `ci95` is the half-width of a 95 % interval in its value's unit.

use std::collections::BTreeMap;
use wattson_collectors::SourceId;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

pub use crate::analysis::gpu_idle::GpuPoint;
use crate::config::ManualConfig;
use crate::tariff::Tariff;

/// Everything [`super::model::build`] needs.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// When the report was made.
    pub generated_at: DateTime<Utc>,
    /// The host the report runs on (whose measured history is in `measured`).
    pub host: Option<String>,
    /// Prices every figure.
    pub tariff: Tariff,
    /// Configurations in the order they are shown; the first is the comparisons' baseline.
    pub configs: Vec<ConfigInput>,
    /// This machine's recorded energy and utilisation, when a database has any.
    pub measured: Option<MeasuredInput>,
    /// The newest idle-power regression check of each configuration, newest first (see
    /// [`crate::sweep::regression::latest`]); empty when none ran.
    pub regression: Vec<crate::sweep::regression::Check>,
    /// This machine's GPUs' recorded samples over the report window (empty: no GPU).
    pub gpus: Vec<GpuInput>,
    /// Package C-state history and measured idle settings (`wattson idle --measure`).
    pub idle: super::idle::IdleInput,
    /// Candidate machines to price on this machine's load (`wattson candidate`).
    pub candidates: Vec<crate::candidate::Candidate>,
    /// What the user asked for.
    pub options: ReportOptions,
}

/// Where a configuration's figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigKind {
    /// Read off a meter's display by hand (`[[config]]` in the config file).
    Manual,
    /// Measured by `wattson sweep`.
    Sweep,
    /// Measured at idle only, by `wattson idle --measure` (idle as found, or with one setting
    /// changed): no loop levels, so no watts at a duty cycle.
    IdleMeasure,
}

/// Whether a configuration's measurements ran to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigStatus {
    /// Every planned level was measured.
    Complete,
    /// The sweep was interrupted; the levels present are valid, later ones are missing.
    Partial,
}

/// One named configuration of a machine.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigInput {
    /// The user's label, unique in a report.
    pub name: String,
    pub kind: ConfigKind,
    /// The host it was measured on, where known.
    pub host: Option<String>,
    /// The host's hardware/software fingerprint, as stored.
    pub fingerprint: Option<serde_json::Value>,
    pub description: Option<String>,
    /// Watts per mode (`standby`, `idle`, `1 loop`, ...). A sweep with no modes given has
    /// them derived from its levels of the fit's kind.
    pub modes: Vec<ModeInput>,
    /// The sweep's straight-line fit of watts on loops.
    pub fit: Option<FitInput>,
    /// The sweep's per-level statistics.
    pub levels: Vec<LevelInput>,
    /// What moving to this configuration costs, currency.
    pub upgrade_cost: Option<f64>,
    pub status: ConfigStatus,
    /// Measured against another configuration in alternating phases (`wattson idle
    /// --measure`): compared with that one by the difference measured directly.
    pub paired: Option<Paired>,
    /// Its own week's schedule of modes (`[[config]] schedule`), which the report prices it
    /// on in place of `--schedule`.
    pub schedule: Option<crate::analysis::schedule::Schedule>,
}

/// A configuration's idle measured against another's in alternating phases (A B A ...):
/// the difference is surer than the difference of the two means, because it cancels what
/// drifts between them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paired {
    /// The configuration it was measured against (`idle as found`).
    pub against: String,
    /// The other configuration's idle during these phases, W.
    pub against_watts: f64,
    /// This one minus the other, W (negative: this one draws less), and its 95 %
    /// half-width.
    pub delta_watts: f64,
    pub delta_ci95_watts: f64,
}

/// Mean watts in one mode.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeInput {
    /// Mode name, see [`crate::analysis::modes`].
    pub name: String,
    /// W.
    pub watts: f64,
    /// Half-width of the mean's 95 % interval, W, where measured.
    pub ci95_watts: Option<f64>,
    /// What weakens the figure (a sweep level's warnings: other load before idle, the time
    /// cap reached), in words.
    pub warnings: Vec<String>,
}

/// A sweep's fit: `watts = idle_watts + watts_per_loop x loops`.
#[derive(Debug, Clone, PartialEq)]
pub struct FitInput {
    /// W at no load.
    pub idle_watts: f64,
    /// W, half-width of the 95 % interval.
    pub idle_ci95: Option<f64>,
    /// W per busy loop (one busy CPU).
    pub watts_per_loop: f64,
    /// W per loop, half-width of the 95 % interval.
    pub watts_per_loop_ci95: Option<f64>,
    /// Coefficient of determination.
    pub r2: f64,
    /// Plain-words findings, e.g. from [`crate::analysis::fit::diagnose`].
    pub notes: Vec<String>,
    /// Loop kind the fit is over (`spin`, `memory`, `pause`).
    pub kind: String,
}

/// One measured sweep level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelInput {
    /// Loop kind (`spin`, `memory`, `pause`).
    pub kind: String,
    /// Busy loops (0 = idle).
    pub loops: u32,
    /// Mean watts.
    pub mean_w: f64,
    /// Half-width of the mean's 95 % interval, W.
    pub ci95_w: f64,
    /// C-state name -> share of time in it (`0..=1`), averaged over CPUs.
    pub residency: BTreeMap<String, f64>,
    /// Mean CPU frequency, MHz.
    pub mean_mhz: Option<f64>,
    /// Loop operations per second, all loops together.
    pub ops_per_s: Option<f64>,
    /// Joules per operation at the wall, above idle or total as the sweep stored it.
    pub joules_per_op: Option<f64>,
    /// The level's warnings, as the sweep stored them.
    pub warnings: Vec<String>,
}

/// This machine's recorded history over the report window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MeasuredInput {
    /// The window asked for, UTC ms.
    pub from_ms: i64,
    /// UTC ms, exclusive.
    pub to_ms: i64,
    /// Energy per (hourly) bucket: `(start UTC ms, end UTC ms, Wh)`, from the ledger. Never
    /// interpolated across gaps.
    pub energy: Vec<(i64, i64, f64)>,
    /// Time the energy covers inside the window, ms (the ledger's: the support of the
    /// integral).
    pub covered_ms: i64,
    /// The ledger's buckets with the time each covers: `(start, end, Wh, covered ms)`, for
    /// means over covered time (the mean watts by hour of day). Empty: `energy` covers its
    /// buckets whole.
    pub covered: Vec<(i64, i64, f64, i64)>,
    /// Meter outages: `(start UTC ms, end UTC ms, reason)`.
    pub gaps: Vec<(i64, i64, String)>,
    /// What the meter's own counter says of each outage that it settled, by the outage's
    /// `(start, end)`: its Wh in the window (in `energy`, not in `covered`'s time), or why
    /// not.
    pub counted: Vec<(i64, i64, crate::ledger::energy::CountedSpan)>,
    /// Utilisation history: `(start UTC ms, end UTC ms, mean busy CPUs)`, busy CPUs being
    /// utilisation (`0..=1`) times `cpus`.
    pub utilisation: Vec<(i64, i64, f64)>,
    /// Logical CPUs of this machine.
    pub cpus: u32,
    /// The configuration whose sweep fit models this machine; `None` picks the first sweep
    /// configuration with a fit measured on `ReportInput::host`, else the first with a fit.
    pub config: Option<String>,
    /// The source measured (`meter:wall`).
    pub source: Option<SourceId>,
    /// The mean power's 95 % interval and what it rests on (see
    /// [`crate::ledger::interval`]).
    pub power: Option<crate::ledger::interval::PowerInterval>,
    /// The meter's own counter against the integral over the window.
    pub counter: Option<crate::ledger::counter_check::CounterCheck>,
    /// Hours whose energy and covered time are estimates.
    pub approximate_hours: u64,
    /// The outages in which the host was away (asleep, off), settled by the meter's
    /// counter: its standby and off, measured at the wall.
    pub away: Vec<crate::ledger::standby::AwaySpan>,
}

impl MeasuredInput {
    /// The load by hour of the week a year on the tariff is priced over: the covered
    /// buckets, else the energy's buckets taken as covered whole.
    pub fn load_shape(&self, tariff: &Tariff) -> crate::ledger::load_shape::LoadShape {
        let buckets: Vec<(i64, i64, f64, i64)> = if self.covered.is_empty() {
            self.energy
                .iter()
                .map(|&(a, b, wh)| (a, b, wh, b - a))
                .collect()
        } else {
            self.covered.clone()
        };
        crate::ledger::load_shape::LoadShape::new(buckets, tariff.tz())
    }

    /// The window in words, for the annual figure's basis ("2026-12-01 to 2026-12-07").
    pub fn window_words(&self, tariff: &Tariff) -> String {
        format!(
            "{} to {}",
            crate::report::model::local_day(self.from_ms, tariff),
            crate::report::model::local_day(self.to_ms, tariff)
        )
    }
}

/// One GPU's stored samples over the report window, joined by poll time.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInput {
    /// Sample source (`gpu`).
    pub source: SourceId,
    /// `gpuN`.
    pub channel: String,
    /// W, utilisation share, process count, SM clock MHz per poll.
    pub points: Vec<GpuPoint>,
}

/// What the user asked for (`wattson report` options).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    /// Exact configuration names to show, in this order (the first is the baseline);
    /// empty shows all in input order.
    pub configs: Vec<String>,
    /// Compare at this mode instead of idle or the measured duty cycle.
    pub mode: Option<String>,
    /// What the upgrade costs, currency; overrides each target's `upgrade_cost`.
    pub upgrade_cost: Option<f64>,
    /// Grid carbon intensity, g CO2 per kWh.
    pub co2_g_per_kwh: Option<f64>,
    /// Report window start, UTC ms (for the measured history).
    pub from_ms: Option<i64>,
    /// Report window end, UTC ms, exclusive.
    pub to_ms: Option<i64>,
    /// Local date the annual figures' year starts on (the tariff's prices from then on).
    pub reference_date: NaiveDate,
    /// Tariffs to price the measured energy under, side by side (`--tariffs`).
    pub tariffs: Vec<super::real_tariffs::NamedTariff>,
    /// Carbon-intensity series: CO2 per slot, `co2_g_per_kwh` filling the rest.
    pub carbon: Option<crate::tariff::series::SeriesSet>,
    /// Candidate machines to show, in order (`--candidates`); empty: the cheapest.
    pub candidates: Vec<String>,
    /// How many of the cheapest candidates to show when none are named [default: 3].
    pub candidates_top: Option<usize>,
    /// This machine's own ssj_ops at 100 % (`--this-ssj-ops`, given by the user): a
    /// candidate's perf ratio is its ssj_ops at 100 % over this where none is given.
    pub this_ssj_ops: Option<f64>,
    /// A week's schedule of modes to price each configuration on (`--schedule`).
    pub schedule: Option<crate::analysis::schedule::Schedule>,
}

impl ReportOptions {
    /// No filters, no overrides, a year from `reference_date`.
    pub fn new(reference_date: NaiveDate) -> Self {
        ReportOptions {
            configs: Vec::new(),
            mode: None,
            upgrade_cost: None,
            co2_g_per_kwh: None,
            from_ms: None,
            to_ms: None,
            reference_date,
            tariffs: Vec::new(),
            carbon: None,
            candidates: Vec::new(),
            candidates_top: None,
            this_ssj_ops: None,
            schedule: None,
        }
    }
}

impl ConfigInput {
    /// A configuration measured by hand, from the config file's `[[config]]`.
    pub fn from_manual(m: &ManualConfig) -> Self {
        ConfigInput {
            name: m.name.clone(),
            kind: ConfigKind::Manual,
            host: None,
            fingerprint: None,
            description: m.description.clone(),
            modes: m
                .modes
                .iter()
                .map(|(name, watts)| ModeInput {
                    name: name.clone(),
                    watts: *watts,
                    ci95_watts: None,
                    warnings: Vec::new(),
                })
                .collect(),
            fit: None,
            levels: Vec::new(),
            upgrade_cost: m.upgrade_cost,
            status: ConfigStatus::Complete,
            paired: None,
            schedule: m.schedule.clone(),
        }
    }
}

/// The tariff of a `[tariff]` section, and this machine's time zone: the ledger's.
pub use crate::ledger::costs::tariff_from_config;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_configs_carry_modes_and_upgrade_cost() {
        let m = ManualConfig {
            name: "box".into(),
            description: Some("old".into()),
            modes: vec![("idle".into(), 78.0)],
            upgrade_cost: Some(300.0),
            schedule: None,
        };
        let c = ConfigInput::from_manual(&m);
        assert_eq!(c.kind, ConfigKind::Manual);
        assert_eq!(c.modes[0].watts, 78.0);
        assert_eq!(c.modes[0].ci95_watts, None);
        assert_eq!(c.upgrade_cost, Some(300.0));
    }
}
