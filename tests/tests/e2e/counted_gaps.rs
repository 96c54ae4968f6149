//! Energy across a gap from the meter's own counter: a PZEM-004T that keeps counting while
//! the daemon is stopped. Its counter's movement over the stop is the gap's energy, within
//! the counter's 1 Wh steps of the truth (its steady watts over the stop), labelled
//! "counted by the meter, not sampled", and priced with the rest in `report` and `status`.
//! A meter replaced while the daemon is stopped (its counter starts again at 0) leaves the
//! gap uncounted, with why.

// Test helpers unwrap: a failed expectation is a panic with a message.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wattson_collectors::Metric;
use wattson_tests::ledger::{PRICE, config_for, meter_toml, run};
use wattson_tests::{Child, HOST, TestEnv, host_points, open_db, simulate};

const WATTS: f64 = 3000.0;

fn power(db: &Path) -> Vec<(i64, f64)> {
    open_db(db).map_or_else(Vec::new, |s| {
        host_points(&s, HOST, "meter:wall", Metric::Power)
    })
}

/// Runs the daemon until it has stored eight more power samples and the report has `n`
/// gaps, each settled against the meter's counter, then stops it; the gaps.
fn run_until_settled(config: &Path, db: &Path, n: usize) -> Vec<Value> {
    let before = power(db).len();
    let mut daemon = Child::run_daemon(config, &[]);
    daemon.wait_for("eight samples", Duration::from_secs(30), || {
        (power(db).len() >= before + 8).then_some(())
    });
    let gaps = daemon.wait_for("the gaps settled", Duration::from_secs(30), || {
        let json: Value =
            serde_json::from_str(&run(config, &["report", "--format", "json"])).ok()?;
        let gaps = json["measured"]["gaps"].as_array()?.clone();
        (gaps.len() == n && gaps.iter().all(|g| g.get("counted").is_some())).then_some(gaps)
    });
    daemon.stop_cleanly();
    gaps
}

#[test]
fn the_energy_of_a_stop_is_counted_by_the_meter_and_priced() {
    let env = TestEnv::new();
    let meter = simulate("pzem004t", &[1], WATTS);
    let config = config_for(
        env.dir.path(),
        HOST,
        &env.db,
        &meter_toml(&meter.path, "250ms"),
    );
    run_until_settled(&config, &env.db, 0);
    let stopped_at = power(&env.db).last().unwrap().0;
    // The outage (a scenario, not a synchronisation): the meter counts on meanwhile.
    std::thread::sleep(Duration::from_secs(12));
    // A reading 5 s after the start settles the gap.
    let gaps = run_until_settled(&config, &env.db, 1);
    let points = power(&env.db);
    let back_at = points.iter().find(|p| p.0 > stopped_at).unwrap().0;
    let truth_wh = WATTS * (back_at - stopped_at) as f64 / 3_600_000.0;

    let g = &gaps[0];
    eprintln!("the stop: {truth_wh:.2} Wh by hand; {g}");
    assert_eq!(g["counted"], "counted by the meter, not sampled", "{g}");
    let counted = g["counted_wh"].as_f64().unwrap();
    // The counter floors to whole Wh at both ends: within one step of the truth.
    assert!(
        (counted - truth_wh).abs() <= 1.0,
        "{counted} Wh, truth {truth_wh}"
    );
    assert_eq!(g["counted_ci95_wh"].as_f64(), Some(2.0), "{g}");

    // Priced with the sampled energy, in the report and in status alike.
    let json: Value = serde_json::from_str(&run(&config, &["report", "--format", "json"])).unwrap();
    let m = &json["measured"];
    let store = open_db(&env.db).unwrap();
    let sampled =
        wattson::ledger::energy::energy(&store, HOST, &"meter:wall".into(), 0, i64::MAX).unwrap();
    assert!((sampled.counted_wh - counted).abs() < 1e-6, "{sampled:?}");
    let kwh = m["kwh"].as_f64().unwrap();
    assert!(
        (kwh * 1000.0 - (sampled.wh + counted)).abs() < 0.01,
        "report {kwh} kWh against sampled {} Wh + counted {counted} Wh",
        sampled.wh
    );
    assert_eq!(
        (m["energy_cost"].as_f64().unwrap() * 100.0).round(),
        (kwh * PRICE * 100.0).round(),
        "{m}"
    );
    // The mean power is of the sampled time only.
    assert!(
        (m["mean_watts"].as_f64().unwrap() - WATTS).abs() < 1.0,
        "{m}"
    );
    let status: Value = serde_json::from_str(&run(&config, &["status", "--json"])).unwrap();
    let total = &status["cost"]["total"];
    assert!(
        (total["kwh"].as_f64().unwrap() - kwh).abs() < 1e-6,
        "status {total} against the report's {kwh} kWh"
    );
    assert!(
        (total["counted_kwh"].as_f64().unwrap() * 1000.0 - counted).abs() < 1e-6,
        "{total}"
    );
    let text = run(&config, &["status"]);
    assert!(text.contains("counted by the meter, not sampled"), "{text}");
    drop(store);

    // The meter replaced while stopped: its counter starts again at 0.
    drop(meter);
    let meter = simulate("pzem004t", &[1], WATTS);
    let config = config_for(
        env.dir.path(),
        HOST,
        &env.db,
        &meter_toml(&meter.path, "250ms"),
    );
    let gaps = run_until_settled(&config, &env.db, 2);
    let g = &gaps[1];
    assert!(g.get("counted_wh").is_none(), "{g}");
    assert!(g["counted"].as_str().unwrap().contains("went back"), "{g}");
    let json: Value = serde_json::from_str(&run(&config, &["report", "--format", "json"])).unwrap();
    let text = run(&config, &["report"]);
    assert!(
        text.contains("counted by the meter, not sampled (priced)"),
        "{text}"
    );
    assert!(
        text.contains("not counted: the meter's counter went back"),
        "{text}"
    );
    drop(json);
}
