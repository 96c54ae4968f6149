//! The configuration file as written: strict serde structs, one per section, with spans kept
//! for line numbers in errors. [`super::validate`] turns them into the typed [`super::Config`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

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
    pub(super) config: Vec<FileManual>,
    #[serde(default)]
    pub(super) power: FilePower,
    #[serde(default)]
    pub(super) ups: Vec<FileUps>,
    #[serde(default)]
    pub(super) plug: Vec<FilePlug>,
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
    pub(super) ipmi_args: Vec<String>,
    pub(super) interval: Option<Spanned<String>>,
    pub(super) ipmi_interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileUps {
    pub(super) id: Spanned<String>,
    pub(super) host: String,
    pub(super) port: Option<u16>,
    pub(super) name: String,
    pub(super) username: Option<String>,
    pub(super) password_file: Option<PathBuf>,
    pub(super) interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePlug {
    pub(super) id: Spanned<String>,
    pub(super) kind: Spanned<String>,
    pub(super) topic: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileHost {
    pub(super) name: Option<Spanned<String>>,
    pub(super) sysfs: Option<PathBuf>,
    pub(super) procfs: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileStorage {
    pub(super) path: Option<PathBuf>,
    pub(super) raw_retention: Option<Spanned<String>>,
    pub(super) detail_retention: Option<Spanned<String>>,
    pub(super) flush_interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMeter {
    pub(super) id: Spanned<String>,
    pub(super) protocol: Spanned<String>,
    pub(super) port: PathBuf,
    pub(super) baud: Option<Spanned<u32>>,
    pub(super) parity: Option<Spanned<String>>,
    pub(super) stop_bits: Option<Spanned<u8>>,
    pub(super) address: Option<Spanned<u8>>,
    pub(super) interval: Option<Spanned<String>>,
    pub(super) timeout: Option<Spanned<String>>,
    pub(super) line: Option<FileLineFormat>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLineFormat {
    /// `csv` or `kv`.
    pub(super) format: Spanned<String>,
    pub(super) separator: Option<String>,
    /// Metric name -> CSV column (0-based integer) or key name (string).
    pub(super) fields: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) scale: BTreeMap<String, f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCpu {
    pub(super) interval: Option<Spanned<String>>,
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
    pub(super) client_id: Option<String>,
    pub(super) username: Option<String>,
    pub(super) password_file: Option<PathBuf>,
    pub(super) ca_file: Option<PathBuf>,
    pub(super) client_cert_file: Option<PathBuf>,
    pub(super) client_key_file: Option<PathBuf>,
    pub(super) insecure_skip_verify: Option<bool>,
    pub(super) topic_prefix: Option<Spanned<String>>,
    pub(super) discovery_prefix: Option<Spanned<String>>,
    pub(super) discovery: Option<bool>,
    pub(super) publish_interval: Option<Spanned<String>>,
    pub(super) keepalive: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileManual {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) modes: BTreeMap<String, Spanned<f64>>,
    pub(super) upgrade_cost: Option<f64>,
    #[serde(default)]
    pub(super) description: Option<String>,
}
