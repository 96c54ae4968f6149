//! The configuration file: TOML, parsed strictly, then validated once into typed values.
//!
//! Lookup order: `--config PATH`, else `$WATTSON_CONFIG`, else `/etc/wattson/wattson.toml`.
//! Unknown keys are errors. Every error names the file, the key and (where known) the line,
//! and a bad config makes the process exit with `EX_CONFIG` (78).
//!
//! The file is read into [`file`]'s structs (names already in their domain types), checked
//! and assembled once by [`validate`] into [`Config`], which every command uses; what
//! `config check` passes, `run` runs. [`effective`] prints a [`Config`] back by serialising
//! it. Durations are in [`duration`].

pub mod broker;
mod disk;
mod duration;
mod effective;
mod file;
mod key_lines;
mod load;
mod meter;
mod mqtt;
pub mod names;
mod plug;
mod prometheus;
mod serial_lines;
mod sleep;
mod tariff_section;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use wattson_collectors::meter::line::LineFormat;
use wattson_collectors::meter::{Parity, Protocol};

pub use disk::{DiskConfig, MAX_SPUN_UP_WATTS, STANDBY_AFTER};
pub use duration::{DurationError, MAX_DURATION, Range, format_duration, parse_duration};
pub use effective::redact_url;
pub use key_lines::KeyLines;
use load::line_of;
use load::{parse_file, read_config_file};
pub use mqtt::{CredentialNotPassed, MqttConfig};
pub use plug::{MAX_HOLD, PlugConfig, PlugKind, PlugReadings};
pub use prometheus::{
    PrometheusConfig, REMOTE_WRITE_INTERVAL, RemoteWriteUrl, UrlError, parse_http_url,
    parse_remote_write_url,
};
pub use serial_lines::{LineError, SerialLine, collector_names, serial_lines};
pub use sleep::{MAX_STANDBY_WATTS, SleepConfig};
pub use tariff_section::{
    AlternativeTariff, DEFAULT_MAX_PRICE_PER_KWH, PeriodConfig, PriceUnit, TariffChangeConfig,
    TariffConfig,
};
use validate::Validator;
pub use validate::{FLUSH, KEEPALIVE, METER_TIMEOUT, PUBLISH, RETENTION, SAMPLING};

/// Default location of the configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/wattson/wattson.toml";
/// Exit status for a bad configuration (sysexits.h `EX_CONFIG`).
pub const EXIT_CONFIG: i32 = 78;
/// The largest config file read, bytes. A real one is a few KB; this keeps `/dev/zero` or a
/// runaway file from being read into memory.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// The running process' own entry in procfs: the daemon's own memory and descriptors for
/// `/metrics` (its own, whatever `[host] procfs` points the machine's readers at).
pub const PROC_SELF: &str = "/proc/self";
/// The environment variable systemd sets to the directory holding a unit's credentials
/// (`LoadCredential=`).
pub const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";

/// A configuration problem, with enough context to find and fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    NotAConfigFile { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}:{line}: {key}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        key: String,
        message: String,
    },
    /// Valid as written, but unusable on this machine as this user (a password file that
    /// cannot be read, a credential that systemd did not pass). `line` is where the key was
    /// written, where the file has it.
    #[error("{}: {key}: {message}", at(path, *line))]
    Unusable {
        path: PathBuf,
        line: Option<usize>,
        key: String,
        message: String,
    },
}

