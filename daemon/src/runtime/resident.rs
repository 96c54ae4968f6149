//! Letting go of the memory the daemon used once, at start, and no longer needs resident.
//!
//! `run` parses its command line and configuration, opens and migrates the database, builds
//! its collectors and answers its first requests; the dynamic linker reads the binary's
//! relocation tables. The kernel maps 64 KB around each page of a file it faults in, so after
//! a minute nearly all of the binary's code (6.1 of 6.8 MB) is in the process's page tables,
//! although each second's work touches a fraction of it. Once a minute after start, then
//! hourly:
//!
//! - the executable's private, read-only mappings that hold no copied-on-write pages (its
//!   code, `.rodata`, `.eh_frame`, the relocation tables) get `MADV_DONTNEED`: the pages stay
//!   in the page cache, and the next use of one maps it again from there. Writable mappings,
//!   and the relocated read-only data (`RELRO`, whose pages were written at start and would
//!   lose their relocations), are left alone; so are shared libraries, which a `dlclose`
//!   could unmap between the reading of the map and the advice.
//! - at the first pass only, the store's connection lets go of its compiled statements: the
//!   ones start-up alone ran (opening, migrating, loading the open chunks) would otherwise
//!   keep their place in its cache of 64 for the daemon's life; what runs on a schedule is
//!   compiled again at its next run, once (about 40 KB less, 162 against 119 KB of
//!   statements in SQLite's own count, `SQLITE_DBSTATUS_STMT_USED`). Not hourly: what a
//!   later pass would drop is what the next hour compiles again.
//! - `malloc_trim(0)` hands the heap's free pages back to the kernel (glibc).
//!
//! And from the start, [`one_arena`]: the threads share one malloc arena.
//!
//! The advice lowers the daemon's PSS, not its anonymous memory: what it lets go is mapped
//! page cache. It pays with the link order (`daemon/build.rs`), which puts the code the steady
//! state runs in one stretch, so that what is mapped again is that stretch rather than most
//! of the text: PSS 4.7-5.0 MB with both, 8.3-9.0 with the advice alone, 9.7-9.9 with
//! neither (BENCHMARKS.md, run 15). Mapped code is also the page cache the kernel is slowest
//! to take back under memory pressure. What is let go is logged at debug level.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::StoreHandle;

/// The first pass, after start-up's one-off work (the first publish, scrape and minute's
/// projection) is done.
const FIRST: Duration = Duration::from_secs(60);
/// Later passes: what a rare request (a report page, the hourly figures) touched goes again.
const EVERY: Duration = Duration::from_secs(3600);

/// Run [`release`] a minute after start, then hourly, until `cancel`. On the runtime's own
/// thread: a pass reads `/proc/self/smaps` (memory, not disk; about a millisecond for
/// the daemon's hundred-odd mappings), and a thread of the blocking pool would add a malloc
/// arena of its own to the memory this is for.
pub fn spawn(cancel: CancellationToken, store: StoreHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + FIRST, EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = tick.tick() => {
                    // Before the trim, which hands back what the statements held.
                    if std::mem::take(&mut first)
                        && let Err(e) = store
                            .query_async(|s| s.conn().flush_prepared_statement_cache())
                            .await
                    {
                        tracing::debug!("the store kept its compiled statements: {e}");
                    }
                    let started = std::time::Instant::now();
                    match release() {
                        Ok(r) => tracing::debug!(
                            "let go of {} KB of start-up pages in {} mappings of the executable \
                             in {:.2} ms",
                            r.file_kb,
                            r.mappings,
                            started.elapsed().as_secs_f64() * 1000.0
                        ),
                        Err(e) => tracing::debug!("could not read /proc/self/smaps: {e}"),
                    }
                }
            }
        }
    })
}

/// A mapping of the process, from `/proc/self/smaps`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    /// `r-xp`, `r--p`, `rw-p`, ...
    perms: String,
    path: String,
    rss_kb: u64,
    anonymous_kb: u64,
}

impl Mapping {
    /// Whether `MADV_DONTNEED` can only drop page-table entries here: a private file mapping
    /// that is not writable and holds no page copied on write.
    fn is_clean_file_text(&self, exe: &str) -> bool {
        let p = self.perms.as_bytes();
        p.len() == 4
            && p[0] == b'r'
            && p[1] == b'-'
            && p[3] == b'p'
            && self.anonymous_kb == 0
            && self.path == exe
    }
}

/// Parse `/proc/PID/smaps`: each mapping's header line, then its `Key: value kB` lines.
fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else {
            continue;
        };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            let perms = fields.next().unwrap_or_default().to_owned();
            // offset, device, inode, then the path (which may hold spaces).
            let path = fields.skip(3).collect::<Vec<_>>().join(" ");
            out.push(Mapping {
                start,
                end,
                perms,
                path,
                rss_kb: 0,
                // Unknown until its line is read: without one the mapping is left alone.
                anonymous_kb: u64::MAX,
            });
            continue;
        }
        let Some(m) = out.last_mut() else {
            continue;
        };
        let kb = || fields.clone().next().and_then(|v| v.parse::<u64>().ok());
        match first {
            "Rss:" => m.rss_kb = kb().unwrap_or(0),
            // Unknown is not clean: a mapping whose field cannot be read is left alone.
            "Anonymous:" => m.anonymous_kb = kb().unwrap_or(u64::MAX),
            _ => {}
        }
    }
    out
}

