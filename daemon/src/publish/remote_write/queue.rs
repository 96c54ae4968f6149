//! The store as remote write's durable queue: the next batch after each series' cursor
//! ([`next_batch`]), and the cursors moved on once the receiver answered ([`commit`]); the
//! names each series is sent under are [`super::families`]'. Everything here runs on the
//! store's writer thread (`StoreHandle::query`), so the cursor tables are written by the one
//! writer.
//!
//! A series is sent in time order from its cursor (the newest sample the receiver took or
//! refused) on; a series without a cursor from its oldest raw sample. The wall source's
//! power also gives `wattson_energy_joules_total`: the trapezoidal integral of its stored
//! samples over the pairs the store integrates (`store::integrate`), from its first sample
//! sent, carried in the cursor across restarts.

use rusqlite::{OptionalExtension as _, params};
use wattson_collectors::{Metric, SourceId};

use super::families::{family, labels};
pub use super::gaps::GAP_FAMILY;
use super::proto::{Sample, TimeSeries};
use crate::store::{CHUNK_MS, HOUR_MS, Series, Store, StoreError, floor_to, integrate};

/// J per Wh.
const J_PER_WH: f64 = 3600.0;
/// How far one read of a series looks ahead of its cursor, ms.
const READ_WINDOW_MS: i64 = 4 * CHUNK_MS;

/// One series' part of a batch: what is sent and where its cursor goes once answered.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub series_id: i64,
    /// The newest sample's time in this batch: the cursor once the receiver answers.
    pub to_ms: i64,
    /// The energy integral up to `to_ms`, J, and the watts at `to_ms` (the wall source).
    pub joules: f64,
    pub last_watts: Option<f64>,
}

/// Where a batch moves the cursors once answered.
#[derive(Debug, Clone, Default)]
pub struct Cursors {
    pub series: Vec<Outgoing>,
    /// The newest gap row in the batch.
    pub gap_id: Option<i64>,
}

/// The next samples to send.
#[derive(Debug, Default)]
pub struct Batch {
    pub timeseries: Vec<TimeSeries>,
    pub cursors: Cursors,
    pub samples: usize,
    /// The cap was reached: more is waiting.
    pub more: bool,
    /// Stored samples not yet sent.
    pub pending: u64,
    /// Hours sent as their rollup's mean (older than the raw retention).
    pub rollups: usize,
}

/// A series' cursor: the newest sample sent, the energy integral to it and its watts.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    sent_ts_ms: i64,
    joules: f64,
    last_watts: Option<f64>,
}

/// Every cursor of `endpoint`, by series, in one read.
fn cursors(
    store: &Store,
    endpoint: &str,
) -> Result<std::collections::HashMap<i64, Cursor>, StoreError> {
    store
        .conn()
        .prepare_cached(
            "SELECT series_id, sent_ts_ms, joules, last_watts FROM remote_write_cursor
             WHERE endpoint = ?1",
        )
        .and_then(|mut s| {
            s.query_map([endpoint], |r| {
                Ok((
                    r.get(0)?,
                    Cursor {
                        sent_ts_ms: r.get(1)?,
                        joules: r.get(2)?,
                        last_watts: r.get(3)?,
                    },
                ))
            })?
            .collect()
        })
        .map_err(|e| sql(store, e))
}

pub fn sql(store: &Store, source: rusqlite::Error) -> StoreError {
    StoreError::Sqlite {
        path: store.path().to_owned(),
        source,
    }
}

