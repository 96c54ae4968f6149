//! Why a store operation failed ([`StoreError`], each variant naming the database file),
//! and an error's causes on one line.

use std::path::PathBuf;

use super::{APPLICATION_ID, chunk_codec};

/// Why a store operation failed. Each variant names the database file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("opening database {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database {path}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("migrating database {path}")]
    Migrate {
        path: PathBuf,
        #[source]
        source: MigrationFailed,
    },
    #[error(
        "{path} is not a wattson database (application_id {application_id:#010x}, expected {APPLICATION_ID:#010x})"
    )]
    NotWattson { path: PathBuf, application_id: i32 },
    #[error(
        "database {path} has schema version {found}, this wattson knows up to {supported}: upgrade wattson"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "database {path} has schema version {found}, this wattson reads {supported}: let the daemon migrate it first"
    )]
    SchemaTooOld {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("database {path}: chunk of series {series_id} at {start_ms} ms is corrupt")]
    Corrupt {
        path: PathBuf,
        series_id: i64,
        start_ms: i64,
        #[source]
        source: chunk_codec::DecodeError,
    },
    #[error("database {path}: unknown metric {metric:?} in series {series_id}")]
    UnknownMetric {
        path: PathBuf,
        series_id: i64,
        metric: String,
    },
    #[error("starting the writer thread of database {path}")]
    Thread {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("store queue for {path} is full: batch dropped ({dropped_batches} dropped so far)")]
    QueueFull { path: PathBuf, dropped_batches: u64 },
    #[error("store writer for {path} has stopped")]
    Closed { path: PathBuf },
    #[error(
        "database {path} is already being written by {holder}: one writer per database \
         (`wattson run` and `wattson collect` share [storage] path by default); stop that \
         one, or give this one another [storage] path or --db"
    )]
    Locked { path: PathBuf, holder: String },
    #[error(
        "cannot open the writer lock {path} (wattson runs as uid {uid}): the database's \
         directory and files must be writable by that user"
    )]
    Lock {
        path: PathBuf,
        uid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "database {path} is read-only for wattson ({detail}): make it writable by the user \
         wattson runs as, or give another [storage] path or --db"
    )]
    ReadOnly { path: PathBuf, detail: String },
    #[error("database {path} was {what} while in use and cannot be created again")]
    Reopen {
        path: PathBuf,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("database {path}: {detail}")]
    Lost { path: PathBuf, detail: String },
    #[error(
        "database {path} is a symbolic link (to {target}): wattson opens a database by its own \
         name, never through a link (one planted in the database's directory would have \
         wattson, perhaps as root, create or write the file it names); point [storage] path or \
         --db at the database itself, or remove the link"
    )]
    Link { path: PathBuf, target: PathBuf },
    #[error(
        "the database's directory {dir} {why}: whoever may write it may replace the database \
         or plant a link where wattson, perhaps as root, opens or creates a file, so wattson \
         opens nothing in it (as ssh's StrictModes); make it root's or wattson's user's and \
         writable by its owner alone (`chmod go-w {dir}`), or give [storage] path or --db a \
         directory of its own"
    )]
    Directory { dir: PathBuf, why: String },
    #[error(
        "the database's directory {dir} is a symbolic link (to {target}) made by {owner}: \
         wattson follows a link to a database's directory only when root or the user it runs \
         as ({me}) made it, as another user may point it anywhere; point [storage] path or \
         --db at the directory it leads to, or have root make the link"
    )]
    DirectoryLink {
        dir: PathBuf,
        target: PathBuf,
        owner: String,
        me: String,
    },
}

/// Why a schema migration failed, with SQLite's reason but without the migration's whole
/// SQL (which the migration crate's message, and SQLite's error for a batch, quote).
#[derive(Debug)]
pub struct MigrationFailed(pub rusqlite_migration::Error);

impl std::fmt::Display for MigrationFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            rusqlite_migration::Error::RusqliteError { err, .. } => match err {
                rusqlite::Error::SqliteFailure(_, Some(why))
                | rusqlite::Error::SqlInputError { msg: why, .. } => {
                    write!(f, "a step of the schema failed: {why}")
                }
                other => write!(f, "a step of the schema failed: {other}"),
            },
            other => write!(f, "{other}"),
        }
    }
}

impl std::error::Error for MigrationFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            // Said in full above.
            rusqlite_migration::Error::RusqliteError { .. } => None,
            other => std::error::Error::source(other),
        }
    }
}

/// An error and its causes on one line (SQLite's own reason, such as "database or disk is
/// full", is the cause of the store's error).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}
