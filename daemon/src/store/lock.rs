//! One writer per database: `<db>.lock` beside the file, locked with `flock(2)` for as long
//! as a writer (`wattson run`, `wattson collect`, `wattson demo`) has the database open.
//!
//! The file names its holder (pid, command line, start time) and carries the writer's
//! [`StoreHealth`], rewritten in place when it changes, so that a second writer's error can
//! say who holds the database and `wattson status` can show how the writer is doing even
//! while it cannot write the database itself. Readers (`status`, `report`) never take the
//! lock; short writes by other commands (`tariff import`, and `sweep` when no daemon runs:
//! beside a daemon it has the daemon store its results, see [`crate::control`]) go through
//! SQLite's own locking and are not refused.
//!
//! A writer that dies loses its `flock` with its last descriptor, so a lock file left behind
//! by a crash never blocks the next start.

use std::fs::{File, TryLockError};
use std::io::{Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::StoreError;
use super::health::StoreHealth;

/// The lock file's contents are padded to this many bytes, so that rewriting them in place
/// needs no new blocks on a full disk.
const PADDED_BYTES: usize = 4096;

/// How long a starting writer retries a lock held for a moment (by `wattson status`
/// checking whether a writer is alive) before it reports the holder.
const CONTENDED_FOR: Duration = Duration::from_millis(500);

/// Who holds the writer lock, as written in the lock file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    /// The holder's command line (program name and arguments), at most 200 characters.
    pub command: String,
    /// When it took the lock, UTC ms.
    pub since_ms: i64,
    /// The writer's health when it last changed.
    pub store: StoreHealth,
    /// Whether the writer serves the database's control socket (`wattson run` does; the
    /// fleet collector does not). Lock files of older versions leave it out: they did.
    #[serde(default = "serves_socket_by_default")]
    pub serves_socket: bool,
}

fn serves_socket_by_default() -> bool {
    true
}

/// Set by writers that serve no control socket (`wattson collect`) before they open the
/// database, so their lock file says so.
static SERVES_NO_SOCKET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This process writes databases without serving their control socket.
pub fn serve_no_socket() {
    SERVES_NO_SOCKET.store(true, std::sync::atomic::Ordering::Relaxed);
}

impl Holder {
    fn for_this_process() -> Holder {
        let mut command: String = std::env::args()
            .enumerate()
            .map(|(i, a)| {
                if i == 0 {
                    Path::new(&a)
                        .file_name()
                        .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
                } else {
                    a
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        if command.chars().count() > 200 {
            command = command.chars().take(199).chain(['…']).collect();
        }
        Holder {
            pid: std::process::id(),
            command,
            since_ms: super::health::now_ms(),
            store: StoreHealth::default(),
            serves_socket: !SERVES_NO_SOCKET.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// "pid 1234 (wattson run --config /etc/wattson/wattson.toml), writing since
    /// 2026-12-01 08:00:00 UTC".
    pub fn describe(&self) -> String {
        format!(
            "pid {} ({}), writing since {}",
            self.pid,
            self.command,
            super::health::utc_text(self.since_ms)
        )
    }
}

/// The writer lock of one database, held until dropped.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
    path: PathBuf,
    holder: Holder,
}

/// The lock file of the database at `db`: `<db>.lock`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl WriterLock {
    /// Takes the writer lock of `db`, or says who holds it.
    pub fn acquire(db: &Path) -> Result<WriterLock, StoreError> {
        let path = lock_path(db);
        let lock_error = |path: &Path, source: std::io::Error| StoreError::Lock {
            path: path.to_owned(),
            uid: nix::unistd::geteuid().as_raw(),
            source,
        };
        // Nothing is created in a directory another user may write (SECURITY.md).
        super::open::unlinked(db)?;
        // Never through a link another user planted at the name (SECURITY.md).
        let file = crate::safe_open::lock_file(&path).map_err(|e| lock_error(&path, e))?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if started.elapsed() < CONTENDED_FOR => {
                    std::thread::sleep(Duration::from_millis(25));
                }
                Err(TryLockError::WouldBlock) => {
                    let holder = read_holder(&path).map_or_else(
                        || "a process that has not written its name yet".to_owned(),
                        |h| h.describe(),
                    );
                    return Err(StoreError::Locked {
                        path: db.to_owned(),
                        holder,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(lock_error(&path, e)),
            }
        }
        let mut lock = WriterLock {
            file,
            path,
            holder: Holder::for_this_process(),
        };
        lock.write_holder().map_err(|e| lock_error(&lock.path, e))?;
        Ok(lock)
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the lock file's path still leads to the file this lock holds (it is gone
    /// when the database's directory was deleted).
    pub fn still_at_path(&self) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        match (self.file.metadata(), std::fs::metadata(&self.path)) {
            (Ok(held), Ok(at_path)) => (held.dev(), held.ino()) == (at_path.dev(), at_path.ino()),
            _ => false,
        }
    }

    /// Rewrites the health part of the lock file in place. A failure (the directory was
    /// deleted, an I/O error) is returned for the caller to log; the lock is still held.
    pub fn publish(&mut self, health: &StoreHealth) -> std::io::Result<()> {
        if self.holder.store == *health {
            return Ok(());
        }
        self.holder.store = health.clone();
        self.write_holder()
    }

    fn write_holder(&mut self) -> std::io::Result<()> {
        let mut text = serde_json::to_string(&self.holder).map_err(std::io::Error::other)?;
        text.push('\n');
        let padded = text.len().max(PADDED_BYTES);
        let mut bytes = text.into_bytes();
        bytes.resize(padded, b' ');
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(&bytes)?;
        // Shorter than before only when an earlier text overflowed the padding.
        self.file.set_len(padded as u64)?;
        Ok(())
    }
}

/// The holder written in a lock file, if it can be read and parsed.
fn read_holder(lock: &Path) -> Option<Holder> {
    use std::io::Read as _;
    let mut text = String::new();
    crate::safe_open::existing_lock_file(lock)
        .ok()??
        .take(64 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    serde_json::from_str(text.trim_end()).ok()
}

/// Whether a writer holds the database at `db` now, and what its lock file says.
#[derive(Debug, Clone, PartialEq)]
pub enum WriterState {
    /// No lock file: no writer has opened this database since locks were introduced.
    Never,
    /// A writer holds the lock; its last published health (`None` until it wrote it).
    Live(Option<Holder>),
    /// No writer holds the lock; the last one that did.
    Stopped(Option<Holder>),
}

/// Reads the writer state of `db` without disturbing a writer: a shared lock is tried and
/// released at once (a writer holding the exclusive lock makes it fail).
pub fn writer_state(db: &Path) -> WriterState {
    let path = lock_path(db);
    let Ok(Some(file)) = crate::safe_open::existing_lock_file(&path) else {
        return WriterState::Never;
    };
    let holder = read_holder(&path);
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            WriterState::Stopped(holder)
        }
        Err(TryLockError::WouldBlock) => WriterState::Live(holder),
        Err(TryLockError::Error(_)) => WriterState::Stopped(holder),
    }
}
