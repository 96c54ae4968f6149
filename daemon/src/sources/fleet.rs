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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattson_collectors::SourceId;

use rumqttc::QoS;
use tokio_util::sync::CancellationToken;
use wattson_collectors::plausibility::{Limits, Reason, Rejections};
use wattson_collectors::{Metric, Sample};

use crate::config::MqttConfig;
use crate::publish::mqtt::MqttError;
use crate::publish::mqtt::driver::{ClientSpec, Connection, ConnectionStats, Event};
use crate::publish::mqtt::state::{self, MAX_STATE_BYTES};

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

/// Remembers the recent `ts` of each host to drop duplicates, and what each host had
/// rejected.
#[derive(Debug, Default)]
pub struct Dedupe {
    seen: HashMap<String, BTreeSet<i64>>,
    rejected: HashMap<String, BTreeMap<SourceId, Rejections>>,
}

/// How far from its receipt a fleet message's `ts` may be.
fn fleet_limits() -> Limits {
    Limits {
        past_ms: 30 * 24 * 3_600_000,
        ..Limits::default()
    }
}

impl Dedupe {
    /// Timestamps remembered per host (about four minutes at 1 Hz; the store drops older
    /// repeats on its own).
    pub const WINDOW: usize = 256;

    /// True when (host, ts) has not been stored.
    pub fn is_new(&self, host: &str, ts: i64) -> bool {
        let Some(set) = self.seen.get(host) else {
            return true;
        };
        if set.len() >= Self::WINDOW && set.first().is_some_and(|oldest| ts < *oldest) {
            // Older than anything remembered: it was stored long ago.
            return false;
        }
        !set.contains(&ts)
    }

    /// Remember that (host, ts) is stored.
    pub fn record(&mut self, host: &str, ts: i64) {
        let set = self.seen.entry(host.to_owned()).or_default();
        set.insert(ts);
        while set.len() > Self::WINDOW {
            set.pop_first();
        }
    }
}

impl Dedupe {
    /// Counts a rejection of `source` on `host`; the host's counts for that source.
    fn reject(&mut self, host: &str, source: &SourceId, reason: Reason) -> &Rejections {
        let r = self
            .rejected
            .entry(host.to_owned())
            .or_default()
            .entry(source.clone())
            .or_default();
        r.record(reason);
        r
    }
}

trait RejectionSamples {
    /// The counts as [`Metric::Rejected`] samples of `source` at `ts`.
    fn samples(&self, ts: i64, source: &SourceId) -> Vec<Sample>;
}

impl RejectionSamples for Rejections {
    fn samples(&self, ts: i64, source: &SourceId) -> Vec<Sample> {
        self.nonzero()
            .into_iter()
            .map(|(reason, n)| {
                Sample::new(
                    ts,
                    source.clone(),
                    Metric::Rejected,
                    reason.as_str(),
                    n as f64,
                )
            })
            .collect()
    }
}

/// The host segment of `<prefix>/<host>/state`, if `topic` is one.
pub fn host_of<'t>(prefix: &str, topic: &'t str) -> Option<&'t str> {
    let rest = topic.strip_prefix(prefix)?.strip_prefix('/')?;
    let host = rest.strip_suffix("/state")?;
    (!host.is_empty() && !host.contains('/')).then_some(host)
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Committed (possibly without the samples of refused series).
    Stored,
    /// Came after a later state of its host: acknowledged, counted, nothing stored.
    Late,
    Duplicate,
    Malformed,
    /// From a host beyond the limit.
    Refused,
    /// Implausible (a `ts` far from its receipt): acknowledged, counted, not stored.
    Rejected,
    /// Held no sample to store: acknowledged, counted, nothing stored.
    Empty,
    /// Not a state topic of this prefix.
    NotOurs,
    /// The sink failed: not stored, to be delivered again.
    NotStored(SinkError),
}

/// One series of a host.
type SeriesKey = (SourceId, Metric, String);

/// The collector's memory of hosts: what each stored lately and which series it has.
#[derive(Debug)]
pub struct Intake {
    prefix: String,
    max_hosts: usize,
    dedupe: Dedupe,
    series: HashMap<String, HashSet<SeriesKey>>,
}

impl Intake {
    /// Takes `<prefix>/<host>/state` of at most `max_hosts` hosts, `known` ones first.
    pub fn new(prefix: &str, max_hosts: usize, known: Vec<String>) -> Intake {
        let mut intake = Intake {
            prefix: prefix.to_owned(),
            max_hosts,
            dedupe: Dedupe::default(),
            series: HashMap::new(),
        };
        for host in known {
            intake.series.entry(host).or_default();
        }
        intake
    }

    /// Hosts taken so far.
    pub fn hosts(&self) -> usize {
        self.series.len()
    }

