//! Finding a machine's package C-state counters: its CPU (no virtual machine, an Intel
//! model), the first CPU of each package, then the residency MSRs or, failing them, the
//! `cstate_pkg` perf PMU; where neither can be read, why, and what the machine has instead.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Counter, Msr, Package, PackageReader, read_msr};
use crate::cpu::topology::read_topology;
use crate::idle::cpu_model::{
    CpuIdentity, IntelPlatform, LimitEncoding, MSR_PKG_CST_CONFIG_CONTROL, MSR_TSC, PcState,
    Vendor, intel_platform, read_opt,
};
use crate::idle::perf::{CstatePmu, PerfCounters, PerfEventOpen, PmuError};
use crate::sysroot::SysRoot;

/// Why package C-states cannot be read here, and what the machine offers instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageUnavailable {
    /// One sentence: why, and what to do where something can be done.
    pub reason: String,
    /// What this machine does have (core idle states, RAPL, the perf PMU), in words.
    pub has: Vec<String>,
}

impl std::fmt::Display for PackageUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)?;
        if !self.has.is_empty() {
            write!(f, "; this machine has: {}", self.has.join("; "))?;
        }
        Ok(())
    }
}

/// Why the package residency MSRs cannot be read.
#[derive(Debug, thiserror::Error)]
enum MsrError {
    /// `cpu` (as [`CpuIdentity::describe`] says it) is not in the table.
    #[error(
        "{cpu}: not in turbostat's table of Intel models with package C-state counters, so \
         wattson does not guess which MSRs it has"
    )]
    NotInTable { cpu: String },
    #[error(
        "no {}: the msr module is not loaded (`modprobe msr`, or \
         `echo msr > /etc/modules-load.d/msr.conf` to keep it)",
        path.display()
    )]
    NoModule { path: PathBuf },
    #[error(
        "{} needs root (the msr driver asks for CAP_SYS_RAWIO): run `sudo \
         wattson idle`; the installed service lacks that capability unless a \
         drop-in grants it (see docs/idle.md)",
        path.display()
    )]
    NeedsRoot { path: PathBuf },
    #[error("opening {}: {error}", path.display())]
    Open {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("reading the TSC (MSR 0x10) from {}: {error}", path.display())]
    Tsc {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "every package residency MSR of this {platform} CPU answered EIO: the firmware hides \
         them"
    )]
    Hidden { platform: &'static str },
}

impl PackageReader {
    /// Find the package counters of this machine: `root` for cpuinfo, topology and sysfs,
    /// `dev` for `cpu/N/msr`; where the MSRs cannot be read, the `cstate_pkg` perf PMU through
    /// `perf_event_open(2)`. Reads every counter once, so the first [`PackageReader::read`]
    /// already has an interval.
    pub fn discover(root: &SysRoot, dev: &Path) -> Result<PackageReader, PackageUnavailable> {
        Self::discover_with(root, dev, Box::new(PerfEventOpen::default()))
    }

