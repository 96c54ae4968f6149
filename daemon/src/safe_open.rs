//! Opening the files wattson writes when it may run as root, so that nothing another user
//! can place in a directory (a symlink, a hard link, a FIFO) redirects the write.
//!
//! - Lock files beside a database (`<db>.lock`, `<db>.idle-lock`): an existing one is opened
//!   with `O_NOFOLLOW`; a missing one is created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode
//!   0640 whatever the umask says, so a link planted at the name is never followed and a file
//!   is never created through one. What is opened must be a regular file with one link.
//! - Kernel settings (`wattson idle --measure`, `--apply` and their restores): resolved
//!   beneath the configured sysfs or procfs root and opened from it one component at a time
//!   with `O_NOFOLLOW` (`openat(2)`), never created, and written only when the file is a
//!   regular one and, under the real `/sys` and `/proc`, on sysfs or procfs.
//!
//! SECURITY.md has the threat model these follow.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use wattson_collectors::SysRoot;

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
/// regular file with one link. `Err` says why not, in words.
fn regular(file: &File) -> io::Result<Result<(), &'static str>> {
    let meta = file.metadata()?;
    Ok(if !meta.file_type().is_file() {
        Err("it is not a regular file")
    } else if meta.nlink() != 1 {
        Err("it has another hard link (it may be someone else's file)")
    } else {
        Ok(())
    })
}

fn check_regular(path: &Path, file: &File) -> io::Result<()> {
    regular(file)?.map_err(|why| refused(path, why))
}

/// A kernel setting refused, in words that follow its path (callers name the file).
fn setting_refused(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{why}; refusing to write it"),
    )
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
enum KernelFs {
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

/// The configured root `path` is under (sysfs or procfs) and the filesystem its files must
/// be on: sysfs or procfs under the real roots, any under a fixture tree.
fn root_of<'r>(path: &Path, root: &'r SysRoot) -> io::Result<(&'r Path, KernelFs)> {
    let real = |r: &Path, real: &str| r == Path::new(real);
    if path.starts_with(&root.sys) {
        let fs = if real(&root.sys, "/sys") {
            KernelFs::Sysfs
        } else {
            KernelFs::Any
        };
        Ok((&root.sys, fs))
    } else if path.starts_with(&root.proc) {
        let fs = if real(&root.proc, "/proc") {
            KernelFs::Procfs
        } else {
            KernelFs::Any
        };
        Ok((&root.proc, fs))
    } else {
        Err(setting_refused(&format!(
            "it is under neither the sysfs root {} nor the procfs root {}",
            root.sys.display(),
            root.proc.display()
        )))
    }
}

/// An error of resolving or opening `p`, saying which.
fn with<'a>(what: &'a str, p: &'a Path) -> impl Fn(io::Error) -> io::Error + 'a {
    move |e| io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
}

