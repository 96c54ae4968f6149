//! Who wakes the CPUs: wake-ups per second of each process over a window, and interrupts
//! per second of each IRQ line, from two reads of procfs under the injected root.
//!
//! - tasks ([`tasks`]): the times each thread was given a CPU, the third field of
//!   `<procfs>/<pid>/task/<tid>/schedstat`, summed per process; for a thread that mostly
//!   sleeps, each time it was woken. The context-switch counts of `status` are not used:
//!   `voluntary_ctxt_switches` misses a thread preempted and scheduled back in, and the file
//!   is ten times longer to read;
//! - interrupts ([`interrupts`]): `<procfs>/interrupts`, summed over CPUs per line, each
//!   CPU's count followed across its 32-bit wrap.
//!
//! A thread first seen in the second read started within the window, so all its count is
//! the window's; a count that went down belongs to a thread id used again, and counts from
//! zero. Threads that ended within the window are not seen (their wake-ups are missed).
//! Units: wake-ups or interrupts per second, seconds.

pub mod fixture;
pub mod interrupts;
pub mod tasks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::cgroup::ContainerNames;
use crate::counter::{Movement, movement};
use crate::{CollectError, MonotonicClock, SysRoot};

pub use interrupts::InterruptLine;
pub use tasks::{ScannedProcess, ScannedThread, TaskScan};

/// `/proc/interrupts` prints each CPU's count as an unsigned int.
const INTERRUPT_WRAP: u64 = 1 << 32;

/// Wake-ups of one process over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRate {
    pub pid: u32,
    /// As [`ScannedProcess::comm`], shared with the scan.
    pub comm: Arc<str>,
    /// As [`ScannedProcess::group`].
    pub group: Arc<str>,
    /// Times its threads were given a CPU, per second.
    pub per_s: f64,
}

/// Interrupts of one `/proc/interrupts` line over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptRate {
    /// The IRQ number, or the kernel's name of the kind (`LOC`).
    pub irq: String,
    /// A kind of the kernel's own (`LOC`, `RES`, `CAL`, `TLB`, ...), not a device's IRQ.
    pub kernel: bool,
    /// The device (the handlers' names), or the kernel kind's description.
    pub name: String,
    /// Interrupts per second, summed over CPUs.
    pub per_s: f64,
}

/// What a window of two reads found.
#[derive(Debug, Clone, PartialEq)]
pub struct Wakeups {
    /// The window, s (monotonic clock).
    pub seconds: f64,
    /// Every process seen in the second read, in no order (rates of 0 included).
    pub processes: Vec<ProcessRate>,
    /// Threads read in the second read.
    pub threads: usize,
    /// Whether the scan stopped at [`tasks::MAX_THREADS`].
    pub truncated: bool,
    /// Every line of `/proc/interrupts`, in its order.
    pub interrupts: Vec<InterruptRate>,
    /// Why `/proc/interrupts` could not be read, where it could not.
    pub interrupts_unavailable: Option<String>,
}

struct Read {
    at: Duration,
    tasks: TaskScan,
    interrupts: Result<Vec<InterruptLine>, CollectError>,
}

/// Reads the counters and, from the second read on, returns the rates since the previous.
pub struct WakeupCollector {
    proc: PathBuf,
    containers: ContainerNames,
    names: tasks::Names,
    clock: MonotonicClock,
    prev: Option<Read>,
}

impl std::fmt::Debug for WakeupCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeupCollector")
            .field("proc", &self.proc)
            .finish_non_exhaustive()
    }
}

impl WakeupCollector {
    /// Over `root`'s procfs; container names from Docker's data directory where given.
    pub fn new(root: &SysRoot, docker_root: Option<PathBuf>) -> Self {
        Self::with_clock(root, docker_root, crate::monotonic_clock())
    }

    /// As [`WakeupCollector::new`], with the clock that times the window.
    pub fn with_clock(root: &SysRoot, docker_root: Option<PathBuf>, clock: MonotonicClock) -> Self {
        WakeupCollector {
            proc: root.proc.clone(),
            containers: ContainerNames::new(docker_root),
            names: tasks::Names::default(),
            clock,
            prev: None,
        }
    }

