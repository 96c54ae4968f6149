//! The daemon's heap: one malloc arena for all its threads, and its free pages handed back.
//!
//! `run` parses its command line and configuration, opens and migrates the database, builds
//! its collectors and answers its first requests; what that allocated once is freed, and
//! glibc keeps the freed pages. A minute after start, then hourly, `malloc_trim(0)` hands
//! the heap's free pages back to the kernel. And from the start, [`one_arena`]: the threads
//! share one malloc arena.
//!
//! Memory is judged by the daemon's anonymous memory and PSS (BENCHMARKS.md, "Daemon
//! self-cost"): the binary's code and read-only data are page cache, shared with every other
//! reader of the file, and are not advised away (run 14 measured that doing so gained
//! nothing in either).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The first pass, after start-up's one-off work (the first publish, scrape and minute's
/// projection) is done.
const FIRST: Duration = Duration::from_secs(60);
/// Later passes: what a rare request (a report page, the hourly figures) allocated goes again.
const EVERY: Duration = Duration::from_secs(3600);

/// Trim the heap a minute after start, then hourly, until `cancel`. On the runtime's own
/// thread: a thread of the blocking pool would add a malloc arena of its own to the memory
/// this is for.
pub fn spawn(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + FIRST, EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = tick.tick() => {
                    let started = std::time::Instant::now();
                    let returned = trim_heap();
                    tracing::debug!(
                        "heap trimmed ({}) in {:.2} ms",
                        if returned { "pages returned" } else { "nothing to return" },
                        started.elapsed().as_secs_f64() * 1000.0
                    );
                }
            }
        }
    })
}

/// `malloc_trim(0)`: the heap's free pages back to the kernel (glibc). Whether any went.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn trim_heap() -> bool {
    // SAFETY: malloc_trim takes no pointers; glibc makes it safe to call from any thread at
    // any time.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Other C libraries keep their own policy.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim_heap() -> bool {
    false
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

    #[test]
    fn a_trim_after_freeing_runs_and_the_heap_still_serves() {
        let big: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 * 1024]).collect();
        drop(big);
        let _ = trim_heap();
        let again = vec![7u8; 64 * 1024];
        assert_eq!(again[64 * 1024 - 1], 7);
    }
}
