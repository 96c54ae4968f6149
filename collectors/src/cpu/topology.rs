//! CPU topology from sysfs `devices/system/cpu` (Documentation/ABI/stable/sysfs-devices-system-cpu,
//! Documentation/admin-guide/cputopology.rst) and host facts for configuration fingerprints.
//!
//! CPU lists use the kernel's range-list format (`0-3,8-11`). Identifiers are plain numbers.

use std::collections::BTreeSet;
use std::path::Path;

use crate::CollectError;
use crate::sysroot::{SysRoot, read_trimmed};

/// Relative path of the CPU directory under the sysfs root.
pub(crate) const CPU_DIR: &str = "devices/system/cpu";

/// Parse a kernel CPU list such as `0-3,8-11` (empty text is an empty list).
///
/// Returns `None` on anything malformed (a reversed range, a non-number).
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let lo: usize = lo.trim().parse().ok()?;
                let hi: usize = hi.trim().parse().ok()?;
                if hi < lo {
                    return None;
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Where one logical CPU sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlace {
    /// Logical CPU number (the `N` in `cpuN`).
    pub cpu: usize,
    /// `topology/core_id`, unique within a package; `None` where sysfs lacks it.
    pub core_id: Option<u32>,
    /// `topology/physical_package_id`; `None` where missing or -1.
    pub package_id: Option<u32>,
    /// `topology/thread_siblings_list`: the logical CPUs sharing this core, itself included.
    pub thread_siblings: Vec<usize>,
}

/// The online CPUs and where each one sits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    /// Sorted by logical CPU number.
    pub cpus: Vec<CpuPlace>,
}

impl Topology {
    /// Logical CPU numbers, sorted.
    pub fn online(&self) -> Vec<usize> {
        self.cpus.iter().map(|c| c.cpu).collect()
    }

    /// Distinct physical cores (package, core) among the online CPUs.
    pub fn physical_cores(&self) -> usize {
        self.cpus
            .iter()
            .map(core_key)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Distinct physical packages (sockets) among the online CPUs.
    pub fn packages(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| c.package_id)
            .collect::<BTreeSet<_>>()
            .len()
    }
}

/// A CPU's physical core; a CPU without `core_id` counts as a core of its own.
fn core_key(c: &CpuPlace) -> (Option<u32>, Result<u32, usize>) {
    (c.package_id, c.core_id.ok_or(c.cpu))
}

/// The online CPUs, from `devices/system/cpu/online`; where that file is missing (some
/// containers), the `cpuN` directories.
pub fn online_cpus(root: &SysRoot) -> Result<Vec<usize>, CollectError> {
    let path = root.sys_path(CPU_DIR).join("online");
    match read_trimmed(&path) {
        Ok(text) => parse_cpu_list(&text)
            .ok_or_else(|| CollectError::parse(&path, format!("{text:?} is not a CPU list"))),
        Err(CollectError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            cpu_dirs(&root.sys_path(CPU_DIR))
        }
        Err(e) => Err(e),
    }
}

fn cpu_dirs(dir: &Path) -> Result<Vec<usize>, CollectError> {
    let entries = std::fs::read_dir(dir).map_err(|e| CollectError::io(dir, e))?;
    let mut cpus: Vec<usize> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok()) // kernel name
        .collect();
    cpus.sort_unstable();
    Ok(cpus)
}

/// Read the topology of the online CPUs. Missing per-CPU topology files give `None`s.
pub fn read_topology(root: &SysRoot) -> Result<Topology, CollectError> {
    let base = root.sys_path(CPU_DIR);
    let cpus = online_cpus(root)?
        .into_iter()
        .map(|cpu| {
            let dir = base.join(format!("cpu{cpu}/topology"));
            let num = |name: &str| {
                read_trimmed(&dir.join(name))
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .and_then(|v| u32::try_from(v).ok())
            };
            let thread_siblings = read_trimmed(&dir.join("thread_siblings_list"))
                .ok()
                .and_then(|t| parse_cpu_list(&t))
                .unwrap_or_else(|| vec![cpu]);
            CpuPlace {
                cpu,
                core_id: num("core_id"),
                package_id: num("physical_package_id"),
                thread_siblings,
            }
        })
        .collect();
    Ok(Topology { cpus })
}

