//! Package C-state residency (PC2 .. PC10) from Intel's residency MSRs, read as
//! `<devfs>/cpu/N/msr` at the MSR's offset (Documentation/arch/x86/msr... the `msr` module,
//! `modprobe msr`, root with CAP_SYS_RAWIO), against the TSC as turbostat does: each state's
//! share of an interval is `delta(PCn) / delta(TSC)`, 0..1. Where the MSRs cannot be read,
//! the same counters through the kernel's `cstate_pkg` perf PMU ([`super::perf`]), opened once
//! and read per tick.
//!
//! One CPU per package is read (the package's counters are the same from any of its CPUs),
//! through one open file and a fixed 8-byte buffer: a handful of `pread`s (or perf `read`s)
//! per package per tick.
//!
//! The msr driver's character device answers 8 bytes at offset = MSR number, so adjacent
//! MSRs (PC3 0x3F8, PC6 0x3F9) overlap as byte ranges. A regular file cannot hold them that
//! way, so a regular file in place of the device (a fixture tree, a saved capture) is read as
//! an array of little-endian u64 indexed by MSR number: offset = 8 x MSR. Where neither the
//! MSRs nor the PMU can be read, [`PackageUnavailable`] says why for both, and what the
//! machine has instead: a virtual machine (the package is the host's), an AMD CPU (AMD
//! documents no package residency counters), a model outside turbostat's table and unknown to
//! the kernel's PMU, no `msr` module, no root, no CAP_PERFMON.
//!
//! Finding the counters is in `discover`; reading them per tick is here.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use super::cpu_model::{IntelPlatform, MSR_TSC, PackageLimit, PcState};
pub use super::perf::CSTATE_PKG_PMU;
use super::perf::{CounterId, PerfCounters};
use crate::CollectError;

mod discover;
pub use discover::PackageUnavailable;

/// `EIO`: what the msr driver answers for an MSR the CPU does not have.
const EIO: i32 = 5;

#[derive(Debug, Clone, Copy)]
struct Counters {
    tsc: u64,
    /// Parallel to [`PackageReader::states`]; `None` where the read failed.
    states: [Option<u64>; 7],
}

/// Where one package's counters are read.
#[derive(Debug)]
enum Counter {
    /// The msr device (or a file standing in for it).
    Msr(Msr),
    /// Perf counters opened on the package's CPU: the TSC, then each state.
    Perf {
        tsc: CounterId,
        states: Vec<CounterId>,
    },
}

#[derive(Debug)]
struct Package {
    /// `physical_package_id`.
    id: u32,
    /// The CPU whose counters are read.
    cpu: usize,
    /// The msr file, or the PMU's sysfs directory.
    path: PathBuf,
    counter: Counter,
    prev: Option<Counters>,
    /// `packageN/<state>`, parallel to the reader's states.
    channels: Vec<String>,
}

/// Reads the package C-state counters of every package, once per call.
#[derive(Debug)]
pub struct PackageReader {
    platform: IntelPlatform,
    /// The perf counters, when the PMU is read instead of the MSRs.
    perf: Option<(Box<dyn PerfCounters>, String)>,
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
    #[allow(
        clippy::disallowed_methods,
        reason = "a sysfs or msr device file: never a database"
    )]
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

/// One package's counters now: the TSC (an error fails the package this time) and each of
/// `msrs`' states (`None` where that read failed).
fn read_counters(
    counter: &Counter,
    perf: Option<&mut Box<dyn PerfCounters>>,
    buf: &mut [u8; 8],
    msrs: &[u64],
    states: usize,
) -> std::io::Result<Counters> {
    let mut now = Counters {
        tsc: 0,
        states: [None; 7],
    };
    match (counter, perf) {
        (Counter::Msr(file), _) => {
            now.tsc = read_msr(file, buf, MSR_TSC)?;
            for (i, &msr) in msrs.iter().take(states).enumerate() {
                now.states[i] = read_msr(file, buf, msr).ok();
            }
        }
        (Counter::Perf { tsc, states: ids }, Some(perf)) => {
            now.tsc = perf.read(*tsc)?;
            for (i, id) in ids.iter().take(states).enumerate() {
                now.states[i] = perf.read(*id).ok();
            }
        }
        (Counter::Perf { .. }, None) => {
            return Err(std::io::Error::from(std::io::ErrorKind::NotConnected));
        }
    }
    Ok(now)
}

impl PackageReader {
    /// First reading of every counter; drops the states whose MSR answers EIO.
    fn prime(&mut self) {
        if let Some((perf, _)) = &mut self.perf {
            for p in &mut self.packages {
                p.prev = read_counters(
                    &p.counter,
                    Some(perf),
                    &mut self.buf,
                    &[],
                    self.platform.states.len(),
                )
                .ok();
            }
            return;
        }
        let mut absent = vec![false; self.platform.states.len()];
        for p in &mut self.packages {
            let Counter::Msr(file) = &p.counter else {
                continue;
            };
            let mut c = Counters {
                tsc: read_msr(file, &mut self.buf, MSR_TSC).unwrap_or(0),
                states: [None; 7],
            };
            for (i, &msr) in self.platform.msrs.iter().enumerate() {
                match read_msr(file, &mut self.buf, msr) {
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

    /// Where the counters are read, in words: the msr files, or the perf PMU and its CPUs.
    pub fn source(&self) -> String {
        if let Some((_, source)) = &self.perf {
            return source.clone();
        }
        let files: Vec<String> = self
            .packages
            .iter()
            .map(|p| p.path.display().to_string())
            .collect();
        format!("the residency MSRs in {}", files.join(", "))
    }

    /// The msr files read (one per package), or the perf PMU's directory per package.
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
        let n_states = self.platform.states.len();
        for p in &mut self.packages {
            let now = match read_counters(
                &p.counter,
                self.perf.as_mut().map(|(perf, _)| perf),
                &mut self.buf,
                &self.platform.msrs,
                n_states,
            ) {
                Ok(c) => c,
                Err(e) => {
                    first_error.get_or_insert(CollectError::io(&p.path, e));
                    p.prev = None;
                    continue;
                }
            };
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
mod tests;
