//! Modbus-RTU framing and CRC-16/Modbus (docs/meters.md, "Modbus RTU"): the client side
//! (requests and an incremental reply parser). The device side (a request parser and reply
//! builders, for the simulated meters) is `device`.
//!
//! CRC-16/Modbus: poly 0x8005 reflected (0xA001), init 0xFFFF, sent low byte first. Multi-byte
//! fields inside the PDU are big-endian. Register addresses are 0-based PDU addresses.

mod device;

use super::FrameError;

pub use device::{Request, RequestParser, exception_reply, registers_reply};

/// Read holding registers.
pub const READ_HOLDING: u8 = 0x03;
/// Read input registers.
pub const READ_INPUT: u8 = 0x04;
/// Write single holding register (reply: echo).
pub const WRITE_SINGLE: u8 = 0x06;

/// Exception code: illegal function.
pub const ILLEGAL_FUNCTION: u8 = 0x01;
/// Exception code: illegal data address (a register the device lacks).
pub const ILLEGAL_DATA_ADDRESS: u8 = 0x02;
/// Exception code: illegal data value.
pub const ILLEGAL_DATA_VALUE: u8 = 0x03;

/// CRC-16/Modbus of `data`.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &b in data {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xA001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Append the CRC of `frame` to it, low byte first.
pub fn push_crc(frame: &mut Vec<u8>) {
    let crc = crc16(frame);
    frame.extend_from_slice(&crc.to_le_bytes());
}

/// Check the trailing CRC of a whole frame (at least 3 bytes).
pub fn check_crc(frame: &[u8]) -> Result<(), FrameError> {
    if frame.len() < 3 {
        return Err(FrameError::Truncated(format!("{} bytes", frame.len())));
    }
    let (body, tail) = frame.split_at(frame.len() - 2);
    let got = u16::from_le_bytes([tail[0], tail[1]]);
    let computed = crc16(body);
    if got == computed {
        Ok(())
    } else {
        Err(FrameError::Crc { got, computed })
    }
}

/// `addr fc regHi regLo cntHi cntLo crcLo crcHi` (function 0x03 or 0x04).
pub fn read_request(address: u8, function: u8, start: u16, count: u16) -> [u8; 8] {
    with_crc6([
        address,
        function,
        (start >> 8) as u8,
        start as u8,
        (count >> 8) as u8,
        count as u8,
    ])
}

/// `addr 06 regHi regLo valHi valLo crcLo crcHi`.
pub fn write_single_request(address: u8, register: u16, value: u16) -> [u8; 8] {
    with_crc6([
        address,
        WRITE_SINGLE,
        (register >> 8) as u8,
        register as u8,
        (value >> 8) as u8,
        value as u8,
    ])
}

/// A bare `addr fc crcLo crcHi` request (e.g. the PZEM energy reset, function 0x42).
pub fn bare_request(address: u8, function: u8) -> [u8; 4] {
    let crc = crc16(&[address, function]).to_le_bytes();
    [address, function, crc[0], crc[1]]
}

fn with_crc6(b: [u8; 6]) -> [u8; 8] {
    let crc = crc16(&b).to_le_bytes();
    [b[0], b[1], b[2], b[3], b[4], b[5], crc[0], crc[1]]
}

/// The shape of the reply a client expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `addr fc byteCount data… crc crc` with `registers` 16-bit registers.
    Registers(u16),
    /// An exact echo of a request of this many bytes (0x06 write: 8; 0x42 reset: 4).
    Echo(usize),
}

/// A reply whose CRC checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub address: u8,
    pub function: u8,
    /// Register bytes for [`Expect::Registers`] (without the byte count), or the bytes
    /// between function code and CRC for [`Expect::Echo`].
    pub data: Vec<u8>,
}