/// The next batch for `endpoint`: at most `cap` samples, each series' in time order after
/// its cursor. `wall` is the source whose power gives the energy counter.
pub fn next_batch(
    store: &Store,
    endpoint: &str,
    wall: Option<&SourceId>,
    cap: usize,
) -> Result<Batch, StoreError> {
    let mut batch = Batch::default();
    super::gaps::after_cursor(store, endpoint, cap, &mut batch)?;
    let cursors = cursors(store, endpoint)?;
    for series in store.series()? {
        let Some((name, label_pairs, scale)) = family(&series) else {
            continue;
        };
        let Some(newest) = store.newest_ms(&series)? else {
            continue;
        };
        let cur = cursors.get(&series.id).copied();
        let from = match cur {
            Some(c) => c.sent_ts_ms.saturating_add(1),
            None => store.raw_from_ms(&series)?.unwrap_or(newest),
        };
        if from > newest {
            continue;
        }
        // Caught up but for the last read window: what waits is what that window holds
        // (counted below); behind, the stored samples are counted from the chunks.
        let behind = newest - from >= READ_WINDOW_MS;
        if behind {
            batch.pending += pending_in(store, &series, from)?.0;
        }
        let room = cap.saturating_sub(batch.samples);
        let is_wall = series.metric == Metric::Power
            && series.channel.is_empty()
            && wall.is_some_and(|w| *w == series.source);
        // The energy counter's samples take room too.
        let room = if is_wall { room / 2 } else { room };
        if room == 0 {
            batch.more = true;
            break;
        }
        // Past the raw retention the raw samples are gone: the hours between the cursor and
        // the oldest raw sample go as their means, each at its hour's middle.
        // (Only a cursor more than an hour behind can be past it: `[storage]` retention is an
        // hour at least.)
        let raw_from = match cur {
            Some(c) if newest - c.sent_ts_ms > HOUR_MS => store.raw_from_ms(&series)?,
            _ => None,
        };
        let (mut points, rollup_joules) = match (cur, raw_from) {
            (Some(c), Some(raw_from)) if floor_to(raw_from, HOUR_MS) > c.sent_ts_ms => {
                // The hours after the cursor's (whose first part went raw).
                let after = floor_to(c.sent_ts_ms, HOUR_MS) + HOUR_MS;
                let hours = store.hour_rollups(&series, after, floor_to(raw_from, HOUR_MS))?;
                let hours: Vec<_> = hours.into_iter().take(room).collect();
                if hours.is_empty() {
                    (read_ahead(store, &series, from, newest)?, None)
                } else {
                    batch.rollups += hours.len();
                    let joules: Vec<f64> = hours
                        .iter()
                        .map(|h| h.energy_wh.unwrap_or(0.0) * J_PER_WH)
                        .collect();
                    let points = hours
                        .iter()
                        .map(|h| (h.bucket_ms + HOUR_MS / 2, h.mean))
                        .collect();
                    batch.more = true;
                    (points, Some(joules))
                }
            }
            _ => (read_ahead(store, &series, from, newest)?, None),
        };
        if !behind {
            batch.pending += points.len() as u64;
        }
        if points.len() > room {
            points.truncate(room);
            batch.more = true;
        }
        let Some(&(to_ms, last)) = points.last() else {
            continue;
        };
        // More of this series beyond the window read.
        batch.more |= to_ms < newest;
        let mut out = Outgoing {
            series_id: series.id,
            to_ms,
            joules: cur.map_or(0.0, |c| c.joules),
            last_watts: None,
        };
        if is_wall {
            let energy = match &rollup_joules {
                Some(joules) => rollup_energy(&points, joules, &mut out),
                None => energy_samples(store, &series, cur, &points, &mut out)?,
            };
            batch.samples += energy.len();
            batch.timeseries.push(TimeSeries {
                labels: labels(
                    "wattson_energy_joules_total",
                    &[
                        ("host", series.host.clone()),
                        ("source", series.source.to_string()),
                    ],
                ),
                samples: energy,
            });
            // A rollup's mean is no sample to integrate the next raw one from.
            out.last_watts = rollup_joules.is_none().then_some(last);
        }
        batch.samples += points.len();
        batch.timeseries.push(TimeSeries {
            labels: labels(name, &label_pairs),
            samples: points
                .iter()
                .map(|&(t, v)| Sample {
                    value: v * scale,
                    timestamp: t,
                })
                .collect(),
        });
        batch.cursors.series.push(out);
    }
    Ok(batch)
}

/// The raw samples of `series` from `from` on, read a window at a time until one holds any
/// (a long outage is stepped over), at most one window of them.
fn read_ahead(
    store: &Store,
    series: &Series,
    mut from: i64,
    newest: i64,
) -> Result<Vec<(i64, f64)>, StoreError> {
    while from <= newest {
        let to = from.saturating_add(READ_WINDOW_MS);
        let points = store.raw_points(series, from, to)?;
        if !points.is_empty() {
            return Ok(points);
        }
        from = to;
    }
    Ok(Vec::new())
}

