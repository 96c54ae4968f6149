//! Reading what `wattson idle` explains: residency from the database's last hour or a live
//! sample, the package's and cores' views, the settings, and what the database holds of
//! measured effects, idle hours and disks.

use std::collections::BTreeMap;
use std::time::Duration;

use wattson_collectors::cpu::CpuCollector;
use wattson_collectors::cpu::cpuidle::state_depth as cstate_depth;
use wattson_collectors::idle::settings;
use wattson_collectors::idle::{PackageReader, PcState};
use wattson_collectors::source::channel;
use wattson_collectors::{Collector, Metric, SourceId, SysRoot};

use super::{Absent, CoreView, IdleReport, PackageView, REACHED, Residency, Window, findings};
use crate::config::Config;
use crate::idle::trials::trials;
use crate::store::{HOUR_MS, SeriesFilter, Store};

/// Core states of this depth and deeper let the package go deep (C6: the core's power off).
const DEEP_CORE: i32 = 6;
/// The last hour is used when it holds at least this many CPU samples (a minute at 1 Hz).
const MIN_HISTORY: usize = 60;

fn sorted_core_states(shares: BTreeMap<String, f64>) -> Vec<Residency> {
    let mut states: Vec<Residency> = shares
        .into_iter()
        .map(|(state, share)| Residency { state, share })
        .collect();
    states.sort_by_key(|r| cstate_depth(&r.state));
    states
}

fn sorted_package_states(shares: BTreeMap<String, f64>) -> Vec<Residency> {
    let mut states: Vec<Residency> = shares
        .into_iter()
        .filter(|(s, _)| PcState::parse(s).is_some())
        .map(|(state, share)| Residency { state, share })
        .collect();
    states.sort_by_key(|r| PcState::parse(&r.state));
    states
}

/// What the database holds of one metric's `all/<state>` channels over a window.
struct History {
    means: BTreeMap<String, f64>,
    /// The largest sample count of any state.
    samples: usize,
    /// First and last sample, UTC ms.
    span: Option<(i64, i64)>,
}

/// Mean share per state of `metric`'s `all/<state>` channels over `[from, to)`.
fn history(store: &Store, host: &str, metric: Metric, from_ms: i64, to_ms: i64) -> History {
    let filter = SeriesFilter::all()
        .host(host)
        .source(&SourceId::Cpu)
        .metric(metric);
    let mut out = History {
        means: BTreeMap::new(),
        samples: 0,
        span: None,
    };
    let raw = store.raw(&filter, from_ms, to_ms).unwrap_or_else(|e| {
        warn(&format!("the last hour's {}", metric.as_str()), &e);
        Vec::new()
    });
    for (series, points) in raw {
        let Some(state) = channel::all_part(&series.channel) else {
            continue;
        };
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            continue;
        };
        out.samples = out.samples.max(points.len());
        out.span = Some(match out.span {
            Some((a, b)) => (a.min(first.0), b.max(last.0)),
            None => (first.0, last.0),
        });
        let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
        out.means.insert(state.to_owned(), mean);
    }
    out
}

/// A live sample: two CPU polls `sample` apart.
fn live_sample(
    root: &SysRoot,
    devfs: &std::path::Path,
    sample: Duration,
) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let mut cpu = CpuCollector::new(root.clone()).with_devfs(devfs);
    let now = || chrono::Utc::now().timestamp_millis();
    let _ = cpu.poll(now());
    std::thread::sleep(sample);
    let mut cores = BTreeMap::new();
    let mut package = BTreeMap::new();
    for s in cpu.poll(now()).unwrap_or_default() {
        let Some(state) = channel::all_part(&s.channel) else {
            continue;
        };
        match s.metric {
            Metric::IdleResidency => {
                cores.insert(state.to_owned(), s.value);
            }
            Metric::PackageResidency => {
                package.insert(state.to_owned(), s.value);
            }
            _ => {}
        }
    }
    (cores, package)
}

