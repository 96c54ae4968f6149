//! The meter cannot get stuck: random fault scripts, for every protocol, played by an
//! in-memory device under a [`MeterCollector`] polled once a (virtual) second. After every
//! fault window ends, a good reading comes within the first [`RECOVERS_WITHIN`] polls that
//! no fault holds; the meter is never stopped for good; every reading stored is the
//! device's, and none is taken under a fault that leaves nothing whole (every fault but
//! junk after a whole reply).
//!
//! Deterministic (a seeded generator), so a failure prints a script that fails again.
//! `SCRIPTS` scripts per protocol; `WATTSON_FAULT_SCRIPTS=N` runs N instead
//! (RELIABILITY.md).

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::cse7766::{Chip, CseEncoder, Hlw8032Constants};
use super::super::faults::{Fault, FaultScript, FaultWindow};
use super::super::line::LineFormat;
use super::super::modbus::RequestParser;
use super::super::pzem::{PzemDevice, PzemModel, RESET_ENERGY};
use super::super::sdm::{SdmDevice, SdmModel};
use super::super::wattsup;
use super::*;
use crate::meter::MeterReading;
use crate::meter::port::MeterPort;

/// Polls after a fault ends within which a good reading must come.
const RECOVERS_WITHIN: u64 = 3;
/// Scripts per protocol in the suite (9 protocols: 10,017 scripts).
const SCRIPTS: u64 = 1_113;
/// The poll interval of the virtual clock, ms.
const TICK_MS: u64 = 1_000;

const TRUTH: MeterReading = MeterReading {
    power_w: Some(120.0),
    voltage_v: Some(230.0),
    current_a: Some(0.6),
    power_factor: Some(0.87),
    frequency_hz: Some(50.0),
    energy_wh: Some(1000.0),
};

/// The device side of the line and the virtual clock it reads faults by.
struct Wire {
    protocol: Protocol,
    script: FaultScript,
    /// Bytes on their way to the session.
    pending: Vec<u8>,
    requests: RequestParser,
    device: Device,
    rng: u64,
}

/// The device side of each protocol.
enum Device {
    Pzem(PzemDevice),
    Sdm(SdmDevice),
    Cse(CseEncoder),
    WattsUp,
    Line,
}

impl Device {
    fn of(protocol: Protocol) -> Device {
        match protocol {
            Protocol::Pzem004t => Device::Pzem(PzemDevice::new(PzemModel::Ac, 1)),
            Protocol::Pzem017 => Device::Pzem(PzemDevice::new(PzemModel::Dc, 1)),
            Protocol::Sdm120 => Device::Sdm(SdmDevice::new(SdmModel::Sdm120, 1)),
            Protocol::Sdm230 => Device::Sdm(SdmDevice::new(SdmModel::Sdm230, 1)),
            Protocol::Sdm630 => Device::Sdm(SdmDevice::new(SdmModel::Sdm630, 1)),
            Protocol::Cse7766 => Device::Cse(CseEncoder::new(Chip::Cse7766)),
            Protocol::Hlw8032 => {
                Device::Cse(CseEncoder::new(Chip::Hlw8032(Hlw8032Constants::default())))
            }
            Protocol::WattsUp => Device::WattsUp,
            Protocol::Line => Device::Line,
        }
    }

    /// The reply to `request`, for a polled device.
    fn respond(&mut self, request: super::super::modbus::Request) -> Option<Vec<u8>> {
        match self {
            Device::Pzem(d) => d.respond(&request, &TRUTH),
            Device::Sdm(d) => d.respond(&request, &TRUTH),
            Device::Cse(_) | Device::WattsUp | Device::Line => None,
        }
    }

    /// The records a streaming device sends over one tick.
    fn records(&mut self) -> Vec<Vec<u8>> {
        match self {
            Device::WattsUp => vec![wattsup::encode_record(&TRUTH).into_bytes()],
            Device::Line => vec![LineFormat::default().encode_line(&TRUTH).into_bytes()],
            Device::Cse(enc) => (0..3).map(|_| enc.frame(&TRUTH, 50).to_vec()).collect(),
            Device::Pzem(_) | Device::Sdm(_) => Vec::new(),
        }
    }
}

impl Wire {
    fn fault(&self, now_ms: i64) -> Option<Fault> {
        self.script.at(now_ms as u64)
    }

