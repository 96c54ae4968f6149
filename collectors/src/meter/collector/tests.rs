use super::*;
use crate::Action;

#[test]
fn config_validation_names_the_meter() {
    let mut c = MeterConfig::new("wall", Protocol::Pzem004t, "/nonexistent");
    assert_eq!(c.addresses, vec![0xF8]);
    assert!(c.validate().is_ok());
    c.addresses = vec![1, 0xF8];
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("wall") && e.contains("248"), "{e}");
    let l = MeterConfig::new("usb", Protocol::Line, "/x");
    assert!(
        l.validate()
            .unwrap_err()
            .to_string()
            .contains("line format")
    );
}

#[test]
fn missing_port_is_gone_and_backs_off_at_most_one_second() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = MeterCollector::new(MeterConfig::new(
        "wall",
        Protocol::Pzem004t,
        dir.path().join("ttyUSB9"),
    ))
    .unwrap();
    let e = m.poll(0).unwrap_err();
    assert_eq!(e.action(), Action::Reopen, "{e}");
    assert!(e.to_string().contains("ttyUSB9"), "{e}");
    let mut t = 0;
    for _ in 0..10 {
        t += 1000;
        assert_eq!(m.poll(t).unwrap_err().action(), Action::Reopen);
    }
    assert!(m.next_open_ms - t <= MAX_REOPEN_BACKOFF_MS);
    assert!(!m.is_connected());
}

/// An in-memory line: each request written is answered with `reply`; once `unplugged`
/// is set, every read and write fails as an unplugged USB adapter does (EIO).
struct FakeLine {
    reply: Vec<u8>,
    pending: Vec<u8>,
    unplugged: Arc<AtomicBool>,
}

impl std::io::Read for FakeLine {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.unplugged.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(5));
        }
        if self.pending.is_empty() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

impl std::io::Write for FakeLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.unplugged.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(5));
        }
        self.pending.extend_from_slice(&self.reply);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Opens [`FakeLine`]s while `present`, else fails as a missing device node does.
struct FakeOpener {
    present: Arc<AtomicBool>,
    unplugged: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
}

impl PortOpener for FakeOpener {
    fn open(
        &mut self,
        path: &std::path::Path,
        _settings: SerialSettings,
        _read_timeout: Duration,
    ) -> Result<Box<dyn MeterPort>, PortError> {
        if !self.present.load(Ordering::SeqCst) {
            return Err(PortError::Open {
                path: path.to_owned(),
                source: std::io::Error::from_raw_os_error(libc::ENOENT),
            });
        }
        self.opened.fetch_add(1, Ordering::SeqCst);
        self.unplugged.store(false, Ordering::SeqCst);
        // PZEM-004T: 230.0 V, 0.217 A, 50.0 W, 38 Wh, 50.0 Hz, PF 0.90.
        let regs: [u16; 10] = [2300, 217, 0, 500, 0, 38, 0, 500, 90, 0];
        let data: Vec<u8> = regs.iter().flat_map(|r| r.to_be_bytes()).collect();
        Ok(Box::new(FakeLine {
            reply: super::super::modbus::registers_reply(1, 4, &data),
            pending: Vec::new(),
            unplugged: self.unplugged.clone(),
        }))
    }
}

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The reconnect logic on an injected port: absent at start (the OS reason kept), read
/// once it appears, gone when unplugged, reopened at the very next poll, with the
/// meter's counters carried across.
#[test]
fn a_port_that_appears_vanishes_and_returns_is_followed_without_a_pty() {
    let present = Arc::new(AtomicBool::new(false));
    let unplugged = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut config = MeterConfig::new("wall", Protocol::Pzem004t, "/dev/ttyFAKE0");
    config.addresses = vec![1];
    let mut m = MeterCollector::with_opener(
        config,
        Box::new(FakeOpener {
            present: present.clone(),
            unplugged: unplugged.clone(),
            opened: opened.clone(),
        }),
    )
    .unwrap();
    let e = m.poll(0).unwrap_err();
    assert_eq!(e.action(), Action::Reopen, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("/dev/ttyFAKE0: No such file or directory (os error 2): check that"),
        "{text}"
    );
    assert_eq!(opened.load(Ordering::SeqCst), 0);

    present.store(true, Ordering::SeqCst);
    let power = |s: &[Sample]| {
        s.iter()
            .find(|x| x.metric == Metric::Power)
            .map(|x| (x.value, x.source.clone()))
    };
    let s = m.poll(MAX_REOPEN_BACKOFF_MS).unwrap();
    assert_eq!(power(&s), Some((50.0, SourceId::meter("wall"))));
    assert!(m.is_connected());

    unplugged.store(true, Ordering::SeqCst);
    let e = m.poll(2 * MAX_REOPEN_BACKOFF_MS).unwrap_err();
    assert_eq!(e.action(), Action::Reopen, "{e}");
    assert!(e.to_string().contains("is gone"), "{e}");
    assert!(!m.is_connected());

    let s = m.poll(2 * MAX_REOPEN_BACKOFF_MS + 1).unwrap();
    assert_eq!(power(&s).map(|p| p.0), Some(50.0));
    assert_eq!(opened.load(Ordering::SeqCst), 2);
    assert_eq!(
        m.counters()[0].1.good_frames,
        2,
        "counters survive the reconnect"
    );
}

