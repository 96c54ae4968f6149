//! Package C-state residency through the kernel's perf PMUs, where the residency MSRs cannot
//! be read: `cstate_pkg` (arch/x86/events/intel/cstate.c: events `c2-residency` ..
//! `c10-residency`, counting at the TSC's rate, one counter per package) against the `msr`
//! PMU's `tsc` event (arch/x86/events/msr.c). Both are described in sysfs, under the injected
//! root: `bus/event_source/devices/<pmu>/type` (the perf type number),
//! `events/<name>` (`event=0x02`) and, for `cstate_pkg`, `cpumask` (one CPU per package).
//!
//! The counters are opened once, system-wide on that CPU, and each read is one 8-byte
//! `read(2)` per counter, so the self-cost is a few syscalls per package per tick. Opening
//! and reading go through [`PerfCounters`]: [`PerfEventOpen`] is the real `perf_event_open(2)`,
//! tests inject their own counters.

use std::io::Read as _;
use std::path::PathBuf;

use super::cpu_model::PcState;
use crate::sysroot::SysRoot;

/// Where the package C-state PMU appears in sysfs.
pub const CSTATE_PKG_PMU: &str = "bus/event_source/devices/cstate_pkg";
/// Where the PMU with the TSC event appears in sysfs.
pub const MSR_PMU: &str = "bus/event_source/devices/msr";

/// One package C-state event of `cstate_pkg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmuEvent {
    /// `c6-residency`.
    pub name: String,
    pub state: PcState,
    /// The event's `config` (from `event=0xNN`).
    pub config: u64,
}

/// The PMUs found in sysfs: what to open, and on which CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CstatePmu {
    /// The `cstate_pkg` directory, for messages.
    pub dir: PathBuf,
    /// `cstate_pkg`'s perf type.
    pub pmu_type: u32,
    /// Shallowest first.
    pub events: Vec<PmuEvent>,
    /// One CPU per package (`cpumask`); empty when the file is absent.
    pub cpus: Vec<usize>,
    /// The `msr` PMU's type and its `tsc` event's config.
    pub tsc: (u32, u64),
}

impl CstatePmu {
    /// `c2-residency, c6-residency, ...`.
    pub fn event_names(&self) -> String {
        self.events
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why the package C-state counters cannot be read through the perf PMUs.
#[derive(Debug, thiserror::Error)]
pub enum PmuError {
    #[error("reading {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} holds {text:?}, not a perf type number", path.display())]
    Type { path: PathBuf, text: String },
    #[error(
        "the kernel exposes no cstate_pkg perf PMU ({} is absent: a kernel without \
         CONFIG_PERF_EVENTS_INTEL_CSTATE, or a CPU it does not know)",
        dir.display()
    )]
    NoPmu { dir: PathBuf },
    #[error("{} lists no c*-residency events", events.display())]
    NoEvents { events: PathBuf },
    #[error(
        "cstate_pkg counts at the TSC's rate, and the msr perf PMU's tsc event to divide by is \
         absent ({})",
        path.display()
    )]
    NoTsc { path: PathBuf },
    /// `event` (`cstate_pkg/c6-residency`, `msr/tsc`) could not be opened on `cpu`; `dir` is
    /// the `cstate_pkg` PMU's.
    #[error(
        "opening the perf event {event} ({}) on CPU {cpu}: {error}{}",
        dir.display(),
        open_hint(error)
    )]
    Open {
        event: String,
        dir: PathBuf,
        cpu: usize,
        error: std::io::Error,
    },
    #[error("the perf counters opened but cannot be read ({})", dir.display())]
    Unreadable { dir: PathBuf },
}

/// What to do where opening a counter was refused.
fn open_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => {
            ": system-wide perf counters need CAP_PERFMON (or CAP_SYS_ADMIN), or \
             kernel.perf_event_paranoid at 0 or below"
        }
        _ => "",
    }
}

fn read_trimmed(path: &std::path::Path) -> Result<String, PmuError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|error| PmuError::Read {
            path: path.to_owned(),
            error,
        })
}

