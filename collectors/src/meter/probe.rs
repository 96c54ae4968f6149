//! `wattson meter probe PORT`: find which supported meter answers on a serial port by trying
//! each protocol's factory settings in turn. Polled meters get a request (PZEM at the general
//! address 0xF8; Eastron at address 1); streaming meters are listened to (a Watts Up is first
//! told to start external logging). A PZEM found on 0xF8 is then asked for its own address
//! (holding register 0x0002), which is the one to configure: 0xF8 reaches any PZEM and only
//! works while one is alone on the line. Identifying reads are harmless (no writes to a
//! meter's settings). `timeout` is per attempt.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cse7766::{Chip, CseDecoder, Hlw8032Constants};
use super::modbus;
use super::port::{self, PortError};
use super::protocol::Protocol;
use super::pzem;
use super::sdm;
use super::session::{MeterSession, SessionError, SessionOptions};
use super::{FrameError, MeterReading, StreamDecoder};

/// What answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeResult {
    pub protocol: Protocol,
    /// Modbus address to configure (`None` for streaming meters): for a PZEM, the address
    /// it reported; [`pzem::GENERAL_ADDRESS`] when it answered there but not with its own
    /// (see `general_address`).
    pub address: Option<u8>,
    /// A PZEM that answered on the general address 0xF8 and did not say its own address:
    /// 0xF8 works only while it is the one device on the line.
    pub general_address: bool,
    /// The first reading, if the meter gave one.
    pub reading: Option<MeterReading>,
}

/// Why nothing was found.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("no supported meter answered on {path} (tried {tried})")]
    NothingAnswered { path: PathBuf, tried: String },
}

/// How a protocol is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// A PZEM-004T read at the general address, then a PZEM-017's.
    Pzem,
    /// An Eastron at address 1, at each speed the models default to.
    Eastron,
    /// A streaming meter listened to at its factory settings.
    Listen,
    /// CSE7766/HLW8032 frames listened to, the chip told by their voltage ratio.
    CseFrames,
    /// Found by this protocol's attempt.
    FoundBy(Protocol),
    /// Nothing can recognise it.
    Never,
}

/// How `protocol` is looked for. Attempts run in [`Protocol::ALL`] order.
fn attempt(protocol: Protocol) -> Attempt {
    match protocol {
        Protocol::Pzem004t => Attempt::Pzem,
        // By the exception it answers the AC read with.
        Protocol::Pzem017 => Attempt::FoundBy(Protocol::Pzem004t),
        Protocol::Sdm120 => Attempt::Eastron,
        // At 9600 baud; the SDM630 by its system power register.
        Protocol::Sdm230 | Protocol::Sdm630 => Attempt::FoundBy(Protocol::Sdm120),
        Protocol::WattsUp => Attempt::Listen,
        Protocol::Cse7766 => Attempt::CseFrames,
        // The same frames, with a smaller raw voltage.
        Protocol::Hlw8032 => Attempt::FoundBy(Protocol::Cse7766),
        // A text format cannot be recognised without its column map.
        Protocol::Line => Attempt::Never,
    }
}

/// Try every protocol's defaults on `path`, `timeout` per attempt.
pub fn probe(path: &Path, timeout: Duration) -> Result<ProbeResult, ProbeError> {
    // What was tried, as the user would configure it: filled in by each attempt.
    let mut tried = Vec::new();
    for protocol in Protocol::ALL {
        let found = match attempt(protocol) {
            Attempt::FoundBy(_) | Attempt::Never => continue,
            Attempt::Pzem => probe_pzem(path, timeout, &mut tried)?,
            Attempt::Eastron => probe_sdm(path, timeout, &mut tried)?,
            Attempt::Listen => {
                let baud = protocol.default_serial().baud;
                tried.push(format!("{protocol} ({baud} baud)"));
                probe_stream(path, protocol, timeout)?
            }
            Attempt::CseFrames => {
                tried.push("cse7766 and hlw8032 (4800 baud)".to_owned());
                probe_cse(path, timeout)?
            }
        };
        if let Some(found) = found {
            return Ok(found);
        }
    }
    Err(ProbeError::NothingAnswered {
        path: path.to_owned(),
        tried: tried.join(", "),
    })
}