/// The order in which to pin workload threads: one CPU per physical core first (the lowest
/// numbered thread of each core, cores in CPU order), then the remaining SMT siblings.
pub fn pin_order(topology: &Topology) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for place in &topology.cpus {
        if seen.insert(core_key(place)) {
            first.push(place.cpu);
        } else {
            rest.push(place.cpu);
        }
    }
    first.extend(rest);
    first
}

/// Facts about the host's CPUs that go into a configuration fingerprint.
/// Each `Option` is `None` where the interface is missing (no cpufreq in most VMs).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CpuFacts {
    /// `model name` from `/proc/cpuinfo`.
    pub model_name: Option<String>,
    /// Online logical CPUs.
    pub logical_cpus: usize,
    pub physical_cores: usize,
    pub packages: usize,
    /// `cpufreq/scaling_driver`, e.g. `intel_pstate`, `acpi-cpufreq`, `amd-pstate-epp`.
    pub cpufreq_driver: Option<String>,
    /// `cpufreq/scaling_governor`, e.g. `powersave`, `schedutil`.
    pub governor: Option<String>,
    /// `cpufreq/energy_performance_preference` (`intel_pstate` and `amd-pstate` active mode).
    pub energy_performance_preference: Option<String>,
    /// `cpuidle/current_driver`, e.g. `intel_idle`, `acpi_idle`, `haltpoll`.
    pub cpuidle_driver: Option<String>,
    /// `cpuidle/current_governor` (or `current_governor_ro`), e.g. `menu`, `teo`.
    pub cpuidle_governor: Option<String>,
    /// Idle state names of the first online CPU, in state order.
    pub idle_states: Vec<String>,
}

/// Gather [`CpuFacts`]. Never fails: what cannot be read is `None` or empty.
pub fn cpu_facts(root: &SysRoot) -> CpuFacts {
    let base = root.sys_path(CPU_DIR);
    let topology = read_topology(root).unwrap_or_default();
    let first = topology.cpus.first().map_or(0, |c| c.cpu);
    let read = |rel: &str| read_trimmed(&base.join(rel)).ok().filter(|s| !s.is_empty());
    let cpufreq = |name: &str| read(&format!("cpu{first}/cpufreq/{name}"));
    let model_name = std::fs::read_to_string(root.proc_path("cpuinfo"))
        .ok()
        .and_then(|text| {
            text.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == "model name")
                .map(|(_, v)| v.trim().to_owned())
        });
    let idle_states = super::cpuidle::state_dirs(&base.join(format!("cpu{first}/cpuidle")))
        .into_iter()
        .filter_map(|(_, dir)| read_trimmed(&dir.join("name")).ok())
        .collect();
    CpuFacts {
        model_name,
        logical_cpus: topology.cpus.len(),
        physical_cores: topology.physical_cores(),
        packages: topology.packages(),
        cpufreq_driver: cpufreq("scaling_driver"),
        governor: cpufreq("scaling_governor"),
        energy_performance_preference: cpufreq("energy_performance_preference"),
        cpuidle_driver: read("cpuidle/current_driver"),
        cpuidle_governor: read("cpuidle/current_governor")
            .or_else(|| read("cpuidle/current_governor_ro")),
        idle_states,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_ranges_and_singles() {
        assert_eq!(
            parse_cpu_list("0-3,8-11\n"),
            Some(vec![0, 1, 2, 3, 8, 9, 10, 11])
        );
        assert_eq!(parse_cpu_list("0,4"), Some(vec![0, 4]));
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a-b"), None);
    }

    fn place(cpu: usize, package: u32, core: u32) -> CpuPlace {
        CpuPlace {
            cpu,
            core_id: Some(core),
            package_id: Some(package),
            thread_siblings: vec![cpu],
        }
    }

    #[test]
    fn pin_order_puts_one_thread_per_core_first() {
        // Intel numbering: siblings are N and N+4.
        let t = Topology {
            cpus: (0..8).map(|c| place(c, 0, (c % 4) as u32)).collect(),
        };
        assert_eq!(pin_order(&t), vec![0, 1, 2, 3, 4, 5, 6, 7]);
        // Siblings adjacent (0,1 share a core), two packages reusing core ids.
        let t = Topology {
            cpus: vec![
                place(0, 0, 0),
                place(1, 0, 0),
                place(2, 1, 0),
                place(3, 1, 0),
            ],
        };
        assert_eq!(pin_order(&t), vec![0, 2, 1, 3]);
        assert_eq!(t.physical_cores(), 2);
        assert_eq!(t.packages(), 2);
    }
}
