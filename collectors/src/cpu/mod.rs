//! CPU telemetry from sysfs and procfs: per-core frequency (MHz), idle-state residency and
//! utilisation (shares of the interval), and the host facts that fingerprint a configuration.
//!
//! [`CpuCollector`] resolves every path once, keeps sysfs handles open and reuses one read
//! buffer, because it runs every second for years and its own CPU time shows on the meter.
//! Each part (frequency, cpuidle, stat) that the machine lacks is logged once and skipped.

pub mod cpuidle;
pub mod freq;
pub mod stat;
pub mod topology;

use crate::SourceId;
use crate::source::channel;
use std::time::Duration;

use crate::idle::{PackageReader, PackageUnavailable};
use crate::sysroot::{SysFile, SysRoot};
use crate::{CollectError, Collector, Metric, Sample};

pub use topology::{CpuFacts, CpuPlace, Topology, cpu_facts, pin_order, read_topology};

use cpuidle::IdleReader;
use freq::FreqReader;
use stat::{StatError, StatReader};

/// Source name of every sample this collector emits.
const SOURCE: SourceId = SourceId::Cpu;
/// Walk the cpuidle tree again this often (polls), to notice states enabled or disabled.
const REDISCOVER_EVERY: u64 = 300;
/// Files held open between polls at least may number this many (the usual soft limit of
/// open files is 1024).
const MIN_KEPT_OPEN: usize = 512;

/// Above this many files per poll, open them per read rather than hold descriptors: half the
/// process's open-file limit (the rest is for the database, sockets and HTTP connections),
/// at least [`MIN_KEPT_OPEN`]. The daemon raises its soft limit towards the hard one at
/// start ([`raise_open_file_limit`]), so a 128-CPU machine's 1,400 files stay open too.
fn max_kept_open() -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    getrlimit(Resource::RLIMIT_NOFILE)
        .map_or(MIN_KEPT_OPEN, |(soft, _)| {
            usize::try_from(soft / 2).unwrap_or(usize::MAX)
        })
        .max(MIN_KEPT_OPEN)
}

/// What is said of a frequency that is the nominal constant
/// ([`CpuCollector::frequency_is_nominal`]).
pub const NOMINAL_FREQUENCY: &str = "nominal, not measured: no cpufreq and no APERF/MPERF \
     counters (cpuinfo flag aperfmperf), so /proc/cpuinfo's cpu MHz is the kernel's constant";

/// The most the daemon raises its soft open-file limit to.
const OPEN_FILES_WANTED: u64 = 65_536;

/// Raise this process's soft limit of open files towards its hard limit (at most
/// 65,536), as systemd's documentation asks of programs that need more than 1024 (its
/// default soft limit, kept low for `select()`; wattson uses none). Returns the soft limit
/// now.
pub fn raise_open_file_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    let wanted = hard.min(OPEN_FILES_WANTED);
    if wanted > soft && setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).is_ok() {
        return Some(wanted);
    }
    Some(soft)
}

pub use crate::MonotonicClock;

/// Knobs for [`CpuCollector::with_options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuOptions {
    /// Emit [`Metric::CpuTime`] per CPU (`cpuN/<field>`) too: ten more samples per CPU per
    /// poll. Default off.
    pub per_cpu_times: bool,
    /// Hold sysfs/procfs files open between polls (one `pread` per file per poll instead of
    /// open/read/close). Default on; it turns itself off above ~500 files.
    pub keep_files_open: bool,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            per_cpu_times: false,
            keep_files_open: true,
        }
    }
}

/// Why a part of the CPU collector does not work here.
#[derive(Debug, thiserror::Error)]
pub enum PartUnavailable {
    /// The topology lists no online CPU.
    #[error("no online CPUs listed")]
    NoCpus,
    /// The topology cannot be read.
    #[error("{0}")]
    Topology(CollectError),
    #[error("{0}")]
    Frequency(freq::FreqError),
    #[error("{0}")]
    Cpuidle(cpuidle::CpuidleError),
    #[error("{0}")]
    Stat(StatError),
    #[error("{0}")]
    Package(PackageUnavailable),
}

