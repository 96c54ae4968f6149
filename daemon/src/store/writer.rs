//! The writer: turns batches of samples into raw chunks and rollups, one transaction per
//! flush.
//!
//! Samples wait in memory until [`Writer::flush`]. A flush appends them to each series'
//! open chunk, updates the open hour's rollup (and its minutes, with energy integrated
//! between continuous power samples and the time that covers), and writes every changed
//! open chunk and open hour in one transaction, so a killed process loses at most the batch
//! it was flushing. Chunks that close are appended to `raw_chunk` (`raw_detail_chunk` for
//! per-core CPU series, which are pruned sooner).
//!
//! A pair of power samples is integrated by the series' rule ([`super::integrate::Rule`]):
//! a held reading (`hold`) stands until the next for at most its `max_hold`, and a longer
//! silence ends in a gap the writer records; a `sampled` pair is continuous when no
//! recorded gap overlaps it and it is no
//! longer than [`super::integrate::max_pair_ms`] of the series' spacing: the one configured
//! for its source ([`StoreOptions::spacing_ms`]), else the one its batch states (a fleet
//! host's publish interval), else the median of the series' last few sample intervals. The
//! pair that straddles a restart of the writer is judged like any other, so a fleet
//! collector's restart costs its hosts no energy; the daemon records its own downtime as a
//! gap.
//!
//! Each series is stored in time order: a sample whose timestamp is not after the newest
//! one stored for its series (the wall clock stepped back, or a fleet message came twice)
//! is dropped, counted in [`FlushStats::stale`] and logged once per flush and series, so a
//! repeated hour is kept once in raw data as it is in the rollups. Times are UTC ms,
//! energy Wh.
//!
//! A flush that fails (disk full, read-only, I/O error) loses nothing at once: its samples
//! stay queued and go into the next attempt, within [`StoreOptions::max_held_bytes`] of
//! memory; past that the oldest are dropped, counted and logged ([`super::health`]).
//! Before and after each write the writer checks that its path still leads to the file it
//! has open; a file (or directory) deleted or replaced while in use is opened anew at its
//! path, so that samples are not written into a file nobody can read. A row that cannot be
//! decoded is set aside into `quarantine` ([`super::quarantine`]) instead of failing every
//! flush.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;
use wattson_collectors::SourceId;

use wattson_collectors::{Metric, Sample};

use super::health::HealthBoard;
use super::integrate::Readings;
use super::lock::WriterLock;
use super::pending::{Pending, PendingQueue};
use super::quarantine::Quarantined;
use super::{CHUNK_MS, Store, StoreError, StoreOptions, dequantise, floor_to, quantise};

mod chunks;
mod counted;
mod declared;
mod hours;
mod recovery;
mod retention;
mod series_state;

use chunks::{OpenChunk, write_open};
use series_state::{SeriesIndex, SeriesState};

/// What one flush wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// Samples stored.
    pub samples: usize,
    /// Samples dropped because their value was not finite.
    pub rejected: usize,
    /// Samples dropped because their timestamp was before the newest stored one of their
    /// series.
    pub stale: usize,
    /// Samples not stored again because their series holds one at their timestamp (the
    /// newest, or one in the open chunk).
    pub repeated: usize,
    /// Gaps recorded.
    pub gaps: usize,
}

/// Ingests samples into a [`Store`]; owned by one thread (see [`super::StoreHandle`]).
pub struct Writer {
    store: Store,
    options: StoreOptions,
    pending: PendingQueue,
    index: SeriesIndex,
    states: Vec<SeriesState>,
    gaps: HashMap<(String, SourceId), Vec<(i64, i64)>>,
    /// How each source's power readings stand where declared (this host's from the
    /// configuration, a fleet host's from its states), by host and source.
    declared: HashMap<(String, SourceId), (Readings, Option<i64>)>,
    /// Sources whose recorded gaps are all settled against their counter
    /// ([`counted`]), by host and source: not asked again until a gap is recorded.
    counted_settled: std::collections::HashSet<(String, SourceId)>,
    newest_ms: i64,
    /// Series-flushes that dropped samples as not after the newest stored (for the log).
    stale_flushes: u64,
    last_prune: Option<Instant>,
    /// The writer lock, when this writer took one ([`super::StoreHandle::spawn`]); taken
    /// again when the file is opened anew.
    lock: Option<WriterLock>,
    board: Arc<HealthBoard>,
    /// Rows set aside in the flush under way: counted and logged once it commits.
    quarantined: Vec<Quarantined>,
    /// The file is gone and not yet opened anew (logged once).
    reopening: bool,
    /// The last flush failed.
    failing_now: bool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.store.path())
            .field("pending_samples", &self.pending.samples())
            .finish_non_exhaustive()
    }
}

