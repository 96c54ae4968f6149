//! Recovery: the files earlier `wattson idle --measure` runs left changed (their
//! `idle_original` rows not marked restored), put back at the start of the next wattson
//! command after a crash ([`recover_at_start`]), by a new measurement before it writes
//! ([`restore_pending`]), or when asked (`wattson idle --restore`, [`restore_asked`]).
//!
//! A database is not trusted to say where root writes (SECURITY.md): every row is checked
//! against the settings catalogue re-derived under the configured roots
//! ([`Catalogue::vet`]); a row naming anything else, or a value its setting does not take,
//! is refused, logged and kept. Root recovers at start only from a database owned by root
//! or the service user; any other is restored only when asked (`wattson idle --restore`).

use std::path::{Path, PathBuf};

use rusqlite::params;
use wattson_collectors::SysRoot;

use super::{Original, lock_path, restore};
use crate::idle::IdleError;
use crate::idle::catalogue::Catalogue;
use crate::safe_open;
use crate::store::{Store, StoreOptions};

/// A recorded file not yet restored.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    run_id: i64,
    started_ms: i64,
    original: Original,
}

/// Files left changed by runs that ended without restoring them. A database without the
/// idle tables (older schema) has none.
fn pending(store: &Store) -> Vec<Pending> {
    let Ok(mut stmt) = store.conn().prepare(
        "SELECT o.run_id, r.started_ms, o.path, o.content, o.value
         FROM idle_original o JOIN idle_run r ON r.id = o.run_id
         WHERE o.restored_ms IS NULL ORDER BY o.run_id, o.path",
    ) else {
        return Vec::new();
    };
    stmt.query_map([], |r| {
        Ok(Pending {
            run_id: r.get(0)?,
            started_ms: r.get(1)?,
            original: Original {
                path: PathBuf::from(r.get::<_, String>(2)?),
                content: r.get(3)?,
                value: r.get(4)?,
            },
        })
    })
    .and_then(Iterator::collect::<Result<Vec<_>, _>>)
    .unwrap_or_default()
}

/// Put back every file of `waiting` that the catalogue vouches for, marking each in `writer`
/// when there is one, and end the runs still marked running as interrupted. A row the
/// catalogue refuses is left as it is, neither written nor marked.
fn restore_list(writer: Option<&Store>, waiting: &[Pending], catalogue: &Catalogue) -> Recovery {
    let mut out = Recovery::default();
    let now = chrono::Utc::now().timestamp_millis();
    let mut runs: Vec<i64> = Vec::new();
    for p in waiting {
        let o = &p.original;
        if let Err(why) = catalogue.vet(&o.path, &o.value, &o.content) {
            out.refused.push(why.to_string());
            continue;
        }
        match restore(o, catalogue.root()) {
            Ok(()) => {
                out.restored.push(o.path.clone());
                if let Some(w) = writer {
                    let _ = w.conn().execute(
                        "UPDATE idle_original SET restored_ms = ?3 WHERE run_id = ?1 AND path = ?2",
                        params![p.run_id, o.path.to_string_lossy(), now],
                    );
                }
                if !runs.contains(&p.run_id) {
                    runs.push(p.run_id);
                }
            }
            Err(why) => out.failed.push(why.to_string()),
        }
    }
    if let Some(w) = writer {
        for run in runs {
            let _ = w.conn().execute(
                "UPDATE idle_run SET status = 'interrupted', ended_ms = coalesce(ended_ms, ?2)
                 WHERE id = ?1 AND status = 'running'",
                params![run, now],
            );
        }
    }
    out
}

/// Logs the rows of `db` that were refused, once each, with what to do.
fn log_refused(db: &Path, refused: &[String]) {
    for why in refused {
        tracing::error!(
            "refusing to restore a setting that {} names: {why}. Nothing was written; the row \
             is kept in its idle_original table for you to inspect (`wattson idle` lists this \
             machine's settings as they are)",
            db.display()
        );
    }
}

/// With the measurement lock held: restore what earlier runs left changed in `store`.
/// Returns one line per file that could not be restored (refused rows included).
pub fn restore_pending(store: &Store, catalogue: &Catalogue) -> Vec<String> {
    let waiting = pending(store);
    if waiting.is_empty() {
        return Vec::new();
    }
    let r = restore_list(Some(store), &waiting, catalogue);
    log_refused(store.path(), &r.refused);
    if !r.restored.is_empty() {
        tracing::warn!(
            "an earlier `wattson idle --measure` ended without restoring {} file(s): restored \
             them now",
            r.restored.len()
        );
    }
    r.failed.into_iter().chain(r.refused).collect()
}

/// What [`recover_at_start`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recovery {
    /// Files put back.
    pub restored: Vec<PathBuf>,
    /// Files still changed, each with why.
    pub failed: Vec<String>,
    /// Rows the catalogue refused (a path or value wattson never records), each with why.
    pub refused: Vec<String>,
    /// Whether the database was passed over as not root's or the service's to trust.
    pub untrusted: bool,
}

