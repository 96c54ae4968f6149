//! Simulated hosts publishing into one in-process fleet collector: every sample stored
//! exactly once, across a restart of the collector.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{cfg, extras, feed};
use tokio_util::sync::CancellationToken;
use wattson::live::LiveState;
use wattson::publish::mqtt::Publisher;
use wattson::sources::{SharedMemorySink, fleet};
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, kinds, wait_for};

/// `hosts` simulated hosts publish state every second for `secs` into one collector; every
/// message is stored exactly once. With mosquitto the collector is also restarted mid-run
/// and its persistent session must hand over what arrived meanwhile.
async fn fleet(kind: Kind, hosts: usize, secs: u64) {
    let broker = TestBroker::start(kind, &Options::default());
    let sink = SharedMemorySink::default();
    let stats = Arc::new(fleet::FleetStats::default());
    let collector_cfg = cfg(&broker.url(false), "collector");
    let start_collector = |cancel: CancellationToken| {
        let (c, mut s, st) = (collector_cfg.clone(), sink.clone(), stats.clone());
        tokio::spawn(async move {
            let opts = fleet::CollectorOptions {
                client_id: "wattson-collect-test".into(),
                max_hosts: 100,
            };
            fleet::run(&c, &opts, &mut s, &st, cancel).await.unwrap();
        })
    };
    let mut col_cancel = CancellationToken::new();
    let mut col = start_collector(col_cancel.clone());
    // The collector's subscription exists before any host publishes: a probe gets stored.
    let probe = Watcher::start(broker.port, "probe", &[]);
    assert!(
        wait_for(Duration::from_secs(10), || {
            let _ = probe.client.try_publish(
                "wattson/probe/state",
                rumqttc::QoS::AtLeastOnce,
                false,
                format!(
                    r#"{{"ts":{},"series":[]}}"#,
                    wattson::runtime::sampler::now_ms()
                ),
            );
            // An empty state is counted as such, not as stored.
            stats.empty.load(Ordering::Relaxed) > 0
        })
        .await,
        "{kind:?}: collector never subscribed"
    );

    let cancel = CancellationToken::new();
    let mut handles = Vec::new();
    for i in 0..hosts {
        let live = Arc::new(LiveState::default());
        feed(live.clone(), cancel.clone());
        let mut c = cfg(&broker.url(false), &format!("wattson-host{i}"));
        c.publish_interval = Duration::from_secs(1);
        c.discovery = false;
        handles
            .push(Publisher::spawn(c, format!("host{i}"), live, extras(), cancel.clone()).unwrap());
    }
    if kind == Kind::Mosquitto {
        tokio::time::sleep(Duration::from_secs(secs / 2)).await; // run time, not a sync
        col_cancel.cancel();
        col.await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await; // the collector's downtime
        col_cancel = CancellationToken::new();
        col = start_collector(col_cancel.clone());
        tokio::time::sleep(Duration::from_secs(secs - secs / 2)).await;
    } else {
        tokio::time::sleep(Duration::from_secs(secs)).await; // run time, not a sync
    }
    cancel.cancel();
    let mut published = 0;
    for h in handles {
        h.join.await.unwrap();
        published += h.stats.states_published.load(Ordering::Relaxed);
    }
    assert!(
        published >= (hosts as u64) * (secs - 2),
        "{published} states published"
    );
    let probes = || {
        sink.0
            .lock()
            .unwrap()
            .by_host
            .keys()
            .filter(|h| h.as_str() == "probe")
            .count() as u64
    };
    let stored_hosts = || stats.stored.load(Ordering::Relaxed);
    assert!(
        wait_for(Duration::from_secs(15), || {
            let s = sink.0.lock().unwrap();
            let n: usize = (0..hosts)
                .map(|i| {
                    s.by_host.get(&format!("host{i}")).map_or(0, |v| {
                        v.iter().map(|x| x.ts_ms).collect::<BTreeSet<_>>().len()
                    })
                })
                .sum();
            n as u64 >= published
        })
        .await,
        "{kind:?}: stored {} of {published} (+probes {})",
        stored_hosts(),
        probes()
    );
    col_cancel.cancel();
    col.await.unwrap();
    let s = sink.0.lock().unwrap();
    for i in 0..hosts {
        let samples = &s.by_host[&format!("host{i}")];
        let mut seen: BTreeMap<(i64, String, Metric, String), u32> = BTreeMap::new();
        for x in samples {
            *seen
                .entry((x.ts_ms, x.source.to_string(), x.metric, x.channel.clone()))
                .or_default() += 1;
        }
        assert!(
            seen.values().all(|n| *n == 1),
            "host{i}: a sample stored twice"
        );
    }
    eprintln!(
        "{kind:?}: {published} states, {} stored, {} duplicates dropped, {} malformed",
        stats.stored.load(Ordering::Relaxed),
        stats.duplicates.load(Ordering::Relaxed),
        stats.malformed.load(Ordering::Relaxed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_of_20_hosts_stored_exactly_once() {
    for kind in kinds() {
        fleet(kind, 20, 10).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "60 s: run with --ignored"]
async fn fleet_of_20_hosts_for_a_minute() {
    for kind in kinds() {
        fleet(kind, 20, 60).await;
    }
}
