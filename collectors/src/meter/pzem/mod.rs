//! Peacefair PZEM-004T v3 / 014 / 016 (AC) and PZEM-017 / 003 (DC) over Modbus-RTU
//! (docs/meters.md, "Peacefair PZEM"). Input registers (function 0x04) hold the measurements;
//! 32-bit values span two registers, **low word first**. Holding register 0x0002 is the slave
//! address. Function 0x42 resets the energy counter; its success reply is an echo.
//!
//! Units on the wire: AC V 0.1 V, I 0.001 A, P 0.1 W, E 1 Wh, f 0.1 Hz, PF 0.01;
//! DC V 0.01 V, I 0.01 A, P 0.1 W, E 1 Wh.

use super::modbus::{self, Expect, Reply, ReplyParser};
use super::{Answer, Exchange, FrameError, MeterReading, Missed, PolledCodec};

mod device;
pub use device::PzemDevice;

/// The "any device" address: every PZEM answers it (one meter on the line only), and replies
/// carry 0xF8 in the address byte.
pub const GENERAL_ADDRESS: u8 = 0xF8;
/// Reset-energy function code.
pub const RESET_ENERGY: u8 = 0x42;
/// Holding register with the slave address.
pub const ADDRESS_REGISTER: u16 = 0x0002;

/// Which register map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PzemModel {
    /// PZEM-004T v3 / 014 / 016: 10 input registers.
    Ac,
    /// PZEM-017 / 003: 8 input registers.
    Dc,
}

impl PzemModel {
    /// Input registers read per poll.
    pub fn registers(self) -> u16 {
        match self {
            PzemModel::Ac => 10,
            PzemModel::Dc => 8,
        }
    }
}

/// The measurement request: read all input registers from 0x0000.
pub fn read_request(model: PzemModel, address: u8) -> [u8; 8] {
    modbus::read_request(address, modbus::READ_INPUT, 0, model.registers())
}

/// A parser for the reply to [`read_request`].
pub fn read_parser(model: PzemModel, address: u8) -> ReplyParser {
    ReplyParser::new(
        address,
        modbus::READ_INPUT,
        Expect::Registers(model.registers()),
    )
}

/// `addr 42 crc crc`.
pub fn reset_energy_request(address: u8) -> [u8; 4] {
    modbus::bare_request(address, RESET_ENERGY)
}

/// A parser for the reply to [`reset_energy_request`] (a 4-byte echo).
pub fn reset_energy_parser(address: u8) -> ReplyParser {
    ReplyParser::new(address, RESET_ENERGY, Expect::Echo(4))
}

/// Read the slave address (holding register 0x0002); send to [`GENERAL_ADDRESS`].
pub fn read_address_request(address: u8) -> [u8; 8] {
    modbus::read_request(address, modbus::READ_HOLDING, ADDRESS_REGISTER, 1)
}

/// A parser for the reply to [`read_address_request`] (one holding register).
pub fn read_address_parser(address: u8) -> ReplyParser {
    ReplyParser::new(address, modbus::READ_HOLDING, Expect::Registers(1))
}

/// The slave address in a reply to [`read_address_request`]: `None` unless 1..=247 (the
/// only addresses a PZEM can be given).
pub fn decode_address(reply: &Reply) -> Option<u8> {
    reply
        .register(0)
        .and_then(|a| u8::try_from(a).ok())
        .filter(|a| (1..=0xF7).contains(a))
}

/// Set the slave address to `new` (1..=247). The reply is an 8-byte echo.
pub fn set_address_request(address: u8, new: u8) -> Result<[u8; 8], FrameError> {
    if !(1..=0xF7).contains(&new) {
        return Err(FrameError::InvalidRequest(format!(
            "PZEM address must be 1..=247, got {new}"
        )));
    }
    Ok(modbus::write_single_request(
        address,
        ADDRESS_REGISTER,
        u16::from(new),
    ))
}

fn u32_low_first(r: &Reply, low: usize) -> Option<u32> {
    Some(u32::from(r.register(low)?) | (u32::from(r.register(low + 1)?) << 16))
}

