//! Fault injection: a misbehaving meter on a pseudo-terminal, clock jumps and suspend gaps
//! fed to the store, SIGHUP under load, and a full disk.
//!
//! Daemon scenarios run the real `wattson` binary as a child process (signals and crashes
//! must not touch the test process); it is built on first use if the target dir lacks it.
//! Each test prints its figures (scenarios, samples expected, stored, lost) for
//! RELIABILITY.md: `cargo test -p wattson-tests --test e2e faults:: --
//! --skip mqtt_faults:: --skip storage_faults:: --nocapture`.
//! Soak versions: the same with `--ignored`.

// Test helpers unwrap and the tests print their figures for RELIABILITY.md.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::items_after_statements
)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wattson::store::{SeriesFilter, Store};
use wattson_collectors::Metric;
use wattson_tests::wattson_bin;

mod clock;
mod disk;
mod meter;
mod scripted;

// ---------------------------------------------------------------------------------------
// Helpers (kept here: tests/src/lib.rs is shared).
// ---------------------------------------------------------------------------------------

/// A running daemon whose stderr lines arrive on a channel and are kept.
struct Daemon {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Daemon {
    fn start(config: &Path, duration: &str) -> Daemon {
        let mut child = Command::new(wattson_bin())
            .args(["--config"])
            .arg(config)
            .args(["-v", "run", "--duration", duration])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Daemon {
            child,
            lines: rx,
            log: Vec::new(),
        }
    }

    /// Waits (bounded) for a log line containing `needle`.
    fn wait_for(&mut self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.log.push(line);
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Waits for exit (bounded) and returns its status and the whole log.
    fn finish(mut self, within: Duration) -> (std::process::ExitStatus, Vec<String>) {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("daemon did not stop; log:\n{}", self.log.join("\n"));
            }
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.log.push(line);
            }
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.log.push(line);
        }
        (status, self.log)
    }
}

fn write_config(dir: &Path, db: &Path, extra: &str) -> PathBuf {
    let path = dir.join("wattson.toml");
    std::fs::write(
        &path,
        format!(
            "[host]\nname = \"faults\"\n[storage]\npath = {:?}\nflush_interval = \"1s\"\n[cpu]\ninterval = \"1s\"\n{extra}",
            db.display().to_string()
        ),
    )
    .unwrap();
    path
}

fn raw_values(db: &Path, source: &str, metric: Metric, channel: &str) -> Vec<(i64, f64)> {
    let store = Store::open_read_only(db).unwrap();
    let filter = SeriesFilter::all()
        .source(&source.into())
        .metric(metric)
        .channel(channel);
    store
        .raw(&filter, 0, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|(_, points)| points)
        .collect()
}

fn integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
        .unwrap()
}

/// Missing 1 s ticks between the first and last timestamp.
fn missing_ticks(ts: &[i64], step: i64) -> i64 {
    let set: BTreeSet<i64> = ts.iter().copied().collect();
    let (Some(first), Some(last)) = (set.first(), set.last()) else {
        return 0;
    };
    (last - first) / step + 1 - set.len() as i64
}

// ---------------------------------------------------------------------------------------
// SIGHUP under load.
// ---------------------------------------------------------------------------------------

