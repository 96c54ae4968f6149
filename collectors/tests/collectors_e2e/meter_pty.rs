//! End-to-end meter tests: the collector and session on the slave side of a real
//! pseudo-terminal, opened by path with `serialport` exactly as in production, against the
//! simulated device serving the master side.

// Helpers outside #[test] fns are test code too.
#![allow(clippy::unwrap_used, clippy::many_single_char_names)]
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serialport::{SerialPort, TTYPort};
use wattson_collectors::meter::port::open;
use wattson_collectors::meter::session::SessionOptions;
use wattson_collectors::meter::{
    MeterCollector, MeterConfig, MeterReading, MeterSession, Protocol, SimulatedMeter, probe,
};
use wattson_collectors::{Action, Collector, Metric};

struct Sim {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<SimulatedMeter>>,
    path: PathBuf,
}

impl Sim {
    fn start(mut meter: SimulatedMeter) -> Sim {
        let (master, slave) = TTYPort::pair().expect("pty pair");
        let path = PathBuf::from(slave.name().expect("slave name"));
        drop(slave);
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            meter.serve(master, &s).expect("simulator");
            meter
        });
        Sim {
            stop,
            handle: Some(handle),
            path,
        }
    }

    fn stop(mut self) -> SimulatedMeter {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn reading(p: f64) -> MeterReading {
    MeterReading {
        power_w: Some(p),
        voltage_v: Some(231.0),
        current_a: Some(p / 231.0),
        power_factor: Some(0.9),
        frequency_hz: Some(50.0),
        energy_wh: Some(1200.0),
    }
}

fn session(
    path: &Path,
    protocol: Protocol,
    addresses: &[u8],
) -> MeterSession<Box<dyn serialport::SerialPort>> {
    let opts = SessionOptions::for_protocol(protocol);
    let port = open(path, protocol.default_serial(), Duration::from_millis(200)).unwrap();
    MeterSession::new(port, protocol, addresses, opts)
}

fn value(samples: &[wattson_collectors::Sample], source: &str, metric: Metric) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.source == *source && s.metric == metric)
        .map(|s| s.value)
}

#[test]
fn three_pzems_on_one_bus_through_the_collector() {
    let sim = Sim::start(SimulatedMeter::new(
        Protocol::Pzem004t,
        &[1, 2, 3],
        Box::new(|_, addr| reading(100.0 * f64::from(addr))),
    ));
    let mut cfg = MeterConfig::new("house", Protocol::Pzem004t, &sim.path);
    cfg.addresses = vec![1, 2, 3];
    cfg.ids = vec!["l1".into(), "l2".into(), "l3".into()];
    let mut c = MeterCollector::new(cfg).unwrap();
    let samples = c.poll(1_000).unwrap();
    assert_eq!(value(&samples, "meter:l1", Metric::Power), Some(100.0));
    assert_eq!(value(&samples, "meter:l2", Metric::Power), Some(200.0));
    assert_eq!(value(&samples, "meter:l3", Metric::Power), Some(300.0));
    assert_eq!(
        value(&samples, "meter:l3", Metric::EnergyCounter),
        Some(1200.0)
    );
    assert_eq!(value(&samples, "meter:l3", Metric::EnergyTotal), Some(0.0));
    assert!(
        samples
            .iter()
            .all(|s| s.ts_ms == 1_000 && s.channel.is_empty())
    );
    let counters = c.counters();
    assert_eq!(counters.len(), 3);
    assert!(
        counters
            .iter()
            .all(|(_, k)| k.good_frames == 1 && k.crc_errors == 0 && k.timeouts == 0)
    );
    drop(c);
    assert_eq!(sim.stop().frames_sent, 3);
}

#[test]
fn pzem_energy_reset_quirk_and_energy_tracker() {
    let sim = Sim::start(SimulatedMeter::new(
        Protocol::Pzem004t,
        &[1],
        Box::new(|_, _| reading(50.0)),
    ));
    let mut s = session(&sim.path, Protocol::Pzem004t, &[1]);
    let first = s.poll().pop().unwrap().unwrap();
    assert_eq!(first.reading.energy_wh, Some(1200.0));
    s.reset_energy(1).unwrap();
    let after = s.poll().pop().unwrap().unwrap();
    assert_eq!(after.reading.energy_wh, Some(0.0));
    // The counter tracker sees a device reset, not negative energy.
    let mut t = wattson_collectors::counter::EnergyTracker::new(Some(10_000_000.0), 1.0);
    t.update(0, first.reading.energy_wh.unwrap(), first.reading.power_w);
    assert_eq!(
        t.update(1000, 0.0, after.reading.power_w),
        wattson_collectors::counter::EnergyStep::Reset(0.0)
    );
    // Unknown address: a timeout, counted.
    drop(s);
    let mut other = session(&sim.path, Protocol::Pzem004t, &[9]);
    assert!(matches!(
        other.poll()[0],
        Err(wattson_collectors::meter::SessionError::Timeout { address: 9, .. })
    ));
    assert_eq!(other.counters()[0].1.timeouts, 1);
}

