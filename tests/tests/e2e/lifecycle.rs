//! Stopping the daemon: SIGTERM and SIGINT drain and exit 0; SIGKILL at any moment leaves a
//! database that passes `PRAGMA integrity_check` and that the next run keeps writing.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::panic)]

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson_collectors::Metric;
use wattson_tests::{Child, TestEnv, db_points, integrity_check, meter_toml, now_ms, simulate};

fn meter_config(env: &TestEnv, sim: &wattson::sources::meters::SimHandle) -> std::path::PathBuf {
    env.config(&format!(
        "\n[cpu]\ninterval = \"250ms\"\n{}",
        meter_toml("wall", "pzem004t", &sim.path, "250ms", None)
    ))
}

fn stops_cleanly_on(signal: Signal) {
    let env = TestEnv::new();
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = meter_config(&env, &sim);
    let mut daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for("meter samples", Duration::from_secs(10), || {
        (db_points(&env.db, "meter:wall", Metric::Power).len() >= 2).then_some(())
    });
    let sent = Instant::now();
    let sent_ms = now_ms();
    daemon.signal(signal);
    let status = daemon.wait_exit(Duration::from_secs(2)).unwrap_or_else(|| {
        panic!(
            "still running 2 s after {signal}; stderr:\n{}",
            daemon.stderr()
        )
    });
    let took = sent.elapsed();
    assert_eq!(
        status.code(),
        Some(0),
        "{signal}: {status}; stderr:\n{}",
        daemon.stderr()
    );
    assert_eq!(integrity_check(&env.db), "ok");
    // The drain flushed what was sampled up to the signal.
    let last = db_points(&env.db, "meter:wall", Metric::Power)
        .last()
        .map_or(0, |p| p.0);
    assert!(
        last >= sent_ms - 600,
        "last stored sample {} ms before {signal}",
        sent_ms - last
    );
    eprintln!("{signal}: exited 0 in {took:?}");
}

#[test]
fn sigterm_drains_and_exits_zero_within_two_seconds() {
    stops_cleanly_on(Signal::SIGTERM);
}

#[test]
fn sigint_drains_and_exits_zero_within_two_seconds() {
    stops_cleanly_on(Signal::SIGINT);
}

/// A pseudo-random delay in `0..max_ms` (no seed to manage; the moment is what matters).
fn random_ms(max_ms: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    u64::from(nanos.wrapping_mul(2_654_435_761) >> 7) % max_ms
}

#[test]
fn sigkill_at_any_moment_leaves_a_sound_database_the_next_run_uses() {
    let env = TestEnv::new();
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = meter_config(&env, &sim);
    let mut stored = 0;
    for round in 0..5 {
        let started_ms = now_ms();
        let mut daemon = Child::run_daemon(&config, &[]);
        // This run is writing: a sample stamped after its start is in the file.
        daemon.wait_for(
            &format!("round {round}: samples from this run"),
            Duration::from_secs(10),
            || {
                db_points(&env.db, "meter:wall", Metric::Power)
                    .iter()
                    .any(|&(t, _)| t >= started_ms)
                    .then_some(())
            },
        );
        let delay = random_ms(700);
        std::thread::sleep(Duration::from_millis(delay));
        daemon.signal(Signal::SIGKILL);
        let status = daemon.wait_exit(Duration::from_secs(2)).expect("killed");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert_eq!(
            integrity_check(&env.db),
            "ok",
            "round {round}, killed after {delay} ms"
        );
        let now = db_points(&env.db, "meter:wall", Metric::Power).len();
        assert!(now > stored, "round {round}: {now} samples, had {stored}");
        stored = now;
    }
    // A clean run after the crashes still works and keeps the history.
    let mut daemon = Child::run_daemon(&config, &[]);
    let started_ms = now_ms();
    daemon.wait_for("samples after the crashes", Duration::from_secs(10), || {
        db_points(&env.db, "meter:wall", Metric::Power)
            .iter()
            .any(|&(t, _)| t >= started_ms)
            .then_some(())
    });
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(2)).expect("exits");
    assert_eq!(status.code(), Some(0), "stderr:\n{}", daemon.stderr());
    assert_eq!(integrity_check(&env.db), "ok");
    assert!(db_points(&env.db, "meter:wall", Metric::Power).len() > stored);
}

#[test]
fn flush_interval_bounds_how_far_the_database_lags() {
    // [storage] flush_interval = "200ms": "at most this much is lost on a crash". The newest
    // stored sample should trail the clock by about the flush interval, not seconds.
    let env = TestEnv::new();
    let sim = simulate("pzem004t", &[1], 80.0);
    let config = meter_config(&env, &sim);
    let daemon = Child::run_daemon(&config, &[]);
    daemon.wait_for("meter samples", Duration::from_secs(10), || {
        (!db_points(&env.db, "meter:wall", Metric::Power).is_empty()).then_some(())
    });
    let start = Instant::now();
    let mut worst = 0;
    while start.elapsed() < Duration::from_secs(3) {
        if let Some(&(t, _)) = db_points(&env.db, "meter:wall", Metric::Power).last() {
            worst = worst.max(now_ms() - t);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // 250 ms between samples + 200 ms buffered + the commit, with room for a busy machine.
    assert!(
        worst <= 1500,
        "the newest stored sample was up to {worst} ms old; stderr:\n{}",
        daemon.stderr()
    );
}