/// What one pass let go of, KB.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub file_kb: u64,
    pub mappings: usize,
}

/// One pass: advise the executable's clean read-only mappings away and trim the heap.
pub fn release() -> std::io::Result<Released> {
    let exe = std::fs::read_link("/proc/self/exe")?
        .to_string_lossy()
        .into_owned();
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut released = Released::default();
    for m in parse_smaps(&smaps) {
        if !m.is_clean_file_text(&exe) || m.rss_kb == 0 {
            continue;
        }
        if dont_need(m.start, m.end - m.start).is_ok() {
            released.file_kb += m.rss_kb;
            released.mappings += 1;
        }
    }
    trim_heap();
    Ok(released)
}

#[allow(unsafe_code)]
fn dont_need(start: usize, len: usize) -> std::io::Result<()> {
    // SAFETY: the range is one whole mapping of this process's own executable, which stays
    // mapped for the process's life; it is private, not writable, and holds no page copied
    // on write (`Anonymous: 0 kB` in smaps), so its contents are the file's. MADV_DONTNEED
    // drops the page-table entries only; the next access maps the same bytes from the page
    // cache, so no value any code reads changes.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_heap() {
    // SAFETY: malloc_trim takes no pointers; glibc makes it safe to call from any thread at
    // any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

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

    const SMAPS: &str = "\
560783229000-560783492000 r--p 00000000 fe:00 5310689                    /usr/bin/wattson
Size:               2468 kB
Rss:                1628 kB
Anonymous:             0 kB
560783492000-560783a29000 r-xp 00268000 fe:00 5310689                    /usr/bin/wattson
Rss:                5336 kB
Anonymous:             0 kB
560783a29000-560783b4e000 r--p 007fe000 fe:00 5310689                    /usr/bin/wattson
Rss:                1152 kB
Anonymous:          1152 kB
560783b4e000-560783b55000 rw-p 00922000 fe:00 5310689                    /usr/bin/wattson
Rss:                  28 kB
Anonymous:            28 kB
5607a34d2000-5607a3635000 rw-p 00000000 00:00 0                          [heap]
Rss:                1372 kB
Anonymous:          1372 kB
7fb1d2e00000-7fb1d2f00000 r-xp 00026000 fe:00 1234                       /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1048 kB
Anonymous:             0 kB
7ffda7945000-7ffda7966000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
Anonymous:             0 kB
";

    #[test]
    fn only_the_executables_clean_read_only_mappings_are_let_go() {
        let maps = parse_smaps(SMAPS);
        assert_eq!(maps.len(), 7);
        assert_eq!(maps[1].start, 0x5607_8349_2000);
        assert_eq!(maps[1].rss_kb, 5336);
        let chosen: Vec<&str> = maps
            .iter()
            .filter(|m| m.is_clean_file_text("/usr/bin/wattson"))
            .map(|m| m.perms.as_str())
            .collect();
        // Not RELRO (relocated at start), not .data, the heap, libc or the vDSO.
        assert_eq!(chosen, ["r--p", "r-xp"]);
    }

    #[test]
    fn a_path_with_spaces_and_a_missing_field_are_read_safely() {
        let text = "1000-2000 r-xp 00000000 fe:00 7 /opt/my tools/wattson (deleted)\nRss: 4 kB\n";
        let maps = parse_smaps(text);
        assert_eq!(maps[0].path, "/opt/my tools/wattson (deleted)");
        // Without an `Anonymous:` line, or with a garbled one, the mapping is left alone.
        assert!(!maps[0].is_clean_file_text("/opt/my tools/wattson (deleted)"));
        let garbled = "1000-2000 r-xp 00000000 fe:00 7 /x\nAnonymous: lots kB\n";
        assert!(!parse_smaps(garbled)[0].is_clean_file_text("/x"));
    }

    #[test]
    fn a_trim_after_freeing_runs_and_the_heap_still_serves() {
        let big: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 * 1024]).collect();
        drop(big);
        trim_heap();
        let again = vec![7u8; 64 * 1024];
        assert_eq!(again[64 * 1024 - 1], 7);
    }

    #[test]
    fn a_pass_over_this_process_lets_go_and_the_code_still_runs() {
        let released = release().expect("smaps readable");
        // The test binary's own code is mapped and was run: something was let go.
        assert!(released.mappings >= 1, "{released:?}");
        // ... and code keeps running from the page cache.
        assert_eq!(parse_smaps(SMAPS).len(), 7);
    }
}
