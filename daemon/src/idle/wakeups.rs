//! Who wakes the CPUs, for `wattson idle`: the wake-ups of a sampled window
//! ([`wattson_collectors::idle::wakeups`]) ranked by service, by process and by interrupt
//! line, each with its share of all of its kind.
//!
//! Tasks' wake-ups and interrupts are ranked apart, never added: a timer interrupt that
//! wakes a sleeping thread is counted once on the interrupt line (`LOC`) and once on the
//! thread. Units: per second, shares 0..1.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;
use wattson_collectors::idle::wakeups::{WakeupCollector, Wakeups};
use wattson_collectors::{CollectError, SysRoot};

/// Entries listed per ranking unless asked otherwise.
pub const TOP: usize = 10;

/// The ranked wake-ups of one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WakeupsView {
    /// The window, s.
    pub seconds: f64,
    /// Where the tasks' counts come from, in words with the path.
    pub tasks_from: String,
    /// Where the interrupts come from (the path of `/proc/interrupts`).
    pub interrupts_from: String,
    /// Every task's wake-ups together, per second.
    pub task_wakeups_per_s: f64,
    /// Threads read.
    pub threads: usize,
    /// Whether the scan stopped at its bound (65,536 threads).
    pub truncated: bool,
    /// The groups (services, containers, sessions, machines, else the cgroup path) whose
    /// tasks woke most, at most `top`.
    pub by_service: Vec<GroupEntry>,
    /// The processes (by comm, within their group) that woke most, at most `top`.
    pub by_process: Vec<ProcessEntry>,
    /// Every interrupt line together, per second.
    pub interrupts_per_s: f64,
    /// The interrupt lines (devices and the kernel's own kinds) that fired most, at most `top`.
    pub interrupts: Vec<InterruptEntry>,
    /// Why `/proc/interrupts` could not be read, where it could not.
    pub interrupts_unavailable: Option<String>,
    /// Why nothing could be sampled (the procfs root cannot be listed).
    pub unavailable: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupEntry {
    /// `service:<unit>`, `container:<name>`, `session:user-<uid>`, `machine:<name>`, else
    /// `cgroup:<path>` (`cgroup:/`: kernel threads).
    pub group: String,
    pub per_s: f64,
    /// Of every task's wake-ups, 0..1.
    pub share: f64,
    /// Its processes' names, most wake-ups first.
    pub processes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessEntry {
    /// The process name (`comm`); processes of one name in one group are summed.
    pub comm: String,
    pub group: String,
    /// How many processes of that name the group has.
    pub pids: usize,
    pub per_s: f64,
    /// Of every task's wake-ups, 0..1.
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InterruptEntry {
    /// The IRQ number, or the kernel's name of the kind (`LOC`, `RES`, `CAL`, `TLB`).
    pub irq: String,
    /// One of the kernel's own kinds, not a device's IRQ.
    pub kernel: bool,
    /// The device (its handlers' names), or the kind's description (`Local timer
    /// interrupts`).
    pub name: String,
    pub per_s: f64,
    /// Of every interrupt, 0..1.
    pub share: f64,
}

impl InterruptEntry {
    /// `LOC (Local timer interrupts)`, `nvme0q1 (IRQ 122)`, `IRQ 40` (no handler named).
    pub fn label(&self) -> String {
        if self.kernel {
            format!("{} ({})", self.irq, self.name)
        } else if self.name.is_empty() {
            format!("IRQ {}", self.irq)
        } else {
            format!("{} (IRQ {})", self.name, self.irq)
        }
    }
}

/// A window being sampled: the first read taken.
pub struct Sampling {
    collector: WakeupCollector,
    first: Result<(), CollectError>,
}

/// Take the first read now.
pub fn start(root: &SysRoot, docker_root: Option<PathBuf>) -> Sampling {
    let mut collector = WakeupCollector::new(root, docker_root);
    let first = collector.poll().map(|_| ());
    Sampling { collector, first }
}

impl Sampling {
    /// Take the second read and rank, `top` entries per ranking.
    pub fn finish(mut self, top: usize) -> WakeupsView {
        let (tasks_from, interrupts_from) = self.collector.sources();
        let why = match self.first.and_then(|()| self.collector.poll()) {
            Ok(Some(w)) => return rank(&w, top, tasks_from, interrupts_from),
            Ok(None) => "no time passed between the two reads".to_owned(),
            Err(e) => wattson_collectors::ErrorChain(&e).to_string(),
        };
        WakeupsView {
            seconds: 0.0,
            tasks_from,
            interrupts_from,
            task_wakeups_per_s: 0.0,
            threads: 0,
            truncated: false,
            by_service: Vec::new(),
            by_process: Vec::new(),
            interrupts_per_s: 0.0,
            interrupts: Vec::new(),
            interrupts_unavailable: None,
            unavailable: Some(why),
        }
    }
}

fn share(part: f64, total: f64) -> f64 {
    if total > 0.0 { part / total } else { 0.0 }
}

/// Most first, ties by name; nothing that did not wake.
fn ranked<K: Ord>(mut items: Vec<(K, f64)>, top: usize) -> Vec<(K, f64)> {
    items.retain(|(_, r)| *r > 0.0);
    items.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    items.truncate(top);
    items
}

/// Rank a window's wake-ups.
pub fn rank(w: &Wakeups, top: usize, tasks_from: String, interrupts_from: String) -> WakeupsView {
    let total: f64 = w.processes.iter().map(|p| p.per_s).sum();
    let mut groups: HashMap<&str, f64> = HashMap::new();
    let mut processes: HashMap<(&str, &str), (usize, f64)> = HashMap::new();
    for p in &w.processes {
        *groups.entry(&p.group).or_default() += p.per_s;
        let e = processes.entry((&p.group, &p.comm)).or_default();
        e.0 += 1;
        e.1 += p.per_s;
    }
    let by_process_all = ranked(
        processes.iter().map(|(k, (_, r))| (*k, *r)).collect(),
        usize::MAX,
    );
    let by_service = ranked(groups.into_iter().collect(), top)
        .into_iter()
        .map(|(group, per_s)| GroupEntry {
            group: group.to_owned(),
            per_s,
            share: share(per_s, total),
            processes: by_process_all
                .iter()
                .filter(|((g, _), _)| *g == group)
                .map(|((_, comm), _)| (*comm).to_owned())
                .collect(),
        })
        .collect();
    let by_process = by_process_all
        .iter()
        .take(top)
        .map(|&((group, comm), per_s)| ProcessEntry {
            comm: comm.to_owned(),
            group: group.to_owned(),
            pids: processes.get(&(group, comm)).map_or(0, |e| e.0),
            per_s,
            share: share(per_s, total),
        })
        .collect();
    let interrupts_per_s: f64 = w.interrupts.iter().map(|i| i.per_s).sum();
    let interrupts = ranked(
        w.interrupts
            .iter()
            .enumerate()
            .map(|(n, i)| (n, i.per_s))
            .collect(),
        usize::MAX,
    )
    .into_iter()
    .take(top)
    .map(|(n, per_s)| {
        let i = &w.interrupts[n];
        InterruptEntry {
            irq: i.irq.clone(),
            kernel: i.kernel,
            name: i.name.clone(),
            per_s,
            share: share(per_s, interrupts_per_s),
        }
    })
    .collect();
    WakeupsView {
        seconds: w.seconds,
        tasks_from,
        interrupts_from,
        task_wakeups_per_s: total,
        threads: w.threads,
        truncated: w.truncated,
        by_service,
        by_process,
        interrupts_per_s,
        interrupts,
        interrupts_unavailable: w.interrupts_unavailable.clone(),
        unavailable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattson_collectors::idle::wakeups::{InterruptRate, ProcessRate};

    fn process(pid: u32, comm: &str, group: &str, per_s: f64) -> ProcessRate {
        ProcessRate {
            pid,
            comm: comm.into(),
            group: group.into(),
            per_s,
        }
    }

    #[test]
    fn services_processes_and_interrupts_are_ranked_with_their_shares() {
        let w = Wakeups {
            seconds: 5.0,
            processes: vec![
                process(1, "php-fpm", "service:php.service", 100.0),
                process(2, "php-fpm", "service:php.service", 100.0),
                process(3, "nginx", "service:php.service", 50.0),
                process(4, "jellyfin", "service:jellyfin.service", 700.0),
                process(5, "kworker/0:1", "cgroup:/", 50.0),
                process(6, "sleepy", "service:cron.service", 0.0),
            ],
            threads: 9,
            truncated: false,
            interrupts: vec![
                InterruptRate {
                    irq: "LOC".into(),
                    kernel: true,
                    name: "Local timer interrupts".into(),
                    per_s: 900.0,
                },
                InterruptRate {
                    irq: "122".into(),
                    kernel: false,
                    name: "nvme0q1".into(),
                    per_s: 100.0,
                },
                InterruptRate {
                    irq: "ERR".into(),
                    kernel: true,
                    name: String::new(),
                    per_s: 0.0,
                },
            ],
            interrupts_unavailable: None,
        };
        let v = rank(&w, 2, "t".into(), "i".into());
        assert!((v.task_wakeups_per_s - 1000.0).abs() < 1e-9);
        let services: Vec<(&str, f64)> = v
            .by_service
            .iter()
            .map(|g| (g.group.as_str(), g.share))
            .collect();
        assert_eq!(
            services,
            [
                ("service:jellyfin.service", 0.7),
                ("service:php.service", 0.25)
            ]
        );
        assert_eq!(v.by_service[1].processes, ["php-fpm", "nginx"]);
        let p = &v.by_process[1];
        assert_eq!((p.comm.as_str(), p.pids, p.per_s), ("php-fpm", 2, 200.0));
        assert!((p.share - 0.2).abs() < 1e-12);
        assert_eq!(v.by_process.len(), 2);
        assert_eq!(v.interrupts.len(), 2);
        assert_eq!(v.interrupts[0].irq, "LOC");
        assert!((v.interrupts[1].share - 0.1).abs() < 1e-12);
        // Nothing woke: no shares to divide by zero.
        let quiet = Wakeups {
            processes: vec![process(6, "sleepy", "service:cron.service", 0.0)],
            interrupts: Vec::new(),
            ..w
        };
        let v = rank(&quiet, 10, "t".into(), "i".into());
        assert!(v.by_service.is_empty() && v.by_process.is_empty() && v.interrupts.is_empty());
    }
}
