//! Supported meter protocols and their settings table: config name, factory serial settings,
//! polled or streaming, timeout, energy counter and stated accuracy, one row per protocol in
//! [`Protocol::settings`] (docs/meters.md, "Line settings and timeouts"). Baud in bit/s, timeouts in
//! milliseconds, energies in Wh.
//!
//! A serial port's line settings (baud, data bits, parity, stop bits) are `serial`'s: the
//! table names each protocol's factory ones.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

mod serial;

pub use serial::{Parity, SerialSettings};

/// A meter protocol, named as in the config file (`protocol = "pzem004t"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Peacefair PZEM-004T v3 / PZEM-014 / PZEM-016 (AC, Modbus-RTU).
    Pzem004t,
    /// Peacefair PZEM-017 / PZEM-003 (DC, Modbus-RTU).
    Pzem017,
    /// Eastron SDM120-Modbus (single phase).
    Sdm120,
    /// Eastron SDM230-Modbus (single phase).
    Sdm230,
    /// Eastron SDM630-Modbus (three phase).
    Sdm630,
    /// Watts Up? Pro / .NET (ASCII over USB serial).
    WattsUp,
    /// CSE7766 (Sonoff POW R2/R3, S31), streaming 24-byte frames.
    Cse7766,
    /// HLW8032 (Blitzwolf SHP5 and others), streaming 24-byte frames.
    Hlw8032,
    /// A configurable line-of-text meter (CSV or key=value).
    Line,
}

/// A protocol name that is not one of [`Protocol::ALL`]; the message lists them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown meter protocol {name:?}; valid: {}", Protocol::ALL.map(Protocol::as_str).join(", "))]
pub struct UnknownProtocol {
    pub name: String,
}

/// How a meter talks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Request/reply (Modbus-RTU so far): the meter speaks only when asked, driven through a
    /// [`crate::meter::PolledCodec`].
    Polled {
        /// The slave address used when none is configured.
        default_address: u8,
        /// A reading is one request, so the collector may send the next poll's request as
        /// soon as it has this one's reply ([`crate::meter::MeterCollector::reading_ahead`]).
        reads_ahead: bool,
    },
    /// The meter sends records on its own, read through a [`crate::meter::StreamDecoder`].
    Streaming {
        /// About how often a record comes, ms (`None`: the device's own rate).
        period_ms: Option<u64>,
    },
}

/// What wattson knows of one protocol besides its codec: one row of [`Protocol::settings`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProtocolSettings {
    /// The config-file name (`protocol = "pzem004t"`).
    pub name: &'static str,
    /// The device's factory serial settings.
    pub serial: SerialSettings,
    /// Polled or streaming, with what each needs.
    pub mode: Mode,
    /// How long to wait for a reply (polled) or a record (streaming), ms.
    pub timeout_ms: u64,
    /// On mains AC, where a voltage below 50 V means a garbage reading.
    pub ac: bool,
    /// The value at which the device's energy counter wraps, Wh, where documented.
    pub energy_wrap_wh: Option<f64>,
    /// The step of the device's energy counter, Wh.
    pub energy_step_wh: f64,
    /// The meter's stated accuracy for active power and energy, where its datasheet gives one
    /// (see docs/reports.md, "Energy and money: one ledger"). `None`: no figure we could check.
    pub accuracy: Option<Accuracy>,
}

/// Modbus reply timeout, ms: mbmd raised 300 to 600 for slow meters (volkszaehler/mbmd#258).
const MODBUS_TIMEOUT_MS: u64 = 600;

/// The SDM630's row, which the other Eastron rows change in name, line speed or timeout.
const EASTRON: ProtocolSettings = ProtocolSettings {
    name: "sdm630",
    serial: SerialSettings::n81(9600),
    mode: Mode::Polled {
        default_address: 1,
        reads_ahead: false,
    },
    timeout_ms: MODBUS_TIMEOUT_MS,
    ac: true,
    energy_wrap_wh: None,
    // An Eastron shows kWh to 2 decimals.
    energy_step_wh: 10.0,
    // Eastron SDM120/SDM230/SDM630 user manuals: active energy class 1 (IEC 62053-21).
    accuracy: Some(Accuracy {
        percent: 1.0,
        plus_w: 0.0,
        source: "Eastron SDM120/SDM230/SDM630 user manuals: active energy class 1, IEC 62053-21",
    }),
};

