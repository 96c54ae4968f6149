//! The device side of a PZEM: a simulated meter that answers reads of its input and holding
//! registers, an address change and an energy reset as the real one does.

use super::{ADDRESS_REGISTER, GENERAL_ADDRESS, PzemModel, RESET_ENERGY};
use crate::meter::MeterReading;
use crate::meter::modbus::{self, Request};

/// A simulated PZEM's state: its address, alarm threshold and energy counter offset.
#[derive(Debug, Clone)]
pub struct PzemDevice {
    pub model: PzemModel,
    /// Slave address, 1..=247.
    pub address: u8,
    /// Power alarm threshold, W (AC) or high-voltage alarm, 0.01 V (DC).
    pub alarm_threshold: u16,
    /// Energy subtracted from the model's total since the last 0x42 reset, Wh.
    pub energy_offset_wh: f64,
}

impl PzemDevice {
    pub fn new(model: PzemModel, address: u8) -> Self {
        PzemDevice {
            model,
            address,
            alarm_threshold: match model {
                PzemModel::Ac => 23_000,
                PzemModel::Dc => 30_000,
            },
            energy_offset_wh: 0.0,
        }
    }

    /// True if this device acts on `address` (its own, the general address or broadcast).
    pub fn accepts(&self, address: u8) -> bool {
        address == self.address || address == GENERAL_ADDRESS || address == 0
    }

    /// The input registers for `reading`, as the device would hold them.
    pub fn input_registers(&self, reading: &MeterReading) -> Vec<u16> {
        let raw = |v: Option<f64>, scale: f64, max: f64| {
            (v.unwrap_or(0.0) * scale).round().clamp(0.0, max)
        };
        let energy = (reading.energy_wh.unwrap_or(0.0) - self.energy_offset_wh).max(0.0);
        let split = |v: f64| [(v as u32 & 0xFFFF) as u16, (v as u32 >> 16) as u16];
        match self.model {
            PzemModel::Ac => {
                let p = raw(reading.power_w, 10.0, f64::from(u32::MAX));
                let alarm = if p / 10.0 >= f64::from(self.alarm_threshold) {
                    0xFFFF
                } else {
                    0
                };
                let [il, ih] = split(raw(reading.current_a, 1000.0, f64::from(u32::MAX)));
                let [pl, ph] = split(p);
                let [el, eh] = split(energy.round().min(f64::from(u32::MAX)));
                vec![
                    raw(reading.voltage_v, 10.0, 65535.0) as u16,
                    il,
                    ih,
                    pl,
                    ph,
                    el,
                    eh,
                    raw(reading.frequency_hz, 10.0, 65535.0) as u16,
                    raw(reading.power_factor, 100.0, 100.0) as u16,
                    alarm,
                ]
            }
            PzemModel::Dc => {
                let v = raw(reading.voltage_v, 100.0, 65535.0);
                let [pl, ph] = split(raw(reading.power_w, 10.0, f64::from(u32::MAX)));
                let [el, eh] = split(energy.round().min(f64::from(u32::MAX)));
                let high = if v >= f64::from(self.alarm_threshold) {
                    0xFFFF
                } else {
                    0
                };
                vec![
                    v as u16,
                    raw(reading.current_a, 100.0, 65535.0) as u16,
                    pl,
                    ph,
                    el,
                    eh,
                    high,
                    0,
                ]
            }
        }
    }

    fn holding(&self, register: u16) -> Option<u16> {
        match (self.model, register) {
            (PzemModel::Ac, 1) | (PzemModel::Dc, 0) => Some(self.alarm_threshold),
            (PzemModel::Dc, 1) => Some(700),
            (_, ADDRESS_REGISTER) => Some(u16::from(self.address)),
            (PzemModel::Dc, 3) => Some(0),
            _ => None,
        }
    }

    /// Act on a request and return the reply bytes the device sends, if any. `reading` is
    /// what the device measures now (its energy is the lifetime total before resets).
    /// Quirks kept: replies to 0xF8 carry 0xF8; broadcasts (address 0) get no reply; 0x06 and
    /// 0x42 replies are echoes; the address change takes effect after the echo.
    pub fn respond(&mut self, request: &Request, reading: &MeterReading) -> Option<Vec<u8>> {
        let to = request.address();
        if !self.accepts(to) {
            return None;
        }
        let reply = match *request {
            Request::Read {
                function: modbus::READ_INPUT,
                start,
                count,
                ..
            } => {
                let regs = self.input_registers(reading);
                let end = usize::from(start) + usize::from(count);
                if count == 0 || end > regs.len() {
                    modbus::exception_reply(to, modbus::READ_INPUT, modbus::ILLEGAL_DATA_ADDRESS)
                } else {
                    let data: Vec<u8> = regs[usize::from(start)..end]
                        .iter()
                        .flat_map(|r| r.to_be_bytes())
                        .collect();
                    modbus::registers_reply(to, modbus::READ_INPUT, &data)
                }
            }
            Request::Read {
                function: modbus::READ_HOLDING,
                start,
                count,
                ..
            } => {
                let regs: Option<Vec<u16>> = (start..start.saturating_add(count))
                    .map(|r| self.holding(r))
                    .collect();
                match regs {
                    Some(regs) if count > 0 => {
                        let data: Vec<u8> = regs.iter().flat_map(|r| r.to_be_bytes()).collect();
                        modbus::registers_reply(to, modbus::READ_HOLDING, &data)
                    }
                    _ => modbus::exception_reply(
                        to,
                        modbus::READ_HOLDING,
                        modbus::ILLEGAL_DATA_ADDRESS,
                    ),
                }
            }
            Request::WriteSingle {
                register, value, ..
            } => {
                let ok = match (self.model, register) {
                    (_, ADDRESS_REGISTER) if (1..=0xF7).contains(&value) => {
                        self.address = value as u8;
                        true
                    }
                    (PzemModel::Ac, 1) | (PzemModel::Dc, 0) => {
                        self.alarm_threshold = value;
                        true
                    }
                    _ => false,
                };
                if ok {
                    request.encode()
                } else {
                    modbus::exception_reply(to, modbus::WRITE_SINGLE, modbus::ILLEGAL_DATA_VALUE)
                }
            }
            Request::Bare {
                function: RESET_ENERGY,
                ..
            } => {
                self.energy_offset_wh = reading.energy_wh.unwrap_or(0.0);
                request.encode()
            }
            Request::Read { function, .. } | Request::Bare { function, .. } => {
                modbus::exception_reply(to, function, modbus::ILLEGAL_FUNCTION)
            }
        };
        (to != 0).then_some(reply)
    }
}