impl Writer {
    pub fn new(store: Store, options: StoreOptions) -> Writer {
        let declared = options
            .readings
            .iter()
            .map(|(source, r)| ((options.host.clone(), source.clone()), *r))
            .collect();
        Writer {
            declared,
            store,
            options,
            pending: PendingQueue::default(),
            index: HashMap::new(),
            states: Vec::new(),
            gaps: HashMap::new(),
            counted_settled: std::collections::HashSet::new(),
            newest_ms: i64::MIN,
            stale_flushes: 0,
            last_prune: None,
            lock: None,
            board: Arc::default(),
            quarantined: Vec::new(),
            reopening: false,
            failing_now: false,
        }
    }

    /// The options it writes with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The store, for reads.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Samples (and gaps) waiting for the next flush.
    pub fn pending(&self) -> usize {
        self.pending.samples()
    }

    /// Queues samples of `host` (the configured host when `None`).
    pub fn push(&mut self, host: Option<String>, samples: Vec<Sample>) {
        self.queue(Pending::Samples(host, samples));
    }

    /// Queues samples or a gap (whose ends may come in either order).
    pub(super) fn queue(&mut self, item: Pending) {
        let item = match item {
            Pending::Gap {
                host,
                source,
                start_ms,
                end_ms,
                reason,
                away,
            } => Pending::Gap {
                host,
                source,
                start_ms: start_ms.min(end_ms),
                end_ms: end_ms.max(start_ms),
                reason,
                away,
            },
            other => other,
        };
        self.pending.push(item);
        self.hold_within_bound();
    }

    /// Queues a gap `[start_ms, end_ms]` of `source` on `host` (configured host if `None`).
    pub fn record_gap(
        &mut self,
        host: Option<String>,
        source: &SourceId,
        start_ms: i64,
        end_ms: i64,
        reason: &str,
    ) {
        self.queue(Pending::Gap {
            host,
            source: source.clone(),
            start_ms,
            end_ms,
            reason: reason.to_owned(),
            away: None,
        });
    }

    /// Queues a gap `[start_ms, end_ms]` of `source` (configured host) over which the host
    /// was `away` (asleep, or off), as the kernel told it.
    pub fn record_away(
        &mut self,
        source: &SourceId,
        (start_ms, end_ms): (i64, i64),
        away: super::Away,
        reason: &str,
    ) {
        self.queue(Pending::Gap {
            host: None,
            source: source.clone(),
            start_ms,
            end_ms,
            reason: reason.to_owned(),
            away: Some(away),
        });
    }

