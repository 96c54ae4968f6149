//! The daemon's live view: latest readings and running means since the last publish, shared
//! between the sampler (writer) and the outputs (readers: MQTT, HTTP, the control socket),
//! and the daemon's [`health`]. It sits below both: the sampler (`runtime`) fills it, the
//! outputs (`publish`) read it, and neither imports the other for it.
//!
//! It is also the publishers' clock: the sampler's own tick says when a publish interval
//! has passed ([`LiveState::publish_every`], [`LiveState::publish_due`]), so publishing
//! costs no timer wake-ups of its own.
//!
//! Each pass is also offered, whole, to the control socket's subscribers
//! ([`LiveState::feed`]); with none connected that costs one atomic load.

pub mod energy;
pub mod feed;
pub mod health;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use wattson_collectors::{Metric, Sample};

/// Latest value per (source, metric, channel) and accumulators for interval means.
#[derive(Default)]
pub struct LiveState {
    inner: Mutex<Inner>,
    /// Publish interval, ms; 0 while nobody publishes.
    publish_period_ms: AtomicI64,
    /// Sample time (UTC ms, on the interval's grid) from which the next publish is due.
    next_publish_ms: AtomicI64,
    publish: tokio::sync::Notify,
    /// Publishes begun ([`LiveState::publish_now`]): the figures a publish waits for count
    /// the store as it stood at the latest of them.
    publishes: std::sync::atomic::AtomicU64,
    /// Asks for fresh store figures before each publish (the ledger feed's refresh).
    before_publish: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Sample time (UTC ms) of the pass whose publish asked for figures not yet answered;
    /// 0 when none is outstanding.
    asked_ms: AtomicI64,
    /// Sample time of the newest pass observed.
    pass_ms: AtomicI64,
    /// The newest publish the store's figures count ([`LiveState::figures_answer`]).
    answered: std::sync::atomic::AtomicU64,
    feed: feed::SampleFeed,
    /// Whether per-core busy shares and frequencies are kept (for `/metrics`).
    keep_cores: std::sync::atomic::AtomicBool,
    /// The wall source whose energy is integrated live ([`LiveState::count_energy_of`]).
    wall: std::sync::OnceLock<SourceId>,
    /// The largest total energy served so far, kWh: a counter never goes down between two
    /// reads ([`LiveState::never_less`]).
    served_kwh: Mutex<f64>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Device health counters by device id.
    counters: BTreeMap<String, wattson_collectors::DeviceCounters>,
    /// Each published series by source, metric and channel (nested, so that a pass finds
    /// its series without building a key: a sample's fields are borrowed for the lookups).
    series: BTreeMap<SourceId, BTreeMap<Metric, BTreeMap<String, Series>>>,
    /// Latest per-core busy share and frequency (`cpuN`), while [`LiveState::keep_per_core`].
    cores: BTreeMap<Metric, BTreeMap<String, (i64, f64)>>,
    /// Where the interval of the next means starts: the newest sample time when the last
    /// means were taken (0 before the first).
    means_from_ms: i64,
    /// The newest sample time recorded.
    newest_ms: i64,
    /// The wall source's energy, sample by sample ([`energy`]).
    energy: energy::EnergyTrail,
    /// Sources whose readings stand until the next (`hold`), with their `max_hold`, ms.
    held: BTreeMap<SourceId, i64>,
    /// Where each estimated source's readings come from, in words (the calibration it
    /// applies), as the sampler runs it.
    bases: BTreeMap<SourceId, String>,
}

/// One series' latest reading and, since the last `take_means`, its sum and count and its
/// time-weighted sum: each reading stands for the time since the one before it (within the
/// interval), or, for a source whose readings are held (`hold`: a plug that reports on
/// change), until the next one for at most its `max_hold`; so a plug that reports on change
/// is not weighed by how often it reported.
#[derive(Debug, Default, Clone, Copy)]
struct Series {
    /// `max_hold`, ms, where its readings are held.
    hold_ms: Option<i64>,
    /// 0 before the first reading.
    ts_ms: i64,
    value: f64,
    sum: f64,
    n: u32,
    /// Sum of value x ms it stands for, and those ms.
    weighted: f64,
    weighted_ms: i64,
}

impl Series {
    /// Counts the latest reading as standing from `from` (or its own time) until `until`,
    /// at most `max_hold_ms` after its time.
    fn stand_until(&mut self, until: i64, max_hold_ms: i64, from: i64) {
        let end = until.min(self.ts_ms.saturating_add(max_hold_ms));
        let ms = (end - self.ts_ms.max(from)).max(0);
        self.weighted += self.value * ms as f64;
        self.weighted_ms += ms;
    }

