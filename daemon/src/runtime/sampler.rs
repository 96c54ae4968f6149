//! The sampling loop: one thread that owns every collector, polls each on its own interval,
//! and hands samples to the store in batches.
//!
//! One thread for all collectors keeps the daemon's own wake-ups (which show on the wall
//! meter) to about one per second at 1 Hz: it sleeps on its control channel until the next
//! poll is due, so a stop request wakes it at once.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattson_collectors::SourceId;

use wattson_collectors::{Action, CollectError, Collector, Sample};

use crate::live::LiveState;
use crate::sources::wiring::WiredSource;

/// Where the sampler delivers its output.
pub trait SampleSink: Send {
    /// A batch of samples, in time order per source.
    fn samples(&mut self, batch: Vec<Sample>);
    /// A period in which `source` produced nothing (device gone, errors).
    fn gap(&mut self, source: &SourceId, start_ms: i64, end_ms: i64, reason: &str);
    /// Records that the host slept over `[start_ms, end_ms]` of `source` (the kernel's
    /// clocks say so): a gap whose energy the meter's counter is the host's standby.
    fn asleep(&mut self, source: &SourceId, start_ms: i64, end_ms: i64, reason: &str) {
        self.gap(source, start_ms, end_ms, reason);
    }
    /// The host woke at `at_ms` having slept `slept_ms` since it booted, all told.
    fn woke(&mut self, _at_ms: i64, _slept_ms: i64) {}
}

/// Messages to the sampling thread.
pub enum Control {
    /// Flush and return.
    Stop,
    /// Replace the collector set (configuration reloaded), keeping the running collectors
    /// `keep` names: an unchanged source keeps its state (counter baselines, open ports),
    /// so a reload loses no sample.
    Replace {
        collectors: Vec<Scheduled>,
        keep: Vec<SourceId>,
    },
}

/// How early a source may be polled to share a wake-up with another one due.
const SAME_TICK: Duration = Duration::from_millis(5);

/// A collector with its polling schedule and health.
pub struct Scheduled {
    collector: Box<dyn Collector>,
    interval: Duration,
    next_due: Instant,
    /// Time of the last good poll, UTC ms.
    last_good_ms: Option<i64>,
    /// When the current run of failures began, UTC ms, and the first error's text.
    failing_since: Option<(i64, String)>,
    /// The device went away during the current run of failures (unplugged, reopened):
    /// its outage is a gap however short, never bridged.
    device_lost: bool,
    consecutive_failures: u32,
    stopped: bool,
    /// Rejection counts per device last stored, so a change is stored once.
    rejected: std::collections::BTreeMap<String, wattson_collectors::plausibility::Rejections>,
    /// The source's name as [`InPoll`] shows it, formatted once.
    name: Arc<str>,
    /// Where an estimate's readings come from ([`WiredSource::basis`]).
    basis: Option<String>,
}

impl Scheduled {
    pub fn new(collector: Box<dyn Collector>, interval: Duration) -> Scheduled {
        let collector_name = collector.source().to_string();
        Scheduled {
            collector,
            interval,
            next_due: Instant::now() + until_grid(interval),
            last_good_ms: None,
            failing_since: None,
            device_lost: false,
            consecutive_failures: 0,
            stopped: false,
            rejected: std::collections::BTreeMap::new(),
            name: Arc::from(collector_name.as_str()),
            basis: None,
        }
    }

    pub fn source(&self) -> &SourceId {
        self.collector.source()
    }
}

impl From<WiredSource> for Scheduled {
    fn from(w: WiredSource) -> Scheduled {
        Scheduled {
            basis: w.basis,
            ..Scheduled::new(w.collector, w.interval)
        }
    }
}

/// Shared by the sampler with the watchdog: the UTC ms of the last completed sampling pass.
pub type Heartbeat = Arc<AtomicI64>;

/// Which collector the sampler is polling right now, and since when: what the daemon names
/// when the sampler does not stop (a read blocked in a driver, say).
#[derive(Debug, Default)]
pub struct InPoll(Mutex<Option<(Arc<str>, Instant)>>);

impl InPoll {
    fn enter(&self, c: &Scheduled) {
        if let Ok(mut g) = self.0.lock() {
            *g = Some((c.name.clone(), Instant::now()));
        }
    }

    fn leave(&self) {
        if let Ok(mut g) = self.0.lock() {
            *g = None;
        }
    }

    /// The collector in a poll and how long it has been in it; `None` between polls.
    pub fn current(&self) -> Option<(String, Duration)> {
        let g = self.0.lock().ok()?;
        g.as_ref()
            .map(|(name, since)| (name.to_string(), since.elapsed()))
    }
}

