//! The daemon with no meter and a calibration from ordinary running: `wattson run` estimates
//! the wall live from the model's signal (a fixture RAPL package whose counter a writer
//! advances at a set power), stores it as `estimate:wall` with its band, says where it
//! came from, and withholds it (a gap with the reason) while the package reads above
//! anything the model saw; and its MQTT state, Home Assistant entities, `/metrics` and live
//! page carry the energy and money estimated from the calibration, the figures `wattson
//! status` shows.

#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::http::{HTTP_TOML, bound_addr, get, metric_value};
use wattson_tests::{Child, wattson};

use super::calibration::{METER_OUT, day_of, fit_morning, json};

/// A fixture powercap zone whose counter follows `watts` (W, as f64 bits) in real time.
pub(crate) struct Package {
    watts: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Package {
    pub(crate) fn start(sys: &std::path::Path, watts: f64) -> Package {
        let zone = sys.join("class/powercap/intel-rapl:0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), "package-0\n").unwrap();
        std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
        std::fs::write(zone.join("energy_uj"), "0\n").unwrap();
        let w = Arc::new(AtomicU64::new(watts.to_bits()));
        let stop = Arc::new(AtomicBool::new(false));
        let (w2, stop2, file) = (w.clone(), stop.clone(), zone.join("energy_uj"));
        let writer = std::thread::spawn(move || {
            let mut last = Instant::now();
            let mut uj = 0.0;
            while !stop2.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
                let now = Instant::now();
                uj += f64::from_bits(w2.load(Ordering::Relaxed)) * 1e6 * (now - last).as_secs_f64();
                last = now;
                // Written beside and renamed over, as the kernel's file never reads torn.
                let tmp = file.with_extension("tmp");
                std::fs::write(&tmp, format!("{}\n", uj as u64)).unwrap();
                std::fs::rename(&tmp, &file).unwrap();
            }
        });
        Package {
            watts: w,
            stop,
            writer: Some(writer),
        }
    }

    pub(crate) fn set(&self, watts: f64) {
        self.watts.store(watts.to_bits(), Ordering::Relaxed);
    }
}

impl Drop for Package {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// The estimate samples stored after `after_ms`: `(ts, W)`.
pub(crate) fn estimates(db: &std::path::Path, channel: &str, after_ms: i64) -> Vec<(i64, f64)> {
    let Some(store) = wattson_tests::open_db(db) else {
        return Vec::new();
    };
    let filter = wattson::store::SeriesFilter::all()
        .host(wattson_tests::HOST)
        .source(&"estimate:wall".into())
        .metric(Metric::Power)
        .channel(channel);
    store
        .raw(&filter, after_ms, i64::MAX)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(_, p)| p)
        .collect()
}

/// The first three estimated wall samples stored after `started`: `(ts, W)`.
fn three_estimates(daemon: &Child, db: &std::path::Path, started: i64) -> Vec<(i64, f64)> {
    daemon.wait_for(
        "three estimated wall samples",
        Duration::from_secs(60),
        || {
            let s = estimates(db, "", started);
            (s.len() >= 3).then_some(s)
        },
    )
}

#[test]
fn without_the_meter_the_daemon_estimates_from_the_calibration_and_withholds_outside_it() {
    let day = day_of(wattson_tests::HOST, |i| i < METER_OUT);
    let model = fit_morning(&day, &["--feature", "rapl/power/package-0"]);
    let points: Vec<(f64, f64)> = model["model"]["shape"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    let at = |x: f64| {
        let i = points.windows(2).position(|p| x <= p[1].0).unwrap();
        let ((x0, y0), (x1, y1)) = (points[i], points[i + 1]);
        y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    };
    let band = 2.0 * model["heldout_rms_w"].as_f64().unwrap();

    // The machine: its own RAPL package at 30 W (inside the 12-53 W the model saw).
    let sys = day.env.path("sys");
    let package = Package::start(&sys, 30.0);
    let root = wattson_tests::kvm_fixture();
    let config = day.env.path("live.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\nname = \"e2e\"\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\nflush_interval = \"200ms\"\n\n[cpu]\nenabled = false\n\n[power]\ninterval = \"1s\"\n",
            wattson_tests::q(&sys),
            wattson_tests::q(root.join("proc")),
            wattson_tests::q(&day.env.db)
        ),
    )
    .unwrap();
    let started = wattson_tests::now_ms();
    let mut daemon = Child::run_daemon(&config, &[]);
    let watts = three_estimates(&daemon, &day.env.db, started);
    let want = at(30.0);
    for (_, w) in &watts[1..] {
        assert!(
            (w - want).abs() <= 0.03 * want,
            "{w} W estimated for {want} W: {watts:?}"
        );
    }
    let errors = estimates(&day.env.db, "error", started);
    // Stored to the hundredth of a watt.
    assert!(
        errors.iter().all(|(_, e)| (e - band).abs() <= 0.005 + 1e-9),
        "{errors:?} for {band}"
    );
    daemon.wait_for_log(
        "no wall meter: estimating wall power as calibrate table over rapl/power/package-0 (9 points): estimated from the calibration of",
        Duration::from_secs(5),
    );
    let status = wattson()
        .arg("--config")
        .arg(&config)
        .arg("status")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("W estimated \u{b1}"), "status:\n{text}");