    /// Whether it has a mean for the interval: a reading in it, or a held one standing.
    fn has_mean(&self) -> bool {
        self.n > 0 || (self.hold_ms.is_some() && self.weighted_ms > 0)
    }

    /// The interval's mean: time-weighted where readings span time, else the plain mean
    /// (a single first reading).
    fn mean(&self) -> f64 {
        if self.weighted_ms > 0 {
            self.weighted / self.weighted_ms as f64
        } else {
            self.sum / f64::from(self.n)
        }
    }
}

impl Inner {
    fn series_mut(&mut self, s: &Sample) -> &mut Series {
        let hold_ms = self.held.get(&s.source).copied();
        if !self.series.contains_key(&s.source) {
            self.series.insert(s.source.clone(), BTreeMap::new());
        }
        let metrics = self.series.get_mut(&s.source).expect("inserted above");
        let channels = metrics.entry(s.metric).or_default();
        if !channels.contains_key(s.channel.as_str()) {
            channels.insert(
                s.channel.clone(),
                Series {
                    hold_ms,
                    ..Series::default()
                },
            );
        }
        channels
            .get_mut(s.channel.as_str())
            .expect("inserted above")
    }

    /// Every series with its key, in (source, metric, channel) order.
    fn each(&self) -> impl Iterator<Item = (&SourceId, Metric, &String, &Series)> {
        self.series.iter().flat_map(|(source, metrics)| {
            metrics.iter().flat_map(move |(metric, channels)| {
                channels
                    .iter()
                    .map(move |(channel, series)| (source, *metric, channel, series))
            })
        })
    }
}

impl std::fmt::Debug for LiveState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveState")
            .field("publish_period_ms", &self.publish_period_ms)
            .field("publishes", &self.publishes)
            .finish_non_exhaustive()
    }
}

/// A reading as seen by publishers (and the control socket's `status`, which carries it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LiveReading {
    pub source: SourceId,
    pub metric: Metric,
    pub channel: String,
    pub ts_ms: i64,
    pub value: f64,
}

impl LiveState {
    /// Record one sampling pass's samples (called by the sampler only, once per pass, so
    /// that a publish never splits a pass). Returns whether they are the first of a new
    /// publish interval: the sampler then hands its buffer to the store and calls
    /// [`LiveState::publish_now`].
    #[must_use]
    pub fn observe(&self, samples: &[Sample]) -> bool {
        self.record(samples);
        self.feed.publish(samples);
        let period = self.publish_period_ms.load(Ordering::Relaxed);
        let newest = samples.iter().map(|s| s.ts_ms).max();
        if let Some(ts) = newest {
            self.pass_ms.store(ts, Ordering::Relaxed);
            self.publish_if_figures_late(ts);
        }
        if let Some(ts) = newest
            && period > 0
        {
            let next = self.next_publish_ms.load(Ordering::Relaxed);
            if ts >= next {
                self.next_publish_ms
                    .store((ts.div_euclid(period) + 1) * period, Ordering::Relaxed);
                // The first samples only start the first interval.
                return next > 0;
            }
        }
        false
    }

    /// Begin a publish. Where the store's figures are asked for first
    /// ([`LiveState::before_publish`]), their arrival wakes the publisher (one wake-up of
    /// the runtime, not two), and a later pass wakes [`LiveState::publish_due`] only if they
    /// have not come within [`LiveState::figures_within`]; otherwise it wakes it now.
    pub fn publish_now(&self) {
        self.publishes.fetch_add(1, Ordering::Relaxed);
        if let Some(ask) = self.before_publish.get() {
            let pass = self.pass_ms.load(Ordering::Relaxed).max(1);
            self.asked_ms.store(pass, Ordering::Relaxed);
            ask();
        } else {
            self.publish.notify_one();
        }
    }

    /// The store's figures for publishes up to `publishes` are ready (the ledger feed's
    /// reads); the feed's watch channel carries them to the publisher.
    pub fn figures_answer(&self, publishes: u64) {
        self.answered.fetch_max(publishes, Ordering::Relaxed);
    }

    /// How long a publish waits for the store's figures before it goes out with the last
    /// ones (a slow store delays no state more): half the interval, at most a second.
    pub fn figures_within(&self) -> Duration {
        let period = self.publish_period_ms.load(Ordering::Relaxed).max(0) as u64;
        Duration::from_millis(period / 2).min(Duration::from_secs(1))
    }

