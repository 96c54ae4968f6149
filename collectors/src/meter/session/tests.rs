//! Sessions over scripted byte streams: polling, resynchronisation, timeouts, filters.

use std::io;
use std::time::Duration;

use super::*;
use crate::meter::modbus::{self, hex};
use crate::meter::sdm::{self, Quantity, SdmModel};

/// A scripted line: replies are queued per request written; reads return what is queued,
/// then time out.
struct Script {
    replies: std::collections::VecDeque<Vec<u8>>,
    pending: Vec<u8>,
    written: Vec<u8>,
}

impl Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"));
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

impl Write for Script {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        if let Some(r) = self.replies.pop_front() {
            self.pending.extend(r);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn script(replies: Vec<Vec<u8>>) -> Script {
    Script {
        replies: replies.into(),
        pending: Vec::new(),
        written: Vec::new(),
    }
}

fn fast(protocol: Protocol) -> SessionOptions {
    SessionOptions {
        timeout: Duration::from_millis(20),
        ..SessionOptions::for_protocol(protocol)
    }
}

const P2: &str = "01 04 14 08 D1 00 6C 00 00 00 F4 00 00 00 26 00 00 01 F4 00 64 00 00 51 34";

#[test]
fn pzem_poll_with_stray_zeros_counts_discarded_bytes() {
    let mut reply = vec![0];
    reply.extend(hex(P2));
    reply.push(0);
    let mut s = MeterSession::new(
        script(vec![reply]),
        Protocol::Pzem004t,
        &[1],
        fast(Protocol::Pzem004t),
    );
    let r = s.poll().pop().unwrap().unwrap();
    assert_eq!(r.reading.power_w, Some(24.4));
    assert_eq!(r.records, 1);
    let c = s.counters()[0].1;
    assert_eq!((c.good_frames, c.bytes_discarded), (1, 1));
    assert_eq!(s.io_mut().written, hex("01 04 00 00 00 0A 70 0D"));
}

#[test]
fn a_request_sent_early_is_not_sent_again() {
    let mut s = MeterSession::new(
        script(vec![hex(P2), hex(P2)]),
        Protocol::Pzem004t,
        &[1],
        fast(Protocol::Pzem004t),
    );
    assert!(s.begin_poll());
    let r = s.poll().pop().unwrap().unwrap();
    assert_eq!(r.reading.power_w, Some(24.4));
    assert_eq!(s.io_mut().written, hex("01 04 00 00 00 0A 70 0D"));
    // Without an early request, poll writes its own.
    assert!(s.poll().pop().unwrap().is_ok());
    assert_eq!(s.io_mut().written.len(), 16);
    // Streaming meters have nothing to send.
    let mut line = MeterSession::new(script(vec![]), Protocol::Line, &[], fast(Protocol::Line));
    assert!(!line.begin_poll());
    assert!(line.io_mut().written.is_empty());
}

#[test]
fn sdm_early_request_is_the_first_register_poll_reads() {
    let mut s = MeterSession::new(
        script(vec![]),
        Protocol::Sdm120,
        &[1],
        fast(Protocol::Sdm120),
    );
    assert!(s.begin_poll());
    let early = s.io_mut().written.clone();
    let _ = s.poll();
    // The poll timed out on voltage (no replies scripted) without writing it twice.
    assert_eq!(s.io_mut().written, early);
}

#[test]
fn corrupt_reply_is_counted_and_missing_reply_times_out() {
    let mut bad = hex(P2);
    bad[5] ^= 0x10;
    let mut s = MeterSession::new(
        script(vec![bad, vec![]]),
        Protocol::Pzem004t,
        &[1],
        fast(Protocol::Pzem004t),
    );
    assert!(matches!(
        s.poll()[0],
        Err(SessionError::Frame {
            source: FrameError::Crc { .. },
            ..
        })
    ));
    assert!(matches!(
        s.poll()[0],
        Err(SessionError::Timeout { address: 1, .. })
    ));
    let c = s.counters()[0].1;
    assert_eq!((c.crc_errors, c.timeouts, c.good_frames), (1, 1, 0));
}

#[test]
fn implausible_readings_are_dropped() {
    // P-S1 has 20 kW: over the 16 kW limit.
    let ps1 = hex("01 04 14 09 1A 86 A0 00 01 0D 40 00 03 11 70 00 01 01 F4 00 5F FF FF 3F FD");
    let mut s = MeterSession::new(
        script(vec![ps1]),
        Protocol::Pzem004t,
        &[1],
        fast(Protocol::Pzem004t),
    );
    assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
    assert_eq!(s.counters()[0].1.implausible, 1);
}

#[test]
fn cse_c6_nonsense_voltage_is_rejected_by_the_filter() {
    let c6 = hex("55 5A 02 DB 40 07 17 1D 00 3D 18 03 8E CD 4F 0A 60 2B EF EA 61 01 02 2C");
    let mut io = script(vec![]);
    io.pending = c6;
    let mut s = MeterSession::new(io, Protocol::Cse7766, &[], fast(Protocol::Cse7766));
    assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
    assert_eq!(s.counters()[0].1.implausible, 1);
}

/// A CRC-valid PZEM-004T reply from address 1 at 230 V, 50 W with these raw frequency
/// (0.1 Hz) and power factor (0.01) registers.
fn pzem_reply(freq_raw: u16, pf_raw: u16) -> Vec<u8> {
    let regs: [u16; 10] = [2300, 217, 0, 500, 0, 38, 0, freq_raw, pf_raw, 0];
    let data: Vec<u8> = regs.iter().flat_map(|r| r.to_be_bytes()).collect();
    modbus::registers_reply(1, 4, &data)
}

/// Regression: a power factor of 2.55 and 6553.5 Hz (CRC-valid PZEM frames) were stored.
#[test]
fn impossible_power_factor_and_frequency_are_rejected_by_reason() {
    let replies = vec![
        pzem_reply(500, 255),
        pzem_reply(65535, 90),
        pzem_reply(500, 90),
    ];
    let mut s = MeterSession::new(
        script(replies),
        Protocol::Pzem004t,
        &[1],
        fast(Protocol::Pzem004t),
    );
    assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
    assert!(matches!(s.poll()[0], Err(SessionError::Implausible { .. })));
    let ok = s.poll().pop().unwrap().unwrap();
    assert_eq!(ok.reading.power_factor, Some(0.9));
    let r = &s.rejections()[0].1;
    assert_eq!(r.get(crate::plausibility::Reason::PowerFactor), 1);
    assert_eq!(r.get(crate::plausibility::Reason::Frequency), 1);
    assert_eq!(s.counters()[0].1.implausible, 2);
}

/// Every record between two polls counts: the poll returns their mean.
#[test]
fn a_streaming_poll_is_the_mean_of_every_record_since_the_last() {
    let mut io = script(vec![]);
    io.pending = b"10,230,0.1\n20,230,0.1\n60,230,0.1\n".to_vec();
    let mut s = MeterSession::new(io, Protocol::Line, &[], fast(Protocol::Line));
    let r = s.poll().pop().unwrap().unwrap();
    assert_eq!(r.records, 3);
    assert_eq!(r.reading.power_w, Some(30.0));
    assert_eq!(s.counters()[0].1.good_frames, 3);
}

#[test]
fn sdm_missing_registers_are_none_and_skipped_next_time() {
    let dev = sdm::SdmDevice::new(SdmModel::Sdm120, 1);
    let truth = MeterReading {
        voltage_v: Some(230.0),
        current_a: Some(0.5),
        power_w: Some(100.0),
        power_factor: Some(0.87),
        frequency_hz: Some(50.0),
        energy_wh: Some(1500.0),
    };
    let mut replies = Vec::new();
    let mut parser = modbus::RequestParser::new(&[]);
    for q in Quantity::POLLED.iter().chain(Quantity::POLLED.iter()) {
        parser.push(&sdm::read_request(1, sdm::register(SdmModel::Sdm120, *q)));
        let req = parser.next_request().unwrap();
        replies.push(dev.respond(&req, &truth).unwrap());
    }
    // Second poll skips 0x0048 and asks for 0x0156 directly: drop the reply for 0x0048.
    replies.remove(Quantity::POLLED.len() + 5);
    let mut s = MeterSession::new(
        script(replies),
        Protocol::Sdm120,
        &[1],
        fast(Protocol::Sdm120),
    );
    for _ in 0..2 {
        let r = s.poll().pop().unwrap().unwrap().reading;
        assert_eq!(r.power_w, Some(100.0));
        assert!((r.power_factor.unwrap() - 0.87).abs() < 1e-6);
        assert_eq!(r.energy_wh, Some(1500.0));
    }
    assert_eq!(s.counters()[0].1.crc_errors, 0);
}

/// A polled codec of no real protocol: a reading asks registers 1, 2 and 3 with the request
/// `[address, register]`; each reply is one byte, watts added to the reading, and 0xEE means
/// "no such register". A missing reply to register 3 is skipped.
#[derive(Default)]
struct Toy {
    address: u8,
    lacks: Vec<u16>,
    next: u16,
    asked: u16,
    reading: MeterReading,
}

/// Frames [`Toy`]'s one-byte replies.
struct OneByte(Option<u8>);

impl crate::meter::ReplyFramer for OneByte {
    fn push(&mut self, bytes: &[u8]) {
        self.0 = self.0.or(bytes.first().copied());
    }
    fn next_reply(&mut self) -> Option<Result<modbus::Reply, FrameError>> {
        self.0.map(|b| match b {
            0xEE => Err(FrameError::Exception {
                address: 1,
                function: 0,
                code: modbus::ILLEGAL_DATA_ADDRESS,
            }),
            b => Ok(modbus::Reply {
                address: 1,
                function: 0,
                data: vec![b],
            }),
        })
    }
    fn discarded(&self) -> u64 {
        0
    }
    fn finish(&self) -> Option<FrameError> {
        None
    }
}

impl PolledCodec for Toy {
    fn begin(&mut self, address: u8, lacks: &[u16]) {
        *self = Toy {
            address,
            lacks: lacks.to_vec(),
            next: 1,
            ..Toy::default()
        };
    }
    fn next_request(&mut self) -> Option<crate::meter::Exchange> {
        let register = (self.next..=3).find(|r| !self.lacks.contains(r))?;
        self.next = register + 1;
        self.asked = register;
        Some(crate::meter::Exchange {
            request: vec![self.address, register as u8],
            reply: Box::new(OneByte(None)),
        })
    }
    fn answer(&mut self, reply: Result<modbus::Reply, Missed>) -> Result<Answer, Missed> {
        match reply {
            Ok(r) => {
                *self.reading.power_w.get_or_insert(0.0) += f64::from(r.data[0]);
                Ok(Answer::Read)
            }
            Err(Missed::Frame(FrameError::Exception { .. })) => Ok(Answer::Lacks(self.asked)),
            Err(Missed::Timeout) if self.asked == 3 => Ok(Answer::Skipped),
            Err(e) => Err(e),
        }
    }
    fn reading(&self) -> MeterReading {
        self.reading
    }
}

/// The session knows no protocol: it drives any polled codec, remembers the registers a
/// meter lacks and counts a skipped reply as a timeout.
#[test]
fn the_session_drives_a_polled_codec_of_no_real_protocol() {
    let replies = vec![vec![10], vec![0xEE], vec![], vec![20], vec![5]];
    let mut s = MeterSession::with_codec(
        script(replies),
        Protocol::Pzem004t,
        SessionState::new(&[1]),
        fast(Protocol::Pzem004t),
        Codec::Polled(Box::new(Toy::default())),
    );
    let first = s.poll().pop().unwrap().unwrap();
    assert_eq!(first.reading.power_w, Some(10.0));
    let second = s.poll().pop().unwrap().unwrap();
    assert_eq!(second.reading.power_w, Some(25.0));
    // Register 2 is asked once only.
    assert_eq!(s.io_mut().written, [1, 1, 1, 2, 1, 3, 1, 1, 1, 3]);
    let c = s.counters()[0].1;
    assert_eq!((c.good_frames, c.timeouts, c.crc_errors), (2, 1, 0));
}

#[test]
fn gone_errors_are_recognised() {
    assert!(is_gone(&io::Error::from_raw_os_error(5)));
    assert!(is_gone(&io::Error::from_raw_os_error(6)));
    assert!(is_gone(&io::Error::new(io::ErrorKind::BrokenPipe, "x")));
    assert!(is_gone(&io::Error::other("I/O error")));
    assert!(!is_gone(&io::Error::new(io::ErrorKind::TimedOut, "x")));
}