    // 80 W: above anything the model saw. Withheld, said, and a gap with the reason once
    // the package is back inside.
    package.set(80.0);
    daemon.wait_for_log(
        "estimate withheld: rapl/power/package-0 at",
        Duration::from_secs(30),
    );
    package.set(30.0);
    daemon.wait_for_log("estimate:wall: back after", Duration::from_secs(30));
    let gap = daemon.wait_for(
        "the withheld stretch as a gap",
        Duration::from_secs(30),
        || {
            let store = wattson_tests::open_db(&day.env.db)?;
            store
                .gaps(wattson_tests::HOST, started, i64::MAX)
                .ok()?
                .into_iter()
                .find(|g| g.source == "estimate:wall")
        },
    );
    assert!(
        gap.reason.contains("estimate withheld") && gap.reason.contains("outside the"),
        "{gap:?}"
    );
    let shown = json(&day.config, &["calibration", "show"]);
    assert_eq!(shown["minutes"], model["minutes"]);
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
    drop(package);
}

/// With no meter, the calibration's money on every live surface. The machine has no RAPL
/// package of its own (a power supply's hwmon sensor is all it collects), so the daemon adds
/// nothing the model reads and the history it estimates from is the simulated day's alone: the MQTT state's `estimated`, `/metrics` and the live page then give the figures
/// `wattson status` gives, to the last rounding, though the daemon keeps its closed hours
/// and status estimates the week afresh.
#[test]
fn without_the_meter_mqtt_metrics_and_the_page_carry_the_estimated_money() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let day = day_of(wattson_tests::HOST, |i| i < METER_OUT);
    fit_morning(&day, &["--feature", "rapl/power/package-0"]);
    // A power supply's hwmon sensor at a steady 42 W: something to sample and publish that
    // the model does not read.
    let sys = day.env.path("sys");
    let chip = sys.join("class/hwmon/hwmon0");
    std::fs::create_dir_all(&chip).unwrap();
    std::fs::write(chip.join("name"), "testpsu\n").unwrap();
    std::fs::write(chip.join("power1_input"), "42000000\n").unwrap();
    let root = wattson_tests::kvm_fixture();
    let config = day.env.path("live.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\nname = \"e2e\"\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\n\n\
             [cpu]\nenabled = false\n\n[power]\ninterval = \"200ms\"\n{HTTP_TOML}\n[mqtt]\nurl = {}\n\
             publish_interval = \"300ms\"\n",
            wattson_tests::q(&sys),
            wattson_tests::q(root.join("proc")),
            wattson_tests::q(&day.env.db),
            wattson_tests::q(broker.url(false))
        ),
    )
    .unwrap();
    let watcher = Watcher::start(broker.port, "estimated", &["wattson/#", "homeassistant/#"]);
    let mut daemon = Child::run_daemon(&config, &[]);
    let addr = bound_addr(&daemon);
    let topic = format!("wattson/{}/state", wattson_tests::HOST);
    let state = daemon.wait_for(
        "the estimate in the MQTT state",
        Duration::from_secs(60),
        || {
            let m = watcher.last(&topic)?;
            let v: Value = serde_json::from_slice(&m.payload).ok()?;
            v["estimated"]["cost_annual"].is_number().then_some(v)
        },
    );
    let e = &state["estimated"];
    let status: Value = serde_json::from_slice(
        &wattson()
            .arg("--config")
            .arg(&config)
            .args(["status", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let shown = &status["estimated"];
    let round = |v: &Value| (v.as_f64().unwrap() * 1e6).round() / 1e6;
    let week = &shown["last_7_days"];
    assert_eq!(
        e["cost_annual"].as_f64(),
        Some(round(&week["cost"]["cost_per_year"])),
        "MQTT {e} against status {shown:#}"
    );
    assert_eq!(
        e["cost_annual_ci95"].as_f64(),
        Some(round(&week["cost"]["cost_per_year_ci95"]))
    );
    assert_eq!(
        e["energy_today"].as_f64(),
        Some(round(&Value::from(
            shown["today"]["energy_wh"].as_f64().unwrap() / 1000.0
        )))
    );
    assert_eq!(e["minutes"], week["minutes"]);
    assert_eq!(e["basis"], shown["provenance"]);
    assert!(
        state["cost_annual_projection"].is_null(),
        "no measured projection: {state}"
    );

    // Home Assistant: the two entities, named as estimates, the calibration as attributes.
    let entity = daemon.wait_for("the estimated cost entity", Duration::from_secs(10), || {
        let m = watcher.last(&format!(
            "homeassistant/sensor/wattson_{}/estimated_cost_annual/config",
            wattson_tests::HOST
        ))?;
        serde_json::from_slice::<Value>(&m.payload).ok()
    });
    assert_eq!(entity["name"], "Estimated annual cost", "{entity}");
    assert!(
        entity["value_template"]
            .as_str()
            .unwrap()
            .contains("value_json.estimated.cost_annual")
            && entity["json_attributes_template"]
                .as_str()
                .unwrap()
                .contains("value_json.estimated"),
        "{entity}"
    );

    let metrics = get(addr, "/metrics", &[]).unwrap().body;
    assert_eq!(
        metric_value(&metrics, "wattson_estimated_annual_cost{"),
        e["cost_annual"].as_f64(),
        "{metrics}"
    );
    assert!(metrics.contains("# HELP wattson_estimated_annual_cost A year's running cost estimated from the host's calibration"), "{metrics}");
    let live: Value = serde_json::from_str(&get(addr, "/live.json", &[]).unwrap().body).unwrap();
    let year = e["cost_annual"].as_f64().unwrap();
    assert!(
        live["annual_projection_text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("GBP {year:.2}/yr +/- GBP"))
            && live["annual_projection_text"]
                .as_str()
                .unwrap()
                .ends_with("(estimated)")
            && live["annual_basis"]
                .as_str()
                .unwrap()
                .starts_with("estimated from the calibration of"),
        "{live}"
    );
    daemon.stop_cleanly();
}

/// A host whose calibration was borrowed two days ago, with its own meter in now: at start
/// the daemon puts the calibration beside the wall, fits the host's own from its history
/// and says so, and the newest calibration is no longer borrowed.
#[test]
fn with_its_own_meter_in_the_daemon_fits_a_borrowed_calibration_again() {
    let source = super::calibration::usual_day();
    fit_morning(&source, &[]);
    let file = super::calibration::ok(
        &source.config,
        &["calibration", "export", "--format", "file"],
    );
    let mut f: Value = serde_json::from_str(&file).unwrap();
    let created = f["model"]["created_ms"].as_i64().unwrap();
    f["model"]["created_ms"] = (created - 2 * 86_400_000).into();
    let lab = day_of("lab", |_| true);
    let path = lab.env.path("e2e.calibration.json");
    std::fs::write(&path, f.to_string()).unwrap();
    super::calibration::ok(
        &lab.config,
        &["calibration", "import", path.to_str().unwrap()],
    );
    assert_eq!(
        json(&lab.config, &["calibration", "show"])["borrowed_from"],
        "e2e"
    );
    let meter = wattson_tests::simulate("pzem004t", &[1], 60.0);
    let config = lab.env.path("metered.toml");
    std::fs::write(
        &config,
        std::fs::read_to_string(&lab.config).unwrap()
            + &wattson_tests::ledger::meter_toml(&meter.path, "250ms"),
    )
    .unwrap();
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for_log(
        "calibration fitted again (borrowed from e2e, and lab's own meter is in)",
        Duration::from_secs(30),
    );
    daemon.stop_cleanly();
    let shown = json(&config, &["calibration", "show"]);
    assert!(shown["borrowed_from"].is_null(), "{shown:#}");
    assert_eq!(shown["host"], "lab");
    assert!(
        shown["minutes"].as_u64().unwrap() >= 1000,
        "the lab's own day: {shown:#}"
    );
}

/// A calibration over a signal from outside the box's sysfs (the BMC's reading over IPMI,
/// fitted with `--feature ipmi/power`): with no meter, the daemon builds that signal's
/// reader from `[power]`'s ipmitool settings, polls it at its own interval, and estimates
/// the wall live from it; with `[power] ipmi` off, a calibration in the database does not
/// make it run ipmitool, and the log says why there is no estimate.
#[test]
fn without_the_meter_the_daemon_estimates_live_from_a_calibration_over_the_bmcs_reading() {
    use wattson::store::{MINUTE_MS, Store, StoreOptions, Writer};
    use wattson_collectors::Sample;

    let day = day_of(wattson_tests::HOST, |i| i < METER_OUT);
    // The BMC reads what the power supply draws: 0.97 of the wall, less 2 W.
    let bmc = |wall: f64| 0.97 * wall - 2.0;
    let opts = StoreOptions {
        host: wattson_tests::HOST.into(),
        ..StoreOptions::default()
    };
    let mut w = Writer::new(Store::open(&day.env.db, &opts).unwrap(), opts.clone());
    for m in &day.minutes {
        let batch = (0..6)
            .map(|k| {
                let t = m.start_ms + k * MINUTE_MS / 6;
                Sample::new(t, "ipmi", Metric::Power, "", bmc(m.wall_w))
            })
            .collect();
        w.push(None, batch);
    }
    w.flush().unwrap();
    drop(w);
    let model = fit_morning(&day, &["--feature", "ipmi/power"]);
    let span = &model["feature_spans"][0];
    let reading =
        f64::midpoint(span["min"].as_f64().unwrap(), span["max"].as_f64().unwrap()).round();
    let want = (reading + 2.0) / 0.97;

    // ipmitool, as the BMC answers it.
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../collectors/tests/fixtures/ipmi-dcmi/activated.txt"),
    )
    .unwrap()
    .replace("215 Watts", &format!("{reading} Watts"));
    let answer = day.env.path("dcmi.txt");
    std::fs::write(&answer, fixture).unwrap();
    let ipmitool = day.env.path("ipmitool");
    std::fs::write(
        &ipmitool,
        format!(
            "#!/bin/sh\ntouch {}\nexec cat {}\n",
            day.env.path("ran").display(),
            answer.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ipmitool, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let root = wattson_tests::kvm_fixture();
    let config = day.env.path("live.toml");
    let write_config = |ipmi: bool| {
        std::fs::write(
        &config,
        format!(
            "[host]\nname = \"e2e\"\nsysfs = {}\nprocfs = {}\n\n[storage]\npath = {}\nflush_interval = \"200ms\"\n\n[cpu]\nenabled = false\n\n[power]\ninterval = \"1s\"\nrapl = false\nhwmon = false\nipmi = {ipmi}\nipmi_command = {}\nipmi_interval = \"2s\"\n",
            wattson_tests::q(root.join("sys")),
            wattson_tests::q(root.join("proc")),
            wattson_tests::q(&day.env.db),
            wattson_tests::q(&ipmitool)
        ),
    )
    .unwrap();
    };

    // [power] ipmi off: the calibration does not turn it on.
    write_config(false);
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for_log(
        "no wall estimate from the calibration (",
        Duration::from_secs(30),
    );
    daemon.wait_for_log(
        "ipmi: [power] ipmi is off (turn it on for the estimate to read it)",
        Duration::from_secs(5),
    );
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
    assert!(
        !day.env.path("ran").exists(),
        "ipmitool ran with [power] ipmi off"
    );

    write_config(true);
    let started = wattson_tests::now_ms();
    let mut daemon = Child::run_daemon(&config, &[]);
    let watts = three_estimates(&daemon, &day.env.db, started);
    for (_, w) in &watts {
        assert!(
            (w - want).abs() <= 0.03 * want,
            "{w} W estimated for {want} W at a BMC reading of {reading} W: {watts:?}"
        );
    }
    // At the BMC's interval, not the power sources' 1 s.
    let gaps: Vec<i64> = watts.windows(2).map(|p| p[1].0 - p[0].0).collect();
    assert!(gaps.iter().all(|g| *g >= 1_500), "{watts:?}");
    daemon.wait_for_log(
        "no wall meter: estimating wall power as ",
        Duration::from_secs(5),
    );
    daemon.wait_for_log("ipmi/power/", Duration::from_secs(5));
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());
}