    /// On the sampler's pass at sample time `ts_ms`: a publish whose figures are late by
    /// [`LiveState::figures_within`] goes out without them.
    fn publish_if_figures_late(&self, ts_ms: i64) {
        let asked = self.asked_ms.load(Ordering::Relaxed);
        if asked == 0 {
            return;
        }
        if self.answered.load(Ordering::Relaxed) >= self.publishes.load(Ordering::Relaxed) {
            self.asked_ms.store(0, Ordering::Relaxed);
            return;
        }
        let within = self.figures_within().as_millis() as i64;
        if ts_ms >= asked + within {
            self.asked_ms.store(0, Ordering::Relaxed);
            self.publish.notify_one();
        }
    }

    /// How many publishes have begun: store figures read after the latest count it.
    pub fn publishes(&self) -> u64 {
        self.publishes.load(Ordering::Relaxed)
    }

    /// What asks for fresh store figures before each publish (set once).
    pub fn before_publish(&self, ask: impl Fn() + Send + Sync + 'static) {
        let _ = self.before_publish.set(Box::new(ask));
    }

    /// Every sampling pass's samples, for the control socket's subscribers.
    pub fn feed(&self) -> &feed::SampleFeed {
        &self.feed
    }

    /// Publish every `period` of sample time, on that period's wall-clock grid.
    pub fn publish_every(&self, period: Duration) {
        let ms = i64::try_from(period.as_millis()).unwrap_or(i64::MAX).max(1);
        self.next_publish_ms.store(0, Ordering::Relaxed);
        self.publish_period_ms.store(ms, Ordering::Relaxed);
    }

    /// Completes when samples of a new publish interval have been observed (at once if that
    /// happened since the last call).
    pub async fn publish_due(&self) {
        self.publish.notified().await;
    }

