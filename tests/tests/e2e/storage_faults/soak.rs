//! The month soak, accelerated: 30 days of 1 Hz samples written in compressed time through
//! the store the daemon uses (`StoreHandle`: writer lock, batches, retries, memory bound,
//! WAL policy) on a 64 MB tmpfs, by a child process (this test binary run again) that the
//! soak restarts cleanly and kills with SIGKILL, while the meter is unplugged, the smart
//! plug's broker is down and the disk fills up, each several times. At the end the stored
//! energy is compared with the truth, and the database size and the writer's memory are
//! reported.
//!
//! Samples, in 5 s batches as the daemon's sampler sends them (its default flush
//! interval): the wall meter's power and voltage, the CPU's busy share, and a smart plug's
//! power, each once a simulated second. Power follows a known function of time (a daily
//! cycle, a 15-minute workload, deterministic noise), so the truth is exact.
//! `SOAK_DAYS` shortens the month (the events scale with it).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wattson::store::{StoreHandle, StoreOptions};
use wattson_collectors::{Metric, Sample};

mod month;

const CHILD_ENV: &str = "WATTSON_SOAK_CHILD_DB";
const HOST: &str = "soak";
const DAY_S: i64 = 86_400;
/// Seconds per batch: the daemon's default flush interval.
const BATCH_S: i64 = 5;

