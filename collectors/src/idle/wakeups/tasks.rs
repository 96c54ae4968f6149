//! How often each thread was given a CPU, from the kernel's per-task scheduler statistics:
//! the third field of `/proc/<pid>/task/<tid>/schedstat` (Documentation/scheduler/
//! sched-stats.rst, "/proc/<pid>/schedstat": time on the CPU in ns, time waiting on a run
//! queue in ns, and the number of timeslices run on this CPU). A thread is counted each time
//! it is scheduled in; for a thread that mostly sleeps that is each time it was woken.
//!
//! Each process is named by its `comm` and put in the group of its cgroup v2 path (the `0::`
//! line of `/proc/<pid>/cgroup`), classified as the per-service CPU time does
//! ([`crate::cgroup::tree::classify_path`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;

use crate::cgroup::ContainerNames;
use crate::cgroup::names::printable;
use crate::cgroup::tree::classify_path;

/// Threads read in one scan at most; a runaway host costs a bounded scan.
pub const MAX_THREADS: usize = 65_536;

/// A process as one scan found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its `comm` (at most 15 bytes in the kernel), made printable.
    pub comm: String,
    /// Its group: `service:<unit>`, `container:<name>`, `session:user-<uid>`,
    /// `machine:<name>`, else `cgroup:<path>` (`cgroup:/` is the root: kernel threads;
    /// `cgroup:/init.scope`), or `cgroup:?` where no cgroup v2 line could be read.
    pub group: String,
}

/// One scan: each thread's count, and the process it belongs to.
#[derive(Debug, Default, Clone)]
pub struct TaskScan {
    /// Thread id -> (process id, times it was given a CPU).
    pub threads: HashMap<u32, (u32, u64)>,
    pub processes: HashMap<u32, Process>,
    /// Whether [`MAX_THREADS`] cut the scan short.
    pub truncated: bool,
}

/// Scan every process under `proc` (`[host] procfs`). Processes and threads that end during
/// the scan, or whose files cannot be read, are left out. A process `prev` (the scan before)
/// already named keeps its name and group unread while it is the same process: its main
/// thread (the one whose id is the pid) is there and its count has not gone down, which a
/// new process under a reused pid starts again from zero.
pub fn scan(
    proc: &Path,
    names: &mut ContainerNames,
    prev: Option<&TaskScan>,
) -> std::io::Result<TaskScan> {
    let mut out = TaskScan::default();
    let mut buf = String::with_capacity(256);
    for entry in std::fs::read_dir(proc)?.flatten() {
        let Some(pid) = number(&entry.file_name()) else {
            continue;
        };
        let dir = entry.path();
        let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
            continue;
        };
        let mut any = false;
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
                out.threads.insert(tid, (pid, count));
                any = true;
            }
        }
        let known = prev.and_then(|p| {
            let (_, before) = p.threads.get(&pid).filter(|(owner, _)| *owner == pid)?;
            let (_, now) = out.threads.get(&pid)?;
            (now >= before).then(|| p.processes.get(&pid))?
        });
        if let (true, Some(process)) = (any, known) {
            out.processes.insert(pid, process.clone());
        } else if any {
            let comm = read(&dir.join("comm"), &mut buf).map_or_else(
                || "?".to_owned(),
                |()| printable(OsStr::new(buf.trim_end())),
            );
            let group = read(&dir.join("cgroup"), &mut buf)
                .and_then(|()| unified_path(&buf).map(|p| group(p, names)))
                .unwrap_or_else(|| "cgroup:?".to_owned());
            out.processes.insert(pid, Process { comm, group });
        }
        if out.truncated {
            break;
        }
    }
    names.retain_seen();
    Ok(out)
}

fn number(name: &OsStr) -> Option<u32> {
    name.to_str()?.parse().ok()
}

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
