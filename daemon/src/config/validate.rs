//! Validation: the file as written ([`super::file`]) into the typed [`Config`], once, with
//! every error naming the file, the key and the line.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::duration::parse_duration;
use super::file::{FileConfig, FileLineFormat, FilePeriod};
use super::{
    Config, ConfigError, LineField, LineFormatConfig, ManualConfig, MeterConfig, MqttConfig,
    Parity, PeriodConfig, PlugConfig, TariffChangeConfig, UpsConfig, line_of, redact_url,
};

pub(super) struct Validator<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
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

    pub(super) fn validate(&mut self, file: FileConfig) -> Result<Config, ConfigError> {
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