impl Reply {
    /// Register `i` (0-based within the reply) as big-endian u16.
    pub fn register(&self, i: usize) -> Option<u16> {
        let b = self.data.get(2 * i..2 * i + 2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }
}

/// Incremental parser for one expected reply. Skips junk (such as the stray 0x00 some RS-485
/// adapters put around every reply) by resynchronising on the expected address and function
/// code, and lets the CRC decide between candidates.
#[derive(Debug)]
pub struct ReplyParser {
    address: u8,
    function: u8,
    expect: Expect,
    buf: Vec<u8>,
    discarded: u64,
    crc_failure: Option<FrameError>,
}

/// Cap on buffered bytes: a reply is at most 255 bytes; anything beyond is junk.
const MAX_BUFFER: usize = 512;

impl ReplyParser {
    pub fn new(address: u8, function: u8, expect: Expect) -> Self {
        ReplyParser {
            address,
            function,
            expect,
            buf: Vec::new(),
            discarded: 0,
            crc_failure: None,
        }
    }

    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > MAX_BUFFER {
            let drop = self.buf.len() - MAX_BUFFER;
            self.buf.drain(..drop);
            self.discarded += drop as u64;
        }
    }

    /// Bytes skipped so far while looking for the reply.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    fn normal_len(&self) -> usize {
        match self.expect {
            Expect::Registers(n) => 5 + 2 * usize::from(n),
            Expect::Echo(n) => n,
        }
    }

    /// The reply, a Modbus exception, or `None` while more bytes are needed. A candidate
    /// that fails its CRC is skipped (a later one may be the real reply); if no valid reply
    /// ever arrives, [`ReplyParser::finish`] reports the CRC failure.
    pub fn next_reply(&mut self) -> Option<Result<Reply, FrameError>> {
        loop {
            let start = self.buf.windows(2).position(|w| {
                w[0] == self.address && (w[1] == self.function || w[1] == self.function | 0x80)
            });
            let Some(start) = start else {
                // Keep a trailing address byte: it may start the reply.
                let keep = usize::from(self.buf.last() == Some(&self.address));
                let drop = self.buf.len() - keep;
                self.buf.drain(..drop);
                self.discarded += drop as u64;
                return None;
            };
            self.buf.drain(..start);
            self.discarded += start as u64;

            let exception = self.buf[1] == self.function | 0x80 && self.function & 0x80 == 0;
            let len = if exception { 5 } else { self.normal_len() };
            if let (false, Expect::Registers(n)) = (exception, self.expect)
                && let Some(&count) = self.buf.get(2)
                && usize::from(count) != 2 * usize::from(n)
            {
                self.skip_one();
                continue;
            }
            if self.buf.len() < len {
                return None;
            }
            match check_crc(&self.buf[..len]) {
                Ok(()) => {
                    let frame: Vec<u8> = self.buf.drain(..len).collect();
                    self.crc_failure = None;
                    if exception {
                        return Some(Err(FrameError::Exception {
                            address: frame[0],
                            function: self.function,
                            code: frame[2],
                        }));
                    }
                    let data = match self.expect {
                        Expect::Registers(_) => frame[3..len - 2].to_vec(),
                        Expect::Echo(_) => frame[2..len - 2].to_vec(),
                    };
                    return Some(Ok(Reply {
                        address: frame[0],
                        function: frame[1],
                        data,
                    }));
                }
                Err(e) => {
                    self.crc_failure = Some(e);
                    self.skip_one();
                }
            }
        }
    }

    fn skip_one(&mut self) {
        self.buf.drain(..1);
        self.discarded += 1;
    }

    /// Called when the reply timed out: the CRC failure seen (corruption), a truncated
    /// candidate, or `None` when nothing resembling the reply arrived at all.
    pub fn finish(&self) -> Option<FrameError> {
        if let Some(e) = &self.crc_failure {
            return Some(e.clone());
        }
        if self.buf.len() >= 2 {
            return Some(FrameError::Truncated(format!(
                "{} of {} bytes",
                self.buf.len(),
                self.normal_len()
            )));
        }
        None
    }
}

impl super::ReplyFramer for ReplyParser {
    fn push(&mut self, bytes: &[u8]) {
        ReplyParser::push(self, bytes);
    }

    fn next_reply(&mut self) -> Option<Result<Reply, FrameError>> {
        ReplyParser::next_reply(self)
    }

    fn discarded(&self) -> u64 {
        ReplyParser::discarded(self)
    }

    fn finish(&self) -> Option<FrameError> {
        ReplyParser::finish(self)
    }
}

