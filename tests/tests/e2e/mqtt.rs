//! End-to-end MQTT tests against real brokers: rumqttd embedded, and mosquitto when it is
//! installed (`apt-get install mosquitto`). Tests that need to kill a broker, a password
//! file or a TLS listener use mosquitto and are skipped (with a note) without it, except
//! under CI (`CI=true`), where they fail.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wattson::config::MqttConfig;
use wattson::live::LiveState;
use wattson::publish::mqtt::state::MeterCounters;
use wattson::publish::mqtt::{Publisher, StateExtras};
use wattson::sources::{SharedMemorySink, fleet};
use wattson_collectors::{Collector, Metric, Sample};
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, kinds, wait_for};

fn cfg(url: &str, client_id: &str) -> MqttConfig {
    MqttConfig {
        broker: wattson::config::broker::parse_url(url).unwrap(),
        client_id: client_id.to_owned(),
        username: None,
        password_file: None,
        password_credential: None,
        ca_file: None,
        client_cert_file: None,
        client_key_file: None,
        insecure_skip_verify: false,
        topic_prefix: "wattson".into(),
        discovery_prefix: "homeassistant".into(),
        discovery: true,
        publish_interval: Duration::from_millis(300),
        keepalive: Duration::from_secs(5),
    }
}

fn extras() -> wattson::publish::mqtt::publisher::Extras {
    tokio::sync::watch::channel(StateExtras {
        currency: "GBP".into(),
        cost_today: Some(0.42),
        cost_month: Some(5.5),
        cost_total: Some(11.25),
        annual_projection: Some(189.22),
        annual_basis: Some("projected from 168.0 h measured in the last 7 days".into()),
        price_now: None,
        energy_today_kwh: Some(1.5),
        energy_total_kwh: Some(125.0),
        energy_ts_ms: None,
        publishes: 0,
        mode: Some("idle".into()),
        mode_options: vec!["standby".into(), "idle".into(), "1 loop".into()],
        primary: wattson::ledger::PrimaryPower::new(Some(wattson_collectors::SourceId::meter(
            "wall",
        ))),
        meter_counters: vec![MeterCounters {
            id: "wall".into(),
            good: 100,
            crc_errors: 1,
            timeouts: 2,
            implausible: 0,
        }],
        idle_regression: None,
        services: Vec::new(),
        wattson_itself: None,
        wakeups: None,
        disks: Vec::new(),
    })
    .1
}