    /// As [`PackageReader::discover`], opening the PMU's counters through `perf`.
    pub fn discover_with(
        root: &SysRoot,
        dev: &Path,
        perf: Box<dyn PerfCounters>,
    ) -> Result<PackageReader, PackageUnavailable> {
        let unavailable = |reason: String| PackageUnavailable {
            reason,
            has: alternatives(root),
        };
        let id = CpuIdentity::read(root).map_err(|e| {
            unavailable(format!(
                "cannot tell which CPU this is: {}",
                crate::ErrorChain(&e)
            ))
        })?;
        if id.hypervisor {
            return Err(unavailable(format!(
                "a virtual machine ({}, cpuinfo flag `hypervisor`): the package and its C-states \
                 belong to the host, so only the host can read them; run wattson on the host",
                id.describe()
            )));
        }
        match id.vendor {
            Vendor::Amd | Vendor::Hygon => {
                return Err(unavailable(format!(
                    "{}: AMD documents no package C-state residency counters (turbostat shows none \
                     on AMD either), so the deepest package state cannot be measured; the core \
                     states and the wall meter are what there is",
                    id.describe()
                )));
            }
            Vendor::Other(ref v) => {
                return Err(unavailable(format!(
                    "vendor {v:?} ({}): wattson knows package counters only on Intel CPUs",
                    id.describe()
                )));
            }
            Vendor::Intel => {}
        }
        let table = match (id.family, id.model.and_then(intel_platform)) {
            (Some(6), Some(p)) => Some(p),
            _ => None,
        };
        let topology = read_topology(root).map_err(|e| {
            unavailable(format!(
                "reading the CPU topology: {}",
                crate::ErrorChain(&e)
            ))
        })?;
        let places: Vec<(u32, usize)> = topology
            .cpus
            .iter()
            .map(|p| (p.package_id.unwrap_or(0), p.cpu))
            .collect();
        let mut first: Vec<(u32, usize)> = Vec::new();
        for &(pkg, cpu) in &places {
            if !first.iter().any(|(p, _)| *p == pkg) {
                first.push((pkg, cpu));
            }
        }
        if first.is_empty() {
            return Err(unavailable("no online CPUs listed".to_owned()));
        }
        let msr_why = match &table {
            Some(platform) => match Self::open_msrs(platform.clone(), &first, dev) {
                Ok(reader) => return Ok(reader),
                Err(why) => why,
            },
            None => MsrError::NotInTable { cpu: id.describe() },
        };
        match Self::open_pmu(root, table, &first, &places, perf) {
            Ok(reader) => {
                tracing::info!("package C-states through the perf PMU: {msr_why}");
                Ok(reader)
            }
            Err(pmu_why) => Err(unavailable(format!(
                "the residency MSRs cannot be read ({msr_why}), nor the perf PMU that has the \
                 same counters ({pmu_why})"
            ))),
        }
    }

    fn new(
        platform: IntelPlatform,
        packages: Vec<Package>,
        perf: Option<(Box<dyn PerfCounters>, String)>,
    ) -> PackageReader {
        PackageReader {
            all_channels: platform
                .states
                .iter()
                .map(|s| crate::source::channel::all(s.name()))
                .collect(),
            sums: vec![(0.0, 0); platform.states.len()],
            platform,
            perf,
            packages,
            limit: None,
            buf: [0; 8],
        }
    }

