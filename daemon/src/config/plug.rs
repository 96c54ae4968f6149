//! `[[plug]]`: smart plugs reporting over MQTT, used as wall meters, and how each one's
//! readings stand between its reports (`readings`, `max_hold`): the one rule the store's
//! integral, the live means, the fleet and the coverage apply to its power
//! ([`crate::store::integrate::Readings`]).
//!
//! Defaults follow how each firmware reports: Tasmota publishes `tele/<topic>/SENSOR` every
//! TelePeriod (300 s by default), an instantaneous reading, so its readings are `sampled`
//! (linear between two reports); Shelly Gen2+ publishes `status/switch:0` when a value
//! changes and at least every minute (its energy counter's minute), so each reading stands
//! until the next (`hold`), for at most 2 minutes. A Tasmota with `PowerDelta` set reports
//! on change too: `readings = "hold"`, and `max_hold` defaults to twice its default
//! TelePeriod (10 minutes), which it still reports at.

use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::duration::{Range, Written};
use super::file::Named;
use super::validate::Validator;
use super::{Config, ConfigError, duration};
use crate::store::integrate::Readings;

/// `plug.max_hold`: 1 s to a day.
pub const MAX_HOLD: Range = Range::new(Duration::from_secs(1), Duration::from_secs(86_400));

/// Which firmware a smart plug runs (`kind = "tasmota"` or `"shelly"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlugKind {
    /// Tasmota: `tele/<topic>/SENSOR`.
    Tasmota,
    /// Shelly Gen2+: `<topic>/status/switch:0`.
    Shelly,
}

impl FromStr for PlugKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tasmota" => Ok(PlugKind::Tasmota),
            "shelly" => Ok(PlugKind::Shelly),
            other => Err(format!(
                "{other:?} is not a plug kind: use \"tasmota\" or \"shelly\""
            )),
        }
    }
}

impl PlugKind {
    /// How the firmware's readings stand by default (see the module documentation).
    pub fn default_readings(self) -> PlugReadings {
        match self {
            PlugKind::Tasmota => PlugReadings::Sampled,
            PlugKind::Shelly => PlugReadings::Hold,
        }
    }

    /// How long a held reading stands at most by default: twice the firmware's longest
    /// wait between two reports (Tasmota's default TelePeriod, Shelly's minute).
    pub fn default_max_hold(self) -> Duration {
        match self {
            PlugKind::Tasmota => Duration::from_secs(600),
            PlugKind::Shelly => Duration::from_secs(120),
        }
    }
}

/// How a plug's readings stand between its reports (`readings = "hold"` or `"sampled"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlugReadings {
    /// Each reading stands until the next, at most `max_hold` (a plug reporting on change).
    Hold,
    /// Readings are samples of a power that changes in between: linear between two.
    Sampled,
}

impl FromStr for PlugReadings {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hold" => Ok(PlugReadings::Hold),
            "sampled" => Ok(PlugReadings::Sampled),
            other => Err(format!(
                "{other:?} is not how readings stand: use \"hold\" (each reading stands until \
                 the next, at most max_hold: a plug reporting on change) or \"sampled\" \
                 (linear between two reports: a plug reporting on a fixed period)"
            )),
        }
    }
}

/// A smart plug reporting over MQTT, used as a wall meter (`[[plug]]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlugConfig {
    pub id: String,
    pub kind: PlugKind,
    pub topic: String,
    /// Negative power is export (solar), kept apart from consumption; otherwise refused.
    pub bidirectional: bool,
    /// How its readings stand between reports (default per `kind`).
    pub readings: PlugReadings,
    /// How long a held reading stands at most: a longer silence is a gap. Written for
    /// `sampled` plugs too (it applies when `readings` becomes `hold`).
    #[serde(serialize_with = "duration::serialize")]
    pub max_hold: Duration,
}

