//! What sleeping when idle would save, through the real binary: a compressed week of stored
//! history (a sample a minute, written through the store's writer) whose nights are idle at
//! 30 W from 01:00 to 07:00 and whose days run at 80 W, with backup.service waking it at
//! 03:00 on Sunday (60 W, 300 wake-ups/s): `wattson report` proposes 01:00-07:00 every
//! night, names the Sunday service, and prices the saving at (30 W - 4 W standby) x 6 h x
//! 365 nights at the night's 0.10/kWh, GBP 5.69, to the cent in JSON, text, CSV and
//! `status --json`, and in the daemon's MQTT state and Home Assistant entity; without a
//! standby figure it says how to get one.

// Test helpers unwrap: a failed expectation is a panic with a message.
#![allow(clippy::unwrap_used, clippy::panic)]

use chrono::{Datelike, Timelike};
use serde_json::Value;
use wattson::store::{HOUR_MS, Store, StoreOptions, Writer};
use wattson_collectors::{Metric, Sample};
use wattson_tests::ledger::run;
use wattson_tests::{HOST, TestEnv};

const IDLE_W: f64 = 30.0;
const STANDBY_W: f64 = 4.0;
const NIGHT_PRICE: f64 = 0.10;

/// The night's cheap period and the day's price, in UTC so every day has 24 hours.
const TARIFF: &str = "[cpu]\nenabled = false\n\n[tariff]\ncurrency = \"GBP\"\nprice_per_kwh = 0.30\n\
                      timezone = \"UTC\"\n\n[[tariff.period]]\nstart = \"00:00\"\n\
                      end = \"07:00\"\nprice_per_kwh = 0.10\n";

/// (W, CPU busy share, backup.service's wake-ups/s) of the UTC hour starting at `t`.
fn hour(t: i64) -> (f64, f64, f64) {
    let at = chrono::DateTime::from_timestamp_millis(t).unwrap();
    let h = at.hour();
    if at.weekday() == chrono::Weekday::Sun && h == 3 {
        (60.0, 0.15, 300.0)
    } else if (1..7).contains(&h) {
        (IDLE_W, 0.01, 0.0)
    } else {
        (80.0, 0.3, 0.0)
    }
}

/// The 168 hours before the current one: a sample a minute (and one a millisecond before
/// each hour's end, so each hour's power is its own), and who woke the CPUs in each.
fn week(env: &TestEnv) {
    let mut opts = StoreOptions {
        host: HOST.into(),
        ..StoreOptions::default()
    };
    opts.spacing_ms.insert("meter:wall".into(), 60_000);
    opts.spacing_ms.insert("cpu".into(), 60_000);
    let now = chrono::Utc::now().timestamp_millis();
    let t0 = (now / HOUR_MS - 168) * HOUR_MS;
    let mut w = Writer::new(Store::open(&env.db, &opts).unwrap(), opts.clone());
    let mut wakeups = Vec::new();
    for i in 0..168 {
        let start = t0 + i * HOUR_MS;
        let (watts, busy, backup) = hour(start);
        let mut batch = Vec::new();
        for t in (0..60)
            .map(|m| start + m * 60_000)
            .chain([start + HOUR_MS - 1])
        {
            batch.push(Sample::new(t, "meter:wall", Metric::Power, "", watts));
            batch.push(Sample::new(t, "cpu", Metric::CpuBusy, "all", busy));
        }
        w.push(None, batch);
        wakeups.push((start, backup));
    }
    w.flush().unwrap();
    drop(w);
    let db = rusqlite::Connection::open(&env.db).unwrap();
    for (start, backup) in wakeups {
        db.execute(
            "INSERT INTO wakeup_host_hour VALUES (?1, ?2, 3600, ?3, 0)",
            rusqlite::params![HOST, start, 3600.0 * (2.0 + backup)],
        )
        .unwrap();
        let add = |name: &str, per_s: f64| {
            db.execute(
                "INSERT INTO wakeup_hour VALUES (?1, ?2, 'task', ?3, ?4)",
                rusqlite::params![HOST, start, name, 3600.0 * per_s],
            )
            .unwrap();
        };
        add("service:sshd.service", 1.0);
        add("(other)", 1.0);
        if backup > 0.0 {
            add("service:backup.service", backup);
        }
    }
}

