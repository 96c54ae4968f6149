//! The daemon's heap (glibc's malloc, SQLite's statement cache): what keeps it small.
//!
//! - From the start, [`one_arena`]: the threads share one malloc arena.
//! - A minute after start, once ([`spawn`]): the store's connection lets go of its compiled
//!   statements. The ones start-up alone ran (opening, migrating, loading the open chunks)
//!   would otherwise keep their place in its cache of 64 for the daemon's life; what runs on
//!   a schedule is compiled again at its next run, once.
//!
//! Each was measured side by side with a build without it (BENCHMARKS.md, "Memory"): after
//! ten minutes with everything on, the arenas glibc chooses hold 0.49-0.55 MB more anonymous
//! memory than one, and the start-up statements 0.02-0.06 MB (SQLite's own count: 43 KB).
//! A `malloc_trim` at the same minute, and hourly, was measured too and gained nothing the
//! runs could tell from their spread, so there is none.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::StoreHandle;

/// After start-up's one-off work (the first publish, scrape and minute's projection).
const AFTER_START: Duration = Duration::from_secs(60);

/// Drop the store's compiled statements [`AFTER_START`], unless `cancel` comes first.
pub fn spawn(cancel: CancellationToken, store: StoreHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::select! {
            () = cancel.cancelled() => {}
            () = tokio::time::sleep(AFTER_START) => {
                if let Err(e) = store
                    .query_async(|s| s.conn().flush_prepared_statement_cache())
                    .await
                {
                    tracing::debug!("the store kept its compiled statements: {e}");
                }
            }
        }
    })
}

/// Every thread allocates from the one main malloc arena. glibc gives each new thread an
/// arena of its own (with its own free lists and 128 KB of top padding); the daemon's few
/// threads allocate little and seldom, so the arenas were mostly free memory kept resident.
/// Call before any thread is spawned.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn one_arena() {
    // SAFETY: mallopt takes no pointers; it is called before the daemon spawns its threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Other C libraries keep their own policy.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn one_arena() {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    fn store(dir: &tempfile::TempDir) -> StoreHandle {
        let options = StoreOptions {
            host: "basket".to_owned(),
            ..StoreOptions::default()
        };
        StoreHandle::spawn(&dir.path().join("wattson.db"), options)
            .unwrap()
            .0
    }

    #[tokio::test(start_paused = true)]
    async fn the_statements_go_once_a_minute_after_start_and_the_store_answers_after() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir);
        let task = spawn(CancellationToken::new(), store.clone());
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(!task.is_finished(), "the pass ran before the minute was up");
        // One pass, then the task ends (no timeout here: paused time would jump to it while
        // the writer thread answers).
        task.await.unwrap();
        // What runs on a schedule compiles its statements again.
        let one = store
            .query_async(|s| s.conn().query_row("SELECT 1", [], |r| r.get::<_, i64>(0)))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(one, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_within_the_minute_ends_the_task_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let task = spawn(cancel.clone(), store(&dir));
        tokio::time::sleep(Duration::from_secs(10)).await;
        cancel.cancel();
        task.await.unwrap();
        assert!(started.elapsed() < AFTER_START, "{:?}", started.elapsed());
    }
}
