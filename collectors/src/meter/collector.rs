//! The [`MeterCollector`]: polls a meter session on one port and implements [`Collector`].
//! Disconnects are survived: a vanished port (EOF, EIO, ENXIO, ENOENT, hang-up) returns a
//! `Gone` error and each later poll tries to reopen it, with a backoff capped at 1 s.
//!
//! The collector follows each meter's energy counter ([`crate::counter`]) with the poll's
//! time and power: a reading whose counter moved more than its power allows is dropped and
//! counted as an `energy_counter` rejection, never stored.

use std::path::PathBuf;
use std::time::Duration;

use super::counter::EnergyBook;
use super::cse7766::Hlw8032Constants;
use super::line::LineFormat;
use super::port::{MeterPort, PortError, PortOpener, SerialOpener};
use super::protocol::{Protocol, SerialSettings};
use super::session::{MeterCounters, MeterSession, SessionError, SessionOptions, SessionState};
use crate::plausibility::Rejections;
use crate::{CollectError, Collector, Metric, Sample, SourceId};

/// One `[[meter]]` (or several sharing one port, polled in turn).
#[derive(Debug, Clone)]
pub struct MeterConfig {
    /// Samples' source is `meter:<id>`.
    pub id: String,
    pub protocol: Protocol,
    pub port: PathBuf,
    pub serial: SerialSettings,
    /// Modbus addresses on this line (empty: the protocol default; ignored when streaming).
    pub addresses: Vec<u8>,
    /// Per-address meter ids, same length as `addresses` (samples then come from
    /// `meter:<ids[i]>`); empty: one id for all, channel = address when there are several.
    pub ids: Vec<String>,
    /// Poll interval, ms (the daemon schedules polls; kept here for its convenience).
    pub interval_ms: u64,
    /// Reply/record timeout, ms (protocol default).
    pub timeout_ms: u64,
    /// Required for `protocol = "line"`.
    pub line: Option<LineFormat>,
    pub hlw8032: Hlw8032Constants,
}

impl MeterConfig {
    /// Protocol defaults for everything but id and port.
    pub fn new(id: impl Into<String>, protocol: Protocol, port: impl Into<PathBuf>) -> Self {
        MeterConfig {
            id: id.into(),
            protocol,
            port: port.into(),
            serial: protocol.default_serial(),
            addresses: protocol.default_address().into_iter().collect(),
            ids: Vec::new(),
            interval_ms: 1000,
            timeout_ms: protocol.response_timeout_ms(),
            line: None,
            hlw8032: Hlw8032Constants::default(),
        }
    }

    /// Check what the types cannot.
    pub fn validate(&self) -> Result<(), PortError> {
        let bad = |detail: String| {
            Err(PortError::Config {
                id: self.id.clone(),
                detail,
            })
        };
        if self.protocol.is_polled() {
            if self.addresses.is_empty() {
                return bad("a Modbus meter needs at least one address".into());
            }
            if let Some(a) = self
                .addresses
                .iter()
                .find(|&&a| a == 0 || (a > 0xF7 && a != 0xF8))
            {
                return bad(format!(
                    "address {a} is not 1..=247 (or 248, the PZEM general address)"
                ));
            }
            if self.addresses.len() > 1 && self.addresses.contains(&0xF8) {
                return bad(
                    "address 248 answers for every PZEM: only usable with one meter on the line"
                        .into(),
                );
            }
        }
        if !self.ids.is_empty() && self.ids.len() != self.addresses.len() {
            return bad(format!(
                "{} ids for {} addresses",
                self.ids.len(),
                self.addresses.len()
            ));
        }
        if self.protocol == Protocol::Line {
            match &self.line {
                None => return bad("protocol \"line\" needs a line format".into()),
                Some(f) => f.validate().or_else(|e| bad(e.to_string()))?,
            }
        }
        if self.timeout_ms == 0 {
            return bad("timeout must be > 0".into());
        }
        Ok(())
    }

    fn session_options(&self) -> SessionOptions {
        SessionOptions {
            timeout: Duration::from_millis(self.timeout_ms),
            line: self.line.clone(),
            hlw8032: self.hlw8032,
            wattsup_interval_s: (self.interval_ms / 1000).max(1) as u32,
            ..SessionOptions::for_protocol(self.protocol)
        }
    }
}

/// Longest wait between reopen attempts, ms.
pub const MAX_REOPEN_BACKOFF_MS: i64 = 1000;

