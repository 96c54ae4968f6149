//! What a meter session keeps and reports: per-address counters and rejections (carried
//! across reconnects in [`SessionState`]), its options, its readings and errors.

use std::io;
use std::time::Duration;

use super::super::cse7766::Hlw8032Constants;
use super::super::line::LineFormat;
use super::super::protocol::Protocol;
use super::super::transport::{TxError, is_gone};
use super::super::{FrameError, MeterReading};
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
    /// Modbus exception replies (the meter refused a request: a register it lacks, or a
    /// meter busy or misconfigured).
    pub exceptions: u64,
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
    #[error(
        "address {address}: no power in the reply (its power register was refused or not \
         asked)"
    )]
    NoPower { address: u8 },
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
pub(super) struct AddressState {
    pub(super) address: u8,
    pub(super) counters: MeterCounters,
    pub(super) rejections: Rejections,
    pub(super) unsupported: Vec<u16>,
    /// Readings since `unsupported` was last emptied ([`AddressState::forget_lacks_when_due`]).
    pub(super) readings_since_lacks: u32,
}

/// Readings after which the registers a meter said it lacks are asked again: a meter that
/// answered exception 0x02 for a while (busy, mid-configuration) is not believed to lack a
/// register for the rest of the run. Once an hour at 1 s; one refused request each time on
/// a meter that does lack it.
pub(super) const ASK_LACKS_AGAIN_EVERY: u32 = 3600;

impl AddressState {
    /// Empty the registers the meter is believed to lack once every
    /// [`ASK_LACKS_AGAIN_EVERY`] readings, so they are asked again.
    pub(super) fn forget_lacks_when_due(&mut self) {
        self.readings_since_lacks += 1;
        if self.readings_since_lacks >= ASK_LACKS_AGAIN_EVERY {
            self.readings_since_lacks = 0;
            self.unsupported.clear();
        }
    }
}

/// Per-address state that outlives a port (counters, rejections, registers known to be
/// unsupported): carried from one session to the next across reconnects.
#[derive(Debug, Clone)]
pub struct SessionState {
    pub(super) addresses: Vec<AddressState>,
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
                    readings_since_lacks: 0,
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

    fn counters_mut(&mut self, address: u8) -> Option<&mut MeterCounters> {
        self.addresses
            .iter_mut()
            .find(|a| a.address == address)
            .map(|a| &mut a.counters)
    }

    /// Count `bytes` skipped while resynchronising on `address`'s replies.
    pub(super) fn add_discarded(&mut self, address: u8, bytes: u64) {
        if let Some(c) = self.counters_mut(address) {
            c.bytes_discarded += bytes;
        }
    }

    /// Count a Modbus exception reply from `address` that the reading went on without.
    pub(super) fn add_exception(&mut self, address: u8) {
        if let Some(c) = self.counters_mut(address) {
            c.exceptions += 1;
        }
    }

    /// The error a failed exchange with `address` is, counted against it (a timeout, a
    /// corrupted frame). `timeout` is the one the exchange ran under.
    pub(super) fn error(&mut self, address: u8, timeout: Duration, e: TxError) -> SessionError {
        let counters = self.counters_mut(address);
        match e {
            TxError::Timeout => {
                if let Some(c) = counters {
                    c.timeouts += 1;
                }
                SessionError::Timeout {
                    address,
                    timeout_ms: timeout.as_millis() as u64,
                }
            }
            TxError::Frame(source) => {
                if let Some(c) = counters {
                    if source.is_corruption() {
                        c.crc_errors += 1;
                    } else if matches!(source, FrameError::Exception { .. }) {
                        c.exceptions += 1;
                    }
                }
                SessionError::Frame { address, source }
            }
            TxError::Io(source) if is_gone(&source) => SessionError::Gone { source },
            TxError::Io(source) => SessionError::Io { source },
        }
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