enum Part<T> {
    /// Not looked for yet.
    Untried,
    Ready(T),
    Unavailable(PartUnavailable),
}

impl<T> Part<T> {
    fn from_result(part: &str, r: Result<T, PartUnavailable>) -> Self {
        match r {
            Ok(t) => Part::Ready(t),
            Err(why) => {
                // The daemon logs each part's status once (from `CpuCollector::availability`); a short
                // command such as `status` keeps its stderr for what went wrong.
                tracing::debug!("cpu {part} unavailable: {why}");
                Part::Unavailable(why)
            }
        }
    }

    fn status(&self) -> Result<(), &PartUnavailable> {
        match self {
            Part::Ready(_) | Part::Untried => Ok(()),
            Part::Unavailable(why) => Err(why),
        }
    }
}

/// Polls frequency, idle residency and utilisation of the online CPUs.
///
/// Samples (source `cpu`):
/// - [`Metric::CoreFrequency`] (MHz), channels `cpuN` and `mean`, every poll;
/// - [`Metric::IdleResidency`] (share), channels `cpuN/<state>` and `all/<state>`;
/// - [`Metric::CpuBusy`] (share), channels `all` and `cpuN`;
/// - [`Metric::CpuTime`] (share), channels `all/<field>` (and `cpuN/<field>` when enabled);
/// - [`Metric::PackageResidency`] (share), channels `all/PCn` (and `packageN/PCn` with
///   several packages), with [`CpuCollector::with_devfs`].
///
/// The first poll has no interval yet and emits only frequencies.
pub struct CpuCollector {
    root: SysRoot,
    clock: MonotonicClock,
    online_file: Option<SysFile>,
    online_text: Vec<u8>,
    cpus: Vec<usize>,
    topology: Result<(), PartUnavailable>,
    freq: Part<FreqReader>,
    idle: Part<IdleReader>,
    stat: Part<StatReader>,
    /// Package C-states from the residency MSRs; `None` until [`CpuCollector::with_devfs`].
    package: Option<Part<PackageReader>>,
    per_cpu_times: bool,
    keep_files_open: bool,
    freq_channels: Vec<String>,
    buf: Vec<u8>,
    last_clock: Option<Duration>,
    polls: u64,
}

impl std::fmt::Debug for CpuCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuCollector")
            .field("root", &self.root)
            .field("cpus", &self.cpus)
            .field("availability", &self.availability())
            .finish_non_exhaustive()
    }
}

impl CpuCollector {
    /// Discover the CPUs under `root`, timing intervals with `std::time::Instant`.
    pub fn new(root: SysRoot) -> CpuCollector {
        Self::with_clock(root, crate::monotonic_clock())
    }

    /// Discover the CPUs under `root`, timing intervals with `clock` (tests step it by hand).
    pub fn with_clock(root: SysRoot, clock: MonotonicClock) -> CpuCollector {
        Self::with_options(root, clock, CpuOptions::default())
    }

