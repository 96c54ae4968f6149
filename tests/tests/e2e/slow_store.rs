//! A slow store does not delay MQTT keep-alives or the systemd watchdog: the MQTT state's
//! store figures come from a thread of their own (`runtime/ledger_feed.rs`), never from a
//! store query on the async runtime, which also drives the broker connection and the
//! watchdog.
//!
//! The store is made slow from outside, as another process would: a write transaction on
//! the database for 3 s, shorter than the writer's busy timeout (5 s), so its flushes (and
//! the queries queued behind them on its thread) wait but do not fail.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;
use wattson_tests::broker::{Kind, Options, TestBroker, Watcher};
use wattson_tests::{Child, TestEnv, q, wattson};

#[test]
fn a_slow_store_does_not_delay_mqtt_keepalives_or_the_watchdog() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _rt = rt.enter();
    let broker = TestBroker::start(Kind::Rumqttd, &Options::default());
    let watcher = Watcher::start(broker.port, "slow-watch", &["wattson/+/state"]);
    let env = TestEnv::new();
    let sim = wattson_tests::simulate("pzem004t", &[1], 50.0);
    let config = env.config(&format!(
        "\n[cpu]\nenabled = false\n\n[mqtt]\nurl = {}\npublish_interval = \"500ms\"\nkeepalive = \"1s\"\n{}",
        q(broker.url(false)),
        wattson_tests::meter_toml("wall", "pzem004t", &sim.path, "250ms", Some(1))
    ));
    let sock_path = env.path("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut cmd = wattson();
    cmd.env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "1000000");
    let mut daemon = Child::run_daemon_with(cmd, &config, &[]);
    let states = || -> Vec<Value> {
        watcher
            .on(&format!("wattson/{}/state", wattson_tests::HOST))
            .iter()
            .map(|m| serde_json::from_slice(&m.payload).unwrap())
            .collect()
    };
    daemon.wait_for(
        "states with the store's figures",
        Duration::from_secs(20),
        || {
            (states()
                .iter()
                .filter(|s| s.get("energy_ts").is_some())
                .count()
                >= 3)
                .then_some(())
        },
    );

    // The newest power sample the store has committed (readers are not blocked).
    let stored_newest = || {
        wattson_tests::db_points(&env.db, "meter:wall", wattson_collectors::Metric::Power)
            .last()
            .map(|p| p.0)
    };
    // Another writer holds the database for 3 s.
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let stored_at_lock = stored_newest();
    let locked_at = Instant::now();
    let before = states().len();
    let mut pings = Vec::new();
    let mut buf = [0u8; 256];
    while locked_at.elapsed() < Duration::from_secs(3) {
        if let Ok(n) = sock.recv(&mut buf)
            && &buf[..n] == b"WATCHDOG=1"
        {
            pings.push(locked_at.elapsed());
        }
    }
    let during: Vec<Value> = states()[before..].to_vec();
    let stored_at_unlock = stored_newest();
    conn.execute_batch("COMMIT").unwrap();
    drop(conn);

    // The watchdog kept pinging at half its 1 s interval...
    assert!(
        pings.len() >= 5,
        "watchdog pings while the store was slow: {pings:?}"
    );
    let longest = pings
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .max()
        .unwrap_or_default();
    assert!(longest < Duration::from_millis(900), "{pings:?}");
    // ...the publisher kept publishing at its 500 ms...
    assert!(
        during.len() >= 4,
        "{} states while the store was slow",
        during.len()
    );
    // ...while the store committed nothing (it was slow), and the states' energy still
    // moved with the samples: the served counters include what the store has not flushed.
    assert_eq!(stored_at_lock, stored_at_unlock, "the store was not slow");
    let frozen: Vec<Option<i64>> = during.iter().map(|s| s["energy_ts"].as_i64()).collect();
    assert!(
        frozen.windows(2).any(|w| w[1] > w[0]),
        "the energy stood still while the store was slow: {frozen:?}"
    );
    // The broker connection was never dropped for a missed keep-alive.
    daemon.wait_for(
        "a state after the store is back",
        Duration::from_secs(10),
        || {
            let last = states().last()?["energy_ts"].as_i64()?;
            (Some(last) > frozen[frozen.len() - 1]).then_some(())
        },
    );
    daemon.signal(Signal::SIGTERM);
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(10)).unwrap().code(),
        Some(0)
    );
    let log = daemon.stderr();
    assert_eq!(log.matches("MQTT: connected to").count(), 1, "{log}");
    assert!(!log.contains("batch lost"), "{log}");
}
