//! A misbehaving PZEM-004T on a pseudo-terminal.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::{Daemon, integrity, missing_ticks, raw_values, write_config};
use serialport::SerialPort as _;
use wattson_collectors::Metric;
use wattson_collectors::meter::MeterReading;
use wattson_collectors::meter::modbus::RequestParser;
use wattson_collectors::meter::pzem::{PzemDevice, PzemModel};

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
