//! Validation: the file as written ([`super::file`]) into the typed [`Config`], once, with
//! every error naming the file, the key and the line. Every command loads its config
//! through here, so what `config check` passes, `run` runs. Meters are in [`super::meter`].
//!
//! Every duration has a range (below), so none can overflow an `Instant`, wrap when turned
//! into milliseconds, or make a collector spin.

use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::duration::{Range, Written};
use super::file::{FileConfig, FilePeriod};
use super::{
    Config, ConfigError, ManualConfig, MqttConfig, PeriodConfig, PlugConfig, TariffChangeConfig,
    UpsConfig, line_of, redact_url,
};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3600)
}

/// How often a source is sampled (`meter`, `cpu`, `power`, `ups` intervals): 100 ms to 1 h.
pub const SAMPLING: Range = Range::new(ms(100), hours(1));
/// `storage.flush_interval`: 100 ms to 1 h.
pub const FLUSH: Range = Range::new(ms(100), hours(1));
/// `storage.raw_retention` and `detail_retention`: 1 h to 100 years.
pub const RETENTION: Range = Range::new(hours(1), hours(36_500 * 24));
/// `meter.timeout`, how long to wait for a reply or a record: 10 ms to 60 s.
pub const METER_TIMEOUT: Range = Range::new(ms(10), ms(60_000));
/// `mqtt.publish_interval`: 100 ms to 1 h.
pub const PUBLISH: Range = Range::new(ms(100), hours(1));
/// `mqtt.keepalive`: 1 s (rumqttc's least) to 1 h.
pub const KEEPALIVE: Range = Range::new(ms(1000), hours(1));

pub(super) struct Validator<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
}

