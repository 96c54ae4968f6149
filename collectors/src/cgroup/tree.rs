//! Walking a cgroup v2 hierarchy (Documentation/admin-guide/cgroup-v2.rst) the way systemd
//! lays it out (systemd.special(7), "Units managed by the system service manager"), and
//! putting each control group in the group a home-server owner thinks of:
//!
//! - `*.service` anywhere under a slice: a systemd service (`system.slice/jellyfin.service`,
//!   also in nested slices such as `system.slice/media.slice/jellyfin.service`);
//! - `user.slice/user-<uid>.slice`: one user's sessions and user services together;
//! - `docker-<id>.scope`, `libpod-<id>.scope` anywhere, and `docker/<id>` (Docker's
//!   cgroupfs driver): a container;
//! - anything else under `machine.slice`: a virtual machine or nspawn container;
//! - everything else (`init.scope`, the kernel's own threads in the root, groups that ended
//!   between two polls) is "the rest": the root's time less the listed groups'.
//!
//! A group's `cpu.stat` `usage_usec` counts its descendants, so the walk stops at a group
//! and never reads below it. It descends only into slices (and `docker/`), at most
//! [`MAX_DEPTH`] levels and [`MAX_GROUPS`] groups, so a hostile or runaway tree costs a
//! bounded walk.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirEntryExt;
use std::path::{Component, Path, PathBuf};

use super::names::{ContainerNames, Runtime, printable, unescape_unit};

/// Slices nest; deeper than this is not walked.
pub const MAX_DEPTH: usize = 8;
/// Groups read in one walk at most; the time of the rest is in "the rest".
pub const MAX_GROUPS: usize = 20_000;

/// The kind of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Service,
    Session,
    Container,
    Machine,
}

impl Kind {
    /// Stable name used in channels, storage and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Service => "service",
            Kind::Session => "session",
            Kind::Container => "container",
            Kind::Machine => "machine",
        }
    }

    /// Inverse of [`Kind::as_str`].
    pub fn parse(s: &str) -> Option<Kind> {
        [Kind::Service, Kind::Session, Kind::Container, Kind::Machine]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// One group found by a walk: where it is (relative to the cgroup root) and who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub rel: OsString,
    pub kind: Kind,
    pub name: String,
    /// The group directory's inode number, from the directory listing (no `stat`): a group
    /// removed and created again under the same name has another.
    pub ino: u64,
}

/// What one walk found.
#[derive(Debug, Default)]
pub struct Walk {
    pub groups: Vec<Found>,
    /// Directories that could not be listed (permission, vanished mid-walk).
    pub unlistable: usize,
    /// Whether [`MAX_GROUPS`] or [`MAX_DEPTH`] cut the walk short.
    pub truncated: bool,
}

/// Walk the hierarchy under `root` (`<sysfs>/fs/cgroup`).
pub fn walk(root: &Path, names: &mut ContainerNames) -> Walk {
    let mut out = Walk::default();
    descend(root, &PathBuf::new(), 0, Parent::Root, names, &mut out);
    out
}

