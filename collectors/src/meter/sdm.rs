//! Eastron SDM120 / SDM230 / SDM630 over Modbus-RTU (docs/meters.md, "Eastron SDM"). Every
//! quantity is an IEEE-754 float32 in two input registers (function 0x04), **high word first**,
//! bytes big-endian. Registers a model lacks answer exception 0x02: that means "not supported"
//! (the value is `None`), not an error.
//!
//! Units: V, A, W, Hz, PF ratio; energy registers are kWh (converted to Wh here).

use super::modbus::{self, Expect, Reply, ReplyParser, Request};
use super::{Answer, Exchange, FrameError, MeterReading, Missed, PolledCodec};

/// Which meter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdmModel {
    Sdm120,
    Sdm230,
    Sdm630,
}

/// A quantity read per poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Voltage,
    Current,
    Power,
    PowerFactor,
    Frequency,
    /// Import active energy, kWh (0x0048): preferred energy source.
    ImportEnergy,
    /// Total active energy, kWh (0x0156): fallback where import is not supported.
    TotalEnergy,
}

impl Quantity {
    /// Voltage and power: every model has them, so a reading fails without them.
    pub fn is_essential(self) -> bool {
        matches!(self, Quantity::Voltage | Quantity::Power)
    }

    /// The quantities polled, in order.
    pub const POLLED: [Quantity; 7] = [
        Quantity::Voltage,
        Quantity::Current,
        Quantity::Power,
        Quantity::PowerFactor,
        Quantity::Frequency,
        Quantity::ImportEnergy,
        Quantity::TotalEnergy,
    ];
}

/// The input register holding `quantity` on `model` (for the SDM630: L1 voltage and the
/// system totals of current, power and power factor).
pub fn register(model: SdmModel, quantity: Quantity) -> u16 {
    match (model, quantity) {
        (_, Quantity::Voltage) => 0x0000,
        (SdmModel::Sdm630, Quantity::Current) => 0x0030,
        (_, Quantity::Current) => 0x0006,
        (SdmModel::Sdm630, Quantity::Power) => 0x0034,
        (_, Quantity::Power) => 0x000C,
        (SdmModel::Sdm630, Quantity::PowerFactor) => 0x003E,
        (_, Quantity::PowerFactor) => 0x001E,
        (_, Quantity::Frequency) => 0x0046,
        (_, Quantity::ImportEnergy) => 0x0048,
        (_, Quantity::TotalEnergy) => 0x0156,
    }
}

/// `addr 04 reg 00 02 crc crc`: read one float.
pub fn read_request(address: u8, register: u16) -> [u8; 8] {
    modbus::read_request(address, modbus::READ_INPUT, register, 2)
}

/// A parser for the reply to [`read_request`] (9 bytes).
pub fn read_parser(address: u8) -> ReplyParser {
    ReplyParser::new(address, modbus::READ_INPUT, Expect::Registers(2))
}

/// The float in a one-value reply.
pub fn decode_float(reply: &Reply) -> Result<f32, FrameError> {
    match reply.data.as_slice() {
        [a, b, c, d] => Ok(f32::from_be_bytes([*a, *b, *c, *d])),
        other => Err(FrameError::Malformed(format!(
            "SDM float reply has {} data bytes",
            other.len()
        ))),
    }
}

/// Store `value` for `quantity` in `reading` (energies converted from kWh to Wh; import
/// wins over total).
pub fn apply(reading: &mut MeterReading, quantity: Quantity, value: f32) {
    let v = f64::from(value);
    match quantity {
        Quantity::Voltage => reading.voltage_v = Some(v),
        Quantity::Current => reading.current_a = Some(v),
        Quantity::Power => reading.power_w = Some(v),
        Quantity::PowerFactor => reading.power_factor = Some(v),
        Quantity::Frequency => reading.frequency_hz = Some(v),
        Quantity::ImportEnergy => reading.energy_wh = Some(v * 1000.0),
        Quantity::TotalEnergy => {
            if reading.energy_wh.is_none() {
                reading.energy_wh = Some(v * 1000.0);
            }
        }
    }
}