    fn record(&self, samples: &[Sample]) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let keep_cores = self.keep_cores.load(Ordering::Relaxed);
        for s in samples {
            // Per-core detail is not published live, nor each cgroup's CPU time (groups come
            // and go); keep the state small.
            if channel::is_per_core(&s.channel) || s.metric == Metric::CgroupCpu {
                if keep_cores
                    && matches!(s.metric, Metric::CpuBusy | Metric::CoreFrequency)
                    && !s.channel.contains('/')
                {
                    let channels = inner.cores.entry(s.metric).or_default();
                    match channels.get_mut(s.channel.as_str()) {
                        Some(latest) => *latest = (s.ts_ms, s.value),
                        None => {
                            channels.insert(s.channel.clone(), (s.ts_ms, s.value));
                        }
                    }
                }
                continue;
            }
            if s.metric == Metric::Power
                && s.channel.is_empty()
                && self.wall.get().is_some_and(|w| *w == s.source)
            {
                inner.energy.observe(s.ts_ms, s.value);
            }
            let from = inner.means_from_ms;
            inner.newest_ms = inner.newest_ms.max(s.ts_ms);
            let series = inner.series_mut(s);
            if series.ts_ms > 0 {
                if let Some(max) = series.hold_ms {
                    // The reading before stands until this one, at most max_hold.
                    series.stand_until(s.ts_ms, max, from);
                } else {
                    let held = (s.ts_ms - series.ts_ms.max(from)).max(0);
                    series.weighted += s.value * held as f64;
                    series.weighted_ms += held;
                }
            }
            series.sum += s.value;
            series.n += 1;
            series.ts_ms = s.ts_ms;
            series.value = s.value;
        }
    }

    /// Keep the latest per-core busy share and frequency from now on (see
    /// [`LiveState::per_core`]).
    pub fn keep_per_core(&self) {
        self.keep_cores.store(true, Ordering::Relaxed);
    }

    /// The latest per-core busy share and frequency (source `cpu`, channel `cpuN`), once
    /// [`LiveState::keep_per_core`] was called.
    pub fn per_core(&self) -> Vec<LiveReading> {
        let Ok(inner) = self.inner.lock() else {
            return Vec::new();
        };
        inner
            .cores
            .iter()
            .flat_map(|(metric, channels)| {
                channels.iter().map(|(channel, (ts, v))| LiveReading {
                    source: SourceId::Cpu,
                    metric: *metric,
                    channel: channel.clone(),
                    ts_ms: *ts,
                    value: *v,
                })
            })
            .collect()
    }

    /// Record a source's device counters (called by the sampler only).
    pub fn set_counters(&self, counters: Vec<wattson_collectors::DeviceCounters>) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        for c in counters {
            inner.counters.insert(c.id.clone(), c);
        }
    }

    /// The estimated sources the sampler runs and where each one's readings come from
    /// (called by the sampler only, whenever its collectors change).
    pub fn set_bases(&self, bases: impl IntoIterator<Item = (SourceId, String)>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.bases = bases.into_iter().collect();
        }
    }

    /// Where `source`'s readings come from, when it is an estimate the sampler runs.
    pub fn basis_of(&self, source: &SourceId) -> Option<String> {
        self.inner
            .lock()
            .ok()
            .and_then(|i| i.bases.get(source).cloned())
    }

    /// Device health counters, by id.
    pub fn counters(&self) -> Vec<wattson_collectors::DeviceCounters> {
        self.inner
            .lock()
            .map(|i| i.counters.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The latest reading of every series.
    pub fn latest(&self) -> Vec<LiveReading> {
        let Ok(inner) = self.inner.lock() else {
            return Vec::new();
        };
        inner
            .each()
            .map(|(source, metric, channel, s)| LiveReading {
                source: source.clone(),
                metric,
                channel: channel.clone(),
                ts_ms: s.ts_ms,
                value: s.value,
            })
            .collect()
    }

    /// The sources whose readings stand until the next (`hold`), each with its `max_hold`,
    /// ms: their means (and the wall's live energy) weigh each reading by the time it
    /// stood. Set before the first samples.
    pub fn hold_readings_of(&self, held: impl IntoIterator<Item = (SourceId, i64)>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.held.extend(held);
        }
    }

    /// The sources whose readings are held, with their `max_hold`, ms.
    pub fn held(&self) -> Vec<(SourceId, i64)> {
        self.inner.lock().map_or_else(
            |_| Vec::new(),
            |i| i.held.iter().map(|(s, ms)| (s.clone(), *ms)).collect(),
        )
    }

    /// Integrate `source`'s power live, so the outputs' energy counters include the samples
    /// the store has not flushed yet ([`LiveState::energy_since`]), keeping as much of it
    /// as a store flushing every `flush_interval` may hold back, by the source's rule (its
    /// readings held, at most `held_ms`, where [`LiveState::hold_readings_of`] says). Set
    /// once.
    pub fn count_energy_of(&self, source: SourceId, flush_interval: Duration) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.energy.keep_for(flush_interval);
            let held = inner.held.get(&source).copied();
            inner.energy.hold_for(held);
        }
        let _ = self.wall.set(source);
    }

    /// Wh of the wall source after its sample at `ts_ms` (the newest the ledger's figures
    /// count; `None`: none stored yet) up to its newest sample, and that sample's time
    /// ([`energy::EnergyTrail::since`]).
    pub fn energy_since(&self, ts_ms: Option<i64>) -> Option<(f64, i64)> {
        self.inner.lock().ok()?.energy.since(ts_ms)
    }

    /// `kwh`, or the largest total served before when that is more: the store's integral
    /// and the live one may differ in the last decimals when a flush lands, and a counter
    /// that goes down by any amount reads as a reset to Prometheus.
    pub fn never_less(&self, kwh: f64) -> f64 {
        let Ok(mut served) = self.served_kwh.lock() else {
            return kwh;
        };
        *served = served.max(kwh);
        *served
    }

    /// Mean of each series since the previous call, each reading weighed by the time since
    /// the one before it ([`Series::mean`]), then reset the accumulators.
    pub fn take_means(&self) -> Vec<LiveReading> {
        let Ok(mut inner) = self.inner.lock() else {
            return Vec::new();
        };
        // A held reading stands on to the end of the interval (the newest sample), within
        // its max_hold; the next interval counts it from there.
        let (from, newest) = (inner.means_from_ms, inner.newest_ms);
        for series in inner
            .series
            .values_mut()
            .flat_map(BTreeMap::values_mut)
            .flat_map(BTreeMap::values_mut)
            .filter(|s| s.ts_ms > 0)
        {
            if let Some(max) = series.hold_ms {
                series.stand_until(newest, max, from);
            }
        }
        let means = inner
            .each()
            .filter(|(.., s)| s.has_mean())
            .map(|(source, metric, channel, s)| LiveReading {
                source: source.clone(),
                metric,
                channel: channel.clone(),
                ts_ms: s.ts_ms,
                value: s.mean(),
            })
            .collect();
        inner.means_from_ms = inner.newest_ms;
        for series in inner
            .series
            .values_mut()
            .flat_map(BTreeMap::values_mut)
            .flat_map(BTreeMap::values_mut)
        {
            series.sum = 0.0;
            series.n = 0;
            series.weighted = 0.0;
            series.weighted_ms = 0;
        }
        means
    }
}

#[cfg(test)]
mod tests;
