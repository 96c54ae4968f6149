//! Flushing and what the writer does when writing fails: failed batches kept and retried
//! within the memory bound, a file deleted or replaced while in use opened anew at its
//! path, rows set aside reported once committed, and the health board and lock file kept
//! up to date.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::super::health::HealthBoard;
use super::super::lock::WriterLock;
use super::super::{Store, StoreError, error_chain, wal};
use super::{FlushStats, Writer};

impl Writer {
    /// Holds `lock` for as long as the writer lives, and publishes its health in it.
    #[must_use]
    pub(in crate::store) fn with_lock(mut self, lock: WriterLock) -> Writer {
        self.lock = Some(lock);
        self.publish_health();
        self
    }

    /// The health board this writer keeps.
    pub fn board(&self) -> Arc<HealthBoard> {
        self.board.clone()
    }

    /// Sets aside every open chunk that cannot be decoded (see
    /// [`crate::store::quarantine`]), in one transaction; returns how many.
    pub fn quarantine_undecodable(&mut self) -> Result<usize, StoreError> {
        let store = &self.store;
        let tx = store
            .conn
            .unchecked_transaction()
            .map_err(|e| store.sql(e))?;
        let found = store.quarantine_undecodable_open()?;
        tx.commit().map_err(|e| store.sql(e))?;
        let n = found.len();
        self.quarantined = found;
        self.report_quarantined();
        Ok(n)
    }

    /// While flushes fail, what arrives is held within the memory bound too.
    pub(super) fn hold_within_bound(&mut self) {
        if self.failing_now {
            let dropped = self.pending.drop_oldest(self.options.max_held_bytes);
            self.board.dropped(dropped.samples, dropped.oldest_ms);
            self.board
                .holding(self.pending.samples(), self.pending.bytes());
        }
    }

    /// Writes everything pending in one transaction; then prunes expired raw chunks when
    /// the prune interval has passed. On error the in-memory state is dropped (it is
    /// reloaded from the file) and what was pending stays queued for the next flush, within
    /// [`crate::store::StoreOptions::max_held_bytes`] (the oldest beyond it are dropped and
    /// counted).
    pub fn flush(&mut self) -> Result<FlushStats, StoreError> {
        self.board.begin_write();
        let result = self.flush_pending();
        self.board.end_write();
        self.failing_now = result.is_err();
        match &result {
            Ok(stats) => {
                self.board.committed(self.store.path(), stats.samples);
                self.report_quarantined();
                self.prune_when_due();
            }
            Err(e) => {
                self.quarantined.clear();
                if !self.options.hold_failed {
                    // Its sender delivers it again (see `StoreOptions::hold_failed`).
                    self.pending = super::PendingQueue::default();
                }
                let dropped = self.pending.drop_oldest(self.options.max_held_bytes);
                self.board.dropped(dropped.samples, dropped.oldest_ms);
                self.board.failed(
                    &error_chain(e),
                    self.pending.samples(),
                    self.pending.bytes(),
                    self.options.max_held_bytes,
                );
            }
        }
        self.publish_health();
        result
    }

    /// Whether samples are held after a failed flush (and want another attempt).
    pub fn failing(&self) -> bool {
        self.failing_now && !self.pending.is_empty()
    }

    fn flush_pending(&mut self) -> Result<FlushStats, StoreError> {
        // Twice at most: a file deleted between the check and the commit got this batch,
        // which then goes into the new file too.
        for _ in 0..2 {
            if let Some(what) = self.store.path_changed() {
                self.reopen(what)?;
            }
            let pending = std::mem::take(&mut self.pending);
            match self.write(&pending) {
                Ok(stats) if self.store.path_changed().is_none() => return Ok(stats),
                Ok(_) => {
                    self.pending = pending;
                    self.forget_state();
                }
                Err(e) => {
                    self.pending = pending;
                    self.forget_state();
                    if let StoreError::Sqlite { source, .. } = &e
                        && wal::is_full(source)
                    {
                        // Give the log's space back; the next attempt may fit.
                        let _ = wal::truncate(&self.store.conn);
                    }
                    return Err(e);
                }
            }
        }
        Err(StoreError::Lost {
            path: self.store.path().to_owned(),
            detail: "the file at this path was replaced again while it was being written"
                .to_owned(),
        })
    }

    /// Drops what is kept in memory about the series: it is read back from the file.
    fn forget_state(&mut self) {
        self.index.clear();
        self.states.clear();
        self.counted_settled.clear();
    }

    /// Opens the database anew at its path after the file was `what` ("deleted",
    /// "replaced by another file"): its directory is created again if needed, the writer
    /// lock taken again if it went with it, and writing goes on in the file now at the
    /// path.
    fn reopen(&mut self, what: &str) -> Result<(), StoreError> {
        let path = self.store.path().to_owned();
        if !self.reopening {
            self.reopening = true;
            if what == super::super::file::LOG_DELETED {
                tracing::error!(
                    "database {} was {what} while in use: opening it anew at its path; the \
                     samples held are written again",
                    path.display()
                );
            } else {
                tracing::error!(
                    "database {} was {what} while in use: opening it anew at its path; what \
                     the old file held is not in the new one",
                    path.display()
                );
            }
        }
        // The old connection is closed first, and its log removed: SQLite names the
        // write-ahead log by the database's path, and a new connection would take the old
        // file's log for its own.
        let detached = Store::detached(&path)?;
        let old = std::mem::replace(&mut self.store, detached);
        if what == super::super::file::LOG_DELETED {
            old.close_orphaned();
        } else {
            old.close_moved();
        }
        self.forget_state();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Reopen {
                path: path.clone(),
                what: what.to_owned(),
                source,
            })?;
        }
        if self.lock.as_ref().is_some_and(|l| !l.still_at_path()) {
            // The old lock is on a file no longer at its path: it guards nothing now.
            self.lock = None;
            self.lock = Some(WriterLock::acquire(&path)?);
        }
        let store = Store::open(&path, &self.options)?;
        store.conn.pragma_update(None, "cache_size", -1024).ok();
        self.store = store;
        self.reopening = false;
        self.board.reopened(what);
        tracing::warn!(
            "database {} opened anew; {} held samples go into it",
            path.display(),
            self.pending.samples()
        );
        Ok(())
    }

    fn prune_when_due(&mut self) {
        if self
            .last_prune
            .is_some_and(|t| t.elapsed() < self.options.prune_interval)
        {
            return;
        }
        self.last_prune = Some(Instant::now());
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(i64::MAX, |d| d.as_millis() as i64);
        let now = wall.min(self.newest_ms);
        if now > i64::MIN
            && let Err(e) = self.prune(now)
        {
            // The samples are committed; expired chunks are deleted next time.
            tracing::warn!("pruning expired raw samples: {}", error_chain(&e));
        }
    }

    fn report_quarantined(&mut self) {
        if self.quarantined.is_empty() {
            return;
        }
        self.board.quarantined(self.quarantined.len());
        for q in self.quarantined.drain(..) {
            tracing::error!(
                "set aside a corrupt {q} into table quarantine of {}; the series goes on \
                 without it",
                self.store.path().display()
            );
        }
    }

    fn publish_health(&mut self) {
        if let Some(lock) = self.lock.as_mut()
            && let Err(e) = lock.publish(&self.board.snapshot())
        {
            tracing::debug!("writing {}: {e}", lock.path().display());
        }
    }
}