/// Feed a LiveState like the sampler would: 230 W and 250 W alternately (mean 240 W).
fn feed(live: Arc<LiveState>, cancel: CancellationToken) {
    tokio::spawn(async move {
        let mut n = 0_u64;
        let mut ts = wattson::runtime::sampler::now_ms();
        loop {
            ts = ts.max(wattson::runtime::sampler::now_ms()) + 1;
            let w = if n.is_multiple_of(2) { 230.0 } else { 250.0 };
            let began = live.observe(&[
                Sample::new(ts, "meter:wall", Metric::Power, "", w),
                Sample::new(ts, "meter:wall", Metric::Voltage, "", 231.0),
                Sample::new(ts, "meter:wall", Metric::EnergyTotal, "", n as f64),
                Sample::new(ts, "cpu", Metric::CpuBusy, "all", 0.25),
                Sample::new(ts, "cpu", Metric::CoreFrequency, "mean", 2200.0),
                Sample::new(ts, "cpu", Metric::IdleResidency, "all/C1", 0.2),
                Sample::new(ts, "cpu", Metric::IdleResidency, "all/C6", 0.5),
            ]);
            if began {
                live.publish_now();
            }
            n += 1;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    });
}

fn json(m: &wattson_tests::broker::Msg) -> Value {
    serde_json::from_slice(&m.payload).unwrap()
}

const POWER_CONFIG: &str = "homeassistant/sensor/wattson_basket/power/config";

/// What a previous run announced: an entity this run does not have, which it must remove.
async fn announce_a_stale_entity(w: &Watcher) {
    assert!(
        wait_for(Duration::from_secs(5), || w
            .client
            .try_publish(
                "wattson/basket/discovery",
                rumqttc::QoS::AtLeastOnce,
                true,
                br#"["power","old_sensor"]"#.to_vec()
            )
            .is_ok())
        .await
    );
    assert!(
        wait_for(Duration::from_secs(5), || w
            .last("wattson/basket/discovery")
            .is_some())
        .await
    );
}

/// The entities' discovery configs, and the stale entity removed with an empty retained
/// config.
async fn discovery_is_announced(w: &Watcher, kind: Kind) {
    assert!(
        wait_for(Duration::from_secs(10), || w.last(POWER_CONFIG).is_some()).await,
        "{kind:?}: no discovery"
    );
    let power = json(&w.last(POWER_CONFIG).unwrap());
    assert_eq!(power["device_class"], "power");
    assert_eq!(power["unit_of_measurement"], "W");
    assert_eq!(power["state_class"], "measurement");
    assert_eq!(power["default_entity_id"], "sensor.wattson_basket_power");
    assert_eq!(power["origin"]["name"], "wattson");
    let energy = json(
        &w.last("homeassistant/sensor/wattson_basket/energy/config")
            .unwrap(),
    );
    assert_eq!(energy["unit_of_measurement"], "kWh");
    assert_eq!(energy["device_class"], "energy");
    let diag = json(
        &w.last("homeassistant/sensor/wattson_basket/meter_wall_crc_errors/config")
            .unwrap(),
    );
    assert_eq!(diag["entity_category"], "diagnostic");
    let mode = json(
        &w.last("homeassistant/sensor/wattson_basket/mode/config")
            .unwrap(),
    );
    assert_eq!(mode["device_class"], "enum");

    // The stale entity is removed with an empty retained config.
    assert!(
        wait_for(Duration::from_secs(10), || w
            .on("homeassistant/sensor/wattson_basket/old_sensor/config")
            .iter()
            .any(|m| m.payload.is_empty()))
        .await,
        "{kind:?}: stale entity not removed"
    );
    assert!(
        w.on("homeassistant/sensor/wattson_basket/power/config")
            .iter()
            .all(|m| !m.payload.is_empty()),
        "a live entity was removed"
    );
}

async fn state_and_discovery(kind: Kind) {
    let broker = TestBroker::start(kind, &Options::default());
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    announce_a_stale_entity(&w).await;

    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    feed(live.clone(), cancel.clone());
    let h = Publisher::spawn(
        cfg(&broker.url(false), "wattson-basket"),
        "basket".into(),
        live,
        extras(),
        cancel.clone(),
    )
    .unwrap();

    assert!(
        wait_for(Duration::from_secs(10), || w
            .on("wattson/basket/availability")
            .iter()
            .any(|m| m.payload == b"online"))
        .await,
        "{kind:?}: no availability"
    );
    assert!(
        wait_for(Duration::from_secs(10), || w
            .last("wattson/basket/state")
            .is_some())
        .await,
        "{kind:?}: no state"
    );
    let state = json(&w.last("wattson/basket/state").unwrap());
    let p = state["power"].as_f64().unwrap();
    assert!(
        (235.0..=245.0).contains(&p),
        "mean power, not a last sample: {p}"
    );
    assert!(state["ts"].as_i64().unwrap() > 0);
    assert_eq!(state["power_source"], "meter:wall");
    assert_eq!(state["cost_annual_projection"], 189.22);
    assert_eq!(state["cpu_utilisation"], 25.0);
    assert_eq!(state["cstate_deepest"], "C6");
    assert!(!w.last("wattson/basket/state").unwrap().retain);

    discovery_is_announced(&w, kind).await;

    // Home Assistant restarts: discovery is sent again.
    let before = w.on(POWER_CONFIG).len();
    w.client
        .try_publish(
            "homeassistant/status",
            rumqttc::QoS::AtLeastOnce,
            false,
            "online",
        )
        .unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || w.on(POWER_CONFIG).len()
            > before)
        .await,
        "{kind:?}: discovery not re-sent on homeassistant/status online"
    );

    // Shutdown: offline (retained) and back within a second.
    cancel.cancel();
    let t0 = std::time::Instant::now();
    h.join.await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(
        wait_for(Duration::from_secs(5), || w
            .last("wattson/basket/availability")
            .is_some_and(|m| m.payload == b"offline"))
        .await,
        "{kind:?}: no offline on shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_and_discovery_arrive_with_documented_payloads() {
    for kind in kinds() {
        state_and_discovery(kind).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_can_be_disabled() {
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let w = Watcher::start(broker.port, "watch", &["#"]);
    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    feed(live.clone(), cancel.clone());
    let mut c = cfg(&broker.url(false), "wattson-basket");
    c.discovery = false;
    let h = Publisher::spawn(c, "basket".into(), live, extras(), cancel.clone()).unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || w
            .on("wattson/basket/state")
            .len()
            >= 2)
        .await
    );
    assert!(
        w.msgs
            .lock()
            .unwrap()
            .iter()
            .all(|m| !m.topic.starts_with("homeassistant/"))
    );
    assert_eq!(h.stats.discovery_sent.load(Ordering::Relaxed), 0);
    cancel.cancel();
    h.join.await.unwrap();
}

