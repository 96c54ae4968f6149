//! A wall meter for a measuring command (`wattson sweep`, `wattson idle --measure`): through
//! the running daemon when there is one for the database, else opened directly.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let config = wattson::config::Config::defaults();
//! let mut link = wattson::control::open_meter(&config, None, &config.storage.path)?;
//! println!("meter: {}", link.path.describe());
//! let samples = link.meter.collector().poll(chrono::Utc::now().timestamp_millis())?;
//! # Ok(()) }
//! ```
//!
//! Both paths have given a first reading by the time [`open_meter`] returns, so a meter that
//! is missing, busy or silent fails the command before it starts any work.

use std::path::{Path, PathBuf};
use std::time::Duration;
use wattson_collectors::SourceId;

use wattson_collectors::{Action, CollectError, Collector, Sample};

use super::client::{Client, ControlError, Located, locate};
use crate::config::{Config, MeterConfig};

/// The meter a command reads, and how it reaches it.
pub struct MeterLink {
    pub meter: LinkedMeter,
    pub path: MeterPath,
    /// The meter's configuration (the daemon's interval where it said one).
    pub config: MeterConfig,
}

/// The meter itself: a [`Collector`] either way.
pub enum LinkedMeter {
    Daemon(DaemonMeter),
    Direct(Box<dyn Collector>),
}

impl LinkedMeter {
    pub fn collector(&mut self) -> &mut dyn Collector {
        match self {
            LinkedMeter::Daemon(d) => d,
            LinkedMeter::Direct(c) => &mut **c,
        }
    }

    /// The daemon's connection, on the daemon's path.
    pub fn daemon(&self) -> Option<&Client> {
        match self {
            LinkedMeter::Daemon(d) => Some(d.client()),
            LinkedMeter::Direct(_) => None,
        }
    }
}

/// Which path a command took to the meter.
#[derive(Debug, Clone, PartialEq)]
pub enum MeterPath {
    /// Through the running daemon, which owns the meter.
    Daemon {
        source: SourceId,
        socket: PathBuf,
        pid: u32,
        version: String,
    },
    /// Opened directly: `why` no daemon was used.
    Direct { port: PathBuf, why: String },
}

impl MeterPath {
    /// One line for the command's output.
    pub fn describe(&self) -> String {
        match self {
            MeterPath::Daemon {
                source,
                socket,
                pid,
                version,
            } => format!(
                "{source} through the running daemon (pid {pid}, wattson {version}, control \
                 socket {}), which owns the meter and keeps storing its readings",
                socket.display()
            ),
            MeterPath::Direct { port, why } => {
                format!("{} opened directly ({why})", port.display())
            }
        }
    }
}

/// Why a command could not read the wall meter.
#[derive(Debug, thiserror::Error)]
pub enum MeterLinkError {
    /// `--meter` names no configured meter.
    #[error("no [[meter]] with id {0:?} in the configuration")]
    NoSuchMeter(String),
    /// The configuration has no meter.
    #[error(
        "this needs a wall meter: add a [[meter]] to the configuration (or try `wattson demo`)"
    )]
    NoMeter,
    /// Asking the daemon.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Opening the meter directly.
    #[error(transparent)]
    Sources(#[from] crate::sources::SourcesError),
    /// The meter's serial line made no collector.
    #[error("no meter collector")]
    NoCollector,
    /// The daemon sent no reading of the meter.
    #[error(
        "{meter}: {daemon} sent no reading of it within {within_s} s: the daemon's meter is not \
         answering; `wattson status` and the daemon's log (journalctl -u wattson) say why"
    )]
    DaemonSilent {
        meter: SourceId,
        daemon: String,
        within_s: u64,
    },
    /// The meter's port is missing, busy or refused (the error names the meter).
    #[error("{}", wattson_collectors::ErrorChain(.0))]
    Collect(Box<CollectError>),
    /// Nothing answers on the port.
    #[error(
        "meter {id}: the {protocol} meter on {port} does not answer ({tries} requests, no reply \
         within {timeout_ms} ms each): check that it is powered and wired (RS-485 A/B, or TX/RX \
         crossed), and the protocol, baud and address in its [[meter]] section; `wattson meter \
         probe {port}` tries every supported meter"
    )]
    Silent {
        id: String,
        protocol: String,
        port: String,
        tries: usize,
        timeout_ms: u64,
    },
    /// Something answers, but not as the configured meter.
    #[error(
        "meter {id}: something answers on {port}, but not as a {protocol} meter ({}): check the \
         protocol, baud and parity in its [[meter]] section; `wattson meter probe {port}` tries \
         every supported meter",
        wattson_collectors::ErrorChain(frame.as_ref())
    )]
    NotThisMeter {
        id: String,
        protocol: String,
        port: String,
        frame: Box<CollectError>,
    },
    /// The port opened, but no poll gave a reading.
    #[error(
        "meter {id}: {port} opened, but {tries} polls gave no reading; `wattson meter probe \
         {port}` tries every supported meter"
    )]
    NoReading {
        id: String,
        port: String,
        tries: usize,
    },
}

