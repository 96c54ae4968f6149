//! CSE7766 (Sonoff POW R2/R3, S31) and HLW8032 (Blitzwolf SHP5 and others) 24-byte frames
//! (docs/meters.md, "CSE7766 and HLW8032"), streamed unsolicited at 4800 8E1.
//!
//! Layout (multi-byte fields big-endian): header, 0x5A, Vpar, Vcyc, Ipar, Icyc, Ppar, Pcyc
//! (24-bit each), adj (bit6 V valid, bit5 I valid, bit4 P valid, bit7 CF overflow), CF pulse
//! count (16-bit, wraps), checksum = low 8 bits of the sum of bytes 2..=22.
//! CSE7766: V = Vpar/Vcyc, I = Ipar/Icyc, P = Ppar/Pcyc (factory calibrated).
//! HLW8032: the same times board constants Kv (voltage divider) and Ki = 1/(shunt Ω × 1000).
//! Energy: each CF pulse is Ppar × 10⁻⁶ / 3600 Wh (× Kv × Ki on an HLW8032, inferred).

use serde::{Deserialize, Serialize};

use super::{FrameError, MeterReading, StreamDecoder};

/// Frame length, bytes.
pub const FRAME_LEN: usize = 24;
/// Byte 1 of every frame.
pub const CHECK_BYTE: u8 = 0x5A;

/// Board constants of an HLW8032 design. The chip is not module-calibrated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Hlw8032Constants {
    /// Voltage divider coefficient `Kv` (HLW8032 reference material: 1.88; `ESPHome` default 1.72).
    pub voltage_divider: f64,
    /// Current shunt, Ω (1 mΩ gives Ki = 1).
    pub current_shunt_ohm: f64,
}

impl Default for Hlw8032Constants {
    fn default() -> Self {
        Hlw8032Constants {
            voltage_divider: 1.88,
            current_shunt_ohm: 0.001,
        }
    }
}

impl Hlw8032Constants {
    /// Ki = 1 / (shunt Ω × 1000).
    pub fn ki(&self) -> f64 {
        1.0 / (self.current_shunt_ohm * 1000.0)
    }
}

/// Which chip (and so which scaling).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Chip {
    Cse7766,
    Hlw8032(Hlw8032Constants),
}

impl Chip {
    fn kv_ki(self) -> (f64, f64) {
        match self {
            Chip::Cse7766 => (1.0, 1.0),
            Chip::Hlw8032(c) => (c.voltage_divider, c.ki()),
        }
    }
}

/// A frame whose checksum verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CseFrame {
    pub header: u8,
    pub vpar: u32,
    pub vcyc: u32,
    pub ipar: u32,
    pub icyc: u32,
    pub ppar: u32,
    pub pcyc: u32,
    pub adj: u8,
    /// CF pulse counter (wraps at 65536).
    pub cf: u16,
}

fn checksum(frame: &[u8]) -> u8 {
    frame[2..23].iter().fold(0u8, |a, &b| a.wrapping_add(b))
}

fn u24(b: &[u8]) -> u32 {
    (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2])
}

/// A plausible first byte: 0x55 normal, 0xAA not calibrated, 0xF? abnormal flags.
pub fn is_header(b: u8) -> bool {
    b == 0x55 || b == 0xAA || b & 0xF0 == 0xF0
}

impl CseFrame {
    /// Parse exactly 24 bytes; checks header, 0x5A and the checksum.
    pub fn parse(b: &[u8]) -> Result<CseFrame, FrameError> {
        if b.len() != FRAME_LEN {
            return Err(FrameError::Truncated(format!("{} of 24 bytes", b.len())));
        }
        if !is_header(b[0]) || b[1] != CHECK_BYTE {
            return Err(FrameError::Malformed(format!(
                "bad sync {:02X} {:02X}",
                b[0], b[1]
            )));
        }
        let computed = checksum(b);
        if computed != b[23] {
            return Err(FrameError::Checksum {
                got: b[23],
                computed,
            });
        }
        Ok(CseFrame {
            header: b[0],
            vpar: u24(&b[2..5]),
            vcyc: u24(&b[5..8]),
            ipar: u24(&b[8..11]),
            icyc: u24(&b[11..14]),
            ppar: u24(&b[14..17]),
            pcyc: u24(&b[17..20]),
            adj: b[20],
            cf: u16::from_be_bytes([b[21], b[22]]),
        })
    }

