//! The I/O shell around the codecs: talks to one serial line through anything `Read + Write`
//! (a `serialport` port in production, a pseudo-terminal in tests), polling one or several
//! Modbus addresses in turn or reading a streaming meter, with per-protocol timeouts,
//! resynchronisation on junk and per-meter counters. Every decoded reading passes the shared
//! plausibility rules ([`crate::plausibility`]); the energy counter is followed by the
//! collector ([`super::counter`]), which knows when each reading was taken.
//!
//! A streaming meter's poll returns every record that arrived since the previous poll as one
//! reading: the mean of their power, voltage, current, power factor and frequency, and the
//! newest energy counter, so no record between two ticks is lost.
//!
//! The reader's own read timeout bounds each blocking read; the session's deadline (the
//! protocol's response timeout, ≥ 600 ms for Modbus) bounds a whole reply. Units: W, V, A,
//! Hz, Wh; times in ms.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use super::cse7766::{Chip, CseDecoder, Hlw8032Constants};
use super::line::{LineDecoder, LineFormat};
use super::modbus::{self, Reply, ReplyParser};
use super::protocol::Protocol;
use super::pzem::{self, PzemModel};
use super::sdm::{self, Quantity, SdmModel};
use super::wattsup::{self, WattsUpDecoder};
use super::{FrameError, MeterReading, StreamDecoder};
use crate::plausibility::{Limits, Rejections};

/// Per-meter counters, readable by the daemon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeterCounters {
    /// Replies or records that decoded and passed the plausibility filter.
    pub good_frames: u64,
    /// Replies or records that failed a CRC, checksum or syntax check.
    pub crc_errors: u64,
    /// Requests with no (complete) reply within the timeout.
    pub timeouts: u64,
    /// Frames that decoded but failed the plausibility filter.
    pub implausible: u64,
    /// Bytes skipped while resynchronising.
    pub bytes_discarded: u64,
}

/// Why one address's poll failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("address {address}: no reply within {timeout_ms} ms")]
    Timeout { address: u8, timeout_ms: u64 },
    #[error("address {address}")]
    Frame {
        address: u8,
        #[source]
        source: FrameError,
    },
    #[error("address {address}: implausible reading: {reason}")]
    Implausible { address: u8, reason: String },
    #[error("port gone")]
    Gone {
        #[source]
        source: io::Error,
    },
    #[error("port I/O")]
    Io {
        #[source]
        source: io::Error,
    },
}

/// True if `e` means the port itself has gone (USB unplugged, pty closed): EOF, EIO, ENXIO,
/// ENOENT, ENODEV, a hang-up.
pub fn is_gone(e: &io::Error) -> bool {
    use io::ErrorKind as K;
    if matches!(e.raw_os_error(), Some(2 | 5 | 6 | 19)) {
        return true;
    }
    if matches!(
        e.kind(),
        K::BrokenPipe
            | K::NotFound
            | K::UnexpectedEof
            | K::NotConnected
            | K::ConnectionAborted
            | K::ConnectionReset
    ) {
        return true;
    }
    // serialport reports EIO and ENXIO as `Other` with the errno's description.
    let text = e.to_string();
    text.contains("I/O error")
        || text.contains("Input/output error")
        || text.contains("No such device")
}

/// A good reading from one address.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddressReading {
    /// Modbus address (0 for streaming meters).
    pub address: u8,
    pub reading: MeterReading,
    /// Records the reading is the mean of (1 for polled meters).
    pub records: u32,
}

#[derive(Debug, Clone)]
struct AddressState {
    address: u8,
    counters: MeterCounters,
    rejections: Rejections,
    unsupported: Vec<u16>,
}

/// Per-address state that outlives a port (counters, rejections, registers known to be
/// unsupported): carried from one session to the next across reconnects.
#[derive(Debug, Clone)]
pub struct SessionState {
    addresses: Vec<AddressState>,
}