fn options(protocol: Protocol, timeout: Duration) -> SessionOptions {
    SessionOptions {
        timeout,
        ..SessionOptions::for_protocol(protocol)
    }
}

fn opened(
    path: &Path,
    protocol: Protocol,
    timeout: Duration,
) -> Result<Box<dyn serialport::SerialPort>, PortError> {
    port::open(
        path,
        protocol.default_serial(),
        timeout.min(Duration::from_millis(200)),
    )
}

/// PZEM-004T reads 10 registers; a PZEM-017 has only 8 and answers exception 0x02, so on
/// that answer try the DC map (at 8N2).
fn probe_pzem(
    path: &Path,
    timeout: Duration,
    tried: &mut Vec<String>,
) -> Result<Option<ProbeResult>, PortError> {
    tried.push("pzem004t (9600 baud, general address 0xF8)".to_owned());
    let io = opened(path, Protocol::Pzem004t, timeout)?;
    let mut s = MeterSession::new(
        io,
        Protocol::Pzem004t,
        &[pzem::GENERAL_ADDRESS],
        options(Protocol::Pzem004t, timeout),
    );
    match s.poll().pop() {
        Some(Ok(r)) => {
            drop(s);
            return pzem_found(path, Protocol::Pzem004t, Some(r.reading), timeout).map(Some);
        }
        Some(Err(SessionError::Frame {
            source:
                FrameError::Exception {
                    code: modbus::ILLEGAL_DATA_ADDRESS,
                    ..
                },
            ..
        })) => {}
        // Decoded but implausible: still a PZEM-004T.
        Some(Err(SessionError::Implausible { .. })) => {
            drop(s);
            return pzem_found(path, Protocol::Pzem004t, None, timeout).map(Some);
        }
        _ => return Ok(None),
    }
    drop(s);
    tried.push("pzem017 (9600 baud 8N2, after a PZEM-style exception)".to_owned());
    let io = opened(path, Protocol::Pzem017, timeout)?;
    let mut s = MeterSession::new(
        io,
        Protocol::Pzem017,
        &[pzem::GENERAL_ADDRESS],
        options(Protocol::Pzem017, timeout),
    );
    match s.poll().pop() {
        Some(Ok(r)) => {
            drop(s);
            pzem_found(path, Protocol::Pzem017, Some(r.reading), timeout).map(Some)
        }
        _ => Ok(None),
    }
}

/// A PZEM answered on the general address: ask it for its own address.
fn pzem_found(
    path: &Path,
    protocol: Protocol,
    reading: Option<MeterReading>,
    timeout: Duration,
) -> Result<ProbeResult, PortError> {
    let mut io = opened(path, protocol, timeout)?;
    let own = read_pzem_address(&mut io, timeout);
    Ok(ProbeResult {
        protocol,
        address: Some(own.unwrap_or(pzem::GENERAL_ADDRESS)),
        general_address: own.is_none(),
        reading,
    })
}

fn read_pzem_address(io: &mut Box<dyn serialport::SerialPort>, timeout: Duration) -> Option<u8> {
    let request = pzem::read_address_request(pzem::GENERAL_ADDRESS);
    let reply = exchange(
        io,
        &request,
        pzem::read_address_parser(pzem::GENERAL_ADDRESS),
        timeout,
    )?;
    pzem::decode_address(&reply)
}

/// Write `request` and read until `parser` yields a good reply, a bad one (`None`), the
/// port fails, or `timeout` passes.
fn exchange(
    io: &mut Box<dyn serialport::SerialPort>,
    request: &[u8],
    mut parser: modbus::ReplyParser,
    timeout: Duration,
) -> Option<modbus::Reply> {
    let _ = io.clear(serialport::ClearBuffer::Input);
    super::transport::transact(io, request, None, &mut parser, timeout).ok()
}