    fn send(&mut self, frame: Vec<u8>, now_ms: i64) {
        let bytes = match self.fault(now_ms) {
            Some(f) => f.apply(&frame, &mut self.rng),
            None => frame,
        };
        self.pending.extend_from_slice(&bytes);
    }

    /// The records a streaming device sent over one tick.
    fn stream_tick(&mut self, now_ms: i64) {
        for f in self.device.records() {
            self.send(f, now_ms);
        }
    }
}

struct Line {
    wire: Arc<Mutex<Wire>>,
    now: Arc<AtomicI64>,
}

impl Read for Line {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut w = self.wire.lock().expect("wire");
        if w.pending.is_empty() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let n = buf.len().min(w.pending.len());
        buf[..n].copy_from_slice(&w.pending[..n]);
        w.pending.drain(..n);
        Ok(n)
    }
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let now = self.now.load(Ordering::SeqCst);
        let mut w = self.wire.lock().expect("wire");
        if !w.protocol.is_polled() {
            return Ok(buf.len());
        }
        w.requests.push(buf);
        while let Some(req) = w.requests.next_request() {
            let reply = w.device.respond(req);
            if let Some(r) = reply {
                w.send(r, now);
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Opener {
    wire: Arc<Mutex<Wire>>,
    now: Arc<AtomicI64>,
}

impl PortOpener for Opener {
    fn open(
        &mut self,
        _path: &Path,
        _settings: SerialSettings,
        _read_timeout: Duration,
    ) -> Result<Box<dyn MeterPort>, PortError> {
        Ok(Box::new(Line {
            wire: self.wire.clone(),
            now: self.now.clone(),
        }))
    }
}

/// xorshift64.
fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// One to four windows of faults that apply to `protocol`, between 2 and 40 s, each 0.5 to
/// 8 s long, apart or overlapping.
fn random_script(protocol: Protocol, rng: &mut u64) -> FaultScript {
    let faults: Vec<Fault> = Fault::ALL
        .into_iter()
        .chain([Fault::Exception(4), Fault::Exception(6)])
        .filter(|f| f.applies(protocol.is_polled()))
        .collect();
    let n = 1 + next(rng) % 4;
    let windows = (0..n)
        .map(|_| FaultWindow {
            fault: faults[(next(rng) % faults.len() as u64) as usize],
            start_ms: 2_000 + next(rng) % 38_000,
            length_ms: 500 + next(rng) % 7_500,
        })
        .collect();
    FaultScript {
        windows,
        cycle_ms: None,
    }
}

/// A collector on a line whose device plays `script` by the clock it returns (UTC ms).
fn collector_for(
    protocol: Protocol,
    script: FaultScript,
) -> (MeterCollector, Arc<Mutex<Wire>>, Arc<AtomicI64>) {
    let device = Device::of(protocol);
    let wire = Arc::new(Mutex::new(Wire {
        protocol,
        script,
        pending: Vec::new(),
        // A PZEM also takes the bare energy-reset request.
        requests: RequestParser::new(match &device {
            Device::Pzem(_) => &[RESET_ENERGY],
            Device::Sdm(_) | Device::Cse(_) | Device::WattsUp | Device::Line => &[],
        }),
        device,
        rng: 0x9e37_79b9_7f4a_7c15,
    }));
    let now = Arc::new(AtomicI64::new(0));
    let mut config = MeterConfig::new("wall", protocol, "/dev/ttyFAULTS");
    if protocol.is_polled() {
        config.addresses = vec![1];
    }
    if protocol == Protocol::Line {
        config.line = Some(LineFormat::default());
    }
    // A reply is complete or not at once here: the shortest timeout the session takes.
    config.timeout_ms = 1;
    let collector = MeterCollector::with_opener(
        config,
        Box::new(Opener {
            wire: wire.clone(),
            now: now.clone(),
        }),
    )
    .expect("a valid meter")
    .reading_ahead();
    (collector, wire, now)
}

/// Plays `script` for `protocol`; the first broken promise, if any.
fn play(protocol: Protocol, script: &FaultScript) -> Result<(), String> {
    let (mut m, wire, clock) = collector_for(protocol, script.clone());
    let end_ms = script
        .windows
        .iter()
        .map(FaultWindow::end_ms)
        .max()
        .unwrap_or(0)
        + (RECOVERS_WITHIN + 2) * TICK_MS;
    let mut good_at = Vec::new();
    let mut t = 0;
    while t <= end_ms {
        let now = t as i64;
        // The line reads the clock for the fault in force when it answers a request.
        clock.store(now, Ordering::SeqCst);
        if !protocol.is_polled() {
            wire.lock().expect("wire").stream_tick(now);
        }
        m.prepare(now);
        let result = m.poll(now);
        let in_fault = script.at(t).is_some();
        match result {
            Ok(samples) => {
                // Stamped when the meter took it: a reading ahead arrives a poll later.
                for s in samples.iter().filter(|s| s.metric == crate::Metric::Power) {
                    if (s.value - 120.0).abs() > 1.5 {
                        return Err(format!(
                            "t={t} ms: stored {} W, the device said 120 W",
                            s.value
                        ));
                    }
                    let at = s.ts_ms as u64;
                    if let Some(f) = script.at(at).filter(|f| *f != Fault::Overlong) {
                        return Err(format!(
                            "t={t} ms: a reading taken at {at} ms, under {f}, was accepted"
                        ));
                    }
                    good_at.push(at);
                }
            }
            Err(e) if !in_fault && e.action() == crate::Action::Stop => {
                return Err(format!("t={t} ms: the meter stopped for good: {e}"));
            }
            Err(_) => {}
        }
        t += TICK_MS;
    }
    for w in &script.windows {
        // The first polls at or after the window's end that no fault holds: another window
        // may begin before the meter had its chance.
        let clean: Vec<u64> = (w.end_ms().div_ceil(TICK_MS)..)
            .map(|k| k * TICK_MS)
            .take_while(|&k| k <= end_ms)
            .filter(|&k| script.at(k).is_none())
            .take(RECOVERS_WITHIN as usize)
            .collect();
        if !clean.iter().any(|k| good_at.contains(k)) {
            return Err(format!(
                "{w}: no good reading at the {RECOVERS_WITHIN} polls after the fault's end \
                 that no fault holds ({clean:?}); good readings at {good_at:?}"
            ));
        }
    }
    Ok(())
}

/// Plays [`SCRIPTS`] random scripts (or `WATTSON_FAULT_SCRIPTS`) on `protocol`.
fn random_scripts_recover(protocol: Protocol, seed: u64) {
    let scripts = std::env::var("WATTSON_FAULT_SCRIPTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(SCRIPTS);
    let mut rng = seed;
    for i in 0..scripts {
        let script = random_script(protocol, &mut rng);
        if let Err(why) = play(protocol, &script) {
            let windows: Vec<String> = script.windows.iter().map(ToString::to_string).collect();
            panic!("{protocol}, script {i} [{}]: {why}", windows.join(", "));
        }
    }
}

/// One test a protocol, so they run side by side.
macro_rules! recovers {
    ($($name:ident: $protocol:expr, $seed:expr;)*) => {$(
        #[test]
        fn $name() {
            random_scripts_recover($protocol, $seed);
        }
    )*};
}

recovers! {
    pzem004t_reads_again_after_every_fault_of_random_scripts: Protocol::Pzem004t, 0x2545_f491_4f6c_dd1d;
    pzem017_reads_again_after_every_fault_of_random_scripts: Protocol::Pzem017, 0x9e37_79b9_7f4a_7c15;
    sdm120_reads_again_after_every_fault_of_random_scripts: Protocol::Sdm120, 0xbf58_476d_1ce4_e5b9;
    sdm230_reads_again_after_every_fault_of_random_scripts: Protocol::Sdm230, 0x94d0_49bb_1331_11eb;
    sdm630_reads_again_after_every_fault_of_random_scripts: Protocol::Sdm630, 0xd6e8_feb8_6659_fd93;
    wattsup_reads_again_after_every_fault_of_random_scripts: Protocol::WattsUp, 0xa076_1d64_78bd_642f;
    cse7766_reads_again_after_every_fault_of_random_scripts: Protocol::Cse7766, 0xe703_7ed1_a0b4_28db;
    hlw8032_reads_again_after_every_fault_of_random_scripts: Protocol::Hlw8032, 0x8ebc_6af0_9c88_c6e3;
    line_reads_again_after_every_fault_of_random_scripts: Protocol::Line, 0x5899_65cc_7537_4cc3;
}

#[test]
fn every_protocol_is_played() {
    assert_eq!(
        Protocol::ALL.len(),
        9,
        "a new protocol needs its line in recovers!"
    );
}