    /// Where the counts come from, in words, with the paths read.
    pub fn sources(&self) -> (String, String) {
        (
            format!(
                "times each thread was given a CPU, the third field of {}",
                self.proc.join("<pid>/task/<tid>/schedstat").display()
            ),
            self.proc.join("interrupts").display().to_string(),
        )
    }

    /// Read the counters now. `Ok(None)` for the first read; after it, the rates since the
    /// previous read. Fails only where the procfs root cannot be listed.
    pub fn poll(&mut self) -> Result<Option<Wakeups>, CollectError> {
        let at = (self.clock)();
        let tasks = tasks::scan(
            &self.proc,
            &mut self.containers,
            &mut self.names,
            self.prev.as_ref().map(|r| &r.tasks),
        )
        .map_err(|e| CollectError::io(&self.proc, e))?;
        let path = self.proc.join("interrupts");
        let interrupts = std::fs::read_to_string(&path)
            .map(|t| interrupts::parse(&t))
            .map_err(|e| CollectError::io(&path, e));
        let now = Read {
            at,
            tasks,
            interrupts,
        };
        let Some(prev) = self.prev.replace(now) else {
            return Ok(None);
        };
        let Some(now) = self.prev.as_ref() else {
            return Ok(None);
        };
        let rates = rates(&prev, now);
        drop(prev);
        self.names.retain_used();
        Ok(rates)
    }
}

fn rates(prev: &Read, now: &Read) -> Option<Wakeups> {
    let seconds = now.at.checked_sub(prev.at)?.as_secs_f64();
    if seconds <= 0.0 {
        return None;
    }
    let before = prev.tasks.processes();
    let mut next = 0;
    let processes = now
        .tasks
        .processes()
        .iter()
        .map(|p| {
            // Both sorted by pid: the process' entry in the scan before, where it had one.
            while before.get(next).is_some_and(|b| b.pid < p.pid) {
                next += 1;
            }
            let then = before
                .get(next)
                .filter(|b| b.pid == p.pid)
                .map_or(&[][..], |b| prev.tasks.threads_of(b));
            let count: u64 = now
                .tasks
                .threads_of(p)
                .iter()
                .map(|t| window_count(then, t))
                .sum();
            ProcessRate {
                pid: p.pid,
                comm: p.comm.clone(),
                group: p.group.clone(),
                per_s: count as f64 / seconds,
            }
        })
        .collect();
    let (interrupts, interrupts_unavailable) = match (&prev.interrupts, &now.interrupts) {
        (Ok(before), Ok(lines)) => (interrupt_rates(before, lines, seconds), None),
        (Err(e), _) | (_, Err(e)) => (Vec::new(), Some(crate::ErrorChain(e).to_string())),
    };
    Some(Wakeups {
        seconds,
        processes,
        threads: now.tasks.thread_count(),
        truncated: now.tasks.truncated,
        interrupts,
        interrupts_unavailable,
    })
}

/// The times `thread` was given a CPU within the window, against `then`, its process' threads
/// in the scan before (sorted by thread id). A thread not among them started within the window
/// (or its id was used again by another process), and a count that went down belongs to a
/// thread id used again: all its count is the window's.
fn window_count(then: &[tasks::ScannedThread], thread: &tasks::ScannedThread) -> u64 {
    match then.binary_search_by_key(&thread.tid, |t| t.tid) {
        Ok(i) => match movement(then[i].count, thread.count, None) {
            Movement::Up(d) | Movement::Wrapped(d) => d,
            Movement::Down => thread.count,
        },
        Err(_) => thread.count,
    }
}

