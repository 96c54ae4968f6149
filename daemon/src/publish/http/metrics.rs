//! `/metrics`: the daemon's figures in the Prometheus text format 0.0.4 or OpenMetrics 1.0,
//! encoded by the Prometheus project's own client (`prometheus-client`), named by
//! Prometheus' rules: base units (watts, joules, volts, amperes, hertz, seconds, bytes,
//! ratios 0..1), `_total` on counters, and only bounded label values (the host, a source or
//! channel of this machine, a meter id from the config, a currency, a C-state name).
//!
//! Every family (prefix `wattson_`; labels in braces):
//!
//! | family | type | from |
//! |---|---|---|
//! | `power_watts{host,source,channel}` | gauge | every power source's latest reading: `meter:<id>` (at the wall), `estimate:wall` (the host's calibration), `rapl`, `hwmon`, `gpu`, `ipmi`, `ups:<name>` |
//! | `voltage_volts`, `current_amperes`, `power_factor_ratio`, `mains_frequency_hertz` `{host,source,channel}` | gauge | the meters' latest readings |
//! | `energy_joules_total{host,source}` | counter | the ledger's stored energy total of the wall source: continuous across restarts |
//! | `energy_today_joules{host,source}` | gauge | the ledger's energy since local midnight |
//! | `cost_total{host,source,currency}` | counter | the ledger's energy priced by the tariff, since the first sample |
//! | `cost_today{host,source,currency}` | gauge | the same since local midnight |
//! | `annual_cost_projection{host,source,currency}` | gauge | a year on the tariff at this machine's load (its mean power by hour of the week over the last 7 days, priced over the 365 days from today) |
//! | `annual_standing_charge{host,source,currency}`, `annual_cost_all_in{host,source,currency}` | gauge | the tariff's standing charge for a year, and the projection with it |
//! | `tariff_price_per_kwh{host,currency,series}` | gauge | the price in force now, per kWh, and the series it comes from: `tariff` (the configured price), an imported series' name, or `mqtt` (`[tariff] price_topic`) |
//! | `cpu_utilisation_ratio{host,channel}` | gauge | busy share, `all` and per `cpuN` |
//! | `cpu_frequency_hertz{host,channel}` | gauge | `mean` and per `cpuN` |
//! | `idle_state_residency_ratio{host,level,state}` | gauge | share of the last interval in each idle state, `level="core"` (cpuidle) or `"package"` (package C-states) |
//! | `gpu_utilisation_ratio`, `gpu_clock_hertz` `{host,channel}` | gauge | NVML |
//! | `meter_frames_total{host,meter,outcome}` | counter | each meter's replies since the daemon started: `good`, `crc_error`, `timeout`, `implausible` |
//! | `readings_rejected_total{host,source,reason}` | counter | readings refused as implausible since the daemon started |
//! | `idle_regression_detected{host,config}`, `idle_regression_delta_watts{host,config}` | gauge | the latest idle-power regression check |
//! | `service_cpu_share_ratio`, `service_estimated_power_watts`, `service_estimated_power_ci95_watts` `{host,kind,group}`, `service_estimated_annual_cost{host,kind,group,currency}` | gauge | what each service costs over the last 7 days (estimates: the sweep fit's dynamic power shared by busy CPU time), the costliest groups and wattson itself (`kind="self"`) |
//! | `wakeups_per_second{host,kind,name}` | gauge | who woke the CPUs over the stored hours of the last two (`[wakeups]`): `kind="task"` per service (group label), `kind="interrupt"` per interrupt line, the top ten of each and `(other)` |
//! | `disk_spinups_per_day`, `disk_spun_up_ratio` `{host,disk,source}`, `disk_spun_up_annual_cost{host,disk,source,currency}` | gauge | each configured disk (`[[disk]]`) over the stored hours of the last 24: spin-ups per day, the spun-up share, a year of it at its spun-up watts (measured at the wall, else the datasheet's) |
//! | `estimated_energy_today_joules{host}`, `estimated_annual_cost{host,currency}` and its `_ci95`, `estimated_minutes_withheld{host}` | gauge | no wall meter: today's energy and a year's cost estimated from the calibration, as `wattson status` shows them |
//! | `healthy{host,part}` | gauge | 1 while `sampler` / `store` do their job (as `/healthz`) |
//! | `build_info{host,version}` | gauge | always 1 |
//!
//! and the process' own cost, unprefixed as every exporter names it: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds`.
//!
//! A reading older than the context's `stale_after` is left out, so a meter that stopped
//! answering goes stale in Prometheus instead of repeating its last watts.

