//! A simulated meter: the device side of every protocol, served over anything `Read + Write`
//! (the master side of a pseudo-terminal in tests, `wattson meter simulate` and `wattson
//! demo`). Polled devices answer requests byte-exactly, quirks included (0xF8 replies, 0x42
//! echo and counter reset, exception 0x02 for registers a model lacks); streaming devices
//! emit at their real rate (Watts Up: 1 s once logging is started; CSE7766/HLW8032: 50 ms).
//!
//! `serve` expects `io` reads to time out now and then (a `serialport::TTYPort` from
//! `TTYPort::pair()` does, every 100 ms by default) so that `stop` and the emission timer are
//! honoured. Model readings are in W, V, A, Hz, Wh; the model's energy is a lifetime total.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::now_ms;

use super::MeterReading;
use super::cse7766::{Chip, CseEncoder, Hlw8032Constants};
use super::faults::FaultScript;
use super::line::LineFormat;
use super::modbus::RequestParser;
use super::protocol::Protocol;
use super::pzem::{PzemDevice, PzemModel, RESET_ENERGY};
use super::sdm::{SdmDevice, SdmModel};
use super::wattsup::{self, CommandParser, DeviceAction};

/// `(now_ms, address) -> reading`: what the simulated device measures. `now_ms` is UTC ms.
pub type ReadingModel = Box<dyn FnMut(i64, u8) -> MeterReading + Send>;

/// Why the simulator stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("simulated {protocol} meter: I/O on its line")]
    Io {
        protocol: Protocol,
        #[source]
        source: io::Error,
    },
}

enum Device {
    Pzem(Vec<PzemDevice>),
    Sdm(Vec<SdmDevice>),
    Stream(Stream),
}

/// What a streaming device sends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stream {
    /// `#d` records, once told to start logging.
    WattsUp,
    /// 24-byte frames.
    Cse(Chip),
    /// Text lines in the simulator's [`LineFormat`].
    Line,
}

/// A streaming device's encoder while it serves.
enum Encoder {
    WattsUp,
    Cse(CseEncoder),
    Line,
}

/// A simulated device (or several Modbus devices sharing one line).
pub struct SimulatedMeter {
    protocol: Protocol,
    devices: Device,
    model: ReadingModel,
    line: LineFormat,
    /// Faults played over the good frames, timed from when serving starts.
    faults: FaultScript,
    /// Garbage for the faults.
    rng: u64,
    /// Requests answered (polled) or records sent (streaming).
    pub frames_sent: u64,
}

impl SimulatedMeter {
    /// Modbus devices at `addresses` (PZEM default 1, SDM default 1 when empty); streaming
    /// protocols ignore `addresses` and pass address 0 to the model.
    pub fn new(protocol: Protocol, addresses: &[u8], model: ReadingModel) -> Self {
        let addrs: Vec<u8> = if addresses.is_empty() {
            vec![1]
        } else {
            addresses.to_vec()
        };
        let pzems =
            |model| Device::Pzem(addrs.iter().map(|&a| PzemDevice::new(model, a)).collect());
        let sdms = |model| Device::Sdm(addrs.iter().map(|&a| SdmDevice::new(model, a)).collect());
        let devices = match protocol {
            Protocol::Pzem004t => pzems(PzemModel::Ac),
            Protocol::Pzem017 => pzems(PzemModel::Dc),
            Protocol::Sdm120 => sdms(SdmModel::Sdm120),
            Protocol::Sdm230 => sdms(SdmModel::Sdm230),
            Protocol::Sdm630 => sdms(SdmModel::Sdm630),
            Protocol::WattsUp => Device::Stream(Stream::WattsUp),
            Protocol::Cse7766 => Device::Stream(Stream::Cse(Chip::Cse7766)),
            Protocol::Hlw8032 => {
                Device::Stream(Stream::Cse(Chip::Hlw8032(Hlw8032Constants::default())))
            }
            Protocol::Line => Device::Stream(Stream::Line),
        };
        SimulatedMeter {
            protocol,
            devices,
            model,
            line: LineFormat::default(),
            faults: FaultScript::default(),
            rng: 0x2545_f491_4f6c_dd1d,
            frames_sent: 0,
        }
    }

    /// Play `faults` over the frames, from when [`SimulatedMeter::serve`] starts.
    #[must_use]
    pub fn with_faults(mut self, faults: FaultScript) -> Self {
        self.faults = faults;
        self
    }

    /// `frame` as the device sends it `elapsed` after it started serving: through the
    /// fault in force then, if any.
    fn faulted(&mut self, frame: Vec<u8>, elapsed: Duration) -> Vec<u8> {
        match self.faults.at(elapsed.as_millis() as u64) {
            Some(fault) => fault.apply(&frame, &mut self.rng),
            None => frame,
        }
    }

    /// Use this format for [`Protocol::Line`] (default: `power,voltage,current` CSV).
    #[must_use]
    pub fn with_line_format(mut self, format: LineFormat) -> Self {
        self.line = format;
        self
    }

    /// Board constants for [`Protocol::Hlw8032`].
    #[must_use]
    pub fn with_hlw8032(mut self, constants: Hlw8032Constants) -> Self {
        if let Device::Stream(Stream::Cse(Chip::Hlw8032(c))) = &mut self.devices {
            *c = constants;
        }
        self
    }

    /// A constant reading for every address (handy for tests and probes).
    pub fn constant(protocol: Protocol, addresses: &[u8], reading: MeterReading) -> Self {
        Self::new(protocol, addresses, Box::new(move |_, _| reading))
    }

