//! The [`MeterCollector`]: polls a meter session on one port and implements [`Collector`].
//! Disconnects are survived: a vanished port (EOF, EIO, ENXIO, ENOENT, hang-up) returns a
//! `Gone` error and each later poll tries to reopen it, with a backoff capped at 1 s.
//!
//! The collector follows each meter's energy counter ([`crate::counter`]) with the poll's
//! time and power: a reading whose counter moved more than its power allows is dropped and
//! counted as an `energy_counter` rejection, never stored.

use std::path::PathBuf;
use std::time::Duration;

use super::cse7766::Hlw8032Constants;
use super::energy_book::EnergyBook;
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
    /// Negative power is export (solar), not an error ([`crate::plausibility::Limits`]).
    pub bidirectional: bool,
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
            bidirectional: false,
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
            limits: crate::plausibility::Limits {
                bidirectional: self.bidirectional,
                ..crate::plausibility::Limits::for_ac(self.protocol.is_ac())
            },
            timeout: Duration::from_millis(self.timeout_ms),
            line: self.line.clone(),
            hlw8032: self.hlw8032,
            wattsup_interval_s: (self.interval_ms / 1000).max(1) as u32,
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
    /// Each poll sends the next poll's request once it has read this one's reply
    /// ([`MeterCollector::reading_ahead`]).
    read_ahead: bool,
    /// The poll time (UTC ms) of the request in flight for the next poll, when reading ahead.
    ahead_ms: Option<i64>,
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
            read_ahead: false,
            ahead_ms: None,
        })
    }

    /// Read ahead: each poll reads the reply to the request the previous poll sent when it
    /// ended, and sends the next one, so the daemon's sampler never waits for a meter's
    /// reply (one wake-up per tick, not two). A reading is stamped with the poll that sent
    /// its request, when the meter took it, and reaches the sampler one poll later; the
    /// first poll after the port opens only sends. For protocols whose reading is one
    /// request per meter ([`Protocol::reads_ahead`]: PZEM); others, and every meter but the
    /// first on a shared line, are read as before. One-off readers (`wattson meter read`) do
    /// not read ahead.
    #[must_use]
    pub fn reading_ahead(mut self) -> Self {
        self.read_ahead = true;
        self
    }

    fn reads_ahead(&self) -> bool {
        self.read_ahead && self.config.protocol.reads_ahead()
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
                exceptions: c.exceptions,
            })
            .collect()
    }

    fn prepare(&mut self, _now_ms: i64) -> bool {
        if self.reads_ahead() {
            // The request went out at the end of the previous poll.
            return self.session.is_some() && self.ahead_ms.is_some();
        }
        self.session.as_mut().is_some_and(MeterSession::begin_poll)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        self.ensure_open(now_ms)?;
        let reads_ahead = self.reads_ahead();
        let ahead = self.ahead_ms.take();
        let Some(session) = self.session.as_mut() else {
            return Err(self.gone("port not open".into()));
        };
        if reads_ahead && ahead.is_none() && session.begin_poll() {
            // First poll on this port: its reply is read, and stamped now, at the next.
            self.ahead_ms = Some(now_ms);
            return Ok(Vec::new());
        }
        let results = session.poll();
        let mut samples = Vec::new();
        let mut first_error = None;
        let mut gone = None;
        for (i, r) in results.into_iter().enumerate() {
            // The first meter's reply answers the request sent ahead, at that poll's time.
            let taken_ms = ahead.filter(|_| i == 0).unwrap_or(now_ms);
            match r.and_then(|r| Ok((self.track_energy(taken_ms, &r)?, r))) {
                Ok((energy_total_wh, r)) => {
                    let (source, channel) = self.source_and_channel(r.address);
                    let mut s = r.reading.to_samples(taken_ms, &source);
                    if let Some(total) = energy_total_wh {
                        s.push(Sample::new(
                            taken_ms,
                            source.clone(),
                            Metric::EnergyTotal,
                            "",
                            total,
                        ));
                    }
                    for x in &mut s {
                        // Export keeps its own channel (per address on a shared line), so it
                        // never lands among the consumption samples.
                        if x.channel == crate::source::channel::EXPORT {
                            if !channel.is_empty() {
                                x.channel = format!("{channel}-{}", crate::source::channel::EXPORT);
                            }
                        } else {
                            x.channel.clone_from(&channel);
                        }
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
            self.ahead_ms = None;
            return Err(self.gone(format!(
                "{} is gone ({source}): unplugged? It is reopened as soon as it returns",
                self.config.port.display()
            )));
        }
        if reads_ahead
            && let Some(session) = self.session.as_mut()
            && session.begin_poll()
        {
            self.ahead_ms = Some(now_ms);
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
mod fault_scripts;
#[cfg(test)]
mod tests;