    /// The 24 bytes on the wire, checksum included.
    pub fn encode(&self) -> [u8; FRAME_LEN] {
        let mut b = [0u8; FRAME_LEN];
        b[0] = self.header;
        b[1] = CHECK_BYTE;
        for (i, v) in [
            self.vpar, self.vcyc, self.ipar, self.icyc, self.ppar, self.pcyc,
        ]
        .into_iter()
        .enumerate()
        {
            b[2 + 3 * i..5 + 3 * i].copy_from_slice(&v.to_be_bytes()[1..]);
        }
        b[20] = self.adj;
        b[21..23].copy_from_slice(&self.cf.to_be_bytes());
        b[23] = checksum(&b);
        b
    }

    /// Power, voltage, current and PF by the ESPHome/Tasmota rules: 0xAA refuses (not
    /// calibrated); header bits 3/2/0 (voltage/current cycle out of range, coefficient storage
    /// fault) drop the frame; header bit1 (power cycle overflow, the normal no-load state 0xF2)
    /// or adj bit4 clear means P = 0; current is 0 when P is 0. Energy is left `None`: the
    /// decoder accumulates it from the CF counter.
    pub fn reading(&self, chip: Chip) -> Result<MeterReading, FrameError> {
        if self.header == 0xAA {
            return Err(FrameError::NotCalibrated);
        }
        if self.header & 0xF0 == 0xF0 && self.header & 0x0D != 0 {
            return Err(FrameError::Abnormal(self.header));
        }
        let (kv, ki) = chip.kv_ki();
        let ratio = |par: u32, cyc: u32| (cyc != 0).then(|| f64::from(par) / f64::from(cyc));
        let voltage = if self.adj & 0x40 != 0 {
            ratio(self.vpar, self.vcyc).map(|v| v * kv)
        } else {
            None
        };
        let power_overflow = self.header & 0xF0 == 0xF0 && self.header & 0x02 != 0;
        let power = if self.adj & 0x10 != 0 && !power_overflow {
            ratio(self.ppar, self.pcyc).map_or(0.0, |p| p * kv * ki)
        } else {
            0.0
        };
        let current = if power > 0.0 && self.adj & 0x20 != 0 {
            ratio(self.ipar, self.icyc).map_or(0.0, |i| i * ki)
        } else {
            0.0
        };
        let apparent = voltage.unwrap_or(0.0) * current;
        Ok(MeterReading {
            power_w: Some(power),
            voltage_v: voltage,
            current_a: Some(current),
            power_factor: (apparent > 0.0).then(|| (power / apparent).min(1.0)),
            frequency_hz: None,
            energy_wh: None,
        })
    }

    /// Wh per CF pulse.
    pub fn wh_per_pulse(&self, chip: Chip) -> f64 {
        let (kv, ki) = chip.kv_ki();
        f64::from(self.ppar) * kv * ki / 1e6 / 3600.0
    }
}

/// Incremental decoder: syncs on a header byte followed by 0x5A, checks 24 bytes, and on a
/// failure shifts by one byte (as Tasmota does). Accumulates energy from the CF counter,
/// including its 16-bit wrap; `energy_wh` counts from the first frame this decoder saw.
#[derive(Debug)]
pub struct CseDecoder {
    chip: Chip,
    buf: Vec<u8>,
    discarded: u64,
    last_cf: Option<u16>,
    energy_wh: f64,
}

impl CseDecoder {
    pub fn new(chip: Chip) -> Self {
        CseDecoder {
            chip,
            buf: Vec::new(),
            discarded: 0,
            last_cf: None,
            energy_wh: 0.0,
        }
    }
}

impl StreamDecoder for CseDecoder {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    fn next_reading(&mut self) -> Option<Result<MeterReading, FrameError>> {
        let start = self
            .buf
            .windows(2)
            .position(|w| is_header(w[0]) && w[1] == CHECK_BYTE);
        let Some(start) = start else {
            let keep = usize::from(self.buf.last().is_some_and(|&b| is_header(b)));
            let drop = self.buf.len() - keep;
            self.buf.drain(..drop);
            self.discarded += drop as u64;
            return None;
        };
        self.buf.drain(..start);
        self.discarded += start as u64;
        if self.buf.len() < FRAME_LEN {
            return None;
        }
        match CseFrame::parse(&self.buf[..FRAME_LEN]) {
            Ok(frame) => {
                self.buf.drain(..FRAME_LEN);
                if let Some(last) = self.last_cf {
                    let pulses = frame.cf.wrapping_sub(last);
                    self.energy_wh += f64::from(pulses) * frame.wh_per_pulse(self.chip);
                }
                self.last_cf = Some(frame.cf);
                Some(frame.reading(self.chip).map(|r| MeterReading {
                    energy_wh: Some(self.energy_wh),
                    ..r
                }))
            }
            Err(e) => {
                self.buf.drain(..1);
                self.discarded += 1;
                Some(Err(e))
            }
        }
    }