fn fake_meter(present: bool) -> (MeterCollector, Arc<AtomicBool>, Arc<AtomicUsize>) {
    let unplugged = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut config = MeterConfig::new("wall", Protocol::Pzem004t, "/dev/ttyFAKE0");
    config.addresses = vec![1];
    let m = MeterCollector::with_opener(
        config,
        Box::new(FakeOpener {
            present: Arc::new(AtomicBool::new(present)),
            unplugged: unplugged.clone(),
            opened: opened.clone(),
        }),
    )
    .unwrap();
    (m, unplugged, opened)
}

fn stamps(s: &[Sample]) -> Vec<i64> {
    let mut t: Vec<i64> = s.iter().map(|x| x.ts_ms).collect();
    t.dedup();
    t
}

/// Reading ahead: the first poll only sends; each later poll reads the reply to the request
/// the previous one sent (stamped with that poll's time, when the meter took the reading)
/// and sends the next, so a tick never waits for the meter.
#[test]
fn reading_ahead_stamps_each_reading_with_the_poll_that_asked_for_it() {
    let (m, unplugged, _) = fake_meter(true);
    let mut m = m.reading_ahead();
    assert!(!m.prepare(0), "nothing in flight before the port opens");
    assert_eq!(
        m.poll(1000).unwrap(),
        Vec::new(),
        "the first poll only sends"
    );
    assert!(m.prepare(2000), "the request for this poll is in flight");
    let s = m.poll(2000).unwrap();
    assert_eq!(stamps(&s), vec![1000]);
    assert!(
        s.iter()
            .any(|x| x.metric == Metric::Power && x.value == 50.0)
    );
    let s = m.poll(3000).unwrap();
    assert_eq!(stamps(&s), vec![2000]);
    assert_eq!(m.counters()[0].1.good_frames, 2);

    // Unplugged: gone, and the request in flight is forgotten; after the reopen the first
    // poll only sends again, so no reading is stamped twice.
    unplugged.store(true, Ordering::SeqCst);
    assert_eq!(m.poll(4000).unwrap_err().action(), Action::Reopen);
    assert!(!m.prepare(5000));
    assert_eq!(m.poll(5000).unwrap(), Vec::new());
    assert_eq!(stamps(&m.poll(6000).unwrap()), vec![5000]);
}

/// Without reading ahead (one-off readers), each poll asks and reads at once.
#[test]
fn without_reading_ahead_a_poll_reads_its_own_request() {
    let (mut m, _, _) = fake_meter(true);
    assert_eq!(stamps(&m.poll(1000).unwrap()), vec![1000]);
    assert!(m.prepare(2000), "prepare sends the request early");
    assert_eq!(stamps(&m.poll(2000).unwrap()), vec![2000]);
}
