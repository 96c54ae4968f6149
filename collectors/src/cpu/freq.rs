//! Per-core frequency: cpufreq `cpuN/cpufreq/scaling_cur_freq` in kHz
//! (Documentation/admin-guide/pm/cpufreq.rst), falling back to the `cpu MHz` lines of
//! `/proc/cpuinfo` where a CPU has no cpufreq policy (most virtual machines).
//! Values come out in MHz.
//!
//! x86's `cpu MHz` is measured (from the APERF/MPERF counters the kernel samples on its
//! tick) only where the CPU has them, flag `aperfmperf`; elsewhere the kernel prints the
//! nominal `cpu_khz`, a constant (`arch_freq_get_on_cpu` in arch/x86/kernel/cpu/aperfmperf.c).
//! Such a constant is read once, not every poll: a read of `/proc/cpuinfo` formats every
//! CPU's block of flags, the costliest file the sampler would read each second.

use std::path::PathBuf;

use crate::CollectError;
use crate::sysroot::{SysFile, SysRoot};

use super::topology::CPU_DIR;

/// Why no CPU has a frequency to read.
#[derive(Debug, thiserror::Error)]
pub enum FreqError {
    #[error("no online CPUs to read")]
    NoCpus,
    /// No CPU has cpufreq, and `/proc/cpuinfo` cannot be read.
    #[error("no cpufreq scaling_cur_freq and {0}")]
    Cpuinfo(CollectError),
    #[error(
        "no cpufreq scaling_cur_freq under {} and no 'cpu MHz' in {}",
        cpu_dir.display(),
        cpuinfo.display()
    )]
    NoSource { cpu_dir: PathBuf, cpuinfo: PathBuf },
}

/// Reads the current frequency of a fixed set of CPUs, paths resolved once.
#[derive(Debug)]
pub struct FreqReader {
    /// CPUs with a cpufreq policy, and their `scaling_cur_freq` file.
    cpufreq: Vec<(usize, SysFile)>,
    /// CPUs without one, read from `/proc/cpuinfo`.
    cpuinfo_cpus: Vec<usize>,
    cpuinfo: Option<SysFile>,
    /// The `cpu MHz` read at start where it is the nominal constant (no `aperfmperf`).
    nominal: Option<Vec<(usize, f64)>>,
}

impl FreqReader {
    /// Resolve where each CPU's frequency comes from. `Err` says why no CPU has a source.
    pub fn new(root: &SysRoot, cpus: &[usize], keep_open: bool) -> Result<FreqReader, FreqError> {
        let base = root.sys_path(CPU_DIR);
        if cpus.is_empty() {
            return Err(FreqError::NoCpus);
        }
        let mut cpufreq = Vec::new();
        let mut cpuinfo_cpus = Vec::new();
        for &cpu in cpus {
            let path = base.join(format!("cpu{cpu}/cpufreq/scaling_cur_freq"));
            if path.is_file() {
                cpufreq.push((cpu, SysFile::new(path, keep_open)));
            } else {
                cpuinfo_cpus.push(cpu);
            }
        }
        let mut cpuinfo = None;
        let mut nominal = None;
        if !cpuinfo_cpus.is_empty() {
            let mut file = SysFile::new(root.proc_path("cpuinfo"), keep_open);
            let mut buf = Vec::new();
            let mut found = Vec::new();
            match file.read(&mut buf) {
                Ok(()) => {
                    let text = String::from_utf8_lossy(&buf);
                    parse_cpuinfo_mhz(&text, |cpu, mhz| {
                        if cpuinfo_cpus.binary_search(&cpu).is_ok() {
                            found.push((cpu, mhz));
                        }
                    });
                    if mhz_is_nominal(&text) && !found.is_empty() {
                        nominal = Some(found.clone());
                    }
                }
                Err(e) if cpufreq.is_empty() => return Err(FreqError::Cpuinfo(e)),
                Err(_) => {}
            }
            if found.is_empty() {
                if cpufreq.is_empty() {
                    return Err(FreqError::NoSource {
                        cpu_dir: base,
                        cpuinfo: file.path().to_owned(),
                    });
                }
            } else if nominal.is_none() {
                cpuinfo = Some(file);
            }
        }
        Ok(FreqReader {
            cpufreq,
            cpuinfo_cpus,
            cpuinfo,
            nominal,
        })
    }

    /// Whether any CPU is read through cpufreq (rather than `/proc/cpuinfo`).
    pub fn uses_cpufreq(&self) -> bool {
        !self.cpufreq.is_empty()
    }

    /// Whether the CPUs without cpufreq show the nominal frequency, read once at start.
    pub fn is_nominal(&self) -> bool {
        self.nominal.is_some()
    }