/// Eastron at address 1: 2400 baud first (SDM120's default), then 9600 (SDM230/SDM630).
/// The SDM630 is told apart by its total-system-power register 0x0034.
fn probe_sdm(
    path: &Path,
    timeout: Duration,
    tried: &mut Vec<String>,
) -> Result<Option<ProbeResult>, PortError> {
    for protocol in [Protocol::Sdm120, Protocol::Sdm230] {
        tried.push(if protocol == Protocol::Sdm120 {
            "sdm120 (2400 baud, address 1)".to_owned()
        } else {
            "sdm230 and sdm630 (9600 baud, address 1)".to_owned()
        });
        let mut io = opened(path, protocol, timeout)?;
        let Some(_) = read_float(&mut io, 1, 0x0000, timeout) else {
            continue;
        };
        let protocol = if read_float(
            &mut io,
            1,
            sdm::register(sdm::SdmModel::Sdm630, sdm::Quantity::Power),
            timeout,
        )
        .is_some()
        {
            Protocol::Sdm630
        } else {
            protocol
        };
        let mut s = MeterSession::new(io, protocol, &[1], options(protocol, timeout));
        let reading = s.poll().pop().and_then(Result::ok).map(|r| r.reading);
        return Ok(Some(ProbeResult {
            protocol,
            address: Some(1),
            general_address: false,
            reading,
        }));
    }
    Ok(None)
}

fn read_float(
    io: &mut Box<dyn serialport::SerialPort>,
    address: u8,
    register: u16,
    timeout: Duration,
) -> Option<f32> {
    let request = sdm::read_request(address, register);
    let reply = exchange(io, &request, sdm::read_parser(address), timeout)?;
    sdm::decode_float(&reply).ok()
}

fn probe_stream(
    path: &Path,
    protocol: Protocol,
    timeout: Duration,
) -> Result<Option<ProbeResult>, PortError> {
    let io = opened(path, protocol, timeout)?;
    let mut s = MeterSession::new(io, protocol, &[], options(protocol, timeout));
    Ok(match s.poll().pop() {
        Some(Ok(r)) => Some(ProbeResult {
            protocol,
            address: None,
            general_address: false,
            reading: Some(r.reading),
        }),
        _ => None,
    })
}

/// CSE7766 and HLW8032 send the same frames; the HLW8032's raw voltage ratio is smaller by
/// its divider (about 1.72–1.88). A raw ratio under 150 V that scales into 180–260 V is taken
/// as an HLW8032 on 230 V mains; otherwise CSE7766.
fn probe_cse(path: &Path, timeout: Duration) -> Result<Option<ProbeResult>, PortError> {
    let mut io = opened(path, Protocol::Cse7766, timeout)?;
    let mut decoder = CseDecoder::new(Chip::Cse7766);
    let deadline = std::time::Instant::now() + timeout;
    let mut buf = [0u8; 256];
    while std::time::Instant::now() < deadline {
        match super::transport::read_some(&mut io, &mut buf) {
            Ok(0) => continue,
            Ok(n) => decoder.push(&buf[..n]),
            Err(_) => return Ok(None),
        }
        while let Some(r) = decoder.next_reading() {
            let Ok(r) = r else { continue };
            let raw_v = r.voltage_v.unwrap_or(0.0);
            let kv = Hlw8032Constants::default().voltage_divider;
            let protocol = if raw_v < 150.0 && (180.0..=260.0).contains(&(raw_v * kv)) {
                Protocol::Hlw8032
            } else {
                Protocol::Cse7766
            };
            let reading = if protocol == Protocol::Hlw8032 {
                MeterReading {
                    voltage_v: Some(raw_v * kv),
                    power_w: r.power_w.map(|p| p * kv),
                    ..r
                }
            } else {
                r
            };
            return Ok(Some(ProbeResult {
                protocol,
                address: None,
                general_address: false,
                reading: Some(reading),
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protocol_found_by_another_is_found_by_one_that_is_tried() {
        for p in Protocol::ALL {
            if let Attempt::FoundBy(by) = attempt(p) {
                assert!(
                    !matches!(attempt(by), Attempt::FoundBy(_) | Attempt::Never),
                    "{p} is found by {by}, which is not tried"
                );
            }
        }
    }
}
