//! The two shapes of a meter codec, both sans-IO: a [`PolledCodec`] for meters that answer
//! requests (Modbus-RTU: PZEM, Eastron) and a [`StreamDecoder`] for meters that send records
//! on their own (Watts Up, CSE7766/HLW8032, text lines). [`Codec::for_protocol`] gives each
//! protocol its codec; the session drives either shape without knowing which protocol it
//! speaks. Units of the readings: W, V, A, Hz, Wh.

use super::cse7766::{Chip, CseDecoder};
use super::line::LineDecoder;
use super::modbus::Reply;
use super::protocol::Protocol;
use super::pzem::{PzemCodec, PzemModel};
use super::sdm::{SdmCodec, SdmModel};
use super::session::SessionOptions;
use super::wattsup::{self, WattsUpDecoder};
use super::{FrameError, MeterReading};

/// An incremental decoder for meters that stream unsolicited records.
pub trait StreamDecoder: Send {
    /// Append received bytes.
    fn push(&mut self, bytes: &[u8]);
    /// The next complete record, if any: a reading or why a record was rejected.
    fn next_reading(&mut self) -> Option<Result<MeterReading, FrameError>>;
    /// Bytes dropped so far while searching for a record boundary.
    fn discarded(&self) -> u64;
}

/// Finds one reply in the bytes that arrive after a request: says when the reply is complete
/// (how many bytes it takes), skips junk before it and checks it (a CRC).
pub trait ReplyFramer: Send {
    /// Append received bytes.
    fn push(&mut self, bytes: &[u8]);
    /// The reply, or why it was refused (a Modbus exception), once complete; `None` while
    /// more bytes are needed.
    fn next_reply(&mut self) -> Option<Result<Reply, FrameError>>;
    /// Bytes skipped so far while looking for the reply.
    fn discarded(&self) -> u64;
    /// Called when the reply timed out: the corruption seen, or `None` when nothing
    /// resembling the reply arrived at all.
    fn finish(&self) -> Option<FrameError>;
}

/// One request of a polled reading and the framer of its reply.
pub struct Exchange {
    /// The request's bytes on the wire.
    pub request: Vec<u8>,
    /// Reads the reply to `request`.
    pub reply: Box<dyn ReplyFramer>,
}

/// Why an exchange brought no reply to decode.
#[derive(Debug, Clone, PartialEq)]
pub enum Missed {
    /// Nothing complete within the session's timeout.
    Timeout,
    /// A reply that failed its checks, or an exception in its place.
    Frame(FrameError),
}

/// What one reply did to the reading in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The reply went into the reading.
    Read,
    /// The meter lacks this register (Modbus exception 0x02): the session remembers it, and
    /// passes it to [`PolledCodec::begin`] so it is not asked again, across reconnects too.
    Lacks(u16),
    /// No reply, but the reading goes on without this value; counted as a timeout.
    Skipped,
}

/// A meter that speaks only when asked. One reading of one meter is one or more exchanges:
///
/// ```text
/// codec.begin(address, lacks);
/// while let Some(exchange) = codec.next_request() {
///     write exchange.request, feed what arrives to exchange.reply until it yields a reply
///     or the timeout passes, then codec.answer(that)?
/// }
/// codec.reading()
/// ```
pub trait PolledCodec: Send {
    /// Start one reading of the meter at `address`, which lacks the registers in `lacks`.
    fn begin(&mut self, address: u8, lacks: &[u16]);
    /// The next request of the reading begun, or `None` when the reading is complete.
    fn next_request(&mut self) -> Option<Exchange>;
    /// What the reply to the request last given means; an error fails the reading.
    fn answer(&mut self, reply: Result<Reply, Missed>) -> Result<Answer, Missed>;
    /// What the exchanges since [`PolledCodec::begin`] decoded.
    fn reading(&self) -> MeterReading;
}

/// A protocol's codec, as the session drives it.
pub enum Codec {
    Polled(Box<dyn PolledCodec>),
    Streaming {
        decoder: Box<dyn StreamDecoder>,
        /// Written once when the port opens, before the first read (a Watts Up is told to
        /// start logging).
        start: Vec<Vec<u8>>,
    },
}

impl Codec {
    /// The codec of `protocol`, with the options it needs (line format, HLW8032 constants,
    /// Watts Up interval). Its shape agrees with [`Protocol::is_polled`] (tested).
    pub fn for_protocol(protocol: Protocol, options: &SessionOptions) -> Codec {
        let stream = |decoder: Box<dyn StreamDecoder>| Codec::Streaming {
            decoder,
            start: Vec::new(),
        };
        match protocol {
            Protocol::Pzem004t => Codec::Polled(Box::new(PzemCodec::new(PzemModel::Ac))),
            Protocol::Pzem017 => Codec::Polled(Box::new(PzemCodec::new(PzemModel::Dc))),
            Protocol::Sdm120 => Codec::Polled(Box::new(SdmCodec::new(SdmModel::Sdm120))),
            Protocol::Sdm230 => Codec::Polled(Box::new(SdmCodec::new(SdmModel::Sdm230))),
            Protocol::Sdm630 => Codec::Polled(Box::new(SdmCodec::new(SdmModel::Sdm630))),
            Protocol::WattsUp => Codec::Streaming {
                decoder: Box::new(WattsUpDecoder::new()),
                start: wattsup::init_commands(options.wattsup_interval_s),
            },
            Protocol::Cse7766 => stream(Box::new(CseDecoder::new(Chip::Cse7766))),
            Protocol::Hlw8032 => stream(Box::new(CseDecoder::new(Chip::Hlw8032(options.hlw8032)))),
            Protocol::Line => stream(Box::new(LineDecoder::new(
                options.line.clone().unwrap_or_default(),
            ))),
        }
    }

    /// True for a [`PolledCodec`].
    pub fn is_polled(&self) -> bool {
        match self {
            Codec::Polled(_) => true,
            Codec::Streaming { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_has_the_codec_its_settings_say() {
        for p in Protocol::ALL {
            let codec = Codec::for_protocol(p, &SessionOptions::for_protocol(p));
            assert_eq!(codec.is_polled(), p.is_polled(), "{p}");
        }
    }
}