/// Gather the report: settings now, residency from `store`'s last hour when it has one, else
/// from a live sample of `sample`; who wakes the CPUs over a live window of `sample` (the
/// same window as the residency's where that is live too), `top` entries per ranking. What
/// the database cannot give is warned about and left out.
pub fn gather(config: &Config, store: Option<&Store>, sample: Duration, top: usize) -> IdleReport {
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let waking = (!sample.is_zero())
        .then(|| crate::idle::wakeups::start(&root, Some(config.services.docker_root.clone())));
    let to_ms = chrono::Utc::now().timestamp_millis();
    let shares = residency(config, &root, store, sample, to_ms);
    // The wake-ups are counted over a live window; when the residency's was live it was
    // that window, else it is waited for here.
    if waking.is_some() && !matches!(shares.window, Window::Live { .. }) {
        std::thread::sleep(sample);
    }
    let wakeups = waking.map(|w| w.finish(top));
    let all = settings::read_all(&root);
    let absent = settings::absent(&root, &all)
        .into_iter()
        .map(|(kind, why)| Absent { kind, why })
        .collect();
    let stored = Stored::read(config, store, to_ms);
    let gap = crate::idle::gap::for_idle(
        config,
        store,
        stored.history.as_ref(),
        &stored.measured,
        &all,
        &stored.disks,
    );
    let (hours_deep, hours_shallow) = stored.history.as_ref().map_or((None, None), |i| {
        crate::idle::history::hour_groups(&i.hours)
    });
    let mut report = IdleReport {
        host: config.host.name.clone(),
        window: shares.window,
        package: package_view(&root, &config.host.devfs, shares.package),
        cores: core_view(&root, shares.cores),
        wakeups,
        findings: Vec::new(),
        trials: trials(&all),
        settings: all,
        absent,
        measured: stored.measured,
        hours_deep,
        hours_shallow,
        gap,
        disks: stored.disks,
    };
    report.findings = findings(&report);
    report
}

/// Each core and package state's share of the residency window.
struct Shares {
    window: Window,
    cores: BTreeMap<String, f64>,
    package: BTreeMap<String, f64>,
}

/// The residency of the database's last hour before `to_ms` where it holds at least
/// [`MIN_HISTORY`] samples, else of a live sample of `sample` (none when that is zero).
fn residency(
    config: &Config,
    root: &SysRoot,
    store: Option<&Store>,
    sample: Duration,
    to_ms: i64,
) -> Shares {
    let from_ms = to_ms - HOUR_MS;
    let recorded = store.map(|s| {
        let host = &config.host.name;
        (
            history(s, host, Metric::IdleResidency, from_ms, to_ms),
            history(s, host, Metric::PackageResidency, from_ms, to_ms),
        )
    });
    match recorded {
        Some((cores, package)) if cores.samples.max(package.samples) >= MIN_HISTORY => {
            let (first, last) = cores.span.or(package.span).unwrap_or((from_ms, to_ms));
            Shares {
                window: Window::History {
                    from_ms: first,
                    to_ms: last,
                    samples: cores.samples.max(package.samples),
                },
                cores: cores.means,
                package: package.means,
            }
        }
        _ if sample.is_zero() => Shares {
            window: Window::None,
            cores: BTreeMap::new(),
            package: BTreeMap::new(),
        },
        _ => {
            let (cores, package) = live_sample(root, &config.host.devfs, sample);
            Shares {
                window: Window::Live {
                    seconds: sample.as_secs_f64(),
                },
                cores,
                package,
            }
        }
    }
}

/// The package's states and what reads them (or why nothing can).
fn package_view(
    root: &SysRoot,
    devfs: &std::path::Path,
    shares: BTreeMap<String, f64>,
) -> PackageView {
    let states = sorted_package_states(shares);
    match PackageReader::discover(root, devfs) {
        Ok(r) => PackageView {
            readable: true,
            platform: Some(r.platform().to_owned()),
            source: Some(r.source()),
            files: r
                .files()
                .iter()
                .map(|(_, _, p)| p.display().to_string())
                .collect(),
            deepest_reached: deepest(&states),
            states,
            limit: r.limit().cloned(),
            unavailable: None,
        },
        Err(why) => PackageView {
            readable: false,
            platform: None,
            source: None,
            files: Vec::new(),
            deepest_reached: deepest(&states),
            states,
            limit: None,
            unavailable: Some(why),
        },
    }
}