/// Decode a measurement reply.
pub fn decode(model: PzemModel, reply: &Reply) -> Result<MeterReading, FrameError> {
    if reply.data.len() != 2 * usize::from(model.registers()) {
        return Err(FrameError::Malformed(format!(
            "PZEM reply has {} data bytes, expected {}",
            reply.data.len(),
            2 * model.registers()
        )));
    }
    let short = || FrameError::Truncated("PZEM registers".into());
    let reg = |i| reply.register(i).map(f64::from).ok_or_else(short);
    let long = |i| u32_low_first(reply, i).map(f64::from).ok_or_else(short);
    Ok(match model {
        PzemModel::Ac => MeterReading {
            voltage_v: Some(reg(0)? / 10.0),
            current_a: Some(long(1)? / 1000.0),
            power_w: Some(long(3)? / 10.0),
            energy_wh: Some(long(5)?),
            frequency_hz: Some(reg(7)? / 10.0),
            power_factor: Some(reg(8)? / 100.0),
        },
        PzemModel::Dc => MeterReading {
            voltage_v: Some(reg(0)? / 100.0),
            current_a: Some(reg(1)? / 100.0),
            power_w: Some(long(2)? / 10.0),
            energy_wh: Some(long(4)?),
            frequency_hz: None,
            power_factor: None,
        },
    })
}

/// A PZEM as a [`PolledCodec`]: one reading is one read of every input register.
#[derive(Debug)]
pub struct PzemCodec {
    model: PzemModel,
    address: u8,
    asked: bool,
    reading: MeterReading,
}

impl PzemCodec {
    pub fn new(model: PzemModel) -> Self {
        PzemCodec {
            model,
            address: GENERAL_ADDRESS,
            asked: false,
            reading: MeterReading::default(),
        }
    }
}

impl PolledCodec for PzemCodec {
    fn begin(&mut self, address: u8, _lacks: &[u16]) {
        self.address = address;
        self.asked = false;
        self.reading = MeterReading::default();
    }

    fn next_request(&mut self) -> Option<Exchange> {
        (!std::mem::replace(&mut self.asked, true)).then(|| Exchange {
            request: read_request(self.model, self.address).to_vec(),
            reply: Box::new(read_parser(self.model, self.address)),
        })
    }

    fn answer(&mut self, reply: Result<Reply, Missed>) -> Result<Answer, Missed> {
        self.reading = decode(self.model, &reply?).map_err(Missed::Frame)?;
        Ok(Answer::Read)
    }

