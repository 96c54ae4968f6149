//! Serial AC/DC power meters: protocol codecs, the I/O session, the collector and a simulator.
//!
//! Wire formats follow `docs/meters.md` (Modbus-RTU for Peacefair PZEM and Eastron
//! SDM, the Watts Up? ASCII protocol, CSE7766/HLW8032 24-byte frames and a configurable text
//! line format). Codecs are sans-IO: they turn bytes into [`MeterReading`]s and back, and are
//! tested on byte vectors; each is a [`PolledCodec`] or a [`StreamDecoder`] ([`codec`]), and
//! [`protocol`] holds every protocol's settings in one table. [`session`] drives them over
//! anything `Read + Write` through [`transport`] (the one read-with-timeout and request/reply
//! exchange); [`port`] opens real serial ports; [`collector`] polls a session on one and
//! implements [`crate::Collector`]; [`sim`] plays the device side, healthy or through a
//! script of [`faults`].
//!
//! Units everywhere: watts, volts, amperes, hertz, watt-hours; power factor as a 0..1 ratio.

pub mod codec;
pub mod collector;
pub mod cse7766;
pub mod energy_book;
pub mod faults;
pub mod line;
pub mod modbus;
pub mod port;
pub mod probe;
pub mod protocol;
pub mod pzem;
pub mod sdm;
pub mod session;
pub mod sim;
pub mod transport;
pub mod wattsup;

pub use codec::{Answer, Codec, Exchange, Missed, PolledCodec, ReplyFramer, StreamDecoder};
pub use collector::{MeterCollector, MeterConfig};
pub use energy_book::EnergyBook;
pub use port::{MeterPort, PortError, PortOpener, SerialOpener};
pub use probe::{ProbeError, ProbeResult, probe};
pub use protocol::{
    Accuracy, Mode, Parity, Protocol, ProtocolSettings, SerialSettings, UnknownProtocol,
};
pub use session::{MeterCounters, MeterSession, SessionError};
pub use sim::SimulatedMeter;

use crate::{Metric, Sample};

/// One reading from one meter. Fields a meter does not report are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MeterReading {
    /// Active power, W (negative when exporting, on meters that can tell).
    pub power_w: Option<f64>,
    /// RMS voltage, V.
    pub voltage_v: Option<f64>,
    /// RMS current, A.
    pub current_a: Option<f64>,
    /// Power factor, 0..1.
    pub power_factor: Option<f64>,
    /// Mains frequency, Hz.
    pub frequency_hz: Option<f64>,
    /// The device's own energy counter, Wh (it may reset or wrap).
    pub energy_wh: Option<f64>,
}

impl MeterReading {
    /// The mean of several readings (a streaming meter's records between two polls): each
    /// field the mean of the readings that have it, the energy counter the newest one.
    pub fn mean(readings: &[MeterReading]) -> MeterReading {
        let mean = |f: fn(&MeterReading) -> Option<f64>| {
            let (sum, n) = readings
                .iter()
                .filter_map(f)
                .fold((0.0, 0u32), |(s, n), v| (s + v, n + 1));
            (n > 0).then(|| sum / f64::from(n))
        };
        MeterReading {
            power_w: mean(|r| r.power_w),
            voltage_v: mean(|r| r.voltage_v),
            current_a: mean(|r| r.current_a),
            power_factor: mean(|r| r.power_factor),
            frequency_hz: mean(|r| r.frequency_hz),
            energy_wh: readings.iter().rev().find_map(|r| r.energy_wh),
        }
    }

    /// One [`Sample`] per present field, channel `""`, stamped `ts_ms` (UTC ms) from `source`.
    ///
    /// Negative power (passed only for a bidirectional source) is export: the consumption
    /// sample is 0 W and the exported watts go to channel [`crate::source::channel::EXPORT`],
    /// so they are never netted against what the machine draws.
    pub fn to_samples(&self, ts_ms: i64, source: &crate::SourceId) -> Vec<Sample> {
        let export = self.power_w.filter(|p| *p < 0.0);
        let power = self.power_w.map(|p| p.max(0.0));
        let mut out: Vec<Sample> = [
            (Metric::Power, power),
            (Metric::Voltage, self.voltage_v),
            (Metric::Current, self.current_a),
            (Metric::PowerFactor, self.power_factor),
            (Metric::Frequency, self.frequency_hz),
            (Metric::EnergyCounter, self.energy_wh),
        ]
        .into_iter()
        .filter_map(|(metric, value)| {
            value.map(|v| Sample::new(ts_ms, source.clone(), metric, "", v))
        })
        .collect();
        if let Some(p) = export {
            out.push(Sample::new(
                ts_ms,
                source.clone(),
                Metric::Power,
                crate::source::channel::EXPORT,
                -p,
            ));
        }
        out
    }
}

/// Why a frame (a Modbus reply, a CSE frame, a text record) was rejected by a codec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    #[error("CRC mismatch: frame says {got:#06x}, computed {computed:#06x}")]
    Crc { got: u16, computed: u16 },
    #[error("checksum mismatch: frame says {got:#04x}, computed {computed:#04x}")]
    Checksum { got: u8, computed: u8 },
    #[error("Modbus exception {code:#04x} from address {address} for function {function:#04x}")]
    Exception { address: u8, function: u8, code: u8 },
    #[error("incomplete frame: {0}")]
    Truncated(String),
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("chip reports it is not calibrated (header 0xAA)")]
    NotCalibrated,
    #[error("chip reports abnormal state (header {0:#04x})")]
    Abnormal(u8),
    #[error("line longer than {max} bytes")]
    TooLong { max: usize },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl FrameError {
    /// True for errors that mean bytes were corrupted on the wire (counted as CRC errors).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            FrameError::Crc { .. }
                | FrameError::Checksum { .. }
                | FrameError::Truncated(_)
                | FrameError::Malformed(_)
                | FrameError::TooLong { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_samples_emits_present_fields_only() {
        let r = MeterReading {
            power_w: Some(24.4),
            voltage_v: Some(225.7),
            energy_wh: Some(38.0),
            ..MeterReading::default()
        };
        let s = r.to_samples(1000, &crate::SourceId::meter("wall"));
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].metric, Metric::Power);
        assert_eq!(s[0].value, 24.4);
        assert_eq!(s[2].metric, Metric::EnergyCounter);
        assert!(
            s.iter()
                .all(|x| x.channel.is_empty() && x.source == crate::SourceId::meter("wall"))
        );
    }
}
