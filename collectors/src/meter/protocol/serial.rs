//! The line settings of a serial port: baud, data bits, parity (by its config-file name:
//! `none`, `even`, `odd`) and stop bits, shown as `9600 8N1`, and how long bytes take on the
//! wire at them. Which settings each meter ships with is the protocol table's
//! ([`super::Protocol::settings`]).

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

#[cfg(test)]
mod tests {
    use crate::meter::Protocol;

    #[test]
    fn transfer_time_counts_start_parity_and_stop_bits() {
        // 24 bytes at 4800 8E1 = 24 * 11 bits = 264 bits = 55 ms.
        assert_eq!(Protocol::Cse7766.default_serial().transfer_ms(24), 55);
    }
}
