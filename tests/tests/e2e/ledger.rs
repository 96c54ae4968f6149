//! One ledger, through the real binary: simulated meters at every interval, smart plugs,
//! fleet hosts and restarts, against the truth of a constant 50 W load (hostile input:
//! `hostile.rs`; Home Assistant's validation: `home_assistant.rs`).
//!
//! The truth of a run is 50 W over the time the meter was sampled: from the first stored
//! sample to the last (no gaps occur in these runs unless a test makes them). Every figure
//! (`wattson status`, each `wattson report` format, the MQTT state, the fleet collector's
//! database) must give the mean power within 0.5 % and the energy within 1 % of it.
//!
//! Paths exercised: serial meters are simulated PZEM-004T (and a streaming CSE7766) on
//! pseudo-terminals polled in real time by `wattson run` at their interval; fleet hosts are those same daemons publishing
//! every 2 s or 10 s to a real broker, stored by a real `wattson collect`; smart plugs at 60 s
//! and 300 s are Tasmota messages carrying their own time (`Time` with an offset), published
//! a few per second with times 60 s or 300 s apart ending now, which `wattson run` stamps
//! with those times (they lie within an hour of their receipt: see `sources/plug.rs`).
//!
//! Interval means: a plug reporting on change (ten 1000 W reports in 10 s, one 50 W report
//! 50 s later, on the reports' own clock ten minutes back) must give the mean of its MQTT
//! state's interval, and the one `wattson collect` stores for it, within 1 % of the
//! time-weighted truth (each report standing for the time since the one before it): 208 W,
//! where counting reports gives 914 W.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic, clippy::missing_panics_doc)]

use std::time::Duration;

use nix::sys::signal::Signal;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::ledger::*;
use wattson_tests::{Child, TestEnv, now_ms, open_db, q};

/// Simulated meters at 250 ms, 1 s, 2 s, 5 s and 10 s (each its own `wattson run`, host and
/// database; and a CSE7766 streaming 20 records a second, polled every second), publishing
/// every 2 s or 10 s to a broker that one `wattson collect` stores: every figure of each, in
/// its own database and in the collector's, is the truth.
#[test]
fn meters_at_every_interval_and_their_fleet_states_report_the_truth() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "ledger-watch", &["wattson/+/state"]);
    let dir = tempfile::tempdir().unwrap();
    let (cdb, cconf, mut collect) = collector(dir.path(), &broker);
    let runs = [
        ("pzem004t", "250ms", "2s"),
        ("pzem004t", "1s", "2s"),
        ("pzem004t", "2s", "2s"),
        ("pzem004t", "5s", "10s"),
        ("pzem004t", "10s", "10s"),
        ("cse7766", "1s", "2s"),
    ];
    let mut daemons = Vec::new();
    for (protocol, interval, publish) in runs {
        let host = format!("e2e-{protocol}-{interval}");
        let (sim, meter) = if protocol == "pzem004t" {
            let sim = wattson_tests::simulate(protocol, &[1], WATTS);
            let meter = meter_toml(&sim.path, interval);
            (sim, meter)
        } else {
            let sim = wattson_tests::simulate(protocol, &[], WATTS);
            let meter = streaming_meter_toml(protocol, &sim.path, interval);
            (sim, meter)
        };
        let db = dir.path().join(format!("{host}.db"));
        let extra = meter + &mqtt_toml(&broker, publish);
        let config = config_for(dir.path(), &host, &db, &extra);
        let child = Child::run_daemon(&config, &[]);
        daemons.push((host, sim, db, config, child));
    }
    // Until every meter has been sampled over 55 s (six intervals of the 10 s meter).
    wattson_tests::wait_for(
        "55 s of samples from every meter",
        Duration::from_secs(180),
        || {
            daemons
                .iter()
                .all(|(host, _, db, _, _)| {
                    let p = power_points(db, host, "meter:wall");
                    p.len() >= 2 && p[p.len() - 1].0 - p[0].0 >= 55_000
                })
                .then_some(())
        },
    );
    for (_, _, _, _, child) in &mut daemons {
        child.signal(Signal::SIGTERM);
        let status = child.wait_exit(Duration::from_secs(15)).unwrap();
        assert_eq!(status.code(), Some(0), "stderr:\n{}", child.stderr());
    }
    // The collector holds every host's last state.
    collect.wait_for(
        "every host's last state in the collector",
        Duration::from_secs(20),
        || {
            daemons
                .iter()
                .all(|(host, ..)| {
                    let last = states(&watcher, host).last().and_then(|s| s["ts"].as_i64());
                    let stored = power_points(&cdb, host, "meter:wall");
                    last.is_some() && stored.last().map(|p| p.0) == last
                })
                .then_some(())
        },
    );
    collect.signal(Signal::SIGTERM);
    assert!(collect.wait_exit(Duration::from_secs(10)).is_some());

    for (host, _, db, config, _) in &daemons {
        let truth = check_figures(config, None, host, "meter:wall", db);
        let first = power_points(db, host, "meter:wall")[0].0;
        check_state(&watcher, host, first);
        let fleet = check_figures(&cconf, Some(&cdb), host, "meter:wall", &cdb);
        eprintln!(
            "{host}: truth {truth:.4} Wh in its own database, {fleet:.4} Wh in the collector's"
        );
    }
}