    fn discarded(&self) -> u64 {
        self.discarded
    }
}

// ---------------------------------------------------------------------------------------------
// Device side.

/// Produces the frames a chip would stream for given readings. Uses Tasmota's default
/// coefficients (Vpar 191200, Ipar 16140, Ppar 5364000) and counts CF pulses from power × time.
#[derive(Debug)]
pub struct CseEncoder {
    chip: Chip,
    pulses: f64,
}

impl CseEncoder {
    pub fn new(chip: Chip) -> Self {
        CseEncoder { chip, pulses: 0.0 }
    }

    /// The frame for `reading`, `dt_ms` after the previous one. Below 0.5 W the chip reports
    /// header 0xF2 (power cycle overflow) as a real one does at no load.
    pub fn frame(&mut self, reading: &MeterReading, dt_ms: u64) -> [u8; FRAME_LEN] {
        let (kv, ki) = self.chip.kv_ki();
        let (vpar, ipar, ppar) = (191_200u32, 16_140u32, 5_364_000u32);
        let cyc = |par: u32, k: f64, value: f64| -> u32 {
            if value <= 0.0 {
                0xFF_FFFF
            } else {
                (f64::from(par) * k / value)
                    .round()
                    .clamp(1.0, 16_777_215.0) as u32
            }
        };
        let p = reading.power_w.unwrap_or(0.0).max(0.0);
        let low_load = p < 0.5;
        let mut frame = CseFrame {
            header: if low_load { 0xF2 } else { 0x55 },
            vpar,
            vcyc: cyc(vpar, kv, reading.voltage_v.unwrap_or(0.0)),
            ipar,
            icyc: cyc(ipar, ki, reading.current_a.unwrap_or(0.0)),
            ppar,
            pcyc: if low_load {
                0xFF_FFFF
            } else {
                cyc(ppar, kv * ki, p)
            },
            adj: if low_load { 0x61 } else { 0x71 },
            cf: 0,
        };
        self.pulses += p * dt_ms as f64 / 3_600_000.0 / frame.wh_per_pulse(self.chip);
        frame.cf = (self.pulses as u64 & 0xFFFF) as u16;
        if self.pulses >= 65_536.0 {
            frame.adj |= 0x80;
        }
        frame.encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::modbus::hex;
    use proptest::prelude::*;

    fn frame(s: &str) -> CseFrame {
        CseFrame::parse(&hex(s)).unwrap()
    }

    const C1: &str = "F2 5A 02 F7 60 00 03 61 00 40 10 05 72 40 51 A6 58 63 10 1B E1 7F 4D 4E";
    const C2: &str = "55 5A 02 F7 60 00 03 5A 00 40 10 04 8B 9F 51 A6 58 18 72 75 61 AC A1 30";
    const C5: &str = "55 5A 02 DB 40 00 03 25 00 3D 18 03 8E CD 4F 0A 60 2A 56 85 61 01 02 1A";
    const C6: &str = "55 5A 02 DB 40 07 17 1D 00 3D 18 03 8E CD 4F 0A 60 2B EF EA 61 01 02 2C";
    const H1: &str = "F2 5A 02 E1 80 00 06 52 00 3E A8 03 A6 C8 4F 9A E8 5E 79 0B 61 00 01 27";
    const H3: &str = "F2 5A 02 DC D0 04 C8 20 00 3E 4E 03 7C A6 4E 2B B8 B9 8A BB 61 00 01 DC";

    #[test]
    fn c1_no_load_frame() {
        let f = frame(C1);
        assert_eq!(f.cf, 32589);
        let r = f.reading(Chip::Cse7766).unwrap();
        assert!((r.voltage_v.unwrap() - 224.74).abs() < 0.01);
        assert_eq!(r.power_w, Some(0.0));
        assert_eq!(r.current_a, Some(0.0));
        assert_eq!(f.encode().to_vec(), hex(C1));
    }

    #[test]
    fn c2_and_c5_power_not_valid() {
        let r = frame(C2).reading(Chip::Cse7766).unwrap();
        assert!((r.voltage_v.unwrap() - 226.57).abs() < 0.01);
        assert_eq!(r.power_w, Some(0.0));
        assert_eq!(frame(C2).cf, 44193);
        let r = frame(C5).reading(Chip::Cse7766).unwrap();
        assert!((r.voltage_v.unwrap() - 232.55).abs() < 0.01);
        assert_eq!(frame(C5).cf, 258);
    }

    #[test]
    fn c6_passes_checksum_with_nonsense_voltage() {
        let r = frame(C6).reading(Chip::Cse7766).unwrap();
        assert!((r.voltage_v.unwrap() - 0.40).abs() < 0.01);
        // The session's plausibility filter rejects it (see session tests).
    }

    #[test]
    fn h1_h3_hlw8032_frames() {
        let chip = Chip::Hlw8032(Hlw8032Constants::default());
        let r = frame(H1).reading(chip).unwrap();
        assert!((r.voltage_v.unwrap() - 219.37).abs() < 0.01, "{r:?}");
        assert_eq!(r.power_w, Some(0.0));
        let r = frame(H3).reading(chip).unwrap();
        assert!(r.voltage_v.unwrap() < 2.0);
    }

    #[test]
    fn header_flags() {
        let mut f = frame(C1);
        f.header = 0xAA;
        assert_eq!(f.reading(Chip::Cse7766), Err(FrameError::NotCalibrated));
        f.header = 0xF8;
        assert_eq!(f.reading(Chip::Cse7766), Err(FrameError::Abnormal(0xF8)));
        f.header = 0xF2;
        assert!(f.reading(Chip::Cse7766).is_ok());
    }

    #[test]
    fn decoder_resyncs_and_counts_cf_wrap() {
        let mut d = CseDecoder::new(Chip::Cse7766);
        let mut a = frame(C1);
        a.cf = 65_530;
        let mut b = a;
        b.cf = 4; // wrapped: 10 pulses
        d.push(&[0x00, 0x5A, 0x55]);
        d.push(&a.encode());
        d.push(&b.encode()[..10]);
        let first = d.next_reading().unwrap().unwrap();
        assert_eq!(first.energy_wh, Some(0.0));
        assert!(d.next_reading().is_none());
        d.push(&b.encode()[10..]);
        let second = d.next_reading().unwrap().unwrap();
        let expect = 10.0 * f64::from(a.ppar) / 1e6 / 3600.0;
        assert!((second.energy_wh.unwrap() - expect).abs() < 1e-12);
        assert_eq!(d.discarded(), 3);
    }

    #[test]
    fn encoder_round_trips_through_decoder() {
        for chip in [Chip::Cse7766, Chip::Hlw8032(Hlw8032Constants::default())] {
            let mut enc = CseEncoder::new(chip);
            let mut dec = CseDecoder::new(chip);
            let r = MeterReading {
                power_w: Some(100.0),
                voltage_v: Some(230.0),
                current_a: Some(0.5),
                ..MeterReading::default()
            };
            for _ in 0..=72 {
                dec.push(&enc.frame(&r, 50_000)); // 50 s steps: 1 Wh... 72 steps = 100 Wh
            }
            let mut last = None;
            while let Some(x) = dec.next_reading() {
                last = Some(x.unwrap());
            }
            let last = last.unwrap();
            assert!((last.power_w.unwrap() - 100.0).abs() < 0.1, "{last:?}");
            assert!((last.voltage_v.unwrap() - 230.0).abs() < 0.1);
            assert!((last.current_a.unwrap() - 0.5).abs() < 0.01);
            assert!((last.energy_wh.unwrap() - 100.0).abs() < 0.01, "{last:?}");
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_and_never_yield_bad_checksums(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut d = CseDecoder::new(Chip::Cse7766);
            d.push(&bytes);
            let mut n_ok = 0;
            while let Some(r) = d.next_reading() {
                if r.is_ok() { n_ok += 1; }
            }
            // Every accepted frame must be a checksum-valid window of the input.
            let valid = bytes.windows(24).filter(|w| CseFrame::parse(w).is_ok()).count();
            prop_assert!(n_ok <= valid);
        }

        #[test]
        fn bit_flips_are_caught(byte in 2usize..24, bit in 0u8..8) {
            let mut b = hex(C2);
            b[byte] ^= 1 << bit;
            prop_assert!(CseFrame::parse(&b).is_err());
        }

        #[test]
        fn truncations_never_decode(n in 0usize..24) {
            let mut d = CseDecoder::new(Chip::Cse7766);
            d.push(&hex(C2)[..n]);
            prop_assert!(d.next_reading().is_none());
        }
    }
}
