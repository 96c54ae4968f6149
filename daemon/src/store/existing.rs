//! Opening a database that already exists, for a command or an endpoint that reads it
//! (`wattson status`, `report`, `services`, the HTTP report): whether it is there, with the
//! OS reason when it cannot be read, migrating one an older wattson wrote, and whether it
//! holds the host asked for.

use std::path::{Path, PathBuf};

use super::{EXIT_STORE, Store, StoreError, StoreOptions};

/// Why an existing database could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ExistingError {
    /// Migrating a database an older wattson wrote failed.
    #[error("migrating {}", path.display())]
    Migrate {
        path: PathBuf,
        #[source]
        source: Box<StoreError>,
    },
    /// This user may not read the database.
    #[error(
        "cannot read the database {}: run this as a user who may read it (the service's \
         database belongs to its dynamic user: sudo, or a member of its group), or pass --db PATH",
        path.display()
    )]
    Denied {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The database cannot be opened for another reason of the OS.
    #[error("cannot read the database {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Boxed, as a store error is large.
    #[error(transparent)]
    Store(Box<StoreError>),
    #[error(transparent)]
    UnknownHost(#[from] UnknownHost),
}

impl From<StoreError> for ExistingError {
    fn from(e: StoreError) -> Self {
        ExistingError::Store(Box::new(e))
    }
}

impl ExistingError {
    /// The exit status it stands for: the store's (74) for a database that cannot be opened
    /// or migrated; none of its own for a file the OS refuses or a host it lacks (1).
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            ExistingError::Migrate { .. } | ExistingError::Store(_) => Some(EXIT_STORE),
            ExistingError::Denied { .. }
            | ExistingError::Unreadable { .. }
            | ExistingError::UnknownHost(_) => None,
        }
    }
}

/// Open an existing database for reading. One written by an older wattson is migrated first
/// (atomically, as the daemon would on start) when the file is writable.
pub fn open_database(path: &Path) -> Result<Store, ExistingError> {
    match Store::open_read_only(path) {
        Err(StoreError::SchemaTooOld { .. }) => {
            drop(
                Store::open(path, &StoreOptions::default()).map_err(|source| {
                    ExistingError::Migrate {
                        path: path.to_path_buf(),
                        source: Box::new(source),
                    }
                })?,
            );
            Ok(Store::open_read_only(path)?)
        }
        // The store's errors name the database already.
        other => Ok(other?),
    }
}

/// Whether the database at `path` is there to be read: `Ok(false)` when it does not exist,
/// `Ok(true)` when this user may read it, and an error naming the path and the OS reason (a
/// permission problem is not "no database") or the link it is ([`StoreError::Link`])
/// otherwise.
///
/// It never opens the file: closing any descriptor of a database releases every POSIX lock
/// this process holds on it, so a connection of the same process (the daemon's writer
/// beside its HTTP report) would next believe it is the last one and delete the WAL from
/// under the others. `stat` and `access` take no descriptor.
pub fn database_exists(path: &Path) -> Result<bool, ExistingError> {
    let unreadable = |source: std::io::Error| {
        if source.kind() == std::io::ErrorKind::PermissionDenied {
            ExistingError::Denied {
                path: path.to_path_buf(),
                source,
            }
        } else {
            ExistingError::Unreadable {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    // A link there, dangling or not, is refused as opening it would be: it is no database.
    super::open::unlinked(path)?;
    match std::fs::metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(unreadable(e)),
    }
    nix::unistd::access(path, nix::unistd::AccessFlags::R_OK)
        .map_err(|errno| unreadable(std::io::Error::from(errno)))?;
    Ok(true)
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
pub fn check_host(store: &Store, host: &str, configured: &str) -> Result<(), ExistingError> {
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
