//! Supported meter protocols, their config names and their default serial settings
//! (meters.md §1.1, §2, §3.1, §4.1, §5.1). Baud in bit/s, timeouts in milliseconds.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Serial parity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Parity {
    None,
    Even,
    Odd,
}

impl Parity {
    /// The config-file name.
    pub fn as_str(self) -> &'static str {
        match self {
            Parity::None => "none",
            Parity::Even => "even",
            Parity::Odd => "odd",
        }
    }
}

impl FromStr for Parity {
    type Err = String;

    /// `none`, `even` or `odd` (or `n`, `e`, `o`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" | "n" => Ok(Parity::None),
            "even" | "e" => Ok(Parity::Even),
            "odd" | "o" => Ok(Parity::Odd),
            other => Err(format!(
                "{other:?} is not a parity: use \"none\", \"even\" or \"odd\""
            )),
        }
    }
}

/// Line settings of a serial port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SerialSettings {
    /// Bit/s.
    pub baud: u32,
    /// 5..=8.
    pub data_bits: u8,
    pub parity: Parity,
    /// 1 or 2.
    pub stop_bits: u8,
}

impl SerialSettings {
    /// 8 data bits, no parity, one stop bit at `baud`.
    pub const fn n81(baud: u32) -> Self {
        SerialSettings {
            baud,
            data_bits: 8,
            parity: Parity::None,
            stop_bits: 1,
        }
    }

    /// Time to send `bytes` bytes at these settings (start bit included), in ms, rounded up.
    pub fn transfer_ms(&self, bytes: usize) -> u64 {
        let bits_per_char = 1
            + u64::from(self.data_bits)
            + u64::from(self.stop_bits)
            + u64::from(self.parity != Parity::None);
        (bytes as u64 * bits_per_char * 1000).div_ceil(u64::from(self.baud.max(1)))
    }
}

impl fmt::Display for SerialSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = match self.parity {
            Parity::None => 'N',
            Parity::Even => 'E',
            Parity::Odd => 'O',
        };
        write!(f, "{} {}{}{}", self.baud, self.data_bits, p, self.stop_bits)
    }
}

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

/// A protocol name that is not one of [`Protocol::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown meter protocol {name:?}; valid: pzem004t, pzem017, sdm120, sdm230, sdm630, wattsup, cse7766, hlw8032, line"
)]
pub struct UnknownProtocol {
    pub name: String,
}

impl Protocol {
    /// Every protocol, in the order [`crate::meter::probe`] tries them.
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