/// The CSE7766's row, which the HLW8032's changes in name only (the same 24-byte frames at
/// 4800 8E1).
const CSE: ProtocolSettings = ProtocolSettings {
    name: "cse7766",
    serial: SerialSettings {
        parity: Parity::Even,
        ..SerialSettings::n81(4800)
    },
    // docs/meters.md, "Line settings and timeouts": "roughly every 50 ms" (MicroPython HLW8032 driver) [LOW]; about 20
    // frames/s.
    mode: Mode::Streaming {
        period_ms: Some(50),
    },
    timeout_ms: 600,
    ac: true,
    energy_wrap_wh: None,
    // One CF pulse is about 1.5 mWh (docs/meters.md, "CSE7766 and HLW8032").
    energy_step_wh: 0.01,
    // The chips' own figures (HLW8032 datasheet: active power +/- 0.2 %) do not cover the
    // board: its shunt and divider constants are uncalibrated on HLW8032 boards (the two
    // published voltage dividers, 1.72 and 1.88, differ by 9 %: docs/meters.md, "CSE7766 and HLW8032") and unstated
    // for CSE7766 modules.
    accuracy: None,
};

impl Protocol {
    /// Every protocol, in the order [`crate::meter::probe()`] tries them. A test checks that it
    /// holds every variant (`all_lists_every_variant`).
    pub const ALL: [Protocol; 9] = [
        Protocol::Pzem004t,
        Protocol::Pzem017,
        Protocol::Sdm120,
        Protocol::Sdm230,
        Protocol::Sdm630,
        Protocol::WattsUp,
        Protocol::Cse7766,
        Protocol::Hlw8032,
        Protocol::Line,
    ];

    /// The protocol's row in the settings table: the one place its defaults are written
    /// (docs/meters.md, "Line settings and timeouts").
    pub const fn settings(self) -> ProtocolSettings {
        match self {
            Protocol::Pzem004t => ProtocolSettings {
                name: "pzem004t",
                serial: SerialSettings::n81(9600),
                // 0xF8: the PZEM "any device" address, valid with a single meter on the line.
                mode: Mode::Polled {
                    default_address: crate::meter::pzem::GENERAL_ADDRESS,
                    reads_ahead: true,
                },
                timeout_ms: MODBUS_TIMEOUT_MS,
                ac: true,
                // Display range 0..9999.99 kWh (datasheet).
                energy_wrap_wh: Some(10_000_000.0),
                // Whole Wh (datasheet §1.6.2).
                energy_step_wh: 1.0,
                // Peacefair PZEM-004T V3.0 manual: "accuracy 1.0 grade"; active power and
                // energy 0.5 % (§1.3.5, §1.6.3). The grade is taken.
                accuracy: Some(Accuracy {
                    percent: 1.0,
                    plus_w: 0.0,
                    source: "Peacefair PZEM-004T V3.0 manual: accuracy grade 1.0 (active power and energy 0.5 %)",
                }),
            },
            Protocol::Pzem017 => ProtocolSettings {
                name: "pzem017",
                serial: SerialSettings {
                    stop_bits: 2,
                    ..SerialSettings::n81(9600)
                },
                ac: false,
                // Peacefair PZEM-003/017 manual §1.3.3 and §1.4.3: power and energy 1 %.
                accuracy: Some(Accuracy {
                    percent: 1.0,
                    plus_w: 0.0,
                    source: "Peacefair PZEM-003/017 manual §1.3.3, §1.4.3: power and energy 1 %",
                }),
                ..Protocol::Pzem004t.settings()
            },
            Protocol::Sdm120 => ProtocolSettings {
                name: "sdm120",
                serial: SerialSettings::n81(2400),
                // 2400 baud: a 165-byte block would take 0.7 s; we read single floats, but
                // be generous.
                timeout_ms: 800,
                ..EASTRON
            },
            Protocol::Sdm230 => ProtocolSettings {
                name: "sdm230",
                ..EASTRON
            },
            Protocol::Sdm630 => EASTRON,
            // A Watts Up streams a record per second and may take up to 2 s to answer.
            Protocol::WattsUp => ProtocolSettings {
                name: "wattsup",
                serial: SerialSettings::n81(115_200),
                mode: Mode::Streaming {
                    period_ms: Some(1000),
                },
                timeout_ms: 2500,
                ac: true,
                energy_wrap_wh: None,
                // Tenths of a Wh (docs/meters.md, "Watts Up?").
                energy_step_wh: 0.1,
                // Watts up? user manual, technical specifications: +/- 1.5 % + 3 counts (0.1 W).
                accuracy: Some(Accuracy {
                    percent: 1.5,
                    plus_w: 0.3,
                    source: "Watts up? user manual, technical specifications: +/- 1.5 % + 3 counts",
                }),
            },
            Protocol::Cse7766 => CSE,
            Protocol::Hlw8032 => ProtocolSettings {
                name: "hlw8032",
                ..CSE
            },
            // Anyone's meter: its rate, its supply and its counter are unknown; 1 Wh is
            // assumed.
            Protocol::Line => ProtocolSettings {
                name: "line",
                serial: SerialSettings::n81(9600),
                mode: Mode::Streaming { period_ms: None },
                timeout_ms: 2500,
                ac: false,
                energy_wrap_wh: None,
                energy_step_wh: 1.0,
                accuracy: None,
            },
        }
    }

