//! CPU time per service, container, session and machine, from the cgroup v2 hierarchy
//! (Documentation/admin-guide/cgroup-v2.rst, "cpu.stat": `usage_usec`, cumulative µs of CPU
//! time of a group and its descendants) under `<sysfs>/fs/cgroup`.
//!
//! Each poll walks the groups ([`tree`]), reads each group's `usage_usec`, and reports the
//! CPU time each used since the previous poll, in seconds ([`Metric::CgroupCpu`], source
//! [`SOURCE`]), on these channels:
//!
//! - `<kind>:<name>` for the [`CgroupOptions::top`] groups that used most (`service:jellyfin.service`,
//!   `container:jellyfin`, `session:user-1000`, `machine:vm1`);
//! - `other`: the listed kinds' groups beyond the top;
//! - `rest`: the root's time less every group's (the kernel, `init.scope`, groups that
//!   ended between polls);
//! - `total`: the host's busy CPU time (the root's `usage_usec`), the sum of all the above;
//! - `elapsed`: the wall time the poll covers (monotonic clock), s;
//! - `groups`: how many groups the walk found (a count, not seconds).
//!
//! Counters are judged per group: a group seen for the first time since the previous poll
//! started within the interval, so all its time counts; a counter that went backwards
//! belongs to a group created again under the same name (a restarted unit) and counts from
//! zero; no group counts more than the root did. cgroup v1 hosts are refused at
//! [`CgroupCollector::new`] with the reason.

pub mod fixture;
pub mod names;
pub mod tree;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::sysroot::SysFile;
use crate::{CollectError, Collector, Metric, MonotonicClock, Sample, SourceId, SysRoot};

pub use names::ContainerNames;
pub use tree::Kind;

/// The collector's source.
pub const SOURCE: SourceId = SourceId::Services;
/// Channel: the host's busy CPU time in the interval, s.
pub const TOTAL: &str = "total";
/// Channel: the interval's wall time, s.
pub const ELAPSED: &str = "elapsed";
/// Channel: the listed kinds' groups beyond the top, s.
pub const OTHER: &str = "other";
/// Channel: time in no listed group, s.
pub const REST: &str = "rest";
/// Channel: groups found by the walk, a count.
pub const GROUPS: &str = "groups";

/// What the collector is asked to do.
#[derive(Debug, Clone)]
pub struct CgroupOptions {
    /// Groups reported by name per poll; the rest are summed into `other`.
    pub top: usize,
    /// Docker's data directory, where container names are read from (`None`: ids only).
    pub docker_root: Option<PathBuf>,
}

impl Default for CgroupOptions {
    fn default() -> Self {
        CgroupOptions {
            top: 10,
            docker_root: None,
        }
    }
}

/// CPU time per group, from cgroup v2.
pub struct CgroupCollector {
    root: PathBuf,
    options: CgroupOptions,
    names: ContainerNames,
    root_stat: SysFile,
    prev: HashMap<OsString, u64>,
    /// Each group's `cpu.stat`, held open between polls with its directory's inode number:
    /// a `statx` and a `pread` a group a poll instead of a path walk, a read and a close.
    kept: HashMap<OsString, (u64, SysFile)>,
    /// The most handles held: a quarter of the open-file limit (the CPU collector may hold
    /// half); groups beyond it are opened at each poll.
    kept_max: usize,
    prev_total: Option<u64>,
    clock: MonotonicClock,
    last_at: Option<Duration>,
    buf: Vec<u8>,
    /// Online CPUs: the most CPU time per second any group can use where the root's
    /// counter is missing.
    cpus: f64,
}

impl std::fmt::Debug for CgroupCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CgroupCollector")
            .field("root", &self.root)
            .field("groups", &self.prev.len())
            .finish_non_exhaustive()
    }
}