    /// The config-file name.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Pzem004t => "pzem004t",
            Protocol::Pzem017 => "pzem017",
            Protocol::Sdm120 => "sdm120",
            Protocol::Sdm230 => "sdm230",
            Protocol::Sdm630 => "sdm630",
            Protocol::WattsUp => "wattsup",
            Protocol::Cse7766 => "cse7766",
            Protocol::Hlw8032 => "hlw8032",
            Protocol::Line => "line",
        }
    }

    /// The device's factory serial settings.
    pub fn default_serial(self) -> SerialSettings {
        match self {
            Protocol::Pzem004t | Protocol::Sdm230 | Protocol::Sdm630 | Protocol::Line => {
                SerialSettings::n81(9600)
            }
            Protocol::Pzem017 => SerialSettings {
                stop_bits: 2,
                ..SerialSettings::n81(9600)
            },
            Protocol::Sdm120 => SerialSettings::n81(2400),
            Protocol::WattsUp => SerialSettings::n81(115_200),
            Protocol::Cse7766 | Protocol::Hlw8032 => SerialSettings {
                parity: Parity::Even,
                ..SerialSettings::n81(4800)
            },
        }
    }

    /// The Modbus slave address to use when none is configured: 0xF8 (the PZEM "any device"
    /// address, valid with a single meter on the line) for PZEMs, 1 for Eastron; `None` for
    /// streaming meters, which have no address.
    pub fn default_address(self) -> Option<u8> {
        match self {
            Protocol::Pzem004t | Protocol::Pzem017 => Some(crate::meter::pzem::GENERAL_ADDRESS),
            Protocol::Sdm120 | Protocol::Sdm230 | Protocol::Sdm630 => Some(1),
            _ => None,
        }
    }

    /// True for request/response (Modbus) meters, false for meters that stream records.
    pub fn is_polled(self) -> bool {
        matches!(
            self,
            Protocol::Pzem004t
                | Protocol::Pzem017
                | Protocol::Sdm120
                | Protocol::Sdm230
                | Protocol::Sdm630
        )
    }

    /// How long to wait for a reply (polled) or a record (streaming), ms. Modbus uses 600 ms:
    /// mbmd raised 300 to 600 for slow meters (volkszaehler/mbmd#258). A Watts Up streams a
    /// record per second and may take up to 2 s to answer; CSE chips stream about 20 frames/s.
    pub fn response_timeout_ms(self) -> u64 {
        match self {
            Protocol::Pzem004t
            | Protocol::Pzem017
            | Protocol::Sdm230
            | Protocol::Sdm630
            | Protocol::Cse7766
            | Protocol::Hlw8032 => 600,
            // 2400 baud: a 165-byte block would take 0.7 s; we read single floats, but be generous.
            Protocol::Sdm120 => 800,
            Protocol::WattsUp | Protocol::Line => 2500,
        }
    }

    /// How often a streaming device emits a record, ms (`None` for polled meters and for
    /// `line`, whose rate is the device's own).
    pub fn stream_period_ms(self) -> Option<u64> {
        match self {
            Protocol::WattsUp => Some(1000),
            // meters.md §5: "roughly every 50 ms" (MicroPython HLW8032 driver) [LOW].
            Protocol::Cse7766 | Protocol::Hlw8032 => Some(50),
            _ => None,
        }
    }

    /// True for meters on mains AC, where a voltage below 50 V means a garbage reading.
    pub fn is_ac(self) -> bool {
        !matches!(self, Protocol::Pzem017 | Protocol::Line)
    }

    /// The value at which the device's energy counter wraps, Wh, where documented.
    pub fn energy_wrap_wh(self) -> Option<f64> {
        match self {
            // Display range 0..9999.99 kWh (datasheet).
            Protocol::Pzem004t | Protocol::Pzem017 => Some(10_000_000.0),
            _ => None,
        }
    }

    /// The step of the device's energy counter, Wh: PZEM counts whole Wh (datasheet
    /// §1.6.2); an Eastron shows kWh to 2 decimals; a Watts Up reports tenths of a Wh
    /// (meters.md §4.4); one CSE/HLW CF pulse is about 1.5 mWh (§5.3). `line` meters say
    /// nothing: 1 Wh is assumed.
    pub fn energy_resolution_wh(self) -> f64 {
        match self {
            Protocol::Sdm120 | Protocol::Sdm230 | Protocol::Sdm630 => 10.0,
            Protocol::WattsUp => 0.1,
            Protocol::Cse7766 | Protocol::Hlw8032 => 0.01,
            Protocol::Pzem004t | Protocol::Pzem017 | Protocol::Line => 1.0,
        }
    }

    /// The meter's stated accuracy for active power and energy, where its datasheet gives
    /// one (see README.md, "Energy and money"). `None`: no figure we could check.
    pub fn accuracy(self) -> Option<Accuracy> {
        match self {
            // Peacefair PZEM-004T V3.0 manual: "accuracy 1.0 grade"; active power and
            // energy 0.5 % (§1.3.5, §1.6.3). The grade is taken.
            Protocol::Pzem004t => Some(Accuracy {
                percent: 1.0,
                plus_w: 0.0,
                source: "Peacefair PZEM-004T V3.0 manual: accuracy grade 1.0 (active power and energy 0.5 %)",
            }),
            // Peacefair PZEM-003/017 manual §1.3.3 and §1.4.3: power and energy 1 %.
            Protocol::Pzem017 => Some(Accuracy {
                percent: 1.0,
                plus_w: 0.0,
                source: "Peacefair PZEM-003/017 manual §1.3.3, §1.4.3: power and energy 1 %",
            }),
            // Eastron SDM120/SDM230/SDM630 user manuals: active energy class 1 (IEC 62053-21).
            Protocol::Sdm120 | Protocol::Sdm230 | Protocol::Sdm630 => Some(Accuracy {
                percent: 1.0,
                plus_w: 0.0,
                source: "Eastron SDM120/SDM230/SDM630 user manuals: active energy class 1, IEC 62053-21",
            }),
            // Watts up? user manual, technical specifications: +/- 1.5 % + 3 counts (0.1 W).
            Protocol::WattsUp => Some(Accuracy {
                percent: 1.5,
                plus_w: 0.3,
                source: "Watts up? user manual, technical specifications: +/- 1.5 % + 3 counts",
            }),
            // The chips' own figures (HLW8032 datasheet: active power +/- 0.2 %) do not cover
            // the board: its shunt and divider constants are uncalibrated on HLW8032 boards
            // (the two published voltage dividers, 1.72 and 1.88, differ by 9 %: meters.md
            // §5.3) and unstated for CSE7766 modules. `line` meters are anyone's.
            Protocol::Cse7766 | Protocol::Hlw8032 | Protocol::Line => None,
        }
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
        assert!(
            e.contains("\"pzem\"") && e.contains("hlw8032") && e.contains("wattsup"),
            "{e}"
        );
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
    fn transfer_time_counts_start_parity_and_stop_bits() {
        // 24 bytes at 4800 8E1 = 24 * 11 bits = 264 bits = 55 ms.
        assert_eq!(Protocol::Cse7766.default_serial().transfer_ms(24), 55);
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
