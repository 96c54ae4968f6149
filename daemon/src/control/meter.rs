//! A wall meter for a measuring command (`wattson sweep`, `wattson idle --measure`): through
//! the running daemon when there is one for the database, else opened directly.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
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

use anyhow::Context as _;
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

/// The wall meter `id` (default: the first `[[meter]]`) for a command on the database `db`:
/// through the daemon of `db` when one runs, else opened directly; either way with a first
/// reading taken.
pub fn open_meter(config: &Config, id: Option<&str>, db: &Path) -> anyhow::Result<MeterLink> {
    let meter = match id {
        Some(id) => config
            .meters
            .iter()
            .find(|m| m.id == id)
            .with_context(|| format!("no [[meter]] with id {id:?} in the configuration"))?,
        None => config.meters.first().context(
            "this needs a wall meter: add a [[meter]] to the configuration (or try `wattson demo`)",
        )?,
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
            let (mut collector, _) = meters.pop().context("no meter collector")?;
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

    fn first_reading(&mut self) -> anyhow::Result<()> {
        let within = self.interval * 3 + Duration::from_secs(5);
        let from = chrono::Utc::now().timestamp_millis() - self.interval.as_millis() as i64;
        match self.client.next_reading(from, within) {
            Ok(_) => Ok(()),
            Err(ControlError::Timeout { .. }) => anyhow::bail!(
                "{}: {} sent no reading of it within {} s: the daemon's meter is not answering; \
                 `wattson status` and the daemon's log (journalctl -u wattson) say why",
                self.name,
                self.client.describe(),
                within.as_secs()
            ),
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
pub fn first_direct_reading(meter: &mut dyn Collector, m: &MeterConfig) -> anyhow::Result<()> {
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
                anyhow::bail!("{}", wattson_collectors::ErrorChain(&e))
            }
            Err(e) => last = Some(e),
        }
    }
    let probe = format!("`wattson meter probe {port}` tries every supported meter");
    match last {
        Some(CollectError::Timeout { timeout_ms, .. }) => anyhow::bail!(
            "meter {}: the {} meter on {port} does not answer ({TRIES} requests, no reply within \
             {timeout_ms} ms each): check that it is powered and wired (RS-485 A/B, or TX/RX \
             crossed), and the protocol, baud and address in its [[meter]] section; {probe}",
            m.id,
            m.protocol
        ),
        Some(e @ CollectError::BadFrame { .. }) => anyhow::bail!(
            "meter {}: something answers on {port}, but not as a {} meter ({}): check the \
             protocol, baud and parity in its [[meter]] section; {probe}",
            m.id,
            m.protocol,
            wattson_collectors::ErrorChain(&e)
        ),
        Some(e) => anyhow::bail!("{}", wattson_collectors::ErrorChain(&e)),
        None => anyhow::bail!(
            "meter {}: {port} opened, but {TRIES} polls gave no reading; {probe}",
            m.id
        ),
    }
}
