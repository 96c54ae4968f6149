//! The original value of every file `wattson idle --measure` may write, kept in the
//! database (`idle_original`) before the first write, and the only way such a file is
//! written: through the run's allowlist.
//!
//! A file is restored by writing its original value back (the bracketed entry of a list file
//! such as the ASPM policy) and reading it again; where it does not read as it did (a fixture
//! tree's plain file does not re-render a list the way the kernel does), its original bytes
//! are written. Restoring happens after each setting, after Ctrl-C and SIGTERM, and, after a
//! crash or SIGKILL, at the start of the next wattson command ([`recover_at_start`]).
//!
//! A running measurement holds an exclusive `flock` on `<database>.idle-lock`; the kernel
//! drops it when the process dies, however it dies. Recovery only restores a run whose lock
//! it can take, so a command started while a measurement runs leaves it alone.
//!
//! Recovery (what runs left changed, put back at the next start or when asked, and which
//! databases root takes that from) is `recovery`'s.

use std::fs::File;
use std::path::{Path, PathBuf};

use rusqlite::params;
use wattson_collectors::SysRoot;
use wattson_collectors::idle::settings::current_of_list;

use super::IdleError;
use super::trials::Allowlist;
use crate::safe_open;
use crate::store::Store;

mod recovery;

pub use recovery::{Recovery, recover_at_start, restore_asked, restore_pending};

/// A file as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    pub path: PathBuf,
    /// Its bytes as read.
    pub content: Vec<u8>,
    /// What restoring writes.
    pub value: String,
}

impl Original {
    /// Read `path` as it is now.
    pub fn read(path: &Path) -> Result<Original, IdleError> {
        let content = std::fs::read(path).map_err(|source| IdleError::Read {
            path: path.to_owned(),
            source,
        })?;
        let value = current_of_list(&String::from_utf8_lossy(&content));
        Ok(Original {
            path: path.to_owned(),
            content,
            value,
        })
    }
}

/// Why a file could not be put back; one line, its OS reason included (the lines of
/// several are joined).
#[derive(Debug, thiserror::Error)]
pub enum NotRestored {
    /// The value could not be written.
    #[error("writing {value:?} to {}: {cause}", path.display())]
    Write {
        value: String,
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The file reads otherwise after the write.
    #[error("{} reads {reads:?} after restoring, not {value:?}", path.display())]
    ReadsOtherwise {
        path: PathBuf,
        reads: String,
        value: String,
    },
}

/// Put one file back as it was; `Err` says what it reads instead, or the OS error.
pub fn restore(o: &Original, root: &SysRoot) -> Result<(), NotRestored> {
    let reads_as_before = || std::fs::read(&o.path).is_ok_and(|now| now == o.content);
    safe_open::write_setting(&o.path, o.value.as_bytes(), root).map_err(|cause| {
        NotRestored::Write {
            value: o.value.clone(),
            path: o.path.clone(),
            cause,
        }
    })?;
    if reads_as_before() {
        return Ok(());
    }
    // A plain file (a fixture) keeps what was written: put its bytes back.
    if safe_open::write_setting(&o.path, &o.content, root).is_ok() && reads_as_before() {
        return Ok(());
    }
    let now = std::fs::read(&o.path).unwrap_or_default();
    if current_of_list(&String::from_utf8_lossy(&now)) == o.value {
        return Ok(());
    }
    Err(NotRestored::ReadsOtherwise {
        path: o.path.clone(),
        reads: String::from_utf8_lossy(&now).trim().to_owned(),
        value: o.value.clone(),
    })
}

/// The running measurement's record of what it may change.
#[derive(Debug)]
pub struct Journal {
    run_id: i64,
    allow: Allowlist,
    originals: Vec<Original>,
}

impl Journal {
    /// Read every file of `allow` and store it under `run_id`, in one transaction, before
    /// anything is written.
    pub fn record(store: &Store, run_id: i64, allow: Allowlist) -> Result<Journal, IdleError> {
        let originals: Vec<Original> = allow
            .files()
            .map(|p| Original::read(p))
            .collect::<Result<_, IdleError>>()?;
        let tx = store.conn().unchecked_transaction()?;
        for o in &originals {
            tx.execute(
                "INSERT INTO idle_original (run_id, path, content, value) VALUES (?1, ?2, ?3, ?4)",
                params![run_id, o.path.to_string_lossy(), o.content, o.value],
            )?;
        }
        tx.commit().map_err(|source| IdleError::StoreOriginals {
            db: store.path().to_owned(),
            source,
        })?;
        Ok(Journal {
            run_id,
            allow,
            originals,
        })
    }

