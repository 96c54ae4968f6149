//! The control socket's messages (protocol version [`PROTOCOL`]), one JSON object per line;
//! see the [module documentation](super) for the exchange. Times are UTC milliseconds,
//! power in W.

use std::path::{Path, PathBuf};
use std::time::Duration;
use wattson_collectors::SourceId;

use serde::{Deserialize, Serialize};
use wattson_collectors::{DeviceCounters, Metric, Sample};

use crate::sweep::outcome::LevelResult;

pub use crate::live::LiveReading;
pub use crate::live::feed::CLIENT_QUEUE;
pub use crate::sweep::record::{Stored, SweepSettings};

/// The protocol this wattson speaks. Any change to a message bumps it.
pub const PROTOCOL: u32 = 1;

/// The longest line either side accepts, bytes (newline excluded). A sweep of every level
/// of three kinds on a 256-CPU machine is about half of it.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Connections served at once.
pub const MAX_CLIENTS: usize = 8;

/// How long the daemon waits for a client to take one line before it drops the client.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a new connection may stay silent before its first request.
pub const FIRST_REQUEST_WITHIN: Duration = Duration::from_secs(10);

/// The control socket of the database at `db`: `<db>.sock`, beside its `<db>.lock`.
pub fn socket_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".sock");
    PathBuf::from(name)
}

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The daemon's state and its latest readings. (A struct variant, so that unknown
    /// keys are refused here too.)
    Status {},
    /// Every reading of `source` (e.g. `meter:wall`) from now on.
    Subscribe { source: SourceId },
    /// Store a finished (or interrupted) sweep measured on this connection's readings.
    StoreSweep(Box<SweepRecord>),
}

/// What the daemon sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    Hello(Hello),
    Reading(Reading),
    Status(Box<DaemonStatus>),
    Subscribed {
        source: SourceId,
        /// The source's polling interval, when the daemon knows it.
        interval_ms: Option<u64>,
    },
    Stored(Box<Stored>),
    Error {
        message: String,
    },
}

/// The first line on every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// The daemon's wattson version.
    pub version: String,
    pub pid: u32,
    /// The database the daemon writes.
    pub database: PathBuf,
    pub host: String,
}

/// One poll of one source: its samples at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub source: SourceId,
    pub ts_ms: i64,
    pub values: Vec<Value>,
}

/// One value of a [`Reading`]; the unit follows from the metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Value {
    pub metric: Metric,
    pub channel: String,
    pub value: f64,
}

impl Reading {
    /// The samples of `source` in one sampling pass, grouped by instant.
    pub fn from_pass(source: &SourceId, pass: &[Sample]) -> Vec<Reading> {
        let mut out: Vec<Reading> = Vec::new();
        for s in pass.iter().filter(|s| s.source == *source) {
            let value = Value {
                metric: s.metric,
                channel: s.channel.clone(),
                value: s.value,
            };
            match out.iter_mut().find(|r| r.ts_ms == s.ts_ms) {
                Some(r) => r.values.push(value),
                None => out.push(Reading {
                    source: source.to_owned(),
                    ts_ms: s.ts_ms,
                    values: vec![value],
                }),
            }
        }
        out
    }

    /// As the samples a collector returns.
    pub fn into_samples(self) -> Vec<Sample> {
        let (source, ts) = (self.source, self.ts_ms);
        self.values
            .into_iter()
            .map(|v| Sample::new(ts, source.clone(), v.metric, v.channel, v.value))
            .collect()
    }

    /// The source's whole-device power, W.
    pub fn power_w(&self) -> Option<f64> {
        self.values
            .iter()
            .find(|v| v.metric == Metric::Power && v.channel.is_empty())
            .map(|v| v.value)
    }
}

/// The daemon as `wattson status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub version: String,
    pub pid: u32,
    /// When the daemon started, UTC ms.
    pub since_ms: i64,
    pub database: PathBuf,
    pub host: String,
    /// The sources it collects.
    pub sources: Vec<SourceId>,
    /// The latest reading of every series (per-core detail left out).
    pub readings: Vec<LiveReading>,
    /// Each meter's frame counters since the daemon started.
    pub meters: Vec<DeviceCounters>,
    /// The writer's health.
    pub store: crate::store::StoreHealth,
    /// Connections open on the control socket, this one included.
    pub clients: usize,
    /// Where the daemon serves `[http]` (`http://127.0.0.1:9877`), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// Where its `estimate:wall` readings come from (the calibration it took, with its
    /// interval), when it estimates the wall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_basis: Option<String>,
}

/// A sweep for the daemon to store: what `wattson sweep` measured on this connection's
/// readings. The daemon adds the host's fingerprint, fits the levels itself, and stores the
/// calibrations and (with `regression_check`) the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepRecord {
    /// The configuration's name.
    pub name: String,
    /// The source the levels were measured on (this connection's subscription).
    pub source: SourceId,
    pub settings: SweepSettings,
    /// Physical cores of the machine (levels beyond them run on SMT siblings).
    pub physical_cores: usize,
    pub regression_check: bool,
    pub levels: Vec<LevelResult>,
    /// Every level ran (false: interrupted, a partial run).
    pub complete: bool,
    pub started_ms: i64,
    pub ended_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_back_and_unknown_ones_are_refused() {
        for r in [
            Request::Status {},
            Request::Subscribe {
                source: SourceId::meter("wall"),
            },
        ] {
            let line = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), r);
        }
        assert_eq!(
            serde_json::to_string(&Request::Status {}).unwrap(),
            r#"{"op":"status"}"#
        );
        for bad in [
            r#"{"op":"set_interval","ms":1}"#,
            r#"{"op":"subscribe","source":"meter:wall","interval":"1ms"}"#,
            r#"{"op":"status","extra":1}"#,
            "{}",
        ] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
    }

    use wattson_collectors::source::channel;

    #[test]
    fn readings_group_a_pass_by_instant_and_keep_only_their_source() {
        let pass = [
            Sample::new(1000, SourceId::meter("wall"), Metric::Power, "", 41.5),
            Sample::new(1000, SourceId::Cpu, Metric::CpuBusy, channel::ALL, 0.1),
            Sample::new(1000, SourceId::meter("wall"), Metric::Voltage, "", 230.0),
        ];
        let readings = Reading::from_pass(&SourceId::meter("wall"), &pass);
        assert_eq!(readings.len(), 1);
        assert_eq!(readings[0].power_w(), Some(41.5));
        let samples = readings[0].clone().into_samples();
        assert_eq!(samples, vec![pass[0].clone(), pass[2].clone()]);
        let line = serde_json::to_string(&Message::Reading(readings[0].clone())).unwrap();
        assert!(
            line.starts_with(r#"{"type":"reading","source":"meter:wall""#),
            "{line}"
        );
    }

    #[test]
    fn the_socket_sits_beside_the_database() {
        assert_eq!(
            socket_path(Path::new("/var/lib/wattson/wattson.db")),
            Path::new("/var/lib/wattson/wattson.db.sock")
        );
    }
}
