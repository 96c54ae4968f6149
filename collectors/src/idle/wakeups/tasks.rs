//! How often each thread was given a CPU, from the kernel's per-task scheduler statistics:
//! the third field of `/proc/<pid>/task/<tid>/schedstat` (Documentation/scheduler/
//! sched-stats.rst, "/proc/<pid>/schedstat": time on the CPU in ns, time waiting on a run
//! queue in ns, and the number of timeslices run on this CPU). A thread is counted each time
//! it is scheduled in; for a thread that mostly sleeps that is each time it was woken.
//!
//! Each process is named by its `comm` and put in the group of its cgroup v2 path (the `0::`
//! line of `/proc/<pid>/cgroup`), classified as the per-service CPU time does
//! ([`crate::cgroup::tree::classify_path`]).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use crate::cgroup::ContainerNames;
use crate::cgroup::names::printable;
use crate::cgroup::tree::classify_path;

/// Threads read in one scan at most; a runaway host costs a bounded scan.
pub const MAX_THREADS: usize = 65_536;

/// A process as one scan found it: its names and where its threads lie in
/// [`TaskScan::threads`].
#[derive(Debug, Clone)]
pub struct ScannedProcess {
    pub pid: u32,
    /// Its `comm` (at most 15 bytes in the kernel), made printable.
    pub comm: Arc<str>,
    /// Its group: `service:<unit>`, `container:<name>`, `session:user-<uid>`,
    /// `machine:<name>`, else `cgroup:<path>` (`cgroup:/` is the root: kernel threads;
    /// `cgroup:/init.scope`), or `cgroup:?` where no cgroup v2 line could be read.
    pub group: Arc<str>,
    /// Its threads: `threads[start..end]`, sorted by thread id.
    start: u32,
    end: u32,
}

/// A thread's id and the times it was given a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedThread {
    pub tid: u32,
    pub count: u64,
}

/// One scan, flat: the processes sorted by pid, every thread in one array. At 2,000 threads
/// a scan is about 80 KB, and a process seen before shares its names with the scan before.
#[derive(Debug, Default, Clone)]
pub struct TaskScan {
    processes: Vec<ScannedProcess>,
    threads: Vec<ScannedThread>,
    /// Whether [`MAX_THREADS`] cut the scan short.
    pub truncated: bool,
}

impl TaskScan {
    /// The processes that had a thread read, sorted by pid.
    pub fn processes(&self) -> &[ScannedProcess] {
        &self.processes
    }

    /// `process`'s threads, sorted by thread id.
    pub fn threads_of(&self, process: &ScannedProcess) -> &[ScannedThread] {
        self.threads
            .get(process.start as usize..process.end as usize)
            .unwrap_or_default()
    }

    /// The process `pid`, where the scan found it.
    pub fn process(&self, pid: u32) -> Option<&ScannedProcess> {
        self.processes
            .binary_search_by_key(&pid, |p| p.pid)
            .ok()
            .and_then(|i| self.processes.get(i))
    }

    /// Threads read.
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }
}

/// The count of the main thread (the one whose id is `pid`) among a process' `threads`, sorted
/// by thread id, where it was read.
fn main_count(threads: &[ScannedThread], pid: u32) -> Option<u64> {
    threads
        .binary_search_by_key(&pid, |t| t.tid)
        .ok()
        .and_then(|i| threads.get(i))
        .map(|t| t.count)
}

/// The names scans share: each distinct `comm` and group is held once, however many
/// processes and scans refer to it.
#[derive(Debug, Default)]
pub struct Names {
    held: HashSet<Arc<str>>,
}

impl Names {
    fn intern(&mut self, name: String) -> Arc<str> {
        if let Some(held) = self.held.get(name.as_str()) {
            return held.clone();
        }
        let name: Arc<str> = name.into();
        self.held.insert(name.clone());
        name
    }

    /// Let go of the names no scan refers to any more.
    pub fn retain_used(&mut self) {
        self.held.retain(|n| Arc::strong_count(n) > 1);
    }

