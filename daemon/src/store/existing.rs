//! Opening a database that already exists, for a command or an endpoint that reads it
//! (`wattson status`, `report`, `services`, the HTTP report): whether it is there, with the
//! OS reason when it cannot be read, migrating one an older wattson wrote, and whether it
//! holds the host asked for.

use super::{Store, StoreError, StoreOptions};

/// Open an existing database for reading. One written by an older wattson is migrated first
/// (atomically, as the daemon would on start) when the file is writable.
pub fn open_database(path: &std::path::Path) -> anyhow::Result<Store> {
    use anyhow::Context as _;
    match Store::open_read_only(path) {
        Err(StoreError::SchemaTooOld { .. }) => {
            drop(
                Store::open(path, &StoreOptions::default())
                    .with_context(|| format!("migrating {}", path.display()))?,
            );
            Ok(Store::open_read_only(path)?)
        }
        // The store's errors name the database already.
        other => Ok(other?),
    }
}

/// Whether the database at `path` is there to be read: `Ok(false)` when it does not exist,
/// `Ok(true)` when it can be opened, and an error naming the path and the OS reason (a
/// permission problem is not "no database") otherwise.
pub fn database_exists(path: &std::path::Path) -> anyhow::Result<bool> {
    match std::fs::File::open(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(anyhow::Error::new(e)
            .context(format!(
                "cannot read the database {}: run this as a user who may read it (the \
                 service's database belongs to its dynamic user: sudo, or a member of its group), \
                 or pass --db PATH",
                path.display()
            ))),
        Err(e) => {
            Err(anyhow::Error::new(e)
                .context(format!("cannot read the database {}", path.display())))
        }
    }
}

/// A host the database has nothing of (`--host`, or `host=` in an HTTP report query).
#[derive(Debug, thiserror::Error)]
#[error("--host {host:?}: {database} has nothing of that host; it has {known}")]
pub struct UnknownHost {
    pub host: String,
    pub database: String,
    /// The hosts it has, quoted, or "no host yet".
    pub known: String,
}

/// Refuses a `--host` the database has nothing of, naming those it has: a misspelt
/// name would otherwise look like a host with no readings yet. The configured host
/// passes (its database may be new).
pub fn check_host(store: &Store, host: &str, configured: &str) -> anyhow::Result<()> {
    if host == configured {
        return Ok(());
    }
    let hosts = store.hosts()?;
    if hosts.iter().any(|h| h == host) {
        return Ok(());
    }
    Err(UnknownHost {
        host: host.to_owned(),
        database: store.path().display().to_string(),
        known: if hosts.is_empty() {
            "no host yet".to_owned()
        } else {
            hosts
                .iter()
                .map(|h| format!("{h:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
    }
    .into())
}
