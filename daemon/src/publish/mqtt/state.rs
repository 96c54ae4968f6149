//! The `<topic_prefix>/<host>/state` payload: one JSON object per publish interval, typed
//! as [`StatePayload`] (serde both ways). It is the contract between the publisher, the
//! fleet collector ([`parse`]) and the dashboards' tests.
//!
//! Fields (absent when unknown, never `null`):
//!
//! | field | unit | meaning |
//! |---|---|---|
//! | `ts` | UTC ms | time of the newest sample in the interval; unique per host, the fleet collector's dedupe key |
//! | `interval_s` | s | the publish interval |
//! | `power` | W | mean over the interval (not the last sample) of the primary power source, each reading weighed by the time since the one before it ([`crate::live`]) |
//! | `power_source` | | that source: `meter:<id>`, else `estimate:wall`, else `rapl`, else `hwmon` |
//! | `power_estimate`, `power_error` | bool, W | present when `power` is estimated from the host's calibration (no wall meter; one fitted on ordinary running or a sweep's fit): `true`, and the estimate's +/- band |
//! | `energy` | kWh | the wall meter's stored energy total (the ledger's integral since its first sample): continuous across restarts, never lower than it was |
//! | `energy_ts` | UTC ms | the newest stored sample `energy`, `energy_today` and the costs count |
//! | `energy_today` | kWh | energy since local midnight |
//! | `voltage`, `current`, `power_factor`, `frequency` | V, A, 0..1, Hz | interval means, primary meter |
//! | `currency`, `cost_today`, `cost_month`, `cost_total`, `cost_annual_projection` | currency | the ledger's energy priced by the tariff; `cost_total` since the first sample (monotonic while prices are positive) |
//! | `cost_annual_standing_charge` | currency | the tariff's standing charge for a year: its own figure, not in `cost_annual_projection` |
//! | `cost_annual_all_in` | currency | `cost_annual_projection` plus the standing charge: the year's bill for this machine's energy |
//! | `cost_annual_basis` | text | what `cost_annual_projection` is and its price basis, as `wattson status` and the report word it |
//! | `standby_power`, `standby_power_ci95` | W | standby measured at the wall: the meter's counter over every time the kernel says the host slept, over that time; and the counter's step at each end over it ([`crate::ledger::standby`]) |
//! | `price`, `price_source` | currency per kWh | the price now and where it comes from: a price series (`mqtt` for `[tariff] price_topic`, an import's name) or `tariff` (the configured prices) |
//! | `cpu_utilisation` | % | mean busy share of all CPUs |
//! | `cpu_frequency` | MHz | mean core frequency |
//! | `cstate_deepest`, `cstate_deepest_residency` | name, % | the deepest idle state and its share of the interval |
//! | `package_cstate_deepest`, `package_cstate_deepest_residency` | name, % | the deepest package C-state (`PC2` .. `PC10`) holding at least 0.1 % of the interval, `none` when none did, and its share (where the package counters are read) |
//! | `mode` | | the current mode (`idle`, `1 loop`, ...) |
//! | `meters` | counts | per meter id: `good`, `crc_errors`, `timeouts`, `implausible`, `exceptions` |
//! | `idle_regression` | W, UTC | the latest idle-power regression check, once one is stored: `detected` (bool), `config`, `baseline_idle_w`, `baseline_ci95_w`, `latest_idle_w`, `latest_ci95_w`, `delta_w`, `delta_ci95_w`, `threshold_w`, `checked_at` (RFC 3339), `checked_ms` |
//! | `estimated` | kWh, W, currency | no wall meter: the calibration's `basis`, `energy_today`, `cost_today`, the last 7 days' mean `power` and `power_ci95`, a year at that rate `cost_annual` and `cost_annual_ci95`, `minutes` estimated and `minutes_withheld` ([`EstimatedPayload`]) |
//! | `sleep` | h, W, currency | what sleeping when idle would save, from the last 28 days (the report's section, hourly): the proposed `windows`, `hours_a_week`, `annual_saving` and, where a resume's energy is known, `annual_net_saving`, `standby_watts` and `standby_from`, what it would `interrupted` (by service), and its `basis` or why there is none ([`SleepPayload`]) |
//! | `series` | | every live series as `[source, metric, channel, value]` in the metric's unit (means; energy totals are the latest value) |
//! | `held` | s | the sources whose readings stand until the next (`[[plug]] readings = "hold"`), each with its `max_hold`: their means weigh each reading by the time it stood, and a fleet collector stores each as standing for the time since the state before ([`crate::store::integrate::Readings::Mean`]) |

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wattson_collectors::source::channel;
use wattson_collectors::{Metric, SourceId};

