//! The store's health: whether the writer can write, since when and why, what it holds in
//! memory for a retry, and what it had to drop or set aside.
//!
//! The writer thread keeps it on a [`HealthBoard`] shared with every [`super::StoreHandle`]
//! (the daemon's watchdog and health endpoint read it there) and publishes it in the writer
//! lock file for `wattson status` ([`super::lock`]). The board also decides what is logged:
//! the first failure and every change of reason at once, a reminder a minute while the
//! failure lasts, drops as they happen (at most one line a minute), and the recovery.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long one write may take before the writer counts as stuck.
pub const STUCK_AFTER: Duration = Duration::from_secs(30);
/// How often a lasting failure or continuing drops are logged again.
const REMIND_EVERY_MS: i64 = 60_000;

/// The writer's state, as the daemon, its health endpoint and `wattson status` see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreHealth {
    /// Set while flushes fail: since when, how often it was tried, the last error.
    pub failing: Option<Failure>,
    /// Samples (and gaps) held in memory for the next attempt.
    pub held_samples: u64,
    /// About how many bytes of memory they take.
    pub held_bytes: u64,
    /// Samples dropped, oldest first, to keep the held ones within the memory bound: lost.
    pub dropped_samples: u64,
    /// Batches dropped because the writer's queue was full: lost.
    pub dropped_batches: u64,
    /// Raw chunks and rollup rows set aside into the `quarantine` table by this writer.
    pub quarantined: u64,
    /// Set when the database file was found deleted or replaced and opened anew.
    pub reopened: Option<Reopened>,
}

/// A run of failed flushes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// UTC ms of the first failure of the run.
    pub since_ms: i64,
    /// Flushes tried since then.
    pub attempts: u64,
    /// The last error, with SQLite's or the OS's reason.
    pub error: String,
}

/// The database file was deleted or replaced while the writer had it open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reopened {
    /// UTC ms it was noticed.
    pub at_ms: i64,
    /// "deleted" or "replaced by another file".
    pub what: String,
    /// Times it happened.
    pub times: u64,
}

impl StoreHealth {
    /// Whether the writer can write now.
    pub fn writable(&self) -> bool {
        self.failing.is_none()
    }

    /// Why the store is unhealthy now, for logs, `status`, the watchdog and `/healthz`;
    /// `None` while it writes.
    pub fn problem(&self) -> Option<String> {
        let f = self.failing.as_ref()?;
        Some(format!(
            "cannot write the database since {} ({} attempts): {}; {} samples held in memory \
             for a retry, {} dropped",
            utc_text(f.since_ms),
            f.attempts,
            f.error,
            self.held_samples,
            self.dropped_samples
        ))
    }

    /// What the writer recovered from without losing anything, for `status` and
    /// `/healthz` beside [`StoreHealth::losses`]: a write-ahead log deleted from under it.
    pub fn recoveries(&self) -> Vec<String> {
        self.reopened
            .as_ref()
            .filter(|r| r.what == super::file::LOG_DELETED)
            .map(|r| {
                format!(
                    "the database's write-ahead log was deleted from under the writer by \
                     another process (last at {}; {} times): the database was opened anew \
                     and the samples held written again",
                    utc_text(r.at_ms),
                    r.times
                )
            })
            .into_iter()
            .collect()
    }

    /// What was lost or set aside since the writer started, if anything: it stays true
    /// after the store recovers.
    pub fn losses(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.dropped_samples > 0 {
            out.push(format!(
                "{} samples dropped while the database could not be written (oldest first, \
                 beyond the memory bound)",
                self.dropped_samples
            ));
        }
        if self.dropped_batches > 0 {
            out.push(format!(
                "{} batches dropped because the writer's queue was full",
                self.dropped_batches
            ));
        }
        if let Some(r) = self
            .reopened
            .as_ref()
            .filter(|r| r.what != super::file::LOG_DELETED)
        {
            out.push(format!(
                "the database file was {} while in use (last at {}; {} times): what it held \
                 before is not in the file now at its path",
                r.what,
                utc_text(r.at_ms),
                r.times
            ));
        }
        out
    }
}

/// The writer's health, shared by the writer thread and the handles.
#[derive(Debug, Default)]
pub struct HealthBoard {
    state: Mutex<StoreHealth>,
    /// UTC ms the writer began its current write; 0 while idle.
    busy_since_ms: AtomicI64,
    /// UTC ms of the last successful commit; 0 before the first.
    last_commit_ms: AtomicI64,
    /// UTC ms a failure or a drop was last logged.
    last_reminder_ms: AtomicI64,
    last_drop_log_ms: AtomicI64,
    /// Drops since the last line that reported drops.
    unlogged_drops: AtomicU64,
}

