//! The byte transport under a meter session: one read bounded by the port's own read
//! timeout, and a request/reply exchange bounded by the session's deadline. Both protocols
//! families (polled Modbus, streaming records) read through [`read_some`], so a quiet line,
//! an end of file and a vanished port mean the same everywhere.
//!
//! Times in ms; the deadline is on the monotonic clock.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use super::modbus::Reply;
use super::{FrameError, ReplyFramer};

/// Why an exchange failed, before it is counted against an address.
#[derive(Debug)]
pub(crate) enum TxError {
    Frame(FrameError),
    Timeout,
    Io(io::Error),
}

impl From<super::Missed> for TxError {
    fn from(missed: super::Missed) -> Self {
        match missed {
            super::Missed::Timeout => TxError::Timeout,
            super::Missed::Frame(e) => TxError::Frame(e),
        }
    }
}

/// True if `e` means the port itself has gone (USB unplugged, pty closed): EOF, EIO, ENXIO,
/// ENOENT, ENODEV, a hang-up.
pub fn is_gone(e: &io::Error) -> bool {
    use io::ErrorKind as K;
    if matches!(e.raw_os_error(), Some(2 | 5 | 6 | 19)) {
        return true;
    }
    if matches!(
        e.kind(),
        K::BrokenPipe
            | K::NotFound
            | K::UnexpectedEof
            | K::NotConnected
            | K::ConnectionAborted
            | K::ConnectionReset
    ) {
        return true;
    }
    // serialport reports EIO and ENXIO as `Other` with the errno's description.
    let text = e.to_string();
    text.contains("I/O error")
        || text.contains("Input/output error")
        || text.contains("No such device")
}

/// One read: the bytes read, `0` when the line stayed quiet for the port's read timeout. An
/// end of file is an error ([`io::ErrorKind::UnexpectedEof`]): a serial port never ends, so
/// its other side has gone.
pub fn read_some<R: Read + ?Sized>(io: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    match io.read(buf) {
        Ok(0) => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "end of file on port",
        )),
        Ok(n) => Ok(n),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// Writes `request` (unless it is `sent_early`, already written), then reads until `parser`
/// yields a reply or `timeout` passes.
pub(crate) fn transact<IO: Read + Write + ?Sized, F: ReplyFramer + ?Sized>(
    io: &mut IO,
    request: &[u8],
    sent_early: Option<&[u8]>,
    parser: &mut F,
    timeout: Duration,
) -> Result<Reply, TxError> {
    if sent_early != Some(request) {
        io.write_all(request)
            .and_then(|()| io.flush())
            .map_err(TxError::Io)?;
    }
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 256];
    loop {
        let n = read_some(io, &mut buf).map_err(TxError::Io)?;
        if n > 0 {
            parser.push(&buf[..n]);
            if let Some(r) = parser.next_reply() {
                return r.map_err(TxError::Frame);
            }
        }
        if Instant::now() >= deadline {
            return Err(parser.finish().map_or(TxError::Timeout, TxError::Frame));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays reads; then reports a quiet line.
    struct Reads(Vec<io::Result<Vec<u8>>>, Vec<u8>);

    impl Read for Reads {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let bytes = self.0.remove(0)?;
            buf[..bytes.len()].copy_from_slice(&bytes);
            Ok(bytes.len())
        }
    }

    impl Write for Reads {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.1.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_quiet_line_reads_nothing_and_an_end_of_file_is_gone() {
        let mut r = Reads(
            vec![
                Err(io::ErrorKind::WouldBlock.into()),
                Err(io::ErrorKind::Interrupted.into()),
                Ok(vec![1, 2]),
                Ok(Vec::new()),
            ],
            Vec::new(),
        );
        let mut buf = [0u8; 8];
        assert_eq!(read_some(&mut r, &mut buf).unwrap(), 0);
        assert_eq!(read_some(&mut r, &mut buf).unwrap(), 0);
        assert_eq!(read_some(&mut r, &mut buf).unwrap(), 2);
        let eof = read_some(&mut r, &mut buf).unwrap_err();
        assert!(is_gone(&eof), "{eof}");
        assert_eq!(read_some(&mut r, &mut buf).unwrap(), 0);
    }

    #[test]
    fn an_exchange_writes_once_and_times_out_on_silence() {
        let mut r = Reads(Vec::new(), Vec::new());
        let mut parser = super::super::pzem::read_parser(super::super::pzem::PzemModel::Ac, 1);
        let request = [1u8, 4, 0, 0];
        let e = transact(
            &mut r,
            &request,
            None,
            &mut parser,
            Duration::from_millis(1),
        );
        assert!(matches!(e, Err(TxError::Timeout)), "{e:?}");
        assert_eq!(r.1, request);
        let e = transact(
            &mut r,
            &request,
            Some(&request[..]),
            &mut parser,
            Duration::from_millis(1),
        );
        assert!(matches!(e, Err(TxError::Timeout)), "{e:?}");
        assert_eq!(r.1, request, "a request sent early is not sent again");
    }
}
