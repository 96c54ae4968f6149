//! The configuration file: TOML, parsed strictly, then validated once into typed values.
//!
//! Lookup order: `--config PATH`, else `$WATTSON_CONFIG`, else `/etc/wattson/wattson.toml`.
//! Unknown keys are errors. Every error names the file, the key and (where known) the line,
//! and a bad config makes the process exit with `EX_CONFIG` (78).

mod duration;
mod effective;
mod file;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use duration::{format_duration, parse_duration};
pub use effective::redact_url;
use file::FileConfig;
pub use validate::LINE_FIELDS;
use validate::Validator;

/// Default location of the configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/wattson/wattson.toml";
/// Exit status for a bad configuration (sysexits.h `EX_CONFIG`).
pub const EXIT_CONFIG: i32 = 78;

/// A configuration problem, with enough context to find and fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}:{line}: {key}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        key: String,
        message: String,
    },
}

// ---------------------------------------------------------------------------------------
// The validated configuration.
// ---------------------------------------------------------------------------------------

/// The validated configuration the rest of wattson uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where it came from (`None` for the built-in defaults).
    pub source: Option<PathBuf>,
    pub host: HostConfig,
    pub storage: StorageConfig,
    pub meters: Vec<MeterConfig>,
    pub cpu: CpuConfig,
    pub tariff: TariffConfig,
    pub mqtt: Option<MqttConfig>,
    pub manual: Vec<ManualConfig>,
    pub power: PowerConfig,
    pub ups: Vec<UpsConfig>,
    pub plugs: Vec<PlugConfig>,
}

/// Software-visible power sources inside the box (`[power]`). One switch per source, as in
/// the file.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, PartialEq)]
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
    pub ipmi_args: Vec<String>,
    pub interval: Duration,
    pub ipmi_interval: Duration,
}

/// A UPS read through Network UPS Tools' upsd (`[[ups]]`).
#[derive(Debug, Clone, PartialEq)]
pub struct UpsConfig {
    pub id: String,
    pub host: String,
    pub port: u16,
    /// The UPS name in upsd (`ups` in `ups@host`).
    pub name: String,
    pub username: Option<String>,
    pub password_file: Option<PathBuf>,
    pub interval: Duration,
}

/// A smart plug reporting over MQTT, used as a wall meter (`[[plug]]`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlugConfig {
    pub id: String,
    /// `tasmota` or `shelly`.
    pub kind: String,
    pub topic: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    pub name: String,
    pub sysfs: PathBuf,
    pub procfs: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StorageConfig {
    pub path: PathBuf,
    pub raw_retention: Duration,
    /// How long raw per-core CPU samples (`cpuN`, `cpuN/<x>`) are kept; never longer than
    /// `raw_retention`.
    pub detail_retention: Duration,
    /// How often buffered samples are committed (at most this much is lost on a crash).
    pub flush_interval: Duration,
}

/// Serial parity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parity {
    None,
    Even,
    Odd,
}

impl Parity {
    pub fn as_str(self) -> &'static str {
        match self {
            Parity::None => "none",
            Parity::Even => "even",
            Parity::Odd => "odd",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MeterConfig {
    pub id: String,
    pub protocol: String,
    pub port: PathBuf,
    pub baud: Option<u32>,
    pub parity: Option<Parity>,
    pub stop_bits: Option<u8>,
    pub address: Option<u8>,
    pub interval: Duration,
    pub timeout: Option<Duration>,
    pub line: Option<LineFormatConfig>,
}

/// How a text-line meter's lines map to measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct LineFormatConfig {
    pub kv: bool,
    pub separator: String,
    /// metric name (`power`, `voltage`, `current`, `power_factor`, `frequency`, `energy`) ->
    /// CSV column or key.
    pub fields: BTreeMap<String, LineField>,
    pub scale: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LineField {
    Column(usize),
    Key(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CpuConfig {
    pub enabled: bool,
    pub interval: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TariffConfig {
    pub currency: String,
    pub price_per_kwh: f64,
    pub standing_charge_per_day: f64,
    /// IANA time zone for time-of-use periods; `None` means the machine's local zone.
    pub timezone: Option<String>,
    pub periods: Vec<PeriodConfig>,
    pub changes: Vec<TariffChangeConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PeriodConfig {
    pub start: chrono::NaiveTime,
    pub end: chrono::NaiveTime,
    pub price_per_kwh: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TariffChangeConfig {
    pub effective_from: chrono::NaiveDate,
    pub price_per_kwh: f64,
    pub periods: Vec<PeriodConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MqttConfig {
    pub url: String,
    pub client_id: String,
    pub username: Option<String>,
    pub password_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub insecure_skip_verify: bool,
    pub topic_prefix: String,
    pub discovery_prefix: String,
    pub discovery: bool,
    pub publish_interval: Duration,
    pub keepalive: Duration,
}

/// A configuration measured by hand: watts per mode, read off a meter's display.
#[derive(Debug, Clone, PartialEq)]
pub struct ManualConfig {
    pub name: String,
    pub description: Option<String>,
    /// Mode name -> watts, in file order where the modes are standard ones.
    pub modes: Vec<(String, f64)>,
    pub upgrade_cost: Option<f64>,
}

impl Default for TariffConfig {
    fn default() -> Self {
        TariffConfig {
            currency: "GBP".to_owned(),
            price_per_kwh: 0.09,
            standing_charge_per_day: 0.0,
            timezone: None,
            periods: Vec::new(),
            changes: Vec::new(),
        }
    }
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
            },
            storage: StorageConfig {
                path: PathBuf::from("/var/lib/wattson/wattson.db"),
                raw_retention: Duration::from_secs(30 * 86_400),
                detail_retention: Duration::from_secs(3 * 86_400),
                flush_interval: Duration::from_secs(5),
            },
            meters: Vec::new(),
            cpu: CpuConfig {
                enabled: true,
                interval: Duration::from_secs(1),
            },
            tariff: TariffConfig::default(),
            mqtt: None,
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
            plugs: Vec::new(),
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

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml(&text, path)
    }

    /// Parse and validate `text`, naming `path` in errors.
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let file: FileConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: describe_toml_error(&e, text),
        })?;
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

/// Turn a TOML error into one message with the line number and the offending key.
fn describe_toml_error(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().to_owned();
    match e.span() {
        Some(span) => {
            let line = line_of(text, span.start);
            let snippet = text.lines().nth(line - 1).unwrap_or("").trim();
            format!("line {line}: {msg} (at `{snippet}`)")
        }
        None => msg,
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests;
