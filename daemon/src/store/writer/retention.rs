//! Retention: raw chunks deleted once older than their series' retention (the detail
//! retention for per-core CPU series, the raw retention for the rest), and the open chunk
//! forgotten with them. Rollups are kept. When it runs is the flush's (`recovery`).

use std::collections::HashMap;

use rusqlite::params;

use super::super::{CHUNK_MS, StoreError};
use super::Writer;

impl Writer {
    /// Deletes raw chunks expired at `now_ms`: those that end at or before `now_ms` minus
    /// the series' retention
    /// ([`StoreOptions::retention_ms`](super::super::StoreOptions::retention_ms): the detail
    /// retention for per-core CPU series, the raw retention for the rest). Returns how many.
    pub fn prune(&mut self, now_ms: i64) -> Result<usize, StoreError> {
        let store = &self.store;
        let tx = store
            .conn
            .unchecked_transaction()
            .map_err(|e| store.sql(e))?;
        let mut last_starts = HashMap::new();
        let mut deleted = 0;
        for series in store.series()? {
            let retention = self.options.retention_ms(series.metric, &series.channel);
            let last_start = now_ms.saturating_sub(retention).saturating_sub(CHUNK_MS);
            last_starts.insert(series.id, last_start);
            for sql in [
                "DELETE FROM raw_chunk WHERE series_id = ?1 AND start_ms <= ?2",
                "DELETE FROM raw_detail_chunk WHERE series_id = ?1 AND start_ms <= ?2",
                "DELETE FROM raw_open WHERE series_id = ?1 AND start_ms <= ?2",
            ] {
                deleted += tx
                    .prepare_cached(sql)
                    .and_then(|mut s| s.execute(params![series.id, last_start]))
                    .map_err(|e| store.sql(e))?;
            }
        }
        tx.commit().map_err(|e| store.sql(e))?;
        for state in &mut self.states {
            let last_start = last_starts.get(&state.series.id).copied();
            if let (Some(open), Some(last_start)) = (&state.open, last_start)
                && open.start_ms <= last_start
            {
                state.open = None;
            }
        }
        Ok(deleted)
    }
}
