//! Raw chunks: the open chunk of each series in memory (`raw_open` on disk), and closed
//! chunks merged into `raw_chunk` or, for detail series, `raw_detail_chunk`.

use rusqlite::{OptionalExtension, params};

use super::super::chunk_codec::{self, Order};
use super::super::quarantine::Kind;
use super::super::{Series, Store, StoreError, dequantise};
use super::Writer;

pub(super) struct OpenChunk {
    pub(super) start_ms: i64,
    pub(super) ts: Vec<i64>,
    pub(super) q: Vec<i64>,
    pub(super) dirty: bool,
}

impl OpenChunk {
    pub(super) fn push(&mut self, ts: i64, q: i64) {
        if self.ts.last().is_none_or(|&last| last <= ts) {
            self.ts.push(ts);
            self.q.push(q);
        } else {
            let at = self.ts.partition_point(|&t| t <= ts);
            self.ts.insert(at, ts);
            self.q.insert(at, q);
        }
        self.dirty = true;
    }
}

impl Writer {
    /// The stored open chunk of `series`; one that cannot be decoded is set aside.
    pub(super) fn load_open(&mut self, series: &Series) -> Result<Option<OpenChunk>, StoreError> {
        let row: Option<(i64, Vec<u8>)> = self
            .store
            .conn
            .prepare_cached("SELECT start_ms, data FROM raw_open WHERE series_id = ?1")
            .and_then(|mut s| {
                s.query_row([series.id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(|e| self.store.sql(e))?;
        let Some((start_ms, data)) = row else {
            return Ok(None);
        };
        match self.store.decode_chunk(series.id, start_ms, &data) {
            Ok(chunk) => Ok(Some(OpenChunk {
                start_ms,
                ts: chunk.ts,
                q: chunk.q,
                dirty: false,
            })),
            Err(StoreError::Corrupt { source, .. }) => {
                let q = self
                    .store
                    .quarantine(Kind::RawOpen, series, start_ms, &source)?;
                self.quarantined.push(q);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The newest sample (ms, value) in the closed chunks of a series, for a series with no
    /// open chunk.
    pub(super) fn newest_closed(&self, series_id: i64) -> Result<Option<(i64, f64)>, StoreError> {
        self.store
            .conn
            .prepare_cached(
                "SELECT last_ts_ms, last_value FROM (
                   SELECT last_ts_ms, last_value FROM raw_chunk WHERE series_id = ?1
                   UNION ALL
                   SELECT last_ts_ms, last_value FROM raw_detail_chunk WHERE series_id = ?1)
                 ORDER BY last_ts_ms DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row([series_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(|e| self.store.sql(e))
    }

    /// Merges `points` (ts, quantised value) into the closed chunk at `start_ms`, in
    /// `raw_detail_chunk` for per-core series (`detail`) and `raw_chunk` for the rest; a
    /// chunk already stored is rewritten in the table it is in.
    pub(super) fn merge_closed(
        &mut self,
        series: &Series,
        detail: bool,
        start_ms: i64,
        points: &[(i64, i64)],
        scale: f64,
    ) -> Result<(), StoreError> {
        let series_id = series.id;
        let store = &self.store;
        let existing: Option<(Vec<u8>, bool)> = store
            .conn
            .prepare_cached(
                "SELECT data, 0 FROM raw_chunk WHERE series_id = ?1 AND start_ms = ?2
                 UNION ALL
                 SELECT data, 1 FROM raw_detail_chunk WHERE series_id = ?1 AND start_ms = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![series_id, start_ms], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(|e| store.sql(e))?;
        let detail = existing.as_ref().map_or(detail, |e| e.1);
        let mut all: Vec<(i64, i64)> = match existing.map(|e| e.0) {
            Some(data) => match store.decode_chunk(series_id, start_ms, &data) {
                Ok(c) => c.ts.into_iter().zip(c.q).collect(),
                Err(StoreError::Corrupt { source, .. }) => {
                    let kind = if detail {
                        Kind::RawDetailChunk
                    } else {
                        Kind::RawChunk
                    };
                    let q = store.quarantine(kind, series, start_ms, &source)?;
                    self.quarantined.push(q);
                    Vec::new()
                }
                Err(e) => return Err(e),
            },
            None => Vec::new(),
        };
        let store = &self.store;
        all.extend_from_slice(points);
        all.sort_by_key(|p| p.0);
        let chunk = OpenChunk {
            start_ms,
            ts: all.iter().map(|p| p.0).collect(),
            q: all.iter().map(|p| p.1).collect(),
            dirty: true,
        };
        let (data, last_ts, last_value) = encode_chunk(&chunk, scale);
        store
            .conn
            .prepare_cached(if detail {
                "INSERT INTO raw_detail_chunk
                   (series_id, start_ms, n, last_ts_ms, last_value, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (series_id, start_ms) DO UPDATE SET n = excluded.n,
                   last_ts_ms = excluded.last_ts_ms, last_value = excluded.last_value,
                   data = excluded.data"
            } else {
                "INSERT INTO raw_chunk (series_id, start_ms, n, last_ts_ms, last_value, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (series_id, start_ms) DO UPDATE SET n = excluded.n,
                   last_ts_ms = excluded.last_ts_ms, last_value = excluded.last_value,
                   data = excluded.data"
            })
            .and_then(|mut s| {
                s.execute(params![
                    series_id,
                    start_ms,
                    chunk.ts.len() as i64,
                    last_ts,
                    last_value,
                    data
                ])
            })
            .map_err(|e| store.sql(e))?;
        Ok(())
    }
}

fn encode_chunk(chunk: &OpenChunk, scale: f64) -> (Vec<u8>, i64, f64) {
    let rel: Vec<i64> = chunk
        .ts
        .iter()
        .map(|t| t.wrapping_sub(chunk.start_ms))
        .collect();
    let data = chunk_codec::encode(&[(&rel, Order::DeltaOfDelta), (&chunk.q, Order::Delta)]);
    let last_ts = chunk.ts.last().copied().unwrap_or(chunk.start_ms);
    let last_value = chunk.q.last().map_or(0.0, |&q| dequantise(q, scale));
    (data, last_ts, last_value)
}

pub(super) fn write_open(
    store: &Store,
    series_id: i64,
    chunk: &OpenChunk,
    scale: f64,
) -> Result<(), StoreError> {
    let (data, last_ts, last_value) = encode_chunk(chunk, scale);
    store
        .conn
        .prepare_cached(
            "INSERT INTO raw_open (series_id, start_ms, n, last_ts_ms, last_value, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (series_id) DO UPDATE SET start_ms = excluded.start_ms, n = excluded.n,
               last_ts_ms = excluded.last_ts_ms, last_value = excluded.last_value,
               data = excluded.data",
        )
        .and_then(|mut s| {
            s.execute(params![
                series_id,
                chunk.start_ms,
                chunk.ts.len() as i64,
                last_ts,
                last_value,
                data
            ])
        })
        .map_err(|e| store.sql(e))?;
    Ok(())
}