    fn err(&self, source: io::Error) -> SimError {
        SimError::Io {
            protocol: self.protocol,
            source,
        }
    }

    /// Serve until `stop` is set. A missing peer (pty slave closed) is waited out.
    pub fn serve(&mut self, mut io: impl Read + Write, stop: &AtomicBool) -> Result<(), SimError> {
        match self.devices {
            Device::Stream(stream) => self.serve_stream(&mut io, stop, stream),
            Device::Pzem(_) | Device::Sdm(_) => self.serve_polled(&mut io, stop),
        }
    }

    /// Read once: bytes, or 0 on timeout / no peer.
    fn read_some(&self, io: &mut impl Read, buf: &mut [u8]) -> Result<usize, SimError> {
        match io.read(buf) {
            Ok(0) => {
                std::thread::sleep(Duration::from_millis(20));
                Ok(0)
            }
            Ok(n) => Ok(n),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(0)
            }
            Err(e) if super::session::is_gone(&e) => {
                // No peer has the line open right now: wait for one.
                std::thread::sleep(Duration::from_millis(20));
                Ok(0)
            }
            Err(e) => Err(self.err(e)),
        }
    }

    fn send(&mut self, io: &mut impl Write, bytes: &[u8]) -> Result<(), SimError> {
        if bytes.is_empty() {
            return Ok(());
        }
        match io.write_all(bytes).and_then(|()| io.flush()) {
            Ok(()) => {
                self.frames_sent += 1;
                Ok(())
            }
            // Nobody reading (buffer full, peer gone): the byte stream is lost, as on a wire.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) || super::session::is_gone(&e) =>
            {
                Ok(())
            }
            Err(e) => Err(self.err(e)),
        }
    }

    fn serve_polled(
        &mut self,
        io: &mut (impl Read + Write),
        stop: &AtomicBool,
    ) -> Result<(), SimError> {
        let bare: &'static [u8] = if matches!(self.devices, Device::Pzem(_)) {
            &[RESET_ENERGY]
        } else {
            &[]
        };
        let mut parser = RequestParser::new(bare);
        let mut buf = [0u8; 256];
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let n = self.read_some(io, &mut buf)?;
            parser.push(&buf[..n]);
            while let Some(req) = parser.next_request() {
                let now = now_ms();
                let mut reply = None;
                match &mut self.devices {
                    Device::Pzem(devs) => {
                        for d in devs.iter_mut().filter(|d| d.accepts(req.address())) {
                            let reading = (self.model)(now, d.address);
                            let r = d.respond(&req, &reading);
                            // On 0xF8 only one device may talk (one meter on the line).
                            if reply.is_none() {
                                reply = r;
                            }
                        }
                    }
                    Device::Sdm(devs) => {
                        for d in devs.iter().filter(|d| d.address == req.address()) {
                            let reading = (self.model)(now, d.address);
                            reply = d.respond(&req, &reading);
                        }
                    }
                    Device::Stream(_) => {}
                }
                if let Some(r) = reply {
                    let r = self.faulted(r, started.elapsed());
                    self.send(io, &r)?;
                }
            }
        }
        Ok(())
    }

    fn serve_stream(
        &mut self,
        io: &mut (impl Read + Write),
        stop: &AtomicBool,
        stream: Stream,
    ) -> Result<(), SimError> {
        let period = Duration::from_millis(self.protocol.stream_period_ms().unwrap_or(1000));
        let mut commands = CommandParser::default();
        let mut encoder = match stream {
            Stream::WattsUp => Encoder::WattsUp,
            Stream::Cse(chip) => Encoder::Cse(CseEncoder::new(chip)),
            Stream::Line => Encoder::Line,
        };
        let wattsup = stream == Stream::WattsUp;
        let mut logging = !wattsup;
        let mut interval = period;
        let mut energy_offset = 0.0;
        let started = Instant::now();
        let mut next = Instant::now();
        let mut last = Instant::now();
        let mut buf = [0u8; 256];
        while !stop.load(Ordering::Relaxed) {
            if wattsup {
                let n = self.read_some(io, &mut buf)?;
                for packet in commands.push(&buf[..n]) {
                    match wattsup::device_action(&packet) {
                        DeviceAction::StartLogging { interval_s } => {
                            logging = true;
                            interval = Duration::from_secs(u64::from(interval_s));
                            next = Instant::now() + interval;
                        }
                        DeviceAction::ClearMemory => {
                            energy_offset = (self.model)(now_ms(), 0).energy_wh.unwrap_or(0.0);
                        }
                        DeviceAction::Reply(text) => self.send(io, text.as_bytes())?,
                        DeviceAction::None => {}
                    }
                }
            }
            let now = Instant::now();
            if !logging || now < next {
                if !wattsup {
                    std::thread::sleep((next - now).min(Duration::from_millis(100)));
                }
                continue;
            }
            let dt = now.duration_since(last).as_millis() as u64;
            last = now;
            next += interval;
            if next < now {
                next = now + interval;
            }
            let mut reading = (self.model)(now_ms(), 0);
            let bytes = match &mut encoder {
                Encoder::Cse(enc) => enc.frame(&reading, dt).to_vec(),
                Encoder::WattsUp => {
                    reading.energy_wh = reading.energy_wh.map(|e| (e - energy_offset).max(0.0));
                    wattsup::encode_record(&reading).into_bytes()
                }
                Encoder::Line => self.line.encode_line(&reading).into_bytes(),
            };
            let bytes = self.faulted(bytes, started.elapsed());
            self.send(io, &bytes)?;
        }
        Ok(())
    }
}