impl SessionState {
    /// Fresh state for `addresses` (streaming meters: pass `[0]`).
    pub fn new(addresses: &[u8]) -> Self {
        let addresses = if addresses.is_empty() {
            &[0u8][..]
        } else {
            addresses
        };
        SessionState {
            addresses: addresses
                .iter()
                .map(|&address| AddressState {
                    address,
                    counters: MeterCounters::default(),
                    rejections: Rejections::default(),
                    unsupported: Vec::new(),
                })
                .collect(),
        }
    }

    /// Counters per address.
    pub fn counters(&self) -> Vec<(u8, MeterCounters)> {
        self.addresses
            .iter()
            .map(|a| (a.address, a.counters))
            .collect()
    }

    /// Readings rejected by the plausibility rules, per address, by reason.
    pub fn rejections(&self) -> Vec<(u8, Rejections)> {
        self.addresses
            .iter()
            .map(|a| (a.address, a.rejections.clone()))
            .collect()
    }
}

/// Session settings; [`SessionOptions::for_protocol`] gives the defaults.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Reply (polled) or record (streaming) timeout.
    pub timeout: Duration,
    /// What a reading may show ([`Limits::for_ac`] of the protocol by default).
    pub limits: Limits,
    /// Required for [`Protocol::Line`].
    pub line: Option<LineFormat>,
    pub hlw8032: Hlw8032Constants,
    /// Watts Up logging interval, s.
    pub wattsup_interval_s: u32,
}

impl SessionOptions {
    pub fn for_protocol(protocol: Protocol) -> Self {
        SessionOptions {
            timeout: Duration::from_millis(protocol.response_timeout_ms()),
            limits: Limits::for_ac(protocol.is_ac()),
            line: None,
            hlw8032: Hlw8032Constants::default(),
            wattsup_interval_s: 1,
        }
    }
}

enum TxError {
    Frame(FrameError),
    Timeout,
    Io(io::Error),
}

/// One meter line. Not thread-safe by design: one owner polls it.
pub struct MeterSession<IO> {
    io: IO,
    protocol: Protocol,
    options: SessionOptions,
    state: SessionState,
    stream: Option<Box<dyn StreamDecoder>>,
    started: bool,
    /// A request already written by [`MeterSession::begin_poll`], not yet answered.
    sent_early: Option<Vec<u8>>,
}

impl<IO: Read + Write> MeterSession<IO> {
    /// A session for `addresses` on `io` (ignored for streaming meters).
    pub fn new(io: IO, protocol: Protocol, addresses: &[u8], options: SessionOptions) -> Self {
        Self::resume(io, protocol, SessionState::new(addresses), options)
    }