/// Who the control group at `rel` belongs to (a path below the cgroup root, as the `0::`
/// line of `/proc/<pid>/cgroup` names it, with or without its leading `/`), by the walk's
/// own rules: the first listed group on the way down (a service's sub-groups are the
/// service's). `None` for "the rest" (`/`, `init.scope`, deeper than [`MAX_DEPTH`]).
pub fn classify_path(rel: &Path, names: &mut ContainerNames) -> Option<(Kind, String)> {
    let mut parent = Parent::Root;
    for (depth, component) in rel.components().enumerate() {
        let Component::Normal(name) = component else {
            continue;
        };
        if depth > MAX_DEPTH {
            return None;
        }
        match classify(name, parent, names) {
            Step::Group(kind, shown) => return Some((kind, shown)),
            Step::Descend(p) => parent = p,
            Step::Rest => return None,
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Parent {
    Root,
    UserSlice,
    MachineSlice,
    DockerCgroupfs,
    Slice,
}

fn descend(
    root: &Path,
    rel: &Path,
    depth: usize,
    parent: Parent,
    names: &mut ContainerNames,
    out: &mut Walk,
) {
    if depth >= MAX_DEPTH {
        out.truncated = true;
        return;
    }
    let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
        out.unlistable += 1;
        return;
    };
    for entry in entries.flatten() {
        if out.groups.len() >= MAX_GROUPS {
            out.truncated = true;
            return;
        }
        // Interface files are regular files; control groups are directories.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name();
        let child = rel.join(&name);
        match classify(&name, parent, names) {
            Step::Group(kind, shown) => out.groups.push(Found {
                rel: child.into_os_string(),
                kind,
                name: shown,
                ino: entry.ino(),
            }),
            Step::Descend(p) => descend(root, &child, depth + 1, p, names, out),
            Step::Rest => {}
        }
    }
}

enum Step {
    Group(Kind, String),
    Descend(Parent),
    Rest,
}

fn classify(raw: &OsStr, parent: Parent, names: &mut ContainerNames) -> Step {
    let bytes = raw.as_bytes();
    if parent == Parent::DockerCgroupfs {
        return container(Runtime::Docker, bytes, names);
    }
    for (prefix, runtime) in [
        (&b"docker-"[..], Runtime::Docker),
        (b"libpod-", Runtime::Podman),
    ] {
        if let Some(id) = bytes
            .strip_prefix(prefix)
            .and_then(|b| b.strip_suffix(b".scope"))
        {
            if id.starts_with(b"conmon-") {
                return Step::Rest;
            }
            return container(runtime, id, names);
        }
    }
    let shown = printable(raw);
    if parent == Parent::UserSlice && bytes.starts_with(b"user-") && bytes.ends_with(b".slice") {
        let user = shown.trim_end_matches(".slice").to_owned();
        return Step::Group(Kind::Session, user);
    }
    if parent == Parent::MachineSlice && !bytes.ends_with(b".slice") {
        let base = shown
            .trim_end_matches(".scope")
            .trim_end_matches(".service");
        let base = base.strip_prefix("machine-").unwrap_or(base);
        return Step::Group(Kind::Machine, unescape_unit(base));
    }
    if bytes.ends_with(b".slice") {
        return Step::Descend(match (parent, bytes) {
            (Parent::Root, b"user.slice") => Parent::UserSlice,
            (Parent::Root, b"machine.slice") | (Parent::MachineSlice, _) => Parent::MachineSlice,
            _ => Parent::Slice,
        });
    }
    if parent == Parent::Root && bytes == b"docker" {
        return Step::Descend(Parent::DockerCgroupfs);
    }
    if parent != Parent::Root && bytes.ends_with(b".service") {
        return Step::Group(Kind::Service, unescape_unit(&shown));
    }
    Step::Rest
}

fn container(runtime: Runtime, id: &[u8], names: &mut ContainerNames) -> Step {
    let id = printable(OsStr::from_bytes(id));
    Step::Group(Kind::Container, names.name(runtime, &id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cgroup_path_is_classified_as_the_walk_classifies_its_group() {
        let mut names = ContainerNames::new(None);
        let mut at = |p: &str| {
            classify_path(Path::new(p), &mut names).map(|(k, n)| format!("{}:{n}", k.as_str()))
        };
        assert_eq!(
            at("/system.slice/jellyfin.service").as_deref(),
            Some("service:jellyfin.service")
        );
        // A service's own sub-groups (systemd's Delegate=) are the service's.
        assert_eq!(
            at("/system.slice/media.slice/jellyfin.service/transcode").as_deref(),
            Some("service:jellyfin.service")
        );
        assert_eq!(
            at("/user.slice/user-1000.slice/session-3.scope").as_deref(),
            Some("session:user-1000")
        );
        assert_eq!(
            at("/system.slice/docker-0123456789ab.scope").as_deref(),
            Some("container:docker 0123456789ab")
        );
        assert_eq!(
            at(r"/machine.slice/machine-qemu\x2d1\x2dhomeassistant.scope").as_deref(),
            Some("machine:qemu-1-homeassistant")
        );
        assert_eq!(at("/"), None);
        assert_eq!(at("/init.scope"), None);
    }
}