    /// Parse, dedupe, bound and store one message.
    pub fn handle(
        &mut self,
        topic: &str,
        payload: &[u8],
        sink: &mut dyn FleetSink,
        stats: &FleetStats,
    ) -> Outcome {
        let Some(host) = host_of(&self.prefix, topic) else {
            return Outcome::NotOurs;
        };
        stats.received.fetch_add(1, Ordering::Relaxed);
        if let Err(why) = crate::config::names::check_name(host) {
            throttled(&stats.malformed, |n| {
                tracing::warn!(
                    "dropping state from the host name {:?}: it {why}; {n} malformed so far",
                    host.chars().take(80).collect::<String>()
                );
            });
            return Outcome::Malformed;
        }
        let received_ms = wattson_collectors::now_ms();
        let payload = match state::parse_payload(payload) {
            Ok(parsed) => parsed,
            Err(e) => {
                throttled(&stats.malformed, |n| {
                    tracing::warn!(
                        "dropping a {}-byte state from {topic:?}: {}; {n} malformed so far",
                        payload.len(),
                        wattson_collectors::ErrorChain(&e)
                    );
                });
                return Outcome::Malformed;
            }
        };
        if !self.series.contains_key(host) && self.series.len() >= self.max_hosts {
            throttled(&stats.refused_hosts, |n| {
                tracing::warn!(
                    "refusing state from host {host:?}: the collector already takes {} hosts (raise with --max-hosts); {n} messages refused so far",
                    self.max_hosts
                );
            });
            return Outcome::Refused;
        }
        let ts = payload.ts;
        if !self.dedupe.is_new(host, ts) {
            stats.duplicates.fetch_add(1, Ordering::Relaxed);
            return Outcome::Duplicate;
        }
        let samples = match self.checked(host, topic, &payload, received_ms, sink, stats) {
            Ok(samples) => samples,
            Err(outcome) => return outcome,
        };
        let kept = self.within_series_bound(host, samples, stats);
        for (source, max_ms) in payload.held_means() {
            if let Err(e) = sink.held_means(host, &source, max_ms) {
                stats.not_stored.fetch_add(1, Ordering::Relaxed);
                return Outcome::NotStored(e);
            }
        }
        self.store(host, ts, kept, sink, stats)
    }

    /// The message's plausible samples, each implausible one replaced by the host's counts
    /// of rejections; `Err` when the whole message is dropped (its `ts` is implausible),
    /// after storing that count.
    fn checked(
        &mut self,
        host: &str,
        topic: &str,
        payload: &state::StatePayload,
        received_ms: i64,
        sink: &mut dyn FleetSink,
        stats: &FleetStats,
    ) -> Result<Vec<Sample>, Outcome> {
        let ts = payload.ts;
        let (mut samples, rejected) = match payload.checked_samples(received_ms, &fleet_limits()) {
            Ok(checked) => checked,
            Err(why) => {
                throttled(&stats.rejected, |n| {
                    tracing::warn!("dropping state from {topic:?}: {why}; {n} implausible so far");
                });
                // Stored as the host's counts (best effort: the message is dropped anyway).
                let counts = self
                    .dedupe
                    .reject(host, &SourceId::FleetState, Reason::Timestamp)
                    .samples(received_ms, &SourceId::FleetState);
                let _ = sink.store(host, counts);
                return Err(Outcome::Rejected);
            }
        };
        for (source, why) in &rejected {
            stats.rejected_samples.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("dropping a sample of {topic:?}: {why}");
            let counts = self
                .dedupe
                .reject(host, source, why.reason)
                .samples(ts, source);
            samples.extend(counts);
        }
        Ok(samples)
    }

    /// The samples of `host`'s known series and of new ones while it has fewer than
    /// [`MAX_SERIES_PER_HOST`]; the others dropped, counted and logged.
    fn within_series_bound(
        &mut self,
        host: &str,
        samples: Vec<Sample>,
        stats: &FleetStats,
    ) -> Vec<Sample> {
        let known = self.series.entry(host.to_owned()).or_default();
        let mut kept = Vec::with_capacity(samples.len());
        let mut refused = 0_u64;
        for s in samples {
            let key = (s.source.clone(), s.metric, s.channel.clone());
            if known.contains(&key) || known.len() < MAX_SERIES_PER_HOST && known.insert(key) {
                kept.push(s);
            } else {
                refused += 1;
            }
        }
        if refused > 0 {
            let before = stats.refused_series.fetch_add(refused, Ordering::Relaxed);
            if before == 0 || before / 1000 != (before + refused) / 1000 {
                tracing::warn!(
                    "host {host:?} has more than {MAX_SERIES_PER_HOST} series: dropped {refused} samples of new ones ({} so far)",
                    before + refused
                );
            }
        }
        kept
    }

    /// Stores the state of `host` at `ts` (its samples `kept`) and remembers `ts` as seen,
    /// unless the sink failed (then the message is delivered again).
    fn store(
        &mut self,
        host: &str,
        ts: i64,
        kept: Vec<Sample>,
        sink: &mut dyn FleetSink,
        stats: &FleetStats,
    ) -> Outcome {
        let offered = kept.len();
        if offered == 0 {
            self.dedupe.record(host, ts);
            throttled(&stats.empty, |n| {
                tracing::warn!(
                    "the state of host {host:?} at {ts} ms holds no sample to store (no \
                     `series`): nothing stored; {n} such messages so far"
                );
            });
            return Outcome::Empty;
        }
        match sink.store(host, kept) {
            Ok(c) if c.late > 0 && c.late >= offered => {
                self.dedupe.record(host, ts);
                stats
                    .late_samples
                    .fetch_add(c.late as u64, Ordering::Relaxed);
                throttled(&stats.late, |n| {
                    tracing::warn!(
                        "collector: the state of host {host:?} at {ts} ms came after a later one: \
                         its {} samples were not stored (each series is stored in time order; \
                         {n} such messages so far)",
                        c.late
                    );
                });
                Outcome::Late
            }
            Ok(c) => {
                self.dedupe.record(host, ts);
                stats
                    .late_samples
                    .fetch_add(c.late as u64, Ordering::Relaxed);
                stats.stored.fetch_add(1, Ordering::Relaxed);
                Outcome::Stored
            }
            Err(e) => {
                stats.not_stored.fetch_add(1, Ordering::Relaxed);
                Outcome::NotStored(e)
            }
        }
    }
}

/// Count one more in `counter`; call `log` (with the new count) for the first five, then
/// every thousandth, so a broken publisher cannot flood the log.
fn throttled(counter: &AtomicU64, log: impl FnOnce(u64)) {
    let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
    if n <= 5 || n.is_multiple_of(1000) {
        log(n);
    }
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

#[cfg(test)]
mod tests;