/// Why `<sysfs>/fs/cgroup` is not a cgroup v2 hierarchy, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCgroupV2 {
    #[error(
        "no cgroup file system at {}: per-service CPU time needs cgroup v2 mounted there",
        dir.display()
    )]
    Absent { dir: PathBuf },
    /// `v1`: the v1 controller hierarchies found there (none: no `cgroup.controllers` file).
    #[error(
        "{} is a cgroup v1 (or hybrid) hierarchy ({}): per-service CPU time needs the \
         unified cgroup v2 hierarchy (systemd's default since v247; boot with \
         systemd.unified_cgroup_hierarchy=1)",
        dir.display(),
        v1_found(v1)
    )]
    V1 { dir: PathBuf, v1: Vec<String> },
}

/// What a v1 (or hybrid) hierarchy holds, in words.
fn v1_found(v1: &[String]) -> String {
    if v1.is_empty() {
        "no cgroup.controllers file".to_owned()
    } else {
        format!("v1 controller hierarchies {}", v1.join(", "))
    }
}

/// Whether `<sysfs>/fs/cgroup` is a cgroup v2 hierarchy; `Err` says what it is instead and
/// what to do.
pub fn availability(root: &SysRoot) -> Result<PathBuf, NotCgroupV2> {
    let dir = root.sys_path("fs/cgroup");
    if dir.join("cgroup.controllers").is_file() {
        return Ok(dir);
    }
    if !dir.is_dir() {
        return Err(NotCgroupV2::Absent { dir });
    }
    let v1: Vec<String> = ["cpu,cpuacct", "cpuacct", "cpu", "systemd", "unified"] // kernel name
        .iter()
        .filter(|c| dir.join(c).is_dir())
        .map(|c| (*c).to_owned())
        .collect();
    Err(NotCgroupV2::V1 { dir, v1 })
}

impl CgroupCollector {
    /// A collector over `<sysfs>/fs/cgroup`; refused, with why, where that is not cgroup v2.
    pub fn new(root: &SysRoot, options: CgroupOptions) -> Result<Self, CollectError> {
        Self::with_clock(root, options, crate::monotonic_clock())
    }

    /// As [`CgroupCollector::new`], with the clock that times intervals.
    pub fn with_clock(
        root: &SysRoot,
        options: CgroupOptions,
        clock: MonotonicClock,
    ) -> Result<Self, CollectError> {
        let dir = availability(root).map_err(|e| CollectError::Unavailable {
            source_name: SOURCE.to_string(),
            detail: e.to_string(),
        })?;
        let cpus = crate::cpu::topology::online_cpus(root).map_or(1, |c| c.len().max(1));
        Ok(CgroupCollector {
            root_stat: SysFile::new(dir.join("cpu.stat"), true),
            root: dir,
            names: ContainerNames::new(options.docker_root.clone()),
            options,
            prev: HashMap::new(),
            kept: HashMap::new(),
            kept_max: kept_max(),
            prev_total: None,
            clock,
            last_at: None,
            buf: Vec::with_capacity(512),
            cpus: cpus as f64,
        })
    }

    /// Groups whose counters are held (those alive at the last poll).
    pub fn tracked_groups(&self) -> usize {
        self.prev.len()
    }

    /// Container names remembered (those alive at the last poll).
    pub fn remembered_names(&self) -> usize {
        self.names.len()
    }

    /// Group `cpu.stat` files held open now.
    pub fn kept_open(&self) -> usize {
        self.kept.len()
    }

    /// `usage_usec` of the group at `rel`, through its kept handle where that is still the
    /// same group (directory `ino`).
    fn read_usage(&mut self, rel: &OsString, ino: u64) -> Option<u64> {
        let mut file = match self.kept.remove(rel) {
            Some((kept_ino, file)) if kept_ino == ino => file,
            _ => SysFile::new(
                self.root.join(rel).join("cpu.stat"),
                self.kept.len() < self.kept_max,
            ),
        };
        file.read_current(&mut self.buf).ok()?;
        let usage = usage_usec(&self.buf)?;
        if file.is_open() {
            self.kept.insert(rel.clone(), (ino, file));
        }
        Some(usage)
    }
}