/// Runs the daemon, sends `hups` SIGHUPs, and returns the 1 s CPU ticks missing.
fn reload_under_load(seconds: u64, hups: u32) -> i64 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("reload.db");
    let config = write_config(dir.path(), &db, "");
    let mut daemon = Daemon::start(&config, &format!("{seconds}s"));
    assert!(daemon.wait_for("collecting:", Duration::from_secs(10)));
    // The handlers are installed just after that line; the first flush (1 s) proves the
    // runtime is up.
    let until = Instant::now() + Duration::from_secs(5);
    while raw_values(&db, "cpu", Metric::CpuBusy, "all").is_empty() {
        assert!(Instant::now() < until, "no samples flushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = nix::unistd::Pid::from_raw(daemon.child.id() as i32);
    let mut reloaded = 0;
    for _ in 0..hups {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
        if daemon.wait_for("collectors reloaded", Duration::from_secs(5)) {
            reloaded += 1;
        }
        // Let at least one poll of the new collector set happen before the next reload.
        let n = raw_values(&db, "cpu", Metric::CpuBusy, "all").len();
        let until = Instant::now() + Duration::from_secs(5);
        while raw_values(&db, "cpu", Metric::CpuBusy, "all").len() < n + 2 {
            if Instant::now() > until {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (status, log) = daemon.finish(Duration::from_secs(seconds + 20));
    assert!(status.success(), "{}", log.join("\n"));
    let ts: Vec<i64> = raw_values(&db, "cpu", Metric::CpuBusy, "all")
        .iter()
        .map(|p| p.0)
        .collect();
    let missing = missing_ticks(&ts, 1000);
    println!(
        "reload under load: {hups} SIGHUPs, {reloaded} reloads logged, {} cpu samples over {:.0} s, \
         {missing} 1 s ticks missing",
        ts.len(),
        (ts.last().unwrap_or(&0) - ts.first().unwrap_or(&0)) as f64 / 1000.0 + 1.0
    );
    let reload_lines: Vec<&String> = log.iter().filter(|l| l.contains("reload")).collect();
    assert_eq!(reloaded, hups, "{reload_lines:?}");
    assert!(
        missing <= i64::from(hups),
        "more than one sample lost per reload: {ts:?}"
    );
    missing
}

/// What holds today: every SIGHUP reloads, the daemon keeps running, and at most one CPU
/// tick per reload is lost (the replacement CPU collector needs a first reading before it
/// can report utilisation).
#[test]
fn sighup_under_load_reloads_and_loses_at_most_one_tick_per_reload() {
    reload_under_load(20, 3);
}

/// The contract: no samples lost around a reload (unchanged sources keep running).
#[test]
fn sighup_under_load_loses_no_samples() {
    assert_eq!(reload_under_load(20, 3), 0, "samples lost around a reload");
}

#[test]
#[ignore = "soak: 5 minutes, 60 reloads"]
fn soak_sighup_under_load() {
    let missing = reload_under_load(300, 60);
    println!("soak: {missing} ticks missing over 60 reloads");
}

// ---------------------------------------------------------------------------------------
// A collector stuck in a read.
// ---------------------------------------------------------------------------------------

/// Regression: a collector blocked in a read that never returns (a hwmon driver hung on
/// its bus) kept SIGTERM from stopping the daemon: the stop waited for the sampling thread
/// for ever. Now the daemon stops within its drain timeout, names the stuck collector,
/// keeps what was stored and exits non-zero.
///
/// The hang is real: the fixture's `power1_input` is replaced by a FIFO whose write end the
/// test holds open without writing, so the daemon's `read` blocks in the kernel.
#[test]
fn sigterm_stops_the_daemon_while_a_collector_is_stuck_in_a_read() {
    stuck_collector();
}

#[test]
#[ignore = "soak: the stuck-collector stop 10 times (about 2 minutes)"]
fn soak_sigterm_with_a_stuck_collector() {
    let took: Vec<f64> = (0..10).map(|_| stuck_collector().as_secs_f64()).collect();
    let max = took.iter().copied().fold(0.0, f64::max);
    println!(
        "soak: 10 stops with a stuck collector, SIGTERM to exit at most {max:.1} s: {took:.1?}"
    );
}

/// The scenario above; returns the time from SIGTERM to exit.
fn stuck_collector() -> Duration {
    use std::os::unix::fs::OpenOptionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let chip = dir.path().join("sys/class/hwmon/hwmon0");
    std::fs::create_dir_all(&chip).unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    std::fs::write(chip.join("name"), "testpsu\n").unwrap();
    let input = chip.join("power1_input");
    std::fs::write(&input, "42000000\n").unwrap();
    let db = dir.path().join("stuck.db");
    let config = dir.path().join("wattson.toml");
    std::fs::write(
        &config,
        format!(
            "[host]\nname = \"faults\"\nsysfs = {:?}\nprocfs = {:?}\n\
             [storage]\npath = {:?}\nflush_interval = \"1s\"\n\
             [cpu]\nenabled = false\n\
             [power]\nrapl = false\ngpu = false\nipmi = false\nhwmon = true\ninterval = \"1s\"\n",
            dir.path().join("sys").display().to_string(),
            dir.path().join("proc").display().to_string(),
            db.display().to_string()
        ),
    )
    .unwrap();
    let mut daemon = Daemon::start(&config, "120s");
    assert!(daemon.wait_for("collecting:", Duration::from_secs(10)));
    let until = Instant::now() + Duration::from_secs(10);
    while raw_values(&db, "hwmon", Metric::Power, "testpsu/power1").is_empty() {
        assert!(Instant::now() < until, "no hwmon samples flushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The sensor hangs: a FIFO takes the file's place.
    let fifo = chip.join("power1_input.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::fs::rename(&fifo, &input).unwrap();
    // Opening the write end succeeds only once the daemon is in its open() of the read end;
    // holding it open (and writing nothing) leaves the daemon's read() blocked.
    let until = Instant::now() + Duration::from_secs(10);
    let _writer = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&input)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENXIO as i32) => {
                assert!(
                    Instant::now() < until,
                    "the daemon never read the sensor again"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("opening the FIFO: {e}"),
        }
    };
    let stored = raw_values(&db, "hwmon", Metric::Power, "testpsu/power1").len();
    let pid = nix::unistd::Pid::from_raw(daemon.child.id() as i32);
    let sent = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let (status, log) = daemon.finish(Duration::from_secs(30));
    let took = sent.elapsed();
    let named: Vec<&String> = log.iter().filter(|l| l.contains("did not stop")).collect();
    let after = raw_values(&db, "hwmon", Metric::Power, "testpsu/power1").len();
    let check = integrity(&db);
    println!(
        "stuck collector: SIGTERM to exit {:.1} s, exit {status}, {stored} hwmon samples before \
         the hang, {after} at the end, integrity {check}; log: {:?}",
        took.as_secs_f64(),
        named.first()
    );
    assert!(
        took < Duration::from_secs(15),
        "took {took:?} to stop:\n{}",
        log.join("\n")
    );
    assert_eq!(status.code(), Some(1), "{}", log.join("\n"));
    assert!(
        named.iter().any(|l| l.contains("collector hwmon")),
        "the stuck collector is not named:\n{}",
        log.join("\n")
    );
    assert!(after >= stored, "stored samples lost");
    assert_eq!(check, "ok");
    took
}