/// The user the installed service runs as (systemd/wattson.service).
const SERVICE_USER: &str = "wattson";

/// Why root must not take `db`'s word for what to write: `Some(owner)` when the database is
/// owned by neither root, this user, nor the service user, or anyone may write it.
fn untrusted_owner(db: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let euid = nix::unistd::geteuid().as_raw();
    let meta = std::fs::symlink_metadata(db).ok()?;
    let owner = meta.uid();
    let service = nix::unistd::User::from_name(SERVICE_USER)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw());
    let name = || {
        nix::unistd::User::from_uid(owner.into())
            .ok()
            .flatten()
            .map_or_else(
                || format!("uid {owner}"),
                |u| format!("{} (uid {owner})", u.name),
            )
    };
    if meta.mode() & 0o002 != 0 {
        return Some(format!("{}, and anyone may write it", name()));
    }
    let trusted = owner == 0 || owner == euid || Some(owner) == service;
    (!trusted).then(name)
}

/// At the start of a wattson command: restore what a crashed `wattson idle --measure` left
/// changed in `db`'s machine (the settings under `root`). Does nothing when there is no
/// database, nothing pending, or a measurement is running now; as root, nothing from a
/// database owned by another user (say so, and how to restore from it when it is yours).
pub fn recover_at_start(db: &Path, root: &SysRoot) -> Recovery {
    let mut out = Recovery::default();
    if !db.is_file() {
        return out;
    }
    let Ok(reader) = Store::open_read_only(db) else {
        return out;
    };
    let waiting = pending(&reader);
    drop(reader);
    if waiting.is_empty() {
        return out;
    }
    if nix::unistd::geteuid().is_root()
        && let Some(owner) = untrusted_owner(db)
    {
        tracing::error!(
            "{} says {} setting(s) were left changed by an interrupted `wattson idle \
             --measure`, but it is owned by {owner}, not by root or the service user: as root, \
             wattson does not restore settings on a database's word unless asked. If that \
             measurement was yours, check the settings with `wattson idle` and run `wattson \
             idle --restore --db {}`",
            db.display(),
            waiting.len(),
            db.display()
        );
        out.untrusted = true;
        return out;
    }
    let Some(out) = restore_locked(db, &waiting, root) else {
        return out;
    };
    log_recovery(db, &waiting, &out);
    out
}

/// Restore `waiting` from `db` with the measurement lock taken; `None` when a measurement
/// holds it (it is running).
fn restore_locked(
    db: &Path,
    waiting: &[Pending],
    root: &wattson_collectors::SysRoot,
) -> Option<Recovery> {
    // A live measurement holds the lock; a dead one's lock died with it.
    let _lock = match safe_open::existing_lock_file(&lock_path(db)) {
        Ok(Some(f)) => {
            Some(nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).ok()?)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::error!("not restoring settings from {}: {e}", db.display());
            return None;
        }
    };
    let writer = Store::open(db, &StoreOptions::default()).ok();
    let catalogue = Catalogue::of(root);
    let out = restore_list(writer.as_ref(), waiting, &catalogue);
    if writer.is_none() && !out.restored.is_empty() {
        tracing::warn!(
            "could not mark them restored in {}: the next command as root will find them \
             already restored",
            db.display()
        );
    }
    Some(out)
}

fn log_recovery(db: &Path, waiting: &[Pending], out: &Recovery) {
    let when = waiting
        .first()
        .and_then(|p| chrono::DateTime::from_timestamp_millis(p.started_ms))
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default();
    log_refused(db, &out.refused);
    if !out.restored.is_empty() {
        tracing::warn!(
            "`wattson idle --measure` started {when} ended without restoring its changes; \
             restored {} file(s): {}",
            out.restored.len(),
            out.restored
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !out.failed.is_empty() {
        // As root already, running again would meet the same reasons.
        let what_to_do = if nix::unistd::geteuid().is_root() {
            "put them back by hand (each reason says which file and why)".to_owned()
        } else {
            format!(
                "run any wattson command as root with this database ({}) to restore them",
                db.display()
            )
        };
        tracing::error!(
            "`wattson idle --measure` started {when} left settings changed that this command \
             could not restore ({}): {what_to_do}",
            out.failed.join("; "),
        );
    }
}

/// `wattson idle --restore`: restore what `db` records as left changed, whoever owns it,
/// still only into the catalogue's files with values their settings take. `None` when a
/// measurement is running on it now.
pub fn restore_asked(
    db: &Path,
    root: &wattson_collectors::SysRoot,
) -> Result<Option<Recovery>, IdleError> {
    let reader = Store::open_read_only(db).map_err(|source| IdleError::OpenDatabase {
        db: db.to_owned(),
        source: Box::new(source),
    })?;
    let waiting = pending(&reader);
    drop(reader);
    if waiting.is_empty() {
        return Ok(Some(Recovery::default()));
    }
    let out = restore_locked(db, &waiting, root);
    if let Some(out) = &out {
        log_recovery(db, &waiting, out);
    }
    Ok(out)
}
