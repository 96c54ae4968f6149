//! Hardware readers for wattson: serial power meters, CPU telemetry and other power sources.
//!
//! Everything here is synchronous and runtime-agnostic. A [`Collector`] is polled by the
//! daemon on a thread of its choosing; it returns [`Sample`]s in typed units, or a
//! [`CollectError`] whose [`CollectError::action`] says what the caller should do next.
//! Every sysfs/procfs reader takes its root as a [`SysRoot`] value, never a hard-coded path.

pub mod cgroup;
pub mod counter;
pub mod cpu;
pub mod idle;
pub mod kernel_clock;
pub mod meter;
pub mod plausibility;
pub mod power;
pub mod sample;
pub mod source;
pub mod sysroot;

pub use sample::{Metric, Sample, Unit};
pub use source::SourceId;

/// Displays an error and each of its sources once: `outer: inner: root cause`, as anyhow's
/// `{:#}` does. Error types here carry their cause as `#[source]` without interpolating it
/// in their message, so a plain `{e}` names the thing and `ErrorChain(&e)` adds why.
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}
pub use sysroot::SysRoot;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The current wall-clock time, UTC ms (0 before 1970): what samples carry.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A monotonic clock: time since an arbitrary fixed point. Collectors that turn counter
/// deltas into rates take one, so tests can step time by hand.
pub type MonotonicClock = Box<dyn FnMut() -> std::time::Duration + Send>;

/// A [`MonotonicClock`] backed by [`std::time::Instant`].
pub fn monotonic_clock() -> MonotonicClock {
    let start = std::time::Instant::now();
    Box::new(move || start.elapsed())
}

/// What the caller should do after a failed poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A transient fault (timeout, corrupt frame): poll again at the next tick.
    Retry,
    /// The device is gone (port closed, USB unplugged): close it and reopen with backoff.
    Reopen,
    /// The source cannot work on this machine (missing interface, permission): stop polling it.
    Stop,
}

/// Why a poll failed. Each variant names the thing that failed.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("reading {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path}: {detail}")]
    Parse { path: PathBuf, detail: String },
    #[error("{source_name}: no answer within {timeout_ms} ms")]
    Timeout {
        source_name: String,
        timeout_ms: u64,
    },
    #[error("{source_name}: bad frame: {detail}")]
    BadFrame { source_name: String, detail: String },
    /// The device is not there (never was, unplugged, or held by another program); `detail`
    /// says which, and what to do.
    #[error("{source_name}: {detail}")]
    Gone { source_name: String, detail: String },
    /// The device answered, with an error of its own (an NVML return code, a UPS `ERR`).
    #[error("{source_name}: {detail}")]
    Failed { source_name: String, detail: String },
    #[error("{source_name}: unavailable: {detail}")]
    Unavailable { source_name: String, detail: String },
}

impl CollectError {
    /// What the caller should do about this error.
    pub fn action(&self) -> Action {
        match self {
            CollectError::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => Action::Stop,
                _ => Action::Retry,
            },
            CollectError::Parse { .. }
            | CollectError::Timeout { .. }
            | CollectError::BadFrame { .. }
            | CollectError::Failed { .. } => Action::Retry,
            CollectError::Gone { .. } => Action::Reopen,
            CollectError::Unavailable { .. } => Action::Stop,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CollectError::Io {
            path: path.into(),
            source,
        }
    }

    /// Unparseable content at `path`.
    pub fn parse(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        CollectError::Parse {
            path: path.into(),
            detail: detail.into(),
        }
    }
}

/// What a power source measures, so reports never add overlapping sources together.
///
/// A wall meter already includes every component inside the box, and a UPS feeds several
/// machines: summing a GPU's board power with the wall reading, or a UPS with the wall meter
/// behind it, counts the same watts twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The whole machine at the wall socket (inline meter, BMC/DCMI whole-server reading).
    Wall,
    /// One part inside the box (CPU package via RAPL, GPU board via NVML, a hwmon sensor):
    /// a lower bound on the machine, never added to a wall reading.
    Component,
    /// A supply that feeds several machines (a UPS, a PDU outlet group).
    Shared,
}

impl Scope {
    /// Stable name used in storage and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Wall => "wall",
            Scope::Component => "component",
            Scope::Shared => "shared",
        }
    }
}

/// A source of samples, polled by the daemon.
pub trait Collector: Send {
    /// Which source this is, for logs and storage.
    fn source(&self) -> &SourceId;

    /// Read the source once. `now_ms` is the wall-clock time of the poll in UTC
    /// milliseconds; samples carry it (or the device's own time where it has one).
    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError>;

    /// Start the next [`Collector::poll`] early: a polled meter sends its request here, so
    /// its reply travels while the sampler reads the other sources due at the same tick,
    /// and `poll` finds the answer waiting instead of sleeping for it. Returns whether a
    /// request is in flight (the sampler then polls this collector last). Errors are left
    /// for `poll` to report. Default: nothing to start.
    fn prepare(&mut self, _now_ms: i64) -> bool {
        false
    }

    /// What this source's [`Metric::Power`] samples cover; `None` for sources that report
    /// no power (CPU telemetry).
    fn scope(&self) -> Option<Scope> {
        None
    }

    /// Health counters of the devices behind this source, for diagnostics: one entry per
    /// device (a meter on a shared line is one device), named by its id.
    fn device_counters(&self) -> Vec<DeviceCounters> {
        Vec::new()
    }
}

/// A device's frame counters since the collector was built.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceCounters {
    /// The device's configured id (e.g. a meter's `id`).
    pub id: String,
    /// Frames that decoded and passed the plausibility filter.
    pub good: u64,
    /// Frames that failed a CRC, checksum or syntax check.
    pub crc_errors: u64,
    /// Requests with no complete answer in time.
    pub timeouts: u64,
    /// Frames that decoded but failed the plausibility filter.
    pub implausible: u64,
    /// Modbus exception replies (0 for devices that have none).
    #[serde(default)]
    pub exceptions: u64,
    /// Readings rejected by the plausibility rules, by reason ([`plausibility::Reason`]):
    /// implausible frames and energy counters that moved more than the power allows.
    pub rejected: plausibility::Rejections,
}
