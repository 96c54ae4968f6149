//! Opening a database: its identity (`application_id`), its schema version, and the
//! pragmas and migrations a writer applies.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{
    APPLICATION_ID, MIGRATION_LIST, MIGRATIONS, PAGE_SIZE, Store, StoreError, StoreOptions,
    backfill, file, wal,
};

/// What a database file is, by its `application_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    Wattson,
    /// No application id and nothing in it: a file SQLite just created.
    New,
}

/// The file's identity: wattson's, or (when `new_allowed`) new and empty; anything else is
/// [`StoreError::NotWattson`].
fn identify(conn: &Connection, path: &Path, new_allowed: bool) -> Result<Identity, StoreError> {
    let sql = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    // Both read in one transaction: another process creating the database between two
    // reads would otherwise show no application id and its tables (a new database that is
    // not new), and this one would refuse a wattson database as not one.
    let snapshot = conn.unchecked_transaction().map_err(sql)?;
    let application_id: i32 = snapshot
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(sql)?;
    if application_id == APPLICATION_ID {
        return Ok(Identity::Wattson);
    }
    if new_allowed && application_id == 0 {
        let objects: i64 = snapshot
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .map_err(sql)?;
        if objects == 0 {
            return Ok(Identity::New);
        }
    }
    Err(StoreError::NotWattson {
        path: path.to_owned(),
        application_id,
    })
}

/// The name SQLite is given for the database at `path`: refused ([`StoreError::Link`]) when
/// `path` itself is a symbolic link, and when its directory is one another user made or
/// another user may write ([`super::directory::check`]), else its directory resolved and its
/// own name kept.
///
/// SQLite follows a link at the database's name, creating the file it names (root's `tariff
/// import` through a dangling link the service user planted in its state directory made a
/// root-owned database wherever the link led, and `-wal`/`-shm` beside it). The connection is
/// opened with `SQLITE_OPEN_NOFOLLOW`, which refuses a link anywhere in the path, so the
/// directories are resolved first: systemd's `/var/lib/<service>` is itself a link for a
/// `DynamicUser` service. Asked with `lstat`, never by opening the file (closing a descriptor
/// of a database releases the process's locks on it: [`super::database_exists`]).
pub(super) fn unlinked(path: &Path) -> Result<PathBuf, StoreError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(StoreError::Link {
            path: path.to_owned(),
            target: std::fs::read_link(path).unwrap_or_default(),
        });
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(path.to_owned());
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    // A directory that cannot be resolved is left for SQLite to say so.
    let Ok(resolved) = std::fs::canonicalize(dir) else {
        return Ok(path.to_owned());
    };
    super::directory::check(dir, &resolved, path)?;
    Ok(resolved.join(name))
}

impl Store {
    /// Opens (creating and migrating if needed) the database at `path` for writing. A link
    /// at `path` is refused, never followed ([`unlinked`]).
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Store, StoreError> {
        let mut conn = Connection::open_with_flags(
            unlinked(path)?,
            OpenFlags::default() | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        let sql = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        // SQLite opens a file it may not write read-only without a word; every flush would
        // then fail.
        if conn.is_readonly(rusqlite::MAIN_DB).map_err(sql)? {
            return Err(StoreError::ReadOnly {
                path: path.to_owned(),
                detail: file::read_only_detail(path),
            });
        }
        if identify(&conn, path, true)? == Identity::New {
            // A new file: 16 KiB pages waste less of each page on raw chunks (about 1.5
            // KiB each) than the default 4 KiB. Must come before anything is written.
            conn.pragma_update(None, "page_size", PAGE_SIZE)
                .map_err(sql)?;
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .map_err(sql)?;
        }
        check_version(&conn, path, false)?;
        write_ahead_log(&conn).map_err(sql)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        // A log sized to the file system, so that it can never fill a small disk.
        wal::apply(&conn, path).map_err(sql)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(sql)?;
        migrate(&mut conn, path)?;
        let identity = file::identity(path);
        let companions = ["-wal", "-shm"]
            .into_iter()
            .filter_map(|suffix| {
                let mut name = path.as_os_str().to_owned();
                name.push(suffix);
                let p = PathBuf::from(name);
                file::identity(&p).map(|id| (p, id))
            })
            .collect();
        let store = Store {
            conn,
            path: path.to_owned(),
            identity,
            companions,
        };
        backfill::covered_time(&store, options)?;
        Ok(store)
    }

    /// Opens an existing database for reading, alongside a daemon that writes it. A link
    /// at `path` is refused, never followed ([`unlinked`]).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open_with_flags(
            unlinked(path)?,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        let sql = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        identify(&conn, path, false)?;
        check_version(&conn, path, true)?;
        Ok(Store {
            conn,
            path: path.to_owned(),
            identity: None,
            companions: Vec::new(),
        })
    }
}

/// How long [`write_ahead_log`] tries while another connection holds the lock it needs.
const WAL_SWITCH_WAIT: Duration = Duration::from_secs(5);

/// `PRAGMA journal_mode = WAL`. Switching needs the file to itself, and SQLite answers "database
/// is locked" at once, without the busy handler, while another connection holds it: a
/// daemon and a command opening a new database together (the other one switching it, or
/// migrating). Tried again until [`WAL_SWITCH_WAIT`], as the busy handler would.
fn write_ahead_log(conn: &Connection) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && started.elapsed() < WAL_SWITCH_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Brings the schema to the latest version. Two processes may open a new database at once
/// (the daemon starting, and a command run beside it that finds the file before its tables):
/// each reads the version before the other's migration commits, and the later one's first
/// `CREATE TABLE` then fails on the tables the other made. Where the version is the latest
/// after a failure, the other finished it; where it is not yet, try again.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        let Err(source) = MIGRATIONS.to_latest(conn) else {
            return Ok(());
        };
        tries += 1;
        let now: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap_or(-1);
        if now == MIGRATION_LIST.len() as i64 {
            return Ok(());
        }
        if tries >= 3 {
            return Err(StoreError::Migrate {
                path: path.to_owned(),
                source: super::error::MigrationFailed(source),
            });
        }
    }
}

fn check_version(conn: &Connection, path: &Path, read_only: bool) -> Result<(), StoreError> {
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        })?;
    let supported = MIGRATION_LIST.len() as i64;
    if found > supported {
        return Err(StoreError::SchemaTooNew {
            path: path.to_owned(),
            found,
            supported,
        });
    }
    if read_only && found < supported {
        return Err(StoreError::SchemaTooOld {
            path: path.to_owned(),
            found,
            supported,
        });
    }
    Ok(())
}
