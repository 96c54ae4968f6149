//! The write-ahead log's size, fitted to the file system it lives on.
//!
//! SQLite appends every commit to `<db>-wal` and copies it into the database at a
//! checkpoint; the log is reused from its start after a complete checkpoint and cut back
//! to `journal_size_limit`. On a big disk wattson lets it reach [`MAX_BYTES`] (a few
//! minutes of writes); on a small file system it gets a sixteenth of its size (and no more
//! than a quarter of the space free when the store opens), at least four pages, so
//! the log can never be what fills the disk: a database of 400 KB on a 2 MB file system
//! keeps a log of at most 128 KiB plus one transaction.
//!
//! The store also truncates the log to nothing when it opens (a log left by a crash, or by
//! a version with a bigger limit) and after a flush fails for lack of space, which returns
//! what the log held to the file system.

use std::path::Path;

use rusqlite::Connection;

use super::PAGE_SIZE;

/// The largest write-ahead log kept, bytes.
pub const MAX_BYTES: i64 = 4 * 1024 * 1024;
/// The smallest budget, pages: a checkpoint every few commits on a tiny file system.
const MIN_PAGES: i64 = 4;

/// The log budget for a database in `dir`, bytes.
pub fn budget_bytes(dir: &Path) -> i64 {
    let min = MIN_PAGES * PAGE_SIZE;
    match nix::sys::statvfs::statvfs(dir) {
        Ok(fs) => {
            let unit = fs.fragment_size() as i64;
            let total = (fs.blocks() as i64).saturating_mul(unit);
            let free = (fs.blocks_available() as i64).saturating_mul(unit);
            (total / 16).min(free / 4).clamp(min, MAX_BYTES)
        }
        Err(_) => MAX_BYTES,
    }
}

/// Sets the checkpoint threshold and the size the log is cut back to; returns the budget.
pub fn apply(conn: &Connection, db: &Path) -> rusqlite::Result<i64> {
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let budget = budget_bytes(dir);
    conn.pragma_update(None, "wal_autocheckpoint", (budget / PAGE_SIZE).max(1))?;
    conn.pragma_update(None, "journal_size_limit", budget)?;
    Ok(budget)
}

/// Copies the log into the database and truncates it to zero bytes. Returns whether it
/// completed (a reader holding an old snapshot keeps part of the log).
pub fn truncate(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0).map(|busy| busy == 0)
    })
}

/// Whether an error is SQLite's "database or disk is full".
pub fn is_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}