    fn write(&mut self, pending: &PendingQueue) -> Result<FlushStats, StoreError> {
        let conn = &self.store.conn;
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.store.sql(e))?;
        match self.write_in_transaction(pending) {
            Ok(stats) => {
                let conn = &self.store.conn;
                conn.execute_batch("COMMIT")
                    .map_err(|e| self.store.sql(e))?;
                Ok(stats)
            }
            Err(e) => {
                // The error that matters is the first one; a failed rollback leaves the
                // transaction to be rolled back when the connection closes.
                let _ = self.store.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn write_in_transaction(&mut self, pending: &PendingQueue) -> Result<FlushStats, StoreError> {
        let mut stats = FlushStats::default();
        let mut stale: BTreeMap<usize, usize> = BTreeMap::new();
        let mut counters = std::collections::HashSet::new();
        // Gaps first, so that samples after a gap in the same flush are not integrated.
        for p in pending.iter() {
            if let Pending::Gap {
                host,
                source,
                start_ms,
                end_ms,
                reason,
                away,
            } = p
            {
                let host = host.as_deref().unwrap_or(&self.options.host).to_owned();
                self.insert_gap(&host, source, (*start_ms, *end_ms), reason, *away)?;
                stats.gaps += 1;
            }
            if let Pending::Readings {
                host,
                source,
                readings,
                max_hold_ms,
            } = p
            {
                let host = host.as_deref().unwrap_or(&self.options.host).to_owned();
                self.declare(host, source, *readings, *max_hold_ms)?;
            }
        }
        for p in pending.iter() {
            if let Pending::Samples(host, samples) = p {
                let host = host.as_deref().unwrap_or(&self.options.host).to_owned();
                for sample in samples {
                    if !sample.value.is_finite() {
                        stats.rejected += 1;
                        continue;
                    }
                    let i = self.state_index(&host, sample)?;
                    if self.ingest(i, sample.ts_ms, sample.value)? {
                        stats.samples += 1;
                        if sample.metric == Metric::EnergyCounter && sample.channel.is_empty() {
                            counters.insert(i);
                        }
                    } else if self.states[i].holds(sample.ts_ms) {
                        // A sample of this instant is stored already (a redelivery, a
                        // retried batch).
                        stats.repeated += 1;
                    } else {
                        stats.stale += 1;
                        *stale.entry(i).or_insert(0_usize) += 1;
                    }
                }
            }
        }
        // A counter reading after a recorded gap settles the gap's counted energy.
        self.settle_counted_gaps(&counters)?;
        for (i, n) in stale {
            // Once per flush at first, then at powers of two: a fleet host replaying its
            // states out of order would otherwise write a line per message.
            self.stale_flushes += 1;
            let k = self.stale_flushes;
            if k > 5 && !k.is_power_of_two() {
                continue;
            }
            let series_state = &self.states[i];
            let s = &series_state.series;
            tracing::warn!(
                "dropped {n} samples of {}/{} {}{} not after the newest stored at {} ms (the \
                 clock stepped back, or samples came twice; {k} such drops so far)",
                s.host,
                s.source,
                s.metric.as_str(),
                if s.channel.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", s.channel)
                },
                series_state.newest_ms.unwrap_or_default(),
            );
        }
        for state in &mut self.states {
            if state.minutes
                && let Some(spacing) = state.spacing.to_store()
            {
                self.store.set_spacing(state.series.id, spacing)?;
                state.spacing.stored = Some(spacing);
            }
            if let Some(open) = state.open.as_mut().filter(|o| o.dirty) {
                write_open(&self.store, state.series.id, open, state.scale)?;
                open.dirty = false;
            }
            if let Some(hour) = state.hour.as_mut().filter(|h| h.dirty) {
                self.store
                    .put_hour_rollup(&state.series, &hour.to_rollup(state.minutes))?;
                hour.dirty = false;
            }
        }
        Ok(stats)
    }

    /// Stores one sample; `false` (nothing stored) when `ts` is not after the newest
    /// timestamp of the series.
    fn ingest(&mut self, i: usize, ts: i64, value: f64) -> Result<bool, StoreError> {
        let state = &mut self.states[i];
        if state.newest_ms.is_some_and(|newest| ts <= newest) {
            return Ok(false);
        }
        state.newest_ms = Some(ts);
        self.newest_ms = self.newest_ms.max(ts);
        let q = quantise(value, state.scale);
        let value = dequantise(q, state.scale);
        let start_ms = floor_to(ts, CHUNK_MS);
        match state.open.as_mut() {
            // Later than everything stored, so never in a chunk before the open one.
            Some(open) if open.start_ms == start_ms => open.push(ts, q),
            _ => {
                if let Some(old) = state.open.take() {
                    let points: Vec<(i64, i64)> = old.ts.into_iter().zip(old.q).collect();
                    let (id, detail, scale) = (state.series.id, state.detail, state.scale);
                    let series = state.series.clone();
                    self.merge_closed(&series, detail, old.start_ms, &points, scale)?;
                    self.store
                        .conn
                        .prepare_cached("DELETE FROM raw_open WHERE series_id = ?1")
                        .and_then(|mut s| s.execute([id]))
                        .map_err(|e| self.store.sql(e))?;
                }
                let mut open = OpenChunk {
                    start_ms,
                    ts: Vec::new(),
                    q: Vec::new(),
                    dirty: true,
                };
                open.push(ts, q);
                self.states[i].open = Some(open);
            }
        }
        if self.states[i].hourly {
            self.roll_up(i, ts, value)?;
        }
        Ok(true)
    }
}
