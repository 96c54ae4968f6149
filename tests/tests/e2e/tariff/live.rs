//! The live price of `[tariff] price_topic` over a real broker into `wattson status`, kept
//! across a restart, with bad payloads counted and never applied.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{HOST, config, json, ok, run};
use nix::sys::signal::Signal;
use serde_json::Value;
use wattson_tests::broker::{Kind, Options, TestBroker, publish_acked};
use wattson_tests::http::{bound_addr, get, metric_value};
use wattson_tests::{Child, q};

#[test]
fn a_price_topic_needs_the_mqtt_section() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let cfg = config(dir.path(), &db, "GBP", "price_topic = \"energy/price\"\n");
    let (code, _, err) = run(&cfg, &["config", "check"]);
    assert_eq!(code, 78, "{err}");
    assert!(
        err.contains("tariff.price_topic") && err.contains("[mqtt]"),
        "{err}"
    );
    let cfg = config(
        dir.path(),
        &db,
        "GBP",
        "price_topic = \"energy/#\"\n[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\n",
    );
    let (code, _, err) = run(&cfg, &["config", "check"]);
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("wildcards"), "{err}");
}

fn status(cfg: &Path) -> Value {
    json(&ok(cfg, &["status", "--json"]))
}

/// The live price: applied from arrival (status shows it and the cost rate of the current
/// draw at it), kept across a restart, and bad payloads (not a number, NaN, infinite,
/// absurd, oversized) counted and never applied.
#[test]
fn a_live_price_over_mqtt_prices_from_arrival_and_survives_a_restart() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let sim = wattson_tests::simulate("pzem004t", &[1], 60.0);
    let extra = format!(
        "price_topic = \"homeassistant/sensor/octopus_current_rate/state\"\n\n\
         [[meter]]\nid = \"wall\"\nprotocol = \"pzem004t\"\nport = {}\naddress = 1\ninterval = \"1s\"\n\n\
         [mqtt]\nurl = {}\npublish_interval = \"1s\"\nkeepalive = \"5s\"\n\n\
         [http]\nlisten = \"127.0.0.1:0\"\n",
        q(&sim.path),
        q(broker.url(false))
    );
    let cfg = config(dir.path(), &db, "GBP", &extra);
    let topic = "homeassistant/sensor/octopus_current_rate/state".to_owned();
    let publish = |payloads: Vec<Vec<u8>>| {
        rt.block_on(publish_acked(
            broker.port,
            format!("ha-{}", wattson_tests::now_ms()),
            payloads.into_iter().map(|p| (topic.clone(), p)).collect(),
            false,
            None,
        ));
    };
    let mut daemon = Child::run_daemon(&cfg, &[]);
    daemon.wait_for_log("price: subscribed", Duration::from_secs(20));
    daemon.wait_for("a stored reading", Duration::from_secs(20), || {
        status(&cfg)["readings"]
            .as_array()
            .filter(|r| !r.is_empty())
            .map(|_| ())
    });
    assert_eq!(status(&cfg)["price"]["source"], "tariff");
    let sent = Instant::now();
    publish(vec![b"0.5".to_vec()]);
    let s = daemon.wait_for(
        "status showing the live price",
        Duration::from_secs(20),
        || {
            let s = status(&cfg);
            (s["price"]["source"] == "mqtt").then_some(s)
        },
    );
    eprintln!(
        "the live price reached status {} ms after it was published (publish interval 1 s)",
        sent.elapsed().as_millis()
    );
    let p = &s["price"];
    assert_eq!(p["price_per_kwh"].as_f64(), Some(0.5));
    let w = p["watts"].as_f64().unwrap();
    assert!((w - 60.0).abs() < 0.5, "{p}");
    assert!((p["cost_per_hour"].as_f64().unwrap() - w / 1000.0 * 0.5).abs() < 1e-9);
    // The exporter shows the same price and where it comes from.
    let addr = bound_addr(&daemon);
    let price_line =
        format!(r#"wattson_tariff_price_per_kwh{{host="{HOST}",currency="GBP",series="mqtt"}}"#);
    daemon.wait_for(
        "/metrics showing the live price",
        Duration::from_secs(20),
        || {
            let body = get(addr, "/metrics", &[])?.body;
            (metric_value(&body, &price_line) == Some(0.5)).then_some(())
        },
    );
    // Not prices: each counted, none applied.
    let oversized = vec![b'1'; 20 * 1024];
    publish(vec![
        b"unavailable".to_vec(),
        b"NaN".to_vec(),
        b"inf".to_vec(),
        b"245".to_vec(),
        oversized,
    ]);
    daemon.wait_for_log(
        "rejected, not applied (4 rejected so far)",
        Duration::from_secs(20),
    );
    publish(vec![b"0.31".to_vec()]);
    daemon.wait_for("the next good price", Duration::from_secs(20), || {
        (status(&cfg)["price"]["price_per_kwh"].as_f64() == Some(0.31)).then_some(())
    });
    let log = daemon.stderr();
    assert!(!log.contains("price 245"), "{log}");
    assert!(
        log.contains("skipped") || log.contains("larger"),
        "the oversized message is counted: {log}"
    );
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
        Some(0)
    );
    // Kept across the restart: the stored slot still prices now.
    let s = status(&cfg);
    assert_eq!(s["price"]["source"], "mqtt", "{}", s["price"]);
    assert_eq!(s["price"]["price_per_kwh"].as_f64(), Some(0.31));
    let list = json(&ok(&cfg, &["tariff", "list", "--json"]));
    let live_series = list
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["source"] == "mqtt")
        .unwrap();
    assert_eq!(live_series["slots"].as_u64(), Some(2), "{live_series}");
    let mut daemon = Child::run_daemon(&cfg, &[]);
    daemon.wait_for_log("price: subscribed", Duration::from_secs(20));
    assert_eq!(status(&cfg)["price"]["price_per_kwh"].as_f64(), Some(0.31));
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
        Some(0)
    );
}
