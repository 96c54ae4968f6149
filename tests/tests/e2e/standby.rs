//! Standby measured at the wall: a host that slept 7 hours at 4 W while its meter counted
//! on. The history before the sleep is stored as a daemon left it (a PZEM-004T's power and
//! counter, the kernel's boot id and time asleep); the daemon then starts with the kernel
//! saying the same boot slept 7 h more (a time namespace: `CLOCK_BOOTTIME` 7 h ahead) and
//! the meter's counter 28 Wh on. The time away is the host's standby: 4.0 W within the
//! counter's 1 Wh step at each end over 7 h, priced at the night's price, in `status`, the
//! report (JSON, text, CSV, the configuration's modes) and the MQTT state with its Home
//! Assistant entity.

// Test helpers unwrap: a failed expectation is a panic with a message.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wattson::store::{KernelClockRow, Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};
use wattson_tests::away::with_more_sleep;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::ledger::run;
use wattson_tests::{Child, HOST, TestEnv, kvm_fixture, q, simulate_counted, wattson};

const BOOT: &str = "3f1c0e9a-7d4b-4e2f-9a51-0c6f2b8d1e77";
const HOUR: i64 = 3_600_000;
const SLEPT_S: u32 = 7 * 3600;
const STANDBY_W: f64 = 4.0;
const AWAKE_W: f64 = 40.0;
const NIGHT: f64 = 0.10;
const DAY: f64 = 0.30;

/// A procfs with the fixture's files and this boot's id.
fn procfs(dir: &Path) -> std::path::PathBuf {
    let proc = dir.join("proc");
    std::fs::create_dir_all(proc.join("sys/kernel/random")).unwrap();
    for f in ["stat", "cpuinfo"] {
        std::fs::copy(kvm_fixture().join("proc").join(f), proc.join(f)).unwrap();
    }
    std::fs::write(proc.join("sys/kernel/random/boot_id"), format!("{BOOT}\n")).unwrap();
    proc
}

/// `HH:MM` of `ms` in UTC.
fn hhmm(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .format("%H:%M")
        .to_string()
}

/// Two minutes of the awake host up to `end_ms` as the daemon stored them (power and the
/// counter, a reading a second) and the kernel's clocks then; the counter's last value.
fn history_before_the_sleep(db: &Path, end_ms: i64, slept_ms: i64) -> f64 {
    let opts = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    let mut w = Writer::new(Store::open(db, &opts).unwrap(), opts.clone());
    let mut counter = 0.0;
    for i in 0..=120 {
        let t = end_ms - (120 - i) * 1000;
        counter = (1000.0 + AWAKE_W * (i * 1000) as f64 / 3_600_000.0).floor();
        w.push(
            None,
            vec![
                Sample::new(t, "meter:wall", Metric::Power, "", AWAKE_W),
                Sample::new(t, "meter:wall", Metric::EnergyCounter, "", counter),
            ],
        );
    }
    w.flush().unwrap();
    w.store()
        .record_kernel_clock(
            HOST,
            &KernelClockRow {
                since_ms: end_ms - 120_000,
                boot_id: BOOT.to_owned(),
                slept_ms,
            },
        )
        .unwrap();
    counter
}

