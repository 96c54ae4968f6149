//! One set of plausibility rules for every reading wattson stores: serial meters, smart plugs
//! and the fleet collector's messages all pass [`Limits`] before a value is kept.
//!
//! A reading that fails is dropped whole (a frame with one impossible field passed its CRC by
//! luck or came from a broken device, so its other fields cannot be vouched for either) and
//! counted by [`Reason`] in [`Rejections`], which the daemon shows in `wattson status` and
//! the MQTT diagnostics. Units: W, V, A, Hz, Wh, power factor as a ratio, UTC ms.
//!
//! The limits: ESPHome's PZEM filter (V >= 450, |I| >= 150 A, |P| >= 16 kW are glitches;
//! docs/meters.md, "Traps"), a floor of 50 V for AC meters (CSE frames such as docs/meters.md's
//! C6 pass their checksum with 0.4 V), a power factor of magnitude at most 1 (Eastron meters
//! sign it for leading or lagging loads), an AC frequency of 40-70 Hz (mains is 50 or 60 Hz),
//! an energy counter that is finite and not negative, and a timestamp no more than
//! [`Limits::future_ms`] ahead of the time it was received nor more than [`Limits::past_ms`]
//! behind it.

use crate::Metric;
use crate::meter::MeterReading;

/// Why a reading was rejected. The stored channel of [`Metric::Rejected`] is
/// [`Reason::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// NaN or infinite.
    NonFinite,
    Power,
    Voltage,
    Current,
    PowerFactor,
    Frequency,
    /// Too far from the time it was received.
    Timestamp,
    /// An energy counter that moved more than the measured power allows, or went negative.
    EnergyCounter,
}

impl Reason {
    /// Every reason, in display order.
    pub const ALL: [Reason; 8] = [
        Reason::Power,
        Reason::Voltage,
        Reason::Current,
        Reason::PowerFactor,
        Reason::Frequency,
        Reason::EnergyCounter,
        Reason::Timestamp,
        Reason::NonFinite,
    ];

    /// Stable name, used as the channel of stored rejection counts and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NonFinite => "non_finite",
            Reason::Power => "power",
            Reason::Voltage => "voltage",
            Reason::Current => "current",
            Reason::PowerFactor => "power_factor",
            Reason::Frequency => "frequency",
            Reason::Timestamp => "timestamp",
            Reason::EnergyCounter => "energy_counter",
        }
    }

    /// Inverse of [`Reason::as_str`].
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// A rejected reading: why, and the offending value in words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{detail}")]
pub struct Rejection {
    pub reason: Reason,
    pub detail: String,
}

impl Rejection {
    pub fn new(reason: Reason, detail: impl Into<String>) -> Self {
        Rejection {
            reason,
            detail: detail.into(),
        }
    }
}

/// The plausible range of each quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// |P| below this, W.
    pub max_power_w: f64,
    /// V below this, V.
    pub max_voltage_v: f64,
    /// V at least this on AC meters, V (`None`: DC or unknown).
    pub min_voltage_v: Option<f64>,
    /// |I| below this, A.
    pub max_current_a: f64,
    /// |power factor| at most this.
    pub max_power_factor: f64,
    /// AC frequency range, Hz.
    pub frequency_hz: (f64, f64),
    /// How far a timestamp may be ahead of its receipt, ms (clock skew).
    pub future_ms: i64,
    /// How far a timestamp may be behind its receipt, ms (queued or buffered delivery).
    pub past_ms: i64,
    /// Whether power may be negative: a source declared bidirectional (solar export). Its
    /// negative readings are export, kept apart from consumption
    /// ([`crate::meter::MeterReading::to_samples`]); any other source's are refused.
    pub bidirectional: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_power_w: MAX_POWER_W,
            max_voltage_v: 450.0,
            min_voltage_v: None,
            max_current_a: 150.0,
            max_power_factor: 1.0,
            frequency_hz: (40.0, 70.0),
            future_ms: 5 * 60_000,
            past_ms: 60 * 60_000,
            bidirectional: false,
        }
    }
}