/// Opens the existing kernel setting at `path` for writing, resolved beneath the configured
/// root it is under without following a symbolic link at any component.
///
/// sysfs has links of its own (`class/scsi_host/host0`, `bus/pci/devices/*` and a CPU's
/// `cpufreq` point into `devices/`), so the directories above the file are first resolved;
/// the file they lead to must lie beneath the root (a directory replaced by a link out of a
/// fixture tree is refused here), and the file itself must not be a link. It is then opened
/// from the root one directory at a time, each with `O_NOFOLLOW`: a link swapped in after
/// the path was resolved is refused, not followed.
/// Never created; only a regular file of one link, and under the real roots only on sysfs
/// or procfs. A refusal's words follow the file's path, which the caller names.
pub fn open_setting(path: &Path, root: &SysRoot) -> io::Result<File> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    use std::path::Component;
    let (base, fs) = root_of(path, root)?;
    let base = std::fs::canonicalize(base).map_err(with("resolving the root", base))?;
    // The file itself is never a link (sysfs has none among its attributes): only the
    // directories above it are resolved.
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(setting_refused("it names no file"));
    };
    let target = std::fs::canonicalize(parent)
        .map_err(with("resolving", parent))?
        .join(name);
    let Ok(rel) = target.strip_prefix(&base) else {
        return Err(setting_refused(&format!(
            "it resolves to {}, outside the configured root {}: a directory on its way is a \
             symbolic link out of the root (replace the link by the directory, or point \
             [host] sysfs and procfs at a tree without links out of it)",
            target.display(),
            base.display()
        )));
    };
    let names: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(setting_refused(
                "it does not resolve to a file beneath its root",
            )),
        })
        .collect::<io::Result<_>>()?;
    let Some((file_name, dirs)) = names.split_last() else {
        return Err(setting_refused("it resolves to the root itself"));
    };
    let link = |e: nix::Error| {
        if matches!(e, nix::Error::ELOOP | nix::Error::ENOTDIR) {
            setting_refused(
                "a directory on its way is a symbolic link (it changed while it was opened)",
            )
        } else {
            io::Error::from(e)
        }
    };
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir = nix::fcntl::open(&base, dir_flags, Mode::empty())
        .map_err(|e| with("opening the root", &base)(io::Error::from(e)))?;
    for name in dirs {
        dir = openat(&dir, *name, dir_flags, Mode::empty()).map_err(link)?;
    }
    let file = openat(
        &dir,
        *file_name,
        OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        if e == nix::Error::ELOOP {
            setting_refused("it is a symbolic link")
        } else {
            io::Error::from(e)
        }
    })?;
    let file = File::from(file);
    regular(&file)?.map_err(setting_refused)?;
    if !fs.holds(&file)? {
        return Err(setting_refused(match fs {
            KernelFs::Sysfs => "it is not on sysfs",
            _ => "it is not on procfs",
        }));
    }
    Ok(file)
}

/// Writes `value` into the existing kernel setting at `path` in one `write(2)`, opened as
/// [`open_setting`] opens it.
pub fn write_setting(path: &Path, value: &[u8], root: &SysRoot) -> io::Result<()> {
    use std::io::Write as _;
    let mut f = open_setting(path, root)?;
    // sysfs and procfs take a setting in one write and ignore the length; a fixture's plain
    // file must lose its old, longer text.
    if root_of(path, root)?.1 == KernelFs::Any {
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
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        std::fs::create_dir_all(&root.sys).unwrap();
        let file = root.sys.join("policy");
        std::fs::write(&file, "performance\n").unwrap();
        write_setting(&file, b"powersave", &root).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "powersave");

        assert!(write_setting(&root.sys.join("gone"), b"1", &root).is_err());
        assert!(!root.sys.join("gone").exists());

        let link = root.sys.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = write_setting(&link, b"x", &root).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(write_setting(&root.sys, b"x", &root).is_err());
        // A file under neither root.
        let err = write_setting(&file, b"x", &SysRoot::new("/sys", "/proc")).unwrap_err();
        assert!(err.to_string().contains("under neither"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "powersave");
    }

    /// sysfs's own layout: `class/scsi_host/host0` a link into `devices/`, both in the root.
    #[test]
    fn a_directory_link_within_the_root_is_resolved_and_one_out_of_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let device = root.sys.join("devices/pci0000:00/host0/scsi_host/host0");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(
            device.join("link_power_management_policy"),
            "max_performance",
        )
        .unwrap();
        std::fs::create_dir_all(root.sys.join("class/scsi_host")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/host0/scsi_host/host0",
            root.sys.join("class/scsi_host/host0"),
        )
        .unwrap();
        let policy = root
            .sys
            .join("class/scsi_host/host0/link_power_management_policy");
        write_setting(&policy, b"med_power_with_dipm", &root).unwrap();
        assert_eq!(
            std::fs::read_to_string(device.join("link_power_management_policy")).unwrap(),
            "med_power_with_dipm"
        );

        let outside = dir.path().join("elsewhere");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("policy"), "keep").unwrap();
        let params = root.sys.join("module/pcie_aspm");
        std::fs::create_dir_all(&params).unwrap();
        std::os::unix::fs::symlink(&outside, params.join("parameters")).unwrap();
        let err =
            write_setting(&params.join("parameters/policy"), b"powersave", &root).unwrap_err();
        assert!(
            err.to_string().contains("outside the configured root"),
            "{err}"
        );
        assert!(open_setting(&params.join("parameters/policy"), &root).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.join("policy")).unwrap(),
            "keep"
        );
    }
}