    /// The config-file name.
    pub const fn as_str(self) -> &'static str {
        self.settings().name
    }

    /// The device's factory serial settings.
    pub const fn default_serial(self) -> SerialSettings {
        self.settings().serial
    }

    /// The Modbus slave address to use when none is configured: 0xF8 (the PZEM "any device"
    /// address, valid with a single meter on the line) for PZEMs, 1 for Eastron; `None` for
    /// streaming meters, which have no address.
    pub const fn default_address(self) -> Option<u8> {
        match self.settings().mode {
            Mode::Polled {
                default_address, ..
            } => Some(default_address),
            Mode::Streaming { .. } => None,
        }
    }

    /// True for request/response (Modbus) meters, false for meters that stream records.
    pub const fn is_polled(self) -> bool {
        match self.settings().mode {
            Mode::Polled { .. } => true,
            Mode::Streaming { .. } => false,
        }
    }

    /// True where a reading is one request, so the next one may be sent early.
    pub const fn reads_ahead(self) -> bool {
        match self.settings().mode {
            Mode::Polled { reads_ahead, .. } => reads_ahead,
            Mode::Streaming { .. } => false,
        }
    }

    /// How long to wait for a reply (polled) or a record (streaming), ms.
    pub const fn response_timeout_ms(self) -> u64 {
        self.settings().timeout_ms
    }

    /// How often a streaming device emits a record, ms (`None` for polled meters and for
    /// `line`, whose rate is the device's own).
    pub const fn stream_period_ms(self) -> Option<u64> {
        match self.settings().mode {
            Mode::Polled { .. } => None,
            Mode::Streaming { period_ms } => period_ms,
        }
    }

    /// True for meters on mains AC, where a voltage below 50 V means a garbage reading.
    pub const fn is_ac(self) -> bool {
        self.settings().ac
    }

    /// The value at which the device's energy counter wraps, Wh, where documented.
    pub const fn energy_wrap_wh(self) -> Option<f64> {
        self.settings().energy_wrap_wh
    }

    /// The step of the device's energy counter, Wh.
    pub const fn energy_resolution_wh(self) -> f64 {
        self.settings().energy_step_wh
    }

    /// The meter's stated accuracy for active power and energy, where its datasheet gives
    /// one (see docs/reports.md, "Energy and money: one ledger"). `None`: no figure we could
    /// check.
    pub const fn accuracy(self) -> Option<Accuracy> {
        self.settings().accuracy
    }
}

/// A meter's stated accuracy: +/- `percent` of the reading plus `plus_w` watts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accuracy {
    /// Percent of the reading.
    pub percent: f64,
    /// Fixed part, W.
    pub plus_w: f64,
    /// Where the figure comes from.
    pub source: &'static str,
}

