//! Faults a meter's line can show, as a script the simulator plays (`wattson meter simulate
//! --fault`) and the session's property test draws at random: Modbus exception replies,
//! replies from another address, corrupted, truncated and over-long frames, garbage, and
//! silence. Each fault turns the bytes a healthy device would send into what the faulty one
//! sends; the same transform serves every protocol (a Modbus reply or a streamed record).
//!
//! A script is a list of windows, `KIND@START+LENGTH`, relative to when the device starts
//! serving; with a cycle, the windows repeat every cycle. Times in ms.

use std::fmt;
use std::str::FromStr;

use super::modbus;

/// What a faulty device does in place of one reply (polled) or one record (streaming).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A Modbus exception reply with this code in place of every reply (polled meters).
    Exception(u8),
    /// Nothing at all.
    Silence,
    /// The reply as another address would send it, with a good CRC (polled meters).
    WrongAddress,
    /// The frame with one bit of its check (CRC, checksum, or a digit of a text line)
    /// flipped.
    Corrupt,
    /// The first half of the frame only.
    Truncated,
    /// The frame with junk bytes after it.
    Overlong,
    /// Random bytes of the frame's length.
    Garbage,
}

impl Fault {
    /// Every kind, one value each (exceptions with code 0x02).
    pub const ALL: [Fault; 7] = [
        Fault::Exception(modbus::ILLEGAL_DATA_ADDRESS),
        Fault::Silence,
        Fault::WrongAddress,
        Fault::Corrupt,
        Fault::Truncated,
        Fault::Overlong,
        Fault::Garbage,
    ];

    /// Whether a device of a polled (Modbus) or streaming protocol can show this fault.
    pub fn applies(self, polled: bool) -> bool {
        polled || !matches!(self, Fault::Exception(_) | Fault::WrongAddress)
    }

    /// What the faulty device sends in place of `frame` (empty: nothing). `rng` is the
    /// state of a xorshift generator, for garbage.
    pub fn apply(self, frame: &[u8], rng: &mut u64) -> Vec<u8> {
        match self {
            Fault::Exception(code) => match frame {
                [address, function, ..] => {
                    modbus::exception_reply(*address, *function & 0x7F, code)
                }
                _ => Vec::new(),
            },
            Fault::Silence => Vec::new(),
            Fault::WrongAddress => match frame {
                [address, rest @ ..] if frame.len() > 2 => {
                    let mut f = vec![address.wrapping_add(1).max(1)];
                    f.extend_from_slice(&rest[..rest.len() - 2]);
                    modbus::push_crc(&mut f);
                    f
                }
                _ => Vec::new(),
            },
            Fault::Corrupt => {
                let mut f = frame.to_vec();
                // A text line's last digit becomes a letter (line noise in its value, the
                // line still a line); a binary frame's last byte is its check.
                let text = f.last() == Some(&b'\n')
                    && f.iter()
                        .all(|b| b.is_ascii_graphic() || b" \t\r\n".contains(b));
                let at = if text {
                    f.iter().rposition(u8::is_ascii_digit)
                } else {
                    f.len().checked_sub(1)
                };
                if let Some(i) = at {
                    f[i] ^= if f[i].is_ascii_digit() { 0x40 } else { 0x01 };
                }
                f
            }
            Fault::Truncated => frame[..frame.len() / 2].to_vec(),
            Fault::Overlong => {
                let mut f = frame.to_vec();
                f.extend(std::iter::repeat_with(|| next(rng)).take(frame.len().max(4)));
                f
            }
            Fault::Garbage => std::iter::repeat_with(|| next(rng))
                .take(frame.len())
                .collect(),
        }
    }
}

/// One xorshift64 step, a byte of it.
fn next(rng: &mut u64) -> u8 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    (*rng >> 24) as u8
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Exception(code) => write!(f, "exception:{code}"),
            Fault::Silence => f.write_str("silence"),
            Fault::WrongAddress => f.write_str("wrong-address"),
            Fault::Corrupt => f.write_str("corrupt"),
            Fault::Truncated => f.write_str("truncated"),
            Fault::Overlong => f.write_str("overlong"),
            Fault::Garbage => f.write_str("garbage"),
        }
    }
}

/// A fault and when it lasts, relative to the start of the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultWindow {
    pub fault: Fault,
    pub start_ms: u64,
    pub length_ms: u64,
}

impl FaultWindow {
    /// When the window ends, ms after the start of the script.
    pub fn end_ms(&self) -> u64 {
        self.start_ms.saturating_add(self.length_ms)
    }
}

impl fmt::Display for FaultWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}ms+{}ms", self.fault, self.start_ms, self.length_ms)
    }
}

/// Why a fault window does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{input:?}: {why}; expected KIND@START+LENGTH, e.g. exception:2@10s+3s, with KIND one of \
     exception:CODE, silence, wrong-address, corrupt, truncated, overlong, garbage and times \
     in ms or s"
)]
pub struct FaultParseError {
    pub input: String,
    pub why: String,
}

