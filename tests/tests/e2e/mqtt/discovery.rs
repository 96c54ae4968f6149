//! The publisher's state and Home Assistant discovery: the documented payloads, a stale
//! entity removed, discovery sent again when Home Assistant restarts, and turned off.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{POWER_CONFIG, cfg, extras, feed};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wattson::live::LiveState;
use wattson::publish::mqtt::Publisher;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, kinds, wait_for};

fn json(m: &wattson_tests::broker::Msg) -> Value {
    serde_json::from_slice(&m.payload).unwrap()
}

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
