//! What `wattson idle` makes of the daemon's history: a package kept awake explained, the
//! deepest package state for Home Assistant, the wall draw of the configured meter.

use std::time::Duration;

use nix::sys::signal::Signal;
use wattson_tests::idle::{host_toml, intel_desktop, run_ok};
use wattson_tests::{Child, TestEnv, q};

#[test]
fn idle_explains_a_package_kept_awake_from_the_daemons_history() {
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}flush_interval = \"200ms\"\n\n[cpu]\ninterval = \"100ms\"\n",
            host_toml(&root, &env.db)
        ),
    )
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let advancer = {
        let (root, stop) = (root.clone(), stop.clone());
        std::thread::spawn(move || wattson_tests::idle::advance_counters(&root, &stop))
    };
    let mut daemon = Child::run_daemon(&config, &[]);
    // Wait for 80 package samples (8 s at 10 Hz) in the database.
    daemon.wait_for("package C-state history", Duration::from_secs(60), || {
        let n =
            wattson_tests::db_points(&env.db, "cpu", wattson_collectors::Metric::PackageResidency)
                .len();
        (n >= 5 * 80).then_some(())
    });
    daemon.signal(Signal::SIGTERM);
    daemon.wait_exit(Duration::from_secs(10)).unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    advancer.join().unwrap();

    let text = run_ok(&config, &["idle"]);
    eprintln!("{text}");
    assert!(
        text.contains(
            "deepest package C-state reached: PC3 (PC6 and deeper never, 0 % of the last"
        ),
        "{text}"
    );
    // The cores' share is cpuidle time against the collector's own clock: near the 78 %
    // written. A stay is counted when the writer gets to it, late on a loaded machine; what
    // is late is carried, not lost, but the last lag before the daemon stops is not yet
    // seen (a third of a second of it is 3 points of 9 s).
    let cores = text
        .split("although the cores spend ")
        .nth(1)
        .and_then(|t| t.split(" %").next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no core share in {text}"));
    assert!((72.0..=80.0).contains(&cores), "{cores} % in {text}");
    assert!(
        text.contains("% in C6 and deeper: something keeps the package awake"),
        "{text}"
    );
    assert!(
        text.contains(
            "something keeps the package awake; candidates: ASPM is disabled (policy \
             `performance`), SATA host0-host3 at `max_performance`, 0000:00:17.0 runtime PM `on`, \
             0000:03:00.0 runtime PM `on`"
        ),
        "{text}"
    );
    // The package's shares are the written 30 % and 70 %, give or take the same skew the
    // cores' share has: the simulated machine steps the TSC and the residency counters in
    // separate writes, and on a loaded machine a sample can land between them.
    let shares = text
        .lines()
        .find(|l| l.contains("PC2 ") && l.contains("PC10 "))
        .unwrap_or_else(|| panic!("no package shares in {text}"));
    let share = |state: &str| {
        shares
            .split(&format!("{state} "))
            .nth(1)
            .and_then(|t| t.split(" %").next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {state} share in {text}"))
    };
    assert!((28.0..=32.0).contains(&share("PC2")), "PC2 in {text}");
    assert!((68.0..=72.0).contains(&share("PC3")), "PC3 in {text}");
    assert!(text.contains("PC6 0.0 %  PC8 0.0 %  PC10 0.0 %"), "{text}");
    assert!(
        text.contains("firmware limit: unlimited (locked)"),
        "{text}"
    );
    assert!(text.contains("PCIe ASPM policy"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&run_ok(&config, &["idle", "--json"])).unwrap();
    assert_eq!(v["package"]["deepest_reached"], "PC3");
    assert_eq!(v["window"]["source"], "history");
    assert_eq!(v["package"]["platform"], "adl");
    assert!(v["settings"].as_array().unwrap().len() > 20);
    assert!(
        v["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "pcie_aspm" && c["changed"] == "powersave")
    );
}

#[test]
fn home_assistant_gets_the_deepest_package_state_and_its_residency() {
    use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let root = env.path("machine");
    intel_desktop(&root);
    let config = env.path("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "{}flush_interval = \"200ms\"\n\n[cpu]\ninterval = \"100ms\"\n\n[mqtt]\nurl = {}\n\
             publish_interval = \"1s\"\n",
            host_toml(&root, &env.db),
            q(broker.url(false))
        ),
    )
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let advancer = {
        let (root, stop) = (root.clone(), stop.clone());
        std::thread::spawn(move || wattson_tests::idle::advance_counters(&root, &stop))
    };
    let w = Watcher::start(broker.port, "watch-idle", &["wattson/#", "homeassistant/#"]);
    let daemon = Child::run_daemon(&config, &[]);
    let discovery = "homeassistant/sensor/wattson_e2e/package_cstate_deepest/config";
    let state: serde_json::Value = daemon.wait_for(
        "a state with the package's deepest state, and its discovery",
        Duration::from_secs(30),
        || {
            w.last(discovery)?;
            let m = w.last("wattson/e2e/state")?;
            let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            (v["package_cstate_deepest"] == "PC3").then_some(v)
        },
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    advancer.join().unwrap();
    let residency = state["package_cstate_deepest_residency"].as_f64().unwrap();
    assert!((residency - 70.0).abs() < 2.0, "{state}");
    let config: serde_json::Value =
        serde_json::from_slice(&w.last(discovery).unwrap().payload).unwrap();
    assert_eq!(config["device_class"], "enum");
    assert_eq!(
        config["default_entity_id"],
        "sensor.wattson_e2e_package_cstate_deepest"
    );
    let residency_config: serde_json::Value = serde_json::from_slice(
        &w.last("homeassistant/sensor/wattson_e2e/package_cstate_deepest_residency/config")
            .unwrap()
            .payload,
    )
    .unwrap();
    assert_eq!(residency_config["unit_of_measurement"], "%");
    assert_eq!(residency_config["state_class"], "measurement");
}

/// Regression: the idle section took the wall draw from the first `meter:` series by name,
/// not from the wall source the rest of the report uses (the configured meter). Two meters
/// share the database: `a` (a second machine's plug, 100 W, first by name) and `b` (this
/// machine's configured wall meter, 40 W); the idle hours must be at 40 W.
#[test]
fn the_idle_sections_wall_draw_is_the_configured_meter_not_the_first_by_name() {
    use wattson::store::{Store, StoreOptions, Writer};
    use wattson_collectors::source::channel;
    use wattson_collectors::{Metric, Sample};

    let env = TestEnv::new();
    let config = env.config(&wattson_tests::meter_toml(
        "b",
        "pzem004t",
        &env.path("ttyUSB0"),
        "1s",
        None,
    ));
    let options = StoreOptions {
        host: wattson_tests::HOST.to_owned(),
        ..StoreOptions::default()
    };
    let mut writer = Writer::new(Store::open(&env.db, &options).unwrap(), options);
    // Three whole hours of samples a minute apart, ending at the last hour boundary.
    let hour = 3_600_000;
    let end = wattson_tests::now_ms() / hour * hour;
    let mut batch = Vec::new();
    for ts in (end - 3 * hour..end).step_by(60_000) {
        batch.push(Sample::new(ts, "meter:a", Metric::Power, "", 100.0));
        batch.push(Sample::new(ts, "meter:b", Metric::Power, "", 40.0));
        batch.push(Sample::new(ts, "cpu", Metric::CpuBusy, channel::ALL, 0.02));
        batch.push(Sample::new(
            ts,
            "cpu",
            Metric::PackageResidency,
            channel::all("PC2"),
            0.5,
        ));
    }
    writer.push(Some(wattson_tests::HOST.to_owned()), batch);
    writer.flush().unwrap();
    drop(writer);

    let json: serde_json::Value =
        serde_json::from_str(&run_ok(&config, &["report", "--format", "json"])).unwrap();
    assert_eq!(json["measured"]["source"], "meter:b", "{json}");
    let shallow = &json["idle"]["hours_shallow"];
    assert_eq!(shallow["hours"], 3, "{json}");
    assert!(
        (shallow["mean_wall_watts"].as_f64().unwrap() - 40.0).abs() < 1e-6,
        "{shallow}"
    );
    let text = run_ok(&config, &["report"]);
    assert!(
        text.contains(
            "at the wall: 40.0 W over 3 idle h, in none of which the package reached PC6"
        ),
        "{text}"
    );
}
