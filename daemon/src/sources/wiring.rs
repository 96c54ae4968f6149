//! What the config asks the daemon to run: the collector set with each source's interval
//! (meters, CPU, RAPL/hwmon/GPU/IPMI/UPS, services, smart plugs, the estimated wall) and the
//! store's options. A new source is wired here: its build and interval in
//! [`build_collectors`] (a power source's in [`power_source`], which the calibration's live
//! estimate builds its signals with too), its spacing in [`store_options`]. `wattson run` and a reload
//! build from here (the sampler in `runtime` schedules what it is handed); `sweep`, `idle`
//! and `collect` open the store with the same options.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wattson_collectors::cgroup::{CgroupCollector, CgroupOptions};
use wattson_collectors::cpu::CpuCollector;
use wattson_collectors::{Collector, SourceId, SysRoot, power};

use super::SourcesError;
use crate::config::Config;
use crate::store::StoreOptions;

/// Why a power source inside or around the box cannot work here.
#[derive(Debug, thiserror::Error)]
pub enum PowerSourceError {
    #[error("{0}")]
    Rapl(power::rapl::RaplError),
    #[error("{0}")]
    Hwmon(power::hwmon::HwmonError),
    #[error("{0}")]
    Gpu(power::nvml::NvmlError),
    #[error("{0}")]
    Ipmi(power::ipmi::IpmiError),
    #[error("{0}")]
    Ups(power::nut::NutError),
    /// A `[[ups]]`'s `password_file` cannot be read.
    #[error(
        "cannot read password_file {}: {}",
        path.display(),
        wattson_collectors::ErrorChain(error)
    )]
    UpsPassword {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    /// No `[[ups]]` has this upsd name.
    #[error("no [[ups]] named {0:?} is configured")]
    NoUps(String),
    #[error("no [[disk]] is configured to follow")]
    NoDisk,
    #[error("{0} is not a source inside the box")]
    NotInTheBox(SourceId),
    /// `key` (`[power] ipmi`) turns the source off.
    #[error("{key} is off (turn it on for the estimate to read it)")]
    Off { key: &'static str },
}

/// A source as the config wires it: its collector and how often the sampler polls it.
pub struct WiredSource {
    pub collector: Box<dyn Collector>,
    pub interval: Duration,
    /// Where an estimate's readings come from, in words (the calibration it applies:
    /// [`crate::calibration::WallModel::provenance`]); `None` for a measurement.
    pub basis: Option<String>,
}

impl WiredSource {
    pub fn new(collector: Box<dyn Collector>, interval: Duration) -> WiredSource {
        WiredSource {
            collector,
            interval,
            basis: None,
        }
    }

    pub fn source(&self) -> &SourceId {
        self.collector.source()
    }
}

/// Build the collector set the config asks for. Sources that cannot work here are logged
/// once and left out; a meter that is unplugged at start is kept (it reconnects).
pub fn build_collectors(config: &Config) -> Result<Vec<WiredSource>, SourcesError> {
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let mut out = Vec::new();
    if config.cpu.enabled {
        let cpu = CpuCollector::new(root.clone()).with_devfs(&config.host.devfs);
        for (part, state) in cpu.availability() {
            if let Err(why) = state {
                tracing::info!("cpu {part}: unavailable: {why}");
            }
        }
        if cpu.frequency_is_nominal() {
            tracing::info!(
                "cpu frequency: {}",
                wattson_collectors::cpu::NOMINAL_FREQUENCY
            );
        }
        out.push(WiredSource::new(Box::new(cpu), config.cpu.interval));
    }
    for (meter, interval) in super::meters::build_collectors(&config.meters)? {
        // The sampler's tick then never waits for a reply: one wake-up per tick.
        out.push(WiredSource::new(Box::new(meter.reading_ahead()), interval));
    }
    out.extend(power_sources(config, &root));
    out.extend(services_collector(config, &root));
    Ok(out)
}

/// The services collector where `[services]` asks for it and this host has cgroup v2;
/// otherwise `None`, logged once with why. Its samples never reach the store as series: the
/// daemon takes them out of each batch (`runtime::services_sink`).
fn services_collector(config: &Config, root: &SysRoot) -> Option<WiredSource> {
    if !config.services.enabled {
        return None;
    }
    let options = CgroupOptions {
        top: config.services.top,
        docker_root: Some(config.services.docker_root.clone()),
    };
    match CgroupCollector::new(root, options) {
        Ok(c) => Some(WiredSource::new(Box::new(c), config.services.interval)),
        Err(e) => {
            // The error names its source and says it is unavailable.
            tracing::info!("{e}");
            None
        }
    }
}

/// The power sources inside the box and around it that the config asks for. Each one that
/// cannot work here is logged once, with why, and left out.
fn power_sources(config: &Config, root: &SysRoot) -> Vec<WiredSource> {
    let p = &config.power;
    let mut asked: Vec<SourceId> = Vec::new();
    for (on, source) in [
        (p.rapl, SourceId::Rapl),
        (p.hwmon, SourceId::Hwmon),
        (p.gpu, SourceId::Gpu),
        (p.ipmi, SourceId::Ipmi),
    ] {
        if on {
            asked.push(source);
        }
    }
    let mut out = Vec::new();
    for source in asked {
        match power_source(config, root, &source) {
            Ok(w) => out.push(w),
            Err(why) => tracing::info!("{source}: unavailable: {why}"),
        }
    }
    // Each [[ups]] as configured (asked for by name: that it does not work is a warning).
    for u in &config.ups {
        match ups_source(u) {
            Ok(w) => out.push(w),
            Err(why) => tracing::warn!("ups {}: unavailable: {why}", u.id),
        }
    }
    out
}

/// The collector of one power source inside or around the box, as `[power]` and `[[ups]]`
/// configure it (whether or not they turn it on; a UPS: the first `[[ups]]` of that upsd
/// name), with its poll interval; `Err` says why it cannot work here. The sampler's sources and the calibration's signals
/// ([`super::calibrated_wall`]) are built here alike.
pub fn power_source(
    config: &Config,
    root: &SysRoot,
    source: &SourceId,
) -> Result<WiredSource, PowerSourceError> {
    use wattson_collectors::power::{hwmon, ipmi, nvml, rapl};
    let p = &config.power;
    let boxed = |c: Box<dyn Collector>, every: Duration| WiredSource::new(c, every);
    match source {
        SourceId::Rapl => rapl::RaplCollector::new(root)
            .map(|c| boxed(Box::new(c), p.interval))
            .map_err(PowerSourceError::Rapl),
        SourceId::Hwmon => hwmon::HwmonCollector::new(root)
            .map(|c| boxed(Box::new(c), p.interval))
            .map_err(PowerSourceError::Hwmon),
        SourceId::Gpu => nvml::NvmlCollector::new()
            .map(|c| boxed(Box::new(c), p.interval))
            .map_err(PowerSourceError::Gpu),
        SourceId::Ipmi => {
            let cfg = ipmi::IpmiConfig {
                program: p.ipmi_command.clone(),
                args: p.ipmi_args.clone(),
                timeout: Duration::from_secs(5),
                accept_deactivated: false,
            };
            ipmi::IpmiCollector::new(cfg)
                .map(|c| boxed(Box::new(c), p.ipmi_interval))
                .map_err(PowerSourceError::Ipmi)
        }
        SourceId::Ups(name) => match config.ups.iter().find(|u| u.name == *name) {
            Some(u) => ups_source(u),
            None => Err(PowerSourceError::NoUps(name.clone())),
        },
        SourceId::Cpu => {
            let cpu = CpuCollector::new(root.clone()).with_devfs(&config.host.devfs);
            Ok(boxed(Box::new(cpu), config.cpu.interval))
        }
        SourceId::Disk => {
            let every = config.disks.iter().map(|d| d.interval).max();
            match (
                super::disk_spin::DiskSpinCollector::new(root.clone(), &config.disks),
                every,
            ) {
                (Some(c), Some(every)) => Ok(boxed(Box::new(c), every)),
                _ => Err(PowerSourceError::NoDisk),
            }
        }
        other => Err(PowerSourceError::NotInTheBox(other.clone())),
    }
}

/// The collector of one `[[ups]]` (its password read from `password_file`), with its
/// interval; `Err` says why it cannot work.
fn ups_source(u: &crate::config::UpsConfig) -> Result<WiredSource, PowerSourceError> {
    let password = match &u.password_file {
        None => None,
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|error| PowerSourceError::UpsPassword {
                    path: f.clone(),
                    error,
                })?
                .trim()
                .to_owned(),
        ),
    };
    let mut cfg = wattson_collectors::power::nut::NutConfig::new(u.host.clone(), u.name.clone());
    cfg.port = u.port;
    cfg.username.clone_from(&u.username);
    cfg.password = password;
    wattson_collectors::power::nut::NutCollector::new(cfg)
        .map(|c| WiredSource::new(Box::new(c), u.interval))
        .map_err(PowerSourceError::Ups)
}

