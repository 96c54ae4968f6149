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
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serialport::SerialPort as _;
use wattson::store::{Resolution, SeriesFilter, Store, StoreHandle, StoreOptions};
use wattson_collectors::meter::MeterReading;
use wattson_collectors::meter::modbus::RequestParser;
use wattson_collectors::meter::pzem::{PzemDevice, PzemModel};
use wattson_collectors::{Metric, Sample};
use wattson_tests::wattson_bin;

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
// A misbehaving PZEM-004T on a pseudo-terminal.
// ---------------------------------------------------------------------------------------

/// How the fake device answers one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Answer {
    Good,
    /// The whole reply, 900 ms late (the daemon waits 600 ms).
    Slow,
    /// The first half of the reply, then silence.
    Partial,
    /// Random bytes of a reply's length.
    Garbage,
    /// The reply with one bit flipped (CRC error).
    BitFlip,
    /// A well-formed reply (good CRC) claiming 9999.9 V and 99 kW.
    Implausible,
}

const GOOD_WATTS: f64 = 123.4;

struct FakeMeter {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
    _slave: serialport::TTYPort,
}

impl FakeMeter {
    fn start(script: Vec<Answer>) -> FakeMeter {
        let (mut master, slave) = serialport::TTYPort::pair().unwrap();
        let path = PathBuf::from(slave.name().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let thread = {
            let stop = stop.clone();
            let requests = requests.clone();
            std::thread::spawn(move || {
                let mut parser = RequestParser::new(&[]);
                let mut device = PzemDevice::new(PzemModel::Ac, 1);
                let good = MeterReading {
                    power_w: Some(GOOD_WATTS),
                    voltage_v: Some(230.0),
                    current_a: Some(0.6),
                    power_factor: Some(0.9),
                    frequency_hz: Some(50.0),
                    energy_wh: Some(1000.0),
                };
                let bad = MeterReading {
                    power_w: Some(99_000.0),
                    voltage_v: Some(9999.9),
                    ..good
                };
                let mut rng = 0x2545_f491_4f6c_dd1d_u64;
                let mut buf = [0u8; 256];
                while !stop.load(Ordering::Relaxed) {
                    let n = match master.read(&mut buf) {
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
                        Err(_) => {
                            // EIO while the daemon has the slave closed: wait for it.
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                    };
                    parser.push(&buf[..n]);
                    while let Some(req) = parser.next_request() {
                        let i = requests.fetch_add(1, Ordering::Relaxed) as usize;
                        let answer = script[i % script.len()];
                        let reading = if answer == Answer::Implausible {
                            &bad
                        } else {
                            &good
                        };
                        let Some(mut reply) = device.respond(&req, reading) else {
                            continue;
                        };
                        match answer {
                            Answer::Good | Answer::Implausible => {}
                            Answer::Slow => std::thread::sleep(Duration::from_millis(900)),
                            Answer::Partial => reply.truncate(reply.len() / 2),
                            Answer::Garbage => {
                                for b in &mut reply {
                                    rng ^= rng << 13;
                                    rng ^= rng >> 7;
                                    rng ^= rng << 17;
                                    *b = rng as u8;
                                }
                            }
                            Answer::BitFlip => reply[5] ^= 0x10,
                        }
                        let _ = master.write_all(&reply);
                    }
                }
            })
        };
        FakeMeter {
            path,
            stop,
            requests,
            thread: Some(thread),
            _slave: slave,
        }
    }
}

impl Drop for FakeMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn misbehaving_meter(seconds: u64) {
    let script = vec![
        Answer::Good,
        Answer::Slow,
        Answer::Good,
        Answer::Partial,
        Answer::Good,
        Answer::Garbage,
        Answer::Good,
        Answer::BitFlip,
        Answer::Good,
        Answer::Implausible,
    ];
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("faults.db");
    let meter = FakeMeter::start(script.clone());
    let config = write_config(
        dir.path(),
        &db,
        &format!(
            "[[meter]]\nid = \"wall\"\nprotocol = \"pzem004t\"\nport = {:?}\ninterval = \"1s\"\n",
            meter.path.display().to_string()
        ),
    );
    let daemon = Daemon::start(&config, &format!("{seconds}s"));
    let (status, log) = daemon.finish(Duration::from_secs(seconds + 20));
    let requests = meter.requests.load(Ordering::Relaxed);
    drop(meter);
    assert!(
        status.success(),
        "daemon failed: {status}\n{}",
        log.join("\n")
    );

    let power = raw_values(&db, "meter:wall", Metric::Power, "");
    let volts = raw_values(&db, "meter:wall", Metric::Voltage, "");
    let cpu = raw_values(&db, "cpu", Metric::CpuBusy, "all");
    let bad: Vec<_> = power
        .iter()
        .filter(|(_, w)| (*w - GOOD_WATTS).abs() > 0.05)
        .chain(volts.iter().filter(|(_, v)| (*v - 230.0).abs() > 0.05))
        .collect();
    let good_answers = (0..requests as usize)
        .filter(|i| script[i % script.len()] == Answer::Good)
        .count();
    println!(
        "misbehaving meter, {seconds} s: {requests} requests answered by the script {script:?}; \
         {good_answers} good answers; stored {} power samples, {} bad values; \
         cpu busy samples {} (expected ~{seconds}, missing ticks {})",
        power.len(),
        bad.len(),
        cpu.len(),
        missing_ticks(&cpu.iter().map(|p| p.0).collect::<Vec<_>>(), 1000)
    );
    assert!(bad.is_empty(), "bad values stored: {bad:?}");
    assert!(!power.is_empty(), "no good meter reading was stored");
    assert!(
        cpu.len() as u64 >= seconds.saturating_sub(3),
        "CPU samples lost while the meter misbehaved: {} in {seconds} s",
        cpu.len()
    );
    assert_eq!(integrity(&db), "ok");
}

#[test]
fn a_slow_partial_or_garbage_meter_stores_no_bad_value_and_keeps_cpu_samples() {
    misbehaving_meter(12);
}

#[test]
#[ignore = "soak: 10 minutes"]
fn soak_misbehaving_meter() {
    misbehaving_meter(600);
}

// ---------------------------------------------------------------------------------------
// Clock jumps and suspend gaps, straight into the store.
// ---------------------------------------------------------------------------------------

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const H: i64 = 3_600_000;
const MIN: i64 = 60_000;

fn power(ts: i64, w: f64) -> Sample {
    Sample::new(ts, "meter:wall", Metric::Power, "", w)
}

fn store_with(batches: Vec<Vec<Sample>>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("clock.db");
    let (handle, thread) = StoreHandle::spawn(&db, StoreOptions::default()).unwrap();
    for (i, b) in batches.into_iter().enumerate() {
        handle.insert(b).unwrap();
        // The queue is bounded (a full one drops batches): let the writer catch up.
        if i % 100 == 99 {
            handle.flush().unwrap();
        }
    }
    handle.flush().unwrap();
    handle.close().unwrap();
    thread.join().unwrap().unwrap();
    (dir, db)
}

fn segment(from: i64, to: i64, w: f64) -> Vec<Vec<Sample>> {
    (from..to)
        .step_by(1000)
        .map(|t| power(t, w))
        .collect::<Vec<_>>()
        .chunks(60)
        .map(<[Sample]>::to_vec)
        .collect()
}

/// Stores the clock-jump scenario, checks what must hold, and returns (raw samples stored,
/// distinct raw timestamps).
fn clock_jumps() -> (usize, usize) {
    // An hour at 100 W; the clock steps back 1 h and the same hour is sampled again at 200 W;
    // then it steps forward 2 h and half an hour follows at 100 W.
    let mut batches = segment(T0, T0 + H, 100.0);
    batches.extend(segment(T0, T0 + H, 200.0));
    batches.extend(segment(T0 + 3 * H, T0 + 3 * H + 30 * MIN, 100.0));
    let sent: usize = batches.iter().map(Vec::len).sum();
    let (_dir, db) = store_with(batches);
    let store = Store::open_read_only(&db).unwrap();
    let host = "localhost";
    let total =
        wattson::ledger::energy::energy(&store, host, &"meter:wall".into(), T0 - H, T0 + 5 * H)
            .unwrap()
            .wh;
    let first_hour =
        wattson::ledger::energy::energy(&store, host, &"meter:wall".into(), T0, T0 + H)
            .unwrap()
            .wh;
    let jumped =
        wattson::ledger::energy::energy(&store, host, &"meter:wall".into(), T0 + H, T0 + 3 * H)
            .unwrap()
            .wh;
    let stored = raw_values(&db, "meter:wall", Metric::Power, "");
    let filter = SeriesFilter::all().metric(Metric::Power);
    let mut buckets = 0;
    let mut negative = 0;
    for res in [Resolution::Minute, Resolution::Hour] {
        for (_, rollups) in store.rollups(&filter, res, T0 - H, T0 + 5 * H).unwrap() {
            let starts: BTreeSet<i64> = rollups.iter().map(|r| r.bucket_ms).collect();
            assert_eq!(starts.len(), rollups.len(), "duplicate {res:?} buckets");
            buckets += rollups.len();
            negative += rollups
                .iter()
                .filter(|r| r.energy_wh.is_some_and(|e| e < 0.0))
                .count();
        }
    }
    let distinct: BTreeSet<i64> = stored.iter().map(|p| p.0).collect();
    println!(
        "clock jumps: sent {sent} samples, stored {} ({} distinct timestamps), {buckets} rollup \
         buckets, {negative} negative; energy total {total:.2} Wh (the hour twice: 100 or 200 Wh, \
         plus 50 Wh), first hour {first_hour:.2} Wh, across the 2 h forward jump {jumped:.4} Wh",
        stored.len(),
        distinct.len()
    );
    assert_eq!(negative, 0);
    assert!(total >= 0.0 && first_hour >= 0.0);
    assert!(
        (99.0..=201.0).contains(&first_hour),
        "the repeated hour counted {first_hour} Wh: neither one copy nor the other"
    );
    assert!(
        jumped < 0.1,
        "energy interpolated across the forward jump: {jumped} Wh"
    );
    (stored.len(), distinct.len())
}

#[test]
fn clock_steps_back_then_forward_never_give_negative_energy_or_duplicate_buckets() {
    clock_jumps();
}

/// Regression: a repeated hour (the clock stepped back) was stored twice in raw data, so
/// readers of raw samples saw two values per timestamp. Each series is now stored in time
/// order and the repeated hour is dropped (and logged).
#[test]
fn clock_step_back_stores_no_duplicate_raw_timestamps() {
    let (stored, distinct) = clock_jumps();
    assert_eq!(stored, distinct, "duplicate raw timestamps stored");
    assert_eq!(stored, 5_400, "one hour and half an hour of 1 s samples");
}

/// A week of 1 s samples from a machine whose clock misbehaves: every 6 h it steps back
/// 1 h, every day it jumps forward 2 h, and every 12 h it sleeps 10 min (suspend).
#[test]
#[ignore = "soak: a week of samples (about 600,000) through the store"]
fn soak_a_week_of_clock_steps_and_suspends() {
    let started = Instant::now();
    let mut batches = Vec::new();
    let mut clock = T0;
    let (mut sent_back, mut jumps, mut suspends) = (0, 0, 0);
    for hour in 0..7 * 24 {
        let from = clock;
        let mut to = clock + H;
        if hour % 12 == 11 {
            to -= 10 * MIN;
            suspends += 1;
        }
        batches.extend(segment(from, to, 100.0 + f64::from(hour % 5)));
        clock += H;
        if hour % 6 == 5 {
            clock -= H;
            sent_back += 1;
        }
        if hour % 24 == 23 {
            clock += 2 * H;
            jumps += 1;
        }
    }
    let sent: usize = batches.iter().map(Vec::len).sum();
    let (_dir, db) = store_with(batches);
    let store = Store::open_read_only(&db).unwrap();
    let stored = raw_values(&db, "meter:wall", Metric::Power, "");
    let distinct: BTreeSet<i64> = stored.iter().map(|p| p.0).collect();
    let ordered = stored.windows(2).all(|w| w[0].0 < w[1].0);
    let filter = SeriesFilter::all().metric(Metric::Power);
    let (mut buckets, mut duplicate, mut negative) = (0, 0, 0);
    for res in [Resolution::Minute, Resolution::Hour] {
        for (_, rollups) in store.rollups(&filter, res, T0 - H, clock + H).unwrap() {
            let starts: BTreeSet<i64> = rollups.iter().map(|r| r.bucket_ms).collect();
            duplicate += rollups.len() - starts.len();
            buckets += rollups.len();
            negative += rollups
                .iter()
                .filter(|r| r.energy_wh.is_some_and(|e| e < 0.0))
                .count();
        }
    }
    let total = wattson::ledger::energy::energy(
        &store,
        "localhost",
        &"meter:wall".into(),
        T0 - H,
        clock + H,
    )
    .unwrap()
    .wh;
    let hours_stored = stored.len() as f64 / 3600.0;
    println!(
        "soak clock: {sent} samples sent over a week ({sent_back} steps back, {jumps} forward \
         jumps, {suspends} suspends); stored {} ({} distinct, in order: {ordered}); {buckets} \
         rollup buckets, {duplicate} duplicate, {negative} negative; energy {total:.1} Wh for \
         {hours_stored:.1} h stored; {:.1} s",
        stored.len(),
        distinct.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(stored.len(), distinct.len(), "duplicate raw timestamps");
    assert!(ordered);
    assert_eq!((duplicate, negative), (0, 0));
    // 100-104 W over the hours stored, less the edges of gaps and jumps.
    assert!(
        total > 99.0 * (hours_stored - 1.0) && total < 105.0 * hours_stored,
        "{total}"
    );
}

#[test]
fn a_suspend_like_gap_is_recorded_as_no_energy() {
    let mut batches = segment(T0, T0 + 10 * MIN, 100.0);
    batches.extend(segment(T0 + 20 * MIN, T0 + 30 * MIN, 100.0));
    let (_dir, db) = store_with(batches);
    let store = Store::open_read_only(&db).unwrap();
    let gap = wattson::ledger::energy::energy(
        &store,
        "localhost",
        &"meter:wall".into(),
        T0 + 10 * MIN,
        T0 + 20 * MIN,
    )
    .unwrap()
    .wh;
    let total = wattson::ledger::energy::energy(
        &store,
        "localhost",
        &"meter:wall".into(),
        T0,
        T0 + 30 * MIN,
    )
    .unwrap()
    .wh;
    println!(
        "suspend gap: 1200 samples around 10 min of silence; energy in the silence {gap:.4} Wh, \
         total {total:.3} Wh (expected <= 33.33)"
    );
    // At most one 1 s step at the edge: 100 W x 1 s = 0.028 Wh.
    assert!(gap <= 0.03, "energy invented across the gap: {gap} Wh");
    assert!((33.0..=33.34).contains(&total), "total {total} Wh");
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
// A full disk.
// ---------------------------------------------------------------------------------------

#[test]
fn a_full_disk_is_logged_and_survived_without_corruption() {
    full_disk(14, 1);
}

#[test]
#[ignore = "soak: 5 minutes, the disk filled and freed 10 times"]
fn soak_full_disk_filled_and_freed_again_and_again() {
    full_disk(300, 10);
}

/// Runs the daemon for `seconds` with its database on an 8 MB tmpfs, which is filled and
/// freed `cycles` times; each time the error must be logged (or absorbed) and storing must
/// resume, and in the end no 1 s CPU tick may be missing: failed flushes are retried.
fn full_disk(seconds: u64, cycles: u32) {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(&mnt)
        .output();
    let why = match mounted {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "mount -t tmpfs failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run mount: {e}")),
    };
    if let Some(why) = why {
        // CI runs as root: there the small file system must be there.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and {why}"
        );
        println!("SKIPPED disk full: {why}");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());

    let db = mnt.join("wattson.db");
    let config = write_config(dir.path(), &db, "");
    let mut daemon = Daemon::start(&config, &format!("{seconds}s"));
    assert!(daemon.wait_for("collecting:", Duration::from_secs(10)));
    let started = Instant::now();
    let until = Instant::now() + Duration::from_secs(5);
    while raw_values(&db, "cpu", Metric::CpuBusy, "all").is_empty() {
        assert!(Instant::now() < until, "no samples flushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = raw_values(&db, "cpu", Metric::CpuBusy, "all").len();
    let (mut saw_error, mut alive_while_full, mut resumed) = (true, true, 0);
    let (mut logged, mut absorbed) = (0, 0);
    for cycle in 0..cycles {
        // Fill the rest of the file system.
        let filler_path = mnt.join("filler");
        let mut filler = std::fs::File::create(&filler_path).unwrap();
        let block = vec![0u8; 4096];
        while filler.write_all(&block).is_ok() {}
        let _ = filler.sync_all();
        // Either a flush fails and says so, or SQLite still had room in the pages it
        // already holds (a write-ahead log reused after a checkpoint) and storing goes on.
        let stored_at_fill = raw_values(&db, "cpu", Metric::CpuBusy, "all").len();
        if daemon.wait_for("flush failed", Duration::from_secs(8)) {
            logged += 1;
        } else if raw_values(&db, "cpu", Metric::CpuBusy, "all").len() > stored_at_fill {
            absorbed += 1;
        } else {
            saw_error = false;
        }
        alive_while_full &= daemon.child.try_wait().unwrap().is_none();
        // Free the space again: storing must resume.
        drop(filler);
        std::fs::remove_file(&filler_path).unwrap();
        let n = raw_values(&db, "cpu", Metric::CpuBusy, "all").len();
        let until = Instant::now() + Duration::from_secs(10);
        while raw_values(&db, "cpu", Metric::CpuBusy, "all").len() <= n && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
        if raw_values(&db, "cpu", Metric::CpuBusy, "all").len() > n {
            resumed += 1;
        }
        // Spread the cycles over the run.
        let next = started + Duration::from_secs(seconds * u64::from(cycle + 1)) / (cycles + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let pid = nix::unistd::Pid::from_raw(daemon.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let (status, log) = daemon.finish(Duration::from_secs(30));
    let error_lines: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("flush failed") || l.contains("ERROR"))
        .collect();
    let cpu: Vec<i64> = raw_values(&db, "cpu", Metric::CpuBusy, "all")
        .iter()
        .map(|p| p.0)
        .collect();
    let after = cpu.len();
    let missing = missing_ticks(&cpu, 1000);
    let check = integrity(&db);
    println!(
        "disk full: {cycles} fill/free cycles, storing resumed after {resumed} of them; cpu \
         samples stored before {before}, at the end {after} (run {seconds} s), {missing} \
         1 s ticks missing; error logged in {logged} fills, absorbed without loss in \
         {absorbed}, silent loss in none: {saw_error}; alive while full: \
         {alive_while_full}; exit {status}; integrity_check: {check}; first error line: {:?}",
        error_lines.first()
    );
    // Failed flushes are kept and retried: nothing sampled is lost.
    assert_eq!(
        missing,
        0,
        "CPU samples lost to the full disk:\n{}",
        log.join("\n")
    );
    assert!(
        saw_error,
        "a fill neither logged an error nor kept storing:\n{}",
        log.join("\n")
    );
    assert!(alive_while_full, "the daemon died when the disk filled");
    assert!(status.success(), "{}", log.join("\n"));
    assert_eq!(check, "ok");
    assert!(
        after > before,
        "storing did not resume once space was freed"
    );
    assert_eq!(resumed, cycles, "storing did not resume after every cycle");
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