/// An Eastron meter as a [`PolledCodec`]: one read per quantity, in [`Quantity::POLLED`]
/// order, skipping registers the meter lacks and the total energy once import energy is
/// known. Exception 0x02 for an optional register means the model lacks it; for the
/// voltage or the power it fails the reading. A timeout on any register but the voltage
/// skips that value: a meter that does not answer its voltage register is absent, and the
/// reading fails at once rather than waiting out the timeout for every other register.
#[derive(Debug)]
pub struct SdmCodec {
    model: SdmModel,
    address: u8,
    lacks: Vec<u16>,
    /// Index into [`Quantity::POLLED`] of the next quantity to ask for.
    next: usize,
    /// The quantity last asked for.
    asked: Option<Quantity>,
    reading: MeterReading,
}

impl SdmCodec {
    pub fn new(model: SdmModel) -> Self {
        SdmCodec {
            model,
            address: 1,
            lacks: Vec::new(),
            next: 0,
            asked: None,
            reading: MeterReading::default(),
        }
    }
}

impl PolledCodec for SdmCodec {
    fn begin(&mut self, address: u8, lacks: &[u16]) {
        self.address = address;
        self.lacks = lacks.to_vec();
        self.next = 0;
        self.asked = None;
        self.reading = MeterReading::default();
    }

    fn next_request(&mut self) -> Option<Exchange> {
        while let Some(&q) = Quantity::POLLED.get(self.next) {
            self.next += 1;
            let reg = register(self.model, q);
            if self.lacks.contains(&reg)
                || (q == Quantity::TotalEnergy && self.reading.energy_wh.is_some())
            {
                continue;
            }
            self.asked = Some(q);
            return Some(Exchange {
                request: read_request(self.address, reg).to_vec(),
                reply: Box::new(read_parser(self.address)),
            });
        }
        None
    }

    fn answer(&mut self, reply: Result<Reply, Missed>) -> Result<Answer, Missed> {
        let Some(q) = self.asked.take() else {
            return Err(Missed::Frame(FrameError::InvalidRequest(
                "a reply with no request asked".into(),
            )));
        };
        match reply.and_then(|r| decode_float(&r).map_err(Missed::Frame)) {
            Ok(v) => {
                apply(&mut self.reading, q, v);
                Ok(Answer::Read)
            }
            // Every Eastron model has a voltage and a power register: a refusal of either
            // is the meter refusing (busy, misconfigured), not a register it lacks.
            Err(Missed::Frame(FrameError::Exception {
                code: modbus::ILLEGAL_DATA_ADDRESS,
                ..
            })) if !q.is_essential() => {
                let reg = register(self.model, q);
                self.lacks.push(reg);
                Ok(Answer::Lacks(reg))
            }
            Err(Missed::Timeout) if q != Quantity::Voltage => Ok(Answer::Skipped),
            Err(e) => Err(e),
        }
    }

    fn reading(&self) -> MeterReading {
        self.reading
    }
}

// ---------------------------------------------------------------------------------------------
// Device side.

/// A simulated Eastron meter. The simulated SDM120 is the basic variant without the
/// SDM220-style registers (phase angle 0x0024, import/export energies 0x0048..0x004E), so it
/// exercises the "not supported" path.
#[derive(Debug, Clone)]
pub struct SdmDevice {
    pub model: SdmModel,
    pub address: u8,
}

impl SdmDevice {
    pub fn new(model: SdmModel, address: u8) -> Self {
        SdmDevice { model, address }
    }