mod disks;
mod estimated;
mod health;

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use wattson_collectors::source::channel;
use wattson_collectors::{Metric, SourceId};

use super::Shared;
use crate::live::LiveReading;
use crate::live::health::HealthReport;
use crate::publish::mqtt::StateExtras;
use crate::publish::mqtt::state::ServiceState;

/// Joules in a kWh.
const J_PER_KWH: f64 = 3.6e6;

type Labels = Vec<(&'static str, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;
type CounterFamily = Family<Labels, Counter<f64, AtomicU64>>;

/// Everything one scrape shows, gathered without waiting on the store.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub host: String,
    /// The wall source the ledger counts.
    pub wall: Option<SourceId>,
    /// The latest reading of every series that is not stale, per-core ones included.
    pub readings: Vec<LiveReading>,
    pub extras: StateExtras,
    pub health: HealthReport,
    pub process: super::process::ProcessStats,
    /// When the daemon started, UTC ms.
    pub started_ms: i64,
    /// `[prometheus] remote_write`'s counters, when configured.
    pub remote_write: Option<crate::publish::remote_write::StatsSnapshot>,
}

impl Snapshot {
    pub(super) fn gather(shared: &Shared, extras: StateExtras) -> Snapshot {
        let ctx = &shared.ctx;
        let now = wattson_collectors::now_ms();
        let stale_ms = ctx.stale_after.as_millis() as i64;
        let mut readings = ctx.live.latest();
        readings.extend(ctx.live.per_core());
        readings.retain(|r| now - r.ts_ms <= stale_ms || r.metric == Metric::Rejected);
        Snapshot {
            host: ctx.config.host.name.clone(),
            wall: shared.wall.clone(),
            readings,
            extras,
            health: ctx.health.report(),
            process: super::process::ProcessStats::read(),
            started_ms: ctx.started_ms,
            remote_write: ctx.remote_write.snapshot(),
        }
    }
}

/// The registry being filled, family by family.
struct Families<'a> {
    registry: &'a mut Registry,
}

impl Families<'_> {
    fn gauge(&mut self, name: &str, help: &str, unit: Option<&str>, series: Vec<(Labels, f64)>) {
        let family = GaugeFamily::default();
        for (labels, v) in series.into_iter().filter(|(_, v)| v.is_finite()) {
            family.get_or_create(&labels).set(v);
        }
        self.register(name, help, unit, family);
    }

    fn counter(&mut self, name: &str, help: &str, unit: Option<&str>, series: Vec<(Labels, f64)>) {
        let family = CounterFamily::default();
        for (labels, v) in series
            .into_iter()
            .filter(|(_, v)| v.is_finite() && *v >= 0.0)
        {
            family.get_or_create(&labels).inc_by(v);
        }
        self.register(name, help, unit, family);
    }

    fn register(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<&str>,
        family: impl prometheus_client::registry::Metric,
    ) {
        match unit {
            Some(u) => {
                self.registry
                    .register_with_unit(name, help, Unit::Other(u.to_owned()), family);
            }
            None => self.registry.register(name, help, family),
        }
    }
}