/// The wall meter `id` (default: the first `[[meter]]`) for a command on the database `db`:
/// through the daemon of `db` when one runs, else opened directly; either way with a first
/// reading taken.
pub fn open_meter(
    config: &Config,
    id: Option<&str>,
    db: &Path,
) -> Result<MeterLink, MeterLinkError> {
    let meter = match id {
        Some(id) => config
            .meters
            .iter()
            .find(|m| m.id == id)
            .ok_or_else(|| MeterLinkError::NoSuchMeter(id.to_owned()))?,
        None => config.meters.first().ok_or(MeterLinkError::NoMeter)?,
    };
    let source = SourceId::meter(&meter.id);
    match locate(db)? {
        Located::Daemon(client) => {
            let interval = client.subscribe(&source)?.unwrap_or(meter.interval);
            let path = MeterPath::Daemon {
                source: source.clone(),
                socket: client.socket().to_owned(),
                pid: client.hello().pid,
                version: client.hello().version.clone(),
            };
            let mut daemon = DaemonMeter {
                client,
                name: source,
                interval,
            };
            daemon.first_reading()?;
            let mut config = meter.clone();
            config.interval = interval;
            Ok(MeterLink {
                meter: LinkedMeter::Daemon(daemon),
                path,
                config,
            })
        }
        Located::NoDaemon { why } => {
            let mut meters = crate::sources::meters::build_collectors(std::slice::from_ref(meter))?;
            let (mut collector, _) = meters.pop().ok_or(MeterLinkError::NoCollector)?;
            first_direct_reading(&mut collector, meter)?;
            Ok(MeterLink {
                meter: LinkedMeter::Direct(Box::new(collector)),
                path: MeterPath::Direct {
                    port: meter.port.clone(),
                    why,
                },
                config: meter.clone(),
            })
        }
    }
}

/// A meter read through the daemon: each poll is the oldest reading not yet taken that is
/// at most one and a half intervals old, waiting for the next one when none is (so a caller
/// polling once an interval takes each reading once, and never one from before a pause).
pub struct DaemonMeter {
    client: Client,
    name: SourceId,
    interval: Duration,
}

impl DaemonMeter {
    /// The connection, for what else the command asks the daemon (storing a sweep).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The source's interval, as the daemon polls it.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    fn wait(&self) -> Duration {
        self.interval * 2 + Duration::from_secs(2)
    }

    fn first_reading(&mut self) -> Result<(), MeterLinkError> {
        let within = self.interval * 3 + Duration::from_secs(5);
        let from = chrono::Utc::now().timestamp_millis() - self.interval.as_millis() as i64;
        match self.client.next_reading(from, within) {
            Ok(_) => Ok(()),
            Err(ControlError::Timeout { .. }) => Err(MeterLinkError::DaemonSilent {
                meter: self.name.clone(),
                daemon: self.client.describe(),
                within_s: within.as_secs(),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

impl Collector for DaemonMeter {
    fn source(&self) -> &SourceId {
        &self.name
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let from = now_ms - (self.interval.as_millis() as i64) * 3 / 2;
        let within = self.wait();
        match self.client.next_reading(from, within) {
            Ok(r) => Ok(r.into_samples()),
            Err(ControlError::Timeout { .. }) => Err(CollectError::Timeout {
                source_name: format!("{} (through {})", self.name, self.client.describe()),
                timeout_ms: within.as_millis() as u64,
            }),
            Err(e @ ControlError::Closed { .. }) => Err(CollectError::Gone {
                source_name: self.name.to_string(),
                detail: e.to_string(),
            }),
            Err(e) => Err(CollectError::Failed {
                source_name: self.name.to_string(),
                detail: e.to_string(),
            }),
        }
    }
}

/// Polls a directly opened meter until it gives a reading, so that a port that does not
/// exist, is held by another program or stays silent fails at once, with a message that says
/// which and what to do.
pub fn first_direct_reading(
    meter: &mut dyn Collector,
    m: &MeterConfig,
) -> Result<(), MeterLinkError> {
    const TRIES: usize = 3;
    let port = m.port.display();
    let mut last = None;
    for _ in 0..TRIES {
        let now = chrono::Utc::now().timestamp_millis();
        match meter.poll(now) {
            Ok(samples) if !samples.is_empty() => return Ok(()),
            Ok(_) => {}
            // Missing or busy port, or a permission problem: trying again will not help.
            // (The error names the meter already: `meter:<id>: ...`.)
            Err(e) if e.action() != Action::Retry => {
                return Err(MeterLinkError::Collect(Box::new(e)));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(CollectError::Timeout { timeout_ms, .. }) => MeterLinkError::Silent {
            id: m.id.clone(),
            protocol: m.protocol.to_string(),
            port: port.to_string(),
            tries: TRIES,
            timeout_ms,
        },
        Some(e @ CollectError::BadFrame { .. }) => MeterLinkError::NotThisMeter {
            id: m.id.clone(),
            protocol: m.protocol.to_string(),
            port: port.to_string(),
            frame: Box::new(e),
        },
        Some(e) => MeterLinkError::Collect(Box::new(e)),
        None => MeterLinkError::NoReading {
            id: m.id.clone(),
            port: port.to_string(),
            tries: TRIES,
        },
    })
}
