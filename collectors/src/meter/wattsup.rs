//! Watts Up? Pro / .NET ASCII protocol (docs/meters.md, "Watts Up?";
//! `CommunicationsProtocol090824`). Packets are `#C1,C2,N,arg1,…,argN;`; no checksum. Data
//! records are `#d,-,18,…;` (older firmware: 16 fields), with `_` for fields not selected for
//! logging. Integrity checks: starts with `#`, ends with `;`, token count = 3 + N, numeric
//! fields parse; a packet cut short by the next `#` (a truncated line) is rejected.
//!
//! Record units: W 0.1 W, V 0.1 V, A 0.001 A, WH 0.1 Wh, PF percent, Hz 0.1 Hz.

use super::{FrameError, MeterReading, StreamDecoder};

/// Clear the meter's data memory (logging restarts).
pub const CLEAR_MEMORY: &[u8] = b"#R,W,0;";
/// Ask for the version packet (`#v,…`); any well-formed unknown command also gets one.
pub const VERSION_REQUEST: &[u8] = b"#V,R,0;";
/// The header reply (field names).
pub const HEADER_REPLY: &str =
    "#h,-,18,W,V,A,WH,Cost,WH/Mo,Cost/Mo,Wmax,Vmax,Amax,Wmin,Vmin,Amin,PF,DC,PC,Hz,VA;";
/// A version reply (model 1 = PRO, HW 5.2, FW 3.14), from the spec.
pub const VERSION_REPLY: &str = "#v,-,8,1,65206,5,2,3,14,200612211910,0;";

/// Longest packet accepted, bytes; a real `#d` record is under 120.
pub const MAX_PACKET: usize = 256;

/// `#L,W,3,E,1,<interval>;`: stream a `#d` record every `interval_s` seconds.
pub fn start_external_logging(interval_s: u32) -> Vec<u8> {
    format!("#L,W,3,E,1,{};", interval_s.max(1)).into_bytes()
}

/// The commands sent after opening the port: clear memory, then external logging
/// (energymon's init sequence).
pub fn init_commands(interval_s: u32) -> Vec<Vec<u8>> {
    vec![CLEAR_MEMORY.to_vec(), start_external_logging(interval_s)]
}

/// A packet split into its tokens (without `#` and `;`, CR/LF/TAB removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub tokens: Vec<String>,
}

impl Packet {
    /// Parse `#…;` text. Checks the argument count against N.
    pub fn parse(text: &str) -> Result<Packet, FrameError> {
        let body = text
            .strip_prefix('#')
            .and_then(|t| t.strip_suffix(';'))
            .ok_or_else(|| FrameError::Truncated(format!("packet not #…; : {text:?}")))?;
        let clean: String = body
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n' | '\t'))
            .collect();
        let tokens: Vec<String> = clean.split(',').map(str::to_owned).collect();
        if tokens.len() < 3 {
            return Err(FrameError::Malformed(format!(
                "packet with {} tokens",
                tokens.len()
            )));
        }
        let n: usize = tokens[2]
            .parse()
            .map_err(|_| FrameError::Malformed(format!("argument count {:?}", tokens[2])))?;
        if tokens.len() != 3 + n {
            return Err(FrameError::Truncated(format!(
                "packet says {n} arguments, has {}",
                tokens.len() - 3
            )));
        }
        Ok(Packet { tokens })
    }

    /// The command letter (`d` for a data record).
    pub fn command(&self) -> &str {
        &self.tokens[0]
    }

    /// Arguments after `C1,C2,N`.
    pub fn args(&self) -> &[String] {
        &self.tokens[3..]
    }
}

/// Decode a `#d` data record's arguments. 16 (old firmware) or 18 fields.
pub fn decode_record(packet: &Packet) -> Result<MeterReading, FrameError> {
    let args = packet.args();
    if args.len() != 18 && args.len() != 16 {
        return Err(FrameError::Malformed(format!(
            "#d record with {} fields",
            args.len()
        )));
    }
    let field = |i: usize, div: f64| -> Result<Option<f64>, FrameError> {
        match args.get(i).map(String::as_str) {
            None | Some("_") => Ok(None),
            Some(s) => s
                .trim()
                .parse::<i64>()
                .map(|v| Some(v as f64 / div))
                .map_err(|_| FrameError::Malformed(format!("field {} is {s:?}", i + 3))),
        }
    };
    // Validate every field, even those not used.
    for i in 0..args.len() {
        field(i, 1.0)?;
    }
    Ok(MeterReading {
        power_w: field(0, 10.0)?,
        voltage_v: field(1, 10.0)?,
        current_a: field(2, 1000.0)?,
        energy_wh: field(3, 10.0)?,
        power_factor: field(13, 100.0)?,
        frequency_hz: if args.len() == 18 {
            field(16, 10.0)?
        } else {
            None
        },
    })
}

