//! The recorded gaps (`gap`) as remote write sends them: each once, after the endpoint's
//! gap cursor (`schema/0016-remote-write-gaps.sql`), as [`GAP_FAMILY`] series labelled with
//! the gap's host, source and reason, so a reader of the receiver knows the time was not
//! measured rather than guessing it from the spacing.

use rusqlite::params;

use super::families::labels;
use super::proto::{Sample, TimeSeries};
use super::queue::{Batch, sql};
use crate::store::{Store, StoreError};

/// The name the recorded gaps are sent under: one sample a gap, at its start, whose value
/// is its end (s since the epoch), labelled with its host, source and reason.
pub const GAP_FAMILY: &str = "wattson_gap_end_timestamp_seconds";

/// The gaps recorded after `endpoint`'s gap cursor (by row, so a gap recorded late is
/// still sent), at most `cap`, into `batch` as [`GAP_FAMILY`] series.
pub(super) fn after_cursor(
    store: &Store,
    endpoint: &str,
    cap: usize,
    batch: &mut Batch,
) -> Result<(), StoreError> {
    let rows: Vec<(i64, String, String, i64, i64, String)> = store
        .conn()
        .prepare_cached(
            "SELECT id, host, source, start_ms, end_ms, reason FROM gap
             WHERE id > coalesce((SELECT gap_id FROM remote_write_gap_cursor
                                  WHERE endpoint = ?1), 0)
             ORDER BY id LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![endpoint, cap as i64], |r| {
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
        .map_err(|e| sql(store, e))?;
    let Some(newest) = rows.last().map(|r| r.0) else {
        return Ok(());
    };
    batch.cursors.gap_id = Some(newest);
    batch.samples += rows.len();
    batch.more |= rows.len() >= cap;
    let mut by_series: std::collections::BTreeMap<(String, String, String), Vec<Sample>> =
        std::collections::BTreeMap::new();
    for (_, host, source, start_ms, end_ms, reason) in rows {
        by_series
            .entry((host, source, reason))
            .or_default()
            .push(Sample {
                value: end_ms as f64 / 1000.0,
                timestamp: start_ms,
            });
    }
    for ((host, source, reason), mut samples) in by_series {
        samples.sort_by_key(|s| s.timestamp);
        samples.dedup_by_key(|s| s.timestamp);
        batch.timeseries.push(TimeSeries {
            labels: labels(
                GAP_FAMILY,
                &[("host", host), ("reason", reason), ("source", source)],
            ),
            samples,
        });
    }
    Ok(())
}