fn interrupt_rates(
    before: &[InterruptLine],
    now: &[InterruptLine],
    seconds: f64,
) -> Vec<InterruptRate> {
    let before: HashMap<&str, &InterruptLine> =
        before.iter().map(|l| (l.irq.as_str(), l)).collect();
    now.iter()
        .filter_map(|l| {
            let prev = before.get(l.irq.as_str())?;
            // A CPU that came online within the window has counted since: all of it counts.
            let delta: u64 = l
                .per_cpu
                .iter()
                .enumerate()
                .map(|(i, &n)| match prev.per_cpu.get(i) {
                    Some(&p) => match movement(p, n, Some(INTERRUPT_WRAP)) {
                        Movement::Up(d) | Movement::Wrapped(d) => d,
                        Movement::Down => n,
                    },
                    None => n,
                })
                .sum();
            Some(InterruptRate {
                irq: l.irq.clone(),
                kernel: l.kernel,
                name: l.name.clone(),
                per_s: delta as f64 / seconds,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::fixture::FixtureProc;
    use super::*;

    fn stepped_clock(step: Duration) -> MonotonicClock {
        let mut t = Duration::ZERO;
        Box::new(move || {
            t += step;
            t
        })
    }

    fn rate<'a>(w: &'a Wakeups, comm: &str) -> &'a ProcessRate {
        w.processes.iter().find(|p| &*p.comm == comm).unwrap()
    }

    #[test]
    fn two_reads_give_each_process_and_interrupt_line_its_rate() {
        let dir = tempfile::tempdir().unwrap();
        let proc = FixtureProc::new(&dir.path().join("proc")).unwrap();
        proc.add_home_server().unwrap();
        proc.set_interrupts(
            &[("LOC", 1000), ("RES", 10)],
            &[(122, "nvme0q1", u64::from(u32::MAX) - 10)],
        )
        .unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let mut c = WakeupCollector::with_clock(&root, None, stepped_clock(Duration::from_secs(2)));
        assert_eq!(c.poll().unwrap(), None);

        proc.set_count(100, 100, 1000).unwrap();
        proc.set_count(100, 101, 200).unwrap();
        proc.set_count(120, 120, 400).unwrap();
        proc.set_count(200, 200, 400).unwrap();
        // A thread started within the window counts whole.
        proc.add_thread(200, 201, 100).unwrap();
        proc.set_interrupts(&[("LOC", 3000), ("RES", 10)], &[(122, "nvme0q1", 89)])
            .unwrap();
        let w = c.poll().unwrap().unwrap();
        assert!((w.seconds - 2.0).abs() < 1e-9);
        assert_eq!(w.threads, 6);
        assert!((rate(&w, "jellyfin").per_s - 600.0).abs() < 1e-9);
        assert_eq!(&*rate(&w, "jellyfin").group, "service:jellyfin.service");
        assert_eq!(&*rate(&w, "ffmpeg").group, "service:jellyfin.service");
        assert!((rate(&w, "ffmpeg").per_s - 200.0).abs() < 1e-9);
        assert!((rate(&w, "sshd").per_s - 250.0).abs() < 1e-9);
        assert_eq!(&*rate(&w, "kthreadd").group, "cgroup:/");
        assert!(rate(&w, "kthreadd").per_s.abs() < 1e-9);
        let irq = |k: &str| w.interrupts.iter().find(|i| i.irq == k).unwrap();
        assert!((irq("LOC").per_s - 1000.0).abs() < 1e-9);
        assert!(irq("LOC").kernel);
        assert!(irq("RES").per_s.abs() < 1e-9);
        // Across the 32-bit wrap: 10 to the wrap, 1 to zero, 89 after it, on one CPU.
        assert!((irq("122").per_s - 50.0).abs() < 1e-9, "{:?}", irq("122"));
        assert_eq!(irq("122").name, "nvme0q1");
        assert_eq!(w.interrupts_unavailable, None);

        // A thread id used again after its thread ended counts from zero.
        proc.set_count(100, 100, 30).unwrap();
        let w = c.poll().unwrap().unwrap();
        assert!((rate(&w, "jellyfin").per_s - 15.0).abs() < 1e-9);
    }

    #[test]
    fn a_process_seen_before_keeps_its_name_and_a_reused_pid_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let proc = FixtureProc::new(&dir.path().join("proc")).unwrap();
        proc.add_process(7, "cron", "/system.slice/cron.service", &[7])
            .unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let mut c = WakeupCollector::with_clock(&root, None, stepped_clock(Duration::from_secs(1)));
        assert_eq!(c.poll().unwrap(), None);
        // The same process: its files are not read again (a rename here is not seen).
        proc.add_process(7, "renamed", "/system.slice/other.service", &[])
            .unwrap();
        proc.set_count(7, 7, 3).unwrap();
        let w = c.poll().unwrap().unwrap();
        assert_eq!(&*rate(&w, "cron").group, "service:cron.service");
        // Pid 7 used again: its main thread counts from zero, so it is read anew.
        proc.set_count(7, 7, 1).unwrap();
        let w = c.poll().unwrap().unwrap();
        assert_eq!(&*rate(&w, "renamed").group, "service:other.service");
        assert!((rate(&w, "renamed").per_s - 1.0).abs() < 1e-9);
    }

    /// Each distinct name is held once, shared by the processes and scans that have it, and
    /// let go once no scan has it; a thread id that moved to another process counts whole there.
    #[test]
    fn names_are_held_once_and_let_go_and_a_moved_thread_counts_whole() {
        let dir = tempfile::tempdir().unwrap();
        let proc = FixtureProc::new(&dir.path().join("proc")).unwrap();
        for pid in [10, 20, 30] {
            proc.add_process(pid, "php-fpm", "/system.slice/php.service", &[pid, pid + 1])
                .unwrap();
        }
        proc.add_process(40, "cron", "/system.slice/cron.service", &[40])
            .unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let mut c = WakeupCollector::with_clock(&root, None, stepped_clock(Duration::from_secs(1)));
        assert_eq!(c.poll().unwrap(), None);
        // php-fpm, cron and their two groups.
        assert_eq!(c.names.len(), 4);
        proc.set_count(20, 21, 5).unwrap();
        let w = c.poll().unwrap().unwrap();
        let php: Vec<_> = w
            .processes
            .iter()
            .filter(|p| &*p.comm == "php-fpm")
            .collect();
        assert_eq!(php.len(), 3);
        assert!(php.iter().all(|p| Arc::ptr_eq(&p.comm, &php[0].comm)));
        assert!(php.iter().all(|p| Arc::ptr_eq(&p.group, &php[0].group)));
        drop(php);
        drop(w);

        // cron ends; thread 21 now belongs to a new process 50.
        std::fs::remove_dir_all(dir.path().join("proc/40")).unwrap();
        std::fs::remove_dir_all(dir.path().join("proc/20/task/21")).unwrap();
        proc.add_process(50, "backup", "/system.slice/php.service", &[50])
            .unwrap();
        proc.add_thread(50, 21, 7).unwrap();
        let w = c.poll().unwrap().unwrap();
        assert!((w.processes.iter().find(|p| p.pid == 50).unwrap().per_s - 7.0).abs() < 1e-9);
        assert!(w.processes.iter().all(|p| &*p.comm != "cron"));
        drop(w);
        // cron and its group let go; backup held.
        assert_eq!(c.names.len(), 3);
    }

    #[test]
    fn without_interrupts_the_tasks_are_still_counted_and_a_missing_root_fails() {
        let dir = tempfile::tempdir().unwrap();
        let proc = FixtureProc::new(&dir.path().join("proc")).unwrap();
        proc.add_process(7, "cron", "/system.slice/cron.service", &[7])
            .unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let mut c = WakeupCollector::with_clock(&root, None, stepped_clock(Duration::from_secs(1)));
        assert_eq!(c.poll().unwrap(), None);
        proc.set_count(7, 7, 3).unwrap();
        let w = c.poll().unwrap().unwrap();
        assert!((rate(&w, "cron").per_s - 3.0).abs() < 1e-9);
        assert!(w.interrupts.is_empty());
        assert!(w.interrupts_unavailable.unwrap().contains("interrupts"));

        let gone = SysRoot::new(dir.path().join("sys"), dir.path().join("nothing"));
        let err = WakeupCollector::new(&gone, None).poll().unwrap_err();
        assert!(err.to_string().contains("nothing"), "{err}");
    }
}