use crate::ledger::PrimaryPower;
use crate::live::LiveReading;
use crate::sweep::regression::Check;

/// Largest state payload the collector accepts, bytes.
pub const MAX_STATE_BYTES: usize = 64 * 1024;

/// One meter's health counters since the daemon started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeterCounters {
    /// The meter's configured id (`wall`).
    pub id: String,
    pub good: u64,
    pub crc_errors: u64,
    pub timeouts: u64,
    pub implausible: u64,
    /// Modbus exception replies.
    pub exceptions: u64,
}

/// One meter's counters as published under `meters.<id>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersPayload {
    pub good: u64,
    pub crc_errors: u64,
    pub timeouts: u64,
    pub implausible: u64,
    /// Absent from the state of an older wattson: 0.
    #[serde(default)]
    pub exceptions: u64,
}

/// Figures the daemon computes from its store and tariff (the ledger) and its live view,
/// handed to the publisher through a watch channel: the publisher never waits for the
/// store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateExtras {
    /// ISO 4217 code, e.g. `GBP`: the unit of the cost sensors.
    pub currency: String,
    /// Cost so far today (local midnight), in `currency`.
    pub cost_today: Option<f64>,
    /// Cost so far this calendar month, in `currency`.
    pub cost_month: Option<f64>,
    /// Cost since the wall meter's first stored sample, in `currency`.
    pub cost_total: Option<f64>,
    /// A year on the tariff at this machine's measured load, in `currency`; the standing
    /// charge is not in it.
    pub annual_projection: Option<f64>,
    /// The tariff's standing charge for a year, in `currency`: its own figure, paid whether
    /// or not the machine runs.
    pub standing_charge_annual: Option<f64>,
    /// What that figure is and its price basis, in the words every surface uses
    /// ([`crate::ledger::annual::Annual::basis`]).
    pub annual_basis: Option<String>,
    /// The price now, currency per kWh, and where it comes from (a series' name, or
    /// `tariff`).
    pub price_now: Option<(f64, String)>,
    /// Standby (the host asleep) measured at the wall, W, and its 95 % band
    /// ([`crate::ledger::standby`]).
    pub standby_watts: Option<(f64, Option<f64>)>,
    /// Energy since local midnight, kWh.
    pub energy_today_kwh: Option<f64>,
    /// The wall meter's stored energy total, kWh.
    pub energy_total_kwh: Option<f64>,
    /// The newest stored sample the energy and cost figures count, UTC ms.
    pub energy_ts_ms: Option<i64>,
    /// The publishes begun before these figures were read ([`LiveState::publishes`]): a
    /// publish waits for figures that count the pass which began it.
    ///
    /// [`LiveState::publishes`]: crate::live::LiveState::publishes
    pub publishes: u64,
    /// The current mode (`idle`, `1 loop`, `sweep`, ...).
    pub mode: Option<String>,
    /// Every value `mode` can take; when non-empty the mode sensor is a Home Assistant
    /// `enum` with these options, otherwise a plain text sensor.
    pub mode_options: Vec<String>,
    /// Which source's readings are the host's power.
    pub primary: PrimaryPower,
    pub meter_counters: Vec<MeterCounters>,
    /// The idle-power regression check the host's `problem` sensor shows (see
    /// [`crate::sweep::regression::headline`]); `None` until a check is stored.
    pub idle_regression: Option<Check>,
    /// The costliest groups of what each service costs (at most
    /// [`crate::services::render::MQTT_GROUPS`]), and wattson itself: estimates.
    pub services: Vec<ServiceState>,
    pub wattson_itself: Option<ServiceState>,
    /// Who woke the CPUs over the stored hours of the last two (for `/metrics`); `None`
    /// until a window is stored.
    pub wakeups: Option<crate::idle::wakeup_hours::StoredWakeups>,
    /// Each configured disk's spin state over the stored hours of the last 24, priced.
    pub disks: Vec<crate::idle::disk_hours::StoredDisk>,
    /// With no wall meter: the calibration's estimate (`None` without one).
    pub estimated: Option<EstimatedPayload>,
    /// What sleeping when idle would save (the report's section, hourly).
    pub sleep: Option<SleepPayload>,
}

/// One group of what each service costs, as published: estimates over the last 7 days
/// (see [`crate::services`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceState {
    /// `service`, `container`, `session`, `machine`, `other`, `rest`, `self`.
    pub kind: String,
    pub name: String,
    /// Share of the host's busy CPU time, %.
    pub cpu_share: f64,
    /// Estimated mean W above the idle floor, and its 95 % half-width; absent without a
    /// sweep or wall readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watts_ci95: Option<f64>,
    /// Estimated money a year, in the state's `currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_year: Option<f64>,
}