/// A meter (or a bus of meters) as a [`Collector`].
pub struct MeterCollector {
    config: MeterConfig,
    name: SourceId,
    opener: Box<dyn PortOpener>,
    session: Option<MeterSession<Box<dyn MeterPort>>>,
    state: Option<SessionState>,
    /// Per address (one for a streaming meter): the energy counter and its rejected steps.
    energy: EnergyBook,
    backoff_ms: i64,
    next_open_ms: i64,
    /// The port has been open at least once in this run.
    was_open: bool,
}

impl MeterCollector {
    /// Validates the config; the serial port is opened on the first poll.
    pub fn new(config: MeterConfig) -> Result<Self, PortError> {
        Self::with_opener(config, Box::new(SerialOpener))
    }

    /// As [`MeterCollector::new`], opening the port through `opener`.
    pub fn with_opener(
        config: MeterConfig,
        opener: Box<dyn PortOpener>,
    ) -> Result<Self, PortError> {
        config.validate()?;
        let state = SessionState::new(&config.addresses);
        let energy = EnergyBook::new(
            state.counters().into_iter().map(|(address, _)| address),
            config.protocol.energy_wrap_wh(),
            config.protocol.energy_resolution_wh(),
        );
        Ok(MeterCollector {
            name: SourceId::meter(&config.id),
            config,
            opener,
            session: None,
            state: Some(state),
            energy,
            backoff_ms: 0,
            next_open_ms: i64::MIN,
            was_open: false,
        })
    }

    pub fn config(&self) -> &MeterConfig {
        &self.config
    }

    /// True while the port is open.
    pub fn is_connected(&self) -> bool {
        self.session.is_some()
    }

    /// Counters per address (0 for a streaming meter); they survive reconnects. Readings
    /// dropped for their energy counter count as implausible.
    pub fn counters(&self) -> Vec<(u8, MeterCounters)> {
        let mut counters = match (&self.session, &self.state) {
            (Some(s), _) => s.counters(),
            (None, Some(st)) => st.counters(),
            (None, None) => Vec::new(),
        };
        for (address, c) in &mut counters {
            if let Some(r) = self.energy.rejected(*address) {
                c.implausible += r.total();
                c.good_frames = c.good_frames.saturating_sub(r.total());
            }
        }
        counters
    }

    /// Readings rejected per address, by reason: the plausibility rules and the energy
    /// counter's bound together.
    pub fn rejections(&self) -> Vec<(u8, Rejections)> {
        let mut out = match (&self.session, &self.state) {
            (Some(s), _) => s.rejections(),
            (None, Some(st)) => st.rejections(),
            (None, None) => Vec::new(),
        };
        for (address, r) in &mut out {
            if let Some(counter) = self.energy.rejected(*address) {
                r.add(counter);
            }
        }
        out
    }

    /// Follows the energy counter of `r`; `Err` when its step is more than the power allows
    /// (the reading is then dropped).
    fn track_energy(
        &mut self,
        now_ms: i64,
        r: &super::session::AddressReading,
    ) -> Result<Option<f64>, SessionError> {
        let Some(raw) = r.reading.energy_wh else {
            return Ok(None);
        };
        self.energy
            .track(r.address, now_ms, raw, r.reading.power_w)
            .map_err(|why| SessionError::Implausible {
                address: r.address,
                reason: why.detail,
            })
    }

    fn gone(&self, detail: String) -> CollectError {
        CollectError::Gone {
            source_name: self.name.to_string(),
            detail,
        }
    }

    fn ensure_open(&mut self, now_ms: i64) -> Result<(), CollectError> {
        if self.session.is_some() {
            return Ok(());
        }
        if now_ms < self.next_open_ms {
            return Err(self.gone(format!(
                "{} closed; reopening in {} ms",
                self.config.port.display(),
                self.next_open_ms - now_ms
            )));
        }
        let timeout = Duration::from_millis(self.config.timeout_ms.min(1000));
        match self
            .opener
            .open(&self.config.port, self.config.serial, timeout)
        {
            Ok(port) => {
                let state = self
                    .state
                    .take()
                    .unwrap_or_else(|| SessionState::new(&self.config.addresses));
                self.session = Some(MeterSession::resume(
                    port,
                    self.config.protocol,
                    state,
                    self.config.session_options(),
                ));
                self.backoff_ms = 0;
                self.was_open = true;
                tracing::info!(meter = %self.name, port = %self.config.port.display(), "meter port open");
                Ok(())
            }
            Err(e) => {
                self.backoff_ms = (self.backoff_ms * 2).clamp(100, MAX_REOPEN_BACKOFF_MS);
                self.next_open_ms = now_ms.saturating_add(self.backoff_ms);
                if e.is_missing() || e.is_busy() {
                    Err(self.gone(e.explain(self.was_open)))
                } else if e.is_denied() {
                    // Stopped, as any permission error: it does not go away by retrying.
                    Err(CollectError::Unavailable {
                        source_name: self.name.to_string(),
                        detail: e.explain(self.was_open),
                    })
                } else {
                    let source = match e {
                        PortError::Open { source, .. } => source,
                        PortError::Config { detail, .. } => std::io::Error::other(detail),
                    };
                    Err(CollectError::io(&self.config.port, source))
                }
            }
        }
    }