/// The snapshot as the registry the encoders write.
fn registry(s: &Snapshot) -> Registry {
    let mut root = Registry::default();
    process_families(&mut root, s);
    let mut f = Families {
        registry: root.sub_registry_with_prefix("wattson"),
    };
    power_families(&mut f, s);
    ledger_families(&mut f, s);
    cpu_families(&mut f, s);
    service_families(&mut f, s);
    wakeup_families(&mut f, s);
    disks::disk_families(&mut f, s);
    estimated::estimated_families(&mut f, s);
    health::families(&mut f, s);
    remote_write::families(&mut f, s);
    f.gauge(
        "build_info",
        "The wattson build serving these metrics (always 1)",
        None,
        vec![(
            vec![host(s), ("version", env!("CARGO_PKG_VERSION").to_owned())],
            1.0,
        )],
    );
    root
}

/// The `host` label.
fn host(s: &Snapshot) -> (&'static str, String) {
    ("host", s.host.clone())
}

/// Every reading of `metric`, labelled by source and channel.
fn by_source(s: &Snapshot, metric: Metric) -> Vec<(Labels, f64)> {
    s.readings
        .iter()
        .filter(|r| r.metric == metric)
        .map(|r| {
            (
                vec![
                    host(s),
                    ("source", r.source.to_string()),
                    ("channel", r.channel.clone()),
                ],
                r.value,
            )
        })
        .collect()
}

/// The readings of `metric` of every channel but the per-state ones (`all/C6`), labelled by
/// channel, times `scale`.
fn by_channel(s: &Snapshot, metric: Metric, scale: f64) -> Vec<(Labels, f64)> {
    s.readings
        .iter()
        .filter(|r| r.metric == metric && !r.channel.contains('/'))
        .map(|r| {
            (
                vec![host(s), ("channel", r.channel.clone())],
                r.value * scale,
            )
        })
        .collect()
}

/// Power by source, and what a meter reads beside it.
fn power_families(f: &mut Families<'_>, s: &Snapshot) {
    for (name, help, unit, metric) in [
        (
            "power",
            "Power drawn, by source: meter:<id> at the wall, estimate:wall from the host's calibration, rapl/hwmon/gpu inside the box, ipmi from the BMC, ups:<name> the UPS load",
            "watts",
            Metric::Power,
        ),
        (
            "voltage",
            "RMS mains voltage at the meter",
            "volts",
            Metric::Voltage,
        ),
        (
            "current",
            "RMS current at the meter",
            "amperes",
            Metric::Current,
        ),
        (
            "power_factor",
            "Power factor at the meter, 0..1",
            "ratio",
            Metric::PowerFactor,
        ),
        (
            "mains_frequency",
            "Mains frequency at the meter",
            "hertz",
            Metric::Frequency,
        ),
    ] {
        f.gauge(name, help, Some(unit), by_source(s, metric));
    }
}

/// CPU and GPU utilisation and clocks, and idle-state residency.
fn cpu_families(f: &mut Families<'_>, s: &Snapshot) {
    for (name, help, unit, metric, scale) in [
        (
            "cpu_utilisation",
            "CPU busy share of the last interval (1 - idle - iowait), all CPUs and per CPU",
            "ratio",
            Metric::CpuBusy,
            1.0,
        ),
        (
            "cpu_frequency",
            "Core frequency: the mean over cores and per CPU",
            "hertz",
            Metric::CoreFrequency,
            1e6,
        ),
        (
            "gpu_utilisation",
            "Share of the last sample period a GPU kernel was running",
            "ratio",
            Metric::GpuUtilisation,
            1.0,
        ),
        (
            "gpu_clock",
            "GPU streaming-multiprocessor clock",
            "hertz",
            Metric::GpuClock,
            1e6,
        ),
    ] {
        f.gauge(name, help, Some(unit), by_channel(s, metric, scale));
    }
    f.gauge(
        "idle_state_residency",
        "Share of the last interval spent in each idle state (level core: cpuidle C-states, mean over CPUs; level package: package C-states, mean over packages)",
        Some("ratio"),
        s.readings
            .iter()
            .filter(|r| r.source == SourceId::Cpu)
            .filter_map(|r| {
                let level = match r.metric {
                    Metric::IdleResidency => "core",
                    Metric::PackageResidency => "package",
                    _ => return None,
                };
                let state = channel::all_part(&r.channel)?;
                Some((
                    vec![host(s), ("level", level.to_owned()), ("state", state.to_owned())],
                    r.value,
                ))
            })
            .collect(),
    );
}

