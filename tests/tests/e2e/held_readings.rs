//! A smart plug that reports on change (`[[plug]] readings = "hold"`), through the real
//! binary, a real broker and a real `wattson collect`: ten 1000 W reports 1 s apart, one
//! 50 W report 50 s later, then 50 W every 10 s. Each reading stands until the next, so the
//! truth is 1000 W for 59 s and 50 W for 60 s: 17.22 Wh. The stored energy (`status`), every
//! report format's, the MQTT state's live `energy` and the fleet collector's database all
//! give it within 1 %, and the same figure as each other.
//!
//! The reports carry their own time (`Time` with an offset, within the hour a plug's own
//! time is trusted: see `sources/plug.rs`), ten minutes back, so the case runs at full scale
//! in seconds. Two 0 W reports come first, each read in its own pass: the first starts the
//! daemon's publish grid, the second its first state, from which the fleet collector's
//! series begins; both stand at 0 W, so every figure counts the same energy.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::time::Duration;

use nix::sys::signal::Signal;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::ledger::*;
use wattson_tests::{Child, MiddayZone, now_ms, q};

/// The held-value truth of `reports` (UTC ms, W): each stands until the next, Wh.
fn held_truth(reports: &[(i64, f64)]) -> f64 {
    reports
        .windows(2)
        .map(|w| w[0].1 * (w[1].0 - w[0].0) as f64 / 3_600_000.0)
        .sum()
}

/// `wattson status --json` (with `args`): the stored total and today's energy, Wh.
fn status_wh(config: &std::path::Path, args: &[&str]) -> (f64, f64) {
    let mut a = vec!["status", "--json"];
    a.extend(args);
    let s = json(&run(config, &a));
    let kwh = |k: &str| {
        s["cost"][k]["kwh"]
            .as_f64()
            .unwrap_or_else(|| panic!("{s}"))
            * 1000.0
    };
    (kwh("total"), kwh("today"))
}

/// `wattson report --since today --format json` (with `args`): the measured energy, Wh,
/// and the report's gaps.
fn report_wh(config: &std::path::Path, args: &[&str]) -> (f64, serde_json::Value) {
    let today = MiddayZone::get().today();
    let mut a = vec!["report", "--since", today.as_str(), "--format", "json"];
    a.extend(args);
    let j = json(&run(config, &a));
    let m = &j["measured"];
    (
        m["kwh"].as_f64().unwrap_or_else(|| panic!("{j}")) * 1000.0,
        m["gaps"].clone(),
    )
}

/// The reports from `start` (UTC ms, on the second: Tasmota's `Time` is to the second),
/// after two 0 W ones, and their payloads with the plug's own counter following them.
fn script(start: i64) -> (Vec<(i64, f64)>, Vec<String>) {
    let mut reports: Vec<(i64, f64)> = vec![(start - 20_000, 0.0), (start - 10_000, 0.0)];
    reports.extend((0..10).map(|s| (start + s * 1000, 1000.0)));
    reports.extend((0..7).map(|k| (start + 59_000 + k * 10_000, 50.0)));
    let mut kwh = 1.0;
    let mut before = reports[0];
    let payloads = reports
        .iter()
        .map(|&(ts, w)| {
            kwh += before.1 * (ts - before.0) as f64 / 3_600_000_000.0;
            before = (ts, w);
            tasmota_at(ts, w, kwh)
        })
        .collect();
    (reports, payloads)
}

#[test]
fn a_plug_reporting_on_change_counts_the_held_value_truth_on_every_surface() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let host = "e2e-plug-hold";
    let state_topic = format!("wattson/{host}/state");
    let online_topic = format!("wattson/{host}/availability");
    let watcher = Watcher::start(
        broker.port,
        "hold-watch",
        &[state_topic.as_str(), online_topic.as_str()],
    );
    let dir = tempfile::tempdir().unwrap();
    let (cdb, cconf, mut collect) = collector(dir.path(), &broker);
    let db = dir.path().join(format!("{host}.db"));
    let extra = format!(
        "{}\n[[plug]]\nid = \"plug\"\nkind = \"tasmota\"\ntopic = {}\nreadings = \"hold\"\n",
        mqtt_toml(&broker, "1s"),
        q(host)
    );
    let config = config_for(dir.path(), host, &db, &extra);
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for_log("plugs: subscribed", Duration::from_secs(20));
    daemon.wait_for("the daemon online", Duration::from_secs(20), || {
        watcher
            .last(&online_topic)
            .filter(|m| m.payload == b"online")
    });

    let (reports, payloads) = script((now_ms() - 600_000).div_euclid(1000) * 1000);
    let topic = format!("tele/{host}/SENSOR");
    let send = |what: &str, range: std::ops::Range<usize>| {
        rt.block_on(publish(
            broker.port,
            &format!("{host}-{what}"),
            &topic,
            payloads[range].to_vec(),
            Duration::from_millis(150),
        ));
    };
    let state_at = |ts: i64| {
        states(&watcher, host)
            .into_iter()
            .find(|s| s["ts"].as_i64() == Some(ts))
    };
    send("first", 0..1);
    daemon.wait_for("the first report stored", Duration::from_secs(20), || {
        (power_points(&db, host, "meter:plug").len() == 1).then_some(())
    });
    send("second", 1..2);
    daemon.wait_for("the first state", Duration::from_secs(20), || {
        state_at(reports[1].0)
    });
    send("on-change", 2..reports.len());
    let last = reports[reports.len() - 1].0;
    let state = daemon.wait_for(
        "a state counting the last report",
        Duration::from_secs(30),
        || {
            states(&watcher, host)
                .into_iter()
                .find(|s| s["energy_ts"].as_i64() >= Some(last))
        },
    );
    collect.wait_for(
        "the last state in the collector",
        Duration::from_secs(20),
        || {
            power_points(&cdb, host, "meter:plug")
                .last()
                .filter(|p| p.0 == last)
                .map(|_| ())
        },
    );
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
        Some(0),
        "{}",
        daemon.stderr()
    );
    collect.signal(Signal::SIGTERM);
    assert!(collect.wait_exit(Duration::from_secs(10)).is_some());

    let truth = held_truth(&reports);
    let (stored, today) = status_wh(&config, &[]);
    let (report, gaps) = report_wh(&config, &[]);
    let live = state["energy"].as_f64().unwrap() * 1000.0;
    let fleet_args = ["--db", cdb.to_str().unwrap(), "--host", host];
    let (fleet, _) = status_wh(&cconf, &fleet_args);
    let (fleet_report, _) = report_wh(&cconf, &fleet_args);
    eprintln!(
        "{host}: held-value truth {truth:.4} Wh over {:.2} s; stored {stored:.4} Wh \
         (today {today:.4}), report {report:.4} Wh, live (MQTT) {live:.4} Wh, fleet \
         {fleet:.4} Wh (report {fleet_report:.4} Wh)",
        (last - reports[0].0) as f64 / 1000.0
    );
    assert_eq!(state["held"]["meter:plug"], 600.0, "{state}");
    assert_eq!(
        gaps,
        serde_json::json!([]),
        "no reading stood past max_hold"
    );
    for (what, got) in [
        ("stored", stored),
        ("today", today),
        ("report", report),
        ("live", live),
        ("fleet", fleet),
        ("fleet report", fleet_report),
    ] {
        within(&format!("{host} {what}"), got, truth, 0.01);
        // The same figure on every surface: the store's, to the MQTT state's 1 mWh.
        assert!(
            (got - stored).abs() <= 1e-3,
            "{what} {got} Wh against the stored {stored} Wh"
        );
    }
}