#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc_check_value() {
        assert_eq!(crc16(b"123456789"), 0x4B37);
    }

    #[test]
    fn crc_is_sent_low_byte_first() {
        // docs/meters.md, "Modbus RTU": 01 04 00 00 00 0A 70 0D -> CRC value 0x0D70.
        assert_eq!(
            read_request(1, READ_INPUT, 0, 10),
            hex("01 04 00 00 00 0A 70 0D").as_slice()
        );
        assert_eq!(crc16(&hex("01 04 00 00 00 0A")), 0x0D70);
    }

    #[test]
    fn high_byte_first_crc_is_rejected() {
        // The bug in a public sketch: CRC high byte first.
        let mut p = ReplyParser::new(1, READ_INPUT, Expect::Registers(2));
        p.push(&hex("01 04 04 43 66 33 34 38 1B"));
        assert!(p.next_reply().is_none());
        assert!(matches!(p.finish(), Some(FrameError::Crc { .. })));
    }

    #[test]
    fn exception_reply_is_reported() {
        let mut p = ReplyParser::new(1, READ_INPUT, Expect::Registers(10));
        p.push(&hex("01 84 02 C2 C1")); // P-S2
        assert_eq!(
            p.next_reply(),
            Some(Err(FrameError::Exception {
                address: 1,
                function: 4,
                code: 2
            }))
        );
        assert_eq!(exception_reply(1, 4, 2), hex("01 84 02 C2 C1"));
    }

    #[test]
    fn stray_zero_bytes_around_a_reply_are_skipped() {
        let mut p = ReplyParser::new(1, READ_INPUT, Expect::Registers(2));
        p.push(&[0x00]);
        assert!(p.next_reply().is_none());
        p.push(&hex("01 04 04 43 66"));
        assert!(p.next_reply().is_none());
        p.push(&hex("33 34 1B 38 00"));
        let r = p.next_reply().unwrap().unwrap();
        assert_eq!(r.data, hex("43 66 33 34"));
        assert_eq!(p.discarded(), 1);
    }

    #[test]
    fn false_sync_in_junk_is_resolved_by_the_crc() {
        // Junk that looks like "01 04" then the real reply.
        let mut p = ReplyParser::new(1, READ_INPUT, Expect::Registers(2));
        let mut bytes = hex("01 04 04 00 00");
        bytes.extend(hex("01 04 04 43 66 33 34 1B 38"));
        p.push(&bytes);
        let r = p.next_reply().unwrap().unwrap();
        assert_eq!(r.data, hex("43 66 33 34"));
    }

    #[test]
    fn reply_for_another_address_is_ignored() {
        let mut p = ReplyParser::new(2, READ_INPUT, Expect::Registers(2));
        p.push(&hex("01 04 04 43 66 33 34 1B 38"));
        assert!(p.next_reply().is_none());
        assert_eq!(p.finish(), None);
    }

    proptest! {
        #[test]
        fn reply_parser_never_panics_and_only_yields_crc_valid_frames(
            junk in proptest::collection::vec(any::<u8>(), 0..300),
            split in 0usize..300,
        ) {
            let mut p = ReplyParser::new(1, READ_INPUT, Expect::Registers(2));
            let split = split.min(junk.len());
            p.push(&junk[..split]);
            let mut out = Vec::new();
            while let Some(r) = p.next_reply() { out.push(r); }
            p.push(&junk[split..]);
            while let Some(r) = p.next_reply() { out.push(r); }
            let _ = p.finish();
            for r in out.into_iter().flatten() {
                let mut frame = vec![r.address, r.function, r.data.len() as u8];
                frame.extend_from_slice(&r.data);
                prop_assert_eq!(r.data.len(), 4);
                let crc = crc16(&frame);
                prop_assert!(junk.windows(2).any(|w| w == crc.to_le_bytes()));
            }
        }

        #[test]
        fn single_bit_flip_never_yields_a_reply(byte in 0usize..9, bit in 0u8..8) {
            let mut frame = hex("01 04 04 43 66 33 34 1B 38");
            frame[byte] ^= 1 << bit;
            let mut p = ReplyParser::new(1, READ_INPUT, Expect::Registers(2));
            p.push(&frame);
            let got = p.next_reply();
            prop_assert!(!matches!(got, Some(Ok(_))));
        }
    }
}