/// CPU time (user + system) of the calling thread, in seconds, from /proc/thread-self/stat.
/// Clock ticks are taken as 100 per second (USER_HZ on every Linux architecture we run on).
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime) of the file; after "pid (comm) " they are 11 and 12.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// The broker is killed and restarted: the publisher stays near idle meanwhile (a bare
/// rumqttc poll loop would spin a core), then reconnects and re-announces availability and
/// discovery. Runs on one thread so that thread's CPU time is all the publisher's.
#[tokio::test(flavor = "current_thread")]
async fn broker_restart_reconnects_without_spinning() {
    if !wattson_tests::broker::have_mosquitto("broker_restart_reconnects_without_spinning") {
        return;
    }
    let mut broker = TestBroker::start(Kind::Mosquitto, &Options::default());
    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    feed(live.clone(), cancel.clone());
    let h = Publisher::spawn(
        cfg(&broker.url(false), "wattson-basket"),
        "basket".into(),
        live,
        extras(),
        cancel.clone(),
    )
    .unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || h
            .stats
            .discovery_sent
            .load(Ordering::Relaxed)
            > 0)
        .await
    );

    broker.kill();
    let cpu0 = thread_cpu_seconds();
    let outage = Duration::from_secs(4);
    tokio::time::sleep(outage).await; // the measurement window, not synchronisation
    let cpu = thread_cpu_seconds() - cpu0;
    let errors = h.stats.connection.connection_errors.load(Ordering::Relaxed);
    eprintln!("outage: {cpu:.3} s CPU in {outage:?}, {errors} connection errors");
    // Generous: 20 % of one core. A spinning reconnect loop uses ~100 %.
    assert!(
        cpu < 0.2 * outage.as_secs_f64(),
        "CPU {cpu} s during outage"
    );
    assert!((1..=8).contains(&errors), "{errors} error lines in 4 s");

    broker.restart();
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    let connects = h.stats.connection.connects.load(Ordering::Relaxed);
    assert!(
        wait_for(Duration::from_secs(15), || w
            .last("wattson/basket/availability")
            .is_some_and(|m| m.payload == b"online")
            && w.last(POWER_CONFIG).is_some()
            && w.last("wattson/basket/state").is_some())
        .await,
        "no reconnect: availability/discovery/state not re-sent"
    );
    assert!(h.stats.connection.connects.load(Ordering::Relaxed) >= connects.max(2));
    cancel.cancel();
    h.join.await.unwrap();
}

async fn wrong_password(kind: Kind) {
    let broker = TestBroker::start(
        kind,
        &Options {
            users: vec![("wattson".into(), "right-horse".into())],
            tls: None,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "battery-staple\n").unwrap();
    let mut c = cfg(&broker.url(false), "wattson-basket");
    c.username = Some("wattson".into());
    c.password_file = Some(pw.clone());
    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    let h = Publisher::spawn(
        c.clone(),
        "basket".into(),
        live.clone(),
        extras(),
        cancel.clone(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await; // the observation window
    let errors = h.stats.connection.connection_errors.load(Ordering::Relaxed);
    // Backoff 0.5, 1, 2, 4 s (each 50-100 %): at most 5 attempts fit in 4 s.
    assert!(
        (2..=6).contains(&errors),
        "{kind:?}: {errors} error lines in 4 s"
    );
    assert_eq!(h.stats.connection.connects.load(Ordering::Relaxed), 0);
    cancel.cancel();
    h.join.await.unwrap();

    // The right password connects.
    std::fs::write(&pw, "right-horse\n").unwrap();
    let cancel = CancellationToken::new();
    let h = Publisher::spawn(c, "basket".into(), live, extras(), cancel.clone()).unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || h
            .stats
            .connection
            .connects
            .load(Ordering::Relaxed)
            > 0)
        .await,
        "{kind:?}: right password did not connect"
    );
    cancel.cancel();
    h.join.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_give_one_error_per_backoff_step() {
    for kind in kinds() {
        wrong_password(kind).await;
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "openssl {args:?}");
}

/// A CA and a server certificate for `localhost`, signed by it, in `dir`.
fn make_ca(dir: &Path, name: &str) {
    let ca_key = format!("{name}-ca.key");
    let ca = format!("{name}-ca.pem");
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &ca_key,
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            &ca_key,
            "-days",
            "2",
            "-subj",
            "/CN=wattson test CA",
            "-out",
            &ca,
        ],
    );
    let key = format!("{name}-server.key");
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &key,
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            &key,
            "-subj",
            "/CN=localhost",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            &format!("{name}-server.pem"),
        ],
    );
    // mosquitto started as root reads its certificates after dropping to its own user.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.join(&key), std::fs::Permissions::from_mode(0o644)).unwrap();
}