/// The newest idle-power regression check, as published (W, UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionPayload {
    pub detected: bool,
    pub config: String,
    pub baseline_idle_w: f64,
    pub baseline_ci95_w: f64,
    pub latest_idle_w: f64,
    pub latest_ci95_w: f64,
    pub delta_w: f64,
    pub delta_ci95_w: f64,
    pub threshold_w: f64,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
    pub checked_ms: i64,
}

/// One live series: `[source, metric, channel, value]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesEntry(pub SourceId, pub String, pub String, pub f64);

/// The state payload. Optional fields are left out when unknown; fields a newer publisher
/// adds are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatePayload {
    pub ts: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_source: Option<SourceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_estimate: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_error: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_ts: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_today: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voltage: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_factor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_today: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_month: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_annual_projection: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_annual_basis: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_annual_standing_charge: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_annual_all_in: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_power: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_power_ci95: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_utilisation: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_frequency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cstate_deepest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cstate_deepest_residency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_cstate_deepest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_cstate_deepest_residency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meters: BTreeMap<String, CountersPayload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_regression: Option<RegressionPayload>,
    /// What the costliest services cost (estimates), and wattson itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wattson_itself: Option<ServiceState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated: Option<EstimatedPayload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<SleepPayload>,
    #[serde(default)]
    pub series: Vec<SeriesEntry>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held: BTreeMap<SourceId, f64>,
}

/// A built state payload.
#[derive(Debug, Clone, PartialEq)]
pub struct StateSnapshot {
    /// UTC ms of the newest sample in the interval.
    pub ts_ms: i64,
    pub payload: StatePayload,
    /// `payload` as JSON (what discovery inspects and what is sent).
    pub json: Value,
}

/// Build the state from the interval means and the latest readings. `None` when no sample
/// arrived during the interval (nothing new to say, and `ts` would repeat).
pub fn build(
    means: &[LiveReading],
    latest: &[LiveReading],
    extras: &StateExtras,
    interval_s: f64,
) -> Option<StateSnapshot> {
    let ts_ms = means.iter().map(|r| r.ts_ms).max()?;
    let mut p = StatePayload {
        ts: ts_ms,
        interval_s: Some(interval_s),
        ..StatePayload::default()
    };
    primary_figures(&mut p, means, extras);
    ledger_figures(&mut p, extras);
    cpu_figures(&mut p, means);
    p.mode.clone_from(&extras.mode);
    p.meters = extras
        .meter_counters
        .iter()
        .map(|c| {
            let counters = CountersPayload {
                good: c.good,
                crc_errors: c.crc_errors,
                timeouts: c.timeouts,
                implausible: c.implausible,
                exceptions: c.exceptions,
            };
            (c.id.clone(), counters)
        })
        .collect();
    p.idle_regression = extras.idle_regression.as_ref().map(regression_payload);
    p.services.clone_from(&extras.services);
    p.wattson_itself.clone_from(&extras.wattson_itself);
    p.sleep.clone_from(&extras.sleep);
    p.series = series(means, latest);
    for v in [
        &mut p.power,
        &mut p.power_error,
        &mut p.energy,
        &mut p.energy_today,
        &mut p.voltage,
        &mut p.current,
        &mut p.power_factor,
        &mut p.frequency,
        &mut p.cost_today,
        &mut p.cost_month,
        &mut p.cost_total,
        &mut p.cost_annual_projection,
        &mut p.cpu_frequency,
    ] {
        *v = v.map(round);
    }
    let json = serde_json::to_value(&p).ok()?;
    Some(StateSnapshot {
        ts_ms,
        payload: p,
        json,
    })
}

/// The interval mean of one series, where finite.
fn mean(means: &[LiveReading], source: &SourceId, metric: Metric, channel: &str) -> Option<f64> {
    means
        .iter()
        .find(|r| r.source == *source && r.metric == metric && r.channel == channel)
        .map(|r| r.value)
        .and_then(finite)
}

/// The primary power source's power (and, for an estimate, its error) and, for a meter,
/// what it reads beside power.
fn primary_figures(p: &mut StatePayload, means: &[LiveReading], extras: &StateExtras) {
    let primary = extras
        .primary
        .pick(
            means
                .iter()
                .filter(|r| r.metric == Metric::Power)
                .map(|r| &r.source),
        )
        .cloned();
    let Some(src) = &primary else {
        return;
    };
    if let Some(w) = mean(means, src, Metric::Power, "") {
        p.power = Some(w);
        p.power_source = Some(src.clone());
        if *src == SourceId::Estimate {
            p.power_estimate = Some(true);
            p.power_error = mean(means, src, Metric::Power, channel::ESTIMATE_ERROR);
        }
    }
    if src.is_meter() {
        p.voltage = mean(means, src, Metric::Voltage, "");
        p.current = mean(means, src, Metric::Current, "");
        p.power_factor = mean(means, src, Metric::PowerFactor, "");
        p.frequency = mean(means, src, Metric::Frequency, "");
    }
}

