//! The I/O shell around the codecs: talks to one serial line through anything `Read + Write`
//! (a `serialport` port in production, a pseudo-terminal in tests), polling one or several
//! addresses in turn through the protocol's [`PolledCodec`] or reading its
//! [`super::StreamDecoder`], with per-protocol timeouts, resynchronisation on junk and
//! per-meter counters. It never asks which protocol it speaks: [`Codec::for_protocol`] does. Every decoded reading passes the shared
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
use std::time::{Duration, Instant};

pub use super::transport::is_gone;
pub use state::{AddressReading, MeterCounters, SessionError, SessionOptions, SessionState};

use super::codec::{Answer, Codec, Missed, PolledCodec};
use super::protocol::Protocol;
use super::pzem;
use super::transport::{self, TxError};
use super::{FrameError, MeterReading};
use crate::plausibility::Rejections;

/// One meter line. Not thread-safe by design: one owner polls it.
pub struct MeterSession<IO> {
    io: IO,
    protocol: Protocol,
    options: SessionOptions,
    state: SessionState,
    codec: Codec,
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
        let codec = Codec::for_protocol(protocol, &options);
        Self::with_codec(io, protocol, state, options, codec)
    }

    /// A session that speaks `codec` (tests drive codecs of no real protocol through it).
    pub(crate) fn with_codec(
        io: IO,
        protocol: Protocol,
        state: SessionState,
        options: SessionOptions,
        codec: Codec,
    ) -> Self {
        MeterSession {
            io,
            protocol,
            options,
            state,
            codec,
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
        if !self.codec.is_polled() {
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
    fn first_request(&mut self) -> Option<Vec<u8>> {
        let first = self.state.addresses.first()?;
        let Codec::Polled(codec) = &mut self.codec else {
            return None;
        };
        codec.begin(first.address, &first.unsupported);
        codec.next_request().map(|exchange| exchange.request)
    }

    /// Send the PZEM energy reset (function 0x42) to `address`; succeeds on the echo.
    pub fn reset_energy(&mut self, address: u8) -> Result<(), SessionError> {
        let mut parser = pzem::reset_energy_parser(address);
        let early = self.sent_early.take();
        let r = transport::transact(
            &mut self.io,
            &pzem::reset_energy_request(address),
            early.as_deref(),
            &mut parser,
            self.options.timeout,
        );
        self.state.add_discarded(address, parser.discarded());
        match r {
            Ok(_) => Ok(()),
            Err(e) => Err(self.state.error(address, self.options.timeout, e)),
        }
    }

    fn poll_index(&mut self, i: usize) -> Result<AddressReading, SessionError> {
        let reading = match &mut self.codec {
            Codec::Polled(codec) => read_polled(
                &mut self.io,
                &mut self.state,
                &mut self.sent_early,
                self.options.timeout,
                codec.as_mut(),
                i,
            )?,
            Codec::Streaming { .. } => {
                return Err(SessionError::Frame {
                    address: self.state.addresses[i].address,
                    source: FrameError::InvalidRequest("a streaming meter is not polled".into()),
                });
            }
        };
        self.accept(i, reading)
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
        let timeout = self.options.timeout;
        if !self.started {
            if let Codec::Streaming { start, .. } = &self.codec
                && !start.is_empty()
            {
                for cmd in start {
                    self.io
                        .write_all(cmd)
                        .map_err(|e| self.state.error(0, timeout, TxError::Io(e)))?;
                }
                self.io
                    .flush()
                    .map_err(|e| self.state.error(0, timeout, TxError::Io(e)))?;
            }
            self.started = true;
        }
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        let mut last_error = None;
        let mut accepted: Vec<MeterReading> = Vec::new();
        loop {
            let n = transport::read_some(&mut self.io, &mut buf)
                .map_err(|e| self.state.error(0, timeout, TxError::Io(e)))?;
            if n > 0 {
                let Codec::Streaming { decoder, .. } = &mut self.codec else {
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
                        .map_err(|e| self.state.error(0, timeout, TxError::Frame(e)))
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
                return Err(
                    last_error.unwrap_or_else(|| self.state.error(0, timeout, TxError::Timeout))
                );
            }
        }
    }
}

/// One reading of the meter at index `i` through its polled codec: each exchange the codec
/// asks for, its discarded bytes counted. Registers the meter said it lacks (exception 0x02)
/// are remembered in `state` only when the whole reading succeeds, so an episode of
/// exception replies cannot teach the session that the meter lacks everything and leave it
/// with nothing to ask: the next poll asks every register again. A reading with no power
/// (nothing asked, or the power register unanswered) is an error, never an empty success.
fn read_polled<IO: Read + Write>(
    io: &mut IO,
    state: &mut SessionState,
    sent_early: &mut Option<Vec<u8>>,
    timeout: Duration,
    codec: &mut dyn PolledCodec,
    i: usize,
) -> Result<MeterReading, SessionError> {
    let address = state.addresses[i].address;
    state.addresses[i].forget_lacks_when_due();
    codec.begin(address, &state.addresses[i].unsupported);
    let mut lacks = Vec::new();
    while let Some(mut exchange) = codec.next_request() {
        let early = sent_early.take();
        let r = transport::transact(
            io,
            &exchange.request,
            early.as_deref(),
            exchange.reply.as_mut(),
            timeout,
        );
        state.add_discarded(address, exchange.reply.discarded());
        let reply = match r {
            Ok(reply) => Ok(reply),
            Err(TxError::Timeout) => Err(Missed::Timeout),
            Err(TxError::Frame(e)) => Err(Missed::Frame(e)),
            Err(e @ TxError::Io(_)) => return Err(state.error(address, timeout, e)),
        };
        match codec.answer(reply) {
            Ok(Answer::Read) => {}
            Ok(Answer::Lacks(register)) => {
                state.add_exception(address);
                lacks.push(register);
            }
            Ok(Answer::Skipped) => state.addresses[i].counters.timeouts += 1,
            Err(missed) => return Err(state.error(address, timeout, missed.into())),
        }
    }
    let reading = codec.reading();
    if reading.power_w.is_none() {
        return Err(SessionError::NoPower { address });
    }
    for register in lacks {
        tracing::debug!(address, register, "meter register not supported");
        state.addresses[i].unsupported.push(register);
    }
    Ok(reading)
}
