//! Read API of the store: series, latest values, raw samples, rollups and gaps. Energy and
//! money over a window are the ledger's (`crate::ledger`), composed from these.
//!
//! Times are UTC ms; ranges are half-open `[from_ms, to_ms)`; energy is in Wh.

use rusqlite::{OptionalExtension, params};
use wattson_collectors::Metric;
use wattson_collectors::SourceId;

use super::chunk_codec::{self, Order};
use super::integrate::Readings;
use super::{
    CHUNK_MS, HOUR_MS, MINUTE_MS, Series, Store, StoreError, dequantise, floor_to, resolution,
};

/// Selects series; `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesFilter {
    pub host: Option<String>,
    pub source: Option<SourceId>,
    pub metric: Option<Metric>,
    pub channel: Option<String>,
}

impl SeriesFilter {
    /// Matches every series.
    pub fn all() -> Self {
        SeriesFilter::default()
    }

    #[must_use]
    pub fn host(mut self, host: &str) -> Self {
        self.host = Some(host.to_owned());
        self
    }

    #[must_use]
    pub fn source(mut self, source: &SourceId) -> Self {
        self.source = Some(source.clone());
        self
    }

    #[must_use]
    pub fn metric(mut self, metric: Metric) -> Self {
        self.metric = Some(metric);
        self
    }

    #[must_use]
    pub fn channel(mut self, channel: &str) -> Self {
        self.channel = Some(channel.to_owned());
        self
    }

    fn matches(&self, s: &Series) -> bool {
        self.host.as_ref().is_none_or(|h| *h == s.host)
            && self.source.as_ref().is_none_or(|x| *x == s.source)
            && self.metric.is_none_or(|m| m == s.metric)
            && self.channel.as_ref().is_none_or(|c| *c == s.channel)
    }
}

/// The newest stored sample of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Latest {
    pub series: Series,
    /// UTC ms.
    pub ts_ms: i64,
    /// In the series' unit.
    pub value: f64,
}

/// Rollup bucket length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Minute,
    Hour,
}

/// One rollup bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollup {
    /// Bucket start, UTC ms.
    pub bucket_ms: i64,
    pub n: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Energy in the bucket, Wh (power series only).
    pub energy_wh: Option<f64>,
    /// The ms of the bucket `energy_wh` covers (power series; `None` where not stored).
    pub covered_ms: Option<i64>,
    /// Energy and covered time are estimates (see [`super::HourRollup::approximate`]).
    pub approximate: bool,
}

/// Sums over a run of hour rollups.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HourSums {
    /// Wh.
    pub energy_wh: f64,
    /// ms (rows without covered time count 0).
    pub covered_ms: i64,
    /// Rows.
    pub hours: u64,
    /// Rows whose figures are estimates.
    pub approximate_hours: u64,
    /// Start of the first and last row, UTC ms.
    pub first_hour_ms: Option<i64>,
    pub last_hour_ms: Option<i64>,
}

/// Raw samples `(ts_ms, value)` of each selected series.
pub type RawSeries = Vec<(Series, Vec<(i64, f64)>)>;

/// A decoded raw chunk: timestamps (ms) and quantised values.
pub(super) struct Chunk {
    pub ts: Vec<i64>,
    pub q: Vec<i64>,
}

