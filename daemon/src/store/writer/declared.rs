//! What the writer is told besides samples: gaps (recorded, and those a held reading's
//! silence past its `max_hold` ends in) and how a source's power readings stand.

use rusqlite::params;
use wattson_collectors::SourceId;

use super::super::integrate::Readings;
use super::super::{Away, StoreError};
use super::Writer;

impl Writer {
    /// Stores a gap of `host`'s `source` and keeps it for the pairs still to come.
    pub(super) fn insert_gap(
        &mut self,
        host: &str,
        source: &SourceId,
        (start_ms, end_ms): (i64, i64),
        reason: &str,
        away: Option<Away>,
    ) -> Result<(), StoreError> {
        self.store
            .conn
            .prepare_cached(
                "INSERT INTO gap (host, source, start_ms, end_ms, reason, away)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    host,
                    source.to_string(),
                    start_ms,
                    end_ms,
                    reason,
                    away.map(Away::as_str)
                ])
            })
            .map_err(|e| self.store.sql(e))?;
        // Its counter is read against it at the source's next counter reading.
        self.counted_settled
            .remove(&(host.to_owned(), source.clone()));
        // Kept once, though a failed flush brings the same gap again.
        let known = self
            .gaps
            .entry((host.to_owned(), source.clone()))
            .or_default();
        if !known.contains(&(start_ms, end_ms)) {
            known.push((start_ms, end_ms));
        }
        Ok(())
    }

    /// How `host`'s `source` power readings stand from now on: kept for its series still
    /// to come, and stored with the power series already open.
    pub(super) fn declare(
        &mut self,
        host: String,
        source: &SourceId,
        readings: Readings,
        max_hold_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        let max_hold_ms = max_hold_ms.filter(|_| readings != Readings::Sampled);
        for state in &mut self.states {
            let s = &state.series;
            if state.minutes
                && s.host == host
                && s.source == *source
                && (state.readings, state.max_hold_ms) != (readings, max_hold_ms)
            {
                self.store.set_readings(s.id, readings, max_hold_ms)?;
                state.readings = readings;
                state.max_hold_ms = max_hold_ms;
                state.series.readings = readings;
                state.series.max_hold_ms = max_hold_ms;
            }
        }
        self.declared
            .insert((host, source.clone()), (readings, max_hold_ms));
        Ok(())
    }
}
