//! Fixture cgroup v2 (and v1) trees in a directory, for tests and benchmarks: the layout of
//! `<sysfs>/fs/cgroup` with `cpu.stat` files whose `usage_usec` the caller sets.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A fixture hierarchy under `<sys>/fs/cgroup`.
#[derive(Debug, Clone)]
pub struct FixtureTree {
    root: PathBuf,
}

impl FixtureTree {
    /// An empty cgroup v2 hierarchy (`cgroup.controllers`, a root `cpu.stat`).
    pub fn v2(sys: &Path) -> std::io::Result<FixtureTree> {
        let root = sys.join("fs/cgroup");
        std::fs::create_dir_all(&root)?;
        std::fs::write(
            root.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )?;
        let tree = FixtureTree { root };
        tree.set_root_usage(0)?;
        Ok(tree)
    }

    /// A cgroup v1 hierarchy as CentOS 7 mounts it (`cpu,cpuacct`, `systemd`, no
    /// `cgroup.controllers`).
    pub fn v1(sys: &Path) -> std::io::Result<FixtureTree> {
        let root = sys.join("fs/cgroup");
        for c in ["cpu,cpuacct/system.slice", "memory", "systemd/system.slice"] {
            std::fs::create_dir_all(root.join(c))?;
        }
        std::fs::write(root.join("cpu,cpuacct/cpuacct.usage"), "0\n")?;
        Ok(FixtureTree { root })
    }

    /// `<sys>/fs/cgroup`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A group at `rel` (slices on the way created too) with `usage_usec` 0.
    pub fn add(&self, rel: impl AsRef<OsStr>) -> std::io::Result<()> {
        self.add_with_usage(rel, 0)
    }

    /// A group at `rel` that has used `usec` µs of CPU time already.
    pub fn add_with_usage(&self, rel: impl AsRef<OsStr>, usec: u64) -> std::io::Result<()> {
        std::fs::create_dir_all(self.root.join(rel.as_ref()))?;
        self.set_usage(rel, usec)
    }

    /// Sets the group's `usage_usec` (µs of CPU time since it was created).
    pub fn set_usage(&self, rel: impl AsRef<OsStr>, usec: u64) -> std::io::Result<()> {
        write_stat(&self.root.join(rel.as_ref()), usec)
    }

    /// Sets the host's `usage_usec` (the root's `cpu.stat`).
    pub fn set_root_usage(&self, usec: u64) -> std::io::Result<()> {
        write_stat(&self.root, usec)
    }

    /// Writes `bytes` as the group's `cpu.stat` (a corrupt or hostile file).
    pub fn set_stat_bytes(&self, rel: impl AsRef<OsStr>, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::write(self.root.join(rel.as_ref()).join("cpu.stat"), bytes)
    }

    /// Sets the group's `io.stat`: one line per device (`MAJ:MIN`) with its reads and writes
    /// completed (`rios`, `wios`; bytes at 4 KiB each).
    pub fn set_io_stat(
        &self,
        rel: impl AsRef<OsStr>,
        devices: &[(&str, u64, u64)],
    ) -> std::io::Result<()> {
        let dir = self.root.join(rel.as_ref());
        let mut text = String::new();
        for (dev, r, w) in devices {
            let _ = writeln!(
                text,
                "{dev} rbytes={} wbytes={} rios={r} wios={w} dbytes=0 dios=0",
                r * 4096,
                w * 4096
            );
        }
        // Written whole and renamed, as the kernel shows it.
        let tmp = dir.join(".io.stat.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(tmp, dir.join("io.stat"))
    }

    /// Removes the group (it ended).
    pub fn remove(&self, rel: impl AsRef<OsStr>) -> std::io::Result<()> {
        std::fs::remove_dir_all(self.root.join(rel.as_ref()))
    }

    /// A systemd host with Docker, as Debian 12 lays it out: services, a Docker container
    /// scope, a user's sessions, a VM, and `init.scope`. Returns the groups' paths.
    pub fn debian_docker_host(&self, container_id: &str) -> std::io::Result<Vec<String>> {
        let groups = vec![
            "system.slice/jellyfin.service".to_owned(),
            "system.slice/sshd.service".to_owned(),
            "system.slice/docker.service".to_owned(),
            format!("system.slice/docker-{container_id}.scope"),
            "user.slice/user-1000.slice".to_owned(),
            r"machine.slice/machine-qemu\x2d1\x2dhomeassistant.scope".to_owned(),
        ];
        for g in &groups {
            self.add(g)?;
        }
        std::fs::create_dir_all(self.root.join("user.slice/user-1000.slice/session-3.scope"))?;
        self.add("init.scope")?;
        Ok(groups)
    }

    /// `n` services spread over nested slices (`system.slice/group-K.slice/svc-N.service`),
    /// as a host with many units; returns their paths.
    pub fn many_services(&self, n: usize) -> std::io::Result<Vec<String>> {
        (0..n)
            .map(|i| {
                let rel = format!("system.slice/group-{}.slice/svc-{i}.service", i % 10);
                self.add(&rel).map(|()| rel)
            })
            .collect()
    }
}

fn write_stat(dir: &Path, usec: u64) -> std::io::Result<()> {
    // Written whole and renamed, as the kernel shows it: a reader never sees half a file.
    let tmp = dir.join(".cpu.stat.tmp");
    std::fs::write(
        &tmp,
        format!(
            "usage_usec {usec}\nuser_usec {}\nsystem_usec {}\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
            usec / 2,
            usec - usec / 2
        ),
    )?;
    std::fs::rename(tmp, dir.join("cpu.stat"))
}

/// A directory name of raw bytes (non-UTF-8 names in tests).
pub fn raw_name(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}