/// With no wall meter here (none configured and no smart plug, or every configured port
/// absent at start), the wall draw estimated from this host's calibration whose signals can
/// be read here (see [`super::calibrated_wall::for_host`]: its newest model from ordinary
/// running, `wattson calibration fit` or `import`, else its sweeps' fits).
pub fn estimate_collector(config: &Config) -> Option<WiredSource> {
    let meter_here = config.meters.iter().any(|m| m.port.exists()) || !config.plugs.is_empty();
    if meter_here || !config.storage.path.exists() {
        return None;
    }
    let reading = |e: &(dyn std::error::Error + 'static)| {
        tracing::info!(
            "no wall estimate: reading calibrations: {}",
            wattson_collectors::ErrorChain(e)
        );
    };
    let store = match crate::store::Store::open_read_only(&config.storage.path) {
        Ok(s) => s,
        Err(e) => {
            reading(&e);
            return None;
        }
    };
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    match super::calibrated_wall::for_host(config, &store, &root) {
        Ok(found) => found.map(|(c, interval)| WiredSource {
            basis: Some(c.model().provenance()),
            ..WiredSource::new(Box::new(c), interval)
        }),
        Err(e) => {
            reading(&e);
            None
        }
    }
}

/// Smart plugs over MQTT, as wall meters; needs the async runtime for their subscription.
pub fn plug_collectors(
    config: &Config,
    cancel: &CancellationToken,
) -> Result<Vec<WiredSource>, SourcesError> {
    use super::PlugSpec;
    let (Some(mqtt), false) = (&config.mqtt, config.plugs.is_empty()) else {
        return Ok(Vec::new());
    };
    let specs: Vec<PlugSpec> = config
        .plugs
        .iter()
        .map(|p| PlugSpec {
            id: p.id.clone(),
            kind: p.kind,
            topic: p.topic.clone(),
            bidirectional: p.bidirectional,
        })
        .collect();
    let (_task, collectors) = super::plug::spawn_plugs(mqtt, &specs, cancel.child_token())
        .map_err(SourcesError::Plugs)?;
    Ok(collectors
        .into_iter()
        .map(|c| WiredSource::new(Box::new(c), Duration::from_secs(1)))
        .collect())
}

