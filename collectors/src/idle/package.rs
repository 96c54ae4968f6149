//! Package C-state residency (PC2 .. PC10) from Intel's residency MSRs, read as
//! `<devfs>/cpu/N/msr` at the MSR's offset (Documentation/arch/x86/msr... the `msr` module,
//! `modprobe msr`, root with CAP_SYS_RAWIO), against the TSC as turbostat does: each state's
//! share of an interval is `delta(PCn) / delta(TSC)`, 0..1.
//!
//! One CPU per package is read (the package's counters are the same from any of its CPUs),
//! through one open file and a fixed 8-byte buffer: a handful of `pread`s per package per
//! tick.
//!
//! The msr driver's character device answers 8 bytes at offset = MSR number, so adjacent
//! MSRs (PC3 0x3F8, PC6 0x3F9) overlap as byte ranges. A regular file cannot hold them that
//! way, so a regular file in place of the device (a fixture tree, a saved capture) is read as
//! an array of little-endian u64 indexed by MSR number: offset = 8 x MSR. Where the MSRs cannot be read, [`PackageUnavailable`] says why and what the machine
//! has instead: a virtual machine (the package is the host's), an AMD CPU (AMD documents no
//! package residency counters), a model outside turbostat's table, no `msr` module, no root.
//! The kernel's `cstate_pkg` perf PMU exposes the same counters, but reading it needs
//! `perf_event_open` (one system-wide event per state and package, `CAP_PERFMON`); wattson
//! does not open perf events, and says so when that PMU is present.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::cpu_model::{
    CpuIdentity, IntelPlatform, MSR_PKG_CST_CONFIG_CONTROL, MSR_TSC, PackageLimit, PcState, Vendor,
    intel_platform, read_opt,
};
use crate::CollectError;
use crate::cpu::topology::read_topology;
use crate::sysroot::SysRoot;

/// `EIO`: what the msr driver answers for an MSR the CPU does not have.
const EIO: i32 = 5;

/// Where the perf PMU with the same counters appears in sysfs.
pub const CSTATE_PKG_PMU: &str = "bus/event_source/devices/cstate_pkg";

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

#[derive(Debug, Clone, Copy)]
struct Counters {
    tsc: u64,
    /// Parallel to [`PackageReader::states`]; `None` where the read failed.
    states: [Option<u64>; 7],
}

#[derive(Debug)]
struct Package {
    /// `physical_package_id`.
    id: u32,
    /// The CPU whose msr file is read.
    cpu: usize,
    path: PathBuf,
    file: Msr,
    prev: Option<Counters>,
    /// `packageN/<state>`, parallel to the reader's states.
    channels: Vec<String>,
}

/// Reads the package C-state counters of every package, once per call.
#[derive(Debug)]
pub struct PackageReader {
    platform: IntelPlatform,
    packages: Vec<Package>,
    /// `all/<state>`, parallel to `platform.states`.
    all_channels: Vec<String>,
    sums: Vec<(f64, u32)>,
    limit: Option<PackageLimit>,
    buf: [u8; 8],
}

/// An open msr device (or a regular file standing in for one).
#[derive(Debug)]
struct Msr {
    file: File,
    /// Bytes per MSR number: 1 for the driver's device, 8 for a regular file.
    stride: u64,
}

impl Msr {
    fn open(path: &Path) -> std::io::Result<Msr> {
        use std::os::unix::fs::FileTypeExt as _;
        let file = File::open(path)?;
        let device = file.metadata()?.file_type().is_char_device();
        Ok(Msr {
            file,
            stride: if device { 1 } else { 8 },
        })
    }
}

/// Read one MSR: 8 bytes, little-endian (see the module doc for the offset).
fn read_msr(msr_file: &Msr, buf: &mut [u8; 8], msr: u64) -> std::io::Result<u64> {
    msr_file.file.read_exact_at(buf, msr * msr_file.stride)?;
    Ok(u64::from_le_bytes(*buf))
}

/// The perf PMU's event names, when the kernel exposes `cstate_pkg`.
fn cstate_pkg_events(root: &SysRoot) -> Option<Vec<String>> {
    let dir = root.sys_path(CSTATE_PKG_PMU).join("events");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with("-residency"))
        .collect();
    names.sort();
    Some(names)
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
    if let Some(events) = cstate_pkg_events(root) {
        has.push(format!(
            "the kernel's cstate_pkg perf PMU ({}), which wattson does not read: it needs \
             perf_event_open with CAP_PERFMON",
            if events.is_empty() {
                "no residency events".to_owned()
            } else {
                events.join(", ")
            }
        ));
    }
    has
}