/// Smart plugs reporting every 60 s and every 300 s (Tasmota's default TelePeriod): every
/// figure is the truth. The readings carry their own time (see the module documentation).
#[test]
fn smart_plugs_at_60_and_300_s_report_the_truth() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "plug-watch", &["wattson/+/state"]);
    let dir = tempfile::tempdir().unwrap();
    for (period_s, count) in [(60_i64, 30_i64), (300, 11)] {
        let host = format!("e2e-plug{period_s}");
        let db = dir.path().join(format!("{host}.db"));
        let extra = format!(
            "{}\n[[plug]]\nid = \"plug\"\nkind = \"tasmota\"\ntopic = {}\n",
            mqtt_toml(&broker, "1s"),
            q(&host)
        );
        let config = config_for(dir.path(), &host, &db, &extra);
        let mut daemon = Child::run_daemon(&config, &[]);
        let topic = format!("tele/{host}/SENSOR");
        // `count` readings `period_s` apart ending a period ago, the oldest within the hour a
        // plug's own time is trusted; then one more, now, as the plug's next report.
        let now = now_ms();
        let first = now - count * period_s * 1000;
        let reading = |k: i64| {
            let ts = first + k * period_s * 1000;
            tasmota(ts, 1.0 + WATTS * (ts - first) as f64 / 3_600_000.0 / 1000.0)
        };
        daemon.wait_for_log("plugs: subscribed", Duration::from_secs(20));
        let send = |from: i64, to: i64| {
            rt.block_on(publish(
                broker.port,
                &format!("{host}-plug-{from}"),
                &topic,
                (from..to).map(reading).collect(),
                Duration::from_millis(150),
            ));
        };
        send(0, count);
        daemon.wait_for("the readings stored", Duration::from_secs(20), || {
            (power_points(&db, &host, "meter:plug").len() as i64 == count).then_some(())
        });
        // A state goes out when a report arrives, with the energy stored by then: the
        // report's own included (the sampler hands the store the pass that begins a publish
        // before the figures are read). Tasmota's `Time` is to the second.
        let report_ms = (first + count * period_s * 1000).div_euclid(1000) * 1000;
        send(count, count + 1);
        daemon.wait_for(
            "a state counting the new report",
            Duration::from_secs(20),
            || {
                states(&watcher, &host)
                    .iter()
                    .any(|s| s["energy_ts"].as_i64() >= Some(report_ms))
                    .then_some(())
            },
        );
        daemon.signal(Signal::SIGTERM);
        assert_eq!(
            daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
            Some(0)
        );
        let truth = check_figures(&config, None, &host, "meter:plug", &db);
        within(
            &format!("{host} truth"),
            truth,
            WATTS * (count * period_s) as f64 / 3600.0,
            1e-9,
        );
        check_state(&watcher, &host, first);
        let status = json(&run(&config, &["status", "--json"]));
        // The plug's own counter agrees with the integral.
        let counter = status["counter_today"]["counter_wh"].as_f64().unwrap();
        within(&format!("{host} counter"), counter, truth, 0.01);
    }
}