impl Store {
    /// Every host with a series stored, by name.
    pub fn hosts(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT DISTINCT host FROM series ORDER BY host")
            .map_err(|e| self.sql(e))?;
        stmt.query_map([], |r| r.get::<_, String>(0))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| self.sql(e))
    }

    /// Every stored series.
    pub fn series(&self) -> Result<Vec<Series>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, host, source, metric, channel, spacing_ms, readings, max_hold_ms
                 FROM series ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<i64>>(7)?,
                ))
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(
                |(id, host, source, metric, channel, spacing_ms, readings, max_hold_ms)| {
                    let m = Metric::parse(&metric).ok_or_else(|| StoreError::UnknownMetric {
                        path: self.path.clone(),
                        series_id: id,
                        metric: metric.clone(),
                    })?;
                    Ok(Series {
                        id,
                        host,
                        source: SourceId::from_text(&source),
                        metric: m,
                        channel,
                        unit: m.unit(),
                        spacing_ms,
                        readings: Readings::parse(&readings).unwrap_or_default(),
                        max_hold_ms,
                    })
                },
            )
            .collect()
    }

    /// The series that `filter` selects.
    pub fn find_series(&self, filter: &SeriesFilter) -> Result<Vec<Series>, StoreError> {
        Ok(self
            .series()?
            .into_iter()
            .filter(|s| filter.matches(s))
            .collect())
    }

    /// The newest sample of every series of `host`.
    pub fn latest(&self, host: &str) -> Result<Vec<Latest>, StoreError> {
        let mut out = Vec::new();
        for series in self.find_series(&SeriesFilter::all().host(host))? {
            let open = self
                .conn
                .prepare_cached("SELECT last_ts_ms, last_value FROM raw_open WHERE series_id = ?1")
                .and_then(|mut s| {
                    s.query_row([series.id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(|e| self.sql(e))?;
            let closed = self
                .conn
                .prepare_cached(
                    "SELECT last_ts_ms, last_value FROM (
                       SELECT start_ms, last_ts_ms, last_value FROM raw_chunk
                         WHERE series_id = ?1 ORDER BY start_ms DESC LIMIT 1)
                     UNION ALL
                     SELECT last_ts_ms, last_value FROM (
                       SELECT start_ms, last_ts_ms, last_value FROM raw_detail_chunk
                         WHERE series_id = ?1 ORDER BY start_ms DESC LIMIT 1)
                     ORDER BY 1 DESC LIMIT 1",
                )
                .and_then(|mut s| {
                    s.query_row([series.id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(|e| self.sql(e))?;
            let newest: Option<(i64, f64)> = match (open, closed) {
                (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
                (a, b) => a.or(b),
            };
            if let Some((ts_ms, value)) = newest {
                out.push(Latest {
                    series,
                    ts_ms,
                    value,
                });
            }
        }
        Ok(out)
    }

    /// Raw samples `(ts_ms, value)` in `[from_ms, to_ms)` of each selected series, in time
    /// order.
    pub fn raw(
        &self,
        filter: &SeriesFilter,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<RawSeries, StoreError> {
        let mut out = Vec::new();
        for series in self.find_series(filter)? {
            let points = self.raw_points(&series, from_ms, to_ms)?;
            out.push((series, points));
        }
        Ok(out)
    }

    /// Raw samples `(ts_ms, value)` of one series in `[from_ms, to_ms)`, in time order.
    pub fn raw_points(
        &self,
        series: &Series,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let scale = resolution(series.unit);
        let mut points = Vec::new();
        for chunk in self.chunks(series.id, from_ms, to_ms)? {
            points.extend(
                chunk
                    .ts
                    .iter()
                    .zip(&chunk.q)
                    .filter(|(t, _)| (from_ms..to_ms).contains(*t))
                    .map(|(&t, &q)| (t, dequantise(q, scale))),
            );
        }
        points.sort_by_key(|p| p.0);
        Ok(points)
    }

    /// The series' first raw sample after `ts_ms`, if kept: a held reading before it stands
    /// until then ([`super::integrate::Readings::Hold`]), however long after.
    pub fn first_point_after(
        &self,
        series: &Series,
        ts_ms: i64,
    ) -> Result<Option<(i64, f64)>, StoreError> {
        let starts: Vec<i64> = self
            .conn
            .prepare_cached(
                "SELECT start_ms FROM (
                   SELECT start_ms FROM raw_chunk WHERE series_id = ?1 AND start_ms >= ?2
                   UNION ALL
                   SELECT start_ms FROM raw_detail_chunk WHERE series_id = ?1 AND start_ms >= ?2
                   UNION ALL
                   SELECT start_ms FROM raw_open WHERE series_id = ?1 AND start_ms >= ?2)
                 ORDER BY start_ms LIMIT 2",
            )
            .and_then(|mut s| {
                s.query_map(params![series.id, floor_to(ts_ms, CHUNK_MS)], |r| r.get(0))
                    .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            })
            .map_err(|e| self.sql(e))?;
        for start in starts {
            let after = self
                .raw_points(series, start, start.saturating_add(CHUNK_MS))?
                .into_iter()
                .find(|p| p.0 > ts_ms);
            if after.is_some() {
                return Ok(after);
            }
        }
        Ok(None)
    }

    /// Decoded chunks of a series that may hold samples in `[from_ms, to_ms)`.
    pub(super) fn chunks(
        &self,
        series_id: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<Chunk>, StoreError> {
        let lo = floor_to(from_ms, CHUNK_MS);
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT start_ms, data FROM raw_chunk
                   WHERE series_id = ?1 AND start_ms >= ?2 AND start_ms < ?3
                 UNION ALL
                 SELECT start_ms, data FROM raw_detail_chunk
                   WHERE series_id = ?1 AND start_ms >= ?2 AND start_ms < ?3
                 UNION ALL
                 SELECT start_ms, data FROM raw_open
                   WHERE series_id = ?1 AND start_ms >= ?2 AND start_ms < ?3",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![series_id, lo, to_ms], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| self.sql(e))?;
        // A chunk that cannot be decoded is left out and named (the writer sets it aside
        // into `quarantine`): one bad blob must not make every figure of the series fail.
        let mut out = Vec::with_capacity(rows.len());
        for (start_ms, data) in rows {
            match self.decode_chunk(series_id, start_ms, &data) {
                Ok(chunk) => out.push(chunk),
                Err(e @ StoreError::Corrupt { .. }) => {
                    tracing::warn!("{}: left out", super::error_chain(&e));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    pub(super) fn decode_chunk(
        &self,
        series_id: i64,
        start_ms: i64,
        data: &[u8],
    ) -> Result<Chunk, StoreError> {
        let mut cols = chunk_codec::decode(data, &[Order::DeltaOfDelta, Order::Delta])
            .map_err(|e| self.corrupt(series_id, start_ms, e))?;
        let q = cols.pop().unwrap_or_default();
        let ts = cols
            .pop()
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.wrapping_add(start_ms))
            .collect();
        Ok(Chunk { ts, q })
    }

    /// Rollups of each selected series with bucket start in `[from_ms, to_ms)`. Minute
    /// rollups exist for power series only (see [`super::rollup_kind`]).
    pub fn rollups(
        &self,
        filter: &SeriesFilter,
        resolution: Resolution,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(Series, Vec<Rollup>)>, StoreError> {
        let mut out = Vec::new();
        for series in self.find_series(filter)? {
            let rollups = match resolution {
                Resolution::Hour => self.hour_rollups(&series, from_ms, to_ms)?,
                Resolution::Minute => self.minute_rollups(&series, from_ms, to_ms)?,
            };
            out.push((series, rollups));
        }
        Ok(out)
    }

    /// Hour rollups of one series with start in `[from_ms, to_ms)`, by start.
    pub fn hour_rollups(
        &self,
        series: &Series,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<Rollup>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT hour_ms, n, mean, min, max, energy_wh, covered_ms, approximate
                 FROM rollup_hour
                 WHERE series_id = ?1 AND hour_ms >= ?2 AND hour_ms < ?3 ORDER BY hour_ms",
            )
            .map_err(|e| self.sql(e))?;
        stmt.query_map(params![series.id, from_ms, to_ms], |r| {
            Ok(Rollup {
                bucket_ms: r.get(0)?,
                n: r.get::<_, i64>(1)?.max(0) as u64,
                mean: r.get(2)?,
                min: r.get(3)?,
                max: r.get(4)?,
                energy_wh: r.get(5)?,
                covered_ms: r.get(6)?,
                approximate: r.get(7)?,
            })
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| self.sql(e))
    }

    /// Minute rollups of one power series with start in `[from_ms, to_ms)`, by start.
    pub fn minute_rollups(
        &self,
        series: &Series,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<Rollup>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT hour_ms FROM rollup_hour WHERE series_id = ?1 AND hour_ms >= ?2
                   AND hour_ms < ?3 AND minutes IS NOT NULL ORDER BY hour_ms",
            )
            .map_err(|e| self.sql(e))?;
        let hours = stmt
            .query_map(params![series.id, floor_to(from_ms, HOUR_MS), to_ms], |r| {
                r.get::<_, i64>(0)
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for hour_ms in hours {
            let Some(hour) = self.hour_rollup(series, hour_ms)? else {
                continue;
            };
            for m in hour.minutes {
                let bucket_ms = hour_ms + i64::from(m.minute) * MINUTE_MS;
                if (from_ms..to_ms).contains(&bucket_ms) {
                    out.push(Rollup {
                        bucket_ms,
                        n: m.n,
                        mean: m.mean,
                        min: m.min,
                        max: m.max,
                        energy_wh: Some(m.energy_wh),
                        covered_ms: m.covered_ms,
                        approximate: hour.approximate || m.covered_ms.is_none(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The sums over one series' hour rollups with start in `[from_ms, to_ms)`: one query,
    /// however long the span.
    pub fn hour_sums(
        &self,
        series: &Series,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<HourSums, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT coalesce(sum(energy_wh), 0.0), coalesce(sum(covered_ms), 0), count(*),
                        coalesce(sum(approximate), 0), min(hour_ms), max(hour_ms)
                 FROM rollup_hour WHERE series_id = ?1 AND hour_ms >= ?2 AND hour_ms < ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![series.id, from_ms, to_ms], |r| {
                    Ok(HourSums {
                        energy_wh: r.get(0)?,
                        covered_ms: r.get(1)?,
                        hours: r.get::<_, i64>(2)?.max(0) as u64,
                        approximate_hours: r.get::<_, i64>(3)?.max(0) as u64,
                        first_hour_ms: r.get(4)?,
                        last_hour_ms: r.get(5)?,
                    })
                })
            })
            .map_err(|e| self.sql(e))
    }

    /// The newest sample's time of one series, UTC ms.
    pub fn newest_ms(&self, series: &Series) -> Result<Option<i64>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT max(t) FROM (
                   SELECT last_ts_ms AS t FROM raw_open WHERE series_id = ?1
                   UNION ALL SELECT max(last_ts_ms) FROM raw_chunk WHERE series_id = ?1
                   UNION ALL SELECT max(last_ts_ms) FROM raw_detail_chunk WHERE series_id = ?1)",
            )
            .and_then(|mut s| s.query_row([series.id], |r| r.get(0)))
            .map_err(|e| self.sql(e))
    }

    /// The start of the oldest raw chunk of a series, UTC ms: raw samples are kept from
    /// about here on. `None` without raw samples.
    pub fn raw_from_ms(&self, series: &Series) -> Result<Option<i64>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT min(t) FROM (
                   SELECT min(start_ms) AS t FROM raw_chunk WHERE series_id = ?1
                   UNION ALL SELECT min(start_ms) FROM raw_detail_chunk WHERE series_id = ?1
                   UNION ALL SELECT min(start_ms) FROM raw_open WHERE series_id = ?1)",
            )
            .and_then(|mut s| s.query_row([series.id], |r| r.get(0)))
            .map_err(|e| self.sql(e))
    }
}
