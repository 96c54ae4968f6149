//! Switching the cpufreq governor for a sweep, and putting every CPU back afterwards.
//!
//! Writes `cpuN/cpufreq/scaling_governor` (root only). The guard restores the original
//! governors when dropped, so an error or Ctrl-C mid-sweep leaves the machine as it was.

use std::path::PathBuf;
use wattson_collectors::source::channel;

use super::SweepError;
use wattson_collectors::SysRoot;

/// The original governor of each CPU, restored on drop.
#[derive(Debug)]
pub struct GovernorGuard {
    original: Vec<(PathBuf, String)>,
}

fn governor_files(root: &SysRoot) -> Vec<PathBuf> {
    let dir = root.sys_path("devices/system/cpu");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            // sysfs names the cores as the CPU channels do: `cpuN`.
            channel::core_number(&n).is_some()
        })
        .map(|e| e.path().join("cpufreq/scaling_governor"))
        .filter(|p| p.exists())
        .collect();
    files.sort();
    files
}

/// The governors this machine offers.
pub fn available(root: &SysRoot) -> Vec<String> {
    std::fs::read_to_string(
        root.sys_path("devices/system/cpu/cpu0/cpufreq/scaling_available_governors"),
    )
    .map(|s| s.split_whitespace().map(str::to_owned).collect())
    .unwrap_or_default()
}

impl GovernorGuard {
    /// Remember every CPU's governor.
    pub fn capture(root: &SysRoot) -> Result<GovernorGuard, SweepError> {
        let files = governor_files(root);
        if files.is_empty() {
            return Err(SweepError::NoGovernors {
                dir: root.sys_path("devices/system/cpu"),
            });
        }
        let original = files
            .into_iter()
            .map(|p| {
                let g = std::fs::read_to_string(&p).map_err(|source| SweepError::ReadGovernor {
                    path: p.clone(),
                    source,
                })?;
                Ok((p, g.trim().to_owned()))
            })
            .collect::<Result<_, SweepError>>()?;
        Ok(GovernorGuard { original })
    }

    /// Set `governor` on every CPU.
    pub fn set(&self, governor: &str) -> Result<(), SweepError> {
        for (p, _) in &self.original {
            std::fs::write(p, governor).map_err(|source| SweepError::SetGovernor {
                governor: governor.to_owned(),
                path: p.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Put every CPU's governor back.
    pub fn restore(&self) {
        for (p, g) in &self.original {
            if let Err(e) = std::fs::write(p, g) {
                tracing::error!(
                    "could not restore governor {g:?} in {}: {}",
                    p.display(),
                    wattson_collectors::ErrorChain(&e)
                );
            }
        }
    }
}

impl Drop for GovernorGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_and_restores_every_cpu() {
        let dir = tempfile::tempdir().unwrap();
        for (cpu, g) in [(0, "powersave"), (1, "schedutil")] {
            let d = dir
                .path()
                .join(format!("devices/system/cpu/cpu{cpu}/cpufreq"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("scaling_governor"), format!("{g}\n")).unwrap();
        }
        let root = SysRoot::new(dir.path(), dir.path());
        let read = |cpu: usize| {
            std::fs::read_to_string(dir.path().join(format!(
                "devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
            )))
            .unwrap()
        };
        {
            let guard = GovernorGuard::capture(&root).unwrap();
            guard.set("performance").unwrap();
            assert_eq!(read(0), "performance");
            assert_eq!(read(1), "performance");
        }
        assert_eq!(read(0), "powersave");
        assert_eq!(read(1), "schedutil");
    }

    #[test]
    fn no_cpufreq_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = GovernorGuard::capture(&SysRoot::new(dir.path(), dir.path())).unwrap_err();
        assert!(err.to_string().contains("no cpufreq governors"), "{err}");
    }
}