/// The time-weighted mean of `reports` (UTC ms, W) over the interval after `from_ms`: each
/// report stands for the time since the one before it (the first for the time since
/// `from_ms`); and their plain mean, which counts each report once however long it stood.
fn interval_means(from_ms: i64, reports: &[(i64, f64)]) -> (f64, f64) {
    let mut before = from_ms;
    let mut weighted = 0.0;
    for &(ts, w) in reports {
        weighted += w * (ts - before) as f64;
        before = ts;
    }
    let by_time = weighted / (before - from_ms) as f64;
    let by_count = reports.iter().map(|r| r.1).sum::<f64>() / reports.len() as f64;
    (by_time, by_count)
}

/// A smart plug reporting on change, as the issue "One annual cost, the same on every
/// surface" puts it: ten 1000 W reports in 10 s, then one 50 W report 50 s later (which
/// stands for those 50 s), in one 60 s publish interval of `wattson run`. Counted by
/// reports the interval's mean is 914 W; the mean in the daemon's MQTT state and the one a
/// `wattson collect` stores for that interval are the time-weighted truth, 208 W, within
/// 1 %. The reports carry their own time (see the module documentation), so the case runs
/// at full scale in seconds: publish intervals are on the reports' clock.
#[test]
fn a_plug_reporting_on_change_is_weighed_by_time_in_its_mqtt_and_fleet_means() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let host = "e2e-plug-on-change";
    let state_topic = format!("wattson/{host}/state");
    let online_topic = format!("wattson/{host}/availability");
    let watcher = Watcher::start(
        broker.port,
        "on-change-watch",
        &[state_topic.as_str(), online_topic.as_str()],
    );
    let dir = tempfile::tempdir().unwrap();
    let (cdb, _cconf, mut collect) = collector(dir.path(), &broker);
    let db = dir.path().join(format!("{host}.db"));
    let extra = format!(
        "{}\n[[plug]]\nid = \"plug\"\nkind = \"tasmota\"\ntopic = {}\n",
        mqtt_toml(&broker, "60s"),
        q(host)
    );
    let config = config_for(dir.path(), host, &db, &extra);
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for_log("plugs: subscribed", Duration::from_secs(20));
    // A state taken while the publisher is not connected is dropped, not sent later.
    daemon.wait_for(
        "the daemon online on the broker",
        Duration::from_secs(20),
        || {
            watcher
                .last(&online_topic)
                .filter(|m| m.payload == b"online")
        },
    );

    // The interval under test begins at `start`, on the 60 s grid, ten minutes ago (a
    // plug's own time is trusted within the hour).
    let start = (now_ms() - 600_000).div_euclid(60_000) * 60_000;
    let mut reports: Vec<(i64, f64)> = vec![(start - 5000, WATTS), (start, WATTS)];
    reports.extend((1..=10).map(|s| (start + s * 1000, 1000.0)));
    reports.push((start + 60_000, WATTS));
    // The plug's own counter follows the same readings, kWh.
    let mut kwh = 1.0;
    let mut before = reports[0].0;
    let payloads: Vec<String> = reports
        .iter()
        .map(|&(ts, w)| {
            kwh += w * (ts - before) as f64 / 3_600_000_000.0;
            before = ts;
            tasmota_at(ts, w, kwh)
        })
        .collect();
    let topic = format!("tele/{host}/SENSOR");
    let send = |what: &str, range: std::ops::Range<usize>| {
        rt.block_on(publish(
            broker.port,
            &format!("{host}-{what}"),
            &topic,
            payloads[range].to_vec(),
            Duration::from_millis(50),
        ));
    };
    let state_at = |ts: i64| {
        states(&watcher, host)
            .into_iter()
            .find(|s| s["ts"].as_i64() == Some(ts))
    };
    // The first report starts the daemon's publish grid; the one at `start`, read in a
    // later pass, crosses it: the state it ends leaves `start` where the next begins.
    send("first", 0..1);
    daemon.wait_for("the first report read", Duration::from_secs(20), || {
        (power_points(&db, host, "meter:plug").len() == 1).then_some(())
    });
    send("at-start", 1..2);
    daemon.wait_for(
        "the state ending at the interval's start",
        Duration::from_secs(20),
        || state_at(start),
    );
    // The plug's change: ten reports of 1000 W, then 50 W, whose report crosses the next
    // boundary and so ends the interval's state.
    send("on-change", 2..reports.len());
    let end = start + 60_000;
    let state = daemon.wait_for("the state of the interval", Duration::from_secs(20), || {
        state_at(end)
    });
    let stored = collect.wait_for(
        "the collector's mean of the interval",
        Duration::from_secs(20),
        || {
            power_points(&cdb, host, "meter:plug")
                .into_iter()
                .find(|p| p.0 == end)
                .map(|p| p.1)
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

    let (truth, by_count) = interval_means(start, &reports[2..]);
    assert!(
        by_count > 4.0 * truth,
        "the case must tell the two apart: {by_count} W by count, {truth} W by time"
    );
    assert_eq!(state["power_source"], "meter:plug", "{state}");
    let power = state["power"].as_f64().unwrap();
    let series = state["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[0] == "meter:plug" && e[1] == "power" && e[2] == "")
        .and_then(|e| e[3].as_f64())
        .unwrap_or_else(|| panic!("no meter:plug power series in {state}"));
    eprintln!(
        "{host}: truth {truth:.2} W (by count {by_count:.2} W); MQTT state {power:.2} W \
         (series {series:.2} W); fleet collector {stored:.2} W"
    );
    within(&format!("{host} MQTT state power"), power, truth, 0.01);
    within(&format!("{host} MQTT state series"), series, truth, 0.01);
    within(
        &format!("{host} fleet collector's mean"),
        stored,
        truth,
        0.01,
    );
}

/// Three restarts in a run: Home Assistant's `energy` never goes down, each downtime is a
/// gap, and the energy elsewhere is continuous. Time is compressed to seconds: a run of
/// about 40 s with three stops of about 3 s each.
#[test]
fn three_restarts_keep_energy_rising_and_store_the_downtime_as_gaps() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "restart-watch", &["wattson/+/state"]);
    let env = TestEnv::new();
    let host = "e2e-restarts";
    let sim = wattson_tests::simulate("pzem004t", &[1], WATTS);
    let extra = meter_toml(&sim.path, "1s") + &mqtt_toml(&broker, "1s");
    let config = config_for(env.dir.path(), host, &env.db, &extra);
    let mut segments: Vec<(i64, i64)> = Vec::new();
    for run in 0..4 {
        let before = power_points(&env.db, host, "meter:wall").len();
        let mut daemon = Child::run_daemon(&config, &[]);
        daemon.wait_for("eight samples of this run", Duration::from_secs(30), || {
            (power_points(&env.db, host, "meter:wall").len() >= before + 8).then_some(())
        });
        daemon.signal(Signal::SIGTERM);
        assert_eq!(
            daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
            Some(0)
        );
        let p = power_points(&env.db, host, "meter:wall");
        segments.push((p[before].0, p[p.len() - 1].0));
        if run < 3 {
            // The downtime (a scenario, not a synchronisation).
            std::thread::sleep(Duration::from_secs(3));
        }
    }
    let energies: Vec<f64> = states(&watcher, host)
        .iter()
        .filter_map(|s| s["energy"].as_f64())
        .collect();
    assert!(energies.len() >= 8, "{energies:?}");
    assert!(
        energies.windows(2).all(|w| w[1] >= w[0]),
        "Home Assistant's energy went down: {energies:?}"
    );
    let store = open_db(&env.db).unwrap();
    let gaps: Vec<_> = store
        .gaps(host, 0, i64::MAX)
        .unwrap()
        .into_iter()
        .filter(|g| g.reason == "wattson was not running")
        .collect();
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    for (g, w) in gaps.iter().zip(segments.windows(2)) {
        assert_eq!(
            g.start_ms, w[0].1,
            "the gap starts at the last sample before the stop"
        );
        assert!(
            g.end_ms <= w[1].0 && w[1].0 - g.end_ms < 3000,
            "{g:?} {w:?}"
        );
    }
    let e =
        wattson::ledger::energy::energy(&store, host, &"meter:wall".into(), 0, i64::MAX).unwrap();
    let covered: i64 = segments.iter().map(|(a, b)| b - a).sum();
    assert_eq!(
        e.covered_ms, covered,
        "continuous within each run, nothing across a stop"
    );
    within(
        "energy over the runs",
        e.wh,
        WATTS * covered as f64 / 3_600_000.0,
        0.01,
    );
    let last = energies[energies.len() - 1] * 1000.0;
    // The state rounds energy to 1e-6 kWh: half of that above the stored figure at most.
    assert!(
        last <= e.wh + 0.0005 + 1e-9 && last > 0.9 * e.wh,
        "{last} against {}",
        e.wh
    );
}
