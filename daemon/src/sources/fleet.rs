//! The fleet collector (`wattson collect`): every host's `<topic_prefix>/+/state` into one sink.
//!
//! It subscribes with QoS 1 on a persistent session (clean session off, fixed client id), so
//! the broker queues what arrives while the collector is down, and it acknowledges each
//! message only after the sink has committed its samples: a restart loses nothing the broker
//! kept. When a commit fails (a full disk) the message is not acknowledged, not counted as
//! stored, and the collector drops the connection and connects again after a backoff step:
//! the broker then delivers again every message not acknowledged, until a commit succeeds.
//! QoS 1 may deliver a message twice; samples are deduplicated by (host, `ts`), the state
//! payload's sample timestamp, in memory, and again by the store, which keeps one sample per
//! (host, source, metric, channel, ts): a message stored but not acknowledged before the
//! collector was killed is redelivered to the next run and stored once.
//!
//! Bounds, so a broken or hostile publisher cannot exhaust memory: payloads of at most
//! [`MAX_STATE_BYTES`] (larger ones are skipped by the MQTT driver, acknowledged, counted);
//! at most `max_hosts` hosts (those already in the database first; messages of further
//! hosts are acknowledged, counted as refused and logged); per host, the last
//! [`Dedupe::WINDOW`] timestamps and at most [`MAX_SERIES_PER_HOST`] series (samples of
//! further series are dropped, counted and logged); host names that follow the one rule for
//! names (printable, at most [`MAX_HOST_NAME`] characters). A state with no sample to store
//! is counted as empty, not as stored. Malformed payloads are counted and dropped.
//!
//! Every message passes the shared plausibility rules ([`wattson_collectors::plausibility`])
//! before it is stored: a `ts` more than 5 minutes after its receipt (a host whose clock says
//! 9999 would otherwise shut out its own later states) or more than 30 days before it (the
//! broker keeps a persistent session's messages while the collector is down) drops the
//! message; an implausible value (-1e12 W, 1e300 W, a power factor of 2.55) drops that
//! sample. Both are counted per host and stored as the host's `rejected` counts, which
//! `wattson status --host` shows.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattson_collectors::SourceId;

use rumqttc::QoS;
use tokio_util::sync::CancellationToken;
use wattson_collectors::Sample;

use crate::config::MqttConfig;
use crate::publish::mqtt::MqttError;
use crate::publish::mqtt::driver::{ClientSpec, Connection, ConnectionStats, Event};
use crate::publish::mqtt::state::MAX_STATE_BYTES;

mod intake;

pub use intake::{Dedupe, Intake, Outcome, host_of};

/// Hosts a collector takes by default (`wattson collect --max-hosts`).
pub const DEFAULT_MAX_HOSTS: u32 = 100;
/// Distinct (source, metric, channel) series kept per host; a 128-thread host publishes
/// about 800.
pub const MAX_SERIES_PER_HOST: usize = 2048;
/// Longest host name (the topic segment) accepted, characters: the one rule for names
/// ([`crate::config::names`]), as `[host] name` takes.
pub const MAX_HOST_NAME: usize = crate::config::names::MAX_NAME_CHARS;

/// Why a sink did not commit a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

/// What a sink committed of a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Committed {
    /// Samples not stored because their series already holds a newer one (the store keeps
    /// each series in time order): a state that arrived after a later one of its host.
    pub late: usize,
}

/// Where collected samples go; the SQLite store implements it with a host column.
pub trait FleetSink: Send {
    /// Stores and commits one state message's samples for `host`, all stamped with the
    /// message's `ts` (UTC ms). Called once per (host, ts) until it succeeds. An error
    /// means none of them is vouched for: the message will be delivered again.
    fn store(&mut self, host: &str, batch: Vec<Sample>) -> Result<Committed, SinkError>;

    /// `host`'s `source` holds its readings: each of its power means stands for the time
    /// since the state before, for at most `max_ms`
    /// ([`crate::store::integrate::Readings::Mean`]). Said before the state's samples.
    fn held_means(&mut self, host: &str, source: &SourceId, max_ms: i64) -> Result<(), SinkError> {
        let _ = (host, source, max_ms);
        Ok(())
    }