    /// Write `value` into `path`, which must be on the allowlist.
    pub fn write(&self, path: &Path, value: &str) -> Result<(), IdleError> {
        if !self.allow.contains(path) {
            return Err(IdleError::NotRecorded {
                path: path.to_owned(),
            });
        }
        safe_open::write_setting(path, value.as_bytes(), self.allow.root()).map_err(|source| {
            IdleError::Write {
                value: value.to_owned(),
                path: path.to_owned(),
                source,
            }
        })
    }

    /// Restore `paths` (every recorded file when `None`) and mark them restored in `store`.
    /// Returns one line per file that could not be restored.
    pub fn restore(&self, store: &Store, paths: Option<&[PathBuf]>) -> Vec<String> {
        let mut failed = Vec::new();
        let now = chrono::Utc::now().timestamp_millis();
        for o in &self.originals {
            if paths.is_some_and(|ps| !ps.contains(&o.path)) {
                continue;
            }
            match restore(o, self.allow.root()) {
                Ok(()) => {
                    if let Err(e) = store.conn().execute(
                        "UPDATE idle_original SET restored_ms = ?3
                         WHERE run_id = ?1 AND path = ?2 AND restored_ms IS NULL",
                        params![self.run_id, o.path.to_string_lossy(), now],
                    ) {
                        tracing::warn!(
                            "{} is restored, but marking it so in {} failed: {e}",
                            o.path.display(),
                            store.path().display()
                        );
                    }
                }
                Err(why) => failed.push(why.to_string()),
            }
        }
        failed
    }
}

/// The lock file of the database at `db`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".idle-lock");
    db.with_file_name(name)
}

/// The exclusive lock a measurement holds while it runs.
#[derive(Debug)]
pub struct MeasureLock {
    _lock: nix::fcntl::Flock<File>,
}

/// Take the lock of `db` for a measurement; `Err` when another measurement holds it.
pub fn lock(db: &Path) -> Result<MeasureLock, IdleError> {
    let path = lock_path(db);
    let file = safe_open::lock_file(&path).map_err(|source| IdleError::LockFile {
        path: path.clone(),
        source,
    })?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(l) => Ok(MeasureLock { _lock: l }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(IdleError::Busy {
            db: db.to_owned(),
            lock: path,
        }),
        Err((_, source)) => Err(IdleError::Lock { path, source }),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_file_restores_its_bytes_and_a_plain_one_its_value() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path(), dir.path().join("proc"));
        let policy = dir.path().join("policy");
        std::fs::write(&policy, "default [performance] powersave powersupersave\n").unwrap();
        let o = Original::read(&policy).unwrap();
        assert_eq!(o.value, "performance");
        safe_open::write_setting(&policy, b"powersave", &root).unwrap();
        restore(&o, &root).unwrap();
        assert_eq!(std::fs::read(&policy).unwrap(), o.content);

        let nmi = dir.path().join("nmi_watchdog");
        std::fs::write(&nmi, "1\n").unwrap();
        let o = Original::read(&nmi).unwrap();
        safe_open::write_setting(&nmi, b"0", &root).unwrap();
        restore(&o, &root).unwrap();
        assert_eq!(std::fs::read_to_string(&nmi).unwrap(), "1\n");
    }

    #[test]
    fn writing_never_creates_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path(), dir.path().join("proc"));
        let missing = dir.path().join("gone");
        assert!(safe_open::write_setting(&missing, b"1", &root).is_err());
        assert!(!missing.exists());
    }

    #[test]
    fn the_lock_is_exclusive_and_dies_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("w.db");
        let held = lock(&db).unwrap();
        let err = lock(&db).unwrap_err();
        assert!(err.to_string().contains("another"), "{err}");
        drop(held);
        lock(&db).unwrap();
        assert_eq!(lock_path(&db), dir.path().join("w.db.idle-lock"));
    }
}