/// Energy and money: the ledger's figures through the feed.
fn ledger_families(f: &mut Families<'_>, s: &Snapshot) {
    let e = &s.extras;
    f.gauge(
        "tariff_price_per_kwh",
        "The electricity price in force now, per kWh in the currency label's unit; series: the configured tariff, an imported series or the live MQTT price",
        None,
        e.price_now
            .iter()
            .filter(|(p, _)| p.is_finite())
            .map(|(p, series)| {
                let l = vec![
                    ("host", s.host.clone()),
                    ("currency", e.currency.clone()),
                    ("series", series.clone()),
                ];
                (l, *p)
            })
            .collect(),
    );
    let Some(wall) = &s.wall else { return };
    let labels = || vec![("host", s.host.clone()), ("source", wall.to_string())];
    let priced = || {
        let mut l = labels();
        l.push(("currency", e.currency.clone()));
        l
    };
    let one = |v: Option<f64>, l: Labels| v.map(|v| vec![(l, v)]).unwrap_or_default();
    f.counter(
        "energy",
        "Energy the wall source has measured since its first stored sample (the ledger's integral of power over covered time; continuous across restarts)",
        Some("joules"),
        one(e.energy_total_kwh.map(|k| k * J_PER_KWH), labels()),
    );
    f.gauge(
        "energy_today",
        "Energy the wall source measured since local midnight (the tariff's time zone)",
        Some("joules"),
        one(e.energy_today_kwh.map(|k| k * J_PER_KWH), labels()),
    );
    f.counter(
        "cost",
        "The wall source's energy since its first sample priced by the tariff, in the currency label's unit",
        None,
        one(e.cost_total, priced()),
    );
    f.gauge(
        "cost_today",
        "The wall source's energy since local midnight priced by the tariff",
        None,
        one(e.cost_today, priced()),
    );
    f.gauge(
        "annual_cost_projection",
        "A year on the tariff at this machine's load: its mean power in each hour of the week over the last 7 days (the measured mean in hours not measured) priced over the 365 days from today; the standing charge is not in it; as wattson status and the report's measured section",
        None,
        one(e.annual_projection, priced()),
    );
    f.gauge(
        "annual_standing_charge",
        "The tariff's standing charge for a year: paid whether or not the machine runs",
        None,
        one(e.standing_charge_annual, priced()),
    );
    f.gauge(
        "annual_cost_all_in",
        "wattson_annual_cost_projection plus the standing charge",
        None,
        one(
            e.annual_projection
                .map(|a| a + e.standing_charge_annual.unwrap_or(0.0)),
            priced(),
        ),
    );
}