async fn connects(c: MqttConfig) -> (u64, u64) {
    let cancel = CancellationToken::new();
    let h = Publisher::spawn(
        c,
        "basket".into(),
        Arc::new(LiveState::default()),
        extras(),
        cancel.clone(),
    )
    .unwrap();
    wait_for(Duration::from_secs(3), || {
        h.stats.connection.connects.load(Ordering::Relaxed) > 0
    })
    .await;
    cancel.cancel();
    let stats = h.stats.clone();
    h.join.await.unwrap();
    (
        stats.connection.connects.load(Ordering::Relaxed),
        stats.connection.connection_errors.load(Ordering::Relaxed),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verifies_the_broker_against_the_ca_file() {
    let have_openssl = std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !wattson_tests::broker::have_mosquitto("tls_verifies_the_broker_against_the_ca_file") {
        return;
    }
    if !have_openssl {
        assert!(
            !wattson_tests::broker::in_ci(),
            "openssl is not installed (CI=true)"
        );
        eprintln!("skipped: needs openssl");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    make_ca(dir.path(), "good");
    make_ca(dir.path(), "other");
    let d = dir.path();
    let broker = TestBroker::start(
        Kind::Mosquitto,
        &Options {
            users: vec![],
            tls: Some((
                d.join("good-ca.pem"),
                d.join("good-server.pem"),
                d.join("good-server.key"),
            )),
        },
    );
    let mut c = cfg(&broker.url(true), "wattson-basket");
    c.ca_file = Some(d.join("good-ca.pem"));
    let (ok, _) = connects(c.clone()).await;
    assert!(ok >= 1, "TLS with the right CA did not connect");

    c.ca_file = Some(d.join("other-ca.pem"));
    let (ok, errors) = connects(c.clone()).await;
    assert_eq!(ok, 0, "connected to a broker the CA did not sign");
    assert!(errors >= 1);

    c.insecure_skip_verify = true;
    let (ok, _) = connects(c).await;
    assert!(ok >= 1, "insecure_skip_verify did not connect");
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugs_feed_collectors_over_mqtt() {
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let cancel = CancellationToken::new();
    let specs = vec![
        wattson::sources::PlugSpec {
            id: "desk".into(),
            kind: wattson::sources::PlugKind::Tasmota,
            topic: "tasmota_1A2B3C".into(),
            bidirectional: false,
        },
        wattson::sources::PlugSpec {
            id: "nas".into(),
            kind: wattson::sources::PlugKind::Shelly,
            topic: "shellyplusplugs-aabbcc".into(),
            bidirectional: false,
        },
    ];
    let (join, mut collectors) = wattson::sources::plug::spawn_plugs(
        &cfg(&broker.url(false), "wattson-basket"),
        &specs,
        cancel.clone(),
    )
    .unwrap();
    let w = Watcher::start(broker.port, "plug-sim", &[]);
    let tasmota = br#"{"Time":"2024-03-02T18:04:21","ENERGY":{"Total":152.347,"Yesterday":1.032,"Today":0.421,"Power":38,"ApparentPower":52,"ReactivePower":35,"Factor":0.73,"Voltage":236,"Current":0.221}}"#;
    let shelly = br#"{"id":0,"output":true,"apower":41.7,"voltage":231.9,"freq":50.0,"current":0.272,"pf":0.66,"aenergy":{"total":18234.512}}"#;
    let mut got: Vec<Vec<Sample>> = vec![Vec::new(), Vec::new()];
    assert!(
        wait_for(Duration::from_secs(10), || {
            let _ = w.client.try_publish(
                "tele/tasmota_1A2B3C/SENSOR",
                rumqttc::QoS::AtMostOnce,
                false,
                tasmota.to_vec(),
            );
            let _ = w.client.try_publish(
                "shellyplusplugs-aabbcc/status/switch:0",
                rumqttc::QoS::AtMostOnce,
                false,
                shelly.to_vec(),
            );
            for (i, c) in collectors.iter_mut().enumerate() {
                let s = c.poll(0).unwrap();
                if !s.is_empty() {
                    got[i] = s;
                }
            }
            got.iter().all(|g| !g.is_empty())
        })
        .await,
        "plug readings never arrived"
    );
    let power = |g: &[Sample]| g.iter().find(|s| s.metric == Metric::Power).unwrap().value;
    assert_eq!(collectors[0].source(), &"meter:desk");
    assert_eq!(power(&got[0]), 38.0);
    assert_eq!(power(&got[1]), 41.7);
    cancel.cancel();
    join.await.unwrap();
}

// ---------------------------------------------------------------------------------------
// The real binaries: `wattson run` through a broker restart, `wattson collect` into SQLite.
// ---------------------------------------------------------------------------------------

/// User + system CPU time of process `pid`, in clock ticks (100 per second), from
/// `/proc/<pid>/stat`: the daemon under test, not this machine.
fn process_cpu_ticks(pid: nix::unistd::Pid) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Time on a CPU of every thread of process `pid`, ns, from `/proc/<pid>/task/*/schedstat`
/// (finer than the clock ticks of `stat`; reported, not asserted).
fn process_cpu_ns(pid: nix::unistd::Pid) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Lines of `log` that say the daemon's MQTT connection failed and when it retries.
fn mqtt_retries(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("MQTT: ") && l.contains("retrying in"))
        .count()
}

/// The mosquitto broker is killed under a running `wattson run` and started again on the
/// same port. The daemon keeps storing meter samples while the broker is down (no gap in
/// the power series), stays near idle (no reconnect spin), reconnects, and re-publishes its
/// retained availability and discovery (the restarted broker kept no retained messages).
#[test]
fn the_daemon_rides_out_a_broker_restart_on_the_same_port() {
    use wattson_tests::{Child, HOST, TestEnv, db_points, meter_toml, now_ms, q, simulate};
    // rumqttd cannot be stopped in-process.
    if !wattson_tests::broker::have_mosquitto(
        "the_daemon_rides_out_a_broker_restart_on_the_same_port",
    ) {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let mut broker = TestBroker::start(Kind::Mosquitto, &Options::default());
    let env = TestEnv::new();
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n{}\n[mqtt]\nurl = {}\npublish_interval = \"500ms\"\nkeepalive = \"5s\"\n",
        meter_toml("wall", "pzem004t", &sim.path, "500ms", None),
        q(broker.url(false))
    ));
    let availability = format!("wattson/{HOST}/availability");
    let state = format!("wattson/{HOST}/state");
    let power_config = format!("homeassistant/sensor/wattson_{HOST}/power/config");
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    let mut daemon = Child::run_daemon(&config, &[]);
    let announced = |w: &Watcher| {
        w.last(&availability)
            .is_some_and(|m| m.payload == b"online")
            && w.last(&power_config).is_some()
            && w.last(&state).is_some()
    };
    daemon.wait_for(
        "availability, discovery and state",
        Duration::from_secs(20),
        || announced(&w).then_some(()),
    );

    // The outage: until the daemon has retried three times and stored six samples (3 s).
    let retries_before = mqtt_retries(&daemon.stderr());
    broker.kill();
    let killed_ms = now_ms();
    let (cpu0, ns0) = (
        process_cpu_ticks(daemon.pid()),
        process_cpu_ns(daemon.pid()),
    );
    let t0 = std::time::Instant::now();
    daemon.wait_for(
        "three reconnect attempts and six samples stored while the broker is down",
        Duration::from_secs(30),
        || {
            let retries = mqtt_retries(&daemon.stderr()) - retries_before;
            let stored = db_points(&env.db, "meter:wall", Metric::Power)
                .iter()
                .filter(|p| p.0 > killed_ms)
                .count();
            (retries >= 3 && stored >= 6).then_some(())
        },
    );
    let cpu_s = (process_cpu_ticks(daemon.pid()) - cpu0) as f64 / 100.0;
    let ms = process_cpu_ns(daemon.pid()).saturating_sub(ns0) as f64 / 1e6;
    let window = t0.elapsed().as_secs_f64();
    let retries = mqtt_retries(&daemon.stderr()) - retries_before;
    eprintln!(
        "broker down: daemon used {cpu_s:.2} s CPU by utime+stime, {ms:.1} ms by schedstat, in {window:.2} s ({:.2} % of a core), {retries} retries",
        ms / 10.0 / window
    );
    // Generous: a quarter of a core (plus a tick either side). A reconnect loop without
    // backoff spins a whole core and logs thousands of lines.
    assert!(
        cpu_s <= 0.25 * window + 0.02,
        "{cpu_s} s CPU in {window} s with the broker down"
    );
    assert!(
        retries <= 8,
        "{retries} reconnect attempts in {window:.1} s"
    );

    // The broker comes back empty: no retained messages survive it.
    w.clear();
    let connects_before = daemon.stderr().matches("MQTT: connected").count();
    broker.restart();
    daemon.wait_for("a reconnect", Duration::from_secs(30), || {
        (daemon.stderr().matches("MQTT: connected").count() > connects_before).then_some(())
    });
    let reconnected_ms = now_ms();
    daemon.wait_for(
        "availability, discovery and state after the restart",
        Duration::from_secs(15),
        || announced(&w).then_some(()),
    );
    // A client that subscribes now gets them as retained messages.
    let late = Watcher::start(broker.port, "late", &["wattson/#", "homeassistant/#"]);
    daemon.wait_for(
        "retained availability and discovery",
        Duration::from_secs(10),
        || {
            let online = late
                .last(&availability)
                .is_some_and(|m| m.retain && m.payload == b"online");
            let discovery = late.last(&power_config).is_some_and(|m| m.retain);
            (online && discovery).then_some(())
        },
    );
    daemon.wait_for(
        "samples after the reconnect",
        Duration::from_secs(10),
        || {
            (db_points(&env.db, "meter:wall", Metric::Power)
                .iter()
                .filter(|p| p.0 > reconnected_ms)
                .count()
                >= 2)
                .then_some(())
        },
    );
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", daemon.stderr());

    no_gap_across_the_outage(&env.db, killed_ms, reconnected_ms);
}

/// One sample per 500 ms interval from the first to the last of the database at `db`, across
/// the broker's outage (killed at `killed_ms`, reconnected at `reconnected_ms`), and no gap
/// recorded.
fn no_gap_across_the_outage(db: &Path, killed_ms: i64, reconnected_ms: i64) {
    use wattson_tests::{HOST, db_points};
    const INTERVAL_MS: i64 = 500;
    let power = db_points(db, "meter:wall", Metric::Power);
    let (first, last) = (power[0].0, power[power.len() - 1].0);
    assert!(first < killed_ms && last > reconnected_ms);
    let expected = (last - first + INTERVAL_MS / 2) / INTERVAL_MS + 1;
    let widest = power.windows(2).map(|p| p[1].0 - p[0].0).max().unwrap();
    eprintln!(
        "{} samples over {} ms (expected {expected}), widest step {widest} ms",
        power.len(),
        last - first
    );
    assert!(
        (power.len() as i64 - expected).abs() <= 1,
        "{} samples from {first} to {last}, expected {expected}",
        power.len()
    );
    assert!(
        widest < 2 * INTERVAL_MS,
        "a {widest} ms step in the power series"
    );
    let store = wattson_tests::open_db(db).unwrap();
    assert!(
        store.gaps(HOST, 0, i64::MAX).unwrap().is_empty(),
        "a gap was recorded"
    );
}

/// One state payload as a wattson host publishes it: power and voltage at `ts`.
fn state_payload(ts: i64, watts: f64) -> String {
    format!(
        r#"{{"ts":{ts},"series":[["meter:wall","power","",{watts}],["meter:wall","voltage","",231.0]]}}"#
    )
}

/// Stored power samples `(ts, W)` of `host`, in time order.
fn host_power(store: &wattson::store::Store, host: &str) -> Vec<(i64, f64)> {
    wattson_tests::host_points(store, host, "meter:wall", Metric::Power)
}

fn fleet_into_sqlite(kind: Kind) {
    use wattson_tests::{Child, TestEnv, now_ms, q, wattson};
    const HOSTS: usize = 20;
    const MESSAGES: i64 = 60;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(kind, &Options::default());
    let env = TestEnv::new();
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n\n[mqtt]\nurl = {}\nkeepalive = \"5s\"\n",
        q(broker.url(false))
    ));
    let mut cmd = wattson();
    cmd.arg("--config").arg(&config).arg("collect");
    let mut collector = Child::spawn(cmd);

    // The collector has subscribed once a probe host's message is stored.
    let probe = Watcher::start(broker.port, "probe", &[]);
    collector.wait_for(
        "the collector's subscription",
        Duration::from_secs(15),
        || {
            let _ = probe.client.try_publish(
                "wattson/probe/state",
                rumqttc::QoS::AtLeastOnce,
                false,
                state_payload(now_ms(), 1.0),
            );
            let store = wattson_tests::open_db(&env.db)?;
            (!host_power(&store, "probe").is_empty()).then_some(())
        },
    );

    // A minute of 1 Hz state per host, then each host sends its first five again, as a
    // publisher retrying unacknowledged messages would. Against mosquitto (the broker CI
    // installs) the hosts publish in real time, one state a second for 60 s; against the
    // embedded broker the same minute goes out as fast as the broker takes it.
    let pace = (kind == Kind::Mosquitto).then_some(Duration::from_secs(1));
    let t0 = now_ms() - 120_000;
    let started = std::time::Instant::now();
    let publishers: Vec<_> = (0..HOSTS)
        .map(|i| {
            let topic = format!("wattson/host{i}/state");
            let mut msgs: Vec<(String, String)> = (0..MESSAGES)
                .map(|k| {
                    (
                        topic.clone(),
                        state_payload(t0 + k * 1000, 100.0 + i as f64),
                    )
                })
                .collect();
            msgs.extend(msgs[..5].to_vec());
            rt.spawn(wattson_tests::broker::publish_acked(
                broker.port,
                format!("host{i}"),
                msgs,
                false,
                pace,
            ))
        })
        .collect();
    for p in publishers {
        rt.block_on(p).unwrap();
    }
    let published = started.elapsed();
    let want: Vec<i64> = (0..MESSAGES).map(|k| t0 + k * 1000).collect();
    collector.wait_for(
        "every host's minute in the database",
        Duration::from_secs(30),
        || {
            let store = wattson_tests::open_db(&env.db)?;
            (0..HOSTS)
                .all(|i| host_power(&store, &format!("host{i}")).len() as i64 >= MESSAGES)
                .then_some(())
        },
    );
    let stored = started.elapsed();
    collector.signal(nix::sys::signal::Signal::SIGTERM);
    let status = collector.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", collector.stderr());

    let store = wattson_tests::open_db(&env.db).unwrap();
    for i in 0..HOSTS {
        let host = format!("host{i}");
        let power = host_power(&store, &host);
        let ts: Vec<i64> = power.iter().map(|p| p.0).collect();
        assert_eq!(ts, want, "{kind:?} {host}: not each sample exactly once");
        assert!(power.iter().all(|p| p.1 == 100.0 + i as f64), "{host}");
        let hours = store
            .rollups(
                &wattson::store::SeriesFilter::all()
                    .host(&host)
                    .source(&"meter:wall".into())
                    .metric(Metric::Power),
                wattson::store::Resolution::Hour,
                0,
                i64::MAX,
            )
            .unwrap();
        let n: u64 = hours.iter().flat_map(|(_, h)| h).map(|h| h.n).sum();
        assert_eq!(n, MESSAGES as u64, "{kind:?} {host}: rollups count {n}");
    }
    eprintln!(
        "{kind:?}: {HOSTS} hosts x {MESSAGES} messages (+5 repeats each, {}) acknowledged by \
         the broker in {published:?}, all stored after {stored:?}",
        if pace.is_some() { "1 Hz" } else { "burst" }
    );
    assert_eq!(wattson_tests::integrity_check(&env.db), "ok");
}

