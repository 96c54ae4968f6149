//! The daemon reading simulated meters over real pseudo-terminals: every protocol, three
//! Modbus meters on one line, and a meter unplugged and plugged back.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic)]

use std::time::Duration;

use wattson::store::SeriesFilter;
use wattson_collectors::meter::Protocol;
use wattson_collectors::{Metric, Unit};
use wattson_tests::{
    Child, HOST, TestEnv, db_points, meter_toml, now_ms, open_db, points, simulate, simulate_child,
};

const WATTS: f64 = 123.4;

/// How far a stored power reading may be from the simulated watts: half the meter's own
/// resolution, or the error of a chip that derives power from pulse periods.
#[allow(clippy::match_same_arms)] // one arm per kind of resolution
fn tolerance(protocol: Protocol) -> f64 {
    match protocol {
        // 0.1 W registers.
        Protocol::Pzem004t | Protocol::Pzem017 => 0.05,
        // IEEE 754 float32.
        Protocol::Sdm120 | Protocol::Sdm230 | Protocol::Sdm630 => 0.01,
        // Tenths of a watt in ASCII.
        Protocol::WattsUp => 0.05,
        // Power from a pulse period and calibration constants.
        Protocol::Cse7766 | Protocol::Hlw8032 => 0.25,
        // Text, as printed.
        Protocol::Line => 0.01,
    }
}

#[test]
fn every_protocol_stores_the_simulated_watts_with_units() {
    let env = TestEnv::new();
    let protocols = Protocol::ALL.map(|p| (p.as_str(), tolerance(p)));
    let sims: Vec<_> = protocols
        .iter()
        .map(|(p, _)| simulate(p, &[1], WATTS))
        .collect();
    let mut extra = String::from("\n[cpu]\nenabled = false\n");
    for ((protocol, _), sim) in protocols.iter().zip(&sims) {
        extra.push_str(&meter_toml(protocol, protocol, &sim.path, "250ms", None));
    }
    let config = env.config(&extra);
    let daemon = Child::run_daemon(&config, &[]);

    // Three readings from every meter.
    daemon.wait_for(
        "three power samples from every meter",
        Duration::from_secs(15),
        || {
            let store = open_db(&env.db)?;
            protocols
                .iter()
                .all(|(p, _)| points(&store, &format!("meter:{p}"), Metric::Power).len() >= 3)
                .then_some(())
        },
    );
    let store = open_db(&env.db).expect("database");
    for (protocol, tolerance) in protocols {
        let source = format!("meter:{protocol}");
        let power = points(&store, &source, Metric::Power);
        for &(_, w) in &power {
            assert!(
                (w - WATTS).abs() <= tolerance + 1e-9,
                "{protocol}: stored {w} W, simulated {WATTS} W (tolerance {tolerance}); stderr:\n{}",
                daemon.stderr()
            );
        }
        let series = store
            .find_series(
                &SeriesFilter::all()
                    .host(HOST)
                    .source(&wattson_collectors::SourceId::from(source.as_ref())),
            )
            .expect("series");
        let unit_of = |m: Metric| series.iter().find(|s| s.metric == m).map(|s| s.unit);
        assert_eq!(unit_of(Metric::Power), Some(Unit::Watt), "{protocol}");
        // Every protocol reports voltage; the simulator runs at 230 V.
        assert_eq!(
            unit_of(Metric::Voltage),
            Some(Unit::Volt),
            "{protocol}: {series:?}"
        );
        let volts = points(&store, &source, Metric::Voltage);
        assert!(
            volts.iter().all(|&(_, v)| (v - 230.0).abs() <= 0.25),
            "{protocol}: {volts:?}"
        );
        if let Some(unit) = unit_of(Metric::Current) {
            assert_eq!(unit, Unit::Ampere, "{protocol}");
        }
    }
    // The PZEM's 0.1 W register holds 123.4 exactly.
    let pzem = points(&store, "meter:pzem004t", Metric::Power);
    assert!(pzem.iter().all(|&(_, w)| w == WATTS), "{pzem:?}");
    drop(sims);
}