    /// Discover the CPUs under `root` with explicit [`CpuOptions`].
    pub fn with_options(root: SysRoot, clock: MonotonicClock, options: CpuOptions) -> CpuCollector {
        let online_path = root.sys_path(topology::CPU_DIR).join("online");
        let mut online_file = online_path
            .is_file()
            .then(|| SysFile::new(online_path, true));
        let mut online_text = Vec::new();
        if let Some(f) = &mut online_file
            && f.read(&mut online_text).is_err()
        {
            online_file = None;
        }
        let (cpus, topology) = match topology::online_cpus(&root) {
            Ok(cpus) if !cpus.is_empty() => (cpus, Ok(())),
            Ok(_) => (Vec::new(), Err(PartUnavailable::NoCpus)),
            Err(e) => (Vec::new(), Err(PartUnavailable::Topology(e))),
        };
        if let Err(why) = &topology {
            tracing::info!("cpu topology unavailable: {why}");
        }
        let stat = Part::from_result(
            "stat",
            StatReader::new(&root, options.keep_files_open).map_err(PartUnavailable::Stat),
        );
        let mut collector = CpuCollector {
            root,
            clock,
            online_file,
            online_text,
            cpus,
            topology,
            freq: Part::Untried,
            idle: Part::Untried,
            stat,
            package: None,
            per_cpu_times: options.per_cpu_times,
            keep_files_open: options.keep_files_open,
            freq_channels: Vec::new(),
            buf: Vec::with_capacity(4096),
            last_clock: None,
            polls: 0,
        };
        collector.build_cpu_parts();
        collector
    }

    /// Also emit [`Metric::CpuTime`] per CPU (`cpuN/<field>`): ten more samples per CPU per
    /// poll, so off by default.
    #[must_use]
    pub fn with_per_cpu_times(mut self, on: bool) -> Self {
        self.per_cpu_times = on;
        self
    }

    /// Also read package C-state residency ([`Metric::PackageResidency`]) from the residency
    /// MSRs under `dev` (`<dev>/cpu/N/msr`, one CPU per package). Where they cannot be read
    /// the part is unavailable, with why and what the machine has instead.
    #[must_use]
    pub fn with_devfs(mut self, dev: impl AsRef<std::path::Path>) -> Self {
        self.package = Some(match PackageReader::discover(&self.root, dev.as_ref()) {
            Ok(r) => Part::Ready(r),
            Err(why) => Part::from_result("package C-states", Err(PartUnavailable::Package(why))),
        });
        self
    }

    /// Each part and whether it works here: `("frequency", Err(why))` where it does not.
    /// Parts: `topology`, `frequency`, `cpuidle`, `stat`, and `package C-states` once
    /// [`CpuCollector::with_devfs`] asked for them.
    /// Whether the per-core frequency is the nominal constant of `/proc/cpuinfo` (no cpufreq
    /// and no APERF/MPERF counters: most virtual machines), not a measurement.
    pub fn frequency_is_nominal(&self) -> bool {
        matches!(&self.freq, Part::Ready(r) if r.is_nominal())
    }

    pub fn availability(&self) -> Vec<(&'static str, Result<(), &PartUnavailable>)> {
        let mut parts = vec![
            ("topology", self.topology.as_ref().map(|&()| ())),
            ("frequency", self.freq.status()),
            ("cpuidle", self.idle.status()),
            ("stat", self.stat.status()),
        ];
        if let Some(p) = &self.package {
            parts.push(("package C-states", p.status()));
        }
        parts
    }

    /// The online CPUs being read.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    fn keep_open(&self) -> bool {
        // Rough count of per-poll files: one frequency and up to ten idle states per CPU.
        self.keep_files_open && self.cpus.len() * 11 <= max_kept_open()
    }

    fn build_cpu_parts(&mut self) {
        let keep_open = self.keep_open();
        self.freq = match FreqReader::new(&self.root, &self.cpus, keep_open) {
            Ok(r) => Part::Ready(r),
            Err(why) => {
                let why = PartUnavailable::Frequency(why);
                // Said once: not again after a hotplug that changed nothing about it.
                if matches!(&self.freq, Part::Unavailable(old) if old.to_string() == why.to_string())
                {
                    Part::Unavailable(why)
                } else {
                    Part::from_result("frequency", Err(why))
                }
            }
        };
        self.freq_channels = self.cpus.iter().map(|&c| channel::cpu(c)).collect();
        self.idle = match &mut self.idle {
            Part::Ready(reader) => {
                reader.rediscover(&self.cpus);
                return;
            }
            Part::Unavailable(_) => return,
            Part::Untried => Part::from_result(
                "cpuidle",
                IdleReader::discover(&self.root, &self.cpus, keep_open)
                    .map_err(PartUnavailable::Cpuidle),
            ),
        };
    }

    /// Re-read `online`; on a change (CPU hotplug) resolve the per-CPU parts again.
    fn check_hotplug(&mut self) {
        let Some(file) = &mut self.online_file else {
            return;
        };
        if file.read(&mut self.buf).is_err() || self.buf == self.online_text {
            return;
        }
        let Some(cpus) = topology::parse_cpu_list(&String::from_utf8_lossy(&self.buf)) else {
            return;
        };
        tracing::info!("cpu online set changed: {:?} -> {:?}", self.cpus, cpus);
        std::mem::swap(&mut self.online_text, &mut self.buf);
        self.cpus = cpus;
        self.build_cpu_parts();
    }
}