    /// Hosts already stored: they are taken first under the host limit.
    fn known_hosts(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// A sink that keeps everything in memory, by host (tests, `--jsonl` output buffering).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MemorySink {
    pub by_host: BTreeMap<String, Vec<Sample>>,
}

impl FleetSink for MemorySink {
    fn store(&mut self, host: &str, batch: Vec<Sample>) -> Result<Committed, SinkError> {
        self.by_host
            .entry(host.to_owned())
            .or_default()
            .extend(batch);
        Ok(Committed::default())
    }
}

/// A [`MemorySink`] shared with the caller, who can look while the collector runs.
#[derive(Debug, Default, Clone)]
pub struct SharedMemorySink(pub Arc<Mutex<MemorySink>>);

impl FleetSink for SharedMemorySink {
    fn store(&mut self, host: &str, batch: Vec<Sample>) -> Result<Committed, SinkError> {
        let mut s = self
            .0
            .lock()
            .map_err(|_| SinkError("the shared sink's lock is poisoned".to_owned()))?;
        s.store(host, batch)
    }
}

/// Counters of what the collector saw.
#[derive(Debug, Default)]
pub struct FleetStats {
    /// State messages received (within the size limit).
    pub received: AtomicU64,
    /// Messages whose samples the sink committed.
    pub stored: AtomicU64,
    /// Messages already stored (QoS 1 redelivery, or a publisher's retry).
    pub duplicates: AtomicU64,
    /// Messages dropped as malformed.
    pub malformed: AtomicU64,
    /// Messages that held no sample to store (no `series`, or only refused ones): nothing
    /// stored, not counted as stored.
    pub empty: AtomicU64,
    /// Messages of hosts beyond the host limit, acknowledged and dropped.
    pub refused_hosts: AtomicU64,
    /// Samples of series beyond [`MAX_SERIES_PER_HOST`], dropped.
    pub refused_series: AtomicU64,
    /// Messages dropped as implausible (a timestamp far from their receipt).
    pub rejected: AtomicU64,
    /// Samples dropped as implausible (an impossible value) from messages otherwise stored.
    pub rejected_samples: AtomicU64,
    /// Commits that failed: those messages were not acknowledged (delivered again later).
    pub not_stored: AtomicU64,
    /// Messages none of whose samples were stored because the host's series already held
    /// newer ones (they arrived after a later state), acknowledged; not counted as stored.
    pub late: AtomicU64,
    /// Samples not stored for that reason, in late messages or in part of one.
    pub late_samples: AtomicU64,
    /// The connection's counters (connects, errors, messages skipped as larger than
    /// [`MAX_STATE_BYTES`]).
    pub connection: Arc<ConnectionStats>,
}

/// How the collector connects and what it takes.
#[derive(Debug, Clone)]
pub struct CollectorOptions {
    /// Fixed, so the broker keeps this collector's session while it is down.
    pub client_id: String,
    pub max_hosts: usize,
}

/// Run the collector until `cancel`: connect with a persistent session, subscribe to
/// `<topic_prefix>/+/state` at QoS 1 and feed `sink`. Connection errors are retried with
/// backoff forever; only setup errors (URL, files) return early. On a multi-threaded
/// runtime the sink's commits run off the async workers (`block_in_place`).
pub async fn run(
    cfg: &MqttConfig,
    opts: &CollectorOptions,
    sink: &mut dyn FleetSink,
    stats: &FleetStats,
    cancel: CancellationToken,
) -> Result<(), MqttError> {
    let mut conn = Connection::start(
        cfg,
        ClientSpec {
            role: "collector",
            client_id: opts.client_id.clone(),
            subscriptions: vec![format!("{}/+/state", cfg.topic_prefix)],
            qos: QoS::AtLeastOnce,
            max_payload: MAX_STATE_BYTES,
            max_outgoing: 1024,
            persistent_session: true,
            manual_acks: true,
            last_will: None,
            // Room for an acknowledgement of every packet id: a broker cannot have more
            // QoS 1 messages unacknowledged to us, so `ack` never finds the queue full
            // (rumqttc drains it one request per ten packets read during a flood).
            queue: 65_536,
            stats: stats.connection.clone(),
        },
    )?;
    let known = blocking(|| sink.known_hosts());
    let mut intake = Intake::new(&cfg.topic_prefix, opts.max_hosts, known);
    // Set when a commit failed: what still arrives on that connection is left
    // unacknowledged for the broker to deliver again after the reconnect.
    let mut failing = false;
    let mut failures = 0_u64;
    while let Some(ev) = conn.next_event(&cancel).await {
        let m = match ev {
            Event::Connected { .. } => {
                failing = false;
                continue;
            }
            Event::Disconnected => continue,
            Event::Message(m) => m,
        };
        if failing {
            continue;
        }
        let outcome = blocking(|| intake.handle(m.topic(), m.payload(), &mut *sink, stats));
        if let Outcome::NotStored(e) = outcome {
            failing = true;
            failures += 1;
            if failures <= 5 || failures.is_multiple_of(100) {
                tracing::error!(
                    "collector: could not store the {}-byte state on {:?}: {e}; not acknowledged, so the broker keeps it and delivers it again ({failures} failed commits so far)",
                    m.payload().len(),
                    m.topic()
                );
            }
            conn.reconnect(&m);
            continue;
        }
        if failures > 0 && outcome == Outcome::Stored {
            tracing::info!("collector: storing again after {failures} failed commits");
            failures = 0;
        }
        if !conn.ack(&m) {
            tracing::warn!(
                "collector: rumqttc's request queue is full; reconnecting so the broker delivers the unacknowledged messages again"
            );
            failing = true;
            conn.reconnect(&m);
        }
    }
    // Leave the session on the broker (no clean session): it keeps queueing for us.
    conn.close(Duration::from_millis(300)).await;
    Ok(())
}

/// Run `f`, off the async workers when the runtime has more than one.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}