#[test]
fn idle_nights_propose_their_window_name_the_sunday_service_and_price_the_saving() {
    let env = TestEnv::new();
    week(&env);
    // This host's standby, entered by hand in its own [[config]].
    let config = env.config(&format!(
        "{TARIFF}\n[[config]]\nname = \"{HOST}\"\nmodes = {{ standby = {STANDBY_W}, idle = \
         {IDLE_W} }}\n"
    ));
    // (idle W - standby W) x 6 h x 365 nights x the night's price.
    let want = (IDLE_W - STANDBY_W) * 6.0 * 365.0 / 1000.0 * NIGHT_PRICE;
    assert_eq!(format!("{want:.2}"), "5.69");

    let json: Value = serde_json::from_str(&run(&config, &["report", "--format", "json"])).unwrap();
    let s = &json["sleep"];
    assert_eq!(s["windows"][0], "01:00-07:00 every night", "{s}");
    assert_eq!(s["windows"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s["schedule"], "standby 01:00-07:00; idle", "{s}");
    assert_eq!(s["hours_a_week"], 42.0, "{s}");
    assert_eq!(s["standby_watts"], STANDBY_W, "{s}");
    assert!(
        s["standby_from"].as_str().unwrap().contains("[[config]]"),
        "{s}"
    );
    let idle = s["idle_watts"].as_f64().unwrap();
    // Each hour's last millisecond runs to the next hour's power.
    assert!((idle - IDLE_W).abs() < 1e-3, "{s}");
    let saving = s["annual_saving"].as_f64().unwrap();
    assert_eq!(format!("{saving:.2}"), format!("{want:.2}"), "{s}");
    assert!((s["saving_price_per_kwh"].as_f64().unwrap() - NIGHT_PRICE).abs() < 1e-9);
    let interrupted = s["interrupted"].as_array().unwrap();
    assert_eq!(interrupted.len(), 1, "{s}");
    assert_eq!(interrupted[0]["what"], "backup.service", "{s}");
    assert_eq!(interrupted[0]["at"], "03:00", "{s}");
    assert_eq!(interrupted[0]["days"], serde_json::json!(["sun"]), "{s}");
    assert_eq!(s["nights_interrupted_a_week"], 1, "{s}");
    // No resume in the history and none entered: said, not invented.
    assert!(s.get("annual_wake_cost").is_none(), "{s}");
    assert!(
        s["wake_from"].as_str().unwrap().starts_with("not measured"),
        "{s}"
    );

    let text = run(&config, &["report"]);
    let money = format!("saving: GBP {want:.2} a year");
    for needle in [
        "proposed: sleep 01:00-07:00 every night (42 h a week",
        "would interrupt: backup.service at 03:00 on Sundays (300 wake-ups/s)",
        money.as_str(),
        "waking: 365 resumes a year; their energy is not measured",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }

    let csv = run(&config, &["report", "--format", "csv"]);
    let row = csv
        .lines()
        .find(|l| l.starts_with("01:00-07:00 every night,sleep,saving,"))
        .unwrap_or_else(|| panic!("no saving row in\n{csv}"));
    let cells: Vec<&str> = row.split(',').collect();
    assert_eq!(cells[3], "26", "{row}");
    assert_eq!(cells[7], format!("{want:.2}"), "{row}");
    assert!(
        csv.lines()
            .any(|l| l.contains(",sleep,interrupted,") && l.contains("backup.service at 03:00")),
        "{csv}"
    );

    let status: Value = serde_json::from_str(&run(&config, &["status", "--json"])).unwrap();
    let got = status["sleep"]["annual_saving"].as_f64().unwrap();
    assert_eq!(format!("{got:.2}"), format!("{want:.2}"), "{status}");

    // --standby-watts wins over the [[config]]'s, and says so.
    let json: Value = serde_json::from_str(&run(
        &config,
        &["report", "--format", "json", "--standby-watts", "10"],
    ))
    .unwrap();
    let got = json["sleep"]["annual_saving"].as_f64().unwrap();
    let want = (IDLE_W - 10.0) * 6.0 * 365.0 / 1000.0 * NIGHT_PRICE;
    assert_eq!(format!("{got:.2}"), format!("{want:.2}"), "{json}");
    assert_eq!(json["sleep"]["standby_from"], "given with --standby-watts");
}

#[test]
fn without_a_standby_figure_the_window_is_proposed_and_how_to_get_one_is_said() {
    let env = TestEnv::new();
    week(&env);
    let config = env.config(&format!(
        "{TARIFF}\n[sleep]\nwake_wh = 2.5\nmin_idle_days_percent = 100\n"
    ));
    let json: Value = serde_json::from_str(&run(&config, &["report", "--format", "json"])).unwrap();
    let s = &json["sleep"];
    // Every night idle asked for: Sunday's 03:00 splits the window.
    assert_eq!(
        s["windows"],
        serde_json::json!(["01:00-03:00 every night", "04:00-07:00 every night"]),
        "{s}"
    );
    assert!(s.get("annual_saving").is_none(), "{s}");
    assert!(
        s["standby_from"]
            .as_str()
            .unwrap()
            .contains("--standby-watts"),
        "{s}"
    );
    assert_eq!(s["thresholds"]["min_idle_days_percent"], 100.0, "{s}");
    let text = run(&config, &["report"]);
    assert!(
        text.contains("no saving priced: no standby figure"),
        "{text}"
    );
    // With one, the resumes are priced at the windows' ends (03:00 and 07:00: 03:00 at the
    // night's price, 07:00 at the day's).
    let json: Value = serde_json::from_str(&run(
        &config,
        &["report", "--format", "json", "--standby-watts", "4"],
    ))
    .unwrap();
    let s = &json["sleep"];
    let wake = s["annual_wake_cost"].as_f64().unwrap();
    let want = 2.5 * 365.0 / 1000.0 * (0.10 + 0.30);
    assert!((wake - want).abs() < 1e-9, "{wake} against {want}: {s}");
    let net = s["annual_net_saving"].as_f64().unwrap();
    assert!((net - (s["annual_saving"].as_f64().unwrap() - wake)).abs() < 1e-9);
}

/// The daemon over the same week publishes the figure in its MQTT state, the saving equal
/// to the report's to the cent, and announces it to Home Assistant with the whole `sleep`
/// object as attributes. A power supply's hwmon sensor gives it something to sample; the
/// week's wall power is the stored meter's.
#[test]
fn the_mqtt_state_and_home_assistant_carry_the_saving() {
    use std::time::Duration;
    use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};

    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let env = TestEnv::new();
    week(&env);
    let sys = env.path("sys");
    let chip = sys.join("class/hwmon/hwmon0");
    std::fs::create_dir_all(&chip).unwrap();
    std::fs::write(chip.join("name"), "testpsu\n").unwrap();
    std::fs::write(chip.join("power1_input"), "42000000\n").unwrap();
    let config = env.config_with_roots(
        &sys,
        &wattson_tests::kvm_fixture().join("proc"),
        &format!(
            "{TARIFF}\n[power]\ninterval = \"200ms\"\n\n[wakeups]\nenabled = false\n\n\
             [sleep]\nstandby_watts = {STANDBY_W}\n\n[mqtt]\nurl = {}\npublish_interval = \"300ms\"\n",
            wattson_tests::q(broker.url(false))
        ),
    );
    let want = (IDLE_W - STANDBY_W) * 6.0 * 365.0 / 1000.0 * NIGHT_PRICE;
    let watcher = Watcher::start(broker.port, "sleep", &["wattson/#", "homeassistant/#"]);
    let mut daemon = wattson_tests::Child::run_daemon(&config, &[]);
    let topic = format!("wattson/{HOST}/state");
    let state = daemon.wait_for(
        "the sleep figure in the state",
        Duration::from_secs(60),
        || {
            let m = watcher.last(&topic)?;
            let v: Value = serde_json::from_slice(&m.payload).ok()?;
            v["sleep"]["annual_saving"].is_number().then_some(v)
        },
    );
    let s = &state["sleep"];
    let got = s["annual_saving"].as_f64().unwrap();
    assert_eq!(format!("{got:.2}"), format!("{want:.2}"), "{s}");
    assert_eq!(s["windows"][0], "01:00-07:00 every night", "{s}");
    assert_eq!(s["standby_from"], "given in [sleep] standby_watts", "{s}");
    assert_eq!(
        s["interrupted"][0], "backup.service at 03:00 on Sundays (300 wake-ups/s)",
        "{s}"
    );
    let entity = daemon.wait_for("the sleep saving entity", Duration::from_secs(10), || {
        let m = watcher.last(&format!(
            "homeassistant/sensor/wattson_{HOST}/sleep_saving_annual/config"
        ))?;
        serde_json::from_slice::<Value>(&m.payload).ok()
    });
    assert_eq!(
        entity["name"], "Annual saving from sleeping when idle",
        "{entity}"
    );
    assert!(
        entity["value_template"]
            .as_str()
            .unwrap()
            .contains("value_json.sleep.annual_saving")
            && entity["json_attributes_template"]
                .as_str()
                .unwrap()
                .contains("value_json.sleep"),
        "{entity}"
    );
    daemon.stop_cleanly();
}