#[test]
fn a_night_asleep_is_standby_measured_at_the_wall_and_priced_at_the_night_price() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    let now = wattson_collectors::now_ms();
    let asleep_from = now - i64::from(SLEPT_S) * 1000;
    // The kernel's time asleep as this process reads it; the daemon's kernel says 7 h more.
    let slept_ms = wattson_collectors::kernel_clock::slept_ms().unwrap();
    let counter = history_before_the_sleep(&env.db, asleep_from, slept_ms);
    let meter = simulate_counted("pzem004t", &[1], AWAKE_W, counter + STANDBY_W * 7.0);
    let config = env.dir.path().join("standby.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\nname = {}\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\n\
             flush_interval = \"200ms\"\n\n[cpu]\nenabled = false\n\n\
             [tariff]\ncurrency = \"GBP\"\nprice_per_kwh = {DAY}\ntimezone = \"UTC\"\n\n\
             [[tariff.period]]\nstart = \"{}\"\nend = \"{}\"\nprice_per_kwh = {NIGHT}\n{}{}",
            q(HOST),
            q(kvm_fixture().join("sys")),
            q(procfs(env.dir.path())),
            q(&env.db),
            hhmm(asleep_from - HOUR),
            hhmm(now + 2 * HOUR),
            wattson_tests::ledger::meter_toml(&meter.path, "250ms"),
            wattson_tests::ledger::mqtt_toml(&broker, "1s"),
        ),
    )
    .unwrap();
    let watcher = Watcher::start(broker.port, "standby", &["wattson/#", "homeassistant/#"]);

    let mut cmd = wattson();
    with_more_sleep(&mut cmd, SLEPT_S);
    let mut daemon = Child::run_daemon_with(cmd, &config, &[]);
    let report = daemon.wait_for("the sleep settled", Duration::from_secs(60), || {
        let json: Value =
            serde_json::from_str(&run(&config, &["report", "--format", "json"])).ok()?;
        json["measured"]["away"]
            .as_array()
            .filter(|a| !a.is_empty())?;
        Some(json)
    });
    let state = daemon.wait_for("standby in the MQTT state", Duration::from_secs(90), || {
        let m = watcher.last(&format!("wattson/{HOST}/state"))?;
        let v: Value = serde_json::from_slice(&m.payload).ok()?;
        v.get("standby_power").is_some().then_some(v)
    });
    let config_topic = format!("homeassistant/sensor/wattson_{HOST}/standby_power/config");
    let entity = daemon.wait_for("the standby entity", Duration::from_secs(10), || {
        serde_json::from_slice::<Value>(&watcher.last(&config_topic)?.payload).ok()
    });
    daemon.stop_cleanly();

    // The gap: from the last reading before the sleep to the daemon's start, the host
    // asleep over all of it by the kernel's clocks.
    let m = &report["measured"];
    let gap = &m["gaps"][0];
    assert!(
        gap["reason"]
            .as_str()
            .unwrap()
            .starts_with("the host was asleep for 7 h"),
        "{gap}"
    );
    let hours = gap["hours"].as_f64().unwrap();
    assert!((7.0..7.02).contains(&hours), "{gap}");

    let a = &m["away"][0];
    eprintln!("standby: {a}");
    assert_eq!(a["mode"], "standby", "{a}");
    assert_eq!(a["times"], 1, "{a}");
    let watts = a["watts"].as_f64().unwrap();
    let band = a["ci95_watts"].as_f64().unwrap();
    // The counter's 1 Wh step at each end, over the 7 h.
    assert!((band - 2.0 / hours).abs() < 1e-6, "{a}");
    let truth = STANDBY_W * 7.0 / hours;
    assert!(
        (watts - truth).abs() <= band,
        "{watts} W against {truth} W ± {band}"
    );
    // Priced at the night's price, to the cent and below.
    let wh = a["wh"].as_f64().unwrap();
    let cost = a["cost"].as_f64().unwrap();
    assert!((cost - wh / 1000.0 * NIGHT).abs() < 1e-9, "{a}");

    // What sleeping when idle would save prices sleep at it.
    let sleep = &report["sleep"];
    assert_eq!(sleep["standby_watts"].as_f64(), Some(watts), "{sleep}");
    assert_eq!(sleep["standby_from"], a["basis"], "{sleep}");

    // The same figure in status (JSON and words), the text report and CSV.
    let status: Value = serde_json::from_str(&run(&config, &["status", "--json"])).unwrap();
    let s = &status["cost"]["away"][0];
    assert_eq!(s["watts"].as_f64(), Some(watts), "{status}");
    assert_eq!(s["cost"].as_f64(), Some(cost), "{status}");
    let text = run(&config, &["status"]);
    let line = format!("standby      {watts:.2} W ± {band:.2} (measured at the wall");
    assert!(text.contains(&line), "{line:?} not in\n{text}");
    let text = run(&config, &["report"]);
    assert!(
        text.contains(&format!("standby: {watts:.2} W ± {band:.2}")),
        "{text}"
    );
    let csv = run(&config, &["report", "--format", "csv"]);
    assert!(
        csv.lines()
            .any(|l| l.starts_with(&format!("meter:wall,away,standby,{watts:.2},{band:.2},"))),
        "{csv}"
    );

    // MQTT: the figure, its band and a Home Assistant power sensor for it.
    assert!(
        (state["standby_power"].as_f64().unwrap() - watts).abs() < 1e-9,
        "{state}"
    );
    assert!(
        (state["standby_power_ci95"].as_f64().unwrap() - band).abs() < 1e-9,
        "{state}"
    );
    assert_eq!(entity["device_class"], "power", "{entity}");
    assert_eq!(entity["unit_of_measurement"], "W", "{entity}");
}
