//! One owner of the database file: commands that write the database (and HTTP reports that
//! read it inside the daemon) beside the running daemon take nothing from under it. The
//! daemon's WAL stays the file on disk, every sample it was given is stored, and a SIGKILL
//! loses at most the last flush interval.
// Test helpers fail loudly on a broken setup.
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)]

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use wattson_collectors::Metric;
use wattson_tests::http::{HttpDaemon, get};
use wattson_tests::ledger::run;
use wattson_tests::{TestEnv, host_points, integrity_check, open_db, wait_for};

const HOST: &str = "shared";

/// The wall meter's stored power samples.
fn stored(db: &std::path::Path) -> Vec<(i64, f64)> {
    open_db(db).map_or_else(Vec::new, |s| {
        host_points(&s, HOST, "meter:wall", Metric::Power)
    })
}

/// The wall meter's samples stored, and the 250 ms ticks from its first to its last: a kill
/// or a stop may lose only what was not flushed, never a tick between.
fn ticks_stored(db: &std::path::Path) -> (i64, i64) {
    let points = stored(db);
    let (first, last) = (points[0].0, points[points.len() - 1].0);
    (points.len() as i64, (last - first) / 250 + 1)
}

/// The sequence, repeated: an HTTP report (the daemon opens the database to read
/// it), then a command that writes it. Every sample the meter gave in the run is stored.
#[test]
fn reports_and_writing_commands_beside_the_daemon_take_nothing_from_under_it() {
    let env = TestEnv::new();
    let HttpDaemon {
        meter: _meter,
        config,
        daemon,
        addr,
    } = HttpDaemon::start(&env, HOST, 100.0);
    let pid = daemon.pid().as_raw();
    daemon.wait_for("the first samples stored", Duration::from_secs(20), || {
        (!stored(&env.db).is_empty()).then_some(())
    });
    let started = Instant::now();
    let commands: [&[&str]; 3] = [
        &["candidate", "add", "mini", "--idle", "8", "--at", "100%=30"],
        &["candidate", "set", "mini", "--perf-ratio", "2"],
        &["candidate", "remove", "mini"],
    ];
    for round in 0..3 {
        for cmd in commands {
            assert_eq!(get(addr, "/report.html", &[]).unwrap().status, 200);
            run(&config, cmd);
            let deleted = wattson_tests::deleted_files_of(pid, &env.db);
            assert!(
                deleted.is_empty(),
                "round {round}, after {cmd:?}: the daemon holds deleted files {deleted:?}; \
                 stderr:\n{}",
                daemon.stderr()
            );
        }
        let report = get(addr, "/report.json", &[]).unwrap();
        assert_eq!(report.status, 200, "{}", report.body);
        let health = get(addr, "/healthz", &[]).unwrap();
        assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    }
    // The store keeps growing after all that: the writer's commits reach the file on disk.
    let before = stored(&env.db).len();
    wait_for("samples to keep arriving", Duration::from_secs(10), || {
        (stored(&env.db).len() >= before + 4).then_some(())
    });
    let elapsed = started.elapsed();
    daemon.signal(Signal::SIGKILL);
    drop(daemon);
    let (stored_n, expected) = ticks_stored(&env.db);
    println!(
        "shared store: {} rounds of report + {} writing commands over {:.1} s; {} of {expected} \
         samples between the first and last stored",
        3,
        commands.len(),
        elapsed.as_secs_f64(),
        stored_n
    );
    assert!(
        stored_n >= expected - 1,
        "{stored_n} samples stored of {expected}"
    );
    assert_eq!(integrity_check(&env.db), "ok");
}

/// A write-ahead log deleted from under the daemon (as a process that took itself for the
/// last connection would) is noticed at the next flush: the database is opened anew, the
/// samples held are written again, and the store keeps growing where other processes read
/// it; `status` says what happened.
#[test]
fn a_write_ahead_log_deleted_from_under_the_daemon_is_noticed_and_the_store_reopened() {
    let env = TestEnv::new();
    let HttpDaemon {
        meter: _meter,
        config,
        mut daemon,
        addr: _,
    } = HttpDaemon::start(&env, HOST, 100.0);
    let pid = daemon.pid().as_raw();
    daemon.wait_for("the first samples stored", Duration::from_secs(20), || {
        (!stored(&env.db).is_empty()).then_some(())
    });
    let mut wal = env.db.as_os_str().to_owned();
    wal.push("-wal");
    let mut shm = env.db.as_os_str().to_owned();
    shm.push("-shm");
    std::fs::remove_file(&wal).unwrap();
    std::fs::remove_file(&shm).unwrap();
    let deleted_at = wattson_tests::now_ms();
    daemon.wait_for_log("left without its write-ahead log", Duration::from_secs(10));
    // Samples taken after the deletion reach the file other processes read.
    wait_for(
        "samples after the deletion",
        Duration::from_secs(10),
        || {
            stored(&env.db)
                .iter()
                .any(|p| p.0 > deleted_at + 1_000)
                .then_some(())
        },
    );
    assert!(
        wattson_tests::deleted_files_of(pid, &env.db).is_empty(),
        "{:?}",
        wattson_tests::deleted_files_of(pid, &env.db)
    );
    let status = run(&config, &["status"]);
    assert!(
        status.contains(
            "recovered    the database's write-ahead log was deleted from under the writer"
        ),
        "{status}"
    );
    daemon.stop_cleanly();
    let (stored_n, expected) = ticks_stored(&env.db);
    println!(
        "WAL deleted under the daemon: {stored_n} of {expected} samples between the first and \
         last stored"
    );
    assert!(stored_n >= expected - 1, "{stored_n} of {expected}");
    assert_eq!(integrity_check(&env.db), "ok");
}
