//! The directory a database is in, checked before anything in it is opened or created, as
//! ssh's StrictModes checks the files it trusts: whoever may write that directory may
//! replace the database, or plant a link at a name wattson is about to open (its `-wal`,
//! its lock file), so only root, the user wattson runs as, or the owner of the database
//! itself (the service user, when root runs a command on the service's database) may own
//! it, and neither its group nor everyone may write it, sticky or not. The directory named
//! may be a symbolic link (systemd's `/var/lib/wattson` for a `DynamicUser` service is
//! root's link to `/var/lib/private/wattson`) only when root or the user wattson runs as
//! made it; another user's link is refused. Only the directory holding the database is
//! checked, not the ones above it.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::StoreError;

/// The user a uid names, for a message: `uid 1001 (alice)`.
fn user(uid: u32) -> String {
    match nix::unistd::User::from_uid(uid.into()) {
        Ok(Some(u)) => format!("uid {uid} ({})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// Refuses the directory `named` (as given; `resolved` is where it leads) of the database
/// `db` when another user than root, this process's user or the database's owner could
/// write it ([`StoreError::Directory`]), or when `named` is a link another user made
/// ([`StoreError::DirectoryLink`]). A directory that cannot be examined is left for the
/// open to say why.
pub(super) fn check(named: &Path, resolved: &Path, db: &Path) -> Result<(), StoreError> {
    let me = nix::unistd::geteuid().as_raw();
    if let Ok(link) = std::fs::symlink_metadata(named)
        && link.file_type().is_symlink()
        && link.uid() != 0
        && link.uid() != me
    {
        return Err(StoreError::DirectoryLink {
            dir: named.to_owned(),
            target: std::fs::read_link(named).unwrap_or_default(),
            owner: user(link.uid()),
            me: user(me),
        });
    }
    let Ok(dir) = std::fs::metadata(resolved) else {
        return Ok(());
    };
    let database_owner = std::fs::symlink_metadata(db).ok().map(|m| m.uid());
    let owner = dir.uid();
    let mode = dir.mode() & 0o7777;
    let why = if owner != 0 && owner != me && Some(owner) != database_owner {
        format!(
            "belongs to {}, who is neither root, nor the user wattson runs as ({}), nor the \
             database's owner",
            user(owner),
            user(me)
        )
    } else if mode & 0o002 != 0 {
        format!("may be written by every user (mode {mode:o})")
    } else if mode & 0o020 != 0 {
        format!(
            "may be written by the members of its group, gid {} (mode {mode:o})",
            dir.gid()
        )
    } else {
        return Ok(());
    };
    Err(StoreError::Directory {
        dir: resolved.to_owned(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn refused(dir: &Path) -> Option<String> {
        check(dir, dir, &dir.join("w.db"))
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn a_directory_others_may_write_is_refused_and_a_link_of_this_users_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        for mode in [0o700, 0o750, 0o755, 0o1755] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(refused(&dir), None, "{mode:o}");
        }
        for (mode, says) in [
            (0o775, "members of its group"),
            (0o770, "members of its group"),
            (0o757, "every user (mode 757)"),
            (0o1777, "every user (mode 1777)"),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = refused(&dir).unwrap_or_else(|| panic!("{mode:o} passed"));
            assert!(e.contains(says) && e.contains("chmod go-w"), "{e}");
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // This user's own link to it is followed.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(check(&link, &dir, &dir.join("w.db")).is_ok());
    }
}
