//! End-to-end MQTT tests against real brokers: rumqttd embedded, and mosquitto when it is
//! installed (`apt-get install mosquitto`). Tests that need to kill a broker, a password
//! file or a TLS listener use mosquitto and are skipped (with a note) without it.
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
use wattson::mqtt::state::MeterCounters;
use wattson::mqtt::{Publisher, SharedMemorySink, StateExtras, fleet};
use wattson::runtime::live::LiveState;
use wattson_collectors::{Collector, Metric, Sample};
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, kinds, wait_for};

fn cfg(url: String, client_id: &str) -> MqttConfig {
    MqttConfig {
        url,
        client_id: client_id.to_owned(),
        username: None,
        password_file: None,
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

fn extras() -> wattson::mqtt::publisher::ExtrasFn {
    Arc::new(|| StateExtras {
        currency: "GBP".into(),
        cost_today: Some(0.42),
        cost_month: Some(5.5),
        annual_projection: Some(189.22),
        energy_today_kwh: Some(1.5),
        mode: Some("idle".into()),
        mode_options: vec!["standby".into(), "idle".into(), "1 loop".into()],
        primary_meter: Some("wall".into()),
        meter_counters: vec![MeterCounters {
            id: "wall".into(),
            good: 100,
            crc_errors: 1,
            timeouts: 2,
            implausible: 0,
        }],
        idle_regression: None,
    })
}

/// Feed a LiveState like the sampler would: 230 W and 250 W alternately (mean 240 W).
fn feed(live: Arc<LiveState>, cancel: CancellationToken) {
    tokio::spawn(async move {
        let mut n = 0_u64;
        let mut ts = wattson::runtime::sampler::now_ms();
        loop {
            ts = ts.max(wattson::runtime::sampler::now_ms()) + 1;
            let w = if n.is_multiple_of(2) { 230.0 } else { 250.0 };
            live.observe(&[
                Sample::new(ts, "meter:wall", Metric::Power, "", w),
                Sample::new(ts, "meter:wall", Metric::Voltage, "", 231.0),
                Sample::new(ts, "meter:wall", Metric::EnergyTotal, "", n as f64),
                Sample::new(ts, "cpu", Metric::CpuBusy, "all", 0.25),
                Sample::new(ts, "cpu", Metric::CoreFrequency, "mean", 2200.0),
                Sample::new(ts, "cpu", Metric::IdleResidency, "all/C1", 0.2),
                Sample::new(ts, "cpu", Metric::IdleResidency, "all/C6", 0.5),
            ]);
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

async fn state_and_discovery(kind: Kind) {
    let broker = TestBroker::start(kind, &Options::default());
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    // A previous run announced an entity this run does not have: it must be removed.
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

    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    feed(live.clone(), cancel.clone());
    let h = Publisher::spawn(
        cfg(broker.url(false), "wattson-basket"),
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
    let mut c = cfg(broker.url(false), "wattson-basket");
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
    if wattson_tests::broker::mosquitto_path().is_none() {
        eprintln!("skipped: needs mosquitto");
        return;
    }
    let mut broker = TestBroker::start(Kind::Mosquitto, &Options::default());
    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    feed(live.clone(), cancel.clone());
    let h = Publisher::spawn(
        cfg(broker.url(false), "wattson-basket"),
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
    let errors = h.stats.connection_errors.load(Ordering::Relaxed);
    eprintln!("outage: {cpu:.3} s CPU in {outage:?}, {errors} connection errors");
    // Generous: 20 % of one core. A spinning reconnect loop uses ~100 %.
    assert!(
        cpu < 0.2 * outage.as_secs_f64(),
        "CPU {cpu} s during outage"
    );
    assert!((1..=8).contains(&errors), "{errors} error lines in 4 s");

    broker.restart();
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    let connects = h.stats.connects.load(Ordering::Relaxed);
    assert!(
        wait_for(Duration::from_secs(15), || w
            .last("wattson/basket/availability")
            .is_some_and(|m| m.payload == b"online")
            && w.last(POWER_CONFIG).is_some()
            && w.last("wattson/basket/state").is_some())
        .await,
        "no reconnect: availability/discovery/state not re-sent"
    );
    assert!(h.stats.connects.load(Ordering::Relaxed) >= connects.max(2));
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
    let mut c = cfg(broker.url(false), "wattson-basket");
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
    let errors = h.stats.connection_errors.load(Ordering::Relaxed);
    // Backoff 0.5, 1, 2, 4 s (each 50-100 %): at most 5 attempts fit in 4 s.
    assert!(
        (2..=6).contains(&errors),
        "{kind:?}: {errors} error lines in 4 s"
    );
    assert_eq!(h.stats.connects.load(Ordering::Relaxed), 0);
    cancel.cancel();
    h.join.await.unwrap();

    // The right password connects.
    std::fs::write(&pw, "right-horse\n").unwrap();
    let cancel = CancellationToken::new();
    let h = Publisher::spawn(c, "basket".into(), live, extras(), cancel.clone()).unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || h
            .stats
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
        h.stats.connects.load(Ordering::Relaxed) > 0
    })
    .await;
    cancel.cancel();
    let stats = h.stats.clone();
    h.join.await.unwrap();
    (
        stats.connects.load(Ordering::Relaxed),
        stats.connection_errors.load(Ordering::Relaxed),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verifies_the_broker_against_the_ca_file() {
    let have_openssl = std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if wattson_tests::broker::mosquitto_path().is_none() || !have_openssl {
        eprintln!("skipped: needs mosquitto and openssl");
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
    let mut c = cfg(broker.url(true), "wattson-basket");
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
    let collector_cfg = cfg(broker.url(false), "collector");
    let start_collector = |cancel: CancellationToken| {
        let (c, mut s, st) = (collector_cfg.clone(), sink.clone(), stats.clone());
        tokio::spawn(async move {
            fleet::run(&c, "wattson-collect-test", &mut s, &st, cancel)
                .await
                .unwrap();
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
            stats.stored.load(Ordering::Relaxed) > 0
        })
        .await,
        "{kind:?}: collector never subscribed"
    );

    let cancel = CancellationToken::new();
    let mut handles = Vec::new();
    for i in 0..hosts {
        let live = Arc::new(LiveState::default());
        feed(live.clone(), cancel.clone());
        let mut c = cfg(broker.url(false), &format!("wattson-host{i}"));
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
                .entry((x.ts_ms, x.source.clone(), x.metric, x.channel.clone()))
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
        wattson::mqtt::PlugSpec {
            id: "desk".into(),
            kind: wattson::mqtt::PlugKind::Tasmota,
            topic: "tasmota_1A2B3C".into(),
        },
        wattson::mqtt::PlugSpec {
            id: "nas".into(),
            kind: wattson::mqtt::PlugKind::Shelly,
            topic: "shellyplusplugs-aabbcc".into(),
        },
    ];
    let (join, mut collectors) = wattson::mqtt::plug::spawn_plugs(
        &cfg(broker.url(false), "wattson-basket"),
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
    assert_eq!(collectors[0].name(), "meter:desk");
    assert_eq!(power(&got[0]), 38.0);
    assert_eq!(power(&got[1]), 41.7);
    cancel.cancel();
    join.await.unwrap();
}