    /// The value of the float starting at `register`, or `None` if this model lacks it.
    #[allow(clippy::match_same_arms)] // one arm per register, as in the register table
    pub fn value(&self, register: u16, r: &MeterReading) -> Option<f32> {
        let v = |x: Option<f64>| x.unwrap_or(0.0) as f32;
        let kwh = v(r.energy_wh) / 1000.0;
        let phase3 = self.model == SdmModel::Sdm630;
        let value = match register {
            0x0000 => v(r.voltage_v),
            0x0002 | 0x0004 if phase3 => v(r.voltage_v),
            0x0006 => v(r.current_a) / if phase3 { 3.0 } else { 1.0 },
            0x0008 | 0x000A if phase3 => v(r.current_a) / 3.0,
            0x000C => v(r.power_w) / if phase3 { 3.0 } else { 1.0 },
            0x000E | 0x0010 if phase3 => v(r.power_w) / 3.0,
            0x001E => v(r.power_factor),
            0x0020 | 0x0022 if phase3 => v(r.power_factor),
            0x0024 if self.model != SdmModel::Sdm120 => 0.0,
            0x0030 | 0x0034 | 0x003E if !phase3 => return None,
            0x0030 => v(r.current_a),
            0x0034 => v(r.power_w),
            0x003E => v(r.power_factor),
            0x0046 => v(r.frequency_hz),
            0x0048 if self.model != SdmModel::Sdm120 => kwh,
            0x004A | 0x004C | 0x004E if self.model != SdmModel::Sdm120 => 0.0,
            0x0156 => kwh,
            0x0158 => 0.0,
            _ => return None,
        };
        Some(value)
    }

