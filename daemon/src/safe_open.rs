//! Opening the files wattson writes when it may run as root, so that nothing another user
//! can place in a directory (a symlink, a hard link, a FIFO) redirects the write.
//!
//! - Lock files beside a database (`<db>.lock`, `<db>.idle-lock`): an existing one is opened
//!   with `O_NOFOLLOW`; a missing one is created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode
//!   0640 whatever the umask says, so a link planted at the name is never followed and a file
//!   is never created through one. What is opened must be a regular file with one link.
//! - Kernel settings (`wattson idle --measure` and its restore): opened for writing with
//!   `O_NOFOLLOW`, never created, and written only when the file is a regular one and, under
//!   the real `/sys` and `/proc`, on sysfs or procfs.
//!
//! SECURITY.md has the threat model these follow.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// The mode a lock file is created with: the owner writes it, its group (the service's)
/// reads who holds it; nobody else.
const LOCK_MODE: u32 = 0o640;

fn refused(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {why}; refusing to use it", path.display()),
    )
}

/// Why the error of an `O_NOFOLLOW` open says what it does: `ELOOP` is a link at the name.
fn explain(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        refused(path, "it is a symbolic link")
    } else {
        e
    }
}

/// The file opened must be one the caller may write into without writing anywhere else: a
/// regular file with one link.
fn check_regular(path: &Path, file: &File) -> io::Result<()> {
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(refused(path, "it is not a regular file"));
    }
    if meta.nlink() != 1 {
        return Err(refused(
            path,
            "it has another hard link (it may be someone else's file)",
        ));
    }
    Ok(())
}

/// Opens the lock file at `path` for reading and writing, creating it when it is missing,
/// never through a symbolic link and never as anything but a regular file of one link.
#[allow(
    clippy::disallowed_methods,
    reason = "the writer's lock file, a file of its own beside the database: closing it releases only its own locks"
)]
pub fn lock_file(path: &Path) -> io::Result<File> {
    let open_existing = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
    };
    let file = match open_existing() {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(LOCK_MODE)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(path)
            {
                Ok(f) => {
                    // The umask may have taken bits away, never added: set exactly.
                    use std::os::unix::fs::PermissionsExt as _;
                    f.set_permissions(std::fs::Permissions::from_mode(LOCK_MODE))?;
                    f
                }
                // Another process created it between the two opens: use that one.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    open_existing().map_err(|e| explain(path, e))?
                }
                Err(e) => return Err(explain(path, e)),
            }
        }
        Err(e) => return Err(explain(path, e)),
    };
    check_regular(path, &file)?;
    Ok(file)
}

/// Opens an existing lock file at `path` read-only, never through a symbolic link; `Ok(None)`
/// when there is none.
#[allow(
    clippy::disallowed_methods,
    reason = "the writer's lock file, a file of its own beside the database: closing it releases only its own locks"
)]
pub fn existing_lock_file(path: &Path) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => {
            check_regular(path, &f)?;
            Ok(Some(f))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(explain(path, e)),
    }
}

/// Where a kernel setting may live: the filesystem it must be on, when its root is the real
/// one (a fixture tree named in the configuration is an ordinary directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFs {
    Sysfs,
    Procfs,
    /// A fixture root: any filesystem.
    Any,
}

impl KernelFs {
    fn holds(self, file: &File) -> io::Result<bool> {
        let wanted = match self {
            KernelFs::Sysfs => nix::sys::statfs::SYSFS_MAGIC,
            KernelFs::Procfs => nix::sys::statfs::PROC_SUPER_MAGIC,
            KernelFs::Any => return Ok(true),
        };
        let fs = nix::sys::statfs::fstatfs(file).map_err(io::Error::from)?;
        Ok(fs.filesystem_type() == wanted)
    }
}

/// Writes `value` into the existing kernel setting at `path` in one `write(2)`: opened with
/// `O_NOFOLLOW`, never created, and only when it is a regular file on `fs`.
#[allow(
    clippy::disallowed_methods,
    reason = "what root writes, opened beneath its root without following links: never a database"
)]
pub fn write_setting(path: &Path, value: &[u8], fs: KernelFs) -> io::Result<()> {
    use std::io::Write as _;
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| explain(path, e))?;
    check_regular(path, &f)?;
    if !fs.holds(&f)? {
        return Err(refused(
            path,
            match fs {
                KernelFs::Sysfs => "it is not on sysfs",
                _ => "it is not on procfs",
            },
        ));
    }
    // sysfs and procfs take a setting in one write and ignore the length; a fixture's plain
    // file must lose its old, longer text.
    if fs == KernelFs::Any {
        f.set_len(0)?;
    }
    f.write_all(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_file_is_created_once_and_reopened() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db.lock");
        drop(lock_file(&path).unwrap());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, LOCK_MODE);
        lock_file(&path).unwrap();
        assert!(existing_lock_file(&path).unwrap().is_some());
        assert!(
            existing_lock_file(&dir.path().join("none"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_link_at_a_lock_files_name_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("w.db.lock");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let err = lock_file(&link).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(existing_lock_file(&link).is_err());
        let dangling = dir.path().join("x.db.lock");
        std::os::unix::fs::symlink(dir.path().join("not-yet"), &dangling).unwrap();
        assert!(lock_file(&dangling).is_err());
        assert!(!dir.path().join("not-yet").exists());

        let hard = dir.path().join("h.db.lock");
        std::fs::hard_link(&victim, &hard).unwrap();
        let err = lock_file(&hard).unwrap_err();
        assert!(err.to_string().contains("hard link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn a_setting_is_written_only_into_an_existing_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy");
        std::fs::write(&file, "performance\n").unwrap();
        write_setting(&file, b"powersave", KernelFs::Any).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "powersave");

        assert!(write_setting(&dir.path().join("gone"), b"1", KernelFs::Any).is_err());
        assert!(!dir.path().join("gone").exists());

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(write_setting(&link, b"x", KernelFs::Any).is_err());
        assert!(write_setting(dir.path(), b"x", KernelFs::Any).is_err());
        // Under the real /sys a file elsewhere is refused.
        let err = write_setting(&file, b"x", KernelFs::Sysfs).unwrap_err();
        assert!(err.to_string().contains("not on sysfs"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "powersave");
    }
}