impl Collector for CpuCollector {
    fn source(&self) -> &SourceId {
        &SOURCE
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let now = (self.clock)();
        let elapsed_us = self
            .last_clock
            .replace(now)
            .and_then(|prev| now.checked_sub(prev))
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        self.polls += 1;
        let mut out = Vec::with_capacity(self.cpus.len() * 10 + 24);
        let sample =
            |metric, channel: &str, value| Sample::new(now_ms, SOURCE, metric, channel, value);

        // `/proc/stat` first: it lists the online CPUs only, so a hotplug shows there and
        // `online` is read again (and the per-CPU parts below follow it) in this same poll.
        let mut lists_online = false;
        if let Part::Ready(stat) = &mut self.stat {
            let result = stat.read(
                &mut self.buf,
                self.per_cpu_times,
                |metric, channel, share| {
                    out.push(sample(metric, channel, share));
                },
            );
            lists_online = result.is_ok() && stat.lists(&self.cpus);
            if let Err(e) = result {
                if e.action() == crate::Action::Stop {
                    tracing::info!("cpu stat unavailable: {e}");
                    self.stat = Part::Unavailable(PartUnavailable::Stat(StatError::Read(e)));
                } else {
                    tracing::debug!("cpu stat: {e}");
                }
            }
        }
        if !lists_online {
            self.check_hotplug();
        }

        if let Part::Ready(freq) = &mut self.freq {
            let (mut sum, mut n) = (0.0, 0u32);
            let channels = &self.freq_channels;
            let cpus = &self.cpus;
            let result = freq.read(&mut self.buf, |cpu, mhz| {
                if let Ok(i) = cpus.binary_search(&cpu) {
                    out.push(sample(Metric::CoreFrequency, &channels[i], mhz));
                    sum += mhz;
                    n += 1;
                }
            });
            if n > 0 {
                out.push(sample(
                    Metric::CoreFrequency,
                    channel::MEAN,
                    sum / f64::from(n),
                ));
            }
            if let Err(e) = result {
                tracing::debug!("cpu frequency: {e}");
            }
        }

        if let Part::Ready(idle) = &mut self.idle {
            let stale = idle.read(&mut self.buf, elapsed_us, |channel, share| {
                out.push(sample(Metric::IdleResidency, channel, share));
            });
            if stale || self.polls.is_multiple_of(REDISCOVER_EVERY) {
                idle.rediscover(&self.cpus);
            }
        }

        if let Some(Part::Ready(package)) = &mut self.package {
            let result = package.read(|channel, share| {
                out.push(sample(Metric::PackageResidency, channel, share));
            });
            if let Err(e) = result {
                tracing::debug!("package C-states: {e}");
            }
        }

        if out.is_empty() && self.availability().iter().all(|(_, s)| s.is_err()) {
            let detail = self
                .availability()
                .into_iter()
                .filter_map(|(part, s)| s.err().map(|why| format!("{part}: {why}")))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(CollectError::Unavailable {
                source_name: SOURCE.to_string(),
                detail,
            });
        }
        Ok(out)
    }
}