/// 20 hosts' minute of 1 Hz state (in real time on mosquitto, compressed on rumqttd) through
/// a real broker into one `wattson collect` process and its SQLite file: every sample stored
/// exactly once.
#[test]
fn fleet_of_20_hosts_into_sqlite_stores_every_sample_once() {
    for kind in kinds() {
        fleet_into_sqlite(kind);
    }
}

/// A scripted MQTT 3.1.1 broker for one client at a time: it accepts the connection and the
/// subscription, delivers one QoS 1 message, and answers pings. What it does with the
/// client's PUBACK is the test's choice, which no real broker offers.
mod scripted {
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::Duration;

    use wattson_tests::scripted::{packet, read_packet};

    /// One session: CONNACK (with `session_present`), SUBACK, then PUBLISH `payload` on
    /// `topic` at QoS 1 with packet id 7 (`dup` set on a redelivery). Serves until the
    /// client goes away; returns whether it acknowledged packet 7.
    pub fn serve(
        listener: &TcpListener,
        session_present: bool,
        topic: &str,
        payload: &[u8],
        dup: bool,
        on_ack: impl Fn(),
    ) -> bool {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let (kind, _) = read_packet(&mut s).unwrap();
        assert_eq!(kind >> 4, 1, "CONNECT first");
        s.write_all(&packet(0x20, &[u8::from(session_present), 0]))
            .unwrap();
        let mut acked = false;
        let mut published = false;
        while let Ok((kind, body)) = read_packet(&mut s) {
            match kind >> 4 {
                8 => {
                    // SUBSCRIBE: grant QoS 1, then deliver.
                    s.write_all(&packet(0x90, &[body[0], body[1], 1])).unwrap();
                    if !published {
                        published = true;
                        let mut p = (topic.len() as u16).to_be_bytes().to_vec();
                        p.extend_from_slice(topic.as_bytes());
                        p.extend_from_slice(&7u16.to_be_bytes());
                        p.extend_from_slice(payload);
                        s.write_all(&packet(0x32 | if dup { 0x08 } else { 0 }, &p))
                            .unwrap();
                    }
                }
                4 if body == [0, 7] => {
                    acked = true;
                    on_ack();
                }
                12 => s.write_all(&[0xd0, 0]).unwrap(), // PINGREQ
                14 => break,                            // DISCONNECT
                _ => {}
            }
        }
        acked
    }
}