impl PackageReader {
    /// Find the package counters of this machine: `root` for cpuinfo, topology and sysfs,
    /// `dev` for `cpu/N/msr`. Reads every counter once, so the first [`PackageReader::read`]
    /// already has an interval.
    pub fn discover(root: &SysRoot, dev: &Path) -> Result<PackageReader, PackageUnavailable> {
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
        let platform = match id.vendor {
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
            Vendor::Intel => match (id.family, id.model.and_then(intel_platform)) {
                (Some(6), Some(p)) => p,
                _ => {
                    return Err(unavailable(format!(
                        "{}: not in turbostat's table of Intel models with package C-state \
                         counters, so wattson does not guess which MSRs it has",
                        id.describe()
                    )));
                }
            },
        };
        let topology = read_topology(root).map_err(|e| {
            unavailable(format!(
                "reading the CPU topology: {}",
                crate::ErrorChain(&e)
            ))
        })?;
        let mut first: Vec<(u32, usize)> = Vec::new();
        for place in &topology.cpus {
            let pkg = place.package_id.unwrap_or(0);
            if !first.iter().any(|(p, _)| *p == pkg) {
                first.push((pkg, place.cpu));
            }
        }
        if first.is_empty() {
            return Err(unavailable("no online CPUs listed".to_owned()));
        }
        let many = first.len() > 1;
        let mut packages = Vec::new();
        for (pkg, cpu) in first {
            let path = dev.join(format!("cpu/{cpu}/msr"));
            let file = Msr::open(&path).map_err(|e| {
                unavailable(match e.kind() {
                    std::io::ErrorKind::NotFound => format!(
                        "no {}: the msr module is not loaded (`modprobe msr`, or \
                         `echo msr > /etc/modules-load.d/msr.conf` to keep it)",
                        path.display()
                    ),
                    std::io::ErrorKind::PermissionDenied => format!(
                        "{} needs root (the msr driver asks for CAP_SYS_RAWIO): run `sudo \
                         wattson idle`; the installed service lacks that capability unless a \
                         drop-in grants it (README: Why is idle high?)",
                        path.display()
                    ),
                    _ => format!("opening {}: {e}", path.display()),
                })
            })?;
            packages.push(Package {
                id: pkg,
                cpu,
                channels: platform
                    .states
                    .iter()
                    .map(|s| {
                        if many {
                            format!("package{pkg}/{}", s.name())
                        } else {
                            String::new()
                        }
                    })
                    .collect(),
                path,
                file,
                prev: None,
            });
        }
        let mut reader = PackageReader {
            all_channels: platform
                .states
                .iter()
                .map(|s| crate::source::channel::all(s.name()))
                .collect(),
            sums: vec![(0.0, 0); platform.states.len()],
            platform,
            packages,
            limit: None,
            buf: [0; 8],
        };
        // The TSC must be readable, or no share can be computed.
        for p in &reader.packages {
            if let Err(e) = read_msr(&p.file, &mut reader.buf, MSR_TSC) {
                return Err(unavailable(format!(
                    "reading the TSC (MSR 0x10) from {}: {e}",
                    p.path.display()
                )));
            }
        }
        let states_before = reader.platform.states.len();
        reader.prime();
        if reader.platform.states.is_empty() && states_before > 0 {
            return Err(unavailable(format!(
                "every package residency MSR of this {} CPU answered EIO: the firmware hides \
                 them",
                reader.platform.platform
            )));
        }
        reader.limit = reader.packages.first().and_then(|p| {
            let raw = read_msr(&p.file, &mut [0; 8], MSR_PKG_CST_CONFIG_CONTROL).ok()?;
            reader.platform.limit.decode(raw)
        });
        Ok(reader)
    }

    /// First reading of every counter; drops the states whose MSR answers EIO.
    fn prime(&mut self) {
        let mut absent = vec![false; self.platform.states.len()];
        for p in &mut self.packages {
            let mut c = Counters {
                tsc: read_msr(&p.file, &mut self.buf, MSR_TSC).unwrap_or(0),
                states: [None; 7],
            };
            for (i, &msr) in self.platform.msrs.iter().enumerate() {
                match read_msr(&p.file, &mut self.buf, msr) {
                    Ok(v) => c.states[i] = Some(v),
                    Err(e)
                        if e.raw_os_error() == Some(EIO)
                            || e.kind() == std::io::ErrorKind::UnexpectedEof =>
                    {
                        absent[i] = true;
                    }
                    Err(_) => {}
                }
            }
            p.prev = Some(c);
        }
        if absent.iter().any(|a| *a) {
            let keep: Vec<usize> = (0..absent.len()).filter(|&i| !absent[i]).collect();
            let dropped: Vec<&str> = (0..absent.len())
                .filter(|&i| absent[i])
                .map(|i| self.platform.states[i].name())
                .collect();
            tracing::info!(
                "package C-states {} have no counter here (EIO): not read",
                dropped.join(", ")
            );
            self.platform.msrs = keep.iter().map(|&i| self.platform.msrs[i]).collect();
            self.platform.states = keep.iter().map(|&i| self.platform.states[i]).collect();
            self.all_channels = keep.iter().map(|&i| self.all_channels[i].clone()).collect();
            self.sums.truncate(keep.len());
            for p in &mut self.packages {
                p.channels = keep.iter().map(|&i| p.channels[i].clone()).collect();
                if let Some(c) = &mut p.prev {
                    let old = c.states;
                    c.states = [None; 7];
                    for (j, &i) in keep.iter().enumerate() {
                        c.states[j] = old[i];
                    }
                }
            }
        }
    }

