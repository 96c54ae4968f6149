//! The configuration file: TOML, parsed strictly, then validated once into typed values.
//!
//! Lookup order: `--config PATH`, else `$WATTSON_CONFIG`, else `/etc/wattson/wattson.toml`.
//! Unknown keys are errors. Every error names the file, the key and (where known) the line,
//! and a bad config makes the process exit with `EX_CONFIG` (78).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// Default location of the configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/wattson/wattson.toml";
/// Exit status for a bad configuration (sysexits.h `EX_CONFIG`).
pub const EXIT_CONFIG: i32 = 78;

/// A configuration problem, with enough context to find and fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}")]
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
// The file as written (strict serde structs).
// ---------------------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    host: FileHost,
    #[serde(default)]
    storage: FileStorage,
    #[serde(default)]
    meter: Vec<FileMeter>,
    #[serde(default)]
    cpu: FileCpu,
    #[serde(default)]
    tariff: Option<FileTariff>,
    #[serde(default)]
    mqtt: Option<FileMqtt>,
    #[serde(default)]
    config: Vec<FileManual>,
    #[serde(default)]
    power: FilePower,
    #[serde(default)]
    ups: Vec<FileUps>,
    #[serde(default)]
    plug: Vec<FilePlug>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePower {
    rapl: Option<bool>,
    hwmon: Option<bool>,
    gpu: Option<bool>,
    ipmi: Option<bool>,
    ipmi_command: Option<PathBuf>,
    #[serde(default)]
    ipmi_args: Vec<String>,
    interval: Option<Spanned<String>>,
    ipmi_interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileUps {
    id: Spanned<String>,
    host: String,
    port: Option<u16>,
    name: String,
    username: Option<String>,
    password_file: Option<PathBuf>,
    interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePlug {
    id: Spanned<String>,
    kind: Spanned<String>,
    topic: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHost {
    name: Option<Spanned<String>>,
    sysfs: Option<PathBuf>,
    procfs: Option<PathBuf>,
    devfs: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStorage {
    path: Option<PathBuf>,
    raw_retention: Option<Spanned<String>>,
    detail_retention: Option<Spanned<String>>,
    flush_interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMeter {
    id: Spanned<String>,
    protocol: Spanned<String>,
    port: PathBuf,
    baud: Option<Spanned<u32>>,
    parity: Option<Spanned<String>>,
    stop_bits: Option<Spanned<u8>>,
    address: Option<Spanned<u8>>,
    interval: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    line: Option<FileLineFormat>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLineFormat {
    /// `csv` or `kv`.
    format: Spanned<String>,
    separator: Option<String>,
    /// Metric name -> CSV column (0-based integer) or key name (string).
    fields: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    scale: BTreeMap<String, f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCpu {
    interval: Option<Spanned<String>>,
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTariff {
    currency: Option<Spanned<String>>,
    price_per_kwh: Option<Spanned<f64>>,
    standing_charge_per_day: Option<Spanned<f64>>,
    timezone: Option<Spanned<String>>,
    #[serde(default)]
    period: Vec<FilePeriod>,
    #[serde(default)]
    change: Vec<FileTariffChange>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePeriod {
    start: Spanned<String>,
    end: Spanned<String>,
    price_per_kwh: Spanned<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTariffChange {
    effective_from: Spanned<String>,
    price_per_kwh: Spanned<f64>,
    #[serde(default)]
    period: Vec<FilePeriod>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMqtt {
    url: Spanned<String>,
    client_id: Option<String>,
    username: Option<String>,
    password_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    client_cert_file: Option<PathBuf>,
    client_key_file: Option<PathBuf>,
    insecure_skip_verify: Option<bool>,
    topic_prefix: Option<Spanned<String>>,
    discovery_prefix: Option<Spanned<String>>,
    discovery: Option<bool>,
    publish_interval: Option<Spanned<String>>,
    keepalive: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileManual {
    name: Spanned<String>,
    #[serde(default)]
    modes: BTreeMap<String, Spanned<f64>>,
    upgrade_cost: Option<f64>,
    #[serde(default)]
    description: Option<String>,
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
    /// Where devices are (`/dev`): the CPU's MSRs as `<devfs>/cpu/N/msr`.
    pub devfs: PathBuf,
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
                devfs: PathBuf::from("/dev"),
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

    /// The effective configuration as TOML, with secrets redacted.
    pub fn to_effective_toml(&self) -> String {
        let mut out = String::new();
        let q = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let p = |p: &Path| q(&p.display().to_string());
        let _ = writeln!(
            out,
            "# effective configuration{}",
            self.source.as_ref().map_or_else(
                || " (built-in defaults: no config file found)".to_owned(),
                |s| format!(" from {}", s.display())
            )
        );
        let _ = writeln!(out, "[host]");
        let _ = writeln!(out, "name = {}", q(&self.host.name));
        let _ = writeln!(out, "sysfs = {}", p(&self.host.sysfs));
        let _ = writeln!(out, "procfs = {}", p(&self.host.procfs));
        let _ = writeln!(out, "devfs = {}", p(&self.host.devfs));
        let _ = writeln!(out, "\n[storage]");
        let _ = writeln!(out, "path = {}", p(&self.storage.path));
        let _ = writeln!(
            out,
            "raw_retention = {}",
            q(&format_duration(self.storage.raw_retention))
        );
        let _ = writeln!(
            out,
            "detail_retention = {}",
            q(&format_duration(self.storage.detail_retention))
        );
        let _ = writeln!(
            out,
            "flush_interval = {}",
            q(&format_duration(self.storage.flush_interval))
        );
        for m in &self.meters {
            let _ = writeln!(out, "\n[[meter]]");
            let _ = writeln!(out, "id = {}", q(&m.id));
            let _ = writeln!(out, "protocol = {}", q(&m.protocol));
            let _ = writeln!(out, "port = {}", p(&m.port));
            if let Some(b) = m.baud {
                let _ = writeln!(out, "baud = {b}");
            }
            if let Some(par) = m.parity {
                let _ = writeln!(out, "parity = {}", q(par.as_str()));
            }
            if let Some(s) = m.stop_bits {
                let _ = writeln!(out, "stop_bits = {s}");
            }
            if let Some(a) = m.address {
                let _ = writeln!(out, "address = {a}");
            }
            let _ = writeln!(out, "interval = {}", q(&format_duration(m.interval)));
            if let Some(t) = m.timeout {
                let _ = writeln!(out, "timeout = {}", q(&format_duration(t)));
            }
            if let Some(line) = &m.line {
                let _ = writeln!(out, "[meter.line]");
                let _ = writeln!(out, "format = {}", q(if line.kv { "kv" } else { "csv" }));
                let _ = writeln!(out, "separator = {}", q(&line.separator));
                let fields: Vec<String> = line
                    .fields
                    .iter()
                    .map(|(k, f)| match f {
                        LineField::Column(c) => format!("{k} = {c}"),
                        LineField::Key(s) => format!("{k} = {}", q(s)),
                    })
                    .collect();
                let _ = writeln!(out, "fields = {{ {} }}", fields.join(", "));
                if !line.scale.is_empty() {
                    let scale: Vec<String> = line
                        .scale
                        .iter()
                        .map(|(k, s)| format!("{k} = {s}"))
                        .collect();
                    let _ = writeln!(out, "scale = {{ {} }}", scale.join(", "));
                }
            }
        }
        let _ = writeln!(out, "\n[cpu]");
        let _ = writeln!(out, "enabled = {}", self.cpu.enabled);
        let _ = writeln!(out, "interval = {}", q(&format_duration(self.cpu.interval)));
        let t = &self.tariff;
        let _ = writeln!(out, "\n[tariff]");
        let _ = writeln!(out, "currency = {}", q(&t.currency));
        let _ = writeln!(out, "price_per_kwh = {}", t.price_per_kwh);
        let _ = writeln!(
            out,
            "standing_charge_per_day = {}",
            t.standing_charge_per_day
        );
        if let Some(tz) = &t.timezone {
            let _ = writeln!(out, "timezone = {}", q(tz));
        }
        let write_periods = |out: &mut String, header: &str, periods: &[PeriodConfig]| {
            for per in periods {
                let _ = writeln!(out, "[[{header}]]");
                let _ = writeln!(out, "start = {}", q(&per.start.format("%H:%M").to_string()));
                let _ = writeln!(out, "end = {}", q(&per.end.format("%H:%M").to_string()));
                let _ = writeln!(out, "price_per_kwh = {}", per.price_per_kwh);
            }
        };
        write_periods(&mut out, "tariff.period", &t.periods);
        for c in &t.changes {
            let _ = writeln!(out, "[[tariff.change]]");
            let _ = writeln!(out, "effective_from = {}", q(&c.effective_from.to_string()));
            let _ = writeln!(out, "price_per_kwh = {}", c.price_per_kwh);
            write_periods(&mut out, "tariff.change.period", &c.periods);
        }
        if let Some(m) = &self.mqtt {
            let _ = writeln!(out, "\n[mqtt]");
            let _ = writeln!(out, "url = {}", q(&redact_url(&m.url)));
            let _ = writeln!(out, "client_id = {}", q(&m.client_id));
            if let Some(u) = &m.username {
                let _ = writeln!(out, "username = {}", q(u));
            }
            if let Some(pf) = &m.password_file {
                let _ = writeln!(out, "password_file = {}  # contents not shown", p(pf));
            }
            for (key, val) in [
                ("ca_file", &m.ca_file),
                ("client_cert_file", &m.client_cert_file),
                ("client_key_file", &m.client_key_file),
            ] {
                if let Some(v) = val {
                    let _ = writeln!(out, "{key} = {}", p(v));
                }
            }
            if m.insecure_skip_verify {
                let _ = writeln!(out, "insecure_skip_verify = true");
            }
            let _ = writeln!(out, "topic_prefix = {}", q(&m.topic_prefix));
            let _ = writeln!(out, "discovery_prefix = {}", q(&m.discovery_prefix));
            let _ = writeln!(out, "discovery = {}", m.discovery);
            let _ = writeln!(
                out,
                "publish_interval = {}",
                q(&format_duration(m.publish_interval))
            );
            let _ = writeln!(out, "keepalive = {}", q(&format_duration(m.keepalive)));
        }
        let pw = &self.power;
        let _ = writeln!(out, "\n[power]");
        let _ = writeln!(
            out,
            "rapl = {}\nhwmon = {}\ngpu = {}\nipmi = {}",
            pw.rapl, pw.hwmon, pw.gpu, pw.ipmi
        );
        let _ = writeln!(out, "ipmi_command = {}", p(&pw.ipmi_command));
        if !pw.ipmi_args.is_empty() {
            let args: Vec<String> = pw.ipmi_args.iter().map(|a| q(a)).collect();
            let _ = writeln!(out, "ipmi_args = [{}]", args.join(", "));
        }
        let _ = writeln!(out, "interval = {}", q(&format_duration(pw.interval)));
        let _ = writeln!(
            out,
            "ipmi_interval = {}",
            q(&format_duration(pw.ipmi_interval))
        );
        for u in &self.ups {
            let _ = writeln!(
                out,
                "\n[[ups]]\nid = {}\nhost = {}\nport = {}\nname = {}",
                q(&u.id),
                q(&u.host),
                u.port,
                q(&u.name)
            );
            if let Some(user) = &u.username {
                let _ = writeln!(out, "username = {}", q(user));
            }
            if let Some(pf) = &u.password_file {
                let _ = writeln!(out, "password_file = {}  # contents not shown", p(pf));
            }
            let _ = writeln!(out, "interval = {}", q(&format_duration(u.interval)));
        }
        for pl in &self.plugs {
            let _ = writeln!(
                out,
                "\n[[plug]]\nid = {}\nkind = {}\ntopic = {}",
                q(&pl.id),
                q(&pl.kind),
                q(&pl.topic)
            );
        }
        for c in &self.manual {
            let _ = writeln!(out, "\n[[config]]");
            let _ = writeln!(out, "name = {}", q(&c.name));
            if let Some(d) = &c.description {
                let _ = writeln!(out, "description = {}", q(d));
            }
            if let Some(u) = c.upgrade_cost {
                let _ = writeln!(out, "upgrade_cost = {u}");
            }
            let _ = writeln!(out, "[config.modes]");
            for (mode, watts) in &c.modes {
                let key = if mode
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
                {
                    mode.clone()
                } else {
                    q(mode)
                };
                let _ = writeln!(out, "{key} = {watts}");
            }
        }
        out
    }
}

/// Hide a password embedded in a URL (`mqtt://user:secret@host`).
pub fn redact_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((userinfo, host)) = rest.split_once('@')
        && let Some((user, _)) = userinfo.split_once(':')
    {
        return format!("{scheme}://{user}:<redacted>@{host}");
    }
    url.to_owned()
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

/// Parse a duration such as `500ms`, `1s`, `10m`, `2h`, `30d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?} has no unit: write e.g. \"1s\", \"500ms\", \"30d\""))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: write e.g. \"1s\", \"500ms\", \"30d\""))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86_400.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}: use ms, s, m, h or d"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{s:?} must be a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Format a duration in the largest unit that represents it exactly.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

struct Validator<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Validator<'_> {
    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        let _ = std::marker::PhantomData::<T>;
        ConfigError::Invalid {
            path: self.path.to_owned(),
            line: line_of(self.text, span.start),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// An id used in source names and topics: letters, digits, `-` and `_`.
    fn identifier(&self, v: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let id = v.get_ref().trim();
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(self.err::<()>(
                v.span(),
                key,
                format!("{id:?} must be non-empty letters, digits, '-' or '_'"),
            ));
        }
        Ok(id.to_owned())
    }

    fn duration(
        &self,
        v: Option<&Spanned<String>>,
        key: &str,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        match v {
            None => Ok(default),
            Some(s) => parse_duration(s.get_ref()).map_err(|m| self.err::<()>(s.span(), key, m)),
        }
    }

    fn price(&self, v: &Spanned<f64>, key: &str) -> Result<f64, ConfigError> {
        let p = *v.get_ref();
        if !p.is_finite() || p < 0.0 {
            return Err(self.err::<()>(v.span(), key, format!("{p} must be a price of 0 or more")));
        }
        Ok(p)
    }

    fn periods(&self, periods: &[FilePeriod], key: &str) -> Result<Vec<PeriodConfig>, ConfigError> {
        periods
            .iter()
            .map(|per| {
                let time = |s: &Spanned<String>, k: &str| {
                    chrono::NaiveTime::parse_from_str(s.get_ref(), "%H:%M").map_err(|_| {
                        self.err::<()>(
                            s.span(),
                            &format!("{key}.{k}"),
                            format!("{:?} is not a time of day: write \"HH:MM\"", s.get_ref()),
                        )
                    })
                };
                let start = time(&per.start, "start")?;
                let end = time(&per.end, "end")?;
                if start == end {
                    return Err(self.err::<()>(
                        per.start.span(),
                        key,
                        "a period must not start and end at the same time",
                    ));
                }
                Ok(PeriodConfig {
                    start,
                    end,
                    price_per_kwh: self
                        .price(&per.price_per_kwh, &format!("{key}.price_per_kwh"))?,
                })
            })
            .collect()
    }

    fn validate(&mut self, file: FileConfig) -> Result<Config, ConfigError> {
        let mut config = Config::defaults();

        if let Some(name) = file.host.name {
            let n = name.get_ref().trim();
            if n.is_empty() || n.contains(['/', '+', '#']) {
                return Err(self.err::<()>(
                    name.span(),
                    "host.name",
                    "must be non-empty and must not contain '/', '+' or '#' (it is part of MQTT topics)",
                ));
            }
            n.clone_into(&mut config.host.name);
        }
        if let Some(p) = file.host.sysfs {
            config.host.sysfs = p;
        }
        if let Some(p) = file.host.procfs {
            config.host.procfs = p;
        }
        if let Some(p) = file.host.devfs {
            config.host.devfs = p;
        }

        if let Some(p) = file.storage.path {
            config.storage.path = p;
        }
        config.storage.raw_retention = self.duration(
            file.storage.raw_retention.as_ref(),
            "storage.raw_retention",
            config.storage.raw_retention,
        )?;
        config.storage.detail_retention = self.duration(
            file.storage.detail_retention.as_ref(),
            "storage.detail_retention",
            config.storage.detail_retention,
        )?;
        config.storage.flush_interval = self.duration(
            file.storage.flush_interval.as_ref(),
            "storage.flush_interval",
            config.storage.flush_interval,
        )?;

        config.cpu.enabled = file.cpu.enabled.unwrap_or(true);
        config.cpu.interval = self.duration(
            file.cpu.interval.as_ref(),
            "cpu.interval",
            config.cpu.interval,
        )?;

        let mut ids = std::collections::BTreeSet::new();
        for m in file.meter {
            let id = self.identifier(&m.id, "meter.id")?;
            if !ids.insert(id.clone()) {
                return Err(self.err::<()>(
                    m.id.span(),
                    "meter.id",
                    format!("{id:?} is used by two meters"),
                ));
            }
            let protocol = m.protocol.get_ref().trim().to_ascii_lowercase();
            if !crate::sources::meters::PROTOCOL_NAMES.contains(&protocol.as_str()) {
                return Err(self.err::<()>(
                    m.protocol.span(),
                    "meter.protocol",
                    format!(
                        "unknown protocol {protocol:?}; supported: {}",
                        crate::sources::meters::PROTOCOL_NAMES.join(", ")
                    ),
                ));
            }
            let parity = match &m.parity {
                None => None,
                Some(p) => Some(match p.get_ref().to_ascii_lowercase().as_str() {
                    "none" | "n" => Parity::None,
                    "even" | "e" => Parity::Even,
                    "odd" | "o" => Parity::Odd,
                    other => {
                        return Err(self.err::<()>(
                            p.span(),
                            "meter.parity",
                            format!("{other:?} is not a parity: use \"none\", \"even\" or \"odd\""),
                        ));
                    }
                }),
            };
            if let Some(s) = &m.stop_bits
                && !matches!(s.get_ref(), 1 | 2)
            {
                return Err(self.err::<()>(s.span(), "meter.stop_bits", "must be 1 or 2"));
            }
            if let Some(b) = &m.baud
                && !(300..=4_000_000).contains(b.get_ref())
            {
                return Err(self.err::<()>(
                    b.span(),
                    "meter.baud",
                    "must be between 300 and 4000000",
                ));
            }
            if let Some(a) = &m.address
                && !(1..=247).contains(a.get_ref())
            {
                return Err(self.err::<()>(
                    a.span(),
                    "meter.address",
                    "a Modbus address must be between 1 and 247",
                ));
            }
            let line = match m.line {
                None if protocol == "line" => {
                    return Err(self.err::<()>(
                        m.protocol.span(),
                        "meter.line",
                        "protocol \"line\" needs a [meter.line] table saying which fields hold which values",
                    ));
                }
                None => None,
                Some(l) => Some(self.line_format(l)?),
            };
            config.meters.push(MeterConfig {
                id,
                protocol,
                port: m.port,
                baud: m.baud.map(Spanned::into_inner),
                parity,
                stop_bits: m.stop_bits.map(Spanned::into_inner),
                address: m.address.map(Spanned::into_inner),
                interval: self.duration(
                    m.interval.as_ref(),
                    "meter.interval",
                    Duration::from_secs(1),
                )?,
                timeout: m
                    .timeout
                    .as_ref()
                    .map(|t| self.duration(Some(t), "meter.timeout", Duration::ZERO))
                    .transpose()?,
                line,
            });
        }

        if let Some(t) = file.tariff {
            if let Some(c) = t.currency {
                let cur = c.get_ref().trim().to_ascii_uppercase();
                if cur.len() != 3 || !cur.chars().all(|ch| ch.is_ascii_alphabetic()) {
                    return Err(self.err::<()>(
                        c.span(),
                        "tariff.currency",
                        format!(
                            "{:?} is not an ISO 4217 currency code such as \"GBP\" or \"EUR\"",
                            c.get_ref()
                        ),
                    ));
                }
                config.tariff.currency = cur;
            }
            if let Some(p) = &t.price_per_kwh {
                config.tariff.price_per_kwh = self.price(p, "tariff.price_per_kwh")?;
            }
            if let Some(p) = &t.standing_charge_per_day {
                config.tariff.standing_charge_per_day =
                    self.price(p, "tariff.standing_charge_per_day")?;
            }
            if let Some(tz) = t.timezone {
                if tz.get_ref().parse::<chrono_tz::Tz>().is_err() {
                    return Err(self.err::<()>(
                        tz.span(),
                        "tariff.timezone",
                        format!(
                            "{:?} is not an IANA time zone such as \"Europe/London\"",
                            tz.get_ref()
                        ),
                    ));
                }
                config.tariff.timezone = Some(tz.into_inner());
            }
            config.tariff.periods = self.periods(&t.period, "tariff.period")?;
            for c in t.change {
                let date =
                    chrono::NaiveDate::parse_from_str(c.effective_from.get_ref(), "%Y-%m-%d")
                        .map_err(|_| {
                            self.err::<()>(
                                c.effective_from.span(),
                                "tariff.change.effective_from",
                                format!(
                                    "{:?} is not a date: write \"YYYY-MM-DD\"",
                                    c.effective_from.get_ref()
                                ),
                            )
                        })?;
                config.tariff.changes.push(TariffChangeConfig {
                    effective_from: date,
                    price_per_kwh: self.price(&c.price_per_kwh, "tariff.change.price_per_kwh")?,
                    periods: self.periods(&c.period, "tariff.change.period")?,
                });
            }
            config.tariff.changes.sort_by_key(|c| c.effective_from);
        }

        if let Some(m) = file.mqtt {
            let url = m.url.get_ref().trim().to_owned();
            if !(url.starts_with("mqtt://") || url.starts_with("mqtts://")) {
                return Err(self.err::<()>(
                    m.url.span(),
                    "mqtt.url",
                    format!("{} must start with mqtt:// or mqtts://", redact_url(&url)),
                ));
            }
            if url
                .split_once("://")
                .is_some_and(|(_, r)| r.contains(':') && r.contains('@'))
            {
                return Err(self.err::<()>(
                    m.url.span(),
                    "mqtt.url",
                    "put the password in password_file, not in the URL",
                ));
            }
            let prefix = |v: Option<Spanned<String>>,
                          key: &str,
                          default: &str|
             -> Result<String, ConfigError> {
                match v {
                    None => Ok(default.to_owned()),
                    Some(s) => {
                        let p = s.get_ref().trim_matches('/').to_owned();
                        if p.is_empty() || p.contains(['+', '#']) {
                            Err(self.err::<()>(
                                s.span(),
                                key,
                                "must be a non-empty topic without '+' or '#'",
                            ))
                        } else {
                            Ok(p)
                        }
                    }
                }
            };
            config.mqtt = Some(MqttConfig {
                client_id: m
                    .client_id
                    .unwrap_or_else(|| format!("wattson-{}", config.host.name)),
                url,
                username: m.username,
                password_file: m.password_file,
                ca_file: m.ca_file,
                client_cert_file: m.client_cert_file,
                client_key_file: m.client_key_file,
                insecure_skip_verify: m.insecure_skip_verify.unwrap_or(false),
                topic_prefix: prefix(m.topic_prefix, "mqtt.topic_prefix", "wattson")?,
                discovery_prefix: prefix(
                    m.discovery_prefix,
                    "mqtt.discovery_prefix",
                    "homeassistant",
                )?,
                discovery: m.discovery.unwrap_or(true),
                publish_interval: self.duration(
                    m.publish_interval.as_ref(),
                    "mqtt.publish_interval",
                    Duration::from_secs(10),
                )?,
                keepalive: self.duration(
                    m.keepalive.as_ref(),
                    "mqtt.keepalive",
                    Duration::from_secs(30),
                )?,
            });
        }

        let p = file.power;
        config.power.rapl = p.rapl.unwrap_or(true);
        config.power.hwmon = p.hwmon.unwrap_or(true);
        config.power.gpu = p.gpu.unwrap_or(true);
        config.power.ipmi = p.ipmi.unwrap_or(false);
        if let Some(c) = p.ipmi_command {
            config.power.ipmi_command = c;
        }
        config.power.ipmi_args = p.ipmi_args;
        if config.power.ipmi_args.iter().any(|a| a == "-P") {
            return Err(ConfigError::Invalid {
                path: self.path.to_owned(),
                line: 0,
                key: "power.ipmi_args".into(),
                message: "pass the BMC password with -f FILE or -E, not -P (arguments are visible to every user in ps)".into(),
            });
        }
        config.power.interval =
            self.duration(p.interval.as_ref(), "power.interval", config.power.interval)?;
        config.power.ipmi_interval = self.duration(
            p.ipmi_interval.as_ref(),
            "power.ipmi_interval",
            config.power.ipmi_interval,
        )?;
        for u in file.ups {
            let id = self.identifier(&u.id, "ups.id")?;
            config.ups.push(UpsConfig {
                id,
                host: u.host,
                port: u.port.unwrap_or(3493),
                name: u.name,
                username: u.username,
                password_file: u.password_file,
                interval: self.duration(
                    u.interval.as_ref(),
                    "ups.interval",
                    Duration::from_secs(5),
                )?,
            });
        }
        for pl in file.plug {
            let kind = pl.kind.get_ref().to_ascii_lowercase();
            if kind != "tasmota" && kind != "shelly" {
                return Err(self.err::<()>(
                    pl.kind.span(),
                    "plug.kind",
                    format!("{kind:?} is not a plug kind: use \"tasmota\" or \"shelly\""),
                ));
            }
            let id = pl.id.get_ref().trim().to_owned();
            if id.is_empty() || config.meters.iter().any(|m| m.id == id) {
                return Err(self.err::<()>(
                    pl.id.span(),
                    "plug.id",
                    format!("{id:?} must be non-empty and differ from every meter id"),
                ));
            }
            config.plugs.push(PlugConfig {
                id,
                kind,
                topic: pl.topic,
            });
        }
        if !config.plugs.is_empty() && config.mqtt.is_none() {
            return Err(ConfigError::Invalid {
                path: self.path.to_owned(),
                line: 0,
                key: "plug".into(),
                message: "smart plugs report over MQTT: add an [mqtt] section with the broker they publish to".into(),
            });
        }

        let mut names = std::collections::BTreeSet::new();
        for c in file.config {
            let name = c.name.get_ref().trim().to_owned();
            if name.is_empty() || !names.insert(name.clone()) {
                return Err(self.err::<()>(
                    c.name.span(),
                    "config.name",
                    format!("{name:?} must be non-empty and unique"),
                ));
            }
            let mut modes = Vec::new();
            for (mode, watts) in c.modes {
                let w = *watts.get_ref();
                if !w.is_finite() || !(0.0..=100_000.0).contains(&w) {
                    return Err(self.err::<()>(
                        watts.span(),
                        &format!("config.modes.{mode}"),
                        format!("{w} is not a plausible power in watts"),
                    ));
                }
                modes.push((mode, w));
            }
            modes.sort_by_key(|(m, _)| crate::analysis::modes::mode_rank(m));
            config.manual.push(ManualConfig {
                name,
                description: c.description,
                modes,
                upgrade_cost: c.upgrade_cost,
            });
        }
        Ok(config)
    }

    fn line_format(&self, l: FileLineFormat) -> Result<LineFormatConfig, ConfigError> {
        let kv = match l.format.get_ref().as_str() {
            "csv" => false,
            "kv" => true,
            other => {
                return Err(self.err::<()>(
                    l.format.span(),
                    "meter.line.format",
                    format!("{other:?} is not a line format: use \"csv\" or \"kv\""),
                ));
            }
        };
        let mut fields = BTreeMap::new();
        for (name, v) in l.fields {
            if !LINE_FIELDS.contains(&name.as_str()) {
                return Err(self.err::<()>(
                    v.span(),
                    &format!("meter.line.fields.{name}"),
                    format!("unknown field; use one of {}", LINE_FIELDS.join(", ")),
                ));
            }
            let field = match (kv, v.get_ref()) {
                (false, toml::Value::Integer(c)) if *c >= 0 => LineField::Column(*c as usize),
                (true, toml::Value::String(k)) if !k.is_empty() => LineField::Key(k.clone()),
                _ => {
                    return Err(self.err::<()>(
                        v.span(),
                        &format!("meter.line.fields.{name}"),
                        if kv {
                            "with format \"kv\" each field names a key (a string)"
                        } else {
                            "with format \"csv\" each field is a 0-based column number"
                        },
                    ));
                }
            };
            fields.insert(name, field);
        }
        if !fields.contains_key("power") {
            return Err(self.err::<()>(
                l.format.span(),
                "meter.line.fields",
                "a line meter must map at least the \"power\" field",
            ));
        }
        Ok(LineFormatConfig {
            kv,
            separator: l
                .separator
                .unwrap_or_else(|| if kv { " ".to_owned() } else { ",".to_owned() }),
            fields,
            scale: l.scale,
        })
    }
}

/// The fields a text-line meter can map.
pub const LINE_FIELDS: &[&str] = &[
    "power",
    "voltage",
    "current",
    "power_factor",
    "frequency",
    "energy",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, Path::new("test.toml"))
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.storage.raw_retention, Duration::from_secs(30 * 86_400));
        assert_eq!(c.storage.detail_retention, Duration::from_secs(3 * 86_400));
        assert_eq!(c.cpu.interval, Duration::from_secs(1));
        assert_eq!(c.tariff.price_per_kwh, 0.09);
        assert!(c.meters.is_empty());
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let err = parse("[storage]\npath = \"/tmp/x.db\"\nretention = \"3d\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("retention"), "{err}");
    }

    #[test]
    fn bad_duration_names_key_and_line() {
        let err = parse("[cpu]\n\ninterval = \"1 fortnight\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("test.toml:3: cpu.interval:"), "{err}");
    }

    #[test]
    fn unknown_protocol_lists_supported() {
        let err =
            parse("[[meter]]\nid = \"wall\"\nprotocol = \"pzem999\"\nport = \"/dev/ttyUSB0\"\n")
                .unwrap_err()
                .to_string();
        assert!(
            err.contains("meter.protocol") && err.contains("pzem004t"),
            "{err}"
        );
    }

    #[test]
    fn full_example_parses_and_round_trips() {
        let text = r#"
[host]
name = "basket"
sysfs = "/tmp/sys"
[storage]
path = "/tmp/w.db"
raw_retention = "7d"
detail_retention = "12h"
[[meter]]
id = "wall"
protocol = "pzem004t"
port = "/dev/ttyUSB0"
address = 1
[[meter]]
id = "desk"
protocol = "line"
port = "/dev/ttyACM0"
baud = 115200
[meter.line]
format = "kv"
fields = { power = "P", voltage = "U" }
scale = { power = 0.001 }
[tariff]
currency = "gbp"
price_per_kwh = 0.30
timezone = "Europe/London"
[[tariff.period]]
start = "00:30"
end = "07:30"
price_per_kwh = 0.07
[[tariff.change]]
effective_from = "2027-01-01"
price_per_kwh = 0.25
[mqtt]
url = "mqtt://broker.lan:1883"
username = "wattson"
password_file = "/run/credentials/wattson.service/mqtt"
[[config]]
name = "2x Opteron 2.2 GHz, 6 disks"
modes = { standby = 40.0, idle = 240.0, "1 loop" = 260.0, "2 loops" = 280.0 }
"#;
        let c = parse(text).unwrap();
        assert_eq!(c.host.name, "basket");
        assert_eq!(c.tariff.currency, "GBP");
        assert_eq!(c.meters.len(), 2);
        assert_eq!(c.storage.detail_retention, Duration::from_secs(12 * 3600));
        assert_eq!(
            c.meters[1].line.as_ref().unwrap().fields["power"],
            LineField::Key("P".into())
        );
        assert_eq!(c.manual[0].modes[1], ("idle".to_owned(), 240.0));
        let again = parse(&c.to_effective_toml()).unwrap();
        assert_eq!(
            Config {
                source: None,
                ..again
            },
            Config { source: None, ..c }
        );
    }

    #[test]
    fn password_in_url_is_refused_and_never_echoed() {
        let err = parse("[mqtt]\nurl = \"mqtt://u:hunter2@h\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("password_file"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("10").is_err());
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
    }

    // -----------------------------------------------------------------------------------
    // Fuzzing: arbitrary text and mutations of a valid file never panic, and every error
    // names a line or a key. Rerun with more cases:
    // PROPTEST_CASES=20000 cargo test -p wattson --lib config::tests::fuzz
    // -----------------------------------------------------------------------------------

    const VALID: &str = r#"[host]
name = "basket"
[storage]
path = "/tmp/w.db"
raw_retention = "7d"
flush_interval = "5s"
[[meter]]
id = "wall"
protocol = "pzem004t"
port = "/dev/ttyUSB0"
address = 1
interval = "1s"
[[meter]]
id = "desk"
protocol = "line"
port = "/dev/ttyACM0"
baud = 115200
[meter.line]
format = "csv"
separator = ";"
fields = { power = 0, voltage = 1 }
[cpu]
interval = "1s"
[tariff]
currency = "GBP"
price_per_kwh = 0.09
timezone = "Europe/London"
[[tariff.period]]
start = "00:30"
end = "07:30"
price_per_kwh = 0.07
[mqtt]
url = "mqtt://broker.lan:1883"
username = "wattson"
password_file = "/etc/wattson/mqtt-password"
keepalive = "30s"
[[config]]
name = "Athlon"
modes = { standby = 4.0, idle = 78.0 }
"#;

    /// An error names where: `line N` (syntax) or `path:N: key:` (validation).
    fn names_line_or_key(e: &ConfigError) -> bool {
        match e {
            ConfigError::Syntax { message, .. } => {
                message.contains("line ") || message.contains("missing field")
            }
            ConfigError::Invalid { line, key, .. } => *line >= 1 && !key.is_empty(),
            ConfigError::Read { .. } => false,
        }
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Delete(usize, usize),
        Insert(usize, String),
        DuplicateLine(usize),
        SwapLines(usize, usize),
        ReplaceValue(usize, String),
    }

    fn mutation() -> impl proptest::strategy::Strategy<Value = Mutation> {
        use proptest::prelude::*;
        let token = prop_oneof![
            any::<String>(),
            "[-+0-9.eE_inf nan]{0,12}",
            "\"[0-9a-z: ]{0,10}\"",
            Just("[[meter]]".to_owned()),
            Just("=".to_owned()),
            Just("{".to_owned()),
            Just("\"\u{0}\"".to_owned()),
        ];
        prop_oneof![
            (any::<usize>(), 0usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
            (any::<usize>(), token.clone()).prop_map(|(a, t)| Mutation::Insert(a, t)),
            any::<usize>().prop_map(Mutation::DuplicateLine),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
            (any::<usize>(), token).prop_map(|(a, t)| Mutation::ReplaceValue(a, t)),
        ]
    }

    fn apply(text: &str, m: &Mutation) -> String {
        let mut chars: Vec<char> = text.chars().collect();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        match m {
            Mutation::Delete(at, n) => {
                let at = at % (chars.len() + 1);
                let end = (at + n).min(chars.len());
                chars.drain(at..end);
                chars.into_iter().collect()
            }
            Mutation::Insert(at, t) => {
                let at = at % (chars.len() + 1);
                chars.splice(at..at, t.chars());
                chars.into_iter().collect()
            }
            Mutation::DuplicateLine(i) => {
                let i = i % lines.len();
                lines.insert(i, lines[i].clone());
                lines.join("\n")
            }
            Mutation::SwapLines(a, b) => {
                let n = lines.len();
                lines.swap(a % n, b % n);
                lines.join("\n")
            }
            Mutation::ReplaceValue(i, t) => {
                let i = i % lines.len();
                if let Some((k, _)) = lines[i].split_once('=') {
                    lines[i] = format!("{k}= {t}");
                }
                lines.join("\n")
            }
        }
    }

    #[test]
    fn fuzz_valid_config_parses() {
        assert!(parse(VALID).is_ok(), "{:?}", parse(VALID).err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
        ))]

        #[test]
        fn fuzz_arbitrary_text_never_panics_and_errors_say_where(text in proptest::prelude::any::<String>()) {
            if let Err(e) = parse(&text) {
                proptest::prop_assert!(names_line_or_key(&e), "{e}");
            }
        }

        #[test]
        fn fuzz_mutated_config_never_panics_and_errors_say_where(
            muts in proptest::collection::vec(mutation(), 1..4)
        ) {
            let mut text = VALID.to_owned();
            for m in &muts {
                text = apply(&text, m);
            }
            if let Err(e) = parse(&text) {
                proptest::prop_assert!(names_line_or_key(&e), "{e}\n--- input:\n{text}");
            }
        }
    }
}