    /// Read every CPU's frequency, calling `emit(cpu, mhz)`, in CPU order per source.
    /// A CPU whose file fails is skipped; the first error is returned after the rest are read.
    pub fn read(
        &mut self,
        buf: &mut Vec<u8>,
        mut emit: impl FnMut(usize, f64),
    ) -> Result<(), CollectError> {
        let mut first_err = None;
        for (cpu, file) in &mut self.cpufreq {
            match file.read_u64(buf) {
                Ok(khz) => emit(*cpu, khz as f64 / 1000.0),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        for &(cpu, mhz) in self.nominal.iter().flatten() {
            emit(cpu, mhz);
        }
        if let Some(file) = &mut self.cpuinfo {
            match file.read(buf) {
                Ok(()) => {
                    let wanted = &self.cpuinfo_cpus;
                    parse_cpuinfo_mhz(&String::from_utf8_lossy(buf), |cpu, mhz| {
                        if wanted.binary_search(&cpu).is_ok() {
                            emit(cpu, mhz);
                        }
                    });
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Parse `/proc/cpuinfo`, calling `emit(processor, mhz)` for each processor with a
/// `cpu MHz` line (x86; other architectures have none).
pub fn parse_cpuinfo_mhz(text: &str, mut emit: impl FnMut(usize, f64)) {
    let mut processor = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim_end() {
            "processor" => processor = value.trim().parse::<usize>().ok(),
            "cpu MHz" => {
                if let (Some(cpu), Ok(mhz)) = (processor, value.trim().parse::<f64>())
                    && mhz.is_finite()
                    && mhz >= 0.0
                {
                    emit(cpu, mhz);
                }
            }
            _ => {}
        }
    }
}

/// Whether `/proc/cpuinfo`'s `cpu MHz` is the nominal constant: an x86 CPU (a `flags` line)
/// without `aperfmperf` among its flags.
pub fn mhz_is_nominal(text: &str) -> bool {
    text.lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim_end() == "flags")
                .then(|| !value.split_whitespace().any(|f| f == "aperfmperf"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_mhz_is_read_per_processor() {
        let text = "processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: 2596.146\n\n\
                    processor\t: 1\ncpu MHz\t\t: 800.000\n\nprocessor\t: 2\n";
        let mut got = Vec::new();
        parse_cpuinfo_mhz(text, |c, m| got.push((c, m)));
        assert_eq!(got, vec![(0, 2596.146), (1, 800.0)]);
    }

    #[test]
    fn cpu_mhz_is_nominal_only_on_x86_without_aperfmperf() {
        let guest =
            "processor\t: 0\nflags\t\t: fpu tsc constant_tsc hypervisor\ncpu MHz\t: 2596.1\n";
        let metal =
            "processor\t: 0\nflags\t\t: fpu tsc constant_tsc aperfmperf\ncpu MHz\t: 801.2\n";
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n";
        assert!(mhz_is_nominal(guest));
        assert!(!mhz_is_nominal(metal));
        assert!(!mhz_is_nominal(arm));
    }

    #[test]
    fn a_nominal_frequency_is_read_once_and_a_measured_one_every_poll() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        let cpuinfo = dir.path().join("proc/cpuinfo");
        let write = |flags: &str, mhz: f64| {
            let block =
                |cpu| format!("processor\t: {cpu}\nflags\t\t: {flags}\ncpu MHz\t\t: {mhz:.3}\n\n");
            std::fs::write(&cpuinfo, format!("{}{}", block(0), block(1))).unwrap();
        };
        let read = |reader: &mut FreqReader| {
            let mut got = Vec::new();
            reader
                .read(&mut Vec::new(), |c, m| got.push((c, m)))
                .unwrap();
            got
        };
        for (flags, measured) in [("fpu tsc hypervisor", false), ("fpu tsc aperfmperf", true)] {
            write(flags, 2000.0);
            let mut reader = FreqReader::new(&root, &[0, 1], false).unwrap();
            assert_eq!(reader.is_nominal(), !measured, "{flags}");
            assert_eq!(read(&mut reader), vec![(0, 2000.0), (1, 2000.0)]);
            write(flags, 1200.0);
            let want = if measured { 1200.0 } else { 2000.0 };
            assert_eq!(read(&mut reader), vec![(0, want), (1, want)], "{flags}");
        }
    }

    #[test]
    fn cpuinfo_without_mhz_gives_nothing() {
        let text = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n";
        let mut got = Vec::new();
        parse_cpuinfo_mhz(text, |c, m| got.push((c, m)));
        assert!(got.is_empty());
    }
}