    fn source_and_channel(&self, address: u8) -> (SourceId, String) {
        if let Some(i) = self.config.addresses.iter().position(|&a| a == address)
            && let Some(id) = self.config.ids.get(i)
        {
            return (SourceId::meter(id), String::new());
        }
        let channel = if self.config.protocol.is_polled() && self.config.addresses.len() > 1 {
            address.to_string()
        } else {
            String::new()
        };
        (self.name.clone(), channel)
    }
}

impl Collector for MeterCollector {
    fn source(&self) -> &SourceId {
        &self.name
    }

    fn scope(&self) -> Option<crate::Scope> {
        Some(crate::Scope::Wall)
    }

    /// Samples of every meter that answered. `Gone` (`Action::Reopen`) while the port is
    /// missing; `Timeout`/`BadFrame` (`Action::Retry`) if no meter gave a good reading.
    fn device_counters(&self) -> Vec<crate::DeviceCounters> {
        let ids = &self.config().ids;
        let rejections = self.rejections();
        self.counters()
            .into_iter()
            .enumerate()
            .map(|(i, (address, c))| crate::DeviceCounters {
                rejected: rejections
                    .iter()
                    .find(|(a, _)| *a == address)
                    .map(|(_, r)| r.clone())
                    .unwrap_or_default(),
                id: ids.get(i).cloned().unwrap_or_else(|| {
                    if ids.is_empty() && self.config().addresses.len() <= 1 {
                        self.config().id.clone()
                    } else {
                        format!("{}-{address}", self.config().id)
                    }
                }),
                good: c.good_frames,
                crc_errors: c.crc_errors,
                timeouts: c.timeouts,
                implausible: c.implausible,
            })
            .collect()
    }

    fn prepare(&mut self, _now_ms: i64) -> bool {
        self.session.as_mut().is_some_and(MeterSession::begin_poll)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        self.ensure_open(now_ms)?;
        let Some(session) = self.session.as_mut() else {
            return Err(self.gone("port not open".into()));
        };
        let results = session.poll();
        let mut samples = Vec::new();
        let mut first_error = None;
        let mut gone = None;
        for r in results {
            match r.and_then(|r| Ok((self.track_energy(now_ms, &r)?, r))) {
                Ok((energy_total_wh, r)) => {
                    let (source, channel) = self.source_and_channel(r.address);
                    let mut s = r.reading.to_samples(now_ms, &source);
                    if let Some(total) = energy_total_wh {
                        s.push(Sample::new(
                            now_ms,
                            source.clone(),
                            Metric::EnergyTotal,
                            "",
                            total,
                        ));
                    }
                    for x in &mut s {
                        x.channel.clone_from(&channel);
                    }
                    samples.extend(s);
                }
                Err(SessionError::Gone { source }) => gone = Some(source),
                Err(e) => {
                    tracing::debug!(meter = %self.name, error = %crate::ErrorChain(&e), "meter poll failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(source) = gone {
            if let Some(s) = self.session.take() {
                self.state = Some(s.into_state());
            }
            // Try again at the very next poll: a replugged adapter is back within one interval.
            self.next_open_ms = now_ms;
            self.backoff_ms = 0;
            return Err(self.gone(format!(
                "{} is gone ({source}): unplugged? It is reopened as soon as it returns",
                self.config.port.display()
            )));
        }
        match (samples.is_empty(), first_error) {
            (false, _) | (true, None) => Ok(samples),
            (true, Some(e)) => Err(match e {
                SessionError::Timeout { timeout_ms, .. } => CollectError::Timeout {
                    source_name: self.name.to_string(),
                    timeout_ms,
                },
                SessionError::Io { source } => CollectError::io(&self.config.port, source),
                other => CollectError::BadFrame {
                    source_name: self.name.to_string(),
                    detail: crate::ErrorChain(&other).to_string(),
                },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
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
}
