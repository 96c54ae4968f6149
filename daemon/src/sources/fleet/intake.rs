//! What the collector does with each message: the host read from the topic, the payload
//! parsed, the host limit, duplicates by (host, `ts`), the plausibility rules (a message or
//! a sample dropped, counted as the host's rejections), the series bound, the samples
//! handed to the sink, and what became of the message. Connecting, acknowledging and
//! reconnecting are [`super::run`]'s.
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use wattson_collectors::SourceId;

use wattson_collectors::plausibility::{Limits, Reason, Rejections};
use wattson_collectors::{Metric, Sample};

use super::{FleetSink, FleetStats, MAX_SERIES_PER_HOST, SinkError};
use crate::publish::mqtt::state;

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

#[cfg(test)]
mod tests;
