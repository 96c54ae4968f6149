//! The configuration file as written: strict serde structs, one per section, with spans kept
//! for line numbers in errors. Names are read into their domain types here (the collectors'
//! [`Protocol`], [`Parity`] and line [`Field`]s, [`PlugKind`], durations), so a misspelt one
//! is reported with its key and line while the file is read; [`super::validate`] then checks
//! ranges and how the sections fit together, and builds the typed [`super::Config`].

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;
use toml::Spanned;
use wattson_collectors::meter::line::Field;
use wattson_collectors::meter::{Parity, Protocol};

use super::duration::Written;

/// A name read into its domain type `T` through `T::from_str`, trimmed and in lower case
/// (`protocol = "PZEM004T"` is `pzem004t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Named<T>(pub(super) T);

impl<'de, T> Deserialize<'de> for Named<T>
where
    T: FromStr,
    T::Err: Display,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.trim()
            .to_ascii_lowercase()
            .parse()
            .map(Named)
            .map_err(serde::de::Error::custom)
    }
}

/// How a text-line meter lays out its fields (`[meter.line] format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LineLayoutName {
    Csv,
    Kv,
}

impl FromStr for LineLayoutName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csv" => Ok(LineLayoutName::Csv),
            "kv" => Ok(LineLayoutName::Kv),
            other => Err(format!(
                "{other:?} is not a line format: use \"csv\" or \"kv\""
            )),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    #[serde(default)]
    pub(super) host: FileHost,
    #[serde(default)]
    pub(super) storage: FileStorage,
    #[serde(default)]
    pub(super) meter: Vec<FileMeter>,
    #[serde(default)]
    pub(super) cpu: FileCpu,
    #[serde(default)]
    pub(super) tariff: Option<FileTariff>,
    #[serde(default)]
    pub(super) mqtt: Option<FileMqtt>,
    #[serde(default)]
    pub(super) http: Option<FileHttp>,
    #[serde(default)]
    pub(super) prometheus: Option<super::prometheus::FilePrometheus>,
    #[serde(default)]
    pub(super) config: Vec<FileManual>,
    #[serde(default)]
    pub(super) power: FilePower,
    #[serde(default)]
    pub(super) ups: Vec<FileUps>,
    #[serde(default)]
    pub(super) plug: Vec<super::plug::FilePlug>,
    #[serde(default)]
    pub(super) services: FileServices,
    #[serde(default)]
    pub(super) wakeups: FileWakeups,
    #[serde(default)]
    pub(super) disk: Vec<super::disk::FileDisk>,
    #[serde(default)]
    pub(super) sleep: super::sleep::FileSleep,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileWakeups {
    pub(super) enabled: Option<bool>,
    pub(super) interval: Option<Spanned<Written>>,
    pub(super) top: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileServices {
    pub(super) enabled: Option<bool>,
    pub(super) interval: Option<Spanned<Written>>,
    pub(super) top: Option<Spanned<i64>>,
    pub(super) docker_root: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePower {
    pub(super) rapl: Option<bool>,
    pub(super) hwmon: Option<bool>,
    pub(super) gpu: Option<bool>,
    pub(super) ipmi: Option<bool>,
    pub(super) ipmi_command: Option<PathBuf>,
    #[serde(default)]
    pub(super) ipmi_args: Vec<Spanned<String>>,
    pub(super) interval: Option<Spanned<Written>>,
    pub(super) ipmi_interval: Option<Spanned<Written>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileUps {
    pub(super) id: Spanned<String>,
    pub(super) host: String,
    pub(super) port: Option<Spanned<u16>>,
    pub(super) name: Spanned<String>,
    pub(super) username: Option<String>,
    pub(super) password_file: Option<PathBuf>,
    pub(super) interval: Option<Spanned<Written>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileHost {
    pub(super) name: Option<Spanned<String>>,
    pub(super) sysfs: Option<PathBuf>,
    pub(super) procfs: Option<PathBuf>,
    pub(super) devfs: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileStorage {
    pub(super) path: Option<PathBuf>,
    pub(super) raw_retention: Option<Spanned<Written>>,
    pub(super) detail_retention: Option<Spanned<Written>>,
    pub(super) flush_interval: Option<Spanned<Written>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMeter {
    pub(super) id: Spanned<String>,
    pub(super) protocol: Spanned<Named<Protocol>>,
    pub(super) port: Spanned<PathBuf>,
    pub(super) baud: Option<Spanned<u32>>,
    pub(super) parity: Option<Spanned<Named<Parity>>>,
    pub(super) stop_bits: Option<Spanned<u8>>,
    pub(super) address: Option<Spanned<u8>>,
    pub(super) interval: Option<Spanned<Written>>,
    pub(super) timeout: Option<Spanned<Written>>,
    pub(super) line: Option<FileLineFormat>,
    pub(super) bidirectional: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLineFormat {
    pub(super) format: Spanned<Named<LineLayoutName>>,
    pub(super) separator: Option<Spanned<String>>,
    /// Field -> CSV column (0-based integer) or key name (string).
    pub(super) fields: BTreeMap<Field, Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) scale: BTreeMap<Field, Spanned<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCpu {
    pub(super) interval: Option<Spanned<Written>>,
    pub(super) enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTariff {
    pub(super) currency: Option<Spanned<String>>,
    pub(super) price_per_kwh: Option<Spanned<f64>>,
    pub(super) standing_charge_per_day: Option<Spanned<f64>>,
    pub(super) timezone: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) period: Vec<FilePeriod>,
    #[serde(default)]
    pub(super) change: Vec<FileTariffChange>,
    pub(super) price_topic: Option<Spanned<String>>,
    pub(super) price_field: Option<Spanned<String>>,
    pub(super) price_unit: Option<Spanned<String>>,
    pub(super) max_price_per_kwh: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) alternative: Vec<FileAlternative>,
}

/// `[[tariff.alternative]]`: a tariff to compare against (`wattson report --tariffs`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAlternative {
    pub(super) name: Spanned<String>,
    pub(super) price_per_kwh: Spanned<f64>,
    pub(super) standing_charge_per_day: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) period: Vec<FilePeriod>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePeriod {
    pub(super) start: Spanned<String>,
    pub(super) end: Spanned<String>,
    pub(super) price_per_kwh: Spanned<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTariffChange {
    pub(super) effective_from: Spanned<String>,
    pub(super) price_per_kwh: Spanned<f64>,
    #[serde(default)]
    pub(super) period: Vec<FilePeriod>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMqtt {
    pub(super) url: Spanned<String>,
    pub(super) client_id: Option<Spanned<String>>,
    pub(super) username: Option<String>,
    pub(super) password_file: Option<Spanned<PathBuf>>,
    pub(super) password_credential: Option<Spanned<String>>,
    pub(super) ca_file: Option<Spanned<PathBuf>>,
    pub(super) client_cert_file: Option<Spanned<PathBuf>>,
    pub(super) client_key_file: Option<Spanned<PathBuf>>,
    pub(super) insecure_skip_verify: Option<bool>,
    pub(super) topic_prefix: Option<Spanned<String>>,
    pub(super) discovery_prefix: Option<Spanned<String>>,
    pub(super) discovery: Option<bool>,
    pub(super) publish_interval: Option<Spanned<Written>>,
    pub(super) keepalive: Option<Spanned<Written>>,
}

/// `[http]`: the Prometheus endpoint and the live page.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileHttp {
    pub(super) listen: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileManual {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) modes: BTreeMap<String, Spanned<f64>>,
    pub(super) upgrade_cost: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) description: Option<String>,
    /// A week's schedule of its modes ("standby 00:00-07:00; idle").
    pub(super) schedule: Option<Spanned<String>>,
}