impl Validator<'_> {
    pub(super) fn err(
        &self,
        span: std::ops::Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            line: line_of(self.text, span.start),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// A name that reaches topics, labels or pages ([`super::names::check_name`]), trimmed.
    pub(super) fn name(&self, v: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let n = v.get_ref().trim();
        super::names::check_name(n).map_err(|why| {
            self.err(
                v.span(),
                key,
                format!("{:?} {why}", n.chars().take(80).collect::<String>()),
            )
        })?;
        Ok(n.to_owned())
    }

    /// A topic ([`super::names::check_topic`]), as written.
    pub(super) fn topic(
        &self,
        v: &Spanned<String>,
        key: &str,
        wildcards: bool,
    ) -> Result<String, ConfigError> {
        super::names::check_topic(v.get_ref(), wildcards).map_err(|why| {
            self.err(
                v.span(),
                key,
                format!(
                    "{:?} {why}",
                    v.get_ref().chars().take(80).collect::<String>()
                ),
            )
        })?;
        Ok(v.get_ref().clone())
    }

    /// An id used in source names and topics: letters, digits, `-` and `_`, at most
    /// [`super::names::MAX_NAME_CHARS`].
    pub(super) fn identifier(&self, v: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let id = v.get_ref().trim();
        if id.is_empty()
            || id.chars().count() > super::names::MAX_NAME_CHARS
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(self.err(
                v.span(),
                key,
                format!(
                    "{id:?} must be 1 to {} letters, digits, '-' or '_'",
                    super::names::MAX_NAME_CHARS
                ),
            ));
        }
        Ok(id.to_owned())
    }

    /// The duration at `key`, or `default` when the key is absent; within `range` either way.
    pub(super) fn duration(
        &self,
        v: Option<&Spanned<Written>>,
        key: &str,
        default: Duration,
        range: Range,
    ) -> Result<Duration, ConfigError> {
        match v {
            None => Ok(default),
            Some(s) => range
                .check(s.get_ref().0)
                .map_err(|m| self.err(s.span(), key, m)),
        }
    }

    /// A systemd credential name (`LoadCredential=<name>:...`): a file name in
    /// `$CREDENTIALS_DIRECTORY`.
    fn credential_name(&self, v: &Spanned<String>) -> Result<String, ConfigError> {
        let name = v.get_ref().trim();
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(self.err(
                v.span(),
                "mqtt.password_credential",
                format!(
                    "{name:?} is not a credential name: use the name in the unit's \
                     LoadCredential=NAME:FILE, e.g. \"mqtt-password\""
                ),
            ));
        }
        Ok(name.to_owned())
    }

    /// `http.listen`: an IP address and port (`127.0.0.1:9877`, `[::1]:9877`, `0.0.0.0:9877`);
    /// host names are not resolved, so what `config check` passes is what `run` binds.
    fn http(&self, listen: &Spanned<String>) -> Result<super::HttpConfig, ConfigError> {
        let text = listen.get_ref().trim();
        // An address whose port is beyond 65535 says so, not that it is no address.
        if let Some((host, port)) = text.rsplit_once(':')
            && host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok()
            && port.parse::<u64>().is_ok_and(|p| p > 65_535)
        {
            return Err(self.err(
                listen.span(),
                "http.listen",
                format!("{text:?}: port {port} is beyond 65535"),
            ));
        }
        let addr: std::net::SocketAddr = text.parse().map_err(|_| {
            self.err(
                listen.span(),
                "http.listen",
                format!(
                    "{text:?} is not an IP address and port: write e.g. \"127.0.0.1:9877\" \
                     (this machine only), \"0.0.0.0:9877\" (every IPv4 interface) or \
                     \"[::1]:9877\" (IPv6 in brackets); host names are not resolved"
                ),
            )
        })?;
        Ok(super::HttpConfig { listen: addr })
    }

    /// An amount of money: finite and 0 or more (a standing charge).
    pub(super) fn price(&self, v: &Spanned<f64>, key: &str) -> Result<f64, ConfigError> {
        let p = *v.get_ref();
        if !p.is_finite() {
            return Err(self.err(v.span(), key, format!("{p} is not a price: give a number")));
        }
        if p < 0.0 {
            return Err(self.err(v.span(), key, format!("{p} must be a price of 0 or more")));
        }
        Ok(p)
    }

    /// A price per kWh: a [`Validator::price`] no higher than `max`
    /// (`tariff.max_price_per_kwh`, as imported and live prices are held to).
    pub(super) fn price_per_kwh(
        &self,
        v: &Spanned<f64>,
        key: &str,
        max: f64,
    ) -> Result<f64, ConfigError> {
        let p = self.price(v, key)?;
        if p > max {
            return Err(self.err(
                v.span(),
                key,
                format!(
                    "{p} per kWh is beyond tariff.max_price_per_kwh ({max}): is it in another \
                     unit (per MWh, cents)? If the price is real, raise max_price_per_kwh"
                ),
            ));
        }
        Ok(p)
    }

    /// Time-of-use periods of one tariff: each a real span, none overlapping another.
    pub(super) fn periods(
        &self,
        periods: &[FilePeriod],
        key: &str,
        max: f64,
    ) -> Result<Vec<PeriodConfig>, ConfigError> {
        let out: Vec<PeriodConfig> = periods
            .iter()
            .map(|per| {
                let time = |s: &Spanned<String>, k: &str| {
                    chrono::NaiveTime::parse_from_str(s.get_ref(), "%H:%M").map_err(|_| {
                        self.err(
                            s.span(),
                            &format!("{key}.{k}"),
                            format!("{:?} is not a time of day: write \"HH:MM\"", s.get_ref()),
                        )
                    })
                };
                let start = time(&per.start, "start")?;
                let end = time(&per.end, "end")?;
                if start == end {
                    return Err(self.err(
                        per.start.span(),
                        key,
                        "a period must not start and end at the same time",
                    ));
                }
                Ok(PeriodConfig {
                    start,
                    end,
                    price_per_kwh: self.price_per_kwh(
                        &per.price_per_kwh,
                        &format!("{key}.price_per_kwh"),
                        max,
                    )?,
                })
            })
            .collect::<Result<_, _>>()?;
        // The tariff's own rule (Tariff::new refuses the same), said here with its line.
        let window = |p: &PeriodConfig| crate::analysis::tariff::Period {
            start: p.start,
            end: p.end,
            price_per_kwh: p.price_per_kwh,
        };
        for (j, b) in out.iter().enumerate() {
            if let Some(a) = out[..j].iter().find(|a| window(a).overlaps(&window(b))) {
                return Err(self.err(
                    periods[j].start.span(),
                    key,
                    format!(
                        "the period {} overlaps {}: a time of day has one price, so periods \
                         must not overlap",
                        window(b).label(),
                        window(a).label()
                    ),
                ));
            }
        }
        Ok(out)
    }

    pub(super) fn validate(&mut self, file: FileConfig) -> Result<Config, ConfigError> {
        let mut config = Config::defaults();

        if let Some(name) = file.host.name {
            config.host.name = self.name(&name, "host.name")?;
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
            RETENTION,
        )?;
        config.storage.detail_retention = self.duration(
            file.storage.detail_retention.as_ref(),
            "storage.detail_retention",
            config.storage.detail_retention,
            RETENTION,
        )?;
        config.storage.flush_interval = self.duration(
            file.storage.flush_interval.as_ref(),
            "storage.flush_interval",
            config.storage.flush_interval,
            FLUSH,
        )?;

        config.cpu.enabled = file.cpu.enabled.unwrap_or(true);
        config.cpu.interval = self.duration(
            file.cpu.interval.as_ref(),
            "cpu.interval",
            config.cpu.interval,
            SAMPLING,
        )?;

        config.meters = self.meters(file.meter)?;

        let mut price_topic_span = None;
        if let Some(t) = file.tariff {
            price_topic_span = t.price_topic.as_ref().map(Spanned::span);
            self.tariff_extras(&t, &mut config.tariff)?;
            let max = super::tariff::configured_price_limit(&t);
            if let Some(c) = t.currency {
                let cur = c.get_ref().trim().to_ascii_uppercase();
                if cur.len() != 3 || !cur.chars().all(|ch| ch.is_ascii_alphabetic()) {
                    return Err(self.err(
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
                config.tariff.price_per_kwh = self.price_per_kwh(p, "tariff.price_per_kwh", max)?;
            }
            if let Some(p) = &t.standing_charge_per_day {
                config.tariff.standing_charge_per_day =
                    self.price(p, "tariff.standing_charge_per_day")?;
            }
            if let Some(tz) = t.timezone {
                let zone = crate::zone::Zone::named(tz.get_ref())
                    .map_err(|e| self.err(tz.span(), "tariff.timezone", e.to_string()))?;
                config.tariff.timezone = Some(zone);
            }
            config.tariff.periods = self.periods(&t.period, "tariff.period", max)?;
            for c in t.change {
                let date =
                    chrono::NaiveDate::parse_from_str(c.effective_from.get_ref(), "%Y-%m-%d")
                        .map_err(|_| {
                            self.err(
                                c.effective_from.span(),
                                "tariff.change.effective_from",
                                format!(
                                    "{:?} is not a date: write \"YYYY-MM-DD\"",
                                    c.effective_from.get_ref()
                                ),
                            )
                        })?;
                if config
                    .tariff
                    .changes
                    .iter()
                    .any(|x| x.effective_from == date)
                {
                    return Err(self.err(
                        c.effective_from.span(),
                        "tariff.change.effective_from",
                        format!(
                            "two [[tariff.change]] take effect on {date}: one date has one \
                             set of prices"
                        ),
                    ));
                }
                config.tariff.changes.push(TariffChangeConfig {
                    effective_from: date,
                    price_per_kwh: self.price_per_kwh(
                        &c.price_per_kwh,
                        "tariff.change.price_per_kwh",
                        max,
                    )?,
                    periods: self.periods(&c.period, "tariff.change.period", max)?,
                });
            }
            config.tariff.changes.sort_by_key(|c| c.effective_from);
        }

        if let Some(m) = file.mqtt {
            let url = m.url.get_ref().trim().to_owned();
            if !(url.starts_with("mqtt://") || url.starts_with("mqtts://")) {
                return Err(self.err(
                    m.url.span(),
                    "mqtt.url",
                    format!("{} must start with mqtt:// or mqtts://", redact_url(&url)),
                ));
            }
            if url
                .split_once("://")
                .is_some_and(|(_, r)| r.split('/').next().unwrap_or_default().contains('@'))
            {
                return Err(self.err(
                    m.url.span(),
                    "mqtt.url",
                    "put the user in mqtt.username and the password in password_file or \
                     password_credential, not in the URL",
                ));
            }
            let password_credential = match &m.password_credential {
                None => None,
                Some(c) => Some(self.credential_name(c)?),
            };
            if let (Some(_), Some(c)) = (&m.password_file, &m.password_credential) {
                return Err(self.err(
                    c.span(),
                    "mqtt.password_credential",
                    "set password_file or password_credential, not both",
                ));
            }
            if m.username.is_none() && (m.password_file.is_some() || password_credential.is_some())
            {
                return Err(self.err(
                    m.url.span(),
                    "mqtt.username",
                    "a password is set but no username: add username = \"...\" to [mqtt]",
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
                        if p.is_empty() || super::names::check_topic(&p, false).is_err() {
                            Err(self.err(
                                s.span(),
                                key,
                                format!(
                                    "must be a non-empty, printable topic of at most {} \
                                     characters without '+' or '#'",
                                    super::names::MAX_TOPIC_CHARS
                                ),
                            ))
                        } else {
                            Ok(p)
                        }
                    }
                }
            };
            config.mqtt = Some(MqttConfig {
                client_id: match &m.client_id {
                    Some(id) => self.name(id, "mqtt.client_id")?,
                    None => format!("wattson-{}", config.host.name),
                },
                url,
                username: m.username,
                password_file: m.password_file,
                password_credential,
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
                    PUBLISH,
                )?,
                keepalive: self.duration(
                    m.keepalive.as_ref(),
                    "mqtt.keepalive",
                    Duration::from_secs(30),
                    KEEPALIVE,
                )?,
            });
        }

        if let Some(h) = file.http {
            config.http = Some(self.http(&h.listen)?);
        }

        let p = file.power;
        config.power.rapl = p.rapl.unwrap_or(true);
        config.power.hwmon = p.hwmon.unwrap_or(true);
        config.power.gpu = p.gpu.unwrap_or(true);
        config.power.ipmi = p.ipmi.unwrap_or(false);
        if let Some(c) = p.ipmi_command {
            config.power.ipmi_command = c;
        }
        if let Some(arg) = p.ipmi_args.iter().find(|a| a.get_ref() == "-P") {
            return Err(self.err(
                arg.span(),
                "power.ipmi_args",
                "pass the BMC password with -f FILE or -E, not -P (arguments are visible to every user in ps)",
            ));
        }
        config.power.ipmi_args = p.ipmi_args.into_iter().map(Spanned::into_inner).collect();
        config.power.interval = self.duration(
            p.interval.as_ref(),
            "power.interval",
            config.power.interval,
            SAMPLING,
        )?;
        config.power.ipmi_interval = self.duration(
            p.ipmi_interval.as_ref(),
            "power.ipmi_interval",
            config.power.ipmi_interval,
            SAMPLING,
        )?;
        let sv = file.services;
        config.services.enabled = sv.enabled.unwrap_or(true);
        config.services.interval = self.duration(
            sv.interval.as_ref(),
            "services.interval",
            config.services.interval,
            SAMPLING,
        )?;
        if let Some(top) = sv.top {
            config.services.top = usize::try_from(*top.get_ref())
                .ok()
                .filter(|t| (1..=100).contains(t))
                .ok_or_else(|| self.err(top.span(), "services.top", "must be from 1 to 100"))?;
        }
        if let Some(d) = sv.docker_root {
            config.services.docker_root = d;
        }
        for u in file.ups {
            let id = self.identifier(&u.id, "ups.id")?;
            let port = match u.port {
                None => 3493,
                Some(p) if *p.get_ref() == 0 => {
                    return Err(self.err(
                        p.span(),
                        "ups.port",
                        "must be a TCP port from 1 to 65535",
                    ));
                }
                Some(p) => p.into_inner(),
            };
            config.ups.push(UpsConfig {
                id,
                host: u.host,
                port,
                name: u.name,
                username: u.username,
                password_file: u.password_file,
                interval: self.duration(
                    u.interval.as_ref(),
                    "ups.interval",
                    Duration::from_secs(5),
                    SAMPLING,
                )?,
            });
        }
        for pl in file.plug {
            let id = self.name(&pl.id, "plug.id")?;
            if config.meters.iter().any(|m| m.id == id) {
                return Err(self.err(
                    pl.id.span(),
                    "plug.id",
                    format!("{id:?} must be non-empty and differ from every meter id"),
                ));
            }
            if config.mqtt.is_none() {
                return Err(self.err(
                    pl.id.span(),
                    "plug",
                    "smart plugs report over MQTT: add an [mqtt] section with the broker they publish to",
                ));
            }
            config.plugs.push(PlugConfig {
                id,
                kind: pl.kind.into_inner().0,
                topic: self.topic(&pl.topic, "plug.topic", true)?,
                bidirectional: pl.bidirectional.unwrap_or(false),
            });
        }

        let mut names = std::collections::BTreeSet::new();
        for c in file.config {
            let name = c.name.get_ref().trim().to_owned();
            super::names::check_label(&name)
                .map_err(|why| self.err(c.name.span(), "config.name", format!("{name:?} {why}")))?;
            if !names.insert(name.clone()) {
                return Err(self.err(
                    c.name.span(),
                    "config.name",
                    format!("{name:?} must be unique"),
                ));
            }
            let mut modes = Vec::new();
            for (mode, watts) in c.modes {
                let w = *watts.get_ref();
                if !w.is_finite() || !(0.0..=100_000.0).contains(&w) {
                    return Err(self.err(
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
                upgrade_cost: c
                    .upgrade_cost
                    .map(|u| self.price(&u, "config.upgrade_cost"))
                    .transpose()?,
            });
        }
        if let (Some(span), None) = (price_topic_span, &config.mqtt) {
            return Err(self.err(
                span,
                "tariff.price_topic",
                "a live price comes over MQTT: add an [mqtt] section with the broker that \
                 publishes it",
            ));
        }
        Ok(config)
    }
}