/// The fleet collector is killed (SIGKILL) after it stored a QoS 1 message, and the broker
/// never counts the acknowledgement, as when the process dies before its PUBACK leaves: the
/// broker redelivers the message (DUP set) to the next run, on the same session, and the
/// database still holds that sample once.
#[test]
fn a_message_redelivered_after_the_collector_is_killed_is_stored_once() {
    use wattson_tests::{Child, HOST, TestEnv, db_points, q, wattson};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let env = TestEnv::new();
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n\n[mqtt]\nurl = {}\nkeepalive = \"5s\"\n",
        q(format!("mqtt://127.0.0.1:{port}"))
    ));
    let ts = wattson_tests::now_ms() - 5_000;
    let payload = state_payload(ts, 77.0);
    let topic = format!("wattson/{HOST}/state");
    let (acked_tx, acked_rx) = std::sync::mpsc::channel();
    let broker = std::thread::spawn(move || {
        // The first run's acknowledgement is lost with it; the second run's is awaited.
        let _ = scripted::serve(&listener, false, &topic, payload.as_bytes(), false, || {});
        scripted::serve(&listener, true, &topic, payload.as_bytes(), true, || {
            let _ = acked_tx.send(());
        })
    });
    let collect = || {
        let mut cmd = wattson();
        cmd.arg("--config")
            .arg(&config)
            .args(["collect", "--client-id", "collector"]);
        Child::spawn(cmd)
    };

    let mut first = collect();
    first.wait_for("the sample stored", Duration::from_secs(15), || {
        (!db_points(&env.db, "meter:wall", Metric::Power).is_empty()).then_some(())
    });
    first.signal(nix::sys::signal::Signal::SIGKILL);
    first.wait_exit(Duration::from_secs(5)).unwrap();

    let mut second = collect();
    acked_rx
        .recv_timeout(Duration::from_secs(15))
        .unwrap_or_else(|_| panic!("redelivery not acknowledged; stderr:\n{}", second.stderr()));
    second.signal(nix::sys::signal::Signal::SIGTERM);
    let status = second.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", second.stderr());
    assert!(broker.join().unwrap(), "second run acknowledged");

    assert_eq!(
        db_points(&env.db, "meter:wall", Metric::Power),
        vec![(ts, 77.0)],
        "stored once"
    );
    let store = wattson_tests::open_db(&env.db).unwrap();
    let hours = store
        .rollups(
            &wattson::store::SeriesFilter::all()
                .host(HOST)
                .source(&"meter:wall".into())
                .metric(Metric::Power),
            wattson::store::Resolution::Hour,
            0,
            i64::MAX,
        )
        .unwrap();
    let n: u64 = hours.iter().flat_map(|(_, h)| h).map(|h| h.n).sum();
    assert_eq!(n, 1, "the hour rollup counts it once");
}

