//! The fleet collector (`wattson collect`): every host's `<topic_prefix>/+/state` into one sink.
//!
//! It subscribes with QoS 1 on a persistent session (clean session off, fixed client id), so
//! the broker queues what arrives while the collector is down, and it acknowledges each
//! message only after the sink has taken its samples: a restart loses nothing the broker
//! kept. QoS 1 may deliver a message twice; samples are deduplicated by (host, `ts`), the
//! state payload's sample timestamp, in memory, and again by the store, which keeps one
//! sample per (host, source, metric, channel, ts): a message stored but not acknowledged
//! before the collector was killed is redelivered to the next run and stored once.
//! Payloads are bounded ([`MAX_STATE_BYTES`]); malformed ones are counted and dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rumqttc::{AsyncClient, ConnectionError, Event, Packet, QoS};
use tokio_util::sync::CancellationToken;
use wattson_collectors::Sample;

use crate::config::MqttConfig;
use crate::publish::mqtt::state::{self, MAX_STATE_BYTES};
use crate::publish::mqtt::{Backoff, MqttError};

/// Where collected samples go; the SQLite store implements it with a host column.
pub trait FleetSink: Send {
    /// One state message's samples for `host`, all stamped with the message's `ts`
    /// (UTC ms). Called once per (host, ts).
    fn samples(&mut self, host: &str, batch: Vec<Sample>);
}

/// A sink that keeps everything in memory, by host (tests, `--jsonl` output buffering).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MemorySink {
    pub by_host: BTreeMap<String, Vec<Sample>>,
}

impl FleetSink for MemorySink {
    fn samples(&mut self, host: &str, batch: Vec<Sample>) {
        self.by_host
            .entry(host.to_owned())
            .or_default()
            .extend(batch);
    }
}

/// A [`MemorySink`] shared with the caller, who can look while the collector runs.
#[derive(Debug, Default, Clone)]
pub struct SharedMemorySink(pub Arc<Mutex<MemorySink>>);

impl FleetSink for SharedMemorySink {
    fn samples(&mut self, host: &str, batch: Vec<Sample>) {
        if let Ok(mut s) = self.0.lock() {
            s.samples(host, batch);
        }
    }
}

/// Counters of what the collector saw.
#[derive(Debug, Default)]
pub struct FleetStats {
    /// State messages received.
    pub received: AtomicU64,
    /// Messages whose samples went to the sink.
    pub stored: AtomicU64,
    /// Messages already stored (QoS 1 redelivery, or a publisher's retry).
    pub duplicates: AtomicU64,
    /// Messages dropped as malformed or oversized.
    pub malformed: AtomicU64,
    /// Connection errors (one log line and one backoff step each).
    pub connection_errors: AtomicU64,
}

/// Remembers the recent `ts` of each host to drop duplicates.
#[derive(Debug, Default)]
pub struct Dedupe {
    seen: HashMap<String, BTreeSet<i64>>,
}

impl Dedupe {
    /// Timestamps remembered per host (about an hour at 1 Hz).
    pub const WINDOW: usize = 4096;

    /// True the first time (host, ts) is offered.
    pub fn first(&mut self, host: &str, ts: i64) -> bool {
        let set = self.seen.entry(host.to_owned()).or_default();
        if set.len() >= Self::WINDOW {
            if set.first().is_some_and(|oldest| ts < *oldest) {
                // Older than anything remembered: it was stored long ago.
                return false;
            }
            set.pop_first();
        }
        set.insert(ts)
    }
}

/// The host segment of `<prefix>/<host>/state`, if `topic` is one.
pub fn host_of<'t>(prefix: &str, topic: &'t str) -> Option<&'t str> {
    let rest = topic.strip_prefix(prefix)?.strip_prefix('/')?;
    let host = rest.strip_suffix("/state")?;
    (!host.is_empty() && !host.contains('/')).then_some(host)
}

/// Handle one message: parse, dedupe, store. Returns what happened for the counters.
pub fn handle(
    prefix: &str,
    topic: &str,
    payload: &[u8],
    dedupe: &mut Dedupe,
    sink: &mut dyn FleetSink,
    stats: &FleetStats,
) {
    let Some(host) = host_of(prefix, topic) else {
        return;
    };
    stats.received.fetch_add(1, Ordering::Relaxed);
    match state::parse(payload) {
        Ok((ts, samples)) => {
            if dedupe.first(host, ts) {
                sink.samples(host, samples);
                stats.stored.fetch_add(1, Ordering::Relaxed);
            } else {
                stats.duplicates.fetch_add(1, Ordering::Relaxed);
            }
        }
        Err(e) => {
            let n = stats.malformed.fetch_add(1, Ordering::Relaxed);
            // The first few, then every thousandth: a broken publisher must not flood logs.
            if n < 5 || n.is_multiple_of(1000) {
                tracing::warn!(
                    "dropping state from {topic}: {}",
                    wattson_collectors::ErrorChain(&e)
                );
            }
        }
    }
}

