//! Which CPUs the loops run on, and pinning a thread to one: `sched_getaffinity(2)` and
//! `sched_setaffinity(2)` through nix. CPUs are the kernel's logical CPU numbers.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The logical CPUs this process may run on (its affinity mask, which a cpuset or
/// `taskset` may narrow), ascending. `None` when the kernel will not say.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    let set = sched_getaffinity(Pid::this()).ok()?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect();
    (!cpus.is_empty()).then_some(cpus)
}

/// The order in which a sweep adds loops: level n runs on the first n CPUs of the result.
///
/// `preferred` is the topology's order (physical cores first, then SMT siblings) when the
/// caller has one. The result keeps that order, drops duplicates and CPUs outside this
/// process's affinity mask, then appends allowed CPUs it did not name, ascending. Without a
/// preferred order it is the affinity mask ascending, or `0..available_parallelism` when the
/// mask cannot be read.
pub fn cpu_order(preferred: Option<&[usize]>) -> Vec<usize> {
    let parallelism = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    order_cpus(preferred, allowed_cpus().as_deref(), parallelism)
}

/// [`cpu_order`] with the machine's answers passed in: `allowed` is the affinity mask (if
/// known) and `parallelism` the CPU count to fall back on.
pub fn order_cpus(
    preferred: Option<&[usize]>,
    allowed: Option<&[usize]>,
    parallelism: usize,
) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let is_allowed = |cpu: usize| allowed.is_none_or(|a| a.contains(&cpu));
    for &cpu in preferred.unwrap_or(&[]) {
        if is_allowed(cpu) && !out.contains(&cpu) {
            out.push(cpu);
        }
    }
    let rest: Vec<usize> = match allowed {
        Some(a) => {
            let mut a = a.to_vec();
            a.sort_unstable();
            a
        }
        None if preferred.is_some() => Vec::new(),
        None => (0..parallelism.max(1)).collect(),
    };
    for cpu in rest {
        if !out.contains(&cpu) {
            out.push(cpu);
        }
    }
    out
}

/// Pins the calling thread to `cpu`. The error is the kernel's (or nix's, for a CPU number
/// past `CpuSet::count()`), for the caller to log; an unpinned loop still runs.
pub(super) fn pin_current_thread(cpu: usize) -> nix::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)?;
    // Pid 0 is the calling thread, not the whole process.
    sched_setaffinity(Pid::from_raw(0), &set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferred_order_is_kept_and_completed() {
        // Topology order for 2 cores x 2 threads: cores 0 and 1, then siblings 2 and 3.
        let got = order_cpus(Some(&[0, 2, 1, 3]), Some(&[0, 1, 2, 3]), 4);
        assert_eq!(got, vec![0, 2, 1, 3]);
        let got = order_cpus(Some(&[3, 1]), Some(&[0, 1, 2, 3]), 4);
        assert_eq!(got, vec![3, 1, 0, 2]);
    }

    #[test]
    fn cpus_outside_the_mask_and_duplicates_are_dropped() {
        // A cpuset of CPUs 2-3 on a 4-CPU box.
        let got = order_cpus(Some(&[0, 2, 2, 1, 3]), Some(&[3, 2]), 4);
        assert_eq!(got, vec![2, 3]);
    }

    #[test]
    fn fallbacks_without_a_preferred_order() {
        assert_eq!(order_cpus(None, Some(&[5, 1, 3]), 8), vec![1, 3, 5]);
        assert_eq!(order_cpus(None, None, 3), vec![0, 1, 2]);
        assert_eq!(order_cpus(None, None, 0), vec![0]);
        assert_eq!(order_cpus(Some(&[4, 4, 6]), None, 2), vec![4, 6]);
    }

    #[test]
    fn this_machine_gives_some_order() {
        // Only shape is asserted: the machine's real mask is not a fixture.
        let order = cpu_order(None);
        assert!(!order.is_empty());
        let mut dedup = order.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(dedup.len(), order.len());
    }

    #[test]
    fn pinning_past_the_cpu_set_fails_cleanly() {
        assert!(pin_current_thread(usize::MAX).is_err());
    }
}