#[test]
fn three_pzems_on_one_line_are_stored_under_their_ids() {
    let env = TestEnv::new();
    let config = env.config("\n[cpu]\nenabled = false\n");
    let (_sim, pty) = simulate_child(
        &config,
        "pzem004t",
        &["--watts", "123.4", "--address", "1,2,3"],
    );
    let mut extra = String::from("\n[cpu]\nenabled = false\n");
    for (id, addr) in [("l1", 1), ("l2", 2), ("l3", 3)] {
        extra.push_str(&meter_toml(id, "pzem004t", &pty, "250ms", Some(addr)));
    }
    let config = env.config(&extra);
    let daemon = Child::run_daemon(&config, &[]);
    let ids = ["meter:l1", "meter:l2", "meter:l3"];
    daemon.wait_for(
        "samples from all three meters",
        Duration::from_secs(10),
        || {
            let store = open_db(&env.db)?;
            ids.iter()
                .all(|id| points(&store, id, Metric::Power).len() >= 2)
                .then_some(())
        },
    );
    let store = open_db(&env.db).expect("database");
    for id in ids {
        let p = points(&store, id, Metric::Power);
        assert!(p.iter().all(|&(_, w)| w == WATTS), "{id}: {p:?}");
        assert!(!points(&store, id, Metric::Voltage).is_empty(), "{id}");
    }
    // Nothing stored under the combined line name.
    let sources: Vec<String> = store
        .series()
        .expect("series")
        .into_iter()
        .map(|s| s.source.to_string())
        .collect();
    assert!(
        sources.iter().all(|s| ids.contains(&s.as_str())),
        "{sources:?}; stderr:\n{}",
        daemon.stderr()
    );
}

#[test]
fn unplugged_meter_is_a_gap_and_is_back_within_two_seconds() {
    let env = TestEnv::new();
    let link = env.path("ttyUSB0");
    // Simulators in their own processes: an in-process pty master would be inherited by the
    // daemon child (no O_CLOEXEC) and keep the "device" alive after it is stopped.
    let sim_config = env.config("");
    let (mut first, first_path) = simulate_child(&sim_config, "pzem004t", &["--watts", "100"]);
    std::os::unix::fs::symlink(&first_path, &link).expect("symlink");
    let config = env.config(&format!(
        "\n[cpu]\ninterval = \"250ms\"\n{}",
        meter_toml("wall", "pzem004t", &link, "250ms", None)
    ));
    let daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for(
        "meter samples before the unplug",
        Duration::from_secs(10),
        || (db_points(&env.db, "meter:wall", Metric::Power).len() >= 3).then_some(()),
    );

    // The replacement device exists before the old one goes, so it gets another pty path.
    let (_second, second_path) = simulate_child(&sim_config, "pzem004t", &["--watts", "200"]);
    assert_ne!(first_path, second_path);
    // Unplugged as a USB adapter is: its device node goes first. Were the link left to the
    // dead pty, another test's new pty could reuse that pts number and answer the daemon.
    std::fs::remove_file(&link).expect("removing the symlink");
    let unplugged_ms = now_ms();
    first.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(
        first
            .wait_exit(Duration::from_secs(5))
            .and_then(|s| s.code()),
        Some(0)
    );
    daemon.wait_for_log("reconnecting", Duration::from_secs(5));

    // The CPU collector keeps storing while the meter is away.
    daemon.wait_for(
        "CPU samples during the outage",
        Duration::from_secs(5),
        || {
            db_points(&env.db, "cpu", Metric::CoreFrequency)
                .iter()
                .any(|&(t, _)| t > unplugged_ms + 500)
                .then_some(())
        },
    );

    std::os::unix::fs::symlink(&second_path, &link).expect("plugging the link in again");
    let replugged_ms = now_ms();

    let back_ms = daemon.wait_for(
        "samples from the replugged meter",
        Duration::from_secs(10),
        || {
            db_points(&env.db, "meter:wall", Metric::Power)
                .iter()
                .find(|&&(_, w)| w == 200.0)
                .map(|&(t, _)| t)
        },
    );
    assert!(
        back_ms - replugged_ms <= 2000,
        "first sample {} ms after the device returned; stderr:\n{}",
        back_ms - replugged_ms,
        daemon.stderr()
    );

    eprintln!(
        "meter back {} ms after the device returned",
        back_ms - replugged_ms
    );
    let gap = daemon.wait_for("the gap to be recorded", Duration::from_secs(5), || {
        let store = open_db(&env.db)?;
        store
            .gaps(HOST, 0, i64::MAX)
            .ok()?
            .into_iter()
            .find(|g| g.source == "meter:wall")
    });
    assert!(
        gap.start_ms <= unplugged_ms + 300 && gap.end_ms >= replugged_ms,
        "gap {gap:?} does not cover the outage {unplugged_ms}..{replugged_ms}"
    );
    let power = db_points(&env.db, "meter:wall", Metric::Power);
    let inside: Vec<_> = power
        .iter()
        .filter(|&&(t, _)| t > gap.start_ms && t < gap.end_ms)
        .collect();
    assert!(
        inside.is_empty(),
        "meter samples inside the gap {gap:?}: {inside:?}"
    );
    assert!(power.iter().any(|&(_, w)| w == 100.0));
    let cpu_in_gap = db_points(&env.db, "cpu", Metric::CoreFrequency)
        .iter()
        .filter(|&&(t, _)| t > gap.start_ms && t < gap.end_ms)
        .count();
    assert!(cpu_in_gap > 0, "no CPU samples during the meter gap");
}