/// The largest power any reading may show, W (ESPHome's PZEM limit).
pub const MAX_POWER_W: f64 = 16_000.0;

impl Limits {
    /// The limits for an AC meter (a floor of 50 V) or a DC one.
    pub fn for_ac(ac: bool) -> Self {
        Limits {
            min_voltage_v: ac.then_some(50.0),
            ..Limits::default()
        }
    }

    /// Why `r` is implausible, if it is.
    pub fn check_reading(&self, r: &MeterReading) -> Result<(), Rejection> {
        for (metric, v) in [
            (Metric::Power, r.power_w),
            (Metric::Voltage, r.voltage_v),
            (Metric::Current, r.current_a),
            (Metric::PowerFactor, r.power_factor),
            (Metric::Frequency, r.frequency_hz),
            (Metric::EnergyCounter, r.energy_wh),
        ] {
            if let Some(v) = v {
                self.check(metric, v)?;
            }
        }
        Ok(())
    }

    /// Why one value of `metric` is implausible, if it is. Metrics without a rule pass when
    /// finite.
    pub fn check(&self, metric: Metric, v: f64) -> Result<(), Rejection> {
        let name = metric.as_str().replace('_', " ");
        if !v.is_finite() {
            return Err(Rejection::new(Reason::NonFinite, format!("{name} is {v}")));
        }
        match metric {
            Metric::Power if v.abs() >= self.max_power_w => Err(Rejection::new(
                Reason::Power,
                format!("power {v} W: |P| >= {} W", self.max_power_w),
            )),
            Metric::Power if v < 0.0 && !self.bidirectional => Err(Rejection::new(
                Reason::Power,
                format!(
                    "power {v} W is negative: a consumer's meter reads at least 0 (a reversed \
                     clamp?); a source that exports (solar) is declared `bidirectional = true`"
                ),
            )),
            Metric::Voltage if v >= self.max_voltage_v || v < 0.0 => Err(Rejection::new(
                Reason::Voltage,
                format!("voltage {v} V outside 0..{} V", self.max_voltage_v),
            )),
            Metric::Voltage if self.min_voltage_v.is_some_and(|min| v < min) => {
                Err(Rejection::new(
                    Reason::Voltage,
                    format!(
                        "voltage {v} V < {} V on an AC meter",
                        self.min_voltage_v.unwrap_or_default()
                    ),
                ))
            }
            Metric::Current if v.abs() >= self.max_current_a => Err(Rejection::new(
                Reason::Current,
                format!("current {v} A: |I| >= {} A", self.max_current_a),
            )),
            Metric::PowerFactor if v.abs() > self.max_power_factor => Err(Rejection::new(
                Reason::PowerFactor,
                format!("power factor {v} outside 0..1"),
            )),
            Metric::Frequency if v < self.frequency_hz.0 || v > self.frequency_hz.1 => {
                Err(Rejection::new(
                    Reason::Frequency,
                    format!(
                        "frequency {v} Hz outside {}-{} Hz",
                        self.frequency_hz.0, self.frequency_hz.1
                    ),
                ))
            }
            Metric::EnergyCounter | Metric::EnergyTotal if v < 0.0 => Err(Rejection::new(
                Reason::EnergyCounter,
                format!("{name} {v} Wh is negative"),
            )),
            _ => Ok(()),
        }
    }

    /// Why a reading stamped `ts_ms` and received at `received_ms` (UTC ms) is implausible.
    pub fn check_timestamp(&self, ts_ms: i64, received_ms: i64) -> Result<(), Rejection> {
        if ts_ms > received_ms.saturating_add(self.future_ms) {
            return Err(Rejection::new(
                Reason::Timestamp,
                format!(
                    "timestamp {ts_ms} ms is {:.0} s after it was received",
                    (ts_ms - received_ms) as f64 / 1000.0
                ),
            ));
        }
        if ts_ms < received_ms.saturating_sub(self.past_ms) {
            return Err(Rejection::new(
                Reason::Timestamp,
                format!(
                    "timestamp {ts_ms} ms is {:.0} s before it was received",
                    (received_ms - ts_ms) as f64 / 1000.0
                ),
            ));
        }
        Ok(())
    }
}