/// `path:line`, or `path` where the line is not known.
fn at(path: &Path, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{}:{line}", path.display()),
        None => path.display().to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// The validated configuration. `Serialize` writes it back as the file would say it
// (`config check`); see [`effective`].
// ---------------------------------------------------------------------------------------

/// The validated configuration the rest of wattson uses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// Where it came from (`None` for the built-in defaults).
    #[serde(skip)]
    pub source: Option<PathBuf>,
    pub host: HostConfig,
    pub storage: StorageConfig,
    #[serde(rename = "meter", skip_serializing_if = "Vec::is_empty")]
    pub meters: Vec<MeterConfig>,
    pub cpu: CpuConfig,
    pub tariff: TariffConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mqtt: Option<MqttConfig>,
    /// `[http]`: off unless configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpConfig>,
    /// `[prometheus]`: remote write, off unless configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusConfig>,
    pub power: PowerConfig,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ups: Vec<UpsConfig>,
    #[serde(rename = "plug", skip_serializing_if = "Vec::is_empty")]
    pub plugs: Vec<PlugConfig>,
    #[serde(rename = "config", skip_serializing_if = "Vec::is_empty")]
    pub manual: Vec<ManualConfig>,
    pub services: ServicesConfig,
    pub wakeups: WakeupsConfig,
    /// `[[disk]]`: the disks whose spin state `wattson run` follows.
    #[serde(rename = "disk", skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<DiskConfig>,
    /// `[sleep]`: what counts as idle enough to sleep, and the standby watts by hand.
    pub sleep: SleepConfig,
}

/// Who wakes the CPUs, stored hourly by `wattson run` (`[wakeups]`, see
/// [`crate::idle::wakeup_hours`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WakeupsConfig {
    pub enabled: bool,
    /// The window between two reads of every task's counter (default 5 min: a scan of
    /// 2,000 threads costs about 27 ms of CPU, BENCHMARKS.md).
    #[serde(serialize_with = "duration::serialize")]
    pub interval: Duration,
    /// Services and interrupt lines kept by name per window; the rest are summed as
    /// `(other)`.
    pub top: usize,
}

/// CPU time per systemd service, container, session and machine from cgroup v2
/// (`[services]`, see [`crate::services`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServicesConfig {
    pub enabled: bool,
    /// How often the cgroup tree is read (default 10 s).
    #[serde(serialize_with = "duration::serialize")]
    pub interval: Duration,
    /// Groups kept by name per interval and per hour; the rest are summed as "other".
    pub top: usize,
    /// Docker's data directory, where container names are read from where readable.
    pub docker_root: PathBuf,
}

/// Software-visible power sources inside the box (`[power]`). One switch per source, as in
/// the file.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerConfig {
    /// RAPL package/DRAM energy (powercap), when present.
    pub rapl: bool,
    /// hwmon power and energy sensors, when present.
    pub hwmon: bool,
    /// NVIDIA GPUs through NVML, when the driver is present.
    pub gpu: bool,
    /// The BMC's DCMI power reading through ipmitool (off by default: it starts a process).
    pub ipmi: bool,
    pub ipmi_command: PathBuf,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ipmi_args: Vec<String>,
    #[serde(serialize_with = "duration::serialize")]
    pub interval: Duration,
    #[serde(serialize_with = "duration::serialize")]
    pub ipmi_interval: Duration,
}

/// A UPS read through Network UPS Tools' upsd (`[[ups]]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpsConfig {
    pub id: String,
    pub host: String,
    pub port: u16,
    /// The UPS name in upsd (`ups` in `ups@host`).
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    #[serde(serialize_with = "duration::serialize")]
    pub interval: Duration,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostConfig {
    pub name: String,
    pub sysfs: PathBuf,
    pub procfs: PathBuf,
    /// Where devices are (`/dev`): the CPU's MSRs as `<devfs>/cpu/N/msr`.
    pub devfs: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageConfig {
    pub path: PathBuf,
    #[serde(serialize_with = "duration::serialize")]
    pub raw_retention: Duration,
    /// How long raw per-core CPU samples (`cpuN`, `cpuN/<x>`) are kept; never longer than
    /// `raw_retention`.
    #[serde(serialize_with = "duration::serialize")]
    pub detail_retention: Duration,
    /// How often buffered samples are committed (at most this much is lost on a crash).
    #[serde(serialize_with = "duration::serialize")]
    pub flush_interval: Duration,
}

/// One `[[meter]]` as written, with its names in their domain types. Meters that name the
/// same port share one serial line: see [`serial_lines`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeterConfig {
    pub id: String,
    pub protocol: Protocol,
    pub port: PathBuf,
    /// Bit/s; `None`: the protocol's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baud: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parity: Option<Parity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_bits: Option<u8>,
    /// Modbus address; `None`: the protocol's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<u8>,
    #[serde(serialize_with = "duration::serialize")]
    pub interval: Duration,
    /// Reply or record timeout; `None`: the protocol's default.
    #[serde(
        serialize_with = "duration::serialize_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    /// How a `line` meter's text maps to readings (`[meter.line]`).
    #[serde(
        serialize_with = "effective::line_format",
        skip_serializing_if = "Option::is_none"
    )]
    pub line: Option<LineFormat>,
    /// Negative power is export (solar), kept apart from consumption; otherwise refused.
    pub bidirectional: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuConfig {
    pub enabled: bool,
    #[serde(serialize_with = "duration::serialize")]
    pub interval: Duration,
}