/// What each service costs: the costliest groups and wattson itself, estimates over the last
/// 7 days (bounded: at most [`crate::services::render::MQTT_GROUPS`] groups plus wattson).
fn service_families(f: &mut Families<'_>, s: &Snapshot) {
    let extras = &s.extras;
    let groups: Vec<&ServiceState> = extras
        .services
        .iter()
        .chain(&extras.wattson_itself)
        .collect();
    let labels = |g: &ServiceState| {
        vec![
            ("host", s.host.clone()),
            ("kind", g.kind.clone()),
            ("group", g.name.clone()),
        ]
    };
    let series = |value: &dyn Fn(&ServiceState) -> Option<f64>| -> Vec<(Labels, f64)> {
        groups
            .iter()
            .filter_map(|g| value(g).filter(|v| v.is_finite()).map(|v| (labels(g), v)))
            .collect()
    };
    f.gauge(
        "service_cpu_share",
        "Share of the host's busy CPU time over the last 7 days, per systemd service, container, session or machine (kind self: wattson itself)",
        Some("ratio"),
        series(&|g| Some(g.cpu_share / 100.0)),
    );
    f.gauge(
        "service_estimated_power",
        "Estimated mean wall power above the idle floor over the last 7 days: the dynamic power of this host's sweep fit shared by busy CPU time (an estimate, not a measurement)",
        Some("watts"),
        series(&|g| g.watts),
    );
    f.gauge(
        "service_estimated_power_ci95",
        "Half-width of the 95 % interval of service_estimated_power_watts",
        Some("watts"),
        series(&|g| g.watts_ci95),
    );
    let priced: Vec<(Labels, f64)> = groups
        .iter()
        .filter_map(|g| {
            let cost = g.cost_per_year.filter(|c| c.is_finite())?;
            let mut with_currency = labels(g);
            with_currency.push(("currency", extras.currency.clone()));
            Some((with_currency, cost))
        })
        .collect();
    f.gauge(
        "service_estimated_annual_cost",
        "A year of service_estimated_power_watts at the tariff (an estimate)",
        None,
        priced,
    );
}

/// Who woke the CPUs over the stored hours of the last two: the services (and other
/// groups) whose tasks woke most, and the interrupt lines that fired most (bounded: at most
/// [`crate::idle::wakeups::TOP`] of each, plus `(other)`).
fn wakeup_families(f: &mut Families<'_>, s: &Snapshot) {
    let Some(w) = &s.extras.wakeups else {
        return;
    };
    let series = |kind: &str, rates: &[crate::idle::wakeup_hours::Rate]| {
        rates
            .iter()
            .map(|r| {
                (
                    vec![
                        ("host", s.host.clone()),
                        ("kind", kind.to_owned()),
                        ("name", r.name.clone()),
                    ],
                    r.per_s,
                )
            })
            .collect::<Vec<_>>()
    };
    let mut all = series("task", &w.by_service);
    all.extend(series("interrupt", &w.interrupts));
    f.gauge(
        "wakeups",
        "Wake-ups per second over the stored hours of the last two: kind task, the times the tasks of a service (or container, session, machine) were given a CPU (schedstat); kind interrupt, an interrupt line's interrupts; (other): the rest. Tasks and interrupts overlap and are never added",
        Some("per_second"),
        all,
    );
}

/// The process' own CPU time and memory, as every Prometheus exporter names them.
fn process_families(root: &mut Registry, s: &Snapshot) {
    let p = &s.process;
    let mut f = Families { registry: root };
    let one = |v: Option<f64>| v.map(|v| vec![(Vec::new(), v)]).unwrap_or_default();
    f.counter(
        "process_cpu",
        "Total user and system CPU time spent",
        Some("seconds"),
        one(p.cpu_seconds),
    );
    f.gauge(
        "process_resident_memory",
        "Resident memory size",
        Some("bytes"),
        one(p.resident_bytes),
    );
    f.gauge(
        "process_virtual_memory",
        "Virtual memory size",
        Some("bytes"),
        one(p.virtual_bytes),
    );
    f.gauge(
        "process_open_fds",
        "Number of open file descriptors",
        None,
        one(p.open_fds),
    );
    f.gauge(
        "process_max_fds",
        "Maximum number of open file descriptors",
        None,
        one(p.max_fds),
    );
    f.gauge(
        "process_start_time",
        "Start time of the process since the Unix epoch",
        Some("seconds"),
        one(Some(s.started_ms as f64 / 1000.0)),
    );
}

/// The snapshot encoded: OpenMetrics when asked, else the Prometheus text format; with its
/// content type.
pub fn encode(s: &Snapshot, open_metrics: bool) -> Result<(String, &'static str), std::fmt::Error> {
    let registry = registry(s);
    let mut out = String::new();
    if open_metrics {
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok((
            out,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ))
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
        Ok((
            out,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        ))
    }
}

mod remote_write;
#[cfg(test)]
mod tests;
