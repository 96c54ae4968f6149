//! Validation: the file as written ([`super::file`]) into the typed [`Config`], once, with
//! every error naming the file, the key and the line. Every command loads its config
//! through here, so what `config check` passes, `run` runs. Meters are in [`super::meter`],
//! `[tariff]` in [`super::tariff_section`] and `[mqtt]` in [`super::mqtt`].
//!
//! Every duration has a range (below), so none can overflow an `Instant`, wrap when turned
//! into milliseconds, or make a collector spin.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::duration::{Range, Written};
use super::file::{
    FileConfig, FileCpu, FileHost, FileManual, FilePower, FileServices, FileStorage, FileUps,
    FileWakeups,
};
use super::{
    Config, ConfigError, CpuConfig, HostConfig, ManualConfig, PowerConfig, ServicesConfig,
    StorageConfig, UpsConfig, WakeupsConfig, line_of,
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
                .map_err(|m| self.err(s.span(), key, m.to_string())),
        }
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

    pub(super) fn validate(&mut self, file: FileConfig) -> Result<Config, ConfigError> {
        let mut config = Config::defaults();
        self.host(file.host, &mut config.host)?;
        self.storage(file.storage, &mut config.storage)?;
        self.cpu(&file.cpu, &mut config.cpu)?;
        config.meters = self.meters(file.meter)?;
        let mut price_topic_span = None;
        if let Some(t) = file.tariff {
            price_topic_span = t.price_topic.as_ref().map(Spanned::span);
            self.tariff(t, &mut config.tariff)?;
        }
        if let Some(m) = file.mqtt {
            config.mqtt = Some(self.mqtt(m, &config.host.name)?);
        }
        if let Some(h) = file.http {
            config.http = Some(self.http(&h.listen)?);
        }
        if let Some(p) = file.prometheus {
            config.prometheus = Some(self.prometheus(p)?);
        }
        self.power(file.power, &mut config.power)?;
        self.services(file.services, &mut config.services)?;
        self.wakeups(file.wakeups, &mut config.wakeups)?;
        for u in file.ups {
            let ups = self.ups(u, &config.ups)?;
            config.ups.push(ups);
        }
        for pl in file.plug {
            let plug = self.plug(pl, &config)?;
            config.plugs.push(plug);
        }
        config.manual = self.manual(file.config)?;
        config.disks = self.disks(file.disk)?;
        config.sleep = self.sleep(file.sleep, &config.manual)?;
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

    /// `[host]` over the defaults in `out`.
    fn host(&self, h: FileHost, out: &mut HostConfig) -> Result<(), ConfigError> {
        if let Some(name) = h.name {
            out.name = self.name(&name, "host.name")?;
        }
        if let Some(p) = h.sysfs {
            out.sysfs = p;
        }
        if let Some(p) = h.procfs {
            out.procfs = p;
        }
        if let Some(p) = h.devfs {
            out.devfs = p;
        }
        Ok(())
    }

    /// `[storage]` over the defaults in `out`.
    fn storage(&self, s: FileStorage, out: &mut StorageConfig) -> Result<(), ConfigError> {
        if let Some(p) = s.path {
            out.path = p;
        }
        out.raw_retention = self.duration(
            s.raw_retention.as_ref(),
            "storage.raw_retention",
            out.raw_retention,
            RETENTION,
        )?;
        out.detail_retention = self.duration(
            s.detail_retention.as_ref(),
            "storage.detail_retention",
            out.detail_retention,
            RETENTION,
        )?;
        out.flush_interval = self.duration(
            s.flush_interval.as_ref(),
            "storage.flush_interval",
            out.flush_interval,
            FLUSH,
        )?;
        Ok(())
    }

    /// `[cpu]` over the defaults in `out`.
    fn cpu(&self, c: &FileCpu, out: &mut CpuConfig) -> Result<(), ConfigError> {
        out.enabled = c.enabled.unwrap_or(true);
        out.interval =
            self.duration(c.interval.as_ref(), "cpu.interval", out.interval, SAMPLING)?;
        Ok(())
    }

    /// `[power]` over the defaults in `out`: which sources, the IPMI command and the intervals.
    fn power(&self, p: FilePower, out: &mut PowerConfig) -> Result<(), ConfigError> {
        out.rapl = p.rapl.unwrap_or(true);
        out.hwmon = p.hwmon.unwrap_or(true);
        out.gpu = p.gpu.unwrap_or(true);
        out.ipmi = p.ipmi.unwrap_or(false);
        if let Some(c) = p.ipmi_command {
            out.ipmi_command = c;
        }
        if let Some(arg) = p.ipmi_args.iter().find(|a| a.get_ref() == "-P") {
            return Err(self.err(
                arg.span(),
                "power.ipmi_args",
                "pass the BMC password with -f FILE or -E, not -P (arguments are visible to every user in ps)",
            ));
        }
        out.ipmi_args = p.ipmi_args.into_iter().map(Spanned::into_inner).collect();
        out.interval = self.duration(
            p.interval.as_ref(),
            "power.interval",
            out.interval,
            SAMPLING,
        )?;
        out.ipmi_interval = self.duration(
            p.ipmi_interval.as_ref(),
            "power.ipmi_interval",
            out.ipmi_interval,
            SAMPLING,
        )?;
        Ok(())
    }

    /// `[services]` over the defaults in `out`.
    fn services(&self, sv: FileServices, out: &mut ServicesConfig) -> Result<(), ConfigError> {
        out.enabled = sv.enabled.unwrap_or(true);
        out.interval = self.duration(
            sv.interval.as_ref(),
            "services.interval",
            out.interval,
            SAMPLING,
        )?;
        if let Some(top) = sv.top {
            out.top = usize::try_from(*top.get_ref())
                .ok()
                .filter(|t| (1..=100).contains(t))
                .ok_or_else(|| self.err(top.span(), "services.top", "must be from 1 to 100"))?;
        }
        if let Some(d) = sv.docker_root {
            out.docker_root = d;
        }
        Ok(())
    }

    /// `[wakeups]` over the defaults in `out`.
    fn wakeups(&self, w: FileWakeups, out: &mut WakeupsConfig) -> Result<(), ConfigError> {
        out.enabled = w.enabled.unwrap_or(true);
        out.interval = self.duration(
            w.interval.as_ref(),
            "wakeups.interval",
            out.interval,
            SAMPLING,
        )?;
        if let Some(top) = w.top {
            out.top = usize::try_from(*top.get_ref())
                .ok()
                .filter(|t| (1..=100).contains(t))
                .ok_or_else(|| self.err(top.span(), "wakeups.top", "must be from 1 to 100"))?;
        }
        Ok(())
    }

    /// One `[[ups]]`.
    /// One `[[ups]]`: its id and its upsd name differ from every earlier one's (`before`):
    /// a UPS's readings are stored by its name (`ups:NAME`), so two of one name would be one
    /// series.
    fn ups(&self, u: FileUps, before: &[UpsConfig]) -> Result<UpsConfig, ConfigError> {
        let id = self.identifier(&u.id, "ups.id")?;
        if let Some(other) = before.iter().find(|o| o.id == id) {
            return Err(self.err(
                u.id.span(),
                "ups.id",
                format!(
                    "{id:?} is already the id of another [[ups]] (upsd name {:?})",
                    other.name
                ),
            ));
        }
        if let Some(other) = before.iter().find(|o| o.name == *u.name.get_ref()) {
            return Err(self.err(
                u.name.span(),
                "ups.name",
                format!(
                    "{:?} is also [[ups]] {}'s upsd name: a UPS's readings are stored by that                      name (ups:{}), so two of one name would be one series; rename one in its                      upsd's ups.conf",
                    u.name.get_ref(),
                    other.id,
                    u.name.get_ref()
                ),
            ));
        }
        let port = match u.port {
            None => 3493,
            Some(p) if *p.get_ref() == 0 => {
                return Err(self.err(p.span(), "ups.port", "must be a TCP port from 1 to 65535"));
            }
            Some(p) => p.into_inner(),
        };
        Ok(UpsConfig {
            id,
            host: u.host,
            port,
            name: u.name.into_inner(),
            username: u.username,
            password_file: u.password_file,
            interval: self.duration(
                u.interval.as_ref(),
                "ups.interval",
                Duration::from_secs(5),
                SAMPLING,
            )?,
        })
    }

    /// The `[[config]]` tables (manually described configurations), each name unique.
    fn manual(&self, file: Vec<FileManual>) -> Result<Vec<ManualConfig>, ConfigError> {
        let mut names = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for c in file {
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
            let modes = self.modes(c.modes)?;
            let schedule = c
                .schedule
                .map(|text| self.schedule(&text, &modes))
                .transpose()?;
            out.push(ManualConfig {
                name,
                description: c.description,
                modes,
                schedule,
                upgrade_cost: c
                    .upgrade_cost
                    .map(|u| self.price(&u, "config.upgrade_cost"))
                    .transpose()?,
            });
        }
        Ok(out)
    }

    /// `config.schedule`: a week's schedule of the configuration's own `modes`.
    fn schedule(
        &self,
        text: &Spanned<String>,
        modes: &[(String, f64)],
    ) -> Result<crate::analysis::schedule::Schedule, ConfigError> {
        let schedule: crate::analysis::schedule::Schedule =
            text.get_ref()
                .parse()
                .map_err(|e: crate::analysis::schedule::ScheduleError| {
                    self.err(text.span(), "config.schedule", e.to_string())
                })?;
        if let Some(m) = schedule
            .modes()
            .iter()
            .find(|m| !modes.iter().any(|(name, _)| name == *m))
        {
            let known: Vec<&str> = modes.iter().map(|(name, _)| name.as_str()).collect();
            return Err(self.err(
                text.span(),
                "config.schedule",
                format!(
                    "it names mode {m:?}, which this configuration's modes do not give \
                     (they are: {}); add `{m} = W` to its modes",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
        Ok(schedule)
    }

    /// `config.modes`: a plausible power in watts per mode, in the modes' order.
    fn modes(
        &self,
        written: BTreeMap<String, Spanned<f64>>,
    ) -> Result<Vec<(String, f64)>, ConfigError> {
        let mut modes = Vec::new();
        for (mode, watts) in written {
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
        Ok(modes)
    }
}