/// The current wall-clock time in UTC milliseconds.
pub use wattson_collectors::now_ms;

/// The sampler's time: the monotonic clock its schedule runs on, the wall clock (UTC ms) its
/// samples are stamped with, and its wait for the next due poll or a control message.
/// Injected, so the schedule, the grid and the gaps are tested without sleeping.
pub trait Clock {
    /// Monotonic now.
    fn now(&self) -> Instant;
    /// Wall-clock now, UTC ms.
    fn now_ms(&self) -> i64;
    /// How long the host has slept since it booted, ms (the kernel's `CLOCK_BOOTTIME` less
    /// `CLOCK_MONOTONIC`); `None` where it cannot be read.
    fn slept_ms(&self) -> Option<i64>;
    /// The next control message, waiting for it until `deadline` at most.
    fn wait(
        &mut self,
        control: &Receiver<Control>,
        deadline: Instant,
    ) -> Result<Control, RecvTimeoutError>;
}

/// The machine's clocks; waiting blocks on the control channel.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn now_ms(&self) -> i64 {
        now_ms()
    }

    fn slept_ms(&self) -> Option<i64> {
        wattson_collectors::kernel_clock::slept_ms().ok()
    }

    fn wait(
        &mut self,
        control: &Receiver<Control>,
        deadline: Instant,
    ) -> Result<Control, RecvTimeoutError> {
        control.recv_timeout(deadline.saturating_duration_since(Instant::now()))
    }
}

/// Run the sampling loop on the current thread until [`Control::Stop`] or the sender drops.
pub fn run(
    collectors: Vec<Scheduled>,
    sink: Box<dyn SampleSink>,
    control: &Receiver<Control>,
    flush_interval: Duration,
    live: &LiveState,
    heartbeat: &Heartbeat,
    in_poll: &InPoll,
) {
    let outputs = Outputs {
        live,
        heartbeat,
        in_poll,
    };
    run_with_clock(
        collectors,
        sink,
        control,
        flush_interval,
        &outputs,
        &mut SystemClock,
    );
}

/// What the sampling loop reports to besides the sink.
pub struct Outputs<'a> {
    pub live: &'a LiveState,
    pub heartbeat: &'a Heartbeat,
    pub in_poll: &'a InPoll,
}