/// Incremental decoder: finds `#…;` packets in the byte stream, yields readings for `#d`
/// records, skips other packets and the power-on banner, and rejects truncated packets.
#[derive(Debug, Default)]
pub struct WattsUpDecoder {
    packet: Option<Vec<u8>>,
    pending: std::collections::VecDeque<Result<MeterReading, FrameError>>,
    discarded: u64,
    /// Non-data packets seen (version, header, …), newest last; at most 8 kept.
    pub other_packets: Vec<Packet>,
}

impl WattsUpDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn finish_packet(&mut self, bytes: &[u8]) {
        let result = std::str::from_utf8(bytes)
            .map_err(|_| FrameError::Malformed("non-ASCII bytes in packet".into()))
            .and_then(Packet::parse);
        match result {
            Ok(p) if p.command() == "d" => self.pending.push_back(decode_record(&p)),
            Ok(p) => {
                if self.other_packets.len() == 8 {
                    self.other_packets.remove(0);
                }
                self.other_packets.push(p);
            }
            Err(e) => self.pending.push_back(Err(e)),
        }
    }
}

impl StreamDecoder for WattsUpDecoder {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match (&mut self.packet, b) {
                (Some(p), b'#') => {
                    let cut = String::from_utf8_lossy(p).into_owned();
                    self.discarded += p.len() as u64;
                    self.pending.push_back(Err(FrameError::Truncated(format!(
                        "packet cut short: {cut:?}"
                    ))));
                    *p = vec![b'#'];
                }
                (Some(p), b';') => {
                    p.push(b';');
                    let done = std::mem::take(p);
                    self.packet = None;
                    self.finish_packet(&done);
                }
                (Some(p), _) => {
                    p.push(b);
                    if p.len() > MAX_PACKET {
                        self.discarded += p.len() as u64;
                        self.packet = None;
                        self.pending
                            .push_back(Err(FrameError::TooLong { max: MAX_PACKET }));
                    }
                }
                (None, b'#') => self.packet = Some(vec![b'#']),
                (None, _) => self.discarded += 1,
            }
        }
    }

    fn next_reading(&mut self) -> Option<Result<MeterReading, FrameError>> {
        self.pending.pop_front()
    }

    fn discarded(&self) -> u64 {
        self.discarded
    }
}

// ---------------------------------------------------------------------------------------------
// Device side.

/// A `#d,-,18,…;` record for `reading` with every field selected, ending `\r\n` as real
/// meters send it.
pub fn encode_record(reading: &MeterReading) -> String {
    let r = |v: Option<f64>, mul: f64| (v.unwrap_or(0.0) * mul).round() as i64;
    let w = r(reading.power_w, 10.0);
    let v = r(reading.voltage_v, 10.0);
    let a = r(reading.current_a, 1000.0);
    let va =
        (reading.voltage_v.unwrap_or(0.0) * reading.current_a.unwrap_or(0.0) * 10.0).round() as i64;
    format!(
        "#d,-,18,{w},{v},{a},{},0,0,0,{w},{v},{a},{w},{v},{a},{},0,0,{},{va};\r\n",
        r(reading.energy_wh, 10.0),
        r(reading.power_factor, 100.0),
        r(reading.frequency_hz, 10.0),
    )
}

/// What a simulated meter does with one host command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceAction {
    /// Send this text back.
    Reply(String),
    /// Start streaming a record every this many seconds (external logging).
    StartLogging { interval_s: u32 },
    /// Clear memory (energy since clear restarts at zero).
    ClearMemory,
    /// Nothing to do.
    None,
}

/// The device's reaction to a host packet. Unknown well-formed commands get the version
/// packet, as the spec says.
pub fn device_action(packet: &Packet) -> DeviceAction {
    let args = packet.args();
    match (packet.command(), packet.tokens[1].as_str()) {
        ("L", "W") if args.len() == 3 && args[0] == "E" => DeviceAction::StartLogging {
            interval_s: args[2].parse().unwrap_or(1).max(1),
        },
        ("R", "W") => DeviceAction::ClearMemory,
        ("H", "R") => DeviceAction::Reply(format!("{HEADER_REPLY}\r\n")),
        ("C", "W") => DeviceAction::Reply("#n,-,1,1200;\r\n".into()),
        _ => DeviceAction::Reply(format!("{VERSION_REPLY}\r\n")),
    }
}

/// Splits a host's byte stream into packets (Control-X aborts a pending packet).
#[derive(Debug, Default)]
pub struct CommandParser {
    buf: Option<Vec<u8>>,
}

