//! The device side of Modbus-RTU, as a simulated meter plays it: a request parser that
//! skips what is not a request, and the replies it builds (registers, exceptions). The client
//! side, the CRC and the request builders it shares are the parent module's.

use super::{
    READ_HOLDING, READ_INPUT, WRITE_SINGLE, bare_request, check_crc, push_crc, read_request,
    write_single_request,
};

/// A request as a device sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Function 0x03 or 0x04.
    Read {
        address: u8,
        function: u8,
        start: u16,
        count: u16,
    },
    /// Function 0x06.
    WriteSingle {
        address: u8,
        register: u16,
        value: u16,
    },
    /// A bare `addr fc crc crc` request (PZEM 0x42 energy reset).
    Bare { address: u8, function: u8 },
}

impl Request {
    /// The slave address the request is for.
    pub fn address(&self) -> u8 {
        match *self {
            Request::Read { address, .. }
            | Request::WriteSingle { address, .. }
            | Request::Bare { address, .. } => address,
        }
    }

    /// The function code.
    pub fn function(&self) -> u8 {
        match *self {
            Request::Read { function, .. } | Request::Bare { function, .. } => function,
            Request::WriteSingle { .. } => WRITE_SINGLE,
        }
    }

    /// The request's bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        match *self {
            Request::Read {
                address,
                function,
                start,
                count,
            } => read_request(address, function, start, count).to_vec(),
            Request::WriteSingle {
                address,
                register,
                value,
            } => write_single_request(address, register, value).to_vec(),
            Request::Bare { address, function } => bare_request(address, function).to_vec(),
        }
    }
}

/// Incremental request parser for a simulated device. Functions 0x03, 0x04 and 0x06 are
/// 8-byte frames, `bare` functions (0x42 on a PZEM) 4-byte frames; anything else, and any
/// candidate whose CRC fails, is skipped a byte at a time.
#[derive(Debug)]
pub struct RequestParser {
    bare: &'static [u8],
    buf: Vec<u8>,
    discarded: u64,
}

impl RequestParser {
    /// `bare`: function codes the device accepts as 4-byte `addr fc crc crc` requests.
    pub fn new(bare: &'static [u8]) -> Self {
        RequestParser {
            bare,
            buf: Vec::new(),
            discarded: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// The next valid request, or `None` while more bytes are needed.
    pub fn next_request(&mut self) -> Option<Request> {
        loop {
            if self.buf.len() < 2 {
                return None;
            }
            let function = self.buf[1];
            let len = match function {
                READ_HOLDING | READ_INPUT | WRITE_SINGLE => 8,
                f if self.bare.contains(&f) => 4,
                _ => {
                    self.buf.drain(..1);
                    self.discarded += 1;
                    continue;
                }
            };
            if self.buf.len() < len {
                return None;
            }
            if check_crc(&self.buf[..len]).is_err() {
                self.buf.drain(..1);
                self.discarded += 1;
                continue;
            }
            let f: Vec<u8> = self.buf.drain(..len).collect();
            let word = |i: usize| u16::from_be_bytes([f[i], f[i + 1]]);
            return Some(match function {
                READ_HOLDING | READ_INPUT => Request::Read {
                    address: f[0],
                    function,
                    start: word(2),
                    count: word(4),
                },
                WRITE_SINGLE => Request::WriteSingle {
                    address: f[0],
                    register: word(2),
                    value: word(4),
                },
                _ => Request::Bare {
                    address: f[0],
                    function,
                },
            });
        }
    }
}

/// `addr fc byteCount data… crc crc`.
pub fn registers_reply(address: u8, function: u8, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(data.len() + 5);
    f.extend_from_slice(&[address, function, data.len() as u8]);
    f.extend_from_slice(data);
    push_crc(&mut f);
    f
}

/// `addr (fc|0x80) code crc crc`.
pub fn exception_reply(address: u8, function: u8, code: u8) -> Vec<u8> {
    let mut f = vec![address, function | 0x80, code];
    push_crc(&mut f);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::modbus::hex;
    use proptest::prelude::*;

    #[test]
    fn request_parser_reads_reads_writes_and_bare() {
        let mut p = RequestParser::new(&[0x42]);
        p.push(&[0x00]);
        p.push(&hex(
            "01 04 00 00 00 0A 70 0D 00 F8 42 C2 41 01 06 00 02 00 05 E8 09",
        ));
        assert_eq!(
            p.next_request(),
            Some(Request::Read {
                address: 1,
                function: 4,
                start: 0,
                count: 10
            })
        );
        assert_eq!(
            p.next_request(),
            Some(Request::Bare {
                address: 0xF8,
                function: 0x42
            })
        );
        assert_eq!(
            p.next_request(),
            Some(Request::WriteSingle {
                address: 1,
                register: 2,
                value: 5
            })
        );
        assert_eq!(p.next_request(), None);
        assert_eq!(p.discarded(), 2);
    }

    proptest! {
        #[test]
        fn request_parser_never_panics(junk in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut p = RequestParser::new(&[0x42]);
            p.push(&junk);
            while let Some(r) = p.next_request() {
                prop_assert!(check_crc(&r.encode()).is_ok());
            }
        }
    }
}