    /// A session on a newly opened port that continues `state` from a previous one.
    pub fn resume(
        io: IO,
        protocol: Protocol,
        state: SessionState,
        options: SessionOptions,
    ) -> Self {
        let stream: Option<Box<dyn StreamDecoder>> = match protocol {
            Protocol::WattsUp => Some(Box::new(WattsUpDecoder::new())),
            Protocol::Cse7766 => Some(Box::new(CseDecoder::new(Chip::Cse7766))),
            Protocol::Hlw8032 => Some(Box::new(CseDecoder::new(Chip::Hlw8032(options.hlw8032)))),
            Protocol::Line => Some(Box::new(LineDecoder::new(
                options.line.clone().unwrap_or_default(),
            ))),
            _ => None,
        };
        MeterSession {
            io,
            protocol,
            options,
            state,
            stream,
            started: false,
            sent_early: None,
        }
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Counters per address.
    pub fn counters(&self) -> Vec<(u8, MeterCounters)> {
        self.state.counters()
    }

    /// Plausibility rejections per address, by reason.
    pub fn rejections(&self) -> Vec<(u8, Rejections)> {
        self.state.rejections()
    }

    /// The state to carry into the next session after a reconnect.
    pub fn into_state(self) -> SessionState {
        self.state
    }

    pub fn io_mut(&mut self) -> &mut IO {
        &mut self.io
    }

    /// Poll every address once (polled meters), or wait for the freshest record (streaming).
    /// Stops early if the port is gone; that error is the last entry.
    pub fn poll(&mut self) -> Vec<Result<AddressReading, SessionError>> {
        if !self.protocol.is_polled() {
            return vec![self.read_stream()];
        }
        let mut out = Vec::with_capacity(self.state.addresses.len());
        for i in 0..self.state.addresses.len() {
            let r = self.poll_index(i);
            let gone = matches!(r, Err(SessionError::Gone { .. }));
            out.push(r);
            if gone {
                break;
            }
        }
        out
    }

    /// Write the first request of the next [`MeterSession::poll`] now, so the reply is on
    /// its way while the caller does other work; `poll` then reads it without writing again.
    /// Returns whether a request went out. Streaming meters send nothing. A write error is
    /// ignored here: `poll` writes again and reports it.
    pub fn begin_poll(&mut self) -> bool {
        let Some(request) = self.first_request() else {
            return false;
        };
        // No flush (tcdrain): waiting for the bytes to leave the UART is the wait this
        // method exists to avoid; the reply read bounds the exchange.
        let sent = self.io.write_all(&request).is_ok();
        self.sent_early = sent.then_some(request);
        sent
    }

    /// The request `poll` starts with, for polled meters.
    fn first_request(&self) -> Option<Vec<u8>> {
        let first = self.state.addresses.first()?;
        match self.protocol {
            Protocol::Pzem004t => Some(pzem::read_request(PzemModel::Ac, first.address).to_vec()),
            Protocol::Pzem017 => Some(pzem::read_request(PzemModel::Dc, first.address).to_vec()),
            Protocol::Sdm120 | Protocol::Sdm230 | Protocol::Sdm630 => {
                let model = self.sdm_model();
                Quantity::POLLED
                    .iter()
                    .map(|q| sdm::register(model, *q))
                    .find(|reg| !first.unsupported.contains(reg))
                    .map(|reg| sdm::read_request(first.address, reg).to_vec())
            }
            _ => None,
        }
    }

    fn sdm_model(&self) -> SdmModel {
        match self.protocol {
            Protocol::Sdm120 => SdmModel::Sdm120,
            Protocol::Sdm230 => SdmModel::Sdm230,
            _ => SdmModel::Sdm630,
        }
    }

    /// Send the PZEM energy reset (function 0x42) to `address`; succeeds on the echo.
    pub fn reset_energy(&mut self, address: u8) -> Result<(), SessionError> {
        let mut parser = pzem::reset_energy_parser(address);
        let r = self.transact(&pzem::reset_energy_request(address), &mut parser);
        self.account(address, &parser);
        match r {
            Ok(_) => Ok(()),
            Err(e) => Err(self.tx_error(address, e)),
        }
    }

    fn index_of(&self, address: u8) -> Option<usize> {
        self.state
            .addresses
            .iter()
            .position(|a| a.address == address)
    }

    fn account(&mut self, address: u8, parser: &ReplyParser) {
        if let Some(i) = self.index_of(address) {
            self.state.addresses[i].counters.bytes_discarded += parser.discarded();
        }
    }

    fn tx_error(&mut self, address: u8, e: TxError) -> SessionError {
        let counters = self
            .index_of(address)
            .map(|i| &mut self.state.addresses[i].counters);
        match e {
            TxError::Timeout => {
                if let Some(c) = counters {
                    c.timeouts += 1;
                }
                SessionError::Timeout {
                    address,
                    timeout_ms: self.options.timeout.as_millis() as u64,
                }
            }
            TxError::Frame(source) => {
                if let Some(c) = counters
                    && source.is_corruption()
                {
                    c.crc_errors += 1;
                }
                SessionError::Frame { address, source }
            }
            TxError::Io(source) if is_gone(&source) => SessionError::Gone { source },
            TxError::Io(source) => SessionError::Io { source },
        }
    }

    /// Write `request`, then read until `parser` yields or the deadline passes.
    /// A request already sent by [`MeterSession::begin_poll`] is not written again.
    fn transact(&mut self, request: &[u8], parser: &mut ReplyParser) -> Result<Reply, TxError> {
        if self.sent_early.take().as_deref() != Some(request) {
            self.io
                .write_all(request)
                .and_then(|()| self.io.flush())
                .map_err(TxError::Io)?;
        }
        let deadline = Instant::now() + self.options.timeout;
        let mut buf = [0u8; 256];
        loop {
            match self.io.read(&mut buf) {
                Ok(0) => {
                    return Err(TxError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "end of file on port",
                    )));
                }
                Ok(n) => {
                    parser.push(&buf[..n]);
                    if let Some(r) = parser.next_reply() {
                        return r.map_err(TxError::Frame);
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::TimedOut
                            | io::ErrorKind::WouldBlock
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(TxError::Io(e)),
            }
            if Instant::now() >= deadline {
                return Err(parser.finish().map_or(TxError::Timeout, TxError::Frame));
            }
        }
    }

    fn poll_index(&mut self, i: usize) -> Result<AddressReading, SessionError> {
        let address = self.state.addresses[i].address;
        let reading = match self.protocol {
            Protocol::Pzem004t | Protocol::Pzem017 => {
                let model = if self.protocol == Protocol::Pzem004t {
                    PzemModel::Ac
                } else {
                    PzemModel::Dc
                };
                let mut parser = pzem::read_parser(model, address);
                let r = self.transact(&pzem::read_request(model, address), &mut parser);
                self.account(address, &parser);
                let reply = r.map_err(|e| self.tx_error(address, e))?;
                pzem::decode(model, &reply)
                    .map_err(|e| self.tx_error(address, TxError::Frame(e)))?
            }
            _ => self.poll_sdm(i)?,
        };
        self.accept(i, reading)
    }

    fn poll_sdm(&mut self, i: usize) -> Result<MeterReading, SessionError> {
        let model = self.sdm_model();
        let address = self.state.addresses[i].address;
        let mut reading = MeterReading::default();
        for q in Quantity::POLLED {
            let reg = sdm::register(model, q);
            if self.state.addresses[i].unsupported.contains(&reg)
                || (q == Quantity::TotalEnergy && reading.energy_wh.is_some())
            {
                continue;
            }
            let mut parser = sdm::read_parser(address);
            let r = self.transact(&sdm::read_request(address, reg), &mut parser);
            self.account(address, &parser);
            match r.and_then(|reply| sdm::decode_float(&reply).map_err(TxError::Frame)) {
                Ok(v) => sdm::apply(&mut reading, q, v),
                Err(TxError::Frame(FrameError::Exception {
                    code: modbus::ILLEGAL_DATA_ADDRESS,
                    ..
                })) => {
                    tracing::debug!(address, register = reg, "SDM register not supported");
                    self.state.addresses[i].unsupported.push(reg);
                }
                // A meter that does not answer its voltage register is absent: do not wait
                // out the timeout for every other register.
                Err(TxError::Timeout) if q != Quantity::Voltage => {
                    self.state.addresses[i].counters.timeouts += 1;
                }
                Err(e) => return Err(self.tx_error(address, e)),
            }
        }
        Ok(reading)
    }

    /// The plausibility rules for a decoded reading; a rejection is counted by reason.
    fn accept(&mut self, i: usize, reading: MeterReading) -> Result<AddressReading, SessionError> {
        let st = &mut self.state.addresses[i];
        if let Err(r) = self.options.limits.check_reading(&reading) {
            st.counters.implausible += 1;
            st.rejections.record(r.reason);
            return Err(SessionError::Implausible {
                address: st.address,
                reason: r.detail,
            });
        }
        st.counters.good_frames += 1;
        Ok(AddressReading {
            address: st.address,
            reading,
            records: 1,
        })
    }

    fn read_stream(&mut self) -> Result<AddressReading, SessionError> {
        if !self.started {
            if self.protocol == Protocol::WattsUp {
                for cmd in wattsup::init_commands(self.options.wattsup_interval_s) {
                    self.io
                        .write_all(&cmd)
                        .map_err(|e| self.tx_error(0, TxError::Io(e)))?;
                }
                self.io
                    .flush()
                    .map_err(|e| self.tx_error(0, TxError::Io(e)))?;
            }
            self.started = true;
        }
        let deadline = Instant::now() + self.options.timeout;
        let mut buf = [0u8; 4096];
        let mut last_error = None;
        let mut accepted: Vec<MeterReading> = Vec::new();
        loop {
            let got = match self.io.read(&mut buf) {
                Ok(0) => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "end of file on port",
                )),
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
                Err(e) => Err(e),
            };
            let n = got.map_err(|e| self.tx_error(0, TxError::Io(e)))?;
            if n > 0 {
                let Some(decoder) = self.stream.as_mut() else {
                    return Err(SessionError::Frame {
                        address: 0,
                        source: FrameError::InvalidRequest("no decoder".into()),
                    });
                };
                decoder.push(&buf[..n]);
                let before = self.state.addresses[0].counters.bytes_discarded;
                let mut results = Vec::new();
                while let Some(r) = decoder.next_reading() {
                    results.push(r);
                }
                let discarded = decoder.discarded();
                self.state.addresses[0].counters.bytes_discarded = before.max(discarded);
                for r in results {
                    match r
                        .map_err(|e| self.tx_error(0, TxError::Frame(e)))
                        .and_then(|r| self.accept(0, r))
                    {
                        Ok(r) => accepted.push(r.reading),
                        Err(e) => last_error = Some(e),
                    }
                }
            }
            // A full buffer means more is waiting: read it now, so every record that
            // arrived since the last tick counts. Otherwise the line is drained.
            if n == buf.len() {
                continue;
            }
            if !accepted.is_empty() {
                return Ok(AddressReading {
                    address: 0,
                    reading: MeterReading::mean(&accepted),
                    records: accepted.len() as u32,
                });
            }
            if Instant::now() >= deadline {
                return Err(last_error.unwrap_or_else(|| self.tx_error(0, TxError::Timeout)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::modbus::hex;

    /// A scripted line: replies are queued per request written; reads return what is queued,
    /// then time out.
    struct Script {
        replies: std::collections::VecDeque<Vec<u8>>,
        pending: Vec<u8>,
        written: Vec<u8>,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pending.is_empty() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"));
            }
            let n = buf.len().min(self.pending.len());
            buf[..n].copy_from_slice(&self.pending[..n]);
            self.pending.drain(..n);
            Ok(n)
        }
    }

    impl Write for Script {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.extend_from_slice(buf);
            if let Some(r) = self.replies.pop_front() {
                self.pending.extend(r);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn script(replies: Vec<Vec<u8>>) -> Script {
        Script {
            replies: replies.into(),
            pending: Vec::new(),
            written: Vec::new(),
        }
    }

    fn fast(protocol: Protocol) -> SessionOptions {
        SessionOptions {
            timeout: Duration::from_millis(20),
            ..SessionOptions::for_protocol(protocol)
        }
    }

    const P2: &str = "01 04 14 08 D1 00 6C 00 00 00 F4 00 00 00 26 00 00 01 F4 00 64 00 00 51 34";

    #[test]
    fn pzem_poll_with_stray_zeros_counts_discarded_bytes() {
        let mut reply = vec![0];
        reply.extend(hex(P2));
        reply.push(0);
        let mut s = MeterSession::new(
            script(vec![reply]),
            Protocol::Pzem004t,
            &[1],
            fast(Protocol::Pzem004t),
        );
        let r = s.poll().pop().unwrap().unwrap();
        assert_eq!(r.reading.power_w, Some(24.4));
        assert_eq!(r.records, 1);
        let c = s.counters()[0].1;
        assert_eq!((c.good_frames, c.bytes_discarded), (1, 1));
        assert_eq!(s.io_mut().written, hex("01 04 00 00 00 0A 70 0D"));
    }

    #[test]
    fn a_request_sent_early_is_not_sent_again() {
        let mut s = MeterSession::new(
            script(vec![hex(P2), hex(P2)]),
            Protocol::Pzem004t,
            &[1],
            fast(Protocol::Pzem004t),
        );
        assert!(s.begin_poll());
        let r = s.poll().pop().unwrap().unwrap();
        assert_eq!(r.reading.power_w, Some(24.4));
        assert_eq!(s.io_mut().written, hex("01 04 00 00 00 0A 70 0D"));
        // Without an early request, poll writes its own.
        assert!(s.poll().pop().unwrap().is_ok());
        assert_eq!(s.io_mut().written.len(), 16);
        // Streaming meters have nothing to send.
        let mut line = MeterSession::new(script(vec![]), Protocol::Line, &[], fast(Protocol::Line));
        assert!(!line.begin_poll());
        assert!(line.io_mut().written.is_empty());
    }

    #[test]
    fn sdm_early_request_is_the_first_register_poll_reads() {
        let mut s = MeterSession::new(
            script(vec![]),
            Protocol::Sdm120,
            &[1],
            fast(Protocol::Sdm120),
        );
        assert!(s.begin_poll());
        let early = s.io_mut().written.clone();
        let _ = s.poll();
        // The poll timed out on voltage (no replies scripted) without writing it twice.
        assert_eq!(s.io_mut().written, early);
    }

    #[test]
    fn corrupt_reply_is_counted_and_missing_reply_times_out() {
        let mut bad = hex(P2);
        bad[5] ^= 0x10;
        let mut s = MeterSession::new(
            script(vec![bad, vec![]]),
            Protocol::Pzem004t,
            &[1],
            fast(Protocol::Pzem004t),
        );
        assert!(matches!(
            s.poll()[0],
            Err(SessionError::Frame {
                source: FrameError::Crc { .. },
                ..
            })
        ));
        assert!(matches!(
            s.poll()[0],
            Err(SessionError::Timeout { address: 1, .. })
        ));
        let c = s.counters()[0].1;
        assert_eq!((c.crc_errors, c.timeouts, c.good_frames), (1, 1, 0));
    }

    #[test]
    fn implausible_readings_are_dropped() {
        // P-S1 has 20 kW: over the 16 kW limit.
        let ps1 = hex("01 04 14 09 1A 86 A0 00 01 0D 40 00 03 11 70 00 01 01 F4 00 5F FF FF 3F FD");
        let mut s = MeterSession::new(
            script(vec![ps1]),
            Protocol::Pzem004t,
            &[1],
            fast(Protocol::Pzem004t),
        );
        assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
        assert_eq!(s.counters()[0].1.implausible, 1);
    }

    #[test]
    fn cse_c6_nonsense_voltage_is_rejected_by_the_filter() {
        let c6 = hex("55 5A 02 DB 40 07 17 1D 00 3D 18 03 8E CD 4F 0A 60 2B EF EA 61 01 02 2C");
        let mut io = script(vec![]);
        io.pending = c6;
        let mut s = MeterSession::new(io, Protocol::Cse7766, &[], fast(Protocol::Cse7766));
        assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
        assert_eq!(s.counters()[0].1.implausible, 1);
    }

    /// A CRC-valid PZEM-004T reply from address 1 at 230 V, 50 W with these raw frequency
    /// (0.1 Hz) and power factor (0.01) registers.
    fn pzem_reply(freq_raw: u16, pf_raw: u16) -> Vec<u8> {
        let regs: [u16; 10] = [2300, 217, 0, 500, 0, 38, 0, freq_raw, pf_raw, 0];
        let data: Vec<u8> = regs.iter().flat_map(|r| r.to_be_bytes()).collect();
        modbus::registers_reply(1, 4, &data)
    }

    /// Regression: a power factor of 2.55 and 6553.5 Hz (CRC-valid PZEM frames) were stored.
    #[test]
    fn impossible_power_factor_and_frequency_are_rejected_by_reason() {
        let replies = vec![
            pzem_reply(500, 255),
            pzem_reply(65535, 90),
            pzem_reply(500, 90),
        ];
        let mut s = MeterSession::new(
            script(replies),
            Protocol::Pzem004t,
            &[1],
            fast(Protocol::Pzem004t),
        );
        assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
        assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
        let ok = s.poll().pop().unwrap().unwrap();
        assert_eq!(ok.reading.power_factor, Some(0.9));
        let r = &s.rejections()[0].1;
        assert_eq!(r.get(crate::plausibility::Reason::PowerFactor), 1);
        assert_eq!(r.get(crate::plausibility::Reason::Frequency), 1);
        assert_eq!(s.counters()[0].1.implausible, 2);
    }

    /// Every record between two polls counts: the poll returns their mean.
    #[test]
    fn a_streaming_poll_is_the_mean_of_every_record_since_the_last() {
        let mut io = script(vec![]);
        io.pending = b"10,230,0.1\n20,230,0.1\n60,230,0.1\n".to_vec();
        let mut s = MeterSession::new(io, Protocol::Line, &[], fast(Protocol::Line));
        let r = s.poll().pop().unwrap().unwrap();
        assert_eq!(r.records, 3);
        assert_eq!(r.reading.power_w, Some(30.0));
        assert_eq!(s.counters()[0].1.good_frames, 3);
    }

    #[test]
    fn sdm_missing_registers_are_none_and_skipped_next_time() {
        let dev = sdm::SdmDevice::new(SdmModel::Sdm120, 1);
        let truth = MeterReading {
            voltage_v: Some(230.0),
            current_a: Some(0.5),
            power_w: Some(100.0),
            power_factor: Some(0.87),
            frequency_hz: Some(50.0),
            energy_wh: Some(1500.0),
        };
        let mut replies = Vec::new();
        let mut parser = modbus::RequestParser::new(&[]);
        for q in Quantity::POLLED.iter().chain(Quantity::POLLED.iter()) {
            parser.push(&sdm::read_request(1, sdm::register(SdmModel::Sdm120, *q)));
            let req = parser.next_request().unwrap();
            replies.push(dev.respond(&req, &truth).unwrap());
        }
        // Second poll skips 0x0048 and asks for 0x0156 directly: drop the reply for 0x0048.
        replies.remove(Quantity::POLLED.len() + 5);
        let mut s = MeterSession::new(
            script(replies),
            Protocol::Sdm120,
            &[1],
            fast(Protocol::Sdm120),
        );
        for _ in 0..2 {
            let r = s.poll().pop().unwrap().unwrap().reading;
            assert_eq!(r.power_w, Some(100.0));
            assert!((r.power_factor.unwrap() - 0.87).abs() < 1e-6);
            assert_eq!(r.energy_wh, Some(1500.0));
        }
        assert_eq!(s.counters()[0].1.crc_errors, 0);
    }

    #[test]
    fn gone_errors_are_recognised() {
        assert!(is_gone(&io::Error::from_raw_os_error(5)));
        assert!(is_gone(&io::Error::from_raw_os_error(6)));
        assert!(is_gone(&io::Error::new(io::ErrorKind::BrokenPipe, "x")));
        assert!(is_gone(&io::Error::other("I/O error")));
        assert!(!is_gone(&io::Error::new(io::ErrorKind::TimedOut, "x")));
    }
}