/// The energy counter at each of `points`, J, continuing the integral of `cur`; `out`
/// gets the integral at the last point.
fn energy_samples(
    store: &Store,
    series: &Series,
    cur: Option<Cursor>,
    points: &[(i64, f64)],
    out: &mut Outgoing,
) -> Result<Vec<Sample>, StoreError> {
    // A series of unknown spacing bridges every pair, as before its spacing was stored.
    let rule = match series.spacing_ms {
        None if series.readings == integrate::Readings::Sampled => integrate::Rule {
            readings: integrate::Readings::Sampled,
            max_ms: i64::MAX,
        },
        _ => series.rule(),
    };
    let first = cur.map_or(points[0].0, |c| c.sent_ts_ms);
    let last = points[points.len() - 1].0;
    let gaps = store.gap_spans(series, (first, last.saturating_add(1)))?;
    let mut prev = cur.and_then(|c| c.last_watts.map(|w| (c.sent_ts_ms, w)));
    let mut joules = out.joules;
    let mut samples = Vec::with_capacity(points.len());
    for &(t, w) in points {
        if let Some((t0, w0)) = prev
            && t > t0
            && let Some(piece) = rule.piece((t0, w0), (t, w), &gaps)
        {
            joules += piece.wh_in(t0, t) * J_PER_WH;
        }
        samples.push(Sample {
            value: joules,
            timestamp: t,
        });
        prev = Some((t, w));
    }
    out.joules = joules;
    Ok(samples)
}

/// The energy counter at each hour's middle, J: `out`'s integral plus each hour's stored
/// energy in turn.
fn rollup_energy(points: &[(i64, f64)], joules: &[f64], out: &mut Outgoing) -> Vec<Sample> {
    let mut total = out.joules;
    let samples = points
        .iter()
        .zip(joules)
        .map(|(&(t, _), j)| {
            total += j;
            Sample {
                value: total,
                timestamp: t,
            }
        })
        .collect();
    out.joules = total;
    samples
}

/// How a batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// Stored by the receiver.
    Accepted,
    /// Refused for good (a 400): skipped past.
    Refused,
}

/// Moves the cursors of `batch` on and counts it, in one transaction.
pub fn commit(
    store: &Store,
    endpoint: &str,
    cursors: &Cursors,
    samples: usize,
    answered: Answered,
    now_ms: i64,
    error: Option<&str>,
) -> Result<(), StoreError> {
    let tx = store
        .conn()
        .unchecked_transaction()
        .map_err(|e| sql(store, e))?;
    // Cached statements: a commit follows every request, and compiling its SQL each time
    // was a measurable part of what remote write costs the host.
    for c in &cursors.series {
        cached(
            &tx,
            "INSERT INTO remote_write_cursor (endpoint, series_id, sent_ts_ms, joules, last_watts)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (endpoint, series_id) DO UPDATE SET
               sent_ts_ms = excluded.sent_ts_ms, joules = excluded.joules,
               last_watts = excluded.last_watts",
            params![endpoint, c.series_id, c.to_ms, c.joules, c.last_watts],
        )
        .map_err(|e| sql(store, e))?;
    }
    if let Some(id) = cursors.gap_id {
        cached(
            &tx,
            "INSERT INTO remote_write_gap_cursor (endpoint, gap_id) VALUES (?1, ?2)
             ON CONFLICT (endpoint) DO UPDATE SET gap_id = excluded.gap_id",
            params![endpoint, id],
        )
        .map_err(|e| sql(store, e))?;
    }
    let (sent, rejected) = match answered {
        Answered::Accepted => (samples as i64, 0),
        Answered::Refused => (0, samples as i64),
    };
    cached(
        &tx,
        "INSERT INTO remote_write_endpoint (endpoint, samples_sent, samples_rejected,
           failed_requests, last_success_ms, last_error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (endpoint) DO UPDATE SET
           samples_sent = samples_sent + excluded.samples_sent,
           samples_rejected = samples_rejected + excluded.samples_rejected,
           failed_requests = failed_requests + excluded.failed_requests,
           last_success_ms = coalesce(excluded.last_success_ms, last_success_ms),
           last_error = coalesce(excluded.last_error, last_error)",
        params![
            endpoint,
            sent,
            rejected,
            i64::from(answered == Answered::Refused),
            (answered == Answered::Accepted).then_some(now_ms),
            error
        ],
    )
    .map_err(|e| sql(store, e))?;
    tx.commit().map_err(|e| sql(store, e))
}