/// Store options from the config: each source's spacing is its configured interval (smart
/// plugs report when they do: theirs is learned from the data), and how each plug's
/// readings stand (`[[plug]] readings`, `max_hold`).
pub fn store_options(config: &Config) -> StoreOptions {
    let ms = |d: Duration| d.as_millis() as i64;
    let mut spacing: std::collections::HashMap<SourceId, i64> = config
        .meters
        .iter()
        .map(|m| (SourceId::meter(&m.id), ms(m.interval)))
        .collect();
    spacing.insert(SourceId::Cpu, ms(config.cpu.interval));
    for source in [
        SourceId::Rapl,
        SourceId::Hwmon,
        SourceId::Gpu,
        SourceId::Estimate,
    ] {
        spacing.insert(source, ms(config.power.interval));
    }
    spacing.insert(SourceId::Ipmi, ms(config.power.ipmi_interval));
    for u in &config.ups {
        spacing.insert(SourceId::ups(&u.name), ms(u.interval));
    }
    // Every plug's rule is stated, `sampled` ones too, so that a plug changed back from
    // `hold` is stored as sampled again.
    let readings = config
        .plugs
        .iter()
        .map(|p| (SourceId::meter(&p.id), p.store_readings()))
        .collect();
    StoreOptions {
        host: config.host.name.clone(),
        readings,
        raw_retention_ms: config.storage.raw_retention.as_millis() as i64,
        detail_retention_ms: config.storage.detail_retention.as_millis() as i64,
        spacing_ms: spacing,
        // The sampler already holds samples for `[storage] flush_interval`; the store commits
        // each batch at once, so a crash loses at most that interval (not 2 s more).
        flush_interval: Duration::ZERO,
        ..StoreOptions::default()
    }
}