/// `wattson collect` run with a host's own config file (its meter read every 1 s, its
/// states published every 5 s): the collector judges that host's pairs by the states'
/// spacing, not by the meter's interval of the config, and stores its energy within 1 %
/// of what the host stored itself over the same stretch (every pair was a gap).
#[test]
fn a_collector_with_the_hosts_own_config_stores_the_hosts_energy() {
    use wattson_tests::{Child, HOST, TestEnv, q, simulate, wattson};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let meter = simulate("pzem004t", &[1], 80.0);
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n{}\n[mqtt]\nurl = {}\npublish_interval = \"5s\"\ndiscovery = false\n",
        wattson_tests::meter_toml("wall", "pzem004t", &meter.path, "1s", Some(1)),
        q(broker.url(false))
    ));
    let fleet_db = env.path("fleet.db");
    let mut cmd = wattson();
    cmd.arg("--config")
        .arg(&config)
        .args(["collect", "--db"])
        .arg(&fleet_db);
    let mut collector = Child::spawn(cmd);
    collector.wait_for_log("collecting every host's samples", Duration::from_secs(15));
    let mut host = Child::run_daemon(&config, &[]);
    let power = |db: &Path| {
        wattson_tests::open_db(db).map_or_else(Vec::new, |s| {
            wattson_tests::host_points(&s, HOST, "meter:wall", Metric::Power)
        })
    };
    collector.wait_for(
        "seven of the host's states collected",
        Duration::from_secs(60),
        || (power(&fleet_db).len() >= 7).then_some(()),
    );
    host.stop_cleanly();
    collector.signal(nix::sys::signal::Signal::SIGTERM);
    collector.wait_exit(Duration::from_secs(10)).unwrap();
    let collected = power(&fleet_db);
    let (from, to) = (collected[0].0, collected[collected.len() - 1].0);
    let energy = |db: &Path| {
        let store = wattson_tests::open_db(db).unwrap();
        wattson::ledger::energy::energy(&store, HOST, &"meter:wall".into(), from, to)
            .unwrap()
            .wh
    };
    let (own, fleet) = (energy(&env.db), energy(&fleet_db));
    assert!(own > 0.0, "the host stored nothing");
    assert!(
        (fleet - own).abs() <= 0.01 * own,
        "collected {fleet} Wh against the host's own {own} Wh over {from}..{to}"
    );
    drop(meter);
}