impl HealthBoard {
    /// A copy of the current state.
    pub fn snapshot(&self) -> StoreHealth {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// How long the writer has been in its current write, if it is in one.
    pub fn busy_for(&self) -> Option<Duration> {
        let since = self.busy_since_ms.load(Ordering::Relaxed);
        (since > 0).then(|| Duration::from_millis((now_ms() - since).max(0) as u64))
    }

    /// UTC ms of the last successful commit.
    pub fn last_commit_ms(&self) -> Option<i64> {
        let t = self.last_commit_ms.load(Ordering::Relaxed);
        (t > 0).then_some(t)
    }

    pub(super) fn begin_write(&self) {
        self.busy_since_ms.store(now_ms(), Ordering::Relaxed);
    }

    pub(super) fn end_write(&self) {
        self.busy_since_ms.store(0, Ordering::Relaxed);
    }

    fn update<R>(&self, f: impl FnOnce(&mut StoreHealth) -> R) -> Option<R> {
        self.state.lock().ok().map(|mut s| f(&mut s))
    }

    /// A flush committed: everything held is stored.
    pub(super) fn committed(&self, path: &std::path::Path, stored: usize) {
        let now = now_ms();
        self.last_commit_ms.store(now, Ordering::Relaxed);
        let ended = self.update(|s| {
            s.held_samples = 0;
            s.held_bytes = 0;
            s.failing.take().map(|f| (f, s.dropped_samples))
        });
        if let Some(Some((f, dropped))) = ended {
            tracing::warn!(
                "store writing again: {stored} samples stored into {} after {:.1} s and {} \
                 failed attempts; {dropped} samples dropped while it could not write",
                path.display(),
                (now - f.since_ms) as f64 / 1000.0,
                f.attempts
            );
        }
    }

    /// A flush failed; `held` samples (`bytes`) stay in memory for the next attempt.
    pub(super) fn failed(&self, error: &str, held: usize, bytes: usize, bound: usize) {
        let now = now_ms();
        let first = self.update(|s| {
            s.held_samples = held as u64;
            s.held_bytes = bytes as u64;
            match &mut s.failing {
                Some(f) if f.error == error => {
                    f.attempts += 1;
                    false
                }
                Some(f) => {
                    f.attempts += 1;
                    error.clone_into(&mut f.error);
                    true
                }
                None => {
                    s.failing = Some(Failure {
                        since_ms: now,
                        attempts: 1,
                        error: error.to_owned(),
                    });
                    true
                }
            }
        });
        if first == Some(true) && held == 0 {
            self.last_reminder_ms.store(now, Ordering::Relaxed);
            tracing::error!(
                "store flush failed: {error}; nothing held (its sender delivers it again)"
            );
        } else if first == Some(true) {
            self.last_reminder_ms.store(now, Ordering::Relaxed);
            tracing::error!(
                "store flush failed: {error}; {held} samples held in memory and retried (at \
                 most {} KiB are kept; beyond that the oldest are dropped and counted)",
                bound / 1024
            );
        } else if now - self.last_reminder_ms.load(Ordering::Relaxed) >= REMIND_EVERY_MS {
            self.last_reminder_ms.store(now, Ordering::Relaxed);
            if let Some(problem) = self.snapshot().problem() {
                tracing::error!("store still failing: {problem}");
            }
        }
    }

    /// `held` samples (`bytes`) wait for the next attempt.
    pub(super) fn holding(&self, held: usize, bytes: usize) {
        self.update(|s| {
            s.held_samples = held as u64;
            s.held_bytes = bytes as u64;
        });
    }

    /// `samples` held samples were dropped (oldest first, the oldest from `oldest_ms`).
    pub(super) fn dropped(&self, samples: usize, oldest_ms: Option<i64>) {
        if samples == 0 {
            return;
        }
        let total = self
            .update(|s| {
                s.dropped_samples += samples as u64;
                s.dropped_samples
            })
            .unwrap_or_default();
        let unlogged = self
            .unlogged_drops
            .fetch_add(samples as u64, Ordering::Relaxed)
            + samples as u64;
        let now = now_ms();
        if now - self.last_drop_log_ms.load(Ordering::Relaxed) >= REMIND_EVERY_MS {
            self.last_drop_log_ms.store(now, Ordering::Relaxed);
            self.unlogged_drops.store(0, Ordering::Relaxed);
            tracing::error!(
                "store cannot write: dropped the oldest {unlogged} held samples{} to stay \
                 within the memory bound; {total} dropped since the start",
                oldest_ms.map_or_else(String::new, |t| format!(" (from {})", utc_text(t)))
            );
        }
    }

    /// A batch was dropped because the queue was full; returns the count so far.
    pub(super) fn dropped_batch(&self) -> u64 {
        self.update(|s| {
            s.dropped_batches += 1;
            s.dropped_batches
        })
        .unwrap_or_default()
    }

    pub(super) fn dropped_batches(&self) -> u64 {
        self.update(|s| s.dropped_batches).unwrap_or_default()
    }

    pub(super) fn quarantined(&self, n: usize) {
        self.update(|s| s.quarantined += n as u64);
    }

    pub(super) fn reopened(&self, what: &str) {
        let at_ms = now_ms();
        self.update(|s| {
            let times = s.reopened.as_ref().map_or(0, |r| r.times) + 1;
            s.reopened = Some(Reopened {
                at_ms,
                what: what.to_owned(),
                times,
            });
        });
    }
}

/// Now, UTC ms.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `2026-12-01 08:00:00 UTC`.
pub fn utc_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}