    fn reading(&self) -> MeterReading {
        self.reading
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::modbus::{Request, hex};
    use proptest::prelude::*;

    fn parse(model: PzemModel, addr: u8, bytes: &[u8]) -> Result<MeterReading, FrameError> {
        let mut p = read_parser(model, addr);
        p.push(bytes);
        match p.next_reply() {
            Some(r) => r.and_then(|r| decode(model, &r)),
            None => Err(p
                .finish()
                .unwrap_or(FrameError::Truncated("nothing".into()))),
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn p1_p3_requests() {
        assert_eq!(
            read_request(PzemModel::Ac, 1),
            hex("01 04 00 00 00 0A 70 0D").as_slice()
        );
        assert_eq!(
            read_request(PzemModel::Ac, 0xF8),
            hex("F8 04 00 00 00 0A 64 64").as_slice()
        );
        assert_eq!(
            read_request(PzemModel::Dc, 1),
            hex("01 04 00 00 00 08 F1 CC").as_slice()
        );
    }

    #[test]
    fn p2_real_reply() {
        let r = parse(
            PzemModel::Ac,
            1,
            &hex("01 04 14 08 D1 00 6C 00 00 00 F4 00 00 00 26 00 00 01 F4 00 64 00 00 51 34"),
        )
        .unwrap();
        assert!(close(r.voltage_v, 225.7));
        assert!(close(r.current_a, 0.108));
        assert!(close(r.power_w, 24.4));
        assert!(close(r.energy_wh, 38.0));
        assert!(close(r.frequency_hz, 50.0));
        assert!(close(r.power_factor, 1.0));
    }

    #[test]
    fn p9_datasheet_reply() {
        let r = parse(
            PzemModel::Ac,
            1,
            &hex("01 04 14 08 98 03 E8 00 00 08 98 00 00 00 00 00 00 01 F4 00 64 00 00 63 CE"),
        )
        .unwrap();
        assert!(close(r.voltage_v, 220.0) && close(r.current_a, 1.0) && close(r.power_w, 220.0));
        assert!(close(r.energy_wh, 0.0));
    }

    #[test]
    fn ps1_high_words_are_second() {
        let r = parse(
            PzemModel::Ac,
            1,
            &hex("01 04 14 09 1A 86 A0 00 01 0D 40 00 03 11 70 00 01 01 F4 00 5F FF FF 3F FD"),
        )
        .unwrap();
        assert!(close(r.voltage_v, 233.0));
        assert!(close(r.current_a, 100.0));
        assert!(close(r.power_w, 20000.0));
        assert!(close(r.energy_wh, 70000.0));
        assert!(close(r.power_factor, 0.95));
    }

    #[test]
    fn dc_reply_from_tasmota() {
        let r = parse(
            PzemModel::Dc,
            1,
            &hex("01 04 10 05 40 00 0A 00 0D 00 00 00 02 00 00 00 00 00 00 D6 29"),
        )
        .unwrap();
        assert!(close(r.voltage_v, 13.44) && close(r.current_a, 0.10) && close(r.power_w, 1.3));
        assert!(close(r.energy_wh, 2.0));
        assert_eq!(r.frequency_hz, None);
    }

    #[test]
    fn p8_address_echo_and_p10_reset() {
        assert_eq!(
            set_address_request(0xF8, 1).unwrap(),
            hex("F8 06 00 02 00 01 FD A3").as_slice()
        );
        assert_eq!(
            set_address_request(1, 5).unwrap(),
            hex("01 06 00 02 00 05 E8 09").as_slice()
        );
        assert_eq!(
            modbus::write_single_request(1, 1, 2300),
            hex("01 06 00 01 08 FC DF 8B").as_slice()
        );
        assert!(set_address_request(1, 0xF8).is_err());
        assert_eq!(reset_energy_request(1), hex("01 42 80 11").as_slice());
        assert_eq!(reset_energy_request(0xF8), hex("F8 42 C2 41").as_slice());
        assert_eq!(
            read_address_request(0xF8),
            hex("F8 03 00 02 00 01 31 A3").as_slice()
        );
        let mut p = reset_energy_parser(0xF8);
        p.push(&hex("F8 42 C2 41"));
        assert!(matches!(p.next_reply(), Some(Ok(_))));
    }

    #[test]
    fn fabricated_22_byte_terminal_log_is_rejected() {
        let e = parse(
            PzemModel::Ac,
            0xF8,
            &hex("F8 04 14 09 4B 00 00 00 8C 00 00 00 00 01 F4 00 64 00 00 00 00 E5"),
        );
        assert!(matches!(e, Err(FrameError::Truncated(_))), "{e:?}");
    }

    #[test]
    fn device_reproduces_p2_byte_exactly() {
        let mut dev = PzemDevice::new(PzemModel::Ac, 1);
        let reading = MeterReading {
            voltage_v: Some(225.7),
            current_a: Some(0.108),
            power_w: Some(24.4),
            energy_wh: Some(38.0),
            frequency_hz: Some(50.0),
            power_factor: Some(1.0),
        };
        let req = Request::Read {
            address: 1,
            function: 4,
            start: 0,
            count: 10,
        };
        assert_eq!(
            dev.respond(&req, &reading).unwrap(),
            hex("01 04 14 08 D1 00 6C 00 00 00 F4 00 00 00 26 00 00 01 F4 00 64 00 00 51 34")
        );
        // Addressed via 0xF8: reply carries 0xF8.
        let req = Request::Read {
            address: 0xF8,
            function: 4,
            start: 0,
            count: 10,
        };
        assert_eq!(dev.respond(&req, &reading).unwrap()[0], 0xF8);
        // Other address: silence. Broadcast: acted on, no reply.
        let req = Request::Read {
            address: 2,
            function: 4,
            start: 0,
            count: 10,
        };
        assert_eq!(dev.respond(&req, &reading), None);
    }

    #[test]
    fn device_energy_reset_echoes_and_zeroes_the_counter() {
        let mut dev = PzemDevice::new(PzemModel::Ac, 1);
        let reading = MeterReading {
            energy_wh: Some(500.0),
            ..MeterReading::default()
        };
        let reset = Request::Bare {
            address: 1,
            function: RESET_ENERGY,
        };
        assert_eq!(dev.respond(&reset, &reading).unwrap(), hex("01 42 80 11"));
        let later = MeterReading {
            energy_wh: Some(507.0),
            ..MeterReading::default()
        };
        assert_eq!(dev.input_registers(&later)[5], 7);
    }

    #[test]
    fn device_address_change_takes_effect_after_echo() {
        let mut dev = PzemDevice::new(PzemModel::Ac, 1);
        let req = Request::WriteSingle {
            address: 0xF8,
            register: 2,
            value: 5,
        };
        assert_eq!(
            dev.respond(&req, &MeterReading::default()).unwrap(),
            set_address_request(0xF8, 5).unwrap()
        );
        assert!(dev.accepts(5) && !dev.accepts(1));
        let read = Request::Read {
            address: 0xF8,
            function: 3,
            start: 2,
            count: 1,
        };
        assert_eq!(
            dev.respond(&read, &MeterReading::default()).unwrap(),
            modbus::registers_reply(0xF8, 3, &[0, 5])
        );
    }

    #[test]
    fn dc_device_rejects_a_ten_register_read() {
        let mut dev = PzemDevice::new(PzemModel::Dc, 1);
        let req = Request::Read {
            address: 1,
            function: 4,
            start: 0,
            count: 10,
        };
        assert_eq!(
            dev.respond(&req, &MeterReading::default()).unwrap(),
            modbus::exception_reply(1, 4, 2)
        );
    }

    proptest! {
        #[test]
        fn decode_never_panics_on_random_or_truncated_input(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse(PzemModel::Ac, 1, &bytes);
            let _ = parse(PzemModel::Dc, 0xF8, &bytes);
        }

        #[test]
        fn device_round_trip(v in 80.0f64..260.0, i in 0.0f64..100.0, p in 0.0f64..23000.0, e in 0.0f64..9.0e6) {
            let mut dev = PzemDevice::new(PzemModel::Ac, 7);
            let reading = MeterReading { voltage_v: Some(v), current_a: Some(i), power_w: Some(p), energy_wh: Some(e), frequency_hz: Some(50.0), power_factor: Some(0.9) };
            let req = Request::Read { address: 7, function: 4, start: 0, count: 10 };
            let bytes = dev.respond(&req, &reading).unwrap();
            let back = parse(PzemModel::Ac, 7, &bytes).unwrap();
            prop_assert!((back.voltage_v.unwrap() - v).abs() <= 0.05 + 1e-9);
            prop_assert!((back.current_a.unwrap() - i).abs() <= 0.0005 + 1e-9);
            prop_assert!((back.power_w.unwrap() - p).abs() <= 0.05 + 1e-9);
            prop_assert!((back.energy_wh.unwrap() - e).abs() <= 0.5 + 1e-9);
        }

        #[test]
        fn truncations_of_p2_never_yield_a_reading(n in 0usize..25) {
            let full = hex("01 04 14 08 D1 00 6C 00 00 00 F4 00 00 00 26 00 00 01 F4 00 64 00 00 51 34");
            prop_assert!(parse(PzemModel::Ac, 1, &full[..n]).is_err());
        }
    }
}