/// [`run`] on `clock`.
pub fn run_with_clock(
    mut collectors: Vec<Scheduled>,
    mut sink: Box<dyn SampleSink>,
    control: &Receiver<Control>,
    flush_interval: Duration,
    outputs: &Outputs<'_>,
    clock: &mut dyn Clock,
) {
    let Outputs {
        live,
        heartbeat,
        in_poll,
    } = *outputs;
    let mut buffer: Vec<Sample> = Vec::with_capacity(256);
    let mut next_flush = clock.now() + flush_interval;
    let mut slept = clock.slept_ms();
    tell_bases(live, &collectors);
    loop {
        let next_poll = collectors
            .iter()
            .filter(|c| !c.stopped)
            .map(|c| c.next_due)
            .min()
            .unwrap_or_else(|| clock.now() + Duration::from_secs(3600));
        // A flush rides on the next poll when one comes within another flush interval, so
        // it costs no wake-up of its own.
        let wake = if next_poll <= next_flush + flush_interval {
            next_poll
        } else {
            next_flush
        };
        match clock.wait(control, wake) {
            Ok(Control::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Ok(Control::Replace {
                collectors: mut new,
                keep,
            }) => {
                for old in std::mem::take(&mut collectors) {
                    if keep.iter().any(|k| k == old.source()) {
                        new.push(old);
                    } else {
                        close_gap_on_exit(&old, &mut *sink, clock.now_ms());
                    }
                }
                tracing::info!(
                    "collectors reloaded: {}",
                    new.iter()
                        .map(|c| c.source().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                collectors = new;
                tell_bases(live, &collectors);
                continue;
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        slept = notice_sleep(&mut collectors, &mut *sink, clock, slept);
        // Sources due within a few ms of each other share one wake-up: their schedules are
        // on the same wall-clock grid but were started microseconds apart.
        let now = clock.now() + SAME_TICK;
        // Meters with a request in flight are read last, so their replies travel while the
        // other sources are read: one wake-up per tick rather than one more per meter.
        let mut in_flight = Vec::new();
        for (i, c) in collectors.iter_mut().enumerate() {
            if !c.stopped && c.next_due <= now && c.collector.prepare(clock.now_ms()) {
                in_flight.push(i);
            }
        }
        let pass_start = buffer.len();
        for read_last in [false, true] {
            for (i, c) in collectors.iter_mut().enumerate() {
                if c.stopped || c.next_due > now || in_flight.contains(&i) != read_last {
                    continue;
                }
                in_poll.enter(c);
                poll_one(c, clock.now_ms(), &mut buffer, &mut *sink, live);
                in_poll.leave();
                // Keep the schedule on its grid; if we fell behind, skip ahead rather than
                // burst.
                c.next_due += c.interval;
                if c.next_due <= now {
                    c.next_due = now + c.interval;
                }
            }
        }
        // One pass, one observation: a publish never splits the samples of one tick.
        if buffer.len() > pass_start && live.observe(&buffer[pass_start..]) {
            // A publish interval began: the store gets this pass first (unless it had a
            // batch within half a flush interval), so the published figures count it, and
            // flushes then fall on publish ticks.
            if clock.now() + flush_interval / 2 >= next_flush {
                sink.samples(std::mem::take(&mut buffer));
                next_flush = clock.now() + flush_interval;
            }
            live.publish_now();
        }
        heartbeat.store(clock.now_ms(), Ordering::Relaxed);
        if clock.now() >= next_flush {
            if !buffer.is_empty() {
                sink.samples(std::mem::take(&mut buffer));
            }
            next_flush = clock.now() + flush_interval;
        }
    }
    if !buffer.is_empty() {
        sink.samples(buffer);
    }
    for c in &collectors {
        close_gap_on_exit(c, &mut *sink, clock.now_ms());
    }
}

/// The least time asleep recorded as such, ms.
const SLEPT_AT_LEAST_MS: i64 = 1_000;

/// Where the kernel's clocks say the host slept since the last look (`before`, ms asleep
/// since boot), records the time since each source's last good poll as a gap the host was
/// asleep in, ending where its next poll is stamped, and tells the sink the host woke. The
/// time asleep now.
fn notice_sleep(
    collectors: &mut [Scheduled],
    sink: &mut dyn SampleSink,
    clock: &dyn Clock,
    before: Option<i64>,
) -> Option<i64> {
    let now = clock.slept_ms();
    let (Some(before), Some(after)) = (before, now) else {
        return now.or(before);
    };
    if after - before < SLEPT_AT_LEAST_MS {
        return Some(after.max(before));
    }
    let now_ms = clock.now_ms();
    let reason = format!(
        "the host was asleep for {} (the kernel's clocks)",
        crate::ledger::interval::hours_text((after - before) as f64 / 3_600_000.0)
    );
    for c in collectors.iter_mut().filter(|c| !c.stopped) {
        let Some(since) = c.last_good_ms else {
            continue;
        };
        let end = grid_ms(now_ms, c.interval).max(since);
        sink.asleep(c.source(), since, end, &reason);
        // The time asleep is this gap, not part of an outage still to end.
        c.last_good_ms = Some(end);
        c.failing_since = None;
        c.device_lost = false;
    }
    tracing::info!("{reason}");
    sink.woke(now_ms, after);
    Some(after)
}

fn close_gap_on_exit(c: &Scheduled, sink: &mut dyn SampleSink, now_ms: i64) {
    if let (Some(since), Some((_, why))) = (c.last_good_ms, &c.failing_since) {
        sink.gap(c.source(), since, now_ms, why);
    }
}

/// The poll's timestamp: the scheduled tick on the interval's wall-clock grid when the poll
/// ran within a quarter interval of it (the usual case), else the actual time. Stamping the
/// tick rather than the few milliseconds of scheduling jitter keeps timestamps regular,
/// which the store's delta-of-delta chunks encode in almost nothing (see BENCHMARKS.md).
pub fn grid_ms(now_ms: i64, interval: Duration) -> i64 {
    let step = interval.as_millis() as i64;
    if step <= 0 {
        return now_ms;
    }
    let nearest = (now_ms + step / 2).div_euclid(step) * step;
    if (now_ms - nearest).abs() <= step / 4 {
        nearest
    } else {
        now_ms
    }
}

/// How long until the next multiple of `interval` on the wall clock, so polls land on the grid.
fn until_grid(interval: Duration) -> Duration {
    let step = interval.as_millis() as i64;
    if step <= 0 {
        return Duration::ZERO;
    }
    Duration::from_millis((step - now_ms().rem_euclid(step)).rem_euclid(step) as u64)
}

/// Where the estimates among `collectors` come from, for the daemon's status reply.
fn tell_bases(live: &LiveState, collectors: &[Scheduled]) {
    live.set_bases(
        collectors
            .iter()
            .filter_map(|c| Some((c.source().clone(), c.basis.clone()?))),
    );
}

fn poll_one(
    c: &mut Scheduled,
    now_ms: i64,
    buffer: &mut Vec<Sample>,
    sink: &mut dyn SampleSink,
    live: &LiveState,
) {
    let ts = grid_ms(now_ms, c.interval);
    let result = c.collector.poll(ts);
    let counters = c.collector.device_counters();
    if !counters.is_empty() {
        store_rejections(c, &counters, ts, buffer);
        live.set_counters(counters);
    }
    match result {
        Ok(samples) => {
            if let Some((since, why)) = c.failing_since.take() {
                let start = c.last_good_ms.unwrap_or(since);
                tracing::info!(
                    "{}: back after {:.1} s ({} failed polls)",
                    c.source(),
                    (ts - start) as f64 / 1000.0,
                    c.consecutive_failures
                );
                // Polls lost to a device that stayed (a timeout, a corrupt frame) over no
                // longer than the store bridges anyway (a poll or two at 1 s, as a late
                // poll is) are not a gap: recording one would throw away the energy on
                // both sides of the lost poll. A device that went away is always a gap.
                let device_lost = std::mem::take(&mut c.device_lost);
                let bridged = !device_lost
                    && ts - start <= crate::store::integrate::max_pair_ms(interval_ms(c));
                if c.last_good_ms.is_some() && !bridged {
                    sink.gap(c.source(), start, ts, &why);
                }
            }
            c.consecutive_failures = 0;
            if !samples.is_empty() {
                c.last_good_ms = Some(samples.iter().map(|s| s.ts_ms).max().unwrap_or(ts));
                buffer.extend(samples);
            }
        }
        Err(e) => on_error(c, &e, ts),
    }
}

/// Stores each device's rejection counts when they change, as [`Metric::Rejected`] samples
/// (channel: the reason; value: the count since the daemon started), so `wattson status`
/// can show what was dropped.
///
/// [`Metric::Rejected`]: wattson_collectors::Metric::Rejected
fn store_rejections(
    c: &mut Scheduled,
    counters: &[wattson_collectors::DeviceCounters],
    ts: i64,
    buffer: &mut Vec<Sample>,
) {
    for d in counters {
        if c.rejected.get(&d.id) == Some(&d.rejected) {
            continue;
        }
        let source = if c.source().is_meter() {
            SourceId::meter(&d.id)
        } else {
            c.source().clone()
        };
        let before = c.rejected.get(&d.id).cloned().unwrap_or_default();
        for (reason, n) in d.rejected.nonzero() {
            if before.get(reason) != n {
                buffer.push(Sample::new(
                    ts,
                    source.clone(),
                    wattson_collectors::Metric::Rejected,
                    reason.as_str(),
                    n as f64,
                ));
            }
        }
        c.rejected.insert(d.id.clone(), d.rejected.clone());
    }
}

/// The collector's interval in ms, the spacing its series are stored at.
fn interval_ms(c: &Scheduled) -> i64 {
    i64::try_from(c.interval.as_millis()).unwrap_or(i64::MAX)
}

fn on_error(c: &mut Scheduled, e: &CollectError, ts: i64) {
    c.consecutive_failures += 1;
    // Errors usually name their source already; say it once (and their cause once).
    let full = wattson_collectors::ErrorChain(e).to_string();
    let action = e.action();
    let e = full
        .strip_prefix(&format!("{}: ", c.source()))
        .unwrap_or(&full)
        .to_owned();
    let first = c.failing_since.is_none();
    if first {
        c.failing_since = Some((ts, e.clone()));
    }
    if matches!(action, Action::Stop | Action::Reopen) {
        c.device_lost = true;
    }
    match action {
        Action::Stop => {
            let e = e.strip_prefix("unavailable: ").unwrap_or(&e);
            tracing::warn!("{}: unavailable, no longer polled: {}", c.source(), e);
            c.stopped = true;
        }
        Action::Reopen if first => {
            tracing::warn!("{}: {}; reconnecting in the background", c.source(), e);
        }
        Action::Retry if c.consecutive_failures == 5 => {
            tracing::warn!("{}: 5 failed polls in a row, latest: {}", c.source(), e);
        }
        Action::Retry if c.consecutive_failures.is_power_of_two() && c.consecutive_failures > 5 => {
            tracing::warn!(
                "{}: {} failed polls in a row, latest: {}",
                c.source(),
                c.consecutive_failures,
                e
            );
        }
        _ => tracing::debug!("{}: {}", c.source(), e),
    }
}

#[cfg(test)]
mod tests;