/// CPU utilisation and frequency, and the deepest core and package C-states.
fn cpu_figures(p: &mut StatePayload, means: &[LiveReading]) {
    p.cpu_utilisation =
        mean(means, &SourceId::Cpu, Metric::CpuBusy, channel::ALL).map(|b| round(b * 100.0));
    p.cpu_frequency = mean(means, &SourceId::Cpu, Metric::CoreFrequency, channel::MEAN);
    if let Some((name, share)) = deepest_cstate(means) {
        p.cstate_deepest = Some(name);
        p.cstate_deepest_residency = finite(share * 100.0).map(round);
    }
    if let Some((name, share)) = deepest_package_state(means) {
        p.package_cstate_deepest = Some(name);
        p.package_cstate_deepest_residency = finite(share * 100.0).map(round);
    }
}

/// Every series' interval mean; for energy counters the latest reading instead.
fn series(means: &[LiveReading], latest: &[LiveReading]) -> Vec<SeriesEntry> {
    means
        .iter()
        .filter_map(|r| {
            let v = if matches!(r.metric, Metric::EnergyTotal | Metric::EnergyCounter) {
                latest
                    .iter()
                    .find(|l| {
                        l.source == r.source && l.metric == r.metric && l.channel == r.channel
                    })
                    .map_or(r.value, |l| l.value)
            } else {
                r.value
            };
            finite(v).map(|v| {
                SeriesEntry(
                    r.source.clone(),
                    r.metric.as_str().to_owned(),
                    r.channel.clone(),
                    v,
                )
            })
        })
        .collect()
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// The `idle_regression` object: also the binary sensor's attributes.
fn regression_payload(c: &Check) -> RegressionPayload {
    RegressionPayload {
        detected: c.verdict.detected,
        config: c.config.clone(),
        baseline_idle_w: round(c.baseline.watts),
        baseline_ci95_w: round(c.baseline.ci95_w),
        latest_idle_w: round(c.latest.watts),
        latest_ci95_w: round(c.latest.ci95_w),
        delta_w: round(c.verdict.delta_w),
        delta_ci95_w: round(c.verdict.delta_ci95_w),
        threshold_w: round(c.verdict.threshold_w),
        checked_at: chrono::DateTime::from_timestamp_millis(c.checked_ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        checked_ms: c.checked_ms,
    }
}

/// Six significant decimals are more than any meter resolves; shorter payloads.
fn round(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

pub use wattson_collectors::cpu::cpuidle::state_depth as cstate_depth;

/// The deepest idle state in the machine-wide residencies (`all/<state>`) and its share.
fn deepest_cstate(means: &[LiveReading]) -> Option<(String, f64)> {
    means
        .iter()
        .filter(|r| r.metric == Metric::IdleResidency && r.source == SourceId::Cpu)
        .filter_map(|r| Some((channel::all_part(&r.channel)?.to_owned(), r.value)))
        .max_by_key(|(name, _)| cstate_depth(name))
}

/// The deepest package C-state reached in the interval (its mean share at least
/// [`crate::idle::explain::REACHED`]) and that share; `("none", 0.0)` when the package
/// counters are read but no state was reached; `None` without package counters.
pub fn deepest_package_state(means: &[LiveReading]) -> Option<(String, f64)> {
    use wattson_collectors::idle::PcState;
    let states: Vec<(PcState, f64)> = means
        .iter()
        .filter(|r| r.metric == Metric::PackageResidency && r.source == SourceId::Cpu)
        .filter_map(|r| Some((PcState::parse(channel::all_part(&r.channel)?)?, r.value)))
        .collect();
    if states.is_empty() {
        return None;
    }
    Some(
        states
            .into_iter()
            .filter(|(_, share)| *share >= crate::idle::explain::REACHED)
            .max_by_key(|(state, _)| *state)
            .map_or(("none".to_owned(), 0.0), |(s, share)| {
                (s.name().to_owned(), share)
            }),
    )
}

mod parse;
pub use parse::{CheckedSamples, StateParseError, parse, parse_payload, with_held};

mod estimated;
mod ledger;
mod sleep;
pub use estimated::EstimatedPayload;
use ledger::ledger_figures;
pub use ledger::with_live_energy;
pub use sleep::SleepPayload;

#[cfg(test)]
mod tests;