    /// The reply to `request`, if addressed to this meter (Eastron meters have no general
    /// address). Reads must be whole floats (even start and count) of at most 80 registers.
    pub fn respond(&self, request: &Request, reading: &MeterReading) -> Option<Vec<u8>> {
        if request.address() != self.address {
            return None;
        }
        let a = self.address;
        Some(match *request {
            Request::Read {
                function: modbus::READ_INPUT,
                start,
                count,
                ..
            } => {
                if count == 0 || count > 80 || count % 2 == 1 || start % 2 == 1 {
                    return Some(modbus::exception_reply(
                        a,
                        modbus::READ_INPUT,
                        modbus::ILLEGAL_DATA_VALUE,
                    ));
                }
                let mut data = Vec::with_capacity(usize::from(count) * 2);
                for reg in (start..start.saturating_add(count)).step_by(2) {
                    match self.value(reg, reading) {
                        Some(v) => data.extend_from_slice(&v.to_be_bytes()),
                        None => {
                            return Some(modbus::exception_reply(
                                a,
                                modbus::READ_INPUT,
                                modbus::ILLEGAL_DATA_ADDRESS,
                            ));
                        }
                    }
                }
                modbus::registers_reply(a, modbus::READ_INPUT, &data)
            }
            _ => modbus::exception_reply(a, request.function(), modbus::ILLEGAL_FUNCTION),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::modbus::hex;
    use proptest::prelude::*;

    fn float(bytes: &[u8]) -> Result<f32, FrameError> {
        let mut p = read_parser(1);
        p.push(bytes);
        match p.next_reply() {
            Some(r) => r.and_then(|r| decode_float(&r)),
            None => Err(p
                .finish()
                .unwrap_or(FrameError::Truncated("nothing".into()))),
        }
    }

    #[test]
    fn request_table() {
        let table = [
            (0x0000, "01 04 00 00 00 02 71 CB"),
            (0x0006, "01 04 00 06 00 02 91 CA"),
            (0x000C, "01 04 00 0C 00 02 B1 C8"),
            (0x0012, "01 04 00 12 00 02 D1 CE"),
            (0x0018, "01 04 00 18 00 02 F1 CC"),
            (0x001E, "01 04 00 1E 00 02 11 CD"),
            (0x0024, "01 04 00 24 00 02 31 C0"),
            (0x0046, "01 04 00 46 00 02 90 1E"),
            (0x0048, "01 04 00 48 00 02 F1 DD"),
            (0x004A, "01 04 00 4A 00 02 50 1D"),
            (0x0156, "01 04 01 56 00 02 90 27"),
        ];
        for (reg, bytes) in table {
            assert_eq!(
                read_request(1, reg),
                hex(bytes).as_slice(),
                "register {reg:#06x}"
            );
        }
        assert_eq!(
            modbus::read_request(1, 4, 0, 0x50),
            hex("01 04 00 00 00 50 F0 36").as_slice()
        );
    }

    #[test]
    fn swapped_frequency_crc_from_a_public_sketch_is_wrong() {
        assert_ne!(
            read_request(1, 0x0046),
            hex("01 04 00 46 00 02 90 E1").as_slice()
        );
        let mut p = modbus::RequestParser::new(&[]);
        p.push(&hex("01 04 00 46 00 02 90 E1"));
        assert_eq!(p.next_request(), None);
    }

    #[test]
    fn s1_voltage_and_synthetic_vectors() {
        assert!((float(&hex("01 04 04 43 66 33 34 1B 38")).unwrap() - 230.2).abs() < 1e-4);
        assert!((float(&hex("01 04 04 C3 44 4C CD 72 80")).unwrap() + 196.3).abs() < 1e-4);
        assert!((float(&hex("01 04 04 42 48 00 00 6F EA")).unwrap() - 50.0).abs() < 1e-6);
    }

    #[test]
    fn device_reproduces_s1_and_reports_missing_registers_as_exception_2() {
        let dev = SdmDevice::new(SdmModel::Sdm120, 1);
        let r = MeterReading {
            voltage_v: Some(f64::from(f32::from_bits(0x4366_3334))),
            ..MeterReading::default()
        };
        let req = Request::Read {
            address: 1,
            function: 4,
            start: 0,
            count: 2,
        };
        assert_eq!(
            dev.respond(&req, &r).unwrap(),
            hex("01 04 04 43 66 33 34 1B 38")
        );
        let req = Request::Read {
            address: 1,
            function: 4,
            start: 0x0048,
            count: 2,
        };
        let reply = dev.respond(&req, &r).unwrap();
        let mut p = read_parser(1);
        p.push(&reply);
        assert_eq!(
            p.next_reply(),
            Some(Err(FrameError::Exception {
                address: 1,
                function: 4,
                code: 2
            }))
        );
        assert!(
            SdmDevice::new(SdmModel::Sdm230, 1)
                .respond(&req, &r)
                .unwrap()
                .len()
                == 9
        );
    }

    #[test]
    fn import_energy_wins_over_total() {
        let mut r = MeterReading::default();
        apply(&mut r, Quantity::ImportEnergy, 1.5);
        apply(&mut r, Quantity::TotalEnergy, 9.0);
        assert_eq!(r.energy_wh, Some(1500.0));
        let mut r = MeterReading::default();
        apply(&mut r, Quantity::TotalEnergy, 2.0);
        assert_eq!(r.energy_wh, Some(2000.0));
    }

    #[test]
    fn sdm630_block_read() {
        let dev = SdmDevice::new(SdmModel::Sdm630, 1);
        let r = MeterReading {
            voltage_v: Some(230.0),
            ..MeterReading::default()
        };
        let req = Request::Read {
            address: 1,
            function: 4,
            start: 0,
            count: 6,
        };
        assert_eq!(dev.respond(&req, &r).unwrap().len(), 5 + 12);
        assert_eq!(register(SdmModel::Sdm630, Quantity::Power), 0x0034);
    }

    proptest! {
        #[test]
        fn never_panics_and_bit_flips_never_decode(bytes in proptest::collection::vec(any::<u8>(), 0..40), byte in 0usize..9, bit in 0u8..8) {
            let _ = float(&bytes);
            let mut f = hex("01 04 04 43 66 33 34 1B 38");
            f[byte] ^= 1 << bit;
            prop_assert!(float(&f).is_err());
        }
    }
}