/// Rejections counted by reason since a collector started. On the wire (the daemon's
/// control socket) it is an object of reason name to count, listing the nonzero ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejections {
    counts: [u64; Reason::ALL.len()],
}

impl serde::Serialize for Rejections {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let nonzero = self.nonzero();
        let mut map = serializer.serialize_map(Some(nonzero.len()))?;
        for (reason, n) in nonzero {
            map.serialize_entry(reason.as_str(), &n)?;
        }
        map.end()
    }
}

impl<'de> serde::Deserialize<'de> for Rejections {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, u64>::deserialize(deserializer)?;
        let mut out = Rejections::default();
        for (name, n) in map {
            // A reason this version does not know (a newer daemon's) is left out.
            if let Some(i) = Reason::ALL.iter().position(|r| r.as_str() == name) {
                out.counts[i] = n;
            }
        }
        Ok(out)
    }
}

impl Rejections {
    /// Count one rejection.
    pub fn record(&mut self, reason: Reason) {
        if let Some(i) = Reason::ALL.iter().position(|r| *r == reason) {
            self.counts[i] += 1;
        }
    }

    /// All rejections.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Rejections of one reason.
    pub fn get(&self, reason: Reason) -> u64 {
        Reason::ALL
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.counts[i])
    }

    /// The reasons seen at least once, with their counts.
    pub fn nonzero(&self) -> Vec<(Reason, u64)> {
        Reason::ALL
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (*r, n))
            .collect()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Rejections) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_values_are_named_and_counted() {
        let l = Limits::for_ac(true);
        let r = |pf: Option<f64>, hz: Option<f64>| MeterReading {
            power_w: Some(50.0),
            voltage_v: Some(230.0),
            power_factor: pf,
            frequency_hz: hz,
            ..MeterReading::default()
        };
        assert!(l.check_reading(&r(Some(0.95), Some(50.0))).is_ok());
        // Eastron signs the power factor of a leading load.
        assert!(l.check_reading(&r(Some(-0.9), Some(50.0))).is_ok());
        let pf = l.check_reading(&r(Some(2.55), Some(50.0))).unwrap_err();
        assert_eq!(pf.reason, Reason::PowerFactor);
        assert!(pf.detail.contains("2.55"), "{pf}");
        let hz = l.check_reading(&r(Some(1.0), Some(6553.5))).unwrap_err();
        assert_eq!(hz.reason, Reason::Frequency);
        assert_eq!(
            l.check(Metric::Power, -1e12).unwrap_err().reason,
            Reason::Power
        );
        assert_eq!(
            l.check(Metric::Power, 1e300).unwrap_err().reason,
            Reason::Power
        );
        assert_eq!(
            l.check(Metric::Power, f64::NAN).unwrap_err().reason,
            Reason::NonFinite
        );
        assert_eq!(
            l.check(Metric::Voltage, 0.4).unwrap_err().reason,
            Reason::Voltage
        );
        assert!(Limits::for_ac(false).check(Metric::Voltage, 12.0).is_ok());
        assert_eq!(
            l.check(Metric::EnergyCounter, -1.0).unwrap_err().reason,
            Reason::EnergyCounter
        );
        let mut counts = Rejections::default();
        counts.record(Reason::PowerFactor);
        counts.record(Reason::PowerFactor);
        counts.record(Reason::Frequency);
        assert_eq!(counts.total(), 3);
        assert_eq!(
            counts.nonzero(),
            vec![(Reason::PowerFactor, 2), (Reason::Frequency, 1)]
        );
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
    }

    #[test]
    fn timestamps_must_be_near_their_receipt() {
        let l = Limits::default();
        let now = 1_767_225_600_000;
        assert!(l.check_timestamp(now, now).is_ok());
        assert!(l.check_timestamp(now - 30 * 60_000, now).is_ok());
        // The year 9999.
        let e = l.check_timestamp(253_402_300_799_000, now).unwrap_err();
        assert_eq!(e.reason, Reason::Timestamp);
        assert!(l.check_timestamp(now - 2 * 3_600_000, now).is_err());
    }
}