impl PlugConfig {
    /// The rule its power series is stored with: its readings and, for `hold`, its
    /// `max_hold` in ms.
    pub fn store_readings(&self) -> (Readings, Option<i64>) {
        match self.readings {
            PlugReadings::Hold => (Readings::Hold, Some(self.max_hold.as_millis() as i64)),
            PlugReadings::Sampled => (Readings::Sampled, None),
        }
    }

    /// `max_hold` in ms where its readings are held.
    pub fn held_ms(&self) -> Option<i64> {
        self.store_readings().1
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePlug {
    pub(super) id: Spanned<String>,
    pub(super) kind: Spanned<Named<PlugKind>>,
    pub(super) topic: Spanned<String>,
    pub(super) bidirectional: Option<bool>,
    pub(super) readings: Option<Spanned<Named<PlugReadings>>>,
    pub(super) max_hold: Option<Spanned<Written>>,
}

impl Validator<'_> {
    /// One `[[plug]]`: its id differs from every meter's in `config`, whose `[mqtt]` it needs.
    pub(super) fn plug(&self, pl: FilePlug, config: &Config) -> Result<PlugConfig, ConfigError> {
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
        let kind = pl.kind.into_inner().0;
        let readings = pl
            .readings
            .map_or_else(|| kind.default_readings(), |r| r.into_inner().0);
        Ok(PlugConfig {
            id,
            kind,
            topic: self.topic(&pl.topic, "plug.topic", true)?,
            bidirectional: pl.bidirectional.unwrap_or(false),
            readings,
            max_hold: self.duration(
                pl.max_hold.as_ref(),
                "plug.max_hold",
                kind.default_max_hold(),
                MAX_HOLD,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(plug: &str) -> Result<Config, ConfigError> {
        let text =
            format!("[mqtt]\nurl = \"mqtt://127.0.0.1:1883\"\n\n[[plug]]\nid = \"desk\"\n{plug}");
        Config::from_toml(&text, Path::new("test.toml"))
    }

    #[test]
    fn each_firmware_has_its_default_and_hold_can_be_asked_for() {
        let t = parse("kind = \"tasmota\"\ntopic = \"t\"\n").unwrap();
        assert_eq!(t.plugs[0].readings, PlugReadings::Sampled);
        assert_eq!(t.plugs[0].store_readings(), (Readings::Sampled, None));
        let s = parse("kind = \"shelly\"\ntopic = \"s\"\n").unwrap();
        assert_eq!(s.plugs[0].readings, PlugReadings::Hold);
        assert_eq!(s.plugs[0].held_ms(), Some(120_000));
        let h = parse("kind = \"tasmota\"\ntopic = \"t\"\nreadings = \"hold\"\n").unwrap();
        assert_eq!(h.plugs[0].held_ms(), Some(600_000));
        let m =
            parse("kind = \"tasmota\"\ntopic = \"t\"\nreadings = \"HOLD\"\nmax_hold = \"90s\"\n")
                .unwrap();
        assert_eq!(m.plugs[0].store_readings(), (Readings::Hold, Some(90_000)));
        // `config check` prints both, and what it prints reads back the same.
        let text = m.to_effective_toml().unwrap();
        assert!(text.contains("readings = \"hold\""), "{text}");
        assert!(
            text.contains("max_hold = \"1m30s\"") || text.contains("max_hold = \"90s\""),
            "{text}"
        );
        let again = Config::from_toml(&text, Path::new("effective.toml")).unwrap();
        assert_eq!(again.plugs, m.plugs);
    }

    #[test]
    fn a_bad_readings_or_max_hold_is_refused_with_its_key_and_line() {
        let err = parse("kind = \"shelly\"\ntopic = \"s\"\nreadings = \"held\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("test.toml:8:"), "{err}");
        assert!(
            err.contains("\"hold\"") && err.contains("\"sampled\""),
            "{err}"
        );
        let err = parse("kind = \"shelly\"\ntopic = \"s\"\nmax_hold = \"2d\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("plug.max_hold"), "{err}");
    }
}