fn days() -> i64 {
    std::env::var("SOAK_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(30)
}

/// A deterministic value in [0, 1) for second `t` and stream `k`.
fn noise(t: i64, k: u64) -> f64 {
    let mut x =
        (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The wall draw at second `t`, W: 70 W idle, up to 40 W more by day, 25 W of workload
/// for 5 minutes in every 15, and +/- 1 W of noise.
fn wall_watts(t: i64) -> f64 {
    let day = (t.rem_euclid(DAY_S) as f64 / DAY_S as f64 * std::f64::consts::TAU).sin();
    let load = if t.rem_euclid(900) < 300 { 25.0 } else { 0.0 };
    70.0 + 20.0 * (1.0 + day) + load + 2.0 * (noise(t, 1) - 0.5)
}

/// The smart plug's draw (another machine), W.
fn plug_watts(t: i64) -> f64 {
    8.0 + 4.0 * noise(t, 2)
}

/// Simulated-time events, as offsets from the start in days scaled to the soak's length.
struct Events {
    /// `[from, to)` seconds in which the wall meter is unplugged.
    unplugged: Vec<(i64, i64)>,
    /// `[from, to)` seconds in which the plug's broker is down.
    broker_down: Vec<(i64, i64)>,
    restarts: Vec<i64>,
    crashes: Vec<i64>,
    /// `(from, seconds)`: the disk is full while this much simulated time is sampled.
    disk_full: Vec<(i64, i64)>,
}

impl Events {
    /// The month's events; a shorter soak has them all, shorter in proportion.
    fn new(start: i64, days: i64) -> Events {
        let scale = days as f64 / 30.0;
        let at = |d: f64| start + (d * scale * DAY_S as f64) as i64;
        let minutes = |m: i64| (m as f64 * 60.0 * scale.min(1.0)) as i64;
        let span = |d: f64, m: i64| (at(d), at(d) + minutes(m));
        Events {
            unplugged: vec![
                span(1.5, 40),
                span(4.2, 120),
                span(9.7, 10),
                span(15.1, 90),
                span(21.6, 25),
                span(27.3, 60),
            ],
            broker_down: vec![
                span(2.4, 30),
                span(7.8, 180),
                span(13.3, 15),
                span(19.9, 60),
                span(25.5, 45),
            ],
            restarts: [3.0, 10.0, 17.0, 24.0].map(at).to_vec(),
            crashes: [6.5, 12.5, 18.5, 26.5].map(at).to_vec(),
            // The last one lasts longer than the memory bound holds (about 7 h of these
            // four series): its oldest samples are dropped and counted.
            disk_full: vec![
                (at(5.0), minutes(30)),
                (at(11.0), minutes(120)),
                (at(16.0), minutes(20)),
                (at(22.0), minutes(600)),
            ],
        }
    }

    fn unplugged(&self, t: i64) -> bool {
        self.unplugged.iter().any(|&(a, b)| (a..b).contains(&t))
    }

    fn broker_down(&self, t: i64) -> bool {
        self.broker_down.iter().any(|&(a, b)| (a..b).contains(&t))
    }
}

/// A source that comes and goes: when it is back, the time it was away is recorded as a
/// gap, as the daemon's sampler does.
struct Source {
    name: &'static str,
    reason: &'static str,
    last_good_ms: Option<i64>,
    away: bool,
}

impl Source {
    fn new(name: &'static str, reason: &'static str) -> Source {
        Source {
            name,
            reason,
            last_good_ms: None,
            away: false,
        }
    }

    /// Whether it has a sample at `ts_ms`; records the gap when it comes back.
    fn present(&mut self, handle: &StoreHandle, here: bool, ts_ms: i64) -> bool {
        if !here {
            self.away = true;
            return false;
        }
        if std::mem::take(&mut self.away)
            && let Some(from) = self.last_good_ms
        {
            handle
                .record_gap(&self.name.into(), from, ts_ms, self.reason)
                .unwrap();
        }
        self.last_good_ms = Some(ts_ms);
        true
    }
}

fn store_options() -> StoreOptions {
    StoreOptions {
        host: HOST.to_owned(),
        // As the daemon: the sampler batches, the store commits each batch at once.
        flush_interval: Duration::ZERO,
        ..StoreOptions::default()
    }
}

/// The writer process: reads `run <until_s>`, `flush`, `stop` on stdin; generates and
/// inserts the samples of each simulated second as the daemon's sampler would.
#[test]
#[ignore = "run by soak_a_month_of_1hz_samples as a child process"]
fn soak_month_child() {
    let Some(db) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let start: i64 = std::env::var("WATTSON_SOAK_START")
        .unwrap()
        .parse()
        .unwrap();
    let mut t: i64 = std::env::var("WATTSON_SOAK_RESUME")
        .unwrap()
        .parse()
        .unwrap();
    let events = Events::new(start, days());
    let (handle, join) = StoreHandle::spawn(Path::new(&db), store_options()).unwrap();
    let mut out = std::io::stdout();
    let mut meter = Source::new("meter:wall", "device gone");
    let mut plug = Source::new("meter:plug", "broker unreachable");
    let mut batches = 0u64;
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let mut words = line.split_whitespace();
        match words.next() {
            Some(command @ ("run" | "crash")) => {
                let until: i64 = words.next().unwrap().parse().unwrap();
                while t < until {
                    let mut batch = Vec::with_capacity(4 * BATCH_S as usize);
                    for s in t..(t + BATCH_S).min(until) {
                        let ts = s * 1000;
                        if meter.present(&handle, !events.unplugged(s), ts) {
                            batch.push(Sample::new(
                                ts,
                                "meter:wall",
                                Metric::Power,
                                "",
                                wall_watts(s),
                            ));
                            batch.push(Sample::new(
                                ts,
                                "meter:wall",
                                Metric::Voltage,
                                "",
                                230.0 + 3.0 * noise(s, 3),
                            ));
                        }
                        if plug.present(&handle, !events.broker_down(s), ts) {
                            batch.push(Sample::new(
                                ts,
                                "meter:plug",
                                Metric::Power,
                                "",
                                plug_watts(s),
                            ));
                        }
                        batch.push(Sample::new(ts, "cpu", Metric::CpuBusy, "all", noise(s, 4)));
                    }
                    t = (t + BATCH_S).min(until);
                    handle.insert(batch).unwrap();
                    batches += 1;
                    // Compressed time outruns the writer: wait for it now and then (a
                    // query is answered once everything before it is handled), as the
                    // real sampler never has to at 1 Hz.
                    if batches.is_multiple_of(200) {
                        handle.query(|_| ()).unwrap();
                        writeln!(out, "at {t}").unwrap();
                        out.flush().unwrap();
                    }
                }
                if command == "crash" {
                    // Everything up to `until` is handed over, not all of it committed:
                    // the parent kills this process now.
                    writeln!(out, "at {t}").unwrap();
                    out.flush().unwrap();
                    std::thread::sleep(Duration::from_secs(3600));
                }
                handle.query(|_| ()).unwrap();
                let h = handle.health();
                writeln!(
                    out,
                    "done {t} {} {} {} {}",
                    h.held_samples,
                    h.dropped_samples,
                    h.dropped_batches,
                    h.writable()
                )
                .unwrap();
            }
            Some("flush") => {
                let ok = handle.flush().is_ok();
                let h = handle.health();
                writeln!(out, "flushed {ok} {} {}", h.held_samples, h.dropped_samples).unwrap();
            }
            Some("stop") => {
                let result = handle.close();
                join.join().unwrap().unwrap();
                writeln!(out, "closed {result:?}").unwrap();
                out.flush().unwrap();
                return;
            }
            _ => panic!("unknown command {line:?}"),
        }
        out.flush().unwrap();
    }
}

/// A running writer child.
struct Writer {
    child: std::process::Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    rss_max_kib: u64,
}

impl Writer {
    fn start(db: &Path, start: i64, resume: i64) -> Writer {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "storage_faults::soak::soak_month_child",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_ENV, db)
            .env("WATTSON_SOAK_START", start.to_string())
            .env("WATTSON_SOAK_RESUME", resume.to_string())
            .env("SOAK_DAYS", days().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Writer {
            child,
            stdin,
            lines,
            rss_max_kib: 0,
        }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
            })
            .unwrap_or(0)
    }

    /// The next line starting with `prefix` (the words after it), sampling memory while
    /// waiting.
    fn expect(&mut self, prefix: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(3600);
        loop {
            self.rss_max_kib = self.rss_max_kib.max(self.rss_kib());
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.split_whitespace().map(str::to_owned).collect();
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    assert!(Instant::now() < deadline, "no {prefix:?} from the writer");
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the writer ended before {prefix:?}")
                }
            }
        }
    }

    /// Runs simulated time up to `until`; returns (held, dropped, dropped batches, writable).
    fn run(&mut self, until: i64) -> (u64, u64, u64, bool) {
        self.send(&format!("run {until}"));
        let w = self.expect("done ");
        (
            w[1].parse().unwrap(),
            w[2].parse().unwrap(),
            w[3].parse().unwrap(),
            w[4] == "true",
        )
    }

    fn stop(mut self) -> (String, u64) {
        self.send("stop");
        let result = self.expect("closed ").join(" ");
        self.child.wait().unwrap();
        (result, self.rss_max_kib)
    }
}