/// A quarter of the soft open-file limit, at least 64.
fn kept_max() -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    getrlimit(Resource::RLIMIT_NOFILE)
        .map_or(64, |(soft, _)| {
            usize::try_from(soft / 4).unwrap_or(usize::MAX)
        })
        .max(64)
}

/// `usage_usec` from the text of a `cpu.stat`.
pub fn usage_usec(text: &[u8]) -> Option<u64> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(b"usage_usec ")?;
        std::str::from_utf8(rest).ok()?.trim().parse().ok()
    })
}

impl Collector for CgroupCollector {
    fn source(&self) -> &SourceId {
        &SOURCE
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        if !self.root.is_dir() {
            return Err(CollectError::io(
                &self.root,
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        }
        let at = (self.clock)();
        let total_now = self
            .root_stat
            .read_current(&mut self.buf)
            .ok()
            .and_then(|()| usage_usec(&self.buf));
        let walk = tree::walk(&self.root, &mut self.names);
        self.names.retain_seen();
        let mut now: HashMap<OsString, u64> = HashMap::with_capacity(walk.groups.len());
        let mut found = Vec::with_capacity(walk.groups.len());
        for g in walk.groups {
            // A group that vanished or cannot be read is left out: its time is in the rest.
            if let Some(usage) = self.read_usage(&g.rel, g.ino) {
                found.push((g.kind, g.name, g.rel.clone(), usage));
                now.insert(g.rel, usage);
            }
        }
        // Handles of groups gone since the last poll are closed.
        self.kept.retain(|rel, _| now.contains_key(rel));
        let (Some(last_at), prev) = (self.last_at, std::mem::replace(&mut self.prev, now)) else {
            self.last_at = Some(at);
            self.prev_total = total_now;
            return Ok(Vec::new());
        };
        let prev_total = std::mem::replace(&mut self.prev_total, total_now);
        self.last_at = Some(at);
        let elapsed = at.saturating_sub(last_at).as_secs_f64();
        if elapsed <= 0.0 {
            return Ok(Vec::new());
        }
        let root_delta = match (total_now, prev_total) {
            (Some(n), Some(p)) if n >= p => Some((n - p) as f64 / 1e6),
            _ => None,
        };
        let cap = root_delta.unwrap_or(elapsed * self.cpus);
        let mut by_channel: HashMap<(Kind, String), f64> = HashMap::new();
        for (kind, name, rel, usage) in found {
            let delta = match prev.get(&rel) {
                Some(&p) if usage >= p => usage - p,
                // New since the last poll, or created again under the same name.
                _ => usage,
            };
            *by_channel.entry((kind, name)).or_default() += (delta as f64 / 1e6).min(cap);
        }
        let mut ranked: Vec<((Kind, String), f64)> =
            by_channel.into_iter().filter(|(_, s)| *s > 0.0).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let listed: f64 = ranked.iter().map(|(_, s)| s).sum();
        let total = root_delta.unwrap_or(listed).max(listed);
        let other: f64 = ranked.iter().skip(self.options.top).map(|(_, s)| s).sum();
        let sample = |channel: String, value: f64| {
            Sample::new(now_ms, SOURCE, Metric::CgroupCpu, channel, value)
        };
        let mut out: Vec<Sample> = ranked
            .into_iter()
            .take(self.options.top)
            .map(|((kind, name), s)| sample(format!("{}:{name}", kind.as_str()), s))
            .collect();
        out.push(sample(OTHER.to_owned(), other));
        out.push(sample(REST.to_owned(), (total - listed).max(0.0)));
        out.push(sample(TOTAL.to_owned(), total));
        out.push(sample(ELAPSED.to_owned(), elapsed));
        out.push(sample(GROUPS.to_owned(), self.prev.len() as f64));
        Ok(out)
    }
}