impl CommandParser {
    /// Feed bytes; returns the complete, well-formed packets.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Packet> {
        let mut out = Vec::new();
        for &b in bytes {
            match (&mut self.buf, b) {
                (_, 0x18) => self.buf = None,
                (_, b'#') => self.buf = Some(vec![b'#']),
                (Some(p), b';') => {
                    p.push(b';');
                    if let Ok(Ok(packet)) = std::str::from_utf8(p).map(Packet::parse) {
                        out.push(packet);
                    }
                    self.buf = None;
                }
                (Some(p), _) if p.len() < MAX_PACKET => p.push(b),
                (Some(_), _) => self.buf = None,
                (None, _) => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(bytes: &[u8]) -> Vec<Result<MeterReading, FrameError>> {
        let mut d = WattsUpDecoder::new();
        d.push(bytes);
        std::iter::from_fn(|| d.next_reading()).collect()
    }

    #[test]
    fn w3_idle_record() {
        let r = decode_all(b"#d,-,18,0,1203,0,79,0,34,2,0,1203,0,0,1200,0,100,0,0,600,0;\r\n");
        let r = r[0].clone().unwrap();
        assert_eq!(r.power_w, Some(0.0));
        assert_eq!(r.voltage_v, Some(120.3));
        assert_eq!(r.current_a, Some(0.0));
        assert_eq!(r.power_factor, Some(1.0));
        assert_eq!(r.frequency_hz, Some(60.0));
        assert_eq!(r.energy_wh, Some(7.9));
    }

    #[test]
    fn w4_unselected_fields_are_none() {
        let r = decode_all(b"#d,-,18,356,2300,186,_,_,_,_,_,_,_,_,_,_,_,_,_,_,_;");
        let r = r[0].clone().unwrap();
        assert_eq!(r.power_w, Some(35.6));
        assert_eq!(r.voltage_v, Some(230.0));
        assert_eq!(r.current_a, Some(0.186));
        assert_eq!(
            (r.energy_wh, r.power_factor, r.frequency_hz),
            (None, None, None)
        );
    }

    #[test]
    fn w7_w8_other_packets_are_not_readings() {
        let mut d = WattsUpDecoder::new();
        d.push(format!("WattsUp.NET $ Version: 3.23 $ 200712212301 60Hz 120V\r\n{HEADER_REPLY}\r\n{VERSION_REPLY}\r\n").as_bytes());
        assert!(d.next_reading().is_none());
        assert_eq!(d.other_packets.len(), 2);
        assert_eq!(d.other_packets[1].command(), "v");
        assert_eq!(d.other_packets[1].args()[0], "1");
    }

    #[test]
    fn w9_truncated_line_is_rejected_and_the_next_record_survives() {
        let mut bytes =
            b"#d,-,18,0,1201,0,6772,54,1613,129,0,1201,0,0,1199,0,100,0,0,60\r".to_vec();
        bytes.extend_from_slice(
            b"\n#d,-,18,0,1203,0,79,0,34,2,0,1203,0,0,1200,0,100,0,0,600,0;\r\n",
        );
        let out = decode_all(&bytes);
        assert!(matches!(out[0], Err(FrameError::Truncated(_))), "{out:?}");
        assert_eq!(out[1].clone().unwrap().voltage_v, Some(120.3));
        // On its own the truncated line never yields a reading.
        assert!(
            decode_all(b"#d,-,18,0,1201,0,6772,54,1613,129,0,1201,0,0,1199,0,100,0,0,60\r")
                .is_empty()
        );
    }

    #[test]
    fn wrong_field_count_and_garbage_are_rejected() {
        assert!(decode_all(b"#d,-,18,1,2,3;")[0].is_err());
        assert!(
            decode_all(b"#d,-,18,x,1203,0,79,0,34,2,0,1203,0,0,1200,0,100,0,0,600,0;")[0].is_err()
        );
    }

    #[test]
    fn old_16_field_records_decode() {
        let r = decode_all(b"#d,-,16,395,1200,335,0,0,0,0,0,0,0,0,0,0,97,0,0;")[0]
            .clone()
            .unwrap();
        assert_eq!(r.current_a, Some(0.335));
        assert_eq!(r.frequency_hz, None);
    }

    #[test]
    fn commands_and_device_actions() {
        assert_eq!(start_external_logging(1), b"#L,W,3,E,1,1;");
        let mut p = CommandParser::default();
        let packets = p.push(b"#R,W,0;#L,W,3,E,1,1;#V,R,0;");
        assert_eq!(device_action(&packets[0]), DeviceAction::ClearMemory);
        assert_eq!(
            device_action(&packets[1]),
            DeviceAction::StartLogging { interval_s: 1 }
        );
        assert_eq!(
            device_action(&packets[2]),
            DeviceAction::Reply(format!("{VERSION_REPLY}\r\n"))
        );
    }

    #[test]
    fn encoded_record_round_trips() {
        let r = MeterReading {
            power_w: Some(35.6),
            voltage_v: Some(230.0),
            current_a: Some(0.186),
            energy_wh: Some(12.3),
            power_factor: Some(0.83),
            frequency_hz: Some(50.0),
        };
        let back = decode_all(encode_record(&r).as_bytes())[0].clone().unwrap();
        assert_eq!(back, r);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode_all(&bytes);
            let _ = CommandParser::default().push(&bytes);
        }

        #[test]
        fn every_truncation_is_rejected(n in 0usize..59) {
            let rec = b"#d,-,18,0,1203,0,79,0,34,2,0,1203,0,0,1200,0,100,0,0,600,0;";
            let mut bytes = rec[..n].to_vec();
            bytes.extend_from_slice(b"\r\n");
            prop_assert!(decode_all(&bytes).iter().all(Result::is_err));
        }
    }
}