impl FromStr for FaultWindow {
    type Err = FaultParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why: &str| FaultParseError {
            input: s.to_owned(),
            why: why.to_owned(),
        };
        let (kind, times) = s.split_once('@').ok_or_else(|| err("no '@'"))?;
        let (start, length) = times.split_once('+').ok_or_else(|| err("no '+'"))?;
        let fault = match kind.split_once(':') {
            Some(("exception", code)) => Fault::Exception(
                code.parse()
                    .ok()
                    .filter(|c| (1..=0x0B).contains(c))
                    .ok_or_else(|| err("an exception code is 1 to 11"))?,
            ),
            Some(_) => return Err(err("only exception takes a code")),
            None => match kind {
                "silence" => Fault::Silence,
                "wrong-address" => Fault::WrongAddress,
                "corrupt" => Fault::Corrupt,
                "truncated" => Fault::Truncated,
                "overlong" => Fault::Overlong,
                "garbage" => Fault::Garbage,
                "exception" => return Err(err("exception needs a code, e.g. exception:2")),
                _ => return Err(err("unknown fault")),
            },
        };
        let ms = |t: &str| -> Result<u64, FaultParseError> {
            let (n, scale) = if let Some(n) = t.strip_suffix("ms") {
                (n, 1.0)
            } else if let Some(n) = t.strip_suffix('s') {
                (n, 1000.0)
            } else {
                return Err(err("a time ends in ms or s"));
            };
            n.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0 && *v * scale < 1e12)
                .map(|v| (v * scale).round() as u64)
                .ok_or_else(|| err("a time is a non-negative number"))
        };
        Ok(FaultWindow {
            fault,
            start_ms: ms(start)?,
            length_ms: ms(length)?,
        })
    }
}

/// The faults a device plays, and when.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultScript {
    pub windows: Vec<FaultWindow>,
    /// When set, the script repeats every this many ms.
    pub cycle_ms: Option<u64>,
}

impl FaultScript {
    /// The fault in force `elapsed_ms` after the start, if any (the first window that
    /// holds it).
    pub fn at(&self, elapsed_ms: u64) -> Option<Fault> {
        let t = match self.cycle_ms {
            Some(c) if c > 0 => elapsed_ms % c,
            _ => elapsed_ms,
        };
        self.windows
            .iter()
            .find(|w| w.start_ms <= t && t < w.end_ms())
            .map(|w| w.fault)
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::FrameError;
    use crate::meter::modbus::{Expect, ReplyParser};

    #[test]
    fn windows_parse_and_print_back() {
        let w: FaultWindow = "exception:2@10s+3s".parse().unwrap();
        assert_eq!(
            w,
            FaultWindow {
                fault: Fault::Exception(2),
                start_ms: 10_000,
                length_ms: 3_000
            }
        );
        assert_eq!(w.to_string().parse::<FaultWindow>().unwrap(), w);
        for f in Fault::ALL {
            let w = FaultWindow {
                fault: f,
                start_ms: 1,
                length_ms: 2,
            };
            assert_eq!(w.to_string().parse::<FaultWindow>().unwrap(), w);
        }
        for bad in [
            "exception@1s+1s",
            "exception:99@1s+1s",
            "silence@1s",
            "silence@1+1s",
            "nap@1s+1s",
            "silence:2@1s+1s",
            "silence@-1s+1s",
        ] {
            let e = bad.parse::<FaultWindow>().unwrap_err().to_string();
            assert!(e.contains("KIND@START+LENGTH"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_script_finds_the_fault_in_force_and_repeats_with_its_cycle() {
        let s = FaultScript {
            windows: vec!["silence@1s+1s".parse().unwrap()],
            cycle_ms: Some(5_000),
        };
        assert_eq!(s.at(500), None);
        assert_eq!(s.at(1_000), Some(Fault::Silence));
        assert_eq!(s.at(1_999), Some(Fault::Silence));
        assert_eq!(s.at(2_000), None);
        assert_eq!(s.at(6_500), Some(Fault::Silence));
    }

    #[test]
    fn a_corrupted_record_never_decodes_whatever_its_last_byte() {
        use crate::meter::cse7766::{Chip, CseDecoder, CseEncoder};
        use crate::meter::line::{LineDecoder, LineFormat};
        use crate::meter::{MeterReading, StreamDecoder};
        let r = MeterReading {
            power_w: Some(100.0),
            voltage_v: Some(230.0),
            current_a: Some(0.5),
            ..MeterReading::default()
        };
        let mut rng = 1;
        let mut enc = CseEncoder::new(Chip::Cse7766);
        let mut cse = CseDecoder::new(Chip::Cse7766);
        let mut line = LineDecoder::new(LineFormat::default());
        // Some CSE frames end in 0x0A, a newline: still a binary frame.
        for _ in 0..2000 {
            cse.push(&Fault::Corrupt.apply(&enc.frame(&r, 50), &mut rng));
            let text = LineFormat::default().encode_line(&r);
            line.push(&Fault::Corrupt.apply(text.as_bytes(), &mut rng));
        }
        for d in [&mut cse as &mut dyn StreamDecoder, &mut line] {
            while let Some(x) = d.next_reading() {
                assert!(x.is_err(), "{x:?}");
            }
        }
    }

    #[test]
    fn each_fault_turns_a_good_modbus_reply_into_what_the_session_must_refuse() {
        let good = modbus::registers_reply(1, 4, &[0x43, 0x66, 0x33, 0x34]);
        let parse = |bytes: &[u8]| {
            let mut p = ReplyParser::new(1, 4, Expect::Registers(2));
            p.push(bytes);
            p.next_reply()
        };
        assert!(matches!(parse(&good), Some(Ok(_))));
        let mut rng = 1;
        for f in Fault::ALL {
            let r = parse(&f.apply(&good, &mut rng));
            match f {
                Fault::Exception(_) => {
                    assert!(
                        matches!(r, Some(Err(FrameError::Exception { code: 2, .. }))),
                        "{r:?}"
                    );
                }
                // The good reply followed by junk: the reply itself still parses.
                Fault::Overlong => assert!(matches!(r, Some(Ok(_))), "{r:?}"),
                _ => assert!(!matches!(r, Some(Ok(_))), "{f}: {r:?}"),
            }
        }
    }
}
