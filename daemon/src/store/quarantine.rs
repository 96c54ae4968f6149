//! Rows the store cannot decode are set aside, not fatal: a corrupt raw chunk (or packed
//! minute rollups) is moved into the `quarantine` table (`schema/0006-quarantine.sql`) in
//! the writer's transaction, counted and logged, and the series goes on as if the row had
//! not been there. Without this, one bad blob made every flush fail for every series (one
//! transaction per flush) and `status` exit 1.
//!
//! The writer checks every open chunk when it starts (one row per series) and sets aside
//! any other row the moment it needs to decode it. Readers skip a chunk they cannot decode
//! and say so in the log.

use rusqlite::params;
use serde::Serialize;

use super::chunk_codec::{self, Order};
use super::{Series, Store, StoreError};

/// Where a quarantined row came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RawOpen,
    RawChunk,
    RawDetailChunk,
    RollupHour,
}

impl Kind {
    pub fn table(self) -> &'static str {
        match self {
            Kind::RawOpen => "raw_open",
            Kind::RawChunk => "raw_chunk",
            Kind::RawDetailChunk => "raw_detail_chunk",
            Kind::RollupHour => "rollup_hour",
        }
    }
}

/// One row of the `quarantine` table, with its series named.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quarantined {
    /// The table it came from.
    pub kind: String,
    /// `host/source metric [channel]`.
    pub series: String,
    /// Chunk start or hour, UTC ms.
    pub start_ms: i64,
    /// Samples the row claimed to hold.
    pub n: Option<i64>,
    pub reason: String,
    /// When it was set aside, UTC ms.
    pub quarantined_ms: i64,
}

impl std::fmt::Display for Quarantined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} row of {} at {}{}: {}",
            self.kind,
            self.series,
            super::health::utc_text(self.start_ms),
            self.n
                .map_or_else(String::new, |n| format!(" ({n} samples)")),
            self.reason
        )
    }
}

/// `host/source metric [channel]`.
pub fn series_name(s: &Series) -> String {
    let channel = if s.channel.is_empty() {
        String::new()
    } else {
        format!(" [{}]", s.channel)
    };
    format!("{}/{} {}{channel}", s.host, s.source, s.metric.as_str())
}

impl Store {
    /// Moves the row of `kind` for `series` at `start_ms` into `quarantine`. Runs in the
    /// caller's transaction; returns what was set aside (for the log once committed).
    pub(super) fn quarantine(
        &self,
        kind: Kind,
        series: &Series,
        start_ms: i64,
        error: &chunk_codec::DecodeError,
    ) -> Result<Quarantined, StoreError> {
        let now = super::health::now_ms();
        let reason = format!("undecodable: {error}");
        // Rollups are keyed by hour and keep their packed minutes in `minutes`.
        let (table, start, data) = match kind {
            Kind::RollupHour => ("rollup_hour", "hour_ms", "minutes"),
            other => (other.table(), "start_ms", "data"),
        };
        let copy = format!(
            "INSERT INTO quarantine (quarantined_ms, kind, series_id, start_ms, n, data, reason)
             SELECT ?1, ?2, series_id, {start}, n, {data}, ?5 FROM {table}
             WHERE series_id = ?3 AND {start} = ?4"
        );
        let delete = format!("DELETE FROM {table} WHERE series_id = ?1 AND {start} = ?2");
        let n: Option<i64> = self
            .conn
            .prepare_cached(&copy)
            .and_then(|mut s| s.execute(params![now, kind.table(), series.id, start_ms, reason]))
            .and_then(|_| {
                self.conn.query_row(
                    "SELECT n FROM quarantine WHERE id = last_insert_rowid()",
                    [],
                    |r| r.get(0),
                )
            })
            .map_err(|e| self.sql(e))?;
        self.conn
            .prepare_cached(&delete)
            .and_then(|mut s| s.execute(params![series.id, start_ms]))
            .map_err(|e| self.sql(e))?;
        Ok(Quarantined {
            kind: kind.table().to_owned(),
            series: series_name(series),
            start_ms,
            n,
            reason,
            quarantined_ms: now,
        })
    }

    /// Decodes every open chunk and sets aside those that fail. Runs in the caller's
    /// transaction.
    pub(super) fn quarantine_undecodable_open(&self) -> Result<Vec<Quarantined>, StoreError> {
        let rows: Vec<(i64, i64, Vec<u8>)> = self
            .conn
            .prepare("SELECT series_id, start_ms, data FROM raw_open")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .map_err(|e| self.sql(e))?;
        let bad: Vec<(i64, i64, chunk_codec::DecodeError)> = rows
            .into_iter()
            .filter_map(|(id, start, data)| {
                chunk_codec::decode(&data, &[Order::DeltaOfDelta, Order::Delta])
                    .err()
                    .map(|e| (id, start, e))
            })
            .collect();
        if bad.is_empty() {
            return Ok(Vec::new());
        }
        let series = self.series()?;
        let mut out = Vec::new();
        for (id, start_ms, error) in bad {
            let Some(s) = series.iter().find(|s| s.id == id) else {
                continue;
            };
            out.push(self.quarantine(Kind::RawOpen, s, start_ms, &error)?);
        }
        Ok(out)
    }

    /// Every quarantined row, newest first.
    pub fn quarantined(&self) -> Result<Vec<Quarantined>, StoreError> {
        let series = self.series()?;
        let rows: Vec<(String, i64, i64, Option<i64>, String, i64)> = self
            .conn
            .prepare_cached(
                "SELECT kind, series_id, start_ms, n, reason, quarantined_ms FROM quarantine
                 ORDER BY quarantined_ms DESC, id DESC",
            )
            .and_then(|mut s| {
                s.query_map([], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                })?
                .collect()
            })
            .map_err(|e| self.sql(e))?;
        Ok(rows
            .into_iter()
            .map(
                |(kind, id, start_ms, n, reason, quarantined_ms)| Quarantined {
                    kind,
                    series: series
                        .iter()
                        .find(|s| s.id == id)
                        .map_or_else(|| format!("series {id}"), series_name),
                    start_ms,
                    n,
                    reason,
                    quarantined_ms,
                },
            )
            .collect())
    }
}
