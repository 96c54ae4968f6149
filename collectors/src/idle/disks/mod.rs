//! Each disk's spin state and who woke it, from sysfs and cgroup v2 only: a block device is
//! never opened (asking a sleeping disk anything can wake it).
//!
//! - [`read_disk`]: one disk's reading: its runtime PM status
//!   (`<sysfs>/block/<disk>/device/power/runtime_status`) where the kernel manages its
//!   power (`power/control` is `auto`), else its I/O count (`<sysfs>/block/<disk>/stat`,
//!   reads completed plus writes completed), and its `MAJ:MIN` (`<sysfs>/block/<disk>/dev`);
//! - [`tracker`]: the spin state over time from those readings;
//! - [`group_ios`]: each control group's reads plus writes on that device (`io.stat`'s
//!   `rios` + `wios`), over the groups the cgroup walk finds ([`crate::cgroup::tree::walk`],
//!   bounded as it is), labelled as the wake-ups label them (`service:<unit>`);
//! - [`processes`]: without cgroup v2, each process's block I/O (`<procfs>/<pid>/io`, every
//!   device), as `process:<comm>`;
//! - [`culprit`]: the group whose count rose most between two of those reads.

pub mod processes;
pub mod tracker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::SysRoot;
use crate::cgroup::ContainerNames;
use tracker::Observed;

/// Where a disk's spin state comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpinSource {
    /// The kernel's runtime PM status of the disk's device.
    Sysfs,
    /// I/O counts and the drive's configured standby timer.
    Inferred,
}

impl SpinSource {
    /// Stable name used in storage and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            SpinSource::Sysfs => "sysfs",
            SpinSource::Inferred => "inferred",
        }
    }

    /// Inverse of [`SpinSource::as_str`].
    pub fn parse(s: &str) -> Option<SpinSource> {
        [SpinSource::Sysfs, SpinSource::Inferred]
            .into_iter()
            .find(|k| k.as_str() == s)
    }

    /// In words, for every figure that comes from it.
    pub fn describe(self) -> &'static str {
        match self {
            SpinSource::Sysfs => "sysfs runtime PM status",
            SpinSource::Inferred => "inferred from I/O and standby_after",
        }
    }
}

/// One reading of a disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskReading {
    pub source: SpinSource,
    pub observed: Observed,
    /// `MAJ:MIN`, where `dev` can be read.
    pub dev: Option<String>,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Reads plus writes completed, from a `stat` line (Documentation/block/stat.rst: fields 1
/// and 5).
pub fn ios_of_stat(text: &str) -> Option<u64> {
    let mut f = text.split_whitespace().map(str::parse::<u64>);
    let reads = f.next()?.ok()?;
    let writes = f.nth(3)?.ok()?;
    Some(reads.wrapping_add(writes))
}

/// Why a disk has no reading.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("{}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a block device's stat line", path.display())]
    NotStat { path: PathBuf },
}

/// Disk `name`'s reading under `root`, or why there is none.
pub fn read_disk(root: &SysRoot, name: &str) -> Result<DiskReading, DiskError> {
    let dir = root.sys_path("block").join(name);
    let dev = read(&dir.join("dev"));
    let managed = read(&dir.join("device/power/control")).is_some_and(|c| c == "auto");
    if managed && let Some(status) = read(&dir.join("device/power/runtime_status")) {
        return Ok(DiskReading {
            source: SpinSource::Sysfs,
            observed: Observed::Suspended(status == "suspended"),
            dev,
        });
    }
    let stat = dir.join("stat");
    let text = std::fs::read_to_string(&stat).map_err(|error| DiskError::Read {
        path: stat.clone(),
        error,
    })?;
    let ios = ios_of_stat(&text).ok_or(DiskError::NotStat { path: stat })?;
    Ok(DiskReading {
        source: SpinSource::Inferred,
        observed: Observed::Ios(ios),
        dev,
    })
}

/// `rios` + `wios` of device `dev` (`MAJ:MIN`) in an `io.stat` (cgroup-v2.rst, "IO
/// Interface Files"); 0 where the device has no line (the group did no I/O on it).
pub fn ios_of_io_stat(text: &str, dev: &str) -> u64 {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(dev))
        .map_or(0, |l| {
            l.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .filter(|(k, _)| *k == "rios" || *k == "wios")
                .filter_map(|(_, v)| v.parse::<u64>().ok())
                .fold(0u64, u64::wrapping_add)
        })
}

/// Each group's reads plus writes on `dev` so far, by label (`service:backup.service`);
/// `None` where there is no cgroup v2 hierarchy under `<sysfs>/fs/cgroup`.
pub fn group_ios(
    root: &SysRoot,
    names: &mut ContainerNames,
    dev: &str,
) -> Option<BTreeMap<String, u64>> {
    let cgroup = root.sys_path("fs/cgroup");
    if !cgroup.join("cgroup.controllers").is_file() {
        return None;
    }
    let walk = crate::cgroup::tree::walk(&cgroup, names);
    let mut out = BTreeMap::new();
    for g in walk.groups {
        let Ok(text) = std::fs::read_to_string(cgroup.join(&g.rel).join("io.stat")) else {
            continue;
        };
        let n = ios_of_io_stat(&text, dev);
        if n > 0 {
            *out.entry(format!("{}:{}", g.kind.as_str(), g.name))
                .or_default() += n;
        }
    }
    Some(out)
}