    /// Names held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

/// Scan every process under `proc` (`[host] procfs`). Processes and threads that end during
/// the scan, or whose files cannot be read, are left out. A process `prev` (the scan before)
/// already named keeps its name and group unread while it is the same process: its main
/// thread (the one whose id is the pid) is there and its count has not gone down, which a
/// new process under a reused pid starts again from zero.
pub fn scan(
    proc: &Path,
    containers: &mut ContainerNames,
    names: &mut Names,
    prev: Option<&TaskScan>,
) -> std::io::Result<TaskScan> {
    let mut out = TaskScan {
        processes: Vec::with_capacity(prev.map_or(0, |p| p.processes.len() + 16)),
        threads: Vec::with_capacity(prev.map_or(0, |p| p.threads.len() + 32)),
        truncated: false,
    };
    let mut buf = String::with_capacity(256);
    for entry in std::fs::read_dir(proc)?.flatten() {
        let Some(pid) = number(&entry.file_name()) else {
            continue;
        };
        let dir = entry.path();
        let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
            continue;
        };
        let start = out.threads.len();
        for task in tasks.flatten() {
            if out.threads.len() >= MAX_THREADS {
                out.truncated = true;
                break;
            }
            let Some(tid) = number(&task.file_name()) else {
                continue;
            };
            if let Some(count) =
                read(&task.path().join("schedstat"), &mut buf).and_then(|()| timeslices(&buf))
            {
                out.threads.push(ScannedThread { tid, count });
            }
        }
        let end = out.threads.len();
        if end > start {
            out.threads[start..end].sort_unstable_by_key(|t| t.tid);
            let now = main_count(&out.threads[start..end], pid);
            let known = prev.and_then(|p| {
                let before = p.process(pid)?;
                (now? >= main_count(p.threads_of(before), pid)?).then_some(before)
            });
            let (comm, group) = if let Some(before) = known {
                (before.comm.clone(), before.group.clone())
            } else {
                let comm = read(&dir.join("comm"), &mut buf).map_or_else(
                    || "?".to_owned(),
                    |()| printable(OsStr::new(buf.trim_end())),
                );
                let group = read(&dir.join("cgroup"), &mut buf)
                    .and_then(|()| unified_path(&buf).map(|p| group(p, containers)))
                    .unwrap_or_else(|| "cgroup:?".to_owned());
                (names.intern(comm), names.intern(group))
            };
            out.processes.push(ScannedProcess {
                pid,
                comm,
                group,
                start: start as u32,
                end: end as u32,
            });
        }
        if out.truncated {
            break;
        }
    }
    out.processes.sort_unstable_by_key(|p| p.pid);
    containers.retain_seen();
    Ok(out)
}

fn number(name: &OsStr) -> Option<u32> {
    name.to_str()?.parse().ok()
}

#[allow(clippy::disallowed_methods, reason = "a procfs file: never a database")]
fn read(path: &Path, buf: &mut String) -> Option<()> {
    use std::io::Read as _;
    buf.clear();
    std::fs::File::open(path).ok()?.read_to_string(buf).ok()?;
    Some(())
}

/// The third field of a `schedstat` line.
pub fn timeslices(text: &str) -> Option<u64> {
    text.split_whitespace().nth(2)?.parse().ok()
}

/// The cgroup v2 path of a `/proc/<pid>/cgroup` text (its `0::` line).
pub fn unified_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

fn group(path: &str, names: &mut ContainerNames) -> String {
    match classify_path(Path::new(path), names) {
        Some((kind, name)) => format!("{}:{name}", kind.as_str()),
        None => format!("cgroup:{}", printable(OsStr::new(path))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_third_schedstat_field_and_the_unified_cgroup_line() {
        assert_eq!(timeslices("854802 1200 17\n"), Some(17));
        assert_eq!(timeslices("854802 1200\n"), None);
        assert_eq!(timeslices("a b c\n"), None);
        // A hybrid (v1 + v2) host lists the v1 hierarchies first.
        let hybrid =
            "9:name=systemd:/system.slice/sshd.service\n1:cpu:/\n0::/system.slice/sshd.service\n";
        assert_eq!(unified_path(hybrid), Some("/system.slice/sshd.service"));
        assert_eq!(unified_path("1:cpu:/\n"), None);
        let mut names = ContainerNames::new(None);
        assert_eq!(
            group("/system.slice/sshd.service", &mut names),
            "service:sshd.service"
        );
        assert_eq!(group("/", &mut names), "cgroup:/");
        assert_eq!(group("/init.scope", &mut names), "cgroup:/init.scope");
    }
}