/// Run the collector until `cancel`: connect as `client_id` with a persistent session,
/// subscribe to `<topic_prefix>/+/state` at QoS 1 and feed `sink`. Connection errors are
/// retried with backoff forever; only setup errors (URL, files) return early.
pub async fn run(
    cfg: &MqttConfig,
    client_id: &str,
    sink: &mut dyn FleetSink,
    stats: &FleetStats,
    cancel: CancellationToken,
) -> Result<(), MqttError> {
    let (mut opts, broker) = crate::publish::mqtt::mqtt_options(cfg, client_id)?;
    opts.set_clean_session(false);
    opts.set_manual_acks(true);
    opts.set_max_packet_size(MAX_STATE_BYTES + 1024, 16 * 1024);
    let (client, mut eventloop) = AsyncClient::new(opts, 256);
    let filter = format!("{}/+/state", cfg.topic_prefix);
    let mut dedupe = Dedupe::default();
    let mut backoff = Backoff::reconnect();
    let mut up_since: Option<Instant> = None;
    loop {
        let ev = tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            ev = eventloop.poll() => ev,
        };
        match ev {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                up_since = Some(Instant::now());
                tracing::info!(
                    "collector connected to {broker} (session {})",
                    if ack.session_present {
                        "resumed"
                    } else {
                        "new"
                    }
                );
                if client.try_subscribe(&filter, QoS::AtLeastOnce).is_err() {
                    tracing::warn!("collector: request queue full; subscribing on reconnect");
                }
            }
            Ok(Event::Incoming(Packet::Publish(p))) => {
                handle(
                    &cfg.topic_prefix,
                    &p.topic,
                    &p.payload,
                    &mut dedupe,
                    sink,
                    stats,
                );
                // Acknowledge only once stored: an unacknowledged message is redelivered.
                let _ = client.try_ack(&p);
            }
            Ok(_) => {}
            Err(ConnectionError::RequestsDone) => break,
            Err(e) => {
                if up_since
                    .take()
                    .is_some_and(|t| t.elapsed() >= std::time::Duration::from_secs(10))
                {
                    backoff.reset();
                }
                let delay = backoff.next_delay();
                stats.connection_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "collector: {}; retrying in {:.1} s",
                    crate::publish::mqtt::describe_error(&broker, cfg.username.as_deref(), &e),
                    delay.as_secs_f64()
                );
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
    // Leave the session on the broker (no clean session): it keeps queueing for us.
    let _ = client.try_disconnect();
    let _ = tokio::time::timeout(std::time::Duration::from_millis(300), async {
        while let Ok(ev) = eventloop.poll().await {
            if matches!(ev, Event::Outgoing(rumqttc::Outgoing::Disconnect)) {
                break;
            }
        }
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = r#"{"ts":1767225600000,"interval_s":1,"power_w":61.5,"series":[["meter:wall","power","",61.5],["cpu","cpu_busy","all",0.25],["cpu","core_frequency","cpu0",2200.0]]}"#;

    /// Handles one payload and checks what reached the sink: finite values, one `ts`,
    /// every message counted once.
    fn check(payload: &[u8]) {
        let mut sink = MemorySink::default();
        let stats = FleetStats::default();
        let mut d = Dedupe::default();
        handle("w", "w/h/state", payload, &mut d, &mut sink, &stats);
        let stored = stats.stored.load(Ordering::Relaxed);
        let malformed = stats.malformed.load(Ordering::Relaxed);
        assert_eq!(stored + malformed, 1);
        if let Some(samples) = sink.by_host.get("h") {
            let ts = samples.first().map(|s| s.ts_ms);
            for s in samples {
                assert!(
                    s.value.is_finite() && Some(s.ts_ms) == ts && s.ts_ms > 0,
                    "{s:?}"
                );
            }
        }
    }

    proptest::proptest! {
        // 2,000 cases; rerun with more: PROPTEST_CASES=20000 cargo test -p wattson --lib fleet::tests::fuzz
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
        ))]

        /// The fleet payload parser on arbitrary bytes: never panics, counts it once.
        #[test]
        fn fuzz_arbitrary_state_payloads_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)
        ) {
            check(&bytes);
        }

        /// A valid payload with a range replaced by arbitrary text (numbers, brackets,
        /// quotes, huge exponents): never panics, counts it once.
        #[test]
        fn fuzz_mutated_state_payloads_never_panic(
            at in 0usize..VALID.len(),
            len in 0usize..20,
            insert in "[-0-9eE.,\\[\\]\"{}:a-z ]{0,24}|1e400|-1e400|NaN|9223372036854775808",
        ) {
            let mut text = VALID.to_owned();
            let end = (at + len).min(text.len());
            text.replace_range(at..end, &insert);
            check(text.as_bytes());
        }
    }

    #[test]
    fn topics_name_their_host() {
        assert_eq!(host_of("wattson", "wattson/basket/state"), Some("basket"));
        assert_eq!(host_of("wattson", "wattson/basket/availability"), None);
        assert_eq!(host_of("wattson", "wattson//state"), None);
        assert_eq!(host_of("wattson", "other/basket/state"), None);
    }

    #[test]
    fn duplicates_and_garbage_are_counted_not_stored() {
        let mut sink = MemorySink::default();
        let stats = FleetStats::default();
        let mut d = Dedupe::default();
        let msg = br#"{"ts":10,"series":[["cpu","cpu_busy","all",0.5]]}"#;
        for _ in 0..3 {
            handle("w", "w/h1/state", msg, &mut d, &mut sink, &stats);
        }
        handle("w", "w/h2/state", msg, &mut d, &mut sink, &stats);
        handle("w", "w/h1/state", b"{oops", &mut d, &mut sink, &stats);
        assert_eq!(sink.by_host["h1"].len(), 1);
        assert_eq!(sink.by_host["h2"].len(), 1);
        assert_eq!(stats.duplicates.load(Ordering::Relaxed), 2);
        assert_eq!(stats.malformed.load(Ordering::Relaxed), 1);
        assert_eq!(stats.stored.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn dedupe_window_forgets_the_oldest_but_refuses_older_still() {
        let mut d = Dedupe::default();
        for ts in 0..Dedupe::WINDOW as i64 {
            assert!(d.first("h", ts));
        }
        assert!(d.first("h", 1_000_000));
        assert!(!d.first("h", 0), "older than the window counts as stored");
        assert!(!d.first("h", 1_000_000));
    }
}