/// `event=0x02` (with other `key=value` terms after commas) -> 2.
fn event_config(text: &str) -> Option<u64> {
    text.split(',').find_map(|term| {
        let v = term.trim().strip_prefix("event=")?;
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

fn read_pmu_type(dir: &std::path::Path) -> Result<u32, PmuError> {
    let path = dir.join("type");
    let text = read_trimmed(&path)?;
    text.parse().map_err(|_| PmuError::Type { path, text })
}

/// Find `cstate_pkg` and the `msr` PMU's `tsc` under `root`; `Err` says what is missing.
pub fn detect(root: &SysRoot) -> Result<CstatePmu, PmuError> {
    let dir = root.sys_path(CSTATE_PKG_PMU);
    if !dir.exists() {
        return Err(PmuError::NoPmu { dir });
    }
    let pmu_type = read_pmu_type(&dir)?;
    let mut events: Vec<PmuEvent> = std::fs::read_dir(dir.join("events"))
        .map_err(|error| PmuError::Read {
            path: dir.join("events"),
            error,
        })?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let depth = name.strip_prefix('c')?.strip_suffix("-residency")?;
            let state = PcState::parse(&format!("PC{depth}"))?;
            let config = event_config(&std::fs::read_to_string(entry.path()).ok()?)?;
            Some(PmuEvent {
                name,
                state,
                config,
            })
        })
        .collect();
    if events.is_empty() {
        return Err(PmuError::NoEvents {
            events: dir.join("events"),
        });
    }
    events.sort_by_key(|e| e.state);
    let cpus = std::fs::read_to_string(dir.join("cpumask"))
        .ok()
        .and_then(|t| crate::cpu::topology::parse_cpu_list(t.trim()))
        .unwrap_or_default();
    let msr = root.sys_path(MSR_PMU);
    let tsc = read_trimmed(&msr.join("events/tsc"))
        .ok()
        .and_then(|t| event_config(&t))
        .ok_or_else(|| PmuError::NoTsc {
            path: msr.join("events/tsc"),
        })?;
    Ok(CstatePmu {
        dir,
        pmu_type,
        events,
        cpus,
        tsc: (read_pmu_type(&msr)?, tsc),
    })
}

/// One opened counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterId(pub usize);

/// Opens perf counters once and reads them per sample. The real one is [`PerfEventOpen`].
pub trait PerfCounters: std::fmt::Debug + Send {
    /// Open event `config` of PMU type `pmu_type`, counting system-wide on `cpu`.
    fn open(&mut self, pmu_type: u32, config: u64, cpu: usize) -> std::io::Result<CounterId>;
    /// The counter's value now.
    fn read(&mut self, id: CounterId) -> std::io::Result<u64>;
}

/// `perf_event_open(2)`: one file per counter, read 8 bytes at a time.
#[derive(Debug, Default)]
pub struct PerfEventOpen {
    files: Vec<std::fs::File>,
}

/// `struct perf_event_attr` up to its first published size (`PERF_ATTR_SIZE_VER0`, 64
/// bytes), which every kernel accepts; everything after `config` is zero: counting (no
/// sampling), no read format, enabled at open.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// `PERF_FLAG_FD_CLOEXEC` (include/uapi/linux/perf_event.h).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

impl PerfCounters for PerfEventOpen {
    #[allow(unsafe_code)]
    fn open(&mut self, pmu_type: u32, config: u64, cpu: usize) -> std::io::Result<CounterId> {
        use std::os::fd::FromRawFd as _;
        let attr = PerfEventAttr {
            type_: pmu_type,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            ..PerfEventAttr::default()
        };
        let cpu = libc::c_int::try_from(cpu)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: `attr` is a live, initialised perf_event_attr of the size it declares; the
        // kernel only reads it. pid -1 with cpu >= 0 counts every task on that CPU; group -1
        // opens no group.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &raw const attr,
                -1 as libc::pid_t,
                cpu,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = std::os::fd::RawFd::try_from(fd)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
        // SAFETY: the kernel just returned `fd`, open and owned by nobody else.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        self.files.push(file);
        Ok(CounterId(self.files.len() - 1))
    }

    fn read(&mut self, id: CounterId) -> std::io::Result<u64> {
        let mut buf = [0u8; 8];
        let file = self
            .files
            .get(id.0)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
        (&*file).read_exact(&mut buf)?;
        Ok(u64::from_ne_bytes(buf))
    }
}

/// Why opening the counter `event` on `cpu` failed.
pub fn open_error(pmu: &CstatePmu, event: &str, cpu: usize, error: std::io::Error) -> PmuError {
    PmuError::Open {
        event: event.to_owned(),
        dir: pmu.dir.clone(),
        cpu,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_terms_parse() {
        assert_eq!(event_config("event=0x02\n"), Some(2));
        assert_eq!(event_config("event=0x00"), Some(0));
        assert_eq!(event_config("umask=0x1,event=16"), Some(16));
        assert_eq!(event_config("config=3"), None);
    }

    #[test]
    fn the_attr_is_the_first_published_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 64);
    }
}