/// The cores' states, how much of the window they spent deep, and the cpuidle driver.
fn core_view(root: &SysRoot, shares: BTreeMap<String, f64>) -> CoreView {
    let states = sorted_core_states(shares);
    let (deep_share, deep_label) = deep_cores(&states);
    CoreView {
        driver: wattson_collectors::sysroot::read_trimmed(
            &root.sys_path("devices/system/cpu/cpuidle/current_driver"),
        )
        .ok(),
        states,
        deep_share,
        deep_label,
    }
}

/// A part of the report the database could not give, warned about once.
fn warn(what: &str, e: &(dyn std::error::Error + 'static)) {
    tracing::warn!("{what}: {}", wattson_collectors::ErrorChain(e));
}

/// What the database holds for the report beyond residency: the newest measured effects,
/// the last 30 days' idle hours and the disks' spin states.
struct Stored {
    measured: Vec<crate::idle::store::Effect>,
    history: Option<crate::idle::history::IdleInput>,
    disks: Vec<crate::idle::disk_hours::StoredDisk>,
}

impl Stored {
    fn read(config: &Config, store: Option<&Store>, to_ms: i64) -> Stored {
        let disks = crate::idle::disk_hours::for_idle(store, config, to_ms);
        let Some(s) = store else {
            return Stored {
                measured: Vec::new(),
                history: None,
                disks,
            };
        };
        let host = &config.host.name;
        let measured = crate::idle::store::latest_effects(s, host).unwrap_or_else(|e| {
            warn("the measured effects of settings", &e);
            Vec::new()
        });
        let primary = crate::ledger::PrimaryPower::from_config(config);
        let history = match crate::ledger::energy::wall_power_source(s, host, &primary) {
            Ok(wall) => {
                let from_ms = to_ms - 30 * 24 * HOUR_MS;
                crate::idle::history::load(s, host, wall.as_ref(), from_ms, to_ms)
                    .map_err(|e| warn("the idle hours of the last 30 days", &e))
                    .ok()
            }
            Err(e) => {
                warn("the wall's power for the idle hours", &e);
                None
            }
        };
        Stored {
            measured,
            history,
            disks,
        }
    }
}

fn deepest(states: &[Residency]) -> Option<String> {
    states
        .iter()
        .rev()
        .find(|r| r.share >= REACHED)
        .map(|r| r.state.clone())
}

fn deep_cores(states: &[Residency]) -> (Option<f64>, Option<String>) {
    let deep: Vec<&Residency> = states
        .iter()
        .filter(|r| cstate_depth(&r.state).0 >= DEEP_CORE)
        .collect();
    if let Some(first) = deep.first() {
        let label = if deep.len() > 1 {
            format!("{} and deeper", first.state)
        } else {
            first.state.clone()
        };
        return (Some(deep.iter().map(|r| r.share).sum()), Some(label));
    }
    states
        .last()
        .map_or((None, None), |r| (Some(r.share), Some(r.state.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_states_sort_by_depth() {
        let mut names = vec!["C10", "C1E", "POLL", "C6", "C1", "C8"];
        names.sort_by_key(|n| cstate_depth(n));
        assert_eq!(names, ["POLL", "C1", "C1E", "C6", "C8", "C10"]);
        let states = sorted_core_states(
            [("C1", 0.03), ("C1E", 0.338), ("C6", 0.5), ("C10", 0.1)]
                .map(|(k, v)| (k.to_owned(), v))
                .into(),
        );
        let (share, label) = deep_cores(&states);
        assert!((share.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(label.as_deref(), Some("C6 and deeper"));
        // acpi_idle's C3 is its deepest.
        let (_, label) = deep_cores(&sorted_core_states(
            [("C1", 0.1), ("C3", 0.8)]
                .map(|(k, v)| (k.to_owned(), v))
                .into(),
        ));
        assert_eq!(label.as_deref(), Some("C3"));
    }
}