#[test]
fn every_protocol_end_to_end() {
    for protocol in Protocol::ALL {
        let sim = Sim::start(SimulatedMeter::constant(protocol, &[1], reading(120.0)));
        let addrs: &[u8] = if protocol.is_polled() { &[1] } else { &[] };
        let mut s = session(&sim.path, protocol, addrs);
        let r = s
            .poll()
            .pop()
            .unwrap()
            .unwrap_or_else(|e| panic!("{protocol}: {e}"));
        let p = r.reading.power_w.unwrap();
        assert!((p - 120.0).abs() < 0.2, "{protocol}: {p}");
        let v = r.reading.voltage_v.unwrap();
        assert!((v - 231.0).abs() < 0.2, "{protocol}: {v}");
        let c = s.counters()[0].1;
        assert!(c.good_frames >= 1 && c.crc_errors == 0, "{protocol}: {c:?}");
        if protocol == Protocol::Sdm120 {
            // Basic SDM120 lacks 0x0048: energy comes from the total register instead.
            let e = r.reading.energy_wh.unwrap();
            assert!((e - 1200.0).abs() < 0.01, "{protocol}: {e}");
        }
    }
}

#[test]
fn unplugged_meter_is_gone_then_back_within_two_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("ttyUSB0");
    let sim = Sim::start(SimulatedMeter::constant(
        Protocol::Pzem004t,
        &[1],
        reading(80.0),
    ));
    std::os::unix::fs::symlink(&sim.path, &link).unwrap();
    let mut cfg = MeterConfig::new("wall", Protocol::Pzem004t, &link);
    cfg.addresses = vec![1];
    let mut c = MeterCollector::new(cfg).unwrap();
    assert!(c.poll(0).is_ok());

    // Unplug: the device side closes.
    drop(sim.stop());
    let e = c.poll(1_000).unwrap_err();
    assert_eq!(e.action(), Action::Reopen, "{e}");
    assert!(!c.is_connected());
    // Still missing: the symlink dangles.
    assert_eq!(c.poll(2_000).unwrap_err().action(), Action::Reopen);
    assert_eq!(c.poll(3_000).unwrap_err().action(), Action::Reopen);

    // Replug at t = 3.5 s; the daemon polls every second.
    let sim = Sim::start(SimulatedMeter::constant(
        Protocol::Pzem004t,
        &[1],
        reading(81.0),
    ));
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&sim.path, &link).unwrap();
    let back = [4_000, 5_000].iter().find_map(|&t| c.poll(t).ok());
    let samples = back.expect("reconnected within 2 s of the device returning");
    assert_eq!(value(&samples, "meter:wall", Metric::Power), Some(81.0));
    // Counters survived the reconnect.
    assert_eq!(c.counters()[0].1.good_frames, 2);
}

/// What the probe finds for a simulated `protocol` on a pseudo-terminal, `None` where it
/// does not look.
fn probed_as(protocol: Protocol) -> Option<Protocol> {
    match protocol {
        Protocol::Pzem004t
        | Protocol::Pzem017
        | Protocol::Sdm120
        | Protocol::Sdm630
        | Protocol::WattsUp
        | Protocol::Cse7766
        | Protocol::Hlw8032 => Some(protocol),
        // A pseudo-terminal has no line speed: the 2400-baud attempt reaches it first, and
        // it lacks the SDM630's system power register, as an SDM120 does.
        Protocol::Sdm230 => Some(Protocol::Sdm120),
        // Not probed: a text format cannot be recognised without its column map.
        Protocol::Line => None,
    }
}

#[test]
fn probe_identifies_each_simulated_meter() {
    let started = Instant::now();
    let probed: Vec<_> = Protocol::ALL
        .into_iter()
        .filter_map(|p| probed_as(p).map(|expect| (p, expect)))
        .collect();
    for &(protocol, expect) in &probed {
        let sim = Sim::start(SimulatedMeter::constant(protocol, &[1], reading(60.0)));
        let found = probe(&sim.path, Duration::from_millis(1500))
            .unwrap_or_else(|e| panic!("{protocol}: {}", wattson_collectors::ErrorChain(&e)));
        assert_eq!(found.protocol, expect);
        let p = found.reading.and_then(|r| r.power_w).unwrap();
        assert!((p - 60.0).abs() < 0.2, "{protocol}: {p}");
    }
    eprintln!(
        "probe of {} meters took {:?}",
        probed.len(),
        started.elapsed()
    );
}

/// Regression: a PZEM was reported at address 248, the general address 0xF8 that the probe
/// asks on (and an address the config refuses). It is now asked for its own address.
#[test]
fn probe_reports_a_pzem_at_its_own_address_not_the_general_one() {
    for protocol in [Protocol::Pzem004t, Protocol::Pzem017] {
        let sim = Sim::start(SimulatedMeter::constant(protocol, &[17], reading(60.0)));
        let found = probe(&sim.path, Duration::from_millis(1500))
            .unwrap_or_else(|e| panic!("{protocol}: {e}"));
        assert_eq!(found.protocol, protocol);
        assert_eq!(found.address, Some(17), "{protocol}");
        assert!(!found.general_address, "{protocol}");
    }
}

#[test]
fn probe_of_a_silent_port_names_it() {
    let (master, slave) = TTYPort::pair().unwrap();
    let path = slave.name().unwrap();
    let e = probe(Path::new(&path), Duration::from_millis(100))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&path) && e.contains("pzem004t"), "{e}");
    drop(master);
}
