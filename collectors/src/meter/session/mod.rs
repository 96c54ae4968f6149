//! The I/O shell around the codecs: talks to one serial line through anything `Read + Write`
//! (a `serialport` port in production, a pseudo-terminal in tests), polling one or several
//! Modbus addresses in turn or reading a streaming meter, with per-protocol timeouts,
//! resynchronisation on junk and per-meter counters. Every decoded reading passes the shared
//! plausibility rules ([`crate::plausibility`]); the energy counter is followed by the
//! collector ([`crate::counter`]), which knows when each reading was taken.
//!
//! A streaming meter's poll returns every record that arrived since the previous poll as one
//! reading: the mean of their power, voltage, current, power factor and frequency, and the
//! newest energy counter, so no record between two ticks is lost.
//!
//! The reader's own read timeout bounds each blocking read; the session's deadline (the
//! protocol's response timeout, ≥ 600 ms for Modbus) bounds a whole reply. Units: W, V, A,
//! Hz, Wh; times in ms.

mod state;
#[cfg(test)]
mod tests;

use std::io::{Read, Write};
use std::time::Instant;

pub use super::transport::is_gone;
pub use state::{AddressReading, MeterCounters, SessionError, SessionOptions, SessionState};

use super::cse7766::{Chip, CseDecoder};
use super::line::LineDecoder;
use super::modbus::{self, Reply, ReplyParser};
use super::protocol::Protocol;
use super::pzem::{self, PzemModel};
use super::sdm::{self, Quantity, SdmModel};
use super::transport::{self, TxError};
use super::wattsup::{self, WattsUpDecoder};
use super::{FrameError, MeterReading, StreamDecoder};
use crate::plausibility::Rejections;

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
        let early = self.sent_early.take();
        transport::transact(
            &mut self.io,
            request,
            early.as_deref(),
            parser,
            self.options.timeout,
        )
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
            let n = transport::read_some(&mut self.io, &mut buf)
                .map_err(|e| self.tx_error(0, TxError::Io(e)))?;
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