impl Accuracy {
    /// The half-width at `watts`, W.
    pub fn half_width_w(&self, watts: f64) -> f64 {
        watts.abs() * self.percent / 100.0 + self.plus_w
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Protocol {
    type Err = UnknownProtocol;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProtocol { name: s.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_lists_valid_names() {
        for p in Protocol::ALL {
            assert_eq!(p.as_str().parse::<Protocol>(), Ok(p));
        }
        let e = "pzem".parse::<Protocol>().unwrap_err().to_string();
        let (head, valid) = e.split_once("; valid: ").unwrap();
        assert_eq!(head, "unknown meter protocol \"pzem\"");
        assert_eq!(
            valid.split(", ").collect::<Vec<_>>(),
            Protocol::ALL.map(Protocol::as_str)
        );
    }

    /// The variant names serde's derive wrote: what `Protocol::deserialize` asks its
    /// deserializer for, captured before any input is read.
    fn variants() -> &'static [&'static str] {
        use serde::de::value::Error;
        use serde::de::{Deserializer, Visitor};

        struct Capture(Option<&'static [&'static str]>);
        impl<'de> Deserializer<'de> for &mut Capture {
            type Error = Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
                Err(serde::de::Error::custom("not an enum"))
            }
            fn deserialize_enum<V: Visitor<'de>>(
                self,
                _: &'static str,
                variants: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Error> {
                self.0 = Some(variants);
                Err(serde::de::Error::custom("captured"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
                struct identifier ignored_any
            }
        }
        let mut capture = Capture(None);
        let _ = Protocol::deserialize(&mut capture);
        capture.0.expect("Protocol deserializes as an enum")
    }

    /// `ALL` is written by hand, and a variant left out of it would compile: it could not be
    /// configured, probed or tested. serde's derive lists every variant, so compare.
    #[test]
    fn all_lists_every_variant() {
        let mut declared = variants().to_vec();
        let mut listed = Protocol::ALL.map(Protocol::as_str).to_vec();
        declared.sort_unstable();
        listed.sort_unstable();
        assert_eq!(declared, listed);
    }

    #[test]
    fn settings_agree_with_each_other() {
        for p in Protocol::ALL {
            let s = p.settings();
            assert!(s.timeout_ms > 0 && s.energy_step_wh > 0.0, "{p}");
            assert!(!p.reads_ahead() || p.is_polled(), "{p}");
            if let Some(period) = p.stream_period_ms() {
                assert!(
                    s.timeout_ms >= 2 * period,
                    "{p}: a timeout of two periods at least"
                );
            }
        }
    }

    #[test]
    fn default_serial_settings_match_the_devices() {
        assert_eq!(Protocol::Pzem004t.default_serial().to_string(), "9600 8N1");
        assert_eq!(Protocol::Pzem017.default_serial().to_string(), "9600 8N2");
        assert_eq!(Protocol::Sdm120.default_serial().to_string(), "2400 8N1");
        assert_eq!(Protocol::Sdm630.default_serial().to_string(), "9600 8N1");
        assert_eq!(Protocol::WattsUp.default_serial().to_string(), "115200 8N1");
        assert_eq!(Protocol::Cse7766.default_serial().to_string(), "4800 8E1");
        assert_eq!(Protocol::Hlw8032.default_serial().to_string(), "4800 8E1");
        assert!(Protocol::Pzem004t.is_polled() && !Protocol::Cse7766.is_polled());
        assert_eq!(Protocol::Pzem004t.default_address(), Some(0xF8));
        assert_eq!(Protocol::Sdm120.default_address(), Some(1));
        assert!(
            Protocol::ALL
                .iter()
                .filter(|p| p.is_polled())
                .all(|p| p.response_timeout_ms() >= 600)
        );
    }

    #[test]
    fn serde_names_match_config_names() {
        use serde::de::IntoDeserializer;
        use serde::de::value::Error;
        for p in Protocol::ALL {
            let back = Protocol::deserialize(p.as_str().into_deserializer()).map_err(|e: Error| e);
            assert_eq!(back.unwrap(), p);
        }
    }
}