/// `[http]`: where `/metrics` (Prometheus), `/` (the live page, with `/live.json` and
/// `/history.json`), `/report.html`, `/report.json` and `/healthz` are served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpConfig {
    /// An IPv4 or IPv6 address and TCP port; port 0 picks a free port (the daemon logs the
    /// one it bound, and `wattson status` shows it).
    pub listen: std::net::SocketAddr,
}

/// A configuration measured by hand: watts per mode, read off a meter's display.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManualConfig {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_cost: Option<f64>,
    /// Mode name -> watts, in file order where the modes are standard ones.
    #[serde(serialize_with = "effective::modes")]
    pub modes: Vec<(String, f64)>,
    /// A week's schedule of its modes, which `wattson report` prices it on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::analysis::schedule::Schedule>,
}

impl Config {
    /// The built-in defaults (no file).
    pub fn defaults() -> Config {
        Config {
            source: None,
            host: HostConfig {
                name: default_host_name(),
                sysfs: PathBuf::from("/sys"),
                procfs: PathBuf::from("/proc"),
                devfs: PathBuf::from("/dev"),
            },
            storage: StorageConfig {
                path: PathBuf::from("/var/lib/wattson/wattson.db"),
                raw_retention: Duration::from_secs(30 * 86_400),
                detail_retention: Duration::from_secs(3 * 86_400),
                flush_interval: Duration::from_secs(10),
            },
            meters: Vec::new(),
            cpu: CpuConfig {
                enabled: true,
                interval: Duration::from_secs(1),
            },
            tariff: TariffConfig::default(),
            mqtt: None,
            http: None,
            prometheus: None,
            manual: Vec::new(),
            power: PowerConfig {
                rapl: true,
                hwmon: true,
                gpu: true,
                ipmi: false,
                ipmi_command: PathBuf::from("ipmitool"),
                ipmi_args: Vec::new(),
                interval: Duration::from_secs(1),
                ipmi_interval: Duration::from_secs(10),
            },
            ups: Vec::new(),
            services: ServicesConfig {
                enabled: true,
                interval: Duration::from_secs(10),
                top: 10,
                docker_root: PathBuf::from("/var/lib/docker"),
            },
            plugs: Vec::new(),
            disks: Vec::new(),
            sleep: SleepConfig::default(),
            wakeups: WakeupsConfig {
                enabled: true,
                interval: Duration::from_secs(300),
                top: 10,
            },
        }
    }

    /// Resolve which file to read: `--config`, then `$WATTSON_CONFIG`, then the default path.
    /// Returns `None` when nothing was asked for and the default path does not exist.
    pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(p) = explicit {
            return Some(p.to_owned());
        }
        if let Some(p) = std::env::var_os("WATTSON_CONFIG").filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(p));
        }
        let default = Path::new(DEFAULT_CONFIG_PATH);
        default.exists().then(|| default.to_owned())
    }

    /// Load from the located file, or the defaults when there is none.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        match Config::locate(explicit) {
            Some(path) => Config::from_file(&path),
            None => Ok(Config::defaults()),
        }
    }

    /// Read and validate `path`: a regular file of at most [`MAX_CONFIG_BYTES`]. It is
    /// opened without blocking, so a FIFO is refused instead of waited on.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = read_config_file(path)?;
        Config::from_toml(&text, path)
    }

    /// Parse and validate `text`, naming `path` in errors.
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let file = parse_file(text, path)?;
        let mut v = Validator { path, text };
        let mut config = v.validate(file)?;
        config.source = Some(path.to_owned());
        Ok(config)
    }
}

fn default_host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests;