/// Who did the I/O between two reads of [`group_ios`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Culprit {
    /// The one group whose count rose most, and by how much.
    Group(String, u64),
    /// Several rose by the same, most.
    Tie(Vec<String>, u64),
    /// No group's count rose (the kernel's own I/O, or a group that ended).
    None,
}

impl Culprit {
    /// Its label: the group's, `(tie: a, b)`, or `(none seen)`.
    pub fn label(&self) -> String {
        match self {
            Culprit::Group(g, _) => g.clone(),
            Culprit::Tie(gs, _) => format!("(tie: {})", gs.join(", ")),
            Culprit::None => "(none seen)".to_owned(),
        }
    }

    /// The reads and writes counted for it.
    pub fn ios(&self) -> u64 {
        match self {
            Culprit::Group(_, n) | Culprit::Tie(_, n) => *n,
            Culprit::None => 0,
        }
    }
}

/// The group whose count rose most from `before` to `after` (a group new in `after` counts
/// whole; a count that went back counts from zero: a group created again).
pub fn culprit(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> Culprit {
    let mut best: (u64, Vec<String>) = (0, Vec::new());
    for (g, &n) in after {
        let was = before.get(g).copied().unwrap_or(0);
        let d = if n >= was { n - was } else { n };
        if d == 0 {
            continue;
        }
        if d > best.0 {
            best = (d, vec![g.clone()]);
        } else if d == best.0 {
            best.1.push(g.clone());
        }
    }
    match best.1.len() {
        0 => Culprit::None,
        1 => Culprit::Group(best.1.remove(0), best.0),
        _ => Culprit::Tie(best.1, best.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::fixture::FixtureTree;

    #[test]
    fn io_stat_counts_reads_and_writes_of_the_device_only() {
        let text = "8:16 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n\
                    8:0 rbytes=4096 wbytes=8192 rios=10 wios=20 dbytes=0 dios=5\n";
        assert_eq!(ios_of_io_stat(text, "8:0"), 30);
        assert_eq!(ios_of_io_stat(text, "8:16"), 7);
        assert_eq!(ios_of_io_stat(text, "259:0"), 0);
        assert_eq!(
            ios_of_stat("  18234  4021 2208422 31208 90211 70320"),
            Some(108_445)
        );
        assert_eq!(ios_of_stat("12 0 1"), None);
    }

    #[test]
    fn the_largest_rise_is_named_and_ties_and_none_are_said() {
        let m = |v: &[(&str, u64)]| {
            v.iter()
                .map(|(k, n)| ((*k).to_owned(), *n))
                .collect::<BTreeMap<_, _>>()
        };
        let before = m(&[("service:a", 10), ("service:b", 5)]);
        assert_eq!(
            culprit(&before, &m(&[("service:a", 12), ("service:b", 9)])),
            Culprit::Group("service:b".into(), 4)
        );
        let tie = culprit(&before, &m(&[("service:a", 13), ("service:c", 3)]));
        assert_eq!(tie.label(), "(tie: service:a, service:c)");
        assert_eq!(culprit(&before, &before), Culprit::None);
        assert_eq!(Culprit::None.label(), "(none seen)");
        // Created again: its count restarted.
        assert_eq!(
            culprit(&before, &m(&[("service:a", 2)])),
            Culprit::Group("service:a".into(), 2)
        );
    }

    #[test]
    fn groups_are_read_from_the_walk_and_labelled_as_services() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path(), dir.path().join("proc"));
        let mut names = ContainerNames::new(None);
        assert_eq!(group_ios(&root, &mut names, "8:0"), None);
        let tree = FixtureTree::v2(dir.path()).unwrap();
        tree.add("system.slice/backup.service").unwrap();
        tree.add("system.slice/sshd.service").unwrap();
        tree.set_io_stat("system.slice/backup.service", &[("8:0", 5, 7)])
            .unwrap();
        tree.set_io_stat("system.slice/sshd.service", &[("8:16", 1, 1)])
            .unwrap();
        let got = group_ios(&root, &mut names, "8:0").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got["service:backup.service"], 12);
    }

    #[test]
    fn a_disk_is_read_from_runtime_pm_where_the_kernel_manages_it_else_from_its_stat() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path(), dir.path().join("proc"));
        let disk = dir.path().join("block/sda");
        std::fs::create_dir_all(disk.join("device/power")).unwrap();
        std::fs::write(disk.join("stat"), "5 0 0 0 6 0 0 0 0 0 0\n").unwrap();
        std::fs::write(disk.join("dev"), "8:0\n").unwrap();
        std::fs::write(disk.join("device/power/control"), "on\n").unwrap();
        std::fs::write(disk.join("device/power/runtime_status"), "active\n").unwrap();
        let r = read_disk(&root, "sda").unwrap();
        assert_eq!(r.source, SpinSource::Inferred);
        assert_eq!(r.observed, Observed::Ios(11));
        assert_eq!(r.dev.as_deref(), Some("8:0"));
        std::fs::write(disk.join("device/power/control"), "auto\n").unwrap();
        std::fs::write(disk.join("device/power/runtime_status"), "suspended\n").unwrap();
        let r = read_disk(&root, "sda").unwrap();
        assert_eq!(
            (r.source, r.observed),
            (SpinSource::Sysfs, Observed::Suspended(true))
        );
        assert!(
            read_disk(&root, "sdz")
                .unwrap_err()
                .to_string()
                .contains("block/sdz/stat")
        );
    }
}
