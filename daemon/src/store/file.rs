//! The database file a writer has open: whether this process may write it, and whether its
//! path still leads to it (it is gone when the file or its directory was deleted, or the
//! file replaced).

use std::path::Path;

use rusqlite::Connection;

use super::{Store, StoreError, wal};

/// What [`Store::path_changed`] says when the database file is still the one at its path
/// but its write-ahead log (or shared-memory index) was deleted from under the connection.
pub(super) const LOG_DELETED: &str =
    "left without its write-ahead log (deleted by another process)";

impl Store {
    /// Copies the write-ahead log into the database file and cuts the log to nothing, so
    /// that the file alone holds everything stored (a database a command leaves for the
    /// user to keep or copy). Whether it completed: a reader holding an old snapshot keeps
    /// part of the log.
    pub fn fold_log(&self) -> bool {
        wal::truncate(&self.conn).unwrap_or(false)
    }

    /// Closes a store whose file was deleted or replaced while open. SQLite neither
    /// checkpoints nor removes the write-ahead log of a moved file when it closes, and the
    /// log is named by path: a new file at the same path would take the old file's log for
    /// its own. So the log is checkpointed into the old file first (truncated), and the
    /// log and index this store created are removed once it is closed.
    pub(super) fn close_moved(self) {
        let _ = wal::truncate(&self.conn);
        let companions = self.companions.clone();
        drop(self);
        for (path, id) in companions {
            if identity(&path) == Some(id) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Closes a store whose write-ahead log was deleted from under it ([`LOG_DELETED`]),
    /// without copying that log into the file: its pages may be older than what other
    /// connections wrote since, through the log now at the path, and copying them would
    /// undo their writes. Nothing only in it is lost: the writer checks before and after
    /// each commit, so a batch that went into the orphaned log is written again.
    pub(super) fn close_orphaned(self) {
        let _ = self.conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        );
        drop(self);
    }

    /// How the path no longer leads to the file this store writes: `Some("deleted")` (the
    /// file or its directory is gone), `Some("replaced by another file")`, or
    /// [`LOG_DELETED`] (the file is there but its write-ahead log or shared-memory index is
    /// not the one this connection writes: another process closed its connection as if it
    /// were the last and deleted them); `None` while it does, or when it cannot be told.
    pub fn path_changed(&self) -> Option<&'static str> {
        let opened = self.identity?;
        let changed = self.file_changed(opened);
        if changed.is_some() {
            return changed;
        }
        self.companions
            .iter()
            .any(|(path, id)| identity(path) != Some(*id))
            .then_some(LOG_DELETED)
    }

    fn file_changed(&self, opened: (u64, u64)) -> Option<&'static str> {
        match std::fs::metadata(&self.path) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Some("deleted")
            }
            Err(_) => None,
            Ok(m) => {
                use std::os::unix::fs::MetadataExt as _;
                ((m.dev(), m.ino()) != opened).then_some("replaced by another file")
            }
        }
    }

    /// A stand-in for a writer whose file is gone and could not be opened again: an empty
    /// database in memory whose path never leads to it, so that every flush tries to open
    /// the file anew instead of writing here.
    pub(super) fn detached(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        Ok(Store {
            conn,
            path: path.to_owned(),
            identity: Some((u64::MAX, u64::MAX)),
            companions: Vec::new(),
        })
    }
}

/// Device and inode of the file at `path`.
pub(super) fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Why a database file is read-only for this process: who it runs as, who owns the file,
/// and whether its file system is mounted read-only.
pub(super) fn read_only_detail(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let mut parts = vec![format!(
        "wattson runs as uid {}",
        nix::unistd::geteuid().as_raw()
    )];
    if let Ok(m) = std::fs::metadata(path) {
        parts.push(format!(
            "the file is owned by uid {} with mode {:o}",
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if nix::sys::statvfs::statvfs(dir)
        .is_ok_and(|fs| fs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
    {
        parts.push("its file system is mounted read-only".to_owned());
    }
    parts.join("; ")
}