/// Runs `sql` with `params` through the connection's statement cache.
fn cached(
    tx: &rusqlite::Transaction<'_>,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    tx.prepare_cached(sql)?.execute(params)
}

/// Counts a request that failed and will be sent again.
pub fn record_failure(store: &Store, endpoint: &str, error: &str) -> Result<(), StoreError> {
    store
        .conn()
        .execute(
            "INSERT INTO remote_write_endpoint (endpoint, failed_requests, last_error)
             VALUES (?1, 1, ?2)
             ON CONFLICT (endpoint) DO UPDATE SET
               failed_requests = failed_requests + 1, last_error = excluded.last_error",
            params![endpoint, error],
        )
        .map(drop)
        .map_err(|e| sql(store, e))
}

/// The stored samples of `series` from `from` on, and the oldest one's time (about: the
/// start of its chunk where the first chunk holds none): the chunk holding `from` decoded,
/// the later ones counted from their headers.
fn pending_in(store: &Store, series: &Series, from: i64) -> Result<(u64, Option<i64>), StoreError> {
    let lo = crate::store::floor_to(from, CHUNK_MS);
    let first = store.raw_points(series, from, lo.saturating_add(CHUNK_MS))?;
    let (later, later_start): (i64, Option<i64>) = store
        .conn()
        .prepare_cached(
            "SELECT coalesce(sum(n), 0), min(start_ms) FROM (
               SELECT n, start_ms FROM raw_chunk WHERE series_id = ?1 AND start_ms > ?2
               UNION ALL SELECT n, start_ms FROM raw_detail_chunk
                 WHERE series_id = ?1 AND start_ms > ?2
               UNION ALL SELECT n, start_ms FROM raw_open WHERE series_id = ?1 AND start_ms > ?2)",
        )
        .and_then(|mut s| s.query_row(params![series.id, lo], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(|e| sql(store, e))?;
    let oldest = first.first().map(|p| p.0).or(later_start);
    Ok((first.len() as u64 + later as u64, oldest))
}

/// The stored samples `endpoint` has not been sent,
/// and the oldest of them, UTC ms (`None` when caught up).
pub fn backlog(store: &Store, endpoint: &str) -> Result<(u64, Option<i64>), StoreError> {
    let mut pending = 0u64;
    let mut oldest: Option<i64> = None;
    let cursors = cursors(store, endpoint)?;
    for series in store.series()? {
        if family(&series).is_none() {
            continue;
        }
        let Some(newest) = store.newest_ms(&series)? else {
            continue;
        };
        let from = match cursors.get(&series.id) {
            Some(c) => c.sent_ts_ms.saturating_add(1),
            None => store.raw_from_ms(&series)?.unwrap_or(newest),
        };
        if from > newest {
            continue;
        }
        let (n, first) = pending_in(store, &series, from)?;
        pending += n;
        if let Some(first) = first {
            oldest = Some(oldest.map_or(first, |o| o.min(first)));
        }
    }
    Ok((pending, oldest))
}

/// What an endpoint has done, as stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointTotals {
    pub samples_sent: u64,
    pub samples_rejected: u64,
    pub failed_requests: u64,
    pub last_success_ms: Option<i64>,
    pub last_error: Option<String>,
}

/// The stored totals of `endpoint` (zero before its first request).
pub fn totals(store: &Store, endpoint: &str) -> Result<EndpointTotals, StoreError> {
    store
        .conn()
        .prepare_cached(
            "SELECT samples_sent, samples_rejected, failed_requests, last_success_ms, last_error
             FROM remote_write_endpoint WHERE endpoint = ?1",
        )
        .and_then(|mut s| {
            s.query_row([endpoint], |r| {
                Ok(EndpointTotals {
                    samples_sent: r.get::<_, i64>(0)? as u64,
                    samples_rejected: r.get::<_, i64>(1)? as u64,
                    failed_requests: r.get::<_, i64>(2)? as u64,
                    last_success_ms: r.get(3)?,
                    last_error: r.get(4)?,
                })
            })
            .optional()
        })
        .map(Option::unwrap_or_default)
        .map_err(|e| sql(store, e))
}