    /// The package C-states read, shallowest first.
    pub fn states(&self) -> &[PcState] {
        &self.platform.states
    }

    /// turbostat's name of this CPU's feature set (`adl`, `skl`, ...).
    pub fn platform(&self) -> &'static str {
        self.platform.platform
    }

    /// The firmware's package C-state limit, where the model's encoding is known.
    pub fn limit(&self) -> Option<&PackageLimit> {
        self.limit.as_ref()
    }

    /// The msr files read, one per package.
    pub fn files(&self) -> Vec<(u32, usize, &Path)> {
        self.packages
            .iter()
            .map(|p| (p.id, p.cpu, p.path.as_path()))
            .collect()
    }

    /// Read every package's counters; emit `(channel, share)` for `packageN/<state>` (only
    /// with several packages) and then `all/<state>`, the mean over packages. A package whose
    /// TSC did not advance, or whose read failed, is skipped this time.
    pub fn read(&mut self, mut emit: impl FnMut(&str, f64)) -> Result<(), CollectError> {
        for s in &mut self.sums {
            *s = (0.0, 0);
        }
        let mut first_error = None;
        for p in &mut self.packages {
            let tsc = match read_msr(&p.file, &mut self.buf, MSR_TSC) {
                Ok(v) => v,
                Err(e) => {
                    first_error.get_or_insert(CollectError::io(&p.path, e));
                    p.prev = None;
                    continue;
                }
            };
            let mut now = Counters {
                tsc,
                states: [None; 7],
            };
            for (i, &msr) in self.platform.msrs.iter().enumerate() {
                now.states[i] = read_msr(&p.file, &mut self.buf, msr).ok();
            }
            let prev = p.prev.replace(now);
            let Some(prev) = prev else { continue };
            let dt = now.tsc.wrapping_sub(prev.tsc);
            if dt == 0 {
                continue;
            }
            for i in 0..self.platform.states.len() {
                let (Some(a), Some(b)) = (prev.states[i], now.states[i]) else {
                    continue;
                };
                let share = (b.wrapping_sub(a) as f64 / dt as f64).clamp(0.0, 1.0);
                if !p.channels[i].is_empty() {
                    emit(&p.channels[i], share);
                }
                self.sums[i].0 += share;
                self.sums[i].1 += 1;
            }
        }
        for (channel, (sum, n)) in self.all_channels.iter().zip(&self.sums) {
            if *n > 0 {
                emit(channel, sum / f64::from(*n));
            }
        }
        match first_error {
            Some(e) if self.sums.iter().all(|(_, n)| *n == 0) => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::channel;

    fn write_msr(path: &Path, values: &[(u64, u64)]) {
        use std::os::unix::fs::FileExt as _;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(path)
            .unwrap();
        for &(msr, v) in values {
            f.write_all_at(&v.to_le_bytes(), msr * 8).unwrap();
        }
    }

    fn tree(cpuinfo: &str, packages: &[u32]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/cpuinfo"), cpuinfo).unwrap();
        let cpus = dir.path().join("sys/devices/system/cpu");
        std::fs::create_dir_all(&cpus).unwrap();
        std::fs::write(
            cpus.join("online"),
            format!("0-{}\n", packages.len().saturating_sub(1)),
        )
        .unwrap();
        for (cpu, pkg) in packages.iter().enumerate() {
            let t = cpus.join(format!("cpu{cpu}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), format!("{pkg}\n")).unwrap();
            std::fs::write(t.join("core_id"), format!("{cpu}\n")).unwrap();
            std::fs::create_dir_all(dir.path().join(format!("dev/cpu/{cpu}"))).unwrap();
        }
        dir
    }

    const ADL: &str = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 151\nmodel name\t: i3-12100\nflags\t: fpu msr\n";

    #[test]
    fn shares_are_counter_deltas_over_the_tsc_delta_per_package_and_overall() {
        let dir = tree(ADL, &[0, 1]);
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let dev = dir.path().join("dev");
        for cpu in [0, 1] {
            write_msr(
                &dev.join(format!("cpu/{cpu}/msr")),
                &[
                    (0x10, 1000),
                    (0x60D, 0),
                    (0x3F9, 0),
                    (0x632, 0),
                    (0xE2, 0x8002),
                ],
            );
        }
        let mut r = PackageReader::discover(&root, &dev).unwrap();
        assert_eq!(r.states().len(), 5);
        assert_eq!(r.limit().unwrap().label, "PC3");
        // Package 0: 10 % PC2, 60 % PC10 of 1e6 TSC ticks; package 1: all PC6.
        write_msr(
            &dev.join("cpu/0/msr"),
            &[(0x10, 1_001_000), (0x60D, 100_000), (0x632, 600_000)],
        );
        write_msr(
            &dev.join("cpu/1/msr"),
            &[(0x10, 1_001_000), (0x3F9, 1_000_000)],
        );
        let mut got = std::collections::BTreeMap::new();
        r.read(|c, v| {
            got.insert(c.to_owned(), v);
        })
        .unwrap();
        assert_eq!(got["package0/PC2"], 0.1);
        assert_eq!(got["package0/PC10"], 0.6);
        assert_eq!(got["package1/PC6"], 1.0);
        assert_eq!(got[channel::all("PC6").as_str()], 0.5);
        assert_eq!(got[channel::all("PC10").as_str()], 0.3);
        assert!(
            !got.contains_key(channel::all("PC7").as_str()),
            "ADL has no PC7: {got:?}"
        );
    }

    #[test]
    fn one_package_emits_only_the_all_channels_and_a_tsc_that_stood_still_emits_nothing() {
        let dir = tree(ADL, &[0]);
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let dev = dir.path().join("dev");
        write_msr(&dev.join("cpu/0/msr"), &[(0x10, 5), (0x632, 0)]);
        let mut r = PackageReader::discover(&root, &dev).unwrap();
        let mut n = 0;
        r.read(|_, _| n += 1).unwrap();
        assert_eq!(n, 0);
        write_msr(&dev.join("cpu/0/msr"), &[(0x10, 105), (0x632, 50)]);
        let mut got = Vec::new();
        r.read(|c, v| got.push((c.to_owned(), v))).unwrap();
        assert!(
            got.iter().all(|(c, _)| channel::all_part(c).is_some()),
            "{got:?}"
        );
        assert!(got.contains(&(channel::all("PC10"), 0.5)), "{got:?}");
    }

    #[test]
    fn each_unavailable_case_says_why() {
        let amd = tree(
            "vendor_id : AuthenticAMD\nmodel name : AMD EPYC 7252\n",
            &[0],
        );
        let err = PackageReader::discover(
            &SysRoot::new(amd.path().join("sys"), amd.path().join("proc")),
            &amd.path().join("dev"),
        )
        .unwrap_err();
        assert!(err.reason.contains("AMD documents no package"), "{err}");

        let vm = tree(
            &format!("{ADL}flags : fpu hypervisor\n").replace("flags\t: fpu msr\n", ""),
            &[0],
        );
        let err = PackageReader::discover(
            &SysRoot::new(vm.path().join("sys"), vm.path().join("proc")),
            &vm.path().join("dev"),
        )
        .unwrap_err();
        assert!(err.reason.contains("virtual machine"), "{err}");

        let no_msr = tree(ADL, &[0]);
        std::fs::create_dir_all(
            no_msr
                .path()
                .join("sys")
                .join(CSTATE_PKG_PMU)
                .join("events"),
        )
        .unwrap();
        std::fs::write(
            no_msr
                .path()
                .join("sys")
                .join(CSTATE_PKG_PMU)
                .join("events/c6-residency"),
            "event=0x02\n",
        )
        .unwrap();
        let err = PackageReader::discover(
            &SysRoot::new(no_msr.path().join("sys"), no_msr.path().join("proc")),
            &no_msr.path().join("dev"),
        )
        .unwrap_err();
        assert!(err.reason.contains("modprobe msr"), "{err}");
        assert!(err.to_string().contains("c6-residency"), "{err}");

        let odd = tree(
            "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 1\nmodel name : Pentium Pro\n",
            &[0],
        );
        let err = PackageReader::discover(
            &SysRoot::new(odd.path().join("sys"), odd.path().join("proc")),
            &odd.path().join("dev"),
        )
        .unwrap_err();
        assert!(err.reason.contains("turbostat's table"), "{err}");
    }
}
