//! A broker that goes away: the publisher and the daemon (`wattson run`) reconnect without
//! spinning a core, and the daemon stores every sample meanwhile.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{POWER_CONFIG, cfg, extras, feed};
use tokio_util::sync::CancellationToken;
use wattson::live::LiveState;
use wattson::publish::mqtt::Publisher;
use wattson_collectors::Metric;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher, wait_for};

/// CPU time (user + system) of the calling thread, in seconds, from /proc/thread-self/stat.
/// Clock ticks are taken as 100 per second (USER_HZ on every Linux architecture we run on).
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime) of the file; after "pid (comm) " they are 11 and 12.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// The broker is killed and restarted: the publisher stays near idle meanwhile (a bare
/// rumqttc poll loop would spin a core), then reconnects and re-announces availability and
/// discovery. Runs on one thread so that thread's CPU time is all the publisher's.
#[tokio::test(flavor = "current_thread")]
async fn broker_restart_reconnects_without_spinning() {
    if !wattson_tests::broker::have_mosquitto("broker_restart_reconnects_without_spinning") {
        return;
    }
    let mut broker = TestBroker::start(Kind::Mosquitto, &Options::default());
    let live = Arc::new(LiveState::default());
    let cancel = CancellationToken::new();
    feed(live.clone(), cancel.clone());
    let h = Publisher::spawn(
        cfg(&broker.url(false), "wattson-basket"),
        "basket".into(),
        live,
        extras(),
        cancel.clone(),
    )
    .unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || h
            .stats
            .discovery_sent
            .load(Ordering::Relaxed)
            > 0)
        .await
    );

    broker.kill();
    let cpu0 = thread_cpu_seconds();
    let outage = Duration::from_secs(4);
    tokio::time::sleep(outage).await; // the measurement window, not synchronisation
    let cpu = thread_cpu_seconds() - cpu0;
    let errors = h.stats.connection.connection_errors.load(Ordering::Relaxed);
    eprintln!("outage: {cpu:.3} s CPU in {outage:?}, {errors} connection errors");
    // Generous: 20 % of one core. A spinning reconnect loop uses ~100 %.
    assert!(
        cpu < 0.2 * outage.as_secs_f64(),
        "CPU {cpu} s during outage"
    );
    assert!((1..=8).contains(&errors), "{errors} error lines in 4 s");

    broker.restart();
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    let connects = h.stats.connection.connects.load(Ordering::Relaxed);
    assert!(
        wait_for(Duration::from_secs(15), || w
            .last("wattson/basket/availability")
            .is_some_and(|m| m.payload == b"online")
            && w.last(POWER_CONFIG).is_some()
            && w.last("wattson/basket/state").is_some())
        .await,
        "no reconnect: availability/discovery/state not re-sent"
    );
    assert!(h.stats.connection.connects.load(Ordering::Relaxed) >= connects.max(2));
    cancel.cancel();
    h.join.await.unwrap();
}

/// User + system CPU time of process `pid`, in clock ticks (100 per second), from
/// `/proc/<pid>/stat`: the daemon under test, not this machine.
fn process_cpu_ticks(pid: nix::unistd::Pid) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Time on a CPU of every thread of process `pid`, ns, from `/proc/<pid>/task/*/schedstat`
/// (finer than the clock ticks of `stat`; reported, not asserted).
fn process_cpu_ns(pid: nix::unistd::Pid) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Lines of `log` that say the daemon's MQTT connection failed and when it retries.
fn mqtt_retries(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("MQTT: ") && l.contains("retrying in"))
        .count()
}