    /// The residency MSRs of `platform`, read from the first CPU of each package.
    fn open_msrs(
        platform: IntelPlatform,
        first: &[(u32, usize)],
        dev: &Path,
    ) -> Result<PackageReader, MsrError> {
        let many = first.len() > 1;
        let mut packages = Vec::new();
        for &(pkg, cpu) in first {
            let path = dev.join(format!("cpu/{cpu}/msr"));
            let file = Msr::open(&path).map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => MsrError::NoModule { path: path.clone() },
                std::io::ErrorKind::PermissionDenied => MsrError::NeedsRoot { path: path.clone() },
                _ => MsrError::Open {
                    path: path.clone(),
                    error,
                },
            })?;
            packages.push(Package {
                id: pkg,
                cpu,
                channels: package_channels(&platform.states, pkg, many),
                path,
                counter: Counter::Msr(file),
                prev: None,
            });
        }
        let mut reader = PackageReader::new(platform, packages, None);
        // The TSC must be readable, or no share can be computed.
        for p in &reader.packages {
            if let Counter::Msr(file) = &p.counter
                && let Err(error) = read_msr(file, &mut reader.buf, MSR_TSC)
            {
                return Err(MsrError::Tsc {
                    path: p.path.clone(),
                    error,
                });
            }
        }
        let states_before = reader.platform.states.len();
        reader.prime();
        if reader.platform.states.is_empty() && states_before > 0 {
            return Err(MsrError::Hidden {
                platform: reader.platform.platform,
            });
        }
        reader.limit = reader.packages.first().and_then(|p| {
            let Counter::Msr(file) = &p.counter else {
                return None;
            };
            let raw = read_msr(file, &mut [0; 8], MSR_PKG_CST_CONFIG_CONTROL).ok()?;
            reader.platform.limit.decode(raw)
        });
        Ok(reader)
    }

    /// The `cstate_pkg` PMU's counters (and the `msr` PMU's TSC), opened once through `perf`
    /// on the PMU's CPU of each package (its `cpumask`, else the package's first CPU).
    fn open_pmu(
        root: &SysRoot,
        table: Option<IntelPlatform>,
        first: &[(u32, usize)],
        places: &[(u32, usize)],
        mut perf: Box<dyn PerfCounters>,
    ) -> Result<PackageReader, PmuError> {
        let pmu: CstatePmu = crate::idle::perf::detect(root)?;
        let platform = IntelPlatform {
            platform: table.as_ref().map_or("intel", |t| t.platform),
            states: pmu.events.iter().map(|e| e.state).collect(),
            msrs: Vec::new(),
            limit: table.map_or(LimitEncoding::Unknown, |t| t.limit),
        };
        let many = first.len() > 1;
        let mut packages = Vec::new();
        for &(pkg, first_cpu) in first {
            let cpu = pmu
                .cpus
                .iter()
                .copied()
                .find(|c| places.contains(&(pkg, *c)))
                .unwrap_or(first_cpu);
            let mut states = Vec::with_capacity(pmu.events.len());
            for ev in &pmu.events {
                states.push(perf.open(pmu.pmu_type, ev.config, cpu).map_err(|e| {
                    crate::idle::perf::open_error(&pmu, &format!("cstate_pkg/{}", ev.name), cpu, e)
                })?);
            }
            let tsc = perf
                .open(pmu.tsc.0, pmu.tsc.1, cpu)
                .map_err(|e| crate::idle::perf::open_error(&pmu, "msr/tsc", cpu, e))?;
            packages.push(Package {
                id: pkg,
                cpu,
                channels: package_channels(&platform.states, pkg, many),
                path: pmu.dir.clone(),
                counter: Counter::Perf { tsc, states },
                prev: None,
            });
        }
        let cpus: Vec<String> = packages.iter().map(|p| p.cpu.to_string()).collect();
        let source = format!(
            "the kernel's cstate_pkg perf PMU ({}) on CPU {}",
            pmu.event_names(),
            cpus.join(", ")
        );
        let mut reader = PackageReader::new(platform, packages, Some((perf, source)));
        reader.prime();
        if reader.packages.iter().all(|p| p.prev.is_none()) {
            return Err(PmuError::Unreadable { dir: pmu.dir });
        }
        Ok(reader)
    }
}

/// What a machine without readable package counters has, in words.
fn alternatives(root: &SysRoot) -> Vec<String> {
    let mut has = Vec::new();
    let cpu = root.sys_path("devices/system/cpu");
    let states: Vec<String> = crate::cpu::cpuidle::state_dirs(&cpu.join("cpu0/cpuidle"))
        .into_iter()
        .filter_map(|(_, d)| read_opt(&d.join("name")))
        .collect();
    let driver = read_opt(&cpu.join("cpuidle/current_driver"));
    if states.is_empty() {
        has.push("no core idle states either (no cpuidle driver)".to_owned());
    } else {
        has.push(format!(
            "core idle states {} from cpuidle ({}), stored as idle_residency",
            states.join(", "),
            driver.as_deref().unwrap_or("unknown driver")
        ));
    }
    let rapl = root.sys_path("class/powercap/intel-rapl:0");
    if rapl.exists() {
        has.push("package energy from RAPL (powercap intel-rapl:0)".to_owned());
    }
    has
}

/// `packageN/<state>` for each state with several packages; empty strings with one (only
/// the `all/<state>` channels are emitted then).
fn package_channels(states: &[PcState], pkg: u32, many: bool) -> Vec<String> {
    states
        .iter()
        .map(|s| {
            if many {
                format!("package{pkg}/{}", s.name())
            } else {
                String::new()
            }
        })
        .collect()
}
