//! Idle-power regression end to end: a baseline sweep at 40 W and a monthly
//! `--regression-check` sweep at 48 W against a simulated meter store a detected regression;
//! `wattson report` shows it in every format, and `wattson run` publishes it over MQTT as a
//! Home Assistant `problem` binary sensor with the check's numbers as attributes.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wattson::cli::SweepArgs;
use wattson::commands::sweep::sweep_with_config;
use wattson::config::Config;
use wattson::store::Store;
use wattson::sweep::workload::LoopKind;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, wait_for};
use wattson_tests::{Child, HOST, TestEnv, meter_toml, simulate, wattson};

const CONFIG: &str = "monthly";

fn idle_sweep_args(db: &Path) -> SweepArgs {
    SweepArgs {
        name: Some(CONFIG.into()),
        levels: Some(vec![0]),
        kinds: vec![LoopKind::Spin],
        governors: None,
        meter: None,
        max_level_time: Duration::from_secs(10),
        ci_watts: 0.5,
        ci_percent: 1.0,
        min_samples: 10,
        idle_wait: Duration::from_millis(500),
        regression_check: true,
        list: false,
        show: None,
        json: false,
        db: Some(db.to_owned()),
        quiet: false,
    }
}

/// One idle-only sweep with the meter reading `watts`.
async fn sweep_at(env: &TestEnv, watts: f64) {
    let sim = simulate("pzem004t", &[1], watts);
    let path = env.config(&meter_toml("wall", "pzem004t", &sim.path, "100ms", Some(1)));
    let config = Config::load(Some(&path)).unwrap();
    let db = env.db.clone();
    let complete = tokio::task::spawn_blocking(move || {
        sweep_with_config(&config, &idle_sweep_args(&db), CONFIG, &db)
    })
    .await
    .unwrap()
    .unwrap();
    assert!(complete, "the {watts} W sweep was interrupted");
    sim.stop();
}

fn report(config: &Path, format: &str) -> String {
    let out = wattson()
        .arg("--config")
        .arg(config)
        .args(["report", "--format", format])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report --format {format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worse_idle_sweep_is_reported_and_published_as_a_problem() {
    let env = TestEnv::new();
    sweep_at(&env, 40.0).await;
    // The first check has no baseline: nothing is stored, the sweep becomes the baseline.
    {
        let store = Store::open_read_only(&env.db).unwrap();
        assert!(
            wattson::sweep::regression::latest(&store, None)
                .unwrap()
                .is_empty()
        );
    }
    sweep_at(&env, 48.0).await;

    let store = Store::open_read_only(&env.db).unwrap();
    let checks = wattson::sweep::regression::latest(&store, Some(HOST)).unwrap();
    assert_eq!(checks.len(), 1, "{checks:?}");
    let c = &checks[0];
    assert!(c.verdict.detected, "{c:?}");
    assert!((c.baseline.watts - 40.0).abs() < 0.2, "{c:?}");
    assert!((c.latest.watts - 48.0).abs() < 0.2, "{c:?}");
    assert!((c.verdict.delta_w - 8.0).abs() < 0.3, "{c:?}");
    drop(store);

    // The report, every format.
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let sim = simulate("pzem004t", &[1], 48.0);
    let config = env.config(&format!(
        "{}\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n\n[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\nclient_id = \"wattson-e2e\"\npublish_interval = \"300ms\"\n",
        meter_toml("wall", "pzem004t", &sim.path, "200ms", Some(1)),
        broker.port
    ));
    let json: Value = serde_json::from_str(&report(&config, "json")).unwrap();
    let g = &json["regression"];
    assert_eq!(g["status"], "detected", "{g}");
    assert_eq!(g["checks"][0]["config"], CONFIG);
    assert_eq!(g["checks"][0]["detected"], true);
    let delta = g["checks"][0]["delta_watts"].as_f64().unwrap();
    assert!((delta - 8.0).abs() < 0.3, "{g}");
    // 8 W all year at 0.30 per kWh: 70.08 kWh, 21.02 a year.
    let cost = g["checks"][0]["delta_annual_cost"].as_f64().unwrap();
    assert!((cost - delta * 8.76 * 0.30).abs() < 0.01, "{g}");
    for format in ["table", "markdown", "html"] {
        let text = report(&config, format);
        assert!(text.contains("Idle-power regression"), "{format}:\n{text}");
        assert!(text.contains("monthly: detected:"), "{format}:\n{text}");
    }
    let csv = report(&config, "csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "idle_regression").unwrap();
    let row: Vec<&str> = lines
        .find(|l| l.starts_with("monthly,"))
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(row[col], "detected", "{csv}");

    // The daemon reads the check at startup and publishes it.
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    let daemon = Child::run_daemon(&config, &[]);
    let topic = "homeassistant/binary_sensor/wattson_e2e/idle_regression/config";
    assert!(
        wait_for(Duration::from_secs(20), || w.last(topic).is_some()).await,
        "no binary sensor discovery; daemon stderr:\n{}",
        daemon.stderr()
    );
    let disc: Value = serde_json::from_slice(&w.last(topic).unwrap().payload).unwrap();
    assert_eq!(disc["device_class"], "problem");
    assert_eq!(
        disc["default_entity_id"],
        "binary_sensor.wattson_e2e_idle_regression"
    );
    assert_eq!(disc["state_topic"], "wattson/e2e/state");
    assert_eq!(disc["json_attributes_topic"], "wattson/e2e/state");
    // Retained: a Home Assistant that connects later still finds it.
    let late = Watcher::start(broker.port, "late", &["homeassistant/binary_sensor/#"]);
    assert!(
        wait_for(Duration::from_secs(10), || late
            .last(topic)
            .is_some_and(|m| m.retain))
        .await,
        "the binary sensor's discovery is not retained"
    );
    assert!(
        wait_for(Duration::from_secs(10), || w
            .last("wattson/e2e/state")
            .is_some())
        .await
    );
    let state: Value =
        serde_json::from_slice(&w.last("wattson/e2e/state").unwrap().payload).unwrap();
    let r = &state["idle_regression"];
    assert_eq!(r["detected"], true, "{state}");
    assert_eq!(r["config"], CONFIG);
    assert!((r["baseline_idle_w"].as_f64().unwrap() - 40.0).abs() < 0.2);
    assert!((r["latest_idle_w"].as_f64().unwrap() - 48.0).abs() < 0.2);
    assert!((r["delta_w"].as_f64().unwrap() - 8.0).abs() < 0.3);
    assert!(r["delta_ci95_w"].as_f64().unwrap() >= 0.0);
    assert!(r["checked_at"].as_str().unwrap().ends_with('Z'));
    // The announced list names the binary sensor by component, so a later run can remove it.
    let announced: Vec<String> =
        serde_json::from_slice(&w.last("wattson/e2e/discovery").unwrap().payload).unwrap();
    assert!(
        announced.contains(&"binary_sensor/idle_regression".to_owned()),
        "{announced:?}"
    );
    drop(daemon);
    sim.stop();
}