/// The mosquitto broker is killed under a running `wattson run` and started again on the
/// same port. The daemon keeps storing meter samples while the broker is down (no gap in
/// the power series), stays near idle (no reconnect spin), reconnects, and re-publishes its
/// retained availability and discovery (the restarted broker kept no retained messages).
#[test]
fn the_daemon_rides_out_a_broker_restart_on_the_same_port() {
    use wattson_tests::{Child, HOST, TestEnv, db_points, meter_toml, now_ms, q, simulate};
    // rumqttd cannot be stopped in-process.
    if !wattson_tests::broker::have_mosquitto(
        "the_daemon_rides_out_a_broker_restart_on_the_same_port",
    ) {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let mut broker = TestBroker::start(Kind::Mosquitto, &Options::default());
    let env = TestEnv::new();
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n{}\n[mqtt]\nurl = {}\npublish_interval = \"500ms\"\nkeepalive = \"5s\"\n",
        meter_toml("wall", "pzem004t", &sim.path, "500ms", None),
        q(broker.url(false))
    ));
    let availability = format!("wattson/{HOST}/availability");
    let state = format!("wattson/{HOST}/state");
    let power_config = format!("homeassistant/sensor/wattson_{HOST}/power/config");
    let w = Watcher::start(broker.port, "watch", &["wattson/#", "homeassistant/#"]);
    let mut daemon = Child::run_daemon(&config, &[]);
    let announced = |w: &Watcher| {
        w.last(&availability)
            .is_some_and(|m| m.payload == b"online")
            && w.last(&power_config).is_some()
            && w.last(&state).is_some()
    };
    daemon.wait_for(
        "availability, discovery and state",
        Duration::from_secs(20),
        || announced(&w).then_some(()),
    );

    // The outage: until the daemon has retried three times and stored six samples (3 s).
    let retries_before = mqtt_retries(&daemon.stderr());
    broker.kill();
    let killed_ms = now_ms();
    let (cpu0, ns0) = (
        process_cpu_ticks(daemon.pid()),
        process_cpu_ns(daemon.pid()),
    );
    let t0 = std::time::Instant::now();
    daemon.wait_for(
        "three reconnect attempts and six samples stored while the broker is down",
        Duration::from_secs(30),
        || {
            let retries = mqtt_retries(&daemon.stderr()) - retries_before;
            let stored = db_points(&env.db, "meter:wall", Metric::Power)
                .iter()
                .filter(|p| p.0 > killed_ms)
                .count();
            (retries >= 3 && stored >= 6).then_some(())
        },
    );
    let cpu_s = (process_cpu_ticks(daemon.pid()) - cpu0) as f64 / 100.0;
    let ms = process_cpu_ns(daemon.pid()).saturating_sub(ns0) as f64 / 1e6;
    let window = t0.elapsed().as_secs_f64();
    let retries = mqtt_retries(&daemon.stderr()) - retries_before;
    eprintln!(
        "broker down: daemon used {cpu_s:.2} s CPU by utime+stime, {ms:.1} ms by schedstat, in {window:.2} s ({:.2} % of a core), {retries} retries",
        ms / 10.0 / window
    );
    // Generous: a quarter of a core (plus a tick either side). A reconnect loop without
    // backoff spins a whole core and logs thousands of lines.
    assert!(
        cpu_s <= 0.25 * window + 0.02,
        "{cpu_s} s CPU in {window} s with the broker down"
    );
    assert!(
        retries <= 8,
        "{retries} reconnect attempts in {window:.1} s"
    );

    // The broker comes back empty: no retained messages survive it.
    w.clear();
    let connects_before = daemon.stderr().matches("MQTT: connected").count();
    broker.restart();
    daemon.wait_for("a reconnect", Duration::from_secs(30), || {
        (daemon.stderr().matches("MQTT: connected").count() > connects_before).then_some(())
    });
    let reconnected_ms = now_ms();
    daemon.wait_for(
        "availability, discovery and state after the restart",
        Duration::from_secs(15),
        || announced(&w).then_some(()),
    );
    // A client that subscribes now gets them as retained messages.
    let late = Watcher::start(broker.port, "late", &["wattson/#", "homeassistant/#"]);
    daemon.wait_for(
        "retained availability and discovery",
        Duration::from_secs(10),
        || {
            let online = late
                .last(&availability)
                .is_some_and(|m| m.retain && m.payload == b"online");
            let discovery = late.last(&power_config).is_some_and(|m| m.retain);
            (online && discovery).then_some(())
        },
    );
    daemon.wait_for(
        "samples after the reconnect",
        Duration::from_secs(10),
        || {
            (db_points(&env.db, "meter:wall", Metric::Power)
                .iter()
                .filter(|p| p.0 > reconnected_ms)
                .count()
                >= 2)
                .then_some(())
        },
    );
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", daemon.stderr());

    no_gap_across_the_outage(&env.db, killed_ms, reconnected_ms);
}

/// One sample per 500 ms interval from the first to the last of the database at `db`, across
/// the broker's outage (killed at `killed_ms`, reconnected at `reconnected_ms`), and no gap
/// recorded.
fn no_gap_across_the_outage(db: &Path, killed_ms: i64, reconnected_ms: i64) {
    use wattson_tests::{HOST, db_points};
    const INTERVAL_MS: i64 = 500;
    let power = db_points(db, "meter:wall", Metric::Power);
    let (first, last) = (power[0].0, power[power.len() - 1].0);
    assert!(first < killed_ms && last > reconnected_ms);
    let expected = (last - first + INTERVAL_MS / 2) / INTERVAL_MS + 1;
    let widest = power.windows(2).map(|p| p[1].0 - p[0].0).max().unwrap();
    eprintln!(
        "{} samples over {} ms (expected {expected}), widest step {widest} ms",
        power.len(),
        last - first
    );
    assert!(
        (power.len() as i64 - expected).abs() <= 1,
        "{} samples from {first} to {last}, expected {expected}",
        power.len()
    );
    assert!(
        widest < 2 * INTERVAL_MS,
        "a {widest} ms step in the power series"
    );
    let store = wattson_tests::open_db(db).unwrap();
    assert!(
        store.gaps(HOST, 0, i64::MAX).unwrap().is_empty(),
        "a gap was recorded"
    );
}
