//! End-to-end MQTT tests against real brokers: rumqttd embedded, and mosquitto when it is
//! installed (`apt-get install mosquitto`). Tests that need to kill a broker, a password
//! file or a TLS listener use mosquitto and are skipped (with a note) without it, except
//! under CI (`CI=true`), where they fail.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wattson::config::MqttConfig;
use wattson::live::LiveState;
use wattson::publish::mqtt::StateExtras;
use wattson::publish::mqtt::state::MeterCounters;
use wattson_collectors::{Collector, Metric, Sample};
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, wait_for};

mod collect;
mod credentials;
mod discovery;
mod hosts;
mod reconnect;

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
        lines: wattson::config::KeyLines::default(),
    }
}

fn extras() -> wattson::publish::mqtt::publisher::Extras {
    tokio::sync::watch::channel(StateExtras {
        currency: "GBP".into(),
        cost_today: Some(0.42),
        cost_month: Some(5.5),
        cost_total: Some(11.25),
        annual_projection: Some(189.22),
        annual_basis: Some("a year on your tariff: this machine's load in each hour of the week, from 168.0 h measured in the last 7 days".into()),
        standing_charge_annual: Some(182.5),
        price_now: None,
        standby_watts: None,
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
            exceptions: 0,
        }],
        idle_regression: None,
        services: Vec::new(),
        wattson_itself: None,
        wakeups: None,
        disks: Vec::new(),
        estimated: None,
        sleep: None,
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

const POWER_CONFIG: &str = "homeassistant/sensor/wattson_basket/power/config";

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
